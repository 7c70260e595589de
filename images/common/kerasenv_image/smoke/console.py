"""The one way the smoke training talks to the user while it runs: `[smoke]` lines on stderr."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(f"[smoke] {message}", file=sys.stderr, flush=True)

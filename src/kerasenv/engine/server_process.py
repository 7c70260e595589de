"""A throwaway server process (the local registry, a containerd of our own): started so that
it can be stopped, and stopped for sure."""

from __future__ import annotations

import signal
import subprocess


def _default_signals() -> None:
    # A shell's background job starts with SIGINT/SIGTERM ignored, and the child would
    # inherit that: stop() below must be able to end it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start(argv: list[str], log=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=log, stderr=log, preexec_fn=_default_signals)


def stop(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

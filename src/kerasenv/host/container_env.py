"""The environment a variant's container needs on this host's shape, added to the user's
(`kerasenv run`, `smoke`, `shell` and `lab`: run/session's `Upstream.host_env`).

Which settings exist and why is shape_checks.SETTINGS (the doctor's WARN names the same ones):
today JAX >= 0.11 on WSL2 gets XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async, since its default
allocator fails every single allocation of 4 GiB or more there (openxla/xla#48979, open). WSL2
is read the doctor's way (host/wsl.py: the kernel's `microsoft-standard-WSL2`, /dev/dxg) from
`root`, a recorded host tree in tests. A value the user passed (`-e KEY=VALUE`) wins.
"""

from __future__ import annotations

import os

from ..matrix.schema import Variant
from . import shape_checks
from . import wsl as wsl_mod


def apply(v: Variant, env: dict[str, str], say=lambda message: None, root: str | os.PathLike = "/") -> dict[str, str]:
    """`env` plus what `v` needs on this host shape (a new dict; `env` is left as it is). Each
    setting added is said in one line; one the user set already is left to them, silently."""
    found = shape_checks.setting(v, wsl_mod.detect(root))
    if found is None or found.key in env:
        return dict(env)
    say(f"kerasenv: WSL2: {found.assignment} for {v.framework_label} ({found.short_report})")
    return {**env, found.key: found.value}

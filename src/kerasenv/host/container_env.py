"""The environment a variant's container needs on this host's shape, added to the user's
(`kerasenv run`, `smoke`, `shell` and `lab`: run/session's `Upstream.host_env`).

Which settings exist and why is shape_checks.SETTINGS (the doctor's WARN names the same ones):
JAX >= 0.11 on WSL2 gets XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async, since its default allocator
fails every single allocation of 4 GiB or more there (openxla/xla#48979, open); JAX on a
unified-memory GPU (GB10) gets XLA_PYTHON_CLIENT_MEM_FRACTION=0.5, since its 75 % preallocation
is the system RAM there (marin-community/marin#2142). WSL2 is read the doctor's way
(host/wsl.py: the kernel's `microsoft-standard-WSL2`, /dev/dxg) from `root`, a recorded host
tree in tests; the GPUs from nvidia-smi (host/facts.probe_nvidia, asked only for a variant a
GPU setting can apply to), or `nvidia` when given. A value the user passed (`-e KEY=VALUE`) wins.
"""

from __future__ import annotations

import os

from ..matrix.schema import Variant
from . import shape_checks
from . import wsl as wsl_mod
from .facts import probe_nvidia
from .nvidia_smi import HostGpus

# What `kerasenv run` says when it applies a setting, by shape: the shape and why.
SAID = {"wsl2": "WSL2",
        "unified-memory": "unified memory ({gpus} shares the system's RAM: JAX would preallocate 75 % of it)"}


def _needs_gpus(v: Variant) -> bool:
    """Whether a setting keyed on the GPUs (unified memory) could apply to `v` at all: only then
    is nvidia-smi asked."""
    return any(s.applies(v, "unified-memory") for s in shape_checks.SETTINGS)


def apply(v: Variant, env: dict[str, str], say=lambda message: None, root: str | os.PathLike = "/",
          nvidia: HostGpus | None = None) -> dict[str, str]:
    """`env` plus what `v` needs on this host's shapes (a new dict; `env` is left as it is). Each
    setting added is said in one line; one the user set already is left to them, silently."""
    if nvidia is None and _needs_gpus(v):
        nvidia = probe_nvidia()
    added = dict(env)
    for found in shape_checks.settings(v, wsl_mod.detect(root), nvidia):
        if found.key in added:
            continue
        gpus = ", ".join(g.name for g in (nvidia.gpus if nvidia else []) if g.unified_memory) or "GB10"
        say(f"kerasenv: {SAID[found.shape].format(gpus=gpus)}: {found.assignment} for {v.framework_label} "
            f"({found.short_report})")
        added[found.key] = found.value
    return added

"""How much disk a build needs on Docker's file system, and waiting for it.

A CUDA variant's build holds its Python environment twice for a while: once in the builder
stage that installed it, once in the image (until `--drop-build-cache` removes the builder
stages). Run out of disk half-way and Docker says only "no space left on device", from
somewhere deep in a layer commit or an export. So `kerasenv build` says beforehand when the
disk looks too small, in one line with the figures; with `--wait-for-disk S` (what `make
test`'s lanes use) it waits for the space instead, while other lanes drop the images they
are done with. The free space of a shared machine is not a constant: the CI machine's went
from 80 GB to 37 GB between two runs, and a run that did not wait filled it.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Callable

from ..matrix.schema import ARM64, Variant

GB = 1e9
# No budget in the matrix (ROCm, or a new entry without one): as much as the largest CUDA images.
DEFAULT_BUDGET_MB = 8500
# The base stages, pip's work files and the layer being committed, beyond the two copies.
MARGIN_BYTES = int(1.5 * GB)
POLL_S = 5.0


def build_need_bytes(v: Variant, platform: str, jupyter_added_mb: int | None = None) -> int:
    """About the most extra disk a build of this image takes at once: twice its size budget (the
    builder stage's environment and the image's copy of it) plus a margin; for the JupyterLab
    flavour (`jupyter_added_mb`: what its layer may add) twice that layer."""
    if jupyter_added_mb is not None:
        return int(2 * jupyter_added_mb * 1e6) + MARGIN_BYTES
    if platform == ARM64 and v.arm64 and v.arm64.size_budget_mb:
        budget = v.arm64.size_budget_mb
    else:
        budget = v.size_budget_mb or DEFAULT_BUDGET_MB
    return int(2 * budget * 1e6) + MARGIN_BYTES


def docker_root(client) -> str | None:
    """Docker's data directory on this machine, or None where it is not local (a remote
    DOCKER_HOST) or not readable from here."""
    try:
        root = client.info().get("DockerRootDir")
        if root:
            shutil.disk_usage(root)
        return root or None
    except Exception:  # noqa: BLE001 - a remote engine or a root we cannot stat: no check
        return None


# The containerd image store keeps each layer compressed as well as unpacked (issue 43): a cold
# build of tf2.21-cpu grew Docker 28.5.2's data root by 4.2 GB against 3.46 GB on Docker
# 20.10's overlay2 (1.21x), the image's compressed content being 0.31x its unpacked layers.
CONTAINERD_STORE_FACTOR = 1.3


def store_factor(client) -> float:
    """How much more disk a build takes on this engine's image store than build_need_bytes says
    (that figure is overlay2's): CONTAINERD_STORE_FACTOR on the containerd store, else 1."""
    from ..engine.engine_facts import CONTAINERD_SNAPSHOTTER

    try:
        rows = client.info().get("DriverStatus") or []
    except Exception:  # noqa: BLE001 - the build itself says what is wrong with the engine
        return 1.0
    containerd = any(len(r) == 2 and r[0] == "driver-type" and r[1] == CONTAINERD_SNAPSHOTTER for r in rows)
    return CONTAINERD_STORE_FACTOR if containerd else 1.0


def free_bytes(root: str) -> int:
    return shutil.disk_usage(root).free


def used_bytes(root: str) -> int:
    return shutil.disk_usage(root).used


def room_bytes(root: str, environ=os.environ) -> int:
    """What a build may take: the free bytes, and under KERASENV_DISK_CEILING (bytes used on that
    file system that no build may push past) no more than is left below it. `.ci/run` sets it to its
    starting figure plus the CI's disk budget: a build beside the other lanes waits for room rather
    than take the run's peak over its budget."""
    free = free_bytes(root)
    ceiling = environ.get("KERASENV_DISK_CEILING", "")
    if ceiling.isdigit():
        free = min(free, int(ceiling) - used_bytes(root))
    return free


def ensure_room(client, ref: str, need: int, wait_s: float, say: Callable[[str], None],
                clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                root: str | None = None) -> bool:
    """True when `need` bytes are free on Docker's file system (at once, or within `wait_s`
    seconds of polling). Otherwise one line saying what is short and what to do, and False:
    the build goes on (the figure is an upper estimate; layers already stored cost nothing)."""
    root = root or docker_root(client)
    if root is None:
        return True
    free = room_bytes(root)
    if free >= need:
        return True
    under = " under KERASENV_DISK_CEILING" if os.environ.get("KERASENV_DISK_CEILING", "").isdigit() else ""

    def short(after: str = "") -> str:
        return f"{ref} needs about {need / GB:.1f} GB free on Docker's disk ({root}), {free / GB:.1f} GB is{under}{after}"

    if wait_s > 0:
        say(f"kerasenv build: {short()}: waiting up to {wait_s:.0f} s for other builds' images to go")
        start = clock()
        while clock() - start < wait_s:
            sleep(POLL_S)
            free = room_bytes(root)
            if free >= need:
                say(f"kerasenv build: {ref}: {free / GB:.1f} GB free after {clock() - start:.0f} s, building")
                return True
    waited = f" after {wait_s:.0f} s" if wait_s > 0 else ""
    say(f"kerasenv build: warning: {short(waited)}: the build may fail with 'no space left on device'; "
        f"free some (`make clean-images`, `docker image prune`) or build fewer images at once")
    return False

"""Translate a `--gpus` value into docker SDK run arguments, per image family.

NVIDIA: a DeviceRequest, as `docker run --gpus` does (the NVIDIA Container Toolkit
serves it). ROCm: the /dev/kfd and /dev/dri device nodes, the GIDs that own them on this
host (by number, read by amd_devices) and seccomp unconfined, as AMD documents for
`docker run`. Devices and groups come from one place, so no path hands a ROCm container
its GPU without the groups that open it.
"""

from __future__ import annotations

import re

from ..errors import UsageError
from . import amd_devices

_DEVICE_RE = re.compile(r"^device=((?:[0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+)(?:,(?:[0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+))*)$")
HELP = "use all, a count like 2, device=0,1 or device=GPU-<uuid>, or none"


def parse(spec: str | None) -> tuple[str, int | list[str] | None]:
    """('none'|'all'|'count'|'devices', value). Raises UsageError on what Docker would reject."""
    if spec is None or spec.strip() in ("", "none"):
        return "none", None
    spec = spec.strip().strip("\"'")
    if spec == "all":
        return "all", None
    if spec.isdigit():
        if int(spec) < 1:
            raise UsageError(f"--gpus {spec}: a GPU count must be at least 1 ({HELP})")
        return "count", int(spec)
    match = _DEVICE_RE.match(spec)
    if match:
        return "devices", match.group(1).split(",")
    raise UsageError(f"--gpus {spec!r} is not a GPU request Docker accepts: {HELP}")


def run_kwargs(spec: str | None, family: str, amd: amd_devices.AmdHost | None = None) -> dict:
    """Keyword arguments for `client.containers.create` that give the container its GPUs.
    `amd`: the host's AMD device facts (default: read from this host, ROCm only)."""
    kind, value = parse(spec)
    if kind == "none" or family == "cpu":
        return {}
    if family == "rocm":
        return rocm_kwargs(kind, value, amd if amd is not None else amd_devices.scan())
    from docker.types import DeviceRequest

    if kind == "all":
        request = DeviceRequest(count=-1, capabilities=[["gpu"]])
    elif kind == "count":
        request = DeviceRequest(count=value, capabilities=[["gpu"]])
    else:
        request = DeviceRequest(device_ids=list(value), capabilities=[["gpu"]])
    return {"device_requests": [request]}


def rocm_kwargs(kind: str, value, amd: amd_devices.AmdHost) -> dict:
    """/dev/kfd and the render nodes (all of /dev/dri for `all`), the GIDs owning them, and
    seccomp unconfined."""
    if kind == "count":
        raise UsageError("--gpus N is NVIDIA-only; for ROCm use all or device=0,1")
    indexes = None
    if kind == "devices":
        if not all(str(v).isdigit() for v in value):
            raise UsageError("--gpus for ROCm takes indexes (device=0,1), not UUIDs")
        indexes = [int(v) for v in value]
        try:
            amd.render_nodes(indexes)
        except ValueError as exc:
            raise UsageError(f"--gpus {exc}: pick from those (`kerasenv doctor` lists them)") from None
    nodes = amd.handed_over(indexes)
    kfd = amd.kfd or amd_devices.Node(amd_devices.KFD, 0, 0, 0)  # missing: Docker says so, runner explains
    devices = [kfd] + [n for n in nodes if n.path != amd_devices.KFD]
    specs = [f"{n.source}:{n.path}:rwm" for n in devices]
    if indexes is None and not amd.dri:
        specs.append(f"{amd_devices.DRI}:{amd_devices.DRI}:rwm")  # nothing read: the whole folder
    elif indexes is not None:
        listed = {n.path for n in devices}
        specs += [f"{p}:{p}:rwm" for p in amd.render_nodes(indexes) if p not in listed]
    return {
        "devices": specs,
        # The GIDs that own /dev/kfd and the render nodes on this host (render: 993 on the host
        # of ROCm/ROCm-docker#116; each host has its own), by number: our containers run as the
        # user's UID, and a name would be looked up in the image's /etc/group.
        "group_add": [str(g) for g in amd.gids(indexes)],
        # AMD documents seccomp=unconfined for ROCm containers ("enables memory mapping",
        # rocm.docs.amd.com, Running ROCm Docker containers).
        "security_opt": ["seccomp=unconfined"],
    }

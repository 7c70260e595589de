"""Translate a `--gpus` value into docker SDK run arguments, per image family.

NVIDIA: a DeviceRequest, as `docker run --gpus` does (the NVIDIA Container Toolkit
serves it). ROCm: the /dev/kfd and /dev/dri device nodes plus the video group, as
AMD documents for `docker run`.
"""

from __future__ import annotations

import re

from ..errors import UsageError

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


def run_kwargs(spec: str | None, family: str) -> dict:
    """Keyword arguments for `client.containers.create` that give the container its GPUs."""
    kind, value = parse(spec)
    if kind == "none" or family == "cpu":
        return {}
    if family == "rocm":
        devices = ["/dev/kfd:/dev/kfd:rwm"]
        if kind == "devices":
            if not all(str(v).isdigit() for v in value):
                raise UsageError("--gpus for ROCm takes indexes (device=0,1), not UUIDs")
            devices += [f"/dev/dri/renderD{128 + int(i)}:/dev/dri/renderD{128 + int(i)}:rwm" for i in value]
        elif kind == "count":
            raise UsageError("--gpus N is NVIDIA-only; for ROCm use all or device=0,1")
        else:
            devices.append("/dev/dri:/dev/dri:rwm")
        return {"devices": devices, "group_add": ["video"]}
    from docker.types import DeviceRequest

    if kind == "all":
        request = DeviceRequest(count=-1, capabilities=[["gpu"]])
    elif kind == "count":
        request = DeviceRequest(count=value, capabilities=[["gpu"]])
    else:
        request = DeviceRequest(device_ids=list(value), capabilities=[["gpu"]])
    return {"device_requests": [request]}

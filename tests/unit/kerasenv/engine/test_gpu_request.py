"""--gpus values: what Docker accepts becomes a DeviceRequest (NVIDIA) or devices (ROCm)."""

from __future__ import annotations

import pytest

from kerasenv.engine import gpu_request
from kerasenv.errors import UsageError


@pytest.mark.parametrize("spec, count, ids", [
    ("all", -1, None), ("2", 2, None), ("device=0,1", 0, ["0", "1"]),
    ('"device=1"', 0, ["1"]), ("device=GPU-18a3e86f-0000-0000-0000-000000000000", 0,
                               ["GPU-18a3e86f-0000-0000-0000-000000000000"]),
])
def test_nvidia_specs_become_device_requests(spec, count, ids):
    request = gpu_request.run_kwargs(spec, "cuda")["device_requests"][0]
    assert request["Capabilities"] == [["gpu"]]
    assert request["Count"] == count
    assert (request["DeviceIDs"] or None) == ids


@pytest.mark.parametrize("spec", ["0", "-1", "two", "device=", "device=0,,1", "gpus=all", "all,capabilities"])
def test_specs_docker_would_reject_are_usage_errors(spec):
    with pytest.raises(UsageError, match="GPU"):
        gpu_request.run_kwargs(spec, "cuda")


def test_none_and_cpu_images_get_no_gpu():
    assert gpu_request.run_kwargs("none", "cuda") == {}
    assert gpu_request.run_kwargs("all", "cpu") == {}


def test_rocm_gets_kfd_dri_and_the_video_group():
    kwargs = gpu_request.run_kwargs("all", "rocm")
    assert kwargs == {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"], "group_add": ["video"]}
    assert gpu_request.run_kwargs("device=1", "rocm")["devices"][1].startswith("/dev/dri/renderD129")

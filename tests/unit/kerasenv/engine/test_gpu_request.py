"""--gpus values: what Docker accepts becomes a DeviceRequest (NVIDIA) or devices (ROCm)."""

from __future__ import annotations

import pytest

from kerasenv.engine import amd_devices, gpu_request
from kerasenv.errors import UsageError

from ...conftest import REPO


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


AMD_HOSTS = REPO / "tests" / "fixtures" / "amd-hosts"


def amd(name: str) -> amd_devices.AmdHost:
    """A recorded AMD host shape (simulated: tests/fixtures/amd-hosts/<name>/README.md)."""
    return amd_devices.load_record(AMD_HOSTS / name / "host.json")


def test_rocm_all_gets_kfd_every_dri_node_their_gids_by_number_and_seccomp_unconfined():
    kwargs = gpu_request.run_kwargs("all", "rocm", amd("ubuntu-render-993"))
    assert kwargs == {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/card0:/dev/dri/card0:rwm",
                                  "/dev/dri/renderD128:/dev/dri/renderD128:rwm"],
                      "group_add": ["44", "993"],  # video (card0), render (kfd, renderD128: ROCm-docker#116)
                      "security_opt": ["seccomp=unconfined"]}


def test_rocm_device_selection_maps_to_rocms_render_nodes_and_only_their_groups():
    kwargs = gpu_request.run_kwargs("device=1", "rocm", amd("igpu-first-two-amd"))
    assert kwargs["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD130:/dev/dri/renderD130:rwm"]
    assert kwargs["group_add"] == ["110"]
    assert gpu_request.run_kwargs("device=0", "rocm", amd("igpu-first-two-amd"))["devices"][1].startswith(
        "/dev/dri/renderD129:")  # not renderD128, the integrated GPU's


def test_rocm_errors_name_the_cause_and_the_fix():
    with pytest.raises(UsageError, match=r"--gpus device=2: this host's AMD GPUs are 0=renderD129, 1=renderD130"):
        gpu_request.run_kwargs("device=2", "rocm", amd("igpu-first-two-amd"))
    with pytest.raises(UsageError, match="NVIDIA-only; for ROCm use all or device=0,1"):
        gpu_request.run_kwargs("2", "rocm", amd("ubuntu-render-993"))
    with pytest.raises(UsageError, match="indexes"):
        gpu_request.run_kwargs("device=GPU-18a3e86f-0000", "rocm", amd("ubuntu-render-993"))


def test_rocm_on_a_host_without_amd_nodes_asks_for_the_documented_paths_and_adds_no_group():
    """Docker then refuses the missing nodes, and runner explains it (`kerasenv doctor`)."""
    kwargs = gpu_request.run_kwargs("all", "rocm", amd_devices.AmdHost())
    assert kwargs == {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"], "group_add": [],
                      "security_opt": ["seccomp=unconfined"]}
    assert gpu_request.run_kwargs("device=1", "rocm", amd_devices.AmdHost())["devices"][1].startswith(
        "/dev/dri/renderD129")


def test_rocm_reads_this_host_when_no_facts_are_given(monkeypatch):
    monkeypatch.setattr(amd_devices, "scan", lambda root="/": amd("ubuntu-render-993"))
    assert gpu_request.run_kwargs("all", "rocm")["group_add"] == ["44", "993"]
    assert gpu_request.run_kwargs("all", "cuda").keys() == {"device_requests"}  # NVIDIA: no scan needed

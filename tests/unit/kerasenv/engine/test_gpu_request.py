"""--gpus values: parsed once, then resolved for the engine: a DeviceRequest for NVIDIA's runtime
hook or for CDI, devices and groups for ROCm, a one-line refusal where the engine would drop
the request or the host cannot honour it (Podman, WSL2, MIG)."""

from __future__ import annotations

import pytest

from kerasenv.engine import amd_devices, gpu_request
from kerasenv.engine.cdi import CdiDevices
from kerasenv.engine.engine_facts import Engine
from kerasenv.errors import UsageError

from ...conftest import REPO


@pytest.mark.parametrize("spec, count, ids", [
    ("all", -1, None), ("2", 2, None), ("device=0,1", 0, ["0", "1"]),
    ('"device=1"', 0, ["1"]), ("device=GPU-18a3e86f-0000-0000-0000-000000000000", 0,
                               ["GPU-18a3e86f-0000-0000-0000-000000000000"]),
])
def test_nvidia_specs_become_device_requests(spec, count, ids):
    request = gpu_request.resolve(spec, "cuda").kwargs["device_requests"][0]
    assert request["Capabilities"] == [["gpu"]]
    assert request["Count"] == count
    assert (request["DeviceIDs"] or None) == ids


@pytest.mark.parametrize("spec", ["0", "-1", "two", "device=", "device=0,,1", "gpus=all", "all,capabilities",
                                  "MIG", "0:", "device=GPU-"])
def test_specs_docker_would_reject_are_usage_errors(spec):
    with pytest.raises(UsageError, match="GPU"):
        gpu_request.parse(spec)


def test_none_and_cpu_images_get_no_gpu():
    assert gpu_request.resolve("none", "cuda").kwargs == {}
    assert gpu_request.resolve("all", "cpu").kwargs == {} and gpu_request.resolve("all", "cpu").route == "none"


@pytest.mark.parametrize("spec, devices", [
    ("0,1", ("0", "1")), ("0:1", ("0:1",)), ("device=0:0,0:1", ("0:0", "0:1")),
    ("MIG-d771d938-b556-4f9d-b742-2dd26b864023", ("MIG-d771d938-b556-4f9d-b742-2dd26b864023",)),
    ("GPU-4101de38-535a-4255-ac14-a63e072d7a10", ("GPU-4101de38-535a-4255-ac14-a63e072d7a10",)),
])
def test_index_lists_uuids_mig_uuids_and_n_colon_m_are_device_selections(spec, devices):
    parsed = gpu_request.parse(spec)
    assert parsed.kind == "devices" and parsed.devices == devices
    assert gpu_request.parse("2").kind == "count"  # a bare number stays a count, as in `docker run --gpus 2`
    assert gpu_request.parse(parsed) is parsed  # parsed once: a GpuSpec passes through


# --- engines: Docker's hook, Docker's CDI, Podman -------------------------------------------

NVIDIA_CDI = CdiDevices(("nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"), ("/etc/cdi/nvidia.yaml",))
DOCKER_20 = Engine("docker", "20.10.24+dfsg1")
DOCKER_28 = Engine("docker", "28.3.0", cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"), cdi_reported=True)
PODMAN_43 = Engine("podman", "4.3.1")
PODMAN_54 = Engine("podman", "5.4.0")


def test_docker_with_cdi_on_and_an_nvidia_spec_gets_the_cdi_request():
    access = gpu_request.resolve("all", "cuda", engine=DOCKER_28, host=gpu_request.HostGpus(cdi=NVIDIA_CDI))
    assert access.route == "cdi"
    assert access.kwargs["device_requests"] == [
        {"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=all"], "Capabilities": [], "Options": {}}]
    two = gpu_request.resolve("2", "cuda", engine=DOCKER_28, host=gpu_request.HostGpus(cdi=NVIDIA_CDI))
    assert two.kwargs["device_requests"][0]["DeviceIDs"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]


def test_docker_without_cdi_or_without_a_spec_uses_the_runtime_hook():
    for engine, cdi in ((DOCKER_20, NVIDIA_CDI), (DOCKER_28, CdiDevices())):
        access = gpu_request.resolve("all", "cuda", engine=engine, host=gpu_request.HostGpus(cdi=cdi))
        assert access.route == "nvidia-hook"
        assert access.kwargs["device_requests"][0]["Capabilities"] == [["gpu"]]


def test_a_uuid_is_mapped_to_an_index_named_cdi_device_through_what_the_doctor_saw():
    host = gpu_request.HostGpus(indexes=(0, 1), uuids={0: "GPU-aaaa", 1: "GPU-bbbb"}, cdi=NVIDIA_CDI)
    access = gpu_request.resolve("GPU-bbbb", "cuda", engine=DOCKER_28, host=host)
    assert access.kwargs["device_requests"][0]["DeviceIDs"] == ["nvidia.com/gpu=1"]


def test_podman_before_5_4_refuses_a_gpu_request_in_one_line_naming_both_fixes():
    with pytest.raises(UsageError) as refused:
        gpu_request.resolve("all", "cuda", engine=PODMAN_43, host=gpu_request.HostGpus(cdi=NVIDIA_CDI))
    line = refused.value.message
    assert "\n" not in line and "Podman 4.3.1" in line and "containers/podman#22645" in line
    assert "Podman >= 5.4 with a CDI spec" in line and "NVIDIA Container Toolkit" in line
    assert "--gpus none" in line  # the CPU on purpose


def test_podman_5_4_takes_cdi_requests_and_refuses_without_a_spec():
    access = gpu_request.resolve("all", "cuda", engine=PODMAN_54, host=gpu_request.HostGpus(cdi=NVIDIA_CDI))
    assert access.route == "cdi" and access.kwargs["device_requests"][0]["Driver"] == "cdi"
    with pytest.raises(UsageError, match=r"no NVIDIA CDI spec naming them \(in /etc/cdi, /var/run/cdi; "
                                         r"KERASENV_CDI_SPEC_DIRS=DIR:DIR names Podman's cdi_spec_dirs when they are "
                                         r"others\); generate one: `sudo nvidia-ctk cdi"):
        gpu_request.resolve("all", "cuda", engine=PODMAN_54, host=gpu_request.HostGpus())


def test_podman_runs_cpu_images_and_none_requests():
    assert gpu_request.resolve("all", "cpu", engine=PODMAN_43).route == "none"
    assert gpu_request.resolve("none", "cuda", engine=PODMAN_43).route == "none"


# --- host shapes: WSL2, MIG ------------------------------------------------------------------

A100_MIG = gpu_request.HostGpus(
    indexes=(0,), uuids={0: "GPU-4101de38-535a-4255-ac14-a63e072d7a10"}, mig_enabled=(0,),
    mig=(gpu_request.MigDevice(0, 0, "MIG-d771d938-b556-4f9d-b742-2dd26b864023", "3g.40gb"),
         gpu_request.MigDevice(0, 1, "MIG-08bce7f3-bac7-4715-b56f-91541f15fe37", "2g.20gb")))


def test_wsl2_takes_all_gpus_only():
    wsl = gpu_request.HostGpus(indexes=(0,), wsl=True)
    assert gpu_request.resolve("all", "cuda", host=wsl).route == "nvidia-hook"
    for spec in ("device=0", "1"):
        with pytest.raises(UsageError, match="under WSL2 a container gets every GPU or none .* use --gpus all"):
            gpu_request.resolve(spec, "cuda", host=wsl)


def test_a_mig_slice_is_selected_by_n_colon_m_or_its_uuid():
    for spec in ("0:1", "MIG-08bce7f3-bac7-4715-b56f-91541f15fe37"):
        access = gpu_request.resolve(spec, "cuda", host=A100_MIG)
        assert access.kwargs["device_requests"][0]["DeviceIDs"] == [spec]


def test_a_whole_card_in_mig_mode_or_an_absent_slice_is_refused_naming_the_slices():
    with pytest.raises(UsageError, match=r"GPU 0 is in MIG mode.*pick slices: 0:0 \(3g.40gb\), 0:1 \(2g.20gb\)"):
        gpu_request.resolve("device=0", "cuda", host=A100_MIG)
    with pytest.raises(UsageError, match=r"no MIG device 0:2 on this host; its MIG devices: 0:0 = MIG-d771"):
        gpu_request.resolve("0:2", "cuda", host=A100_MIG)
    with pytest.raises(UsageError, match=r"this host has GPU index\(es\) 0, not 3"):
        gpu_request.resolve("device=3", "cuda", host=A100_MIG)
    with pytest.raises(UsageError, match="no GPU GPU-ffff"):
        gpu_request.resolve("GPU-ffff", "cuda", host=A100_MIG)


def test_each_worker_gets_one_device_or_none():
    specs = gpu_request.per_worker(gpu_request.parse("device=0:0,0:1"), 2)
    assert [s.devices for s in specs] == [("0:0",), ("0:1",)]
    assert gpu_request.per_worker(gpu_request.parse("none"), 3) == [gpu_request.parse("none")] * 3
    for spec in ("all", "device=0", "2"):
        with pytest.raises(UsageError, match="give each of the 2 workers its own GPU or MIG slice"):
            gpu_request.per_worker(gpu_request.parse(spec), 2)


@pytest.mark.parametrize("text, words", [
    ("OCI runtime create failed: nvidia-container-cli: mount error: bpf_prog_query(BPF_CGROUP_DEVICE) failed: "
     "operation not permitted: unknown", "no-cgroups"),
    ("failed to write a *:* rwm to devices.allow: permission denied", "no-cgroups"),
    ('could not select device driver "" with capabilities: [[gpu]]', "NVIDIA Container Toolkit"),
    ("unresolvable CDI devices nvidia.com/gpu=all", "regenerate it"),
])
def test_start_errors_map_to_one_line_fixes(text, words):
    line = gpu_request.explain_start_error(text, gpu_request.resolve("all", "cuda"))
    assert line is not None and words in line and "\n" not in line
    assert gpu_request.explain_start_error("no space left on device", gpu_request.resolve("all", "cuda")) is None


def test_a_cdi_request_on_a_docker_without_cdi_names_how_to_turn_it_on():
    access = gpu_request.resolve("all", "cuda", engine=DOCKER_28, host=gpu_request.HostGpus(cdi=NVIDIA_CDI))
    line = gpu_request.explain_start_error('could not select device driver "cdi" with capabilities: []', access)
    assert '"features": {"cdi": true}' in line and "28.2" in line


AMD_HOSTS = REPO / "tests" / "fixtures" / "amd-hosts"


def amd(name: str) -> amd_devices.AmdHost:
    """A recorded AMD host shape (simulated: tests/fixtures/amd-hosts/<name>/README.md)."""
    return amd_devices.load_record(AMD_HOSTS / name / "host.json")


def test_rocm_all_gets_kfd_every_dri_node_their_gids_by_number_and_seccomp_unconfined():
    kwargs = gpu_request.resolve("all", "rocm", amd=amd("ubuntu-render-993")).kwargs
    assert kwargs == {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/card0:/dev/dri/card0:rwm",
                                  "/dev/dri/renderD128:/dev/dri/renderD128:rwm"],
                      "group_add": ["44", "993"],  # video (card0), render (kfd, renderD128: ROCm-docker#116)
                      "security_opt": ["seccomp=unconfined"]}


def test_rocm_device_selection_maps_to_rocms_render_nodes_and_only_their_groups():
    kwargs = gpu_request.resolve("device=1", "rocm", amd=amd("igpu-first-two-amd")).kwargs
    assert kwargs["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD130:/dev/dri/renderD130:rwm"]
    assert kwargs["group_add"] == ["110"]
    assert gpu_request.resolve("device=0", "rocm", amd=amd("igpu-first-two-amd")).kwargs["devices"][1].startswith(
        "/dev/dri/renderD129:")  # not renderD128, the integrated GPU's


def test_rocm_errors_name_the_cause_and_the_fix():
    with pytest.raises(UsageError, match=r"--gpus device=2: this host's AMD GPUs are 0=renderD129, 1=renderD130"):
        gpu_request.resolve("device=2", "rocm", amd=amd("igpu-first-two-amd"))
    with pytest.raises(UsageError, match="NVIDIA-only; for ROCm use all or device=0,1"):
        gpu_request.resolve("2", "rocm", amd=amd("ubuntu-render-993"))
    with pytest.raises(UsageError, match="indexes"):
        gpu_request.resolve("device=GPU-18a3e86f-0000", "rocm", amd=amd("ubuntu-render-993"))


def test_rocm_on_a_host_without_amd_nodes_asks_for_the_documented_paths_and_adds_no_group():
    """Docker then refuses the missing nodes, and runner explains it (`kerasenv doctor`)."""
    kwargs = gpu_request.resolve("all", "rocm", amd=amd_devices.AmdHost()).kwargs
    assert kwargs == {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"], "group_add": [],
                      "security_opt": ["seccomp=unconfined"]}
    assert gpu_request.resolve("device=1", "rocm", amd=amd_devices.AmdHost()).kwargs["devices"][1].startswith(
        "/dev/dri/renderD129")


def test_rocm_reads_this_host_when_no_facts_are_given(monkeypatch):
    monkeypatch.setattr(amd_devices, "scan", lambda root="/": amd("ubuntu-render-993"))
    assert gpu_request.resolve("all", "rocm").kwargs["group_add"] == ["44", "993"]
    assert gpu_request.resolve("all", "cuda").kwargs.keys() == {"device_requests"}  # NVIDIA: no scan needed

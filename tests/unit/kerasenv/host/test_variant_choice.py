"""Which variant a command runs: the one named, doctor's pick (`run/smoke auto`), or the
bench's default GPU / CPU image, from recorded nvidia-smi outputs."""

from __future__ import annotations

import pytest

from kerasenv.engine import amd_devices, docker_gpus
from kerasenv.host import doctor
from kerasenv.host import nvidia_smi
from kerasenv.host import variant_choice as variants
from kerasenv.errors import UsageError

from ...conftest import REPO

FAKE_SMI = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")
AMD_HOSTS = REPO / "tests" / "fixtures" / "amd-hosts"


def recorded_host(monkeypatch, scenario: str) -> nvidia_smi.HostGpus:
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", scenario)
    return doctor.probe_nvidia(FAKE_SMI)


def test_a_named_variant_is_that_one_and_no_name_leaves_it_to_the_host(real_matrix):
    assert variants.named(real_matrix, "tf2.21-cpu") is real_matrix.get("tf2.21-cpu")
    assert variants.named(real_matrix, None) is None


def test_an_unknown_name_is_a_usage_error_listing_the_ids(real_matrix):
    with pytest.raises(UsageError) as exc:
        variants.named(real_matrix, "tf9.9-cpu")
    assert "'tf9.9-cpu'" in exc.value.message and real_matrix.default_gpu in exc.value.message
    with pytest.raises(UsageError):
        variants.named(real_matrix, variants.AUTO)  # `auto` is the CLI's word, not an id


def test_the_bench_default_is_the_gpu_image_when_the_host_and_docker_can_give_gpus(monkeypatch, real_matrix):
    gpus = recorded_host(monkeypatch, "multi-gpu")
    assert variants.default_for_gpus(real_matrix, "auto", gpus, True).id == real_matrix.default_gpu
    assert variants.default_for_gpus(real_matrix, "all", gpus, True).id == real_matrix.default_gpu
    assert variants.default_for_gpus(real_matrix, [1], gpus, True).id == real_matrix.default_gpu


def test_the_bench_default_is_the_cpu_image_without_gpus_or_when_none_are_wanted(monkeypatch, real_matrix):
    gpus = recorded_host(monkeypatch, "multi-gpu")
    assert variants.default_for_gpus(real_matrix, "auto", gpus, False).id == real_matrix.default_cpu
    assert variants.default_for_gpus(real_matrix, "none", gpus, True).id == real_matrix.default_cpu
    no_driver = recorded_host(monkeypatch, "no-driver")
    assert variants.default_for_gpus(real_matrix, "auto", no_driver, True).id == real_matrix.default_cpu
    assert variants.default_for_gpus(real_matrix, "auto", nvidia_smi.HostGpus(present=False), True).id \
        == real_matrix.default_cpu


def test_gpus_asked_for_by_name_pick_the_gpu_image_even_without_gpus(monkeypatch, real_matrix):
    """So that bench.plan_devices says why there are none, instead of benchmarking the CPU image."""
    no_driver = recorded_host(monkeypatch, "no-driver")
    assert variants.default_for_gpus(real_matrix, "all", no_driver, False).id == real_matrix.default_gpu
    assert variants.default_for_gpus(real_matrix, [0], no_driver, False).id == real_matrix.default_gpu


def _a100() -> nvidia_smi.HostGpus:
    gpu = nvidia_smi.Gpu(index=0, name="NVIDIA A100-SXM4-40GB", compute_capability="8.0",
                         compute_capability_source="nvidia-smi", memory_mib=40960)
    return nvidia_smi.HostGpus(present=True, driver_version="580.65.06", cuda_version="13.0", gpus=[gpu])


@pytest.mark.parametrize("facts, expected", [
    (doctor.HostFacts(nvidia=_a100(), docker_gpus=docker_gpus.Answer(True, "Docker started a container")),
     "default_gpu"),
    (doctor.HostFacts(nvidia=_a100(), docker_gpus=docker_gpus.Answer(False, "Docker refused --gpus all")),
     "default_cpu"),
    (doctor.HostFacts(nvidia=nvidia_smi.HostGpus(present=False)), "default_cpu"),
    (doctor.HostFacts(nvidia=nvidia_smi.HostGpus(present=False), amd=amd_devices.load_record(AMD_HOSTS / "ubuntu-render-993" / "host.json")),
     "default_rocm"),
])
def test_auto_is_doctors_recommendation_with_its_reason(facts, expected, monkeypatch, real_matrix):
    client = object()
    asked = []
    monkeypatch.setattr(doctor, "gather", lambda factory: asked.append(factory()) or facts)
    v, reason = variants.recommended(real_matrix, client)
    assert asked == [client]  # doctor asks the client the command will run with
    assert v.id == getattr(real_matrix, expected)
    assert reason == doctor.judge(facts, real_matrix).reason


@pytest.mark.parametrize("scenario, expected", [
    # Blackwell below R580: the JAX image has native kernels there (TF's only PTX, PyTorch's CUDA 13.2 needs 580).
    ("rtx5090-572", "jax0.12-cuda12.9"), ("b200-575", "jax0.12-cuda12.9"),
    # Ampere on 535: every CUDA 12 image passes, so the default GPU image.
    ("a100-535", "tf2.21-cuda12.9"),
    # Hopper on 580, captured on the lent H200 machine: TF's sm_90 SASS, so the default GPU image.
    ("h200-580", "tf2.21-cuda12.9"),
])
def test_auto_follows_doctors_pick_on_recorded_hosts(scenario, expected, monkeypatch, real_matrix):
    facts = doctor.HostFacts(nvidia=recorded_host(monkeypatch, scenario),
                             docker_gpus=docker_gpus.Answer(True, "Docker started a container"))
    monkeypatch.setattr(doctor, "gather", lambda factory: facts)
    v, reason = variants.recommended(real_matrix, object())
    assert v.id == expected == doctor.judge(facts, real_matrix).recommended
    assert reason == "a usable NVIDIA GPU and the container toolkit"

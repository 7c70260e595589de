"""Blackwell GPUs (compute capability 10.x / 12.x): honest per-variant verdicts, and the
in-image tools (smoke, bench) follow the same rule: XLA off where TF's XLA cannot target it
(the smoke's and the bench's own cases: tests/unit/kerasenv_image/)."""

from __future__ import annotations

import pytest

from kerasenv.host import blackwell
from kerasenv.host import doctor
from kerasenv.host.doctor import FAIL, PASS, WARN
from kerasenv.host.nvidia_smi import Gpu, HostGpus
from kerasenv_image.bench import capabilities as bench_capabilities
from kerasenv_image.smoke import compile_options as smoke_compile_options

from ...conftest import REPO


def host(name: str, cc: str, driver: str = "575.57.08") -> doctor.HostFacts:
    nvidia = HostGpus(present=True, driver_version=driver, cuda_version="12.9",
                      gpus=[Gpu(index=0, name=name, compute_capability=cc, compute_capability_source="nvidia-smi")])
    return doctor.HostFacts(nvidia=nvidia, docker_runtimes=["nvidia", "runc"],
                            rocm_devices={"/dev/kfd": False, "/dev/dri": False})


def verdicts(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name.removeprefix("variant "): c for c in report.variants}


@pytest.mark.parametrize("name, cc", [
    ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA B200", "10.0"),
])
def test_only_a_cudnn_9_7_plus_variant_serves_blackwell_and_only_with_a_warning(real_matrix, name, cc):
    report = doctor.judge(host(name, cc), real_matrix)
    v = verdicts(report)
    cuda = [x for x in real_matrix.variants if x.family == "cuda"]
    for variant in cuda:
        check = v[variant.id]
        if tuple(int(p) for p in variant.cudnn.split(".")[:2]) >= (9, 7):
            assert check.status == WARN, check
            assert "JIT-compiles its compute_90 PTX" in check.message
            assert "XLA cannot target it" in check.message and "#111958" in check.message
            assert "jit_compile=False" in check.fix
        else:
            assert check.status == FAIL, check
            assert f"cuDNN {variant.cudnn} has no Blackwell kernels" in check.message
            assert check.fix == "use tf2.21-cuda12.9 (cuDNN >= 9.7)"
    # Never a bare PASS: before this rule every CUDA variant, cuDNN 8.7 included, passed.
    assert not any(v[x.id].status == PASS for x in cuda)
    assert report.recommended == "tf2.21-cuda12.9" and report.gpu_usable


@pytest.mark.parametrize("fixture_host, gpu_count", [("rtx5090-572", 1), ("b200-575", 8)])
def test_recorded_blackwell_hosts_get_the_honest_verdicts(real_matrix, monkeypatch, fixture_host, gpu_count):
    # Real public nvidia-smi tables (tests/fixtures/nvidia-smi/SOURCES.md), replayed.
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", fixture_host)
    facts = doctor.HostFacts(nvidia=doctor.probe_nvidia(str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")),
                             docker_runtimes=["nvidia", "runc"], rocm_devices={"/dev/kfd": False, "/dev/dri": False})
    assert len(facts.nvidia.gpus) == gpu_count
    assert all(blackwell.is_blackwell(g.compute_capability) for g in facts.nvidia.gpus)
    report = doctor.judge(facts, real_matrix)
    v = verdicts(report)
    assert v["tf2.21-cuda12.9"].status == WARN
    for old in ("tf2.20-cuda12.5", "tf2.17-cuda12.3", "tf2.15-cuda12.2", "tf2.14-cuda11.8"):
        assert v[old].status == FAIL and "no Blackwell kernels" in v[old].message
    assert report.recommended == "tf2.21-cuda12.9"


def test_hopper_is_not_mistaken_for_blackwell(real_matrix):
    v = verdicts(doctor.judge(host("NVIDIA H100 80GB HBM3", "9.0"), real_matrix))
    assert v["tf2.21-cuda12.9"].status == PASS and "PTX" not in v["tf2.21-cuda12.9"].message  # SASS sm_90
    assert "runs JIT-compiled PTX" in v["tf2.15-cuda12.2"].message
    assert "Blackwell" not in v["tf2.14-cuda11.8"].message


def test_a_mixed_host_reports_the_blackwell_gpu_and_keeps_the_other(real_matrix):
    facts = host("NVIDIA GeForce RTX 5090", "12.0")
    facts.nvidia.gpus.append(Gpu(index=1, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0",
                                 compute_capability_source="nvidia-smi"))
    v = verdicts(doctor.judge(facts, real_matrix))
    assert v["tf2.20-cuda12.5"].status == FAIL and "RTX 5090" in v["tf2.20-cuda12.5"].message
    assert v["tf2.21-cuda12.9"].status == WARN


@pytest.mark.parametrize("cc, blackwell_gpu", [
    ("12.0", True), ("12.1", True), ("10.0", True), ("10.3", True), ("11.0", True),
    ("9.0", False), ("8.9", False), ("7.0", False),
])
def test_every_tool_draws_the_blackwell_line_at_the_same_place(cc, blackwell_gpu):
    assert blackwell.is_blackwell(cc) is blackwell_gpu
    gpus = [{"name": "GPU", "compute_capability": cc}]
    assert (smoke_compile_options.xla_blocker(gpus) is not None) is blackwell_gpu
    assert bool(bench_capabilities.xla_skipped(["off", "on"], "gpu", cc)) is blackwell_gpu

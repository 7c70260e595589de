"""Blackwell GPUs (compute capability 10.x / 12.x): honest per-variant verdicts, and the
in-image tools (smoke, bench) follow the same rule: XLA off where TF's XLA cannot target it
(the smoke's and the bench's own cases: tests/unit/kerasenv_image/)."""

from __future__ import annotations

import dataclasses

import pytest

from kerasenv.host import blackwell
from kerasenv.host import doctor
from kerasenv.host.doctor import FAIL, PASS, WARN
from kerasenv.host.nvidia_smi import Gpu, HostGpus
from kerasenv.matrix.kernel_targets import KernelTargets
from kerasenv.matrix.schema import Variant
from kerasenv_image.bench import capabilities as bench_capabilities
from kerasenv_image.backends import tensorflow as tf_backend

from ...conftest import REPO


def host(name: str, cc: str, driver: str = "575.57.08") -> doctor.HostFacts:
    nvidia = HostGpus(present=True, driver_version=driver, cuda_version="12.9",
                      gpus=[Gpu(index=0, name=name, compute_capability=cc, compute_capability_source="nvidia-smi")])
    return doctor.HostFacts(nvidia=nvidia, docker_runtimes=["nvidia", "runc"])


def verdicts(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name.removeprefix("variant "): c for c in report.variants}


TF_CUDA = ("tf2.21-cuda12.9", "tf2.20-cuda12.5", "tf2.17-cuda12.3", "tf2.15-cuda12.2", "tf2.14-cuda11.8")


@pytest.mark.parametrize("name, cc", [
    ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA B200", "10.0"),
])
def test_only_a_cudnn_9_7_plus_variant_serves_blackwell_and_only_with_a_warning(real_matrix, name, cc):
    report = doctor.judge(host(name, cc), real_matrix)
    v = verdicts(report)
    cuda = [x for x in real_matrix.variants if x.family == "cuda"]
    assert {x.id for x in cuda} == set(TF_CUDA) | {"jax0.12-cuda12.9", "torch2.15-cuda13.2"}
    for variant in cuda:
        check = v[variant.id]
        if variant.backend == "jax":
            # JAX's wheels carry sm_100/sm_120 SASS and cuDNN 9.24; the driver (575.57.08) is its wheels' own.
            assert check.status == PASS, check
            assert "native kernels in jax 0.12.0.1" in check.message and "sm_100" in check.message
            assert "XLA cannot target it" not in check.message and "JIT" not in check.message
        elif variant.backend == "torch":
            # CUDA 13.2 loads only on R580: the driver check fails before any kernel is looked at.
            assert check.status == FAIL, check
            assert "older than 580.65.06, the minimum for CUDA 13.2" in check.message
            assert check.fix == "upgrade the NVIDIA driver to >= 580.65.06"
        elif tuple(int(p) for p in variant.cudnn.split(".")[:2]) >= (9, 7):
            assert check.status == WARN, check
            assert "JIT-compiles its compute_90 PTX" in check.message
            assert "XLA cannot target it" in check.message and "#111958" in check.message
            assert "jit_compile=False" in check.fix
            assert "or use kerasenv:jax0.12-cuda12.9 (native kernels for it)" in check.fix
        else:
            assert check.status == FAIL, check
            assert f"cuDNN {variant.cudnn} has no Blackwell kernels" in check.message
            # The image with native kernels this driver runs, before any cuDNN >= 9.7 one.
            assert check.fix == "use kerasenv:jax0.12-cuda12.9 (native kernels for it)"
    # Never a bare PASS for a TF image: before this rule every CUDA variant, cuDNN 8.7 included, passed.
    assert not any(v[i].status == PASS for i in TF_CUDA)
    assert report.recommended == "jax0.12-cuda12.9" and report.gpu_usable


def test_without_a_native_image_a_cudnn_8_variant_is_sent_to_a_cudnn_9_7_plus_one(real_matrix):
    tf_only = dataclasses.replace(real_matrix, variants=tuple(x for x in real_matrix.variants
                                                                if x.backend == "tensorflow"))
    report = doctor.judge(host("NVIDIA GeForce RTX 5090", "12.0"), tf_only)
    v = verdicts(report)
    assert v["tf2.21-cuda12.9"].status == WARN and "kerasenv:" not in v["tf2.21-cuda12.9"].fix
    for old in TF_CUDA[1:]:
        assert v[old].status == FAIL and v[old].fix == "use tf2.21-cuda12.9 (cuDNN >= 9.7)"
    assert report.recommended == "tf2.21-cuda12.9"


@pytest.mark.parametrize("fixture_host, gpu_count, driver", [("rtx5090-572", 1, "572.70"), ("b200-575", 8, "575.57.08")])
def test_recorded_blackwell_hosts_get_the_honest_verdicts(real_matrix, monkeypatch, fixture_host, gpu_count, driver):
    # Real public nvidia-smi tables (tests/fixtures/nvidia-smi/SOURCES.md), replayed.
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", fixture_host)
    facts = doctor.HostFacts(nvidia=doctor.probe_nvidia(str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")),
                             docker_runtimes=["nvidia", "runc"])
    assert len(facts.nvidia.gpus) == gpu_count and facts.nvidia.driver_version == driver
    assert all(blackwell.is_blackwell(g.compute_capability) for g in facts.nvidia.gpus)
    report = doctor.judge(facts, real_matrix)
    v = verdicts(report)
    assert v["tf2.21-cuda12.9"].status == WARN
    for old in ("tf2.20-cuda12.5", "tf2.17-cuda12.3", "tf2.15-cuda12.2", "tf2.14-cuda11.8"):
        assert v[old].status == FAIL and "no Blackwell kernels" in v[old].message
    jax = v["jax0.12-cuda12.9"]
    assert jax.status == PASS and "native kernels in jax 0.12.0.1" in jax.message
    torch = v["torch2.15-cuda13.2"]
    assert torch.status == FAIL and f"driver {driver} is older than 580.65.06" in torch.message
    assert "580.65.06" in torch.fix
    assert report.recommended == "jax0.12-cuda12.9"


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
    assert (tf_backend.xla_blocker(gpus) is not None) is blackwell_gpu
    assert bool(bench_capabilities.xla_skipped(["off", "on"], "gpu", cc)) is blackwell_gpu


# --- native Blackwell kernels: the JAX and PyTorch variants ------------------------------------
# Their kernel targets as compatibility.md's table has them (jax-cuda12-plugin 0.12.0.1, the same
# arch set as 0.10.2; torch 2.15.0), and as the probe read them from the wheels.
JAX_KERNELS = KernelTargets("jax", "0.12.0.1", sass=("sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101",
                                                   "sm_120"), ptx=("compute_120",))
TORCH_KERNELS = KernelTargets("torch", "2.15.0", sass=("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100",
                                                       "sm_100a", "sm_103", "sm_120", "sm_120a", "sm_121a"), ptx=())


def with_native_variants(matrix):
    """The matrix carries the JAX and PyTorch variants now: check they are the ones described
    above (recorded targets, driver floors) rather than adding copies."""
    jax, torch = matrix.get("jax0.12-cuda12.9"), matrix.get("torch2.15-cuda13.2")
    assert (jax.kernel_targets.sass, jax.kernel_targets.ptx) == (JAX_KERNELS.sass, JAX_KERNELS.ptx)
    assert (torch.kernel_targets.sass, torch.kernel_targets.ptx) == (TORCH_KERNELS.sass, TORCH_KERNELS.ptx)
    assert torch.min_driver == "580.65.06"  # CUDA 13's minor-version compatibility floor
    # Its wheels' own driver is R580 too, and without PTX there is nothing to JIT on an older one.
    assert torch.min_driver_ptx == torch.min_driver_toolkit == "580.65.06"
    return matrix


def replayed(fixture_host, monkeypatch) -> doctor.HostFacts:
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", fixture_host)
    return doctor.HostFacts(nvidia=doctor.probe_nvidia(str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")),
                            docker_runtimes=["nvidia", "runc"])


@pytest.mark.parametrize("fixture_host", ["rtx5090-572", "b200-575"])
def test_a_blackwell_host_is_sent_to_the_jax_image_its_driver_runs(real_matrix, monkeypatch, fixture_host):
    report = doctor.judge(replayed(fixture_host, monkeypatch), with_native_variants(real_matrix))
    v = verdicts(report)
    assert v["jax0.12-cuda12.9"].status == PASS and "native kernels in jax 0.12.0.1" in v["jax0.12-cuda12.9"].message
    # CUDA 13.2 needs R580: 572.70 / 575.57.08 are older.
    assert v["torch2.15-cuda13.2"].status == FAIL and "older than 580.65.06" in v["torch2.15-cuda13.2"].message
    tf = v["tf2.21-cuda12.9"]
    assert tf.status == WARN and "jit_compile=False" in tf.fix and "kerasenv:jax0.12-cuda12.9" in tf.fix
    assert v["tf2.20-cuda12.5"].status == FAIL and v["tf2.20-cuda12.5"].fix.startswith("use kerasenv:jax0.12-cuda12.9")
    assert report.recommended == "jax0.12-cuda12.9"


def test_with_an_r580_driver_the_newest_cuda_with_native_kernels_wins(real_matrix):
    report = doctor.judge(host("NVIDIA GeForce RTX 5090", "12.0", driver="580.95.05"), with_native_variants(real_matrix))
    v = verdicts(report)
    assert v["torch2.15-cuda13.2"].status == PASS and v["jax0.12-cuda12.9"].status == PASS
    assert "kerasenv:torch2.15-cuda13.2" in v["tf2.21-cuda12.9"].fix
    assert report.recommended == "torch2.15-cuda13.2"


def test_ptx_only_names_the_jit_cost_and_the_cache(real_matrix):
    tf = verdicts(doctor.judge(host("NVIDIA B200", "10.0"), real_matrix))["tf2.21-cuda12.9"]
    assert tf.status == WARN
    assert "no native kernels in tensorflow 2.21.0 (its binaries carry SASS sm_60,sm_70,sm_80,sm_89,sm_90" in tf.message
    assert "takes minutes" in tf.message and "#97387" in tf.message
    assert f"CUDA_CACHE_PATH={blackwell.CUDA_CACHE_PATH}" in tf.message and "named volume" in tf.message


def test_a_variant_without_kernels_for_the_gpu_fails_naming_the_native_image(real_matrix):
    matrix = with_native_variants(real_matrix)
    hopper_only = dataclasses.replace(matrix.get("jax0.12-cuda12.9"), id="old-jax",
                                      recorded_kernels=KernelTargets("jax", "0.4.30", sass=("sm_90a",), ptx=("compute_90a",)))
    matrix = dataclasses.replace(matrix, variants=matrix.variants + (hopper_only,))
    check = verdicts(doctor.judge(host("NVIDIA GeForce RTX 5090", "12.0", driver="575.57.08"), matrix))["old-jax"]
    assert check.status == FAIL and "carries no kernel it can run" in check.message
    assert check.fix == "use kerasenv:jax0.12-cuda12.9 (native kernels for it)"


def test_the_ptx_jit_driver_floor_still_fails_a_ptx_only_variant():
    matrix_variant = Variant(id="x", family="cuda", tensorflow="2.21.0", keras="3.15.1", python="3.11",
                             base_image="debian:bookworm-slim", cuda="12.5", cudnn="9.7.0.66", nccl="2.27.7")
    found = blackwell.verdict(matrix_variant, "NVIDIA B200", "10.0", "550.54.14", [matrix_variant], "x")
    assert found.status == "FAIL" and "needs driver >= 555.42.06, this host has 550.54.14" in found.message


def test_an_unrecorded_jax_variant_is_not_checked_rather_than_failed(real_matrix):
    # No published kernel list for JAX here: without kernel-targets.json nothing is known.
    unrecorded = dataclasses.replace(real_matrix.get("jax0.12-cuda12.9"), recorded_kernels=None)
    found = blackwell.verdict(unrecorded, "NVIDIA B200", "10.0", "575.57.08", [unrecorded], "tf2.21-cuda12.9")
    assert found.status == "WARN" and "kernel support not checked" in found.message
    assert "kerasenv kernel-targets jax0.12-cuda12.9 --write" in found.fix

"""smoke_tests/platforms.py: what the acceptance suite expects of a variant's amd64 and arm64
images (test ids, locks, size budgets, ptxas targets, the GPUs native kernels must serve),
against the committed matrix."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from kerasenv.images import locks

from ..conftest import REPO

_spec = importlib.util.spec_from_file_location("kerasenv_smoke_platforms", REPO / "smoke_tests" / "platforms.py")
platforms = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = platforms
_spec.loader.exec_module(platforms)


@pytest.fixture(scope="module")
def arm64_variants(real_matrix):
    found = [v for v in real_matrix.variants if v.arm64]
    assert found, "the matrix has no [variant.arm64]"
    return found


@pytest.mark.parametrize("name, arch", [("amd64", "amd64"), ("x86_64", "amd64"), ("aarch64", "arm64"),
                                        ("arm64", "arm64"), ("ARM64", "arm64"), ("riscv64", "riscv64"), (None, "")])
def test_the_engines_architecture_names(name, arch):
    assert platforms.normalize_arch(name) == arch


def test_test_ids_keep_amd64_as_it_was_and_show_arm64(real_matrix, arm64_variants):
    v = arm64_variants[0]
    assert platforms.target_id(v, v.image_ref, "amd64") == v.id
    assert platforms.target_id(v, "registry.example/kerasenv:x", "amd64") == f"{v.id}@registry.example/kerasenv:x"
    assert platforms.target_id(v, f"kerasenv:{v.id}-arm64", "arm64") == f"{v.id}@arm64"
    assert platforms.target_id(v, "registry.example/kerasenv:x", "arm64") == f"{v.id}@arm64@registry.example/kerasenv:x"
    amd64_only = next(x for x in real_matrix.variants if not x.arm64)
    assert platforms.local_ref(amd64_only, "arm64") is None
    # an arm64 image of an amd64-only variant still gets an id (test_labels fails it)
    assert platforms.target_id(amd64_only, f"kerasenv:{amd64_only.id}-arm64", "arm64") == \
        f"{amd64_only.id}@arm64@kerasenv:{amd64_only.id}-arm64"


def test_the_arm64_image_is_checked_against_its_own_lock(real_matrix, arm64_variants):
    for v in arm64_variants:
        assert platforms.lock_names(v, "arm64") == (locks.ARM64_LOCK, locks.CUDA_LOCK)
        assert platforms.lock_names(v, "amd64") == (locks.MAIN_LOCK, locks.CUDA_LOCK)
        assert (REPO / "images" / v.id / locks.ARM64_LOCK).exists()
    cpu = next(v for v in real_matrix.variants if v.family == "cpu")
    assert platforms.lock_names(cpu, "amd64") == (locks.MAIN_LOCK,)


def test_tensorflow_is_tensorflow_cpu_beside_jax_and_torch_on_amd64_and_tensorflow_on_arm64(real_matrix,
                                                                                           arm64_variants):
    for v in arm64_variants:
        assert platforms.tensorflow_distribution(v, "amd64") == "tensorflow-cpu"
        assert platforms.tensorflow_distribution(v, "arm64") == "tensorflow"
        # ... which is what the locks say
        for arch, lock in (("amd64", locks.MAIN_LOCK), ("arm64", locks.ARM64_LOCK)):
            pins = locks.parse((REPO / "images" / v.id / lock).read_text(encoding="utf-8"))
            assert {"tensorflow", "tensorflow-cpu"} & set(pins) == {platforms.tensorflow_distribution(v, arch)}
    tf_gpu = next(v for v in real_matrix.variants if v.backend == "tensorflow" and v.family == "cuda")
    assert platforms.tensorflow_distribution(tf_gpu, "amd64") == "tensorflow"


def test_size_budget_of_each_image(real_matrix, arm64_variants):
    for v in arm64_variants:
        assert platforms.size_budget_mb(v, "amd64") == v.size_budget_mb
        assert platforms.size_budget_mb(v, "arm64") == (v.arm64.size_budget_mb or v.size_budget_mb)


def test_ptxas_targets_amd64_keeps_the_probes_default_arm64_names_the_grace_gpus():
    assert platforms.ptxas_probe_args("amd64") == []
    assert platforms.ptxas_probe_args("arm64") == ["--ptxas-targets", "sm_90a,sm_100a,sm_121a"]


@pytest.mark.parametrize("flag, gpu, runs", [
    ("sm_90", (9, 0), True), ("sm_90a", (9, 0), True), ("sm_90a", (10, 0), False),
    ("sm_100", (10, 3), True), ("sm_103", (10, 0), False), ("sm_120", (12, 1), True),
    ("sm_121a", (12, 1), True), ("sm_120a", (12, 1), False), ("sm_100f", (10, 3), True),
    ("sm_80", (9, 0), False), ("compute_90", (9, 0), False), ("sm_x", (9, 0), False),
])
def test_which_sass_runs_on_which_gpu(flag, gpu, runs):
    assert platforms.sass_runs_on(flag, gpu) is runs


def test_the_grace_gpus_without_native_kernels():
    assert platforms.gpus_without_native_kernels("sm_80 sm_90 sm_100 sm_120".split()) == []
    assert platforms.gpus_without_native_kernels("sm_90 sm_100 sm_121a".split()) == []
    assert platforms.gpus_without_native_kernels("sm_80 sm_90a sm_100a".split()) == ["sm_121"]
    assert platforms.gpus_without_native_kernels([]) == ["sm_90", "sm_100", "sm_121"]


def test_image_pins_are_the_architectures_lock_and_the_shared_cuda_lock(arm64_variants, tmp_path):
    for v in arm64_variants:
        amd64 = platforms.image_pins(v, "amd64", REPO / "images")
        arm64 = platforms.image_pins(v, "arm64", REPO / "images")
        assert amd64.pop("tensorflow-cpu") == arm64.pop("tensorflow")
        assert amd64 == arm64  # one tag, one stack
        assert any(name.startswith("nvidia-") for name in arm64)  # the CUDA lock's
    (tmp_path / v.id).mkdir()
    with pytest.raises(AssertionError, match="requirements-arm64.lock is missing: run `kerasenv lock"):
        platforms.image_pins(v, "arm64", tmp_path)


def test_pip_checks_not_supported_line_and_sbsa_only_wheels():
    assert platforms.unsupported_platform("nvidia-cusparselt-cu13 0.8.1 is not supported on this platform") == \
        ("nvidia-cusparselt-cu13", "0.8.1")
    assert platforms.unsupported_platform("astunparse 1.6.3 requires wheel, which is not installed.") is None
    sbsa = "Wheel-Version: 1.0\nGenerator: setuptools (80.9.0)\nRoot-Is-Purelib: true\nTag: py3-none-manylinux2014_sbsa\n"
    assert platforms.sbsa_only(sbsa)
    assert not platforms.sbsa_only(sbsa + "Tag: py3-none-manylinux2014_x86_64\n")
    assert not platforms.sbsa_only("Wheel-Version: 1.0\nTag: py3-none-manylinux_2_28_x86_64\n")
    assert not platforms.sbsa_only("Wheel-Version: 1.0\n")


@pytest.mark.parametrize("given, expected", [
    (None, {"QEMU_CPU": "neoverse-n2"}),
    ({"OUT_DIR": "/out"}, {"QEMU_CPU": "neoverse-n2", "OUT_DIR": "/out"}),
    ({"QEMU_CPU": "max"}, {"QEMU_CPU": "max"}),  # a check that asks for a model keeps it
    (["A=1"], ["QEMU_CPU=neoverse-n2", "A=1"]),
    (["QEMU_CPU=cortex-a72", "A=1"], ["QEMU_CPU=cortex-a72", "A=1"]),
])
def test_an_emulated_container_gets_the_arm64_hosts_cpu_model_unless_it_names_one(given, expected):
    assert platforms.EMULATED_ARM64_CPU == "neoverse-n2"
    assert platforms.emulated_environment(given) == expected


def test_the_suite_gives_every_container_of_an_emulated_image_that_model():
    conftest = (REPO / "smoke_tests" / "conftest.py").read_text(encoding="utf-8")
    start = conftest.split("def start(", 1)[1].split("\ndef ", 1)[0]
    assert "platforms.emulated_environment(" in start and "_EMULATED_REFS" in start
    assert "_EMULATED_REFS.update(" in conftest.split("def _targets(", 1)[1].split("\ndef ", 1)[0]

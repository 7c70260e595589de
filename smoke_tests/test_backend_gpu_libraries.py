"""CUDA images on JAX and PyTorch: the backend's own GPU-library check passes, without a GPU.

The image's probe (`python -m kerasenv_image.probes.gpu_libraries`, backend from
KERAS_BACKEND) loads what the backend loads, the way it loads it: for JAX, the CUDA
plugin's `_load_nvidia_libraries()` and then every library XLA opens by soname; for
PyTorch, `import torch` and the libraries it opens later. /proc/self/maps says which
file each came from; all must be the pinned wheels'. JAX must fall back to the CPU (its
plugin's cuInit error is the evidence) and ptxas must compile for the lowest target and
sm_100a / sm_120a (XLA's ptxas for JAX, Triton's for PyTorch). TensorFlow images have
their own check (TryDlopenCUDALibraries(), smoke_tests/test_tf_gpu_libraries.py).

On an arm64 image ptxas compiles for the arm64 hosts' GPUs instead: sm_90a (GH200), sm_100a
(GB200), sm_121a (DGX Spark), and PyTorch's build must carry native kernels for each of them.
The checks of the probe's one run are marker arm64_ci (CI runs them on each arm64 image, under
qemu); the per-user variants below start three more containers and are not.
"""

from __future__ import annotations

import json

import pytest

from kerasenv_image.probes import gpu_libraries

from . import platforms
from .conftest import run_once
from .test_tf_gpu_libraries import parse

FAMILIES = {"cuda"}
SITE = "/opt/venv/lib/python{python}/site-packages/nvidia/"


@pytest.fixture(scope="module", autouse=True)
def _jax_and_torch_images_only(target):
    if target.variant.backend == "tensorflow":
        pytest.skip("a TensorFlow image: its own check, TryDlopenCUDALibraries(), is smoke_tests/test_tf_gpu_libraries.py")


@pytest.fixture(scope="module")
def probe(box, target, inventories):
    """The probe's result; its --inventory line fills the session's inventory of this image, so
    test_labels and the others do not import the framework again (25-50 s each under qemu)."""
    code, out = box.exec(["python", "-m", gpu_libraries.__name__, *platforms.ptxas_probe_args(target.arch),
                          "--inventory"])
    inventory = [json.loads(line)["inventory"] for line in out.splitlines() if line.startswith('{"inventory": ')]
    assert len(inventory) == 1, f"the probe printed {len(inventory)} inventory lines:\n{out[-3000:]}"
    inventories.setdefault(target.ref, inventory[0])
    return parse(code, out)


def fresh(docker, target, command: list[str], **kwargs) -> dict:
    code, out, err = run_once(docker, target.ref, command, network_mode="none", **kwargs)
    return parse(code, out + err)


@pytest.mark.arm64_ci
def test_the_check_is_the_images_backends_and_passes(probe, target):
    assert probe["backend"] == target.variant.backend
    assert probe["failed"] == []


@pytest.mark.arm64_ci
def test_every_cuda_library_loads_from_the_pinned_wheels(probe, target):
    site = SITE.format(python=target.variant.python)
    libs = {name: r for group in probe["libraries"].values() for name, r in group.items()}
    for group in ("cudart", "cublas", "cusolver", "cusparse", "cufft", "nccl", "nvjitlink", "nvrtc", "cupti", "cudnn"):
        assert probe["libraries"].get(group), f"{group}: nothing checked"
    outside = {name: r.get("path") for name, r in libs.items() if not (r.get("path") or "").startswith(site)}
    assert outside == {}, "loaded from outside the pinned wheels (or not at all)"


@pytest.mark.arm64_ci
def test_cudnn_is_the_locked_release(probe, target):
    cudnn = target.variant.cudnn.split(".")
    expected = int(cudnn[0]) * 10000 + int(cudnn[1]) * 100 + int(cudnn[2])
    if target.variant.backend == "jax":
        assert probe["versions"]["cudnn"]["version"] == expected
    else:
        assert probe["cudnn_version"] == expected


@pytest.mark.arm64_ci
def test_jax_falls_back_to_the_cpu_and_says_why(probe, target):
    if target.variant.backend != "jax":
        pytest.skip("JAX's CUDA plugin and its CPU fallback: not applicable to a PyTorch image")
    assert probe["plugin"] == f"jax_plugins.xla_cuda{target.variant.cuda.split('.')[0]}"
    assert probe["devices"] == ["cpu:0"] and probe["default_backend"] == "cpu"
    assert "cuInit" in (probe["plugin_error"] or ""), probe["plugin_error"]  # no driver: error 303
    # the plugin preloaded by path from the wheels, before XLA opened anything by soname
    assert {"libcudnn.so.9", "libcublas.so.12", "libcudart.so.12"} <= set(probe["preloaded_by_plugin"])


@pytest.mark.arm64_ci
def test_xla_ptxas_is_the_nvcc_wheels_and_compiles_for_blackwell(probe, target):
    if target.variant.backend != "jax":
        pytest.skip("PyTorch has no XLA: Triton's ptxas is checked in test_triton_ptxas_compiles_for_blackwell")
    site = SITE.format(python=target.variant.python)
    assert probe["ptxas"]["path"] == f"{site}cuda_nvcc/bin/ptxas"
    assert f"release {target.variant.cuda}" in probe["ptxas"]["version"]
    wanted = set(platforms.PTXAS_TARGETS[target.arch])  # amd64: sm_100a, sm_120a; arm64: sm_90a, sm_100a, sm_121a
    assert wanted <= set(probe["ptxas"]["targets"]) and probe["ptxas"]["ok"], probe["ptxas"]


@pytest.mark.arm64_ci
def test_torch_is_the_locked_cuda_build_with_blackwell_kernels(probe, target):
    if target.variant.backend != "torch":
        pytest.skip("torch.version.cuda and the build's arch flags: not applicable to a JAX image")
    assert probe["cuda_version"] == target.variant.cuda
    if target.arch == platforms.AMD64:
        assert {"sm_100", "sm_120"} <= set(probe["arch_flags"].split()), probe["arch_flags"]
    else:  # native code for GH200, GB200 and DGX Spark (sm_120 code runs on its sm_121)
        assert platforms.gpus_without_native_kernels(probe["arch_flags"].split()) == [], probe["arch_flags"]
    assert probe["is_available"] is False and probe["not_available_reason"], probe


@pytest.mark.arm64_ci
def test_triton_ptxas_compiles_for_blackwell(probe, target):
    if target.variant.backend != "torch":
        pytest.skip("Triton's ptxas is PyTorch's; JAX uses the nvcc wheel's (test_xla_ptxas_...)")
    assert probe["ptxas"], "no ptxas in triton/backends/nvidia/bin"
    compiled = {arch for r in probe["ptxas"].values() for arch, t in r["targets"].items() if t["ok"]}
    assert set(platforms.PTXAS_TARGETS[target.arch]) <= compiled, probe["ptxas"]


@pytest.mark.parametrize("how", ["uid-23456-gid-0", "env-i", "after-ldconfig"])
def test_check_passes_for_any_user_environment_and_a_rebuilt_ld_cache(docker, target, how):
    module = gpu_libraries.__name__
    if how == "uid-23456-gid-0":
        result = fresh(docker, target, ["python", "-m", module], user="23456:0")
    elif how == "env-i":  # no PATH, no KERAS_BACKEND: the backend is named
        result = fresh(docker, target, ["env", "-i", "/opt/venv/bin/python", "-m", module,
                                        "--backend", target.variant.backend])
    else:  # the NVIDIA Container Toolkit reruns ldconfig at container start
        result = fresh(docker, target, ["bash", "-c", "ldconfig && exec setpriv --reuid=1000 --regid=1000 "
                                                      f"--clear-groups /opt/venv/bin/python -m {module}"], user="0")
    assert result["failed"] == []

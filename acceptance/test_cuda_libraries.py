"""CUDA images: exactly one cuDNN and one cuBLAS for TensorFlow, from the pinned wheels."""

from __future__ import annotations

import pytest

FAMILIES = {"cuda"}
SITE = "/opt/venv/lib/python{python}/site-packages/nvidia"


def tensorflow_only(target, what: str) -> None:
    if target.variant.backend != "tensorflow":
        pytest.skip(f"{what} because this {target.variant.backend} image has no TensorFlow (cuda_audit reads the "
                    "loader's search path from TensorFlow's libraries); acceptance/test_backend_gpu_libraries.py "
                    "checks each CUDA library the backend maps comes from the pinned wheels")


@pytest.fixture(scope="module")
def audit(box, target):
    tensorflow_only(target, "not audited")
    from kerasenv_image.probes import cuda_audit

    return box.probe_json(cuda_audit, user="0")


@pytest.mark.parametrize("library, wheel", [("cudnn", "nvidia-cudnn"), ("cublas", "nvidia-cublas")])
def test_exactly_one_copy_resolves_and_it_is_the_pinned_wheel(audit, target, library, wheel):
    found = audit[library]
    site = SITE.format(python=target.variant.python)
    assert len(found["resolvable"]) == 1, f"{found['soname']} resolves to {found['resolvable']}"
    assert found["resolvable"][0].startswith(f"{site}/{library}/lib/")
    assert found["on_disk"] == found["resolvable"], "another copy on disk could shadow the pinned one"


@pytest.mark.parametrize("library", ["cudnn", "cublas"])
def test_library_reports_the_locked_version(audit, target, library):
    wheels = target.variant.cuda_wheels()
    locked = next(v for k, v in wheels.items() if k.startswith(f"nvidia-{library}-"))
    assert audit[library]["version"] is not None
    assert locked.startswith(audit[library]["version"] + "."), (locked, audit[library]["version"])


def test_ptxas_comes_from_the_pinned_nvcc_wheel_and_matches_cuda(audit, target):
    if target.variant.backend == "torch":
        pytest.skip("PyTorch images carry no nvcc wheel: Triton's own ptxas compiles torch.compile's kernels "
                    "(checked in acceptance/test_backend_gpu_libraries.py)")
    site = SITE.format(python=target.variant.python)
    assert audit["ptxas"]["path"] == f"{site}/cuda_nvcc/bin/ptxas"
    nvcc = next(v for k, v in target.variant.cuda_wheels().items() if k.startswith("nvidia-cuda-nvcc-"))
    assert f"release {target.variant.cuda}, V{nvcc}" in (audit["ptxas"]["version"] or ""), audit["ptxas"]


def test_tensorflow_is_a_cuda_build(request, target):
    tensorflow_only(target, "not applicable")
    inventory = request.getfixturevalue("inventory")
    assert inventory["build_info"]["is_cuda_build"] is True


def test_no_nvidia_require_cuda_and_the_toolkit_variables_are_set(image):
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert "NVIDIA_REQUIRE_CUDA" not in env and "NVIDIA_DISABLE_REQUIRE" not in env
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"

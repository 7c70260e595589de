"""CUDA images: exactly one cuDNN and one cuBLAS for the framework, from the pinned wheels."""

from __future__ import annotations

import re

import pytest

FAMILIES = {"cuda"}
SITE = "/opt/venv/lib/python{python}/site-packages/nvidia"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_wheel(target, library: str) -> tuple[str, str]:
    """(name, version) of the CUDA stack's wheel of `library`: nvidia-cudnn-cu12, or the CUDA 13
    wheels' unsuffixed nvidia-cublas."""
    return next((k, v) for k, v in target.variant.cuda_wheels().items()
                if normalized(k) == f"nvidia-{library}" or normalized(k).startswith(f"nvidia-{library}-cu"))


@pytest.fixture(scope="module")
def audit(box, target):
    from kerasenv_image.probes import cuda_audit

    return box.probe_json(cuda_audit, user="0")


def test_the_audit_follows_the_framework_s_own_gpu_libraries(audit, target):
    # The RUNPATHs the loader follows come from the framework's GPU libraries: none found
    # would make the search below the loader's defaults only.
    assert audit["backend"] == target.variant.backend
    assert audit["framework_libraries"], audit


@pytest.mark.parametrize("library", ["cudnn", "cublas"])
def test_exactly_one_copy_resolves_and_it_is_the_pinned_wheel(audit, target, library):
    found = audit[library]
    site = SITE.format(python=target.variant.python)
    assert len(found["resolvable"]) == 1, f"{found['soname']} resolves to {found['resolvable']}"
    assert found["resolvable"][0].startswith(f"{site}/")
    assert normalized(found["owner"] or "") == normalized(pinned_wheel(target, library)[0]), found
    assert found["on_disk"] == found["resolvable"], "another copy on disk could shadow the pinned one"


@pytest.mark.parametrize("library", ["cudnn", "cublas"])
def test_library_reports_the_locked_version(audit, target, library):
    locked = pinned_wheel(target, library)[1]
    assert audit[library]["version"] is not None
    assert locked.startswith(audit[library]["version"] + "."), (locked, audit[library]["version"])


def test_ptxas_comes_from_the_pinned_nvcc_wheel_and_matches_cuda(audit, target):
    if target.variant.backend == "torch":
        pytest.skip("PyTorch images carry no nvcc wheel: Triton's own ptxas compiles torch.compile's kernels "
                    "(checked in smoke_tests/test_backend_gpu_libraries.py)")
    site = SITE.format(python=target.variant.python)
    assert audit["ptxas"]["path"] == f"{site}/cuda_nvcc/bin/ptxas"
    nvcc = next(v for k, v in target.variant.cuda_wheels().items() if k.startswith("nvidia-cuda-nvcc-"))
    assert f"release {target.variant.cuda}, V{nvcc}" in (audit["ptxas"]["version"] or ""), audit["ptxas"]


def test_pytorch_s_image_has_no_ptxas_on_path(audit, target):
    """No nvcc wheel in the PyTorch stack: nothing may pose as XLA's ptxas there."""
    if target.variant.backend != "torch":
        pytest.skip(f"the {target.variant.backend} image's ptxas is the nvcc wheel's (the test above)")
    assert audit["ptxas"]["path"] is None, audit["ptxas"]


def test_the_framework_is_a_cuda_build(inventory, target):
    framework = inventory["framework"]
    assert framework["name"] == target.variant.backend
    assert framework["build"]["is_cuda_build"] is True, framework


def test_no_nvidia_require_cuda_and_the_toolkit_variables_are_set(image):
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert "NVIDIA_REQUIRE_CUDA" not in env and "NVIDIA_DISABLE_REQUIRE" not in env
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"

"""CUDA images: exactly one cuDNN and one cuBLAS for TensorFlow, from the pinned wheels."""

from __future__ import annotations

import pytest

FAMILIES = {"cuda"}
SITE = "/opt/venv/lib/python{python}/site-packages/nvidia"


@pytest.fixture(scope="module")
def audit(box):
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
    site = SITE.format(python=target.variant.python)
    assert audit["ptxas"]["path"] == f"{site}/cuda_nvcc/bin/ptxas"
    nvcc = next(v for k, v in target.variant.cuda_wheels().items() if k.startswith("nvidia-cuda-nvcc-"))
    assert f"release {target.variant.cuda}, V{nvcc}" in (audit["ptxas"]["version"] or ""), audit["ptxas"]


def test_tensorflow_is_a_cuda_build(inventory):
    assert inventory["build_info"]["is_cuda_build"] is True


def test_no_nvidia_require_cuda_and_the_toolkit_variables_are_set(image):
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert "NVIDIA_REQUIRE_CUDA" not in env and "NVIDIA_DISABLE_REQUIRE" not in env
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"

"""PyTorch images: torch.compile works (issue 35). The images carry Debian's C/C++ compiler and
Python's headers ([torch_compiler] in images/matrix.toml): Inductor compiles the C++ it generates
for the CPU, Triton builds its GPU launcher. Checked as an arbitrary UID on a read-only root, with
the caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) pointed at a writable mount as
docs/using/backends.md says (a tmpfs must be `exec`: Inductor loads the .so files it builds there,
and Docker mounts a tmpfs noexec by default, which fails with "failed to map segment from shared
object"): the compiled model gives eager mode's results, and
Keras's jit_compile=True trains as jit_compile=False does. On a GPU host (--gpu) the same check
runs on the GPU, through Triton."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_once
from .test_gpu import gpus_for

FAMILIES = {"cpu", "cuda"}
SCRIPT = Path(__file__).parent / "torch_compile_script"
CACHE = "/var/cache/kerasenv/cuda"
CACHES = {"TORCHINDUCTOR_CACHE_DIR": f"{CACHE}/torchinductor", "TRITON_CACHE_DIR": f"{CACHE}/triton"}


@pytest.fixture(scope="module", autouse=True)
def _pytorch_images_only(target):
    if target.variant.backend != "torch":
        pytest.skip("torch.compile: a PyTorch image's check (TensorFlow and JAX compile with XLA)")


def compile_check(docker, target, device: str, **kwargs) -> dict:
    code, out, err = run_once(
        docker, target.ref, ["python", "/check/check.py"], network_mode="none", user="23456:0",
        read_only=True, tmpfs={"/tmp": "rw,size=512m", CACHE: "rw,exec,mode=1777,size=512m"},
        environment={"DEVICE": device, **CACHES}, volumes={str(SCRIPT): {"bind": "/check", "mode": "ro"}}, **kwargs)
    assert code == 0, (out[-2000:], err[-4000:])
    return json.loads(out.strip().splitlines()[-1])


def test_the_image_has_the_compiler_torch_compile_calls(docker, target):
    code, out, err = run_once(docker, target.ref, ["bash", "-c",
                              "cc --version | head -1 && c++ --version | head -1 && "
                              "python -c 'import sysconfig, os; print(os.path.isfile(sysconfig.get_paths()[\"include\"] + \"/Python.h\"))'"],
                              network_mode="none")
    assert code == 0, err
    cc, cxx, python_h = out.strip().splitlines()
    assert "(Debian " in cc and "(Debian " in cxx, out  # Debian's gcc and g++ behind cc and c++
    assert python_h == "True"


def test_torch_compile_runs_inductors_cpp_as_an_arbitrary_uid_on_a_read_only_root(docker, target):
    result = compile_check(docker, target, "cpu")
    assert result["uid"] == 23456
    # Inductor's CPU code is C++ it compiled here: the source and the library it loaded.
    assert any(p.endswith(".cpp") for p in result["generated"]), result["generated"]
    assert any(p.endswith(".so") for p in result["generated"]), result["generated"]
    assert result["max_abs_diff"] < 1e-5, result
    # Keras's jit_compile=True on PyTorch: the compiled train step learns what the eager one does.
    assert result["keras_loss_jit"][-1] < result["keras_loss_jit"][0], result
    assert result["keras_loss_jit"] == pytest.approx(result["keras_loss_eager"], rel=1e-3, abs=1e-4), result
    assert result["keras_weights_max_abs_diff"] < 1e-3, result


@pytest.mark.gpu
def test_torch_compile_runs_triton_on_the_gpu(docker, target):
    result = compile_check(docker, target, "cuda", **gpus_for(docker, target))
    assert result["device"] == "cuda" and result["max_abs_diff"] < 1e-4, result
    # Triton's kernels: Inductor writes them as Python (triton.jit) in its cache.
    assert any(p.endswith(".py") for p in result["generated"]), result["generated"]
    assert result["keras_loss_jit"] == pytest.approx(result["keras_loss_eager"], rel=1e-3, abs=1e-4), result

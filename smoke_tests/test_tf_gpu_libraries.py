"""CUDA images: TensorFlow's own GPU-library check passes, for every user and environment.

TensorFlow registers a GPU only if `TryDlopenCUDALibraries()` can dlopen cudart, cuBLAS,
cuBLASLt, cuFFT, cuSOLVER, cuSPARSE and cuDNN. No GPU is needed to call it, so these
tests call that very function (the image's own probe, `python -m kerasenv_image.probes.gpu_libraries`)
and then load what TF and cuDNN open later: cuDNN's sub-libraries, NVRTC, NCCL, CUPTI, nvJitLink.
"""

from __future__ import annotations

import json

import pytest

from kerasenv_image.probes import gpu_libraries, loading

from .conftest import run_once

FAMILIES = {"cuda"}
NOT_TF = ("TryDlopenCUDALibraries() is the CUDA build of TensorFlow's, and this {backend} image's TensorFlow is "
          "tensorflow-cpu (tf.data, TensorBoard: smoke_tests/test_keras_tools.py): its own backend's check is "
          "smoke_tests/test_backend_gpu_libraries.py")
SITE = "/opt/venv/lib/python{python}/site-packages/nvidia/"
# What TryDlopenCUDALibraries() opens (tsl/platform/default/dso_loader.cc), by library dir.
TRY_DLOPEN_LIBRARIES = ("cuda_runtime", "cublas", "cufft", "cusolver", "cusparse", "cudnn")


def parse(code: int, out: str) -> dict:
    """The probe's JSON line (the last output line that is a JSON object). The probe exits 1
    when a check failed, and says which in the JSON's `failed`: the tests below assert on
    that, so a broken library fails the test that names it rather than erroring at set-up."""
    assert code in (0, 1), f"probe exited {code}:\n{out[-3000:]}"
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            assert bool(result.get("failed")) is (code == 1), (code, result.get("failed"))
            return result
    raise AssertionError(f"the probe printed no JSON:\n{out[-3000:]}")


def probe_in(box_or_run, **kwargs) -> dict:
    return parse(*box_or_run(["python", "-m", gpu_libraries.__name__], **kwargs))


@pytest.fixture(scope="module", autouse=True)
def _tensorflow_images_only(target):
    if target.variant.backend != "tensorflow":
        pytest.skip(NOT_TF.format(backend=target.variant.backend))


@pytest.fixture(scope="module")
def probe(box):
    """The check as the image's default user, in the module's container."""
    return probe_in(box.exec)


def fresh(docker, target, command: list[str], **kwargs) -> tuple[int, str]:
    code, out, err = run_once(docker, target.ref, command, network_mode="none", **kwargs)
    return code, out + err


def test_tensorflow_try_dlopen_cuda_libraries_succeeds(probe):
    assert probe["symbol"] is not None, "TryDlopenCUDALibraries() not found in libtensorflow_framework.so.2"
    assert probe["try_dlopen_ok"], (probe["failed"], probe["log"])


def test_tensorflow_loaded_each_gpu_library_from_the_pinned_wheels(probe, target):
    site = SITE.format(python=target.variant.python)
    loaded_dirs = {path[len(site):].split("/")[0] for path in probe["loaded_by_tensorflow"].values()
                   if path.startswith(site)}
    missing = [d for d in TRY_DLOPEN_LIBRARIES if d not in loaded_dirs]
    assert missing == [], f"not mapped after the check: {missing}; mapped: {probe['loaded_by_tensorflow']}"
    outside = {n: p for n, p in probe["loaded_by_tensorflow"].items() if not p.startswith(site)}
    assert outside == {}, "a CUDA library came from outside the pinned wheels"


@pytest.mark.parametrize("group", ["cudnn", "nvrtc", "nccl", "cupti", "nvjitlink"])
def test_libraries_tensorflow_and_cudnn_open_later_load_by_soname(probe, target, group):
    if group == "nvjitlink" and probe["cuda_major"] == "11":
        assert "nvjitlink" not in probe["later"]  # CUDA 11.8's stack has no nvJitLink
        return
    libs = probe["later"][group]
    assert libs, f"no {group} library expected: the probe's list is empty"
    failed = {name: r["error"] for name, r in libs.items() if not r["ok"]}
    assert failed == {}, f"{group}: cannot dlopen"
    site = SITE.format(python=target.variant.python)
    outside = {name: r["path"] for name, r in libs.items() if not (r["path"] or "").startswith(site)}
    assert outside == {}, f"{group}: loaded from outside the pinned wheels"


def test_cudnn_sublibraries_match_the_cudnn_major(probe, target):
    cudnn_major = target.variant.cudnn.split(".")[0]
    assert probe["cudnn_major"] == cudnn_major
    assert list(probe["later"]["cudnn"]) == list(loading.CUDNN_SUBLIBRARIES[cudnn_major])


def test_check_passes_for_an_arbitrary_uid_with_group_0_after_the_container_toolkits_ldconfig(docker, target):
    """Two things a GPU host does to a container, in one fresh container (each probe imports
    TensorFlow, ~8 s on 2 cores): the NVIDIA Container Toolkit reruns ldconfig at start (to
    add the driver's libraries), so the image's loader configuration must survive a rebuilt
    cache; and clusters (OpenShift, `--user`) run it as a UID the image has never seen, with
    group 0."""
    script = ("ldconfig && exec setpriv --reuid=23456 --regid=0 --clear-groups "
              f"/opt/venv/bin/python -m {gpu_libraries.__name__}")
    result = parse(*fresh(docker, target, ["bash", "-c", script], user="0"))
    assert result["try_dlopen_ok"] and result["later_ok"], result["failed"]


def test_check_passes_in_a_subprocess_of_an_empty_environment(docker, target):
    """`env -i` (no PATH, no LD_LIBRARY_PATH, nothing from the image's ENV), and the check in a
    child process of that interpreter, as multiprocessing workers and launchers run it."""
    code = ("import subprocess, sys; "
            "sys.exit(subprocess.run([sys.executable, '-m', sys.argv[1]]).returncode)")
    result = probe_in(lambda cmd: fresh(docker, target, ["env", "-i", "/opt/venv/bin/python", "-c", code, cmd[2]]))
    assert result["try_dlopen_ok"] and result["later_ok"], result["failed"]

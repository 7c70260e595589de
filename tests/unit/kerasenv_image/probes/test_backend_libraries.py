"""The pure parts of JAX's and PyTorch's GPU-library probes and of the dispatch in
gpu_libraries (the probes run in the images: smoke_tests/test_backend_gpu_libraries.py)."""

from __future__ import annotations

from kerasenv_image.probes import gpu_libraries, jax_libraries, torch_libraries

NO_PTXAS = {"path": "/p", "version": "v", "targets": {"sm_100a": {"ok": True}}, "ok": True}


def test_the_backend_is_the_flag_then_keras_backend_then_tensorflow():
    assert gpu_libraries.backend_of(["--backend", "torch"], {"KERAS_BACKEND": "jax"}) == "torch"
    assert gpu_libraries.backend_of([], {"KERAS_BACKEND": "jax"}) == "jax"
    assert gpu_libraries.backend_of([], {}) == "tensorflow"
    assert gpu_libraries.ptxas_targets(["--ptxas-targets", "sm_75,sm_100a"]) == ["sm_75", "sm_100a"]
    assert gpu_libraries.ptxas_targets([]) is None


def test_jax_expects_what_xla_opens_for_its_cuda_major():
    g12 = jax_libraries.expected("12")
    assert g12["cublas"] == ["libcublas.so.12", "libcublasLt.so.12"] and g12["cufft"] == ["libcufft.so.11"]
    assert g12["cudnn"][0] == "libcudnn.so.9" and "libcudnn_engines_precompiled.so.9" in g12["cudnn"]
    g13 = jax_libraries.expected("13")
    assert g13["cusolver"] == ["libcusolver.so.12"] and g13["nvjitlink"] == ["libnvJitLink.so.13"]


def test_jax_plugin_error_is_its_runtime_error_line():
    log = ("Jax plugin configuration error: Exception when calling jax_plugins.xla_cuda12.initialize()\n"
           "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
           "RuntimeError: jaxlib/cuda/versions_helpers.cc:135: operation cuInit(0) failed: Unknown CUDA error 303\n")
    assert jax_libraries.plugin_error(log).startswith("RuntimeError: jaxlib/cuda/versions_helpers.cc:135: operation cuInit")
    assert jax_libraries.plugin_error("") is None


def test_jax_summary_names_the_missing_library_once():
    result = {"plugin": "jax_plugins.xla_cuda12", "jax_error": None, "ptxas": NO_PTXAS,
              "libraries": {"cudnn": {"libcudnn.so.9": {"ok": False, "error": "libcudnn.so.9: cannot open shared "
                                                                             "object file: No such file or directory"}}},
              "versions": {"cudnn": {"error": "RuntimeError: cuDNN not found"}}}
    failed = jax_libraries.summarize(result)
    assert failed == ["cudnn: libcudnn.so.9 (libcudnn.so.9: cannot open shared object file: No such file or directory)"]
    line = gpu_libraries.one_line({"backend": "jax", "failed": failed})
    assert line.startswith("gpu_libraries (jax): FAIL: cudnn: libcudnn.so.9") and "\n" not in line


def test_torch_import_failure_names_the_library_first():
    result = {"import_error": "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
              "ptxas": {}}
    assert torch_libraries.summarize(result) == [
        "import torch failed: libcudnn.so.9 (ImportError: libcudnn.so.9: cannot open shared object file: "
        "No such file or directory)"]


def test_torch_expects_cu13_sonames_and_optional_ones_only_when_shipped():
    groups = torch_libraries.expected("13", "9", ["libcusparseLt.so.0", "libcudnn.so.9"])
    assert groups["cudart"] == ["libcudart.so.13"] and groups["nvrtc"] == ["libnvrtc.so.13"]
    assert groups["other"] == ["libcusparseLt.so.0"]
    assert "other" not in torch_libraries.expected("13", "9", [])


def test_tritons_blackwell_ptxas_covers_what_its_plain_ptxas_lacks():
    plain = {"path": "/b/ptxas", "version": "v12.8", "ok": False,
             "targets": {"sm_120a": {"ok": False, "error": "not defined"}, "sm_100a": {"ok": True}}}
    blackwell = {"path": "/b/ptxas-blackwell", "version": "v13", "ok": True,
                 "targets": {"sm_120a": {"ok": True}, "sm_100a": {"ok": True}}}
    base = {"import_error": None, "cuda_version": "13.2", "cudnn_version": 92600, "libraries": {}}
    assert torch_libraries.summarize({**base, "ptxas": {"ptxas": plain, "ptxas-blackwell": blackwell}}) == []
    assert torch_libraries.summarize({**base, "ptxas": {"ptxas": plain}}) == [
        "Triton's ptxas (v12.8) cannot compile for sm_120a: not defined"]

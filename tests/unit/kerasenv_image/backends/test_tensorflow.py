"""The TensorFlow backend's parts that run without TensorFlow: its errors and its rules."""

from __future__ import annotations

import types

from kerasenv_image.backends import tensorflow
from kerasenv_image.smoke import errors

from .fakes import args


class OpError(Exception):
    pass


class ResourceExhaustedError(OpError):
    pass


FAKE_TF = types.SimpleNamespace(errors=types.SimpleNamespace(OpError=OpError,
                                                             ResourceExhaustedError=ResourceExhaustedError))


def test_resource_exhausted_is_oom_unless_the_disk_is_full():
    oom = tensorflow.classify_error(FAKE_TF, ResourceExhaustedError("OOM when allocating tensor"), lambda: None, "/r")
    assert (oom.exit_code, oom.kind) == (errors.EXIT_OOM, "oom")
    disk = tensorflow.classify_error(FAKE_TF, ResourceExhaustedError("No space left on device"), lambda: None, "/r")
    assert (disk.exit_code, disk.kind) == (errors.EXIT_OUTPUT, "disk-full")


def test_op_errors_keep_their_tensorflow_kinds_and_wording():
    failure = tensorflow.classify_error(FAKE_TF, OpError("boom"), lambda: None, "/r")
    assert (failure.exit_code, failure.kind) == (errors.EXIT_TF_RUNTIME, "tensorflow-runtime")
    assert failure.message == "TensorFlow OpError: boom"
    assert "the TensorFlow log" in failure.fix
    gpu = tensorflow.classify_error(FAKE_TF, OpError("x"), lambda: "E0 cuda_dnn.cc:1] CUDNN_STATUS_INTERNAL_ERROR",
                                    "/r")
    assert (gpu.exit_code, gpu.kind) == (errors.EXIT_GPU_RUNTIME, "cudnn-autotune")


def test_other_exceptions_are_not_tensorflows():
    assert tensorflow.classify_error(FAKE_TF, ValueError("x"), lambda: None, "/r") is None


def test_tensorflow_keeps_multi_worker_and_the_blackwell_xla_rule():
    assert tensorflow.multi_worker_supported() is None
    keras3 = types.SimpleNamespace(__version__="3.15.1")
    assert tensorflow.jit_compile("auto", keras3, [{"name": "RTX 5090", "compute_capability": "12.0"}])[:2] == \
        (False, "off")
    assert tensorflow.prepare(args(logical_cpus=2), {}) == {}


def test_cuda_ordinals_are_read_from_physical_device_names():
    gpus = [types.SimpleNamespace(name="/physical_device:GPU:0"), types.SimpleNamespace(name="/physical_device:GPU:3")]
    assert tensorflow.cuda_ordinals(gpus) == [0, 3]


# XLA off on Blackwell, where TF's XLA cannot target the GPU, and Keras' default elsewhere.
class _Keras3:
    __version__ = "3.15.1"


def test_jit_compile_turns_xla_off_on_blackwell_and_says_why():
    value, setting, reason = tensorflow.jit_compile("auto", _Keras3, [
        {"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}])
    assert (value, setting) == (False, "off")
    assert "RTX 5090" in reason and "#111958" in reason and "--jit-compile on" in reason


def test_jit_compile_keeps_keras_default_elsewhere_and_obeys_an_explicit_choice():
    a100 = [{"name": "NVIDIA A100", "compute_capability": "8.0"}]
    assert tensorflow.jit_compile("auto", _Keras3, a100) == ("auto", "auto", None)
    assert tensorflow.jit_compile("auto", _Keras3, []) == ("auto", "auto", None)  # CPU
    rtx = [{"name": "RTX 5090", "compute_capability": "12.0"}]
    assert tensorflow.jit_compile("on", _Keras3, rtx) == (True, "on", None)
    assert tensorflow.jit_compile("off", _Keras3, a100) == (False, "off", None)

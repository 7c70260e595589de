"""The smoke's exit codes and TensorFlow error classes (kerasenv_image.smoke.errors)."""

from __future__ import annotations

import pytest

from kerasenv_image.smoke import errors

from ...conftest import REPO


class InternalError(Exception):
    """Stands in for tf.errors.InternalError: classification reads the name and the text."""


@pytest.mark.parametrize("text, kind", [
    ("Autotuner could not find any supported configs for HLO: %cudnn-conv-bias-activation = "
     'custom_call_target="__cudnn$convBiasActivationForward"', "cudnn-autotune"),
    ("Failed to load PTX text as a module: CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled "
     "with an unsupported toolchain.", "ptx-jit"),
    ("CUDA runtime implicit initialization on GPU:0 failed. Status: device kernel image is invalid", "no-kernel-image"),
    ("libdevice not found at ./libdevice.10.bc", "xla-toolchain"),
    ("NCCL: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "nccl"),
    ("failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY", "cuda-driver"),
])
def test_gpu_stack_errors_get_their_kind_exit_7_and_a_fix(text, kind):
    failure = errors.classify_tf_error(InternalError(text))
    assert (failure.kind, failure.exit_code) == (kind, errors.EXIT_GPU_RUNTIME)
    assert failure.fix and "InternalError" in failure.message and "\n" not in failure.message


def test_other_tensorflow_errors_are_exit_8_with_the_tf_log_line():
    line = "E0000 00:00:1.0 27 op_kernel.cc:1855] OP_REQUIRES failed at x.cc:1 : NOT_FOUND: no such op"
    failure = errors.classify_tf_error(InternalError("NOT_FOUND: no such op"), tf_log=line)
    assert (failure.kind, failure.exit_code, failure.tf_log) == ("tensorflow-runtime", errors.EXIT_TF_RUNTIME, line)


def test_the_tf_log_line_alone_can_name_the_class():
    line = "2026-12-01 12:00:00.1: E external/local_xla/xla/x.cc:9] Autotuner could not find any supported configs"
    assert errors.classify_tf_error(InternalError("INTERNAL: see log"), tf_log=line).kind == "cudnn-autotune"


def test_exit_codes_are_distinct_and_documented():
    codes = [errors.EXIT_UNEXPECTED, errors.EXIT_OK, errors.EXIT_USAGE, errors.EXIT_NO_GPU, errors.EXIT_TRAINING,
             errors.EXIT_OOM, errors.EXIT_OUTPUT, errors.EXIT_GPU_RUNTIME, errors.EXIT_TF_RUNTIME]
    assert len(set(codes)) == len(codes)
    doc = __import__("kerasenv_image.smoke", fromlist=["x"]).__doc__
    exit_codes_doc = (REPO / "docs" / "reference" / "exit-codes.md").read_text()
    for code in codes:
        assert f"\n  {code}  " in doc, code
        assert f"\n| {code} |" in exit_codes_doc, code
    for kind, _, _ in errors.GPU_RUNTIME_CLASSES:
        assert kind in doc and kind in exit_codes_doc, kind

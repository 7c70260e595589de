"""The in-image smoke package (images/common/kerasenv_image/smoke), its pure parts, on the
host without TensorFlow: arguments, verdict, error classes, TF log capture, report writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kerasenv_image.smoke import args as smoke_args
from kerasenv_image.smoke import environment, errors, report, tf_log, verdict

from ...conftest import REPO


def training(**over):
    base = {"first_loss": 1.4, "final_loss": 0.3, "final_accuracy": 0.95, "loss_per_epoch": [1.0, 0.5, 0.3],
            "epochs_run": 3}
    return {**base, **over}


# --- arguments ---------------------------------------------------------------------------

def test_defaults_give_a_fixed_step_count_independent_of_batch_and_replicas(monkeypatch):
    for name in ("KERASENV_STEPS_PER_EPOCH", "KERASENV_LOGICAL_CPUS", "KERASENV_BATCH_SIZE"):
        monkeypatch.delenv(name, raising=False)
    a = smoke_args.parse_args(["--batch-size", "512", "--run-id", "x"])
    assert (a.steps_per_epoch, a.logical_cpus, a.batch_size) == (32, 0, 512)
    assert a.output_dir == "/workspace/runs/x"


@pytest.mark.parametrize("argv, message", [
    (["--steps-per-epoch", "0"], "--steps-per-epoch must be at least 1"),
    (["--logical-cpus", "-1"], "--logical-cpus must be >= 0"),
    (["--batch-size", "4096", "--samples", "2048"], "--samples must be at least --batch-size"),
    (["--learning-rate", "nan"], "--learning-rate must be a positive number"),
])
def test_bad_arguments_are_one_line_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        smoke_args.parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_environment_variables_set_the_defaults(monkeypatch):
    monkeypatch.setenv("KERASENV_STEPS_PER_EPOCH", "8")
    monkeypatch.setenv("KERASENV_LOGICAL_CPUS", "4")
    a = smoke_args.parse_args([])
    assert (a.steps_per_epoch, a.logical_cpus) == (8, 4)


# --- verdict -----------------------------------------------------------------------------

def test_a_run_that_learned_on_the_requested_device_passes():
    v = verdict.verdict(training(), {"requested": "/GPU:0", "result_device": "/job:localhost/device:GPU:0", "ok": True})
    assert v["learned"] and v["placement_ok"]


def test_a_result_off_the_requested_device_fails_the_verdict_even_when_the_model_learned():
    v = verdict.verdict(training(), {"requested": "/GPU:0", "result_device": "/job:localhost/device:CPU:0", "ok": False})
    assert v["learned"] is False and v["placement_ok"] is False


@pytest.mark.parametrize("over, why", [
    ({"final_accuracy": 0.79}, "accuracy below 0.8"),
    ({"final_loss": 1.3}, "loss ratio 0.93"),
    ({"final_loss": float("nan"), "loss_per_epoch": [1.0, float("nan")]}, "not finite"),
    ({"epochs_run": 0}, "no epoch completed"),
])
def test_each_rule_of_the_verdict_can_fail_it(over, why):
    assert verdict.verdict(training(**over), {"ok": True})["learned"] is False, why


# --- TensorFlow error classes ----------------------------------------------------------------

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


# --- TF's log, kept for the report ---------------------------------------------------------

def test_the_first_error_line_that_is_not_noise_is_the_relevant_one():
    lines = [
        "2026-12-01 12:00:00.1: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:477] "
        "Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT",
        "E0000 00:00:1.0 27 cuda_executor.cc:1] failed call to cuInit: UNKNOWN ERROR (303)",
        "W0000 00:00:1.0 27 gpu_device.cc:2] Cannot dlopen some GPU libraries.",
        "E0000 00:00:1.0 27 cuda_dnn.cc:3] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
        "plain text",
    ]
    assert "CUDNN_STATUS_INTERNAL_ERROR" in tf_log.relevant_line(lines)
    assert "Cannot dlopen" in tf_log.relevant_line(lines[:3])
    assert tf_log.relevant_line(lines[:2] + ["plain text"]) is None


def test_the_tee_shows_and_keeps_what_is_written_to_fd_2():
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(REPO / 'images' / 'common')!r})\n"
        "from kerasenv_image.smoke.tf_log import StderrTee\n"
        "t = StderrTee().start()\n"
        "os.write(2, b'E0000 00:00:1.0 1 x.cc:1] boom from C++\\n')\n"
        "print('python line', file=sys.stderr)\n"
        "during = t.relevant()  # while the tee runs: it waits for the copy to catch up\n"
        "t.stop()\n"
        "print(repr(during), repr(t.relevant()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "boom from C++" in proc.stderr and "python line" in proc.stderr  # still shown
    assert proc.stdout.count("boom from C++") == 2  # and kept, during the run and after
    assert "kerasenv-stderr-tee-sync" not in proc.stderr


# --- report.json ------------------------------------------------------------------------------

def test_the_report_is_written_whole_with_nan_as_null(tmp_path):
    assert report.write_report({"loss": float("nan"), "ok": True}, str(tmp_path))
    assert json.loads((tmp_path / "report.json").read_text()) == {"loss": None, "ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_no_report_without_an_output_directory_is_not_an_error(tmp_path):
    assert report.write_report({"a": 1}, str(tmp_path / "missing")) is True
    assert not (tmp_path / "missing").exists()


# --- why no GPU --------------------------------------------------------------------------------

def test_a_container_given_only_dev_nvidia1_is_not_called_gpu_less(monkeypatch):
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(environment.glob, "glob", lambda pattern: ["/dev/nvidia1"])
    reason, _ = environment.no_gpu_reason({"present": False})
    assert "started without a GPU" not in reason and "cannot use it" in reason


def test_a_container_without_any_gpu_node_is_told_to_use_gpus_all(monkeypatch):
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(environment.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(environment.os.path, "exists", lambda path: False)
    reason, fix = environment.no_gpu_reason({"present": False})
    assert "started without a GPU" in reason and "--gpus all" in fix


def test_the_launcher_runs_the_package(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "images" / "common" / "smoke_train.py"), "--help"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0 and "--steps-per-epoch" in proc.stdout

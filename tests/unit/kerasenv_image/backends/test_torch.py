"""The PyTorch backend's parts that run without PyTorch: its limits said plainly, its errors."""

from __future__ import annotations

import types

import pytest

from kerasenv_image.backends import torch as torch_backend
from kerasenv_image.smoke import errors

from .fakes import args


def test_logical_cpus_are_a_one_line_usage_error_naming_the_backends_that_have_them():
    with pytest.raises(errors.SmokeFailure) as exc:
        torch_backend.prepare(args(logical_cpus=2), {})
    assert exc.value.exit_code == errors.EXIT_USAGE and "\n" not in exc.value.message
    assert "jax and tensorflow" in exc.value.message
    assert torch_backend.prepare(args(logical_cpus=1), {}) == {}


def test_jit_compile_is_off_by_default_and_says_why():
    value, setting, reason = torch_backend.jit_compile("auto", None, [])
    assert (value, setting) == (False, "off") and reason.startswith("off: ") and "torch.compile" in reason
    assert torch_backend.jit_compile("off", None, []) == (False, "off", None)


def test_jit_compile_on_without_a_c_compiler_is_a_usage_error(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(errors.SmokeFailure) as exc:
        torch_backend.jit_compile("on", None, [])
    assert exc.value.exit_code == errors.EXIT_USAGE and "C compiler" in exc.value.message
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/cc")
    assert torch_backend.jit_compile("on", None, []) == (True, "on", None)


def test_several_gpus_train_on_one_and_the_report_says_so():
    assert torch_backend.distribution(None, None, args(), [0]).note is None
    spread = torch_backend.distribution(None, None, args(), [0, 1])
    assert spread.replicas == 1 and "torchrun + DDP" in spread.note


class OutOfMemoryError(RuntimeError):
    pass


FAKE_TORCH = types.SimpleNamespace(cuda=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError))


def test_torch_errors_map_onto_the_smokes_kinds():
    oom = torch_backend.classify_error(FAKE_TORCH, OutOfMemoryError("CUDA out of memory. Tried"), lambda: None, "/r")
    assert (oom.exit_code, oom.kind) == (errors.EXIT_OOM, "oom")
    kernel = torch_backend.classify_error(FAKE_TORCH, RuntimeError("CUDA error: no kernel image is available"),
                                          lambda: None, "/r")
    assert (kernel.exit_code, kernel.kind) == (errors.EXIT_GPU_RUNTIME, "no-kernel-image")
    assert kernel.message.startswith("PyTorch RuntimeError")
    assert torch_backend.classify_error(FAKE_TORCH, RuntimeError("shape mismatch"), lambda: None, "/r") is None


def test_the_profile_is_a_chrome_trace_and_the_input_wait_is_not_measured(tmp_path):
    assert torch_backend.profile_report(None, None, str(tmp_path), []) is None
    window = types.SimpleNamespace(timed_steps=4, seconds=0.2)
    (tmp_path / torch_backend.TRACE_FILE).write_text("{}")
    report = torch_backend.profile_report(window, (35, 40), str(tmp_path), [])
    assert report["trace"] == str(tmp_path / torch_backend.TRACE_FILE) and report["xplane"] is None
    assert report["input_status"] == "not-measured" and report["input_wait_fraction"] is None
    assert report["step_ms"] == pytest.approx(50.0)

"""Mixed precision and XLA for the smoke (kerasenv_image.smoke.compile_options): XLA off on
Blackwell, where TF's XLA cannot target the GPU, and Keras' default elsewhere."""

from __future__ import annotations

from kerasenv_image.smoke import compile_options


class _Keras3:
    __version__ = "3.15.1"


def test_smoke_turns_xla_off_on_blackwell_and_says_why():
    value, setting, reason = compile_options.jit_compile_arg("auto", _Keras3, [
        {"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}])
    assert (value, setting) == (False, "off")
    assert "RTX 5090" in reason and "#111958" in reason and "--jit-compile on" in reason


def test_smoke_keeps_keras_default_elsewhere_and_obeys_an_explicit_choice():
    a100 = [{"name": "NVIDIA A100", "compute_capability": "8.0"}]
    assert compile_options.jit_compile_arg("auto", _Keras3, a100) == ("auto", "auto", None)
    assert compile_options.jit_compile_arg("auto", _Keras3, []) == ("auto", "auto", None)  # CPU
    rtx = [{"name": "RTX 5090", "compute_capability": "12.0"}]
    assert compile_options.jit_compile_arg("on", _Keras3, rtx) == (True, "on", None)
    assert compile_options.jit_compile_arg("off", _Keras3, a100) == (False, "off", None)

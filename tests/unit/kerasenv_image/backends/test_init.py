"""Which backend a process trains on (kerasenv_image.backends), decided without importing one."""

from __future__ import annotations

import sys

import pytest

from kerasenv_image import backends

INTERFACE = ("prepare", "import_stack", "versions", "build_info", "configure_gpus", "devices", "cuda_ordinals",
             "placement_check", "distribution", "make_dataset", "jit_compile", "training_callbacks",
             "profile_report", "classify_error", "multi_worker_supported", "bench_gpus", "bench_gpu_details",
             "bench_device_name", "bench_device_scope", "bench_batches", "is_oom")


@pytest.mark.parametrize("environ, expected", [({}, "tensorflow"), ({"KERAS_BACKEND": ""}, "tensorflow"),
                                               ({"KERAS_BACKEND": "jax"}, "jax"),
                                               ({"KERAS_BACKEND": " Torch "}, "torch")])
def test_keras_backend_chooses_and_tensorflow_is_the_default(environ, expected):
    assert backends.name(environ) == expected
    assert backends.current(environ).NAME == expected


def test_an_unknown_backend_is_one_line_naming_the_choices():
    with pytest.raises(backends.UnknownBackend) as exc:
        backends.name({"KERAS_BACKEND": "mxnet"})
    message = str(exc.value)
    assert "\n" not in message and "'mxnet'" in message and "tensorflow, jax, torch" in message


@pytest.mark.parametrize("name", backends.NAMES)
def test_every_backend_has_the_whole_seam_and_imports_no_framework(name):
    before = {m for m in ("tensorflow", "jax", "torch") if m in sys.modules}
    module = backends.current({"KERAS_BACKEND": name})
    missing = [f for f in INTERFACE if not callable(getattr(module, f, None))]
    assert not missing, f"{name} lacks {missing}"
    assert module.DISPLAY == backends.DISPLAY[name]
    assert {m for m in ("tensorflow", "jax", "torch") if m in sys.modules} == before

"""The seam between kerasenv's in-image code and the Keras backend it runs on.

Keras 3 trains on TensorFlow, JAX or PyTorch, chosen by KERAS_BACKEND (each image sets it;
unset means tensorflow, Keras' own default). The smoke training, the bench and GpuMonitor
are one implementation each; what differs per framework (importing it, its build, its
devices and their options, placing a matmul, spreading training over several devices,
its error classes, the input pipeline, TensorBoard and the profiler) is behind the same
functions in `tensorflow`, `jax` and `torch` here:

    prepare(args, smi) -> dict     before the import: environment the framework reads once
    import_stack() -> (fw, keras)
    versions(fw, keras), build_info(fw), configure_gpus(fw, args, report) -> gpus,
    devices(fw), placement_check(fw, gpus), distribution(fw, keras, args, gpus),
    make_dataset(...), jit_compile(...), training_callbacks(...), profile_report(...),
    classify_error(fw, exc, tf_log, output_dir), bench_device(...)

Importing this package imports no framework: `current()` imports the backend module,
which imports its framework only inside its functions.
"""

from __future__ import annotations

import importlib
import os

NAMES = ("tensorflow", "jax", "torch")
DISPLAY = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


class UnknownBackend(ValueError):
    """KERAS_BACKEND names a backend kerasenv does not run (one line, with the fix)."""


def name(environ=os.environ) -> str:
    """The Keras backend this process trains on: KERAS_BACKEND, default tensorflow."""
    value = (environ.get("KERAS_BACKEND") or "tensorflow").strip().lower()
    if value not in NAMES:
        raise UnknownBackend(f"KERAS_BACKEND={environ.get('KERAS_BACKEND')!r} is not a backend kerasenv runs; "
                             f"use one of {', '.join(NAMES)} (each image sets its own)")
    return value


def current(environ=os.environ):
    """The backend module of KERAS_BACKEND (kerasenv_image.backends.<name>)."""
    return importlib.import_module(f"{__name__}.{name(environ)}")

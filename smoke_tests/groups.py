"""Which variants' images cannot differ for a check, and which of them runs it in CI.

A check marked `once_per_group` tests kerasenv's own code in the image (the GpuMonitor, the
JupyterLab flavour's server), not the framework's release: what it depends on is the backend,
Keras' major release (the Keras 2 images, TF 2.14 and 2.15, have another callback and fit
loop) and the Python the venv runs, and nothing else that varies between variants (CUDA is
not touched: the GPU is nvidia-smi played from a recording, and the training runs on the CPU
in every image here; the JupyterLab server's pins are the same in every variant's
requirements-jupyter.lock, which tests/unit/repo/test_smoke_groups.py checks). With
`--once-per-group` (what `make test` passes to each variant's acceptance run) such a check
runs on the group's first variant in the matrix's order and is deselected, with a line that
names where it ran, on the others; without it, every image runs every check.

Pure helpers (no Docker), unit-tested in tests/unit/repo/test_smoke_groups.py, which loads
this file by path: absolute imports only.
"""

from __future__ import annotations


def group_key(variant) -> tuple[str, str, str]:
    """(backend, Keras major release, Python minor): what a once_per_group check depends on."""
    return (variant.backend, str(variant.keras).split(".")[0], variant.python)


def describe(key: tuple[str, str, str]) -> str:
    backend, keras, python = key
    return f"{backend}, Keras {keras}, Python {python}"


def representative(variant, variants) -> str:
    """The id of the first variant in `variants` (the matrix's order) in `variant`'s group; the
    variant itself when it is the first, or when none of `variants` shares its group."""
    key = group_key(variant)
    return next((v.id for v in variants if group_key(v) == key), variant.id)

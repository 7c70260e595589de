"""Labels: present, non-empty, https URLs, and equal to what the running image reports.

Which image of the tag is under test matters: the arm64 image's labels are the matrix's for
arm64 (`static_labels(matrix, variant, "arm64")`: its own kernels, its own GPU evidence and the
evidence gap). All of these run on the arm64 images in CI (marker arm64_ci).
"""

from __future__ import annotations

import re

import pytest

from kerasenv.matrix import labels as labels_mod

from . import platforms

pytestmark = pytest.mark.arm64_ci

OCI = labels_mod.OCI
REQUIRED_OCI = ("title", "description", "version", "source", "url", "documentation", "licenses",
                "vendor", "revision", "created", "base.name")
REQUIRED_NS = {
    "cpu": ("variant", "family", "backend", "keras", "python"),
    "cuda": ("variant", "family", "backend", "keras", "python", "cuda", "cudnn", "nccl",
             "min-driver", "min-driver-ptx-jit"),
    "rocm": ("variant", "family", "backend", "keras", "python", "rocm"),
}


def required_ns_labels(variant, arch: str = platforms.AMD64) -> list[str]:
    """The io.kerasenv.* labels that must carry a value: the family's, the framework's
    release under the backend's name (io.kerasenv.tensorflow, .jax, .torch) and, on CUDA, the
    CUDA the framework was built with. The compute capabilities are TF's tested-build facts
    (tested_builds.py): the matrix records none for JAX and PyTorch, so there the label is
    only required to equal the matrix (test_labels_equal_the_matrix_entry). A CUDA arm64 image
    says what its GPU evidence does not cover (cuda-stack.evidence-gap)."""
    keys = [*REQUIRED_NS[variant.family], variant.backend]
    if variant.family == "cuda":
        keys.append(f"{variant.backend}-built-with-cuda")
        if variant.backend == "tensorflow":
            keys.append("cuda-compute-capabilities")
        if arch == platforms.ARM64:
            keys.append("cuda-stack.evidence-gap")
    return keys


def test_the_image_is_one_the_matrix_builds_for_its_variant(image, target):
    """An arm64 image exists only for a variant with [variant.arm64]; a Linux image either way."""
    assert image.attrs.get("Os") == "linux", image.attrs.get("Os")
    assert f"linux/{target.arch}" in target.variant.platforms, \
        f"a {target.arch} image of {target.variant.id}, whose platforms are {', '.join(target.variant.platforms)}"


def test_required_labels_are_present_and_not_empty(image, target):
    keys = [f"{OCI}.{k}" for k in REQUIRED_OCI] + \
        [f"{labels_mod.NS}.{k}" for k in required_ns_labels(target.variant, target.arch)]
    missing = [k for k in keys if not (image.labels.get(k) or "").strip()]
    assert missing == []


def test_label_urls_are_https(image):
    urls = {k: v for k, v in image.labels.items() if k.endswith((".source", ".url", ".documentation"))}
    assert urls and all(v.startswith("https://") for v in urls.values()), urls


def test_created_is_rfc3339(image):
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", image.labels[f"{OCI}.created"])


def test_labels_equal_the_matrix_entry(image, matrix, target):
    expected = labels_mod.static_labels(matrix, target.variant, target.arch)
    differ = {k: (v, image.labels.get(k)) for k, v in expected.items() if image.labels.get(k) != v}
    assert differ == {}, "label: (matrix, image)"


def test_no_label_of_the_other_architecture_or_of_an_unrecorded_fact(image, matrix, target):
    """The labels the matrix writes for some image (either architecture's) that it does not write
    for this one are absent: no arm64 evidence gap on amd64, no kernel labels without this
    architecture's kernel record. (Labels from the base image, io.kerasenv.base-offline, are not
    the matrix's.)"""
    ns, v = labels_mod.NS, target.variant
    owned = {*labels_mod.static_labels(matrix, v, platforms.AMD64), f"{ns}.kernels.sass", f"{ns}.kernels.ptx"}
    if v.family == "cuda":
        owned |= {*labels_mod.static_labels(matrix, v, platforms.ARM64), f"{ns}.cuda-stack.evidence-gap"}
    named = labels_mod.static_labels(matrix, v, target.arch)
    extra = sorted(k for k in image.labels if k in owned and k not in named)
    assert extra == [], {k: image.labels[k] for k in extra}


def test_labels_equal_what_the_running_image_reports(image, inventory, target):
    ns = labels_mod.NS
    backend = target.variant.backend
    assert image.labels[f"{ns}.backend"] == inventory["backend"]
    # The framework's public release (PyTorch's local part, +cu132, is checked below).
    assert image.labels[f"{ns}.{backend}"] == inventory["framework"]["version"].split("+")[0]
    # No other framework's label: a JAX image that claimed a TensorFlow release would lie.
    others = [k for k in ("tensorflow", "jax", "torch") if k != backend and f"{ns}.{k}" in image.labels]
    assert others == [], others
    keras_seen = inventory["tf_keras"] if target.variant.keras_is_tf_keras else inventory["keras"]
    if target.variant.family == "rocm":
        assert keras_seen.split(".")[0] == image.labels[f"{ns}.keras"]
    else:
        assert image.labels[f"{ns}.keras"] == keras_seen
    assert image.labels[f"{ns}.python"] == inventory["python"].rsplit(".", 1)[0]
    if backend != "tensorflow":
        framework_build_labels_equal_the_running_framework(image, inventory, target)
        return
    info = inventory["build_info"]
    if target.variant.family == "cuda":
        # get_build_info() says "12.3" on TF 2.17 and "12.5.1" on TF 2.21: X.Y, or X.Y.patch.
        # It is the CUDA TF was built with; the wheels (io.kerasenv.cuda) may be a newer minor
        # of the same major (a GPU-verified override), never another major.
        built_label = image.labels[f"{ns}.tensorflow-built-with-cuda"]
        assert info["cuda_version"] == built_label or info["cuda_version"].startswith(built_label + "."), \
            (info["cuda_version"], built_label)
        wheels = image.labels[f"{ns}.cuda"]
        assert wheels.split(".")[0] == built_label.split(".")[0], (wheels, built_label)
        assert tuple(map(int, wheels.split("."))) >= tuple(map(int, built_label.split("."))), (wheels, built_label)
        assert image.labels[f"{ns}.cudnn"].split(".")[0] == str(info["cudnn_version"]).split(".")[0]
        assert image.labels[f"{ns}.cuda-compute-capabilities"] == ",".join(info["cuda_compute_capabilities"])


def framework_build_labels_equal_the_running_framework(image, inventory, target):
    """JAX and PyTorch: the CUDA and cuDNN the framework reports it was built with (the JAX CUDA
    plugin's _versions, torch.version.cuda and torch.backends.cudnn) against the labels."""
    ns, backend = labels_mod.NS, target.variant.backend
    build = inventory["framework"]["build"]
    assert build["is_cuda_build"] is (target.variant.family == "cuda"), build
    if target.variant.family != "cuda":
        return
    built_label = image.labels[f"{ns}.{backend}-built-with-cuda"]
    assert build["cuda_version"] == built_label or build["cuda_version"].startswith(built_label + "."), \
        (build["cuda_version"], built_label)
    wheels = image.labels[f"{ns}.cuda"]
    assert wheels.split(".")[0] == built_label.split(".")[0], (wheels, built_label)
    assert tuple(map(int, wheels.split("."))) >= tuple(map(int, built_label.split("."))), (wheels, built_label)
    # Built against cuDNN X.a, runs on the image's X.b >= X.a: same major, never older.
    cudnn_label, cudnn_built = image.labels[f"{ns}.cudnn"], build["cudnn_version"]
    assert cudnn_label.split(".")[0] == cudnn_built.split(".")[0], (cudnn_label, cudnn_built)
    assert tuple(map(int, cudnn_label.split(".")[:3])) >= tuple(map(int, cudnn_built.split("."))), \
        (cudnn_label, cudnn_built)
    if backend == "torch":
        # PyPI's torch says its CUDA in the local version too: 2.15.0+cu132 for CUDA 13.2.
        local = inventory["framework"]["version"].partition("+")[2]
        if local:
            assert local == "cu" + built_label.replace(".", ""), (local, built_label)

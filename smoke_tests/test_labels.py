"""Labels: present, non-empty, https URLs, and equal to what the running image reports."""

from __future__ import annotations

import re

from kerasenv.matrix import labels as labels_mod

OCI = labels_mod.OCI
REQUIRED_OCI = ("title", "description", "version", "source", "url", "documentation", "licenses",
                "vendor", "revision", "created", "base.name")
REQUIRED_NS = {
    "cpu": ("variant", "family", "backend", "keras", "python"),
    "cuda": ("variant", "family", "backend", "keras", "python", "cuda", "cudnn", "nccl",
             "min-driver", "min-driver-ptx-jit"),
    "rocm": ("variant", "family", "backend", "keras", "python", "rocm"),
}


def required_ns_labels(variant) -> list[str]:
    """The io.kerasenv.* labels that must carry a value: the family's, the framework's
    release under the backend's name (io.kerasenv.tensorflow, .jax, .torch) and, on CUDA, the
    CUDA the framework was built with. The compute capabilities are TF's tested-build facts
    (tested_builds.py): the matrix records none for JAX and PyTorch, so there the label is
    only required to equal the matrix (test_labels_equal_the_matrix_entry)."""
    keys = [*REQUIRED_NS[variant.family], variant.backend]
    if variant.family == "cuda":
        keys.append(f"{variant.backend}-built-with-cuda")
        if variant.backend == "tensorflow":
            keys.append("cuda-compute-capabilities")
    return keys


def test_required_labels_are_present_and_not_empty(image, target):
    keys = [f"{OCI}.{k}" for k in REQUIRED_OCI] + \
        [f"{labels_mod.NS}.{k}" for k in required_ns_labels(target.variant)]
    missing = [k for k in keys if not (image.labels.get(k) or "").strip()]
    assert missing == []


def test_label_urls_are_https(image):
    urls = {k: v for k, v in image.labels.items() if k.endswith((".source", ".url", ".documentation"))}
    assert urls and all(v.startswith("https://") for v in urls.values()), urls


def test_created_is_rfc3339(image):
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", image.labels[f"{OCI}.created"])


def test_labels_equal_the_matrix_entry(image, matrix, target):
    expected = labels_mod.static_labels(matrix, target.variant)
    differ = {k: (v, image.labels.get(k)) for k, v in expected.items() if image.labels.get(k) != v}
    assert differ == {}, "label: (matrix, image)"


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

"""Labels: present, non-empty, https URLs, and equal to what the running image reports."""

from __future__ import annotations

import re

from kerasenv.matrix import labels as labels_mod

OCI = labels_mod.OCI
REQUIRED_OCI = ("title", "description", "version", "source", "url", "documentation", "licenses",
                "vendor", "revision", "created", "base.name")
REQUIRED_NS = {
    "cpu": ("variant", "family", "tensorflow", "keras", "python"),
    "cuda": ("variant", "family", "tensorflow", "keras", "python", "cuda", "cudnn", "nccl",
             "min-driver", "min-driver-ptx-jit", "cuda-compute-capabilities"),
    "rocm": ("variant", "family", "tensorflow", "keras", "python", "rocm"),
}


def test_required_labels_are_present_and_not_empty(image, target):
    keys = [f"{OCI}.{k}" for k in REQUIRED_OCI] + \
        [f"{labels_mod.NS}.{k}" for k in REQUIRED_NS[target.variant.family]]
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
    assert image.labels[f"{ns}.tensorflow"] == inventory["tensorflow"]
    keras_seen = inventory["tf_keras"] if target.variant.keras_is_tf_keras else inventory["keras"]
    if target.variant.family == "rocm":
        assert keras_seen.split(".")[0] == image.labels[f"{ns}.keras"]
    else:
        assert image.labels[f"{ns}.keras"] == keras_seen
    assert image.labels[f"{ns}.python"] == inventory["python"].rsplit(".", 1)[0]
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

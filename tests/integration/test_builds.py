"""The real builds of `make test` (their content is checked by the acceptance suite, smoke_tests/)."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import BUILT_IN_TESTS, kerasenv


def test_build_prints_each_image_and_its_size(built_images):
    for variant_id in BUILT_IN_TESTS:
        line = built_images[f"kerasenv:{variant_id}"]
        assert re.fullmatch(rf"kerasenv:{re.escape(variant_id)}\t\d+\.\d\d GB\t\d+ s", line)


def test_built_images_are_within_their_size_budgets(built_images):
    proc = kerasenv("size", "--check", *BUILT_IN_TESTS)
    assert all(f"kerasenv:{v}" in proc.stdout for v in BUILT_IN_TESTS)


def test_size_json_on_stdout_is_the_document_alone(built_images):
    proc = kerasenv("size", "--json", "-", *BUILT_IN_TESTS)
    doc = json.loads(proc.stdout)  # the table went to stderr
    assert [image["ref"] for image in doc["images"]] == [f"kerasenv:{v}" for v in BUILT_IN_TESTS]
    assert all(image["within_budget"] for image in doc["images"])
    assert "shared by" in proc.stderr


def test_the_tensorflow_and_jax_cpu_images_share_their_base_layers(built_images, docker):
    """The Debian base and Python are the same bottom layers in every Debian-based variant: a
    registry and a host store them once (a push of the second image sends none of them)."""
    a, b = (docker.images.get(f"kerasenv:{i}").attrs["RootFS"]["Layers"] for i in ("tf2.21-cpu", "jax0.12-cpu"))
    shared = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    assert shared >= 2, "the TensorFlow and JAX CPU images no longer share their base layers"


@pytest.mark.lane_image("jax0.12-cuda12.9")  # tf2.21-cuda12.9 is there too (IMAGES_FOR_INTEGRATION)
def test_the_jax_and_default_gpu_images_store_their_cuda_layers_once(docker):
    """jax0.12-cuda12.9 pins exactly tf2.21-cuda12.9's CUDA wheels on the same base and Python, and
    `make test` builds it on the other's cached cuda-libs stage (CUDA_LAYER_HANDOVER): Debian,
    Python and the four CUDA layers are one chain of layers for both, stored once. `kerasenv size`
    counts the common layers from the base up (Docker keys a stored layer by its chain)."""
    proc = kerasenv("size", "tf2.21-cuda12.9", "jax0.12-cuda12.9")
    found = re.search(r"shared by tf2\.21-cuda12\.9 and jax0\.12-cuda12\.9: (\d+\.\d\d) GB", proc.stderr + proc.stdout)
    assert found and float(found.group(1)) >= 4.5, (proc.stdout, proc.stderr)

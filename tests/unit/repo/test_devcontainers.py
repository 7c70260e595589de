"""Every devcontainer configuration names an image of the matrix, mounts that variant's CUDA
cache volume, and its post-create probe asks the framework that image trains with."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kerasenv.matrix import schema

REPO = schema.REPO_ROOT
CONFIGS = sorted((REPO / ".devcontainer").glob("*/devcontainer.json"))
IMPORT = {"tensorflow": "import tensorflow", "jax": "import jax", "torch": "import torch"}


def load(path: Path) -> dict:
    # JSON with comments (the devcontainer format): drop the // lines.
    return json.loads(re.sub(r"^\s*//.*$", "", path.read_text(encoding="utf-8"), flags=re.M))


def test_there_is_one_configuration_per_kind():
    assert {p.parent.name for p in CONFIGS} == {"cpu", "gpu", "jax-gpu"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.parent.name)
def test_each_configuration_fits_its_variant(real_matrix, path):
    config = load(path)
    variant = real_matrix.get(config["image"].removeprefix("kerasenv:"))
    assert variant.family in ("cpu", "cuda")
    assert IMPORT[variant.backend] in config["postCreateCommand"], path
    if variant.family == "cuda":
        assert "--gpus=all" in config["runArgs"]
        assert f"source=kerasenv-cuda-cache-{variant.id}," in config["mounts"][0]
        assert variant.id in config["name"]

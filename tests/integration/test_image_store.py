"""What differs between Docker's image stores (issue 43), checked on the engine DOCKER_HOST names:
overlay2 (Debian 12's Docker 20.10) or the containerd store (Docker 28.5.2 with
features.containerd-snapshotter, the default of fresh Docker 29 installs). No kerasenv image is
needed: a one-file image made by `docker import` here, removed after."""

from __future__ import annotations

import json
import tarfile
import uuid
from pathlib import Path

import pytest

from kerasenv.engine import engine_facts
from kerasenv.images import base_offline, sizes

from .conftest import kerasenv


@pytest.fixture
def tiny_image(docker, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for i in range(50):  # many small files: block rounding shows on the containerd store
        (root / f"f{i}").write_text("x" * (100 + i))
    archive = tmp_path / "root.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(root, arcname=".")
    ref = f"kerasenv-test-store:{uuid.uuid4().hex[:8]}"
    docker.api.import_image_from_file(str(archive), repository=ref.split(":")[0], tag=ref.split(":")[1],
                                      changes=["LABEL io.kerasenv.project=kerasenv"])
    yield ref
    try:
        docker.images.remove(ref, force=True)
    except Exception:
        pass


def test_the_unpacked_size_is_the_layers_history_on_this_store(docker, tiny_image):
    image = docker.images.get(tiny_image)
    history_bytes = sum(h["Size"] for h in image.history())
    assert sizes.unpacked_bytes(image) == history_bytes > 50 * 100
    assert sizes.measure(docker, tiny_image, None).total == history_bytes


def test_rewriting_an_imported_images_architecture_loads_on_this_store(docker, tiny_image, tmp_path):
    # base-offline --platform linux/arm64 on an amd64 engine: the config edited in place was
    # refused by the containerd store (the tag then named nothing: "recorded as , not arm64").
    base_offline._set_architecture(docker, tiny_image, "arm64", tmp_path)
    image = docker.images.get(tiny_image)
    assert (image.attrs["Architecture"], image.attrs.get("Variant")) == ("arm64", "v8")


def test_the_doctor_names_this_engines_image_store(docker):
    engine = engine_facts.ask(docker)
    report = json.loads(kerasenv("doctor", "--json").stdout)
    store = [c for c in report["host"] if c["name"] == "image-store"]
    assert len(store) == 1 and engine.image_store in store[0]["message"]
    driver_type = dict((r[0], r[1]) for r in docker.info().get("DriverStatus") or []).get("driver-type")
    assert ("image store containerd" in store[0]["message"]) == (driver_type == engine_facts.CONTAINERD_SNAPSHOTTER)

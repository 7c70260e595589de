"""Push and pull through a real registry on 127.0.0.1 (Debian's docker-registry, the CNCF
distribution registry): digests and labels survive the round trip, and the layers two images
share (the Debian base and Python) are sent once.

The pair is the two CPU images, TensorFlow and JAX: they share exactly what every Debian-based
variant shares, and pushing the 6.7 GB GPU image instead took 240 s of CI for the same checks
(its CUDA layer's pull is issue 23's benchmark, not a test)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from kerasenv.publish import tags

from .conftest import default_signal_dispositions, free_port, kerasenv

PUSHED = ("tf2.21-cpu", "jax0.10-cpu")
KEEP = "kerasenv-test/keep"


def stored_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "docker" / "registry" / "v2" / "blobs").rglob("data"))


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.fail("Debian's docker-registry is missing: `sudo make test-prereqs` installs it "
                    "(or `sudo apt-get install -y docker-registry`); `make test` does it as root")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    # Stopped by terminate() below: SIGTERM must not be inherited as ignored.
    proc = subprocess.Popen([exe, "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=default_signal_dispositions)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        yield {"address": f"127.0.0.1:{port}", "data": root / "data"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        _untag_registry_refs(f"127.0.0.1:{port}/")
        # The pushed blobs (4 GB with the CUDA image): pytest would keep them in its base
        # temporary directory for the next three sessions.
        shutil.rmtree(root, ignore_errors=True)


def _untag_registry_refs(prefix: str) -> None:
    """Pulls leave `<registry>/kerasenv:<id>` tags behind: remove them (not the images)."""
    from kerasenv.engine import docker_client

    client = docker_client.client()
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(prefix):
                client.images.remove(tag)


def shared_prefix(docker, first: str, second: str) -> int:
    """How many bottom layers two local images have in common."""
    a, b = (docker.images.get(f"kerasenv:{i}").attrs["RootFS"]["Layers"] for i in (first, second))
    return next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def push(variant_id: str, registry: str) -> dict:
    return json.loads(kerasenv("push", variant_id, "--registry", registry, "--json", timeout=3600).stdout)


def test_push_delete_pull_round_trip_keeps_digests_and_labels(docker, matrix, registry, built_images,
                                                                 jax_cpu_image):
    address, data = registry["address"], registry["data"]
    shared = shared_prefix(docker, *PUSHED)
    assert shared >= 2, "the TensorFlow and JAX CPU images no longer share their base layers"
    pushed, measured = {}, {}
    for variant_id in PUSHED:
        before = stored_bytes(data) if data.exists() else 0
        pushed[variant_id] = push(variant_id, address)
        measured[variant_id] = stored_bytes(data) - before
    # The JAX image sends only what differs: the base layers the TF image sent are there.
    assert pushed["jax0.10-cpu"]["layers_already_there"] >= shared, (pushed, shared)
    assert measured["jax0.10-cpu"] > 100_000_000, measured  # its own venv (JAX, Keras) did go
    labels_before = {v: docker.images.get(f"kerasenv:{v}").labels for v in PUSHED}
    repo = tags.repository(address)
    for variant_id in PUSHED:
        # A private reference keeps the image (and Docker's build cache under it) while
        # every tag the push created is deleted; the full-transfer pull is measured by
        # hand in benchmarks/README.md.
        docker.images.get(f"kerasenv:{variant_id}").tag(KEEP, variant_id)
    for variant_id in PUSHED:  # delete every local tag of the pushed images
        for tag in tags.tags(matrix, matrix.get(variant_id)):
            for ref in (f"{repo}:{tag}", f"kerasenv:{tag}"):
                if docker.images.list(name=ref):
                    docker.images.remove(ref)
    for variant_id in PUSHED:
        pulled = json.loads(kerasenv("pull", variant_id, "--registry", address, "--json", timeout=3600).stdout)
        assert pulled["digest"] == pushed[variant_id]["digest"]
        assert pulled["stale_labels"] == {}
        image = docker.images.get(f"kerasenv:{variant_id}")
        assert f"{repo}@{pushed[variant_id]['digest']}" in image.attrs["RepoDigests"]
        assert image.labels == labels_before[variant_id]
    for variant_id in PUSHED:
        docker.images.remove(f"{KEEP}:{variant_id}")
    print({"stored_bytes": measured, "push": {v: p["seconds"] for v, p in pushed.items()}})


def test_pull_says_when_a_tag_is_stale(docker, matrix, registry, built_images, tmp_path):
    """A tag whose labels no longer match the matrix (an old build) is reported."""
    address = registry["address"]
    stale_ref = f"{tags.repository(address)}:tf2.21-cpu"
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text('FROM kerasenv:tf2.21-cpu\nLABEL io.kerasenv.keras="3.0.0"\n')
    docker.images.build(path=str(context), tag=stale_ref, rm=True, forcerm=True)
    docker.images.push(tags.repository(address), tag="tf2.21-cpu")
    docker.images.remove(stale_ref)
    proc = kerasenv("pull", "tf2.21-cpu", "--registry", address, "--json", timeout=900)
    assert json.loads(proc.stdout)["stale_labels"] == {"io.kerasenv.keras": ["3.15.1", "3.0.0"]}
    assert f"{stale_ref} is stale: io.kerasenv.keras='3.0.0' (matrix: '3.15.1')" in proc.stderr
    kerasenv("build", "tf2.21-cpu", timeout=3600)  # restore the real local image

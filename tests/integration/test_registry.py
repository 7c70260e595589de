"""Push and pull through a real registry on 127.0.0.1 (Debian's docker-registry, the CNCF
distribution registry): digests and labels survive the round trip, and the layers two images
share (the Debian base and Python) are sent once; a zstd push unpacks in containerd, and
Docker < 23's refusal of it is explained.

The pair is the two CPU images, TensorFlow and JAX: they share exactly what every Debian-based
variant shares, and pushing the 6.7 GB GPU image instead took 240 s of CI for the same checks
(its CUDA layer's pull is `kerasenv bench-pull`'s measurement, not a test)."""

from __future__ import annotations

import json
import shutil

import pytest

from kerasenv.engine import containerd, docker_client
from kerasenv.publish import compression, local_registry, tags

from .conftest import kerasenv

PUSHED = ("tf2.21-cpu", "jax0.10-cpu")
KEEP = "kerasenv-test/keep"


@pytest.fixture(scope="module")
def registry():
    """A throwaway registry on 127.0.0.1 (publish/local_registry: Debian's docker-registry);
    its blobs go with it."""
    if shutil.which("docker-registry") is None:
        pytest.fail("Debian's docker-registry is missing: `sudo make test-prereqs` installs it "
                    "(or `sudo apt-get install -y docker-registry`); `make test` does it as root")
    with local_registry.running() as reg:
        try:
            yield reg
        finally:
            _untag_registry_refs(f"{reg.address}/")


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


def push(variant_id: str, registry: str, *more: str) -> dict:
    [line] = kerasenv("push", variant_id, "--registry", registry, "--json", *more, timeout=3600).stdout.splitlines()
    return json.loads(line)


def test_push_delete_pull_round_trip_keeps_digests_and_labels(docker, matrix, registry, built_images,
                                                                 jax_cpu_image):
    address = registry.address
    shared = shared_prefix(docker, *PUSHED)
    assert shared >= 2, "the TensorFlow and JAX CPU images no longer share their base layers"
    pushed, measured = {}, {}
    for variant_id in PUSHED:
        before = registry.stored_bytes()
        pushed[variant_id] = push(variant_id, address)
        measured[variant_id] = registry.stored_bytes() - before
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
    address = registry.address
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


def test_a_zstd_push_unpacks_in_containerd_and_docker_before_23_refuses_it_in_one_line(docker, registry,
                                                                                      jax_cpu_image):
    """`kerasenv push --compression zstd` writes the `-zstd` tag with skopeo; a throwaway
    containerd pulls, unpacks and runs it. Docker 20.10 (the engine here) cannot: the tool
    refuses the `-zstd` tag before pulling, and a zstd image under a plain tag (pushed by
    another tool) fails in the daemon, caught and explained in one line."""
    address, variant_id = registry.address, "jax0.10-cpu"
    pushed = push(variant_id, address, "--compression", "zstd")
    ref = f"{address}/kerasenv:{variant_id}-zstd"
    assert (pushed["ref"], pushed["compression"]) == (ref, "zstd")
    manifest = registry.manifest("kerasenv", f"{variant_id}-zstd")
    assert local_registry.layer_media_types(manifest) == {"application/vnd.oci.image.layer.v1.tar+zstd"}
    local = docker.images.get(jax_cpu_image)
    assert len(manifest["layers"]) == len(local.attrs["RootFS"]["Layers"])
    with containerd.running() as engine:
        engine.pull(ref)
        assert engine.snapshot_count() == len(manifest["layers"])  # every layer unpacked
        ran = engine.run(ref, "kerasenv-test-zstd", "python", "-c",
                         "import jax, keras; print(keras.backend.backend(), jax.__version__)")
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert ran.stdout.split()[0] == "jax"
    version = docker.version()["Version"]
    zstd_only = f"{address}/zstd-only"  # a zstd image under a plain tag, as another tool could push it
    compression.copy_tag(ref, f"{zstd_only}/kerasenv:{variant_id}")
    tagged = {t for image in docker.images.list() for t in image.tags}
    if docker_client.unpacks_zstd(version):  # Docker >= 23: both pulls work
        for args in (("--registry", address, "--compression", "zstd"), ("--registry", zstd_only)):
            kerasenv("pull", variant_id, *args, timeout=900)
        return
    refused = kerasenv("pull", variant_id, "--registry", address, "--compression", "zstd", check=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        f"kerasenv: error: {ref} has zstd layers, which Docker {version} cannot unpack (Docker >= 23.0 and "
        f"containerd can): pull the gzip tag {address}/kerasenv:{variant_id} instead "
        f"(`kerasenv pull {variant_id} --registry {address}`), or upgrade Docker"]
    failed = kerasenv("pull", variant_id, "--registry", zstd_only, check=False, timeout=900)
    assert failed.returncode == 2, failed.stderr
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith(f"kerasenv: error: {zstd_only}/kerasenv:{variant_id} has zstd layers, which Docker "
                           f"{version} cannot unpack"), failed.stderr
    assert f"`kerasenv push {variant_id} --registry {zstd_only}`" in last
    # the daemon kept nothing of the failed pull
    assert {t for image in docker.images.list() for t in image.tags} == tagged

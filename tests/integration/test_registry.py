"""Push and pull through a real registry on 127.0.0.1 (Debian's docker-registry, the CNCF
distribution registry): digests and labels survive the round trip, a tag whose labels left the
matrix is reported, and the layers an image shares with one already pushed are not sent again;
a zstd push unpacks in containerd, and Docker < 23's refusal of it is explained.

One image, the JAX CPU one (2.64 GB; the TF CPU image is smaller, 1.80 GB, but the test lane's
Podman checks `docker save` it while this module removes and pulls back its image's tags), pushed
once per module (fixture `pushed`); the stale tag is that image with one label changed, so its push
sends no layer. Pushing the TF CPU
image too (for the shared base layers) cost CI about 90 s more, and the 6.7 GB GPU image
240 s, for the same checks (its CUDA layers' pull is `kerasenv bench-pull`'s measurement)."""

from __future__ import annotations

import json
import shutil

import pytest

from kerasenv.engine import containerd, docker_client
from kerasenv.publish import compression, local_registry, tags

from .conftest import kerasenv

PUSHED = "jax0.12-cpu"
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
    for tag in docker_client.local_tags(client):
        if tag.startswith(prefix):
            client.images.remove(tag)


def push(variant_id: str, registry: str, *more: str) -> dict:
    [line] = kerasenv("push", variant_id, "--registry", registry, "--json", *more, timeout=3600).stdout.splitlines()
    return json.loads(line)


@pytest.fixture(scope="module")
def pushed(registry, jax_cpu_image):
    """`kerasenv push jax0.12-cpu` (gzip) to the registry, once: its JSON and the bytes the
    registry stored for it."""
    before = registry.stored_bytes()
    result = push(PUSHED, registry.address)
    return result, registry.stored_bytes() - before


def test_push_delete_pull_round_trip_keeps_digests_and_labels(docker, matrix, registry, pushed):
    address = registry.address
    result, stored = pushed
    assert stored > 100_000_000, stored  # its venv (JAX, Keras) went, not only a manifest
    labels_before = docker.images.get(f"kerasenv:{PUSHED}").labels
    repo = tags.repository(address)
    # A private reference keeps the image (and Docker's build cache under it) while every tag
    # the push created is deleted; the full-transfer pull is measured by `kerasenv bench-pull`.
    docker.images.get(f"kerasenv:{PUSHED}").tag(KEEP, PUSHED)
    for tag in tags.tags(matrix, matrix.get(PUSHED)):  # delete every local tag of the pushed image
        for ref in (f"{repo}:{tag}", f"kerasenv:{tag}"):
            if docker_client.has_image(docker, ref):
                docker.images.remove(ref)
    pulled = json.loads(kerasenv("pull", PUSHED, "--registry", address, "--json", timeout=3600).stdout)
    assert pulled["digest"] == result["digest"]
    assert pulled["stale_labels"] == {}
    image = docker.images.get(f"kerasenv:{PUSHED}")
    assert f"{repo}@{result['digest']}" in image.attrs["RepoDigests"]
    assert image.labels == labels_before
    docker.images.remove(f"{KEEP}:{PUSHED}")
    print({"stored_bytes": stored, "push_seconds": result["seconds"]})


def test_pull_says_when_a_tag_is_stale_and_a_shared_layer_is_not_sent_again(docker, matrix, registry, pushed,
                                                                           tmp_path):
    """A tag whose labels no longer match the matrix (an old build) is reported. It is the
    pushed image with one label changed: every layer is already in the registry."""
    address = registry.address
    keras = matrix.get(PUSHED).keras
    stale_ref = f"{tags.repository(address)}:{PUSHED}"
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(f'FROM kerasenv:{PUSHED}\nLABEL io.kerasenv.keras="3.0.0"\n')
    docker.images.build(path=str(context), tag=stale_ref, rm=True, forcerm=True)
    layers = len(set(docker.images.get(stale_ref).attrs["RootFS"]["Layers"]))
    statuses = [e.get("status", "") for e in docker.images.push(tags.repository(address), tag=PUSHED,
                                                                stream=True, decode=True)]
    assert statuses.count("Layer already exists") == layers, statuses
    docker.images.remove(stale_ref)
    proc = kerasenv("pull", PUSHED, "--registry", address, "--json", timeout=900)
    assert json.loads(proc.stdout)["stale_labels"] == {"io.kerasenv.keras": [keras, "3.0.0"]}
    assert f"{stale_ref} is stale: io.kerasenv.keras='3.0.0' (matrix: '{keras}')" in proc.stderr
    kerasenv("build", PUSHED, timeout=3600)  # restore the real local image (its build cache is kept)


def test_a_zstd_push_unpacks_in_containerd_and_docker_before_23_refuses_it_in_one_line(docker, registry,
                                                                                      jax_cpu_image):
    """`kerasenv push --compression zstd` writes the `-zstd` tag with skopeo; a throwaway
    containerd pulls, unpacks and runs it. Docker 20.10 (the engine here) cannot: the tool
    refuses the `-zstd` tag before pulling, and a zstd image under a plain tag (pushed by
    another tool) fails in the daemon, caught and explained in one line."""
    address, variant_id = registry.address, PUSHED
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
    # (docker_client.local_tags: make test's test lanes remove tested images meanwhile)
    tagged = docker_client.local_tags(docker)
    if docker_client.unpacks_zstd(version):  # Docker >= 23: both pulls work
        from kerasenv.engine import engine_facts

        if engine_facts.ask(docker).containerd_store:
            # The containerd store fetches nothing of an image whose layers it has unpacked (the
            # local image, gzip) and then keeps only its manifest (issue 43; kerasenv pull refuses
            # that in one line): without the local image, the engine downloads and unpacks zstd.
            docker.images.remove(jax_cpu_image)
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
    # the daemon kept nothing of the failed pull: no tag that was not there before (the test
    # lanes may have removed some meanwhile)
    assert docker_client.local_tags(docker) - tagged == set()


def test_an_image_index_over_two_architectures_round_trips_and_pull_picks_each_platform(docker, matrix, registry):
    """The index `kerasenv push` writes for a variant with an arm64 image (publish/index.py), made
    here over the two Debian bases the arm64 and amd64 images are built on (real images of each
    architecture, 80 MB each: pushing the 7-8 GB arm64 CUDA images costs CI minutes of gzip; their
    own push is the same code, run by hand, and their pull is `kerasenv bench-pull --platform`)."""
    from kerasenv.publish import index

    base = next(v for v in matrix.variants if v.arm64).base_image
    repo = f"{registry.address}/kerasenv-test/base"
    for arch, local in (("amd64", base), ("arm64", f"{base}-arm64")):
        image = docker.images.get(local)
        assert image.attrs["Architecture"] == arch
        image.tag(repo, index.arch_tag("t", arch))
        for event in docker.images.push(repo, tag=index.arch_tag("t", arch), stream=True, decode=True):
            assert "error" not in event, event
    digest = index.create(f"{repo}:t", [f"{repo}:t-amd64", f"{repo}:t-arm64"], insecure=True)
    assert digest.startswith("sha256:")
    assert index.platforms_of(f"{repo}:t", insecure=True) == ["linux/amd64", "linux/arm64"]
    # The containerd image store (Docker 28.5.2 here, issue 43) keeps every platform pulled under
    # the one tag, and a plain inspect answers for the host's platform when it is there (it is:
    # its layers were pushed from here); kerasenv pull asks for the platform (Engine API >= 1.49).
    from kerasenv.engine import engine_facts

    multi = engine_facts.ask(docker).multi_platform_tags
    api_version = docker.version().get("ApiVersion")
    try:
        for arch in ("arm64", "amd64"):
            _untag_registry_refs(f"{repo}:")
            docker.api.pull(repo, tag="t", platform=f"linux/{arch}")
            got = (docker_client.inspect_platform(docker, f"{repo}:t", f"linux/{arch}", api_version) if multi
                   else docker.images.get(f"{repo}:t").attrs)
            assert got["Architecture"] == arch
        # without a platform the engine takes its own architecture from the index
        _untag_registry_refs(f"{repo}:")
        docker.api.pull(repo, tag="t")
        assert docker.images.get(f"{repo}:t").attrs["Architecture"] == "amd64"
    finally:
        _untag_registry_refs(f"{repo}:")

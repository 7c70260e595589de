"""`kerasenv clean`: what goes, found by the project's labels, and what stays (the build
cache, unless --images), against a stand-in for the docker SDK's client."""

from __future__ import annotations

from types import SimpleNamespace

from kerasenv.images import clean
from kerasenv.engine.docker_client import PROJECT_LABEL


class Removable(SimpleNamespace):
    def remove(self, **kwargs):
        self.removed = kwargs or True


class FakeClient:
    def __init__(self, built: set[str]):
        self.built = built
        self.containers_ = [Removable(name="kerasenv-run-a"), Removable(name="kerasenv-smoke-b")]
        self.networks_ = [Removable(name="kerasenv-mw-1")]
        self.volumes_ = [Removable(name="kerasenv-cuda-cache-tf2.21-cuda12.9")]
        self.calls: list[tuple] = []
        self.containers = SimpleNamespace(list=self._list("containers", self.containers_))
        self.networks = SimpleNamespace(list=self._list("networks", self.networks_))
        self.volumes = SimpleNamespace(list=self._list("volumes", self.volumes_))
        self.images = SimpleNamespace(list=lambda name: [name] if name in self.built else [],
                                      remove=lambda ref: self.calls.append(("images.remove", ref)),
                                      prune=self._prune)

    def _list(self, kind, items):
        def list_(**kwargs):
            self.calls.append((f"{kind}.list", kwargs))
            return items
        return list_

    def _prune(self, filters):
        self.calls.append(("images.prune", filters))
        label = filters["label"]
        return {"ImagesDeleted": [{"Deleted": f"sha256:{label}"}, {"Untagged": "x"}], "SpaceReclaimed": 10**6}


def test_plain_clean_removes_containers_networks_and_superseded_images_but_keeps_the_build_cache(real_matrix):
    client, said = FakeClient(built={"kerasenv:tf2.21-cpu"}), []
    done = clean.clean(client, real_matrix, say=said.append)
    assert (done.containers, done.reclaimed_bytes) == (2, 10**6)
    assert said == ["removed container kerasenv-run-a", "removed container kerasenv-smoke-b",
                    "removed network kerasenv-mw-1", "removed dangling image sha256:io.kerasenv.variant"]
    assert all(c.removed == {"force": True} for c in client.containers_) and client.networks_[0].removed
    # The containers the tool started, not every one with the project label: those include
    # any `docker run kerasenv:<id>` of a user's (containers inherit their image's labels).
    assert ("containers.list", {"all": True, "filters": {"label": "io.kerasenv.kind"}}) in client.calls
    assert not any(name == "containers.list" and kwargs.get("filters", {}).get("label") == PROJECT_LABEL
                   for name, kwargs in client.calls)
    prunes = [filters for name, filters in client.calls if name == "images.prune"]
    assert prunes == [{"dangling": True, "label": "io.kerasenv.variant"}]  # not the project label: build cache
    assert not any(name == "images.remove" for name, _ in client.calls)
    assert not hasattr(client.volumes_[0], "removed")


def test_clean_images_also_removes_every_built_image_the_build_cache_and_the_jit_caches(real_matrix):
    client, said = FakeClient(built={"kerasenv:tf2.21-cpu", real_matrix.get(real_matrix.default_gpu).image_ref}), []
    done = clean.clean(client, real_matrix, images=True, say=said.append)
    assert done.reclaimed_bytes == 2 * 10**6
    removed = [ref for name, ref in client.calls if name == "images.remove"]
    assert sorted(removed) == sorted(client.built)
    assert [filters["label"] for name, filters in client.calls if name == "images.prune"] == [
        "io.kerasenv.variant", PROJECT_LABEL]
    assert ("volumes.list", {"filters": {"label": "io.kerasenv.kind=cuda-cache"}}) in client.calls
    assert client.volumes_[0].removed
    assert said[-1] == "removed volume kerasenv-cuda-cache-tf2.21-cuda12.9"
    assert f"removed image {real_matrix.get(real_matrix.default_gpu).image_ref}" in said

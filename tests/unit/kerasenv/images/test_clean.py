"""`kerasenv clean`: what goes, found by the project's labels, and what stays (the build
cache, unless --images), against a stand-in for the docker SDK's client."""

from __future__ import annotations

from types import SimpleNamespace

from kerasenv.images import clean
from kerasenv.engine import docker_client
from kerasenv.engine.docker_client import PROJECT_LABEL


class Removable(SimpleNamespace):
    def remove(self, **kwargs):
        self.removed = kwargs or True


class FakeClient:
    def __init__(self, built: set[str]):
        self.built = built
        self.containers_ = [Removable(name="kerasenv-run-a", labels={}), Removable(name="kerasenv-smoke-b", labels={})]
        self.networks_ = [Removable(name="kerasenv-mw-1")]
        self.volumes_ = [Removable(name="kerasenv-cuda-cache-tf2.21-cuda12.9")]
        self.calls: list[tuple] = []
        self.containers = SimpleNamespace(list=self._list("containers", self.containers_))
        self.networks = SimpleNamespace(list=self._list("networks", self.networks_))
        self.volumes = SimpleNamespace(list=self._list("volumes", self.volumes_))
        # GET /images/json, as docker_client.local_tags asks it
        self.api = SimpleNamespace(images=lambda name=None: [{"RepoTags": [name]}] if name in self.built else [])
        self.images = SimpleNamespace(remove=lambda ref: self.calls.append(("images.remove", ref)),
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


def test_a_container_whose_cli_is_still_running_stays(tmp_path):
    """make clean in one terminal must not remove the lab another kerasenv command is serving."""
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cmdline").write_bytes(b"/venv/bin/python\0/venv/bin/kerasenv\0lab\0")
    (tmp_path / "777").mkdir()
    (tmp_path / "777" / "cmdline").write_bytes(b"sleep\0" + b"100\0")  # a reused PID: not ours
    assert clean.cli_is_running("4242", tmp_path)
    assert not clean.cli_is_running("777", tmp_path)
    assert not clean.cli_is_running("999", tmp_path) and not clean.cli_is_running(None, tmp_path)


def test_clean_keeps_a_live_cli_s_container_and_removes_a_dead_one_s(monkeypatch):
    client = FakeClient(set())
    live = Removable(name="kerasenv-lab-live", labels={docker_client.CLI_PID_LABEL: "4242"})
    dead = Removable(name="kerasenv-lab-dead", labels={docker_client.CLI_PID_LABEL: "999"})
    client.containers_[:] = [live, dead]
    monkeypatch.setattr(clean, "cli_is_running", lambda pid: pid == "4242")
    lines = []
    result = clean.clean(client, None, say=lines.append)
    assert not hasattr(live, "removed") and dead.removed
    assert result.containers == 1
    assert "kept container kerasenv-lab-live: its kerasenv command (pid 4242) is still running" in lines

"""publish/continuity.py: a release keeps the previous release's blobs for the layers it shares
with it (issue 52), and every push says so, by diff id. skopeo's answers are recorded shapes of
`skopeo inspect --raw` / `--config --raw` (constructed from the OCI image spec's fields)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kerasenv.publish import continuity, registry
from kerasenv.publish.continuity import Published


def published(ref: str, *layers: tuple[str, str, int]) -> Published:
    return Published(ref, tuple(layers))


PREVIOUS = published("r/kerasenv:tf2.21-cpu", ("sha256:base", "sha256:gz-base", 30), ("sha256:venv", "sha256:gz-venv", 500),
                     ("sha256:fixes-n", "sha256:gz-fixes-n", 5))


def test_a_security_rebuild_keeps_every_blob_but_the_last():
    new = published("r/kerasenv:tf2.21-cpu", ("sha256:base", "sha256:gz-base", 30), ("sha256:venv", "sha256:gz-venv", 500),
                    ("sha256:fixes-n1", "sha256:gz-fixes-n1", 6))
    c = continuity.compare(PREVIOUS, new)
    assert (c.kept, c.recompressed, c.new_bytes, c.total) == (2, (), 6, 3)
    assert continuity.report(c, PREVIOUS, new) == [
        "  r/kerasenv:tf2.21-cpu: kept 2 of 3 layer blobs of the release it replaced; a client holding that one "
        "fetches 0.0 MB"]


def test_the_same_layer_under_another_blob_is_named_as_the_compressor_s_change():
    new = published("r/kerasenv:tf2.21-cpu-zstd", ("sha256:base", "sha256:gz-base", 30),
                    ("sha256:venv", "sha256:other-venv", 480), ("sha256:fixes-n1", "sha256:z", 6))
    c = continuity.compare(PREVIOUS, new)
    assert (c.kept, c.recompressed, c.new_bytes) == (1, ("sha256:venv",), 486)
    lines = continuity.report(c, PREVIOUS, new)
    assert len(lines) == 2 and "were compressed to other blobs (venv)" in lines[1]
    assert "the compressor changed" in lines[1] and "push from the pinned one" in lines[1]


def fake_skopeo(monkeypatch, answers: dict):
    """answers: ('--raw' or '--config', ref) -> JSON or None (skopeo failed)."""
    calls = []

    def run(command, capture_output, text, timeout):
        kind = "--config" if "--config" in command else "--raw"
        ref = command[-1].removeprefix("docker://")
        calls.append((kind, ref, "--tls-verify=false" in command))
        answer = answers.get((kind, ref))
        return SimpleNamespace(returncode=0 if answer is not None else 1, stdout=json.dumps(answer or {}),
                               stderr="" if answer is not None else "manifest unknown")
    monkeypatch.setattr(continuity.subprocess, "run", run)
    monkeypatch.setattr(continuity.compression_mod, "_skopeo", lambda: "/usr/bin/skopeo")
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    return calls


def test_read_pairs_the_manifest_s_blobs_with_the_config_s_diff_ids(monkeypatch):
    ref = "127.0.0.1:5000/kerasenv:tf2.21-cpu"
    calls = fake_skopeo(monkeypatch, {
        ("--raw", ref): {"schemaVersion": 2, "layers": [{"digest": "sha256:b1", "size": 30}, {"digest": "sha256:b2", "size": 5}]},
        ("--config", ref): {"rootfs": {"type": "layers", "diff_ids": ["sha256:d1", "sha256:d2"]}}})
    got = continuity.read(ref)
    assert got == published(ref, ("sha256:d1", "sha256:b1", 30), ("sha256:d2", "sha256:b2", 5))
    assert calls == [("--raw", ref, True), ("--config", ref, True)]  # plain http on 127.0.0.1


def test_read_of_a_first_release_or_an_index_is_none(monkeypatch):
    fake_skopeo(monkeypatch, {("--raw", "reg.example/kerasenv:idx"): {"manifests": []}})
    assert continuity.read("reg.example/kerasenv:none") is None
    assert continuity.read("reg.example/kerasenv:idx") is None


class Client:
    def __init__(self, pull_fails: bool = False):
        self.calls = []
        self.pull_fails = pull_fails
        client = self

        class Images:
            def pull(self, repo, tag):
                client.calls.append(("pull", f"{repo}:{tag}"))
                if client.pull_fails:
                    raise RuntimeError("500 Server Error: manifest unknown\nmore")
                return SimpleNamespace(id="sha256:previous")

            def remove(self, image, noprune):
                client.calls.append(("remove", image))

        self.images = Images()


def test_prime_pulls_the_previous_release_and_forget_removes_it_after_the_push():
    client, said = Client(), []
    primed = continuity.prime(client, "r/kerasenv", "tf2.21-cpu", PREVIOUS, said.append)
    continuity.forget(client, primed, "sha256:new")
    assert client.calls == [("pull", "r/kerasenv:tf2.21-cpu"), ("remove", "sha256:previous")] and said == []
    assert continuity.prime(client, "r/kerasenv", "tf2.21-cpu", None, said.append) is None  # a first release


def test_a_failed_prime_is_one_line_and_the_push_goes_on():
    client, said = Client(pull_fails=True), []
    assert continuity.prime(client, "r/kerasenv", "tf2.21-cpu", PREVIOUS, said.append) is None
    assert said == ["  could not pull the release r/kerasenv:tf2.21-cpu replaces (500 Server Error: manifest unknown): "
                    "its blobs may be sent again"]


def test_push_pulls_the_previous_release_before_its_first_tag_and_reports_what_it_kept(real_matrix, monkeypatch):
    """The whole gzip path of `kerasenv push`: previous release read, pulled, every tag pushed, the
    previous image removed, the kept blobs reported."""
    from kerasenv.publish import tags as tags_mod

    v = real_matrix.get("tf2.21-cpu")
    events, reads = [], iter([PREVIOUS, published("r/kerasenv:tf2.21-cpu", *PREVIOUS.layers[:2],
                                                  ("sha256:fixes-n1", "sha256:gz-n1", 6))])
    monkeypatch.setattr(registry.continuity, "can_check", lambda: True)
    monkeypatch.setattr(registry.continuity, "read", lambda ref, **kw: next(reads))
    monkeypatch.setattr(registry.continuity, "prime", lambda client, repo, tag, previous, say:
                        events.append(("prime", f"{repo}:{tag}")) or "sha256:previous")
    monkeypatch.setattr(registry.continuity, "forget", lambda client, primed, pushed: events.append(("forget", primed)))
    monkeypatch.setattr(registry, "_push_tag", lambda client, image, repo, tag, *a: events.append(("push", tag))
                        or ("sha256:m", 1, 2))
    image = SimpleNamespace(id="sha256:new", labels={}, tags=[])
    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: image))
    said = []
    registry._push_single(client, real_matrix, v, "r", "gzip", said.append, registry.RetryPolicy.from_env())
    pushed = [tag for tag in tags_mod.tags(real_matrix, v, {})]
    assert events == [("prime", "r/kerasenv:tf2.21-cpu")] + [("push", t) for t in pushed] + [("forget", "sha256:previous")]
    assert "kept 2 of 3 layer blobs of the release it replaced" in said[0]


def test_without_skopeo_there_is_no_previous_release_to_check_and_the_push_goes_on(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(continuity.subprocess, "run", lambda *a, **k: pytest.fail("skopeo run without skopeo"))
    assert continuity.read("reg.example/kerasenv:tf2.21-cpu") is None


def test_a_gzip_push_without_skopeo_says_in_one_line_what_it_cannot_do(real_matrix, monkeypatch):
    monkeypatch.setattr(registry.continuity, "can_check", lambda: False)
    monkeypatch.setattr(registry.continuity, "read", lambda ref, **kw: None)
    monkeypatch.setattr(registry, "_push_tag", lambda *a: ("sha256:m", 1, 0))
    image = SimpleNamespace(id="sha256:new", labels={}, tags=[])
    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: image))
    said = []
    registry._push_single(client, real_matrix, real_matrix.get("tf2.21-cpu"), "r", "gzip", said.append,
                          registry.RetryPolicy.from_env())
    assert said[0] == continuity.NO_SKOPEO and "apt-get install -y skopeo" in said[0]

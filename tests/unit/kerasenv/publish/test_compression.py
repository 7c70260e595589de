"""Which tags a push writes per compression, when skopeo is told plain HTTP, how Docker
20.10's zstd failure is recognised, and the skopeo command lines (recorded, not run)."""

from __future__ import annotations

import subprocess

import pytest

from kerasenv.engine import docker_client
from kerasenv.errors import KerasenvError, UsageError
from kerasenv.publish import compression


def test_tags_per_compression():
    tags = ["tf2.21-cpu", "latest-cpu"]
    assert compression.tags_for(tags, "gzip") == [("tf2.21-cpu", "gzip"), ("latest-cpu", "gzip")]
    assert compression.tags_for(tags, "zstd") == [("tf2.21-cpu-zstd", "zstd"), ("latest-cpu-zstd", "zstd")]
    assert [t for t, _ in compression.tags_for(tags, "both")] == [
        "tf2.21-cpu", "latest-cpu", "tf2.21-cpu-zstd", "latest-cpu-zstd"]
    with pytest.raises(UsageError, match="choose one of gzip, zstd, both"):
        compression.tags_for(tags, "xz")


def test_zstd_tags_round_trip():
    assert compression.gzip_tag(compression.zstd_tag("tf2.21-cuda12.9")) == "tf2.21-cuda12.9"
    assert compression.is_zstd_tag("latest-gpu-zstd") and not compression.is_zstd_tag("latest-gpu")


@pytest.mark.parametrize("registry,plain", [
    ("127.0.0.1:5000", True), ("127.0.0.1:5000/team", True), ("localhost:5000", True),
    ("ghcr.io/you", False), ("registry.example:5000", False), ("10.0.0.1:5000", False),
])
def test_plain_http_only_where_docker_assumes_it(registry, plain):
    assert compression.is_plain_http(registry) is plain


@pytest.mark.parametrize("version,unpacks", [
    ("20.10.24+dfsg1", False), ("20.10.5", False), ("23.0.0", True), ("24.0.7", True), ("29.3.0", True),
    ("", None), ("dev", None),
])
def test_which_docker_unpacks_zstd(version, unpacks):
    assert docker_client.unpacks_zstd(version) is unpacks


def test_docker_20s_zstd_failure_is_recognised():
    # dockerd 20.10.24 here, pulling a skopeo-written zstd image from a local registry
    assert compression.zstd_refusal(
        "failed to register layer: Error processing tar file(exit status 1): archive/tar: invalid tar header")
    assert not compression.zstd_refusal("manifest unknown")


def test_push_zstd_runs_skopeo_from_the_engine_at_the_chosen_level(monkeypatch):
    seen = []
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(compression, "_engine_min_api", lambda: "1.12")  # Docker 20.10's floor
    monkeypatch.setattr(compression, "_skopeo", lambda: "skopeo")
    monkeypatch.setattr(compression.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    compression.push_zstd("kerasenv:tf2.21-cpu", "127.0.0.1:5000/kerasenv:tf2.21-cpu-zstd")
    [cmd] = seen
    assert cmd[:2] == ["skopeo", "copy"] and "--dest-tls-verify=false" in cmd
    assert cmd[cmd.index("--dest-compress-format") + 1] == "zstd"
    assert cmd[cmd.index("--dest-compress-level") + 1] == str(compression.ZSTD_LEVEL)
    assert cmd[-2:] == ["docker-daemon:kerasenv:tf2.21-cpu", "docker://127.0.0.1:5000/kerasenv:tf2.21-cpu-zstd"]
    seen.clear()
    compression.push_zstd("kerasenv:tf2.21-cpu", "ghcr.io/you/kerasenv:tf2.21-cpu-zstd", level=9)
    assert "--dest-tls-verify=false" not in seen[0] and seen[0][seen[0].index("--dest-compress-level") + 1] == "9"


def test_skopeo_reads_the_engine_docker_host_names(monkeypatch):
    # Debian 12's skopeo 1.9.3 ignores DOCKER_HOST: it read Docker 20.10 on /var/run/docker.sock
    # while kerasenv meant the Docker 28 of DOCKER_HOST (measured, issue 43).
    seen = []
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
    monkeypatch.setattr(compression, "_engine_min_api", lambda: "1.12")
    monkeypatch.setattr(compression, "_skopeo", lambda: "skopeo")
    monkeypatch.setattr(compression.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    compression.push_zstd("kerasenv:tf2.21-cpu", "127.0.0.1:5000/kerasenv:tf2.21-cpu-zstd")
    [cmd] = seen
    assert cmd[cmd.index("--src-daemon-host") + 1] == "unix:///run/user/1000/docker.sock"
    assert cmd[-2] == "docker-daemon:kerasenv:tf2.21-cpu"


@pytest.mark.parametrize("min_api", ["1.24", "1.44"])  # Docker 25-28 (28.5.2 measured), Docker 29 (moby#51186)
def test_an_engine_that_refuses_skopeos_api_1_22_is_saved_through_the_engine_api_first(monkeypatch, min_api):
    seen, saved = [], []
    monkeypatch.setattr(compression, "_engine_min_api", lambda: min_api)
    monkeypatch.setattr(compression, "_skopeo", lambda: "skopeo")

    def save(ref, folder):
        saved.append(ref)
        return f"{folder}/image.tar"
    monkeypatch.setattr(compression, "_save", save)
    monkeypatch.setattr(compression.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    compression.push_zstd("kerasenv:tf2.21-cpu", "127.0.0.1:5000/kerasenv:tf2.21-cpu-zstd")
    [cmd] = seen
    assert saved == ["kerasenv:tf2.21-cpu"]
    assert cmd[-2].startswith("docker-archive:/") and cmd[-2].endswith("/image.tar")
    assert "docker-daemon:kerasenv:tf2.21-cpu" not in cmd and "--src-daemon-host" not in cmd


def test_a_failed_skopeo_push_is_one_line_with_the_fix(monkeypatch):
    monkeypatch.setattr(compression, "_engine_min_api", lambda: None)
    monkeypatch.setattr(compression, "_skopeo", lambda: "skopeo")
    monkeypatch.setattr(compression.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", 'time="..." level=fatal msg="trying to reuse blob ...: unauthorized: authentication required"\n'))
    with pytest.raises(KerasenvError) as info:
        compression.push_zstd("kerasenv:tf2.21-cpu", "ghcr.io/you/kerasenv:tf2.21-cpu-zstd")
    assert "\n" not in info.value.message and "skopeo login ghcr.io" in info.value.message

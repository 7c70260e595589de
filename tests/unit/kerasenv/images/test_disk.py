"""kerasenv.images.disk: what a build needs on Docker's disk, and waiting for it."""

from __future__ import annotations

import pytest

from kerasenv.images import disk
from kerasenv.matrix.schema import AMD64, ARM64

GB = 1e9


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


@pytest.fixture(autouse=True)
def no_ceiling(monkeypatch):
    """`.ci/run` sets KERASENV_DISK_CEILING for the whole of `make test`, these tests' run too."""
    monkeypatch.delenv("KERASENV_DISK_CEILING", raising=False)


def test_under_the_ceiling_a_build_waits_for_room_below_it_though_the_disk_has_more(monkeypatch):
    frees(monkeypatch, [40 * GB])
    used = [30 * GB, 30 * GB, 22 * GB]
    monkeypatch.setattr(disk, "used_bytes", lambda root: used.pop(0) if len(used) > 1 else used[0])
    assert disk.room_bytes("/var/lib/docker", environ={}) == 40 * GB
    assert disk.room_bytes("/var/lib/docker", environ={"KERASENV_DISK_CEILING": str(int(40 * GB))}) == 10 * GB
    monkeypatch.setenv("KERASENV_DISK_CEILING", str(int(40 * GB)))
    said, clock = [], Clock()
    assert disk.ensure_room(None, "kerasenv:x-arm64", 16 * GB, 600, said.append, clock=clock, sleep=clock.sleep,
                            root="/var/lib/docker")
    assert "10.0 GB is under KERASENV_DISK_CEILING: waiting up to 600 s" in said[0], said
    assert said[1].startswith("kerasenv build: kerasenv:x-arm64: 18.0 GB free after "), said


def frees(monkeypatch, values):
    """free_bytes answers each value in turn, then the last one for ever."""
    seen = list(values)
    monkeypatch.setattr(disk, "free_bytes", lambda root: seen.pop(0) if len(seen) > 1 else seen[0])


def test_a_cuda_build_needs_twice_its_budget_and_an_arm64_build_its_own_budget(real_matrix):
    torch = real_matrix.get("torch2.15-cuda13.2")
    assert disk.build_need_bytes(torch, AMD64) == 2 * torch.size_budget_mb * 1e6 + disk.MARGIN_BYTES
    assert torch.arm64 and torch.arm64.size_budget_mb
    assert disk.build_need_bytes(torch, ARM64) == 2 * torch.arm64.size_budget_mb * 1e6 + disk.MARGIN_BYTES
    # the JupyterLab flavour is a layer on the image: twice what that layer may add
    added = real_matrix.jupyter.added_size_budget_mb
    assert disk.build_need_bytes(torch, AMD64, jupyter_added_mb=added) == 2 * added * 1e6 + disk.MARGIN_BYTES
    assert disk.build_need_bytes(torch, AMD64, jupyter_added_mb=added) <= 2.5 * GB


def test_enough_room_says_nothing(monkeypatch):
    frees(monkeypatch, [50 * GB])
    said = []
    assert disk.ensure_room(None, "kerasenv:x", 10 * GB, 0, said.append, root="/var/lib/docker")
    assert said == []


def test_too_little_room_without_waiting_warns_once_with_the_figures_and_the_fix(monkeypatch):
    frees(monkeypatch, [3 * GB])
    said = []
    assert not disk.ensure_room(None, "kerasenv:x", 16 * GB, 0, said.append, root="/var/lib/docker")
    assert len(said) == 1
    assert "kerasenv:x needs about 16.0 GB free on Docker's disk (/var/lib/docker), 3.0 GB is" in said[0]
    assert "no space left on device" in said[0] and "make clean-images" in said[0]


def test_waiting_goes_on_as_soon_as_other_images_went(monkeypatch):
    frees(monkeypatch, [3 * GB, 5 * GB, 17 * GB])
    clock, said = Clock(), []
    assert disk.ensure_room(None, "kerasenv:x", 16 * GB, 600, said.append, clock=clock, sleep=clock.sleep,
                            root="/r")
    assert clock.now == 2 * disk.POLL_S
    assert said[0].endswith("waiting up to 600 s for other builds' images to go")
    assert said[1] == "kerasenv build: kerasenv:x: 17.0 GB free after 10 s, building"


def test_waiting_in_vain_warns_and_builds_anyway(monkeypatch):
    frees(monkeypatch, [3 * GB])
    clock, said = Clock(), []
    assert not disk.ensure_room(None, "kerasenv:x", 16 * GB, 30, said.append, clock=clock, sleep=clock.sleep,
                                root="/r")
    assert clock.now == pytest.approx(30)
    assert "3.0 GB is after 30 s" in said[-1] and "warning" in said[-1]


def test_an_engine_whose_disk_is_not_here_is_not_checked():
    class Remote:
        def info(self):
            return {"DockerRootDir": "/no/such/dir/here"}

    assert disk.docker_root(Remote()) is None
    assert disk.ensure_room(Remote(), "kerasenv:x", 10**15, 0, pytest.fail)


def test_a_negative_wait_is_refused_before_docker_is_asked(monkeypatch, capsys):
    from kerasenv import cli
    from kerasenv.engine import docker_client

    monkeypatch.setattr(docker_client, "client", lambda: pytest.fail("Docker was asked"))
    code = cli.main(["build", "tf2.21-cpu", "--wait-for-disk", "-5"])
    err = capsys.readouterr().err
    assert code != 0 and "--wait-for-disk -5: give seconds, 0 or more" in err


def test_a_build_on_the_containerd_store_asks_for_more_disk():
    # Issue 43: each layer kept compressed and unpacked (recorded /info of Docker 28.5.2 and 20.10).
    import json
    from types import SimpleNamespace

    from ...conftest import REPO

    def client(name):
        info = json.loads((REPO / "tests" / "fixtures" / "engines" / name / "info.json").read_text())
        return SimpleNamespace(info=lambda: info)
    assert disk.store_factor(client("docker-28.5.2-containerd")) == disk.CONTAINERD_STORE_FACTOR > 1.2
    assert disk.store_factor(client("docker-20.10-debian")) == 1.0

    def broken():
        raise OSError("connection refused")
    assert disk.store_factor(SimpleNamespace(info=broken)) == 1.0

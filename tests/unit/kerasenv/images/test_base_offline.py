"""images/base_offline.py's debootstrap: a failed download from the archive is tried again from an
empty folder; any other failure, and the last failed download, is one line naming it."""

from __future__ import annotations

import subprocess

import pytest

from kerasenv.errors import KerasenvError
from kerasenv.images import base_offline

DOWNLOAD = "E: Couldn't download packages: libdebconfclient0"  # the cold run of 8beda00, 2026-12-06


def fake_debootstrap(monkeypatch, outcomes):
    """subprocess.run answering each call with the next (returncode, last line); the calls made."""
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        code, line = outcomes[len(calls) - 1]
        return subprocess.CompletedProcess(argv, code, stdout=f"I: Retrieving Release\n{line}\n", stderr="")

    monkeypatch.setattr(base_offline.subprocess, "run", run)
    return calls


def test_a_failed_download_is_tried_again_from_an_empty_folder(monkeypatch, tmp_path):
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    (rootfs / "partial").write_text("left by the failed try")
    calls = fake_debootstrap(monkeypatch, [(1, DOWNLOAD), (0, "I: Base system installed successfully.")])
    said = []
    base_offline._debootstrap(["debootstrap", "trixie", str(rootfs)], rootfs, "trixie from M", said.append, pause=0)
    assert len(calls) == 2
    assert said == [f"debootstrap of trixie from M: {DOWNLOAD}: trying again (2 of 3)"]
    assert not (rootfs / "partial").exists()


def test_the_last_failed_download_is_one_line_with_the_tries(monkeypatch, tmp_path):
    calls = fake_debootstrap(monkeypatch, [(1, DOWNLOAD)] * 3)
    with pytest.raises(KerasenvError) as raised:
        base_offline._debootstrap(["debootstrap"], tmp_path / "r", "trixie from M", lambda line: None, pause=0)
    assert len(calls) == 3
    assert str(raised.value) == f"debootstrap of trixie from M failed (3 tries): {DOWNLOAD}"


def test_another_failure_is_not_tried_again(monkeypatch, tmp_path):
    calls = fake_debootstrap(monkeypatch, [(1, "E: debootstrap can only run as root")])
    with pytest.raises(KerasenvError) as raised:
        base_offline._debootstrap(["debootstrap"], tmp_path / "r", "trixie from M", lambda line: None, pause=0)
    assert len(calls) == 1
    assert str(raised.value) == "debootstrap of trixie from M failed (debootstrap needs root): " \
                                "E: debootstrap can only run as root"

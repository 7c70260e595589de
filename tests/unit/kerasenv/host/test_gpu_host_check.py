"""`kerasenv gpu-host-check`'s host side: the pack's layout and size limit, the fixture
import (the run itself: tests/integration/test_gpu_host_check.py)."""

from __future__ import annotations

import pytest

from kerasenv.errors import KerasenvError
from kerasenv.host import gpu_host_check


def fake_download(dest, keras):
    (dest / f"keras-{keras}-py3-none-any.whl").write_bytes(b"PK")


def test_the_pack_has_the_runner_the_package_and_the_wheels(tmp_path):
    size = gpu_host_check.pack(tmp_path / "p", "3.15.1", download=fake_download)
    p = tmp_path / "p"
    assert (p / "wheels" / "keras-3.15.1-py3-none-any.whl").is_file()
    assert (p / "kerasenv_image" / "host_check.py").is_file()
    assert (p / "kerasenv_image" / "probes" / "gpu_libraries.py").is_file()
    assert not list(p.rglob("__pycache__"))
    assert (p / "run.py").stat().st_mode & 0o111 and "host_check.main" in (p / "run.py").read_text()
    assert "Keras 3.15.1" in (p / "README.txt").read_text() and (p / "site").is_dir()
    assert 0 < size < gpu_host_check.LIMIT


def test_a_pack_over_64_mib_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_host_check, "LIMIT", 1000)
    with pytest.raises(KerasenvError, match="over the 0 MiB"):
        gpu_host_check.pack(tmp_path / "p", "3.15.1", download=fake_download)


def test_pip_downloads_keras_the_pure_deps_and_cp312_binaries():
    calls = []
    gpu_host_check.pip_download("/d", "3.15.1", python="py", runner=lambda cmd, check: calls.append(cmd))
    assert calls[0][:3] == ["py", "-m", "pip"] and "keras==3.15.1" in calls[0] and "namex" in calls[0]
    assert "--no-deps" in calls[0] and "--no-deps" in calls[1]
    assert calls[1][calls[1].index("--python-version") + 1] == "3.12" and "optree" in calls[1]


def test_import_fixtures_copies_successful_captures_and_unmarks_the_folder(tmp_path):
    report, fixtures = tmp_path / "report", tmp_path / "fixtures"
    report.mkdir()
    fixtures.mkdir()
    (fixtures / "SIMULATED").write_text("# comment\nh100-550\nh200-550\n")
    (report / "nvidia-smi.txt").write_text("| NVIDIA-SMI 580.95.05 |\n")
    (report / "list.txt").write_text("GPU 0: NVIDIA H200 (UUID: GPU-x)\n")
    (report / "query-gpu.csv").write_text("")  # failed: empty, with its .err
    (report / "query-gpu.csv.err").write_text("error")
    copied = gpu_host_check.import_fixtures(report, "h200-550", fixtures)
    assert sorted(p.name for p in copied) == ["list.txt", "nvidia-smi.txt"]
    assert (fixtures / "h200-550" / "list.txt").read_text().startswith("GPU 0: NVIDIA H200")
    assert (fixtures / "SIMULATED").read_text() == "# comment\nh100-550\n"
    with pytest.raises(KerasenvError, match="no successful nvidia-smi capture"):
        gpu_host_check.import_fixtures(tmp_path / "empty", "x", fixtures)


def test_the_cli_has_the_command(tmp_path):
    from kerasenv import cli

    args = cli._parser().parse_args(["gpu-host-check", "--out", str(tmp_path), "--no-require-gpu"])
    assert args.require_gpu is False and args.out == str(tmp_path)

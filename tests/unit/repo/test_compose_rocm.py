"""compose/compose.rocm.yaml and the Makefile: compose's ROCm override adds the host's GIDs of
/dev/kfd and the render nodes by number, from `kerasenv rocm-groups`, and stops with a
message naming them when they are missing (never a silent wrong default)."""

from __future__ import annotations

import re
import subprocess

import yaml

from kerasenv import cli
from kerasenv.engine import amd_devices

from ..conftest import REPO

AMD_HOSTS = REPO / "tests" / "fixtures" / "amd-hosts"


def test_the_override_adds_both_gids_without_a_default_and_seccomp_unconfined():
    train = yaml.safe_load((REPO / "compose" / "compose.rocm.yaml").read_text())["services"]["train"]
    assert train["devices"] == ["/dev/kfd", "/dev/dri"]
    assert [re.match(r"\$\{(\w+):\?", g).group(1) for g in train["group_add"]] == ["KERASENV_KFD_GID",
                                                                                 "KERASENV_RENDER_GID"]
    assert all("kerasenv rocm-groups" in g for g in train["group_add"])  # the message says how to fill it
    assert train["security_opt"] == ["seccomp=unconfined"]


def test_make_fills_the_gids_from_kerasenv_rocm_groups_for_the_rocm_override_only():
    for target in ("up", "lab-up", "tensorboard"):
        rocm = subprocess.run(["make", "--no-print-directory", "-n", target, "COMPOSE_GPU=rocm"], cwd=REPO,
                              capture_output=True, text=True).stdout
        assert re.search(r"env \$\(\.venv/bin/kerasenv rocm-groups\) .*docker compose .*compose\.rocm\.yaml", rocm)
        plain = subprocess.run(["make", "--no-print-directory", "-n", target, "COMPOSE_GPU=nvidia"], cwd=REPO,
                               capture_output=True, text=True).stdout
        assert "rocm-groups" not in plain


def test_rocm_groups_prints_the_assignments_or_one_error_line(monkeypatch, capsys):
    recorded = amd_devices.load_record(AMD_HOSTS / "ubuntu-render-993" / "host.json")
    monkeypatch.setattr(amd_devices, "scan", lambda root="/": recorded)
    assert cli.main(["rocm-groups"]) == 0
    assert capsys.readouterr().out == "KERASENV_KFD_GID=993 KERASENV_RENDER_GID=993\n"
    monkeypatch.setattr(amd_devices, "scan", lambda root="/": amd_devices.AmdHost())
    code = cli.main(["rocm-groups"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "no AMD GPU here" in err[0] and "kerasenv doctor" in err[0]

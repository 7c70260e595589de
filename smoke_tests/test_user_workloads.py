"""What a user runs: the image's default command offline, and their own Keras script as an
arbitrary UID on a read-only root file system."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, not built here
USER_SCRIPT = Path(__file__).parent / "user_script"


def test_default_command_offline_trains_and_writes_a_valid_report(default_command_run, target):
    code, err = default_command_run.code, default_command_run.err
    assert code == 0, err[-3000:]
    assert "[smoke] OK (exit 0)" in err
    report = default_command_run.report()
    assert (report["status"], report["exit_code"]) == ("ok", 0)
    assert report["verdict"]["learned"] is True and report["verdict"]["finite"] is True
    # The smoke names its backend and the framework's version under the backend's name
    # (versions.tensorflow on a TF image, versions.jax, versions.torch).
    versions = report["versions"]
    assert versions["backend"] == target.variant.backend, versions
    assert versions[target.variant.backend].split("+")[0] == target.variant.framework_version, versions
    assert report["versions"]["keras"] == target.variant.keras
    assert report["image"] == {"variant": target.variant.id, "family": target.variant.family}
    assert report["build_info"]["is_cuda_build"] is (target.variant.family == "cuda")


def test_user_script_trains_saves_and_reloads_as_an_arbitrary_uid_on_a_read_only_root(docker, target, writable_dir):
    code, out, err = run_once(
        docker, target.ref, ["python", "/user/train.py"], network_mode="none", user="23456:0",
        read_only=True, tmpfs={"/tmp": "rw,size=256m"}, environment={"OUT_DIR": "/out"},
        volumes={str(USER_SCRIPT): {"bind": "/user", "mode": "ro"},
                 str(writable_dir): {"bind": "/out", "mode": "rw"}})
    assert code == 0, (out[-2000:], err[-3000:])
    result = json.loads(out.strip().splitlines()[-1])
    assert (result["uid"], result["gid"]) == (23456, 0)
    assert result["backend"] == target.variant.backend
    assert result["val_accuracy"] >= 0.9 and result["reload_max_diff"] < 1e-5
    assert {"model.keras", "best.weights.h5", "history.csv"} <= set(result["files"])
    assert {p.stat().st_uid for p in writable_dir.iterdir()} == {23456}

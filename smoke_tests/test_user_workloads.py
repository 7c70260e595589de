"""What a user runs: the image's default command offline, and their own Keras script as an
arbitrary UID on a read-only root file system."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import DefaultCommandRun, run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, not built here
USER_SCRIPT = Path(__file__).parent / "user_script"
# The default command, small (its own settings, from the environment: the command is the image's):
# 2 epochs of 24 steps of 32 on 768 samples, a quarter of the default 3 x 32 steps of 64, what CI can
# afford under qemu on the arm64 images. It still learns with a margin (measured on amd64, UID
# 12345, read-only root: accuracy 0.94 TF 2.21, 0.99 JAX 0.12, 1.0 PyTorch 2.15; loss ratio <= 0.45,
# the verdict needs >= 0.8 and < 0.9), where 2 x 12 steps gave TF 0.63 and JAX 0.84.
SMALL_SMOKE = {"KERASENV_EPOCHS": "2", "KERASENV_STEPS_PER_EPOCH": "24", "KERASENV_SAMPLES": "768",
               "KERASENV_BATCH_SIZE": "32"}
ARBITRARY_USER = "12345:0"  # what OpenShift and `docker run --user` give: no passwd entry, group 0
# Under emulation (an arm64 image on this amd64 machine) JAX's XLA compiles with its optimization
# off: JAX's own switch (jax_disable_most_optimizations: LLVM at -O0, no expensive passes), meant
# for "when the cost of optimization is greater than that of running a less-optimized program",
# as it is under qemu, where LLVM compiling the train step was most of the JAX arm64 check (258 s
# in the cold run of 71a99d2, against 114 s for PyTorch's). What the check decides stays: the
# aarch64 wheels import, XLA compiles and runs the step, Keras learns.
EMULATED = {"jax": {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}}


def small_default_command_run(docker, target, runs_dir: Path) -> DefaultCommandRun:
    """The default command as an arbitrary UID on a read-only root (the /tmp tmpfs the other
    read-only checks give), offline, writing to a mounted runs folder: small (SMALL_SMOKE)."""
    os.chmod(runs_dir, 0o777)
    code, out, err = run_once(docker, target.ref, None, network_mode="none", shm_size="1g", user=ARBITRARY_USER,
                              read_only=True, tmpfs={"/tmp": "rw,size=256m"},
                              environment={**SMALL_SMOKE, **(EMULATED.get(target.variant.backend, {})
                                                             if target.emulated else {})},
                              volumes={str(runs_dir): {"bind": "/workspace/runs", "mode": "rw"}})
    return DefaultCommandRun(code, out, err, runs_dir)


@pytest.mark.parametrize("how", [
    "as-built",  # the image's default user, default settings: the run every other check reads
    pytest.param("small-uid-12345-gid-0-read-only-root", marks=pytest.mark.arm64_ci),
])
def test_default_command_offline_trains_and_writes_a_valid_report(how, request, docker, target, tmp_path):
    if how == "as-built":
        default_command_run = request.getfixturevalue("default_command_run")
    else:
        default_command_run = small_default_command_run(docker, target, tmp_path)
    code, err = default_command_run.code, default_command_run.err
    assert code == 0, err[-3000:]
    assert "[smoke] OK (exit 0)" in err
    report = default_command_run.report()
    if how != "as-built":
        assert {p.stat().st_uid for p in tmp_path.rglob("*")} == {12345}, "written as another user"
        # no GPU here: the CUDA images fall back to the CPU, and that is where the check ran
        assert "cpu" in report["placement"]["requested"].lower(), report["placement"]
        assert report["training"]["epochs_run"] == int(SMALL_SMOKE["KERASENV_EPOCHS"]), report["training"]
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

"""The smoke training in real containers: verdicts, exit codes, ownership, cleanup."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import BUILT_IN_TESTS, REPO, kerasenv, start_cli

SMOKE_LABEL = "io.kerasenv.kind=smoke"
INVOKER_UID = 4321  # an unprivileged user with access to the Docker socket


def smoke(variant_id: str, runs: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    return kerasenv("smoke", variant_id, "--runs-dir", str(runs), *args, check=check, timeout=900)


def smoke_containers(docker) -> list:
    return docker.containers.list(all=True, filters={"label": SMOKE_LABEL})


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs"


@pytest.mark.parametrize("variant_id", BUILT_IN_TESTS)
def test_smoke_training_learns_and_reports(built_images, matrix, runs, variant_id):
    proc = smoke(variant_id, runs, "--run-id", "smoke-ok", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    on_disk = json.loads((runs / "smoke-ok" / "report.json").read_text())
    assert report == on_disk
    v = matrix.get(variant_id)
    assert report["status"] == "ok" and report["exit_code"] == 0
    assert report["versions"][v.backend] == v.framework_version and report["versions"]["keras"] == v.keras
    assert report["image"] == {"variant": v.id, "family": v.family}
    assert report["build_info"]["is_cuda_build"] is (v.family == "cuda")
    assert report["verdict"]["learned"] and report["verdict"]["loss_ratio"] < 0.9
    assert report["training"]["final_accuracy"] >= report["verdict"]["accuracy_min"]
    # No GPU here: TensorFlow says /device:CPU:0, JAX cpu:0.
    assert report["placement"]["ok"] and "cpu:0" in report["placement"]["result_device"].lower()
    assert report["training"]["samples_per_second"] > 0
    assert report["shm"]["warning"] is None  # kerasenv passes --shm-size 2g
    assert list((runs / "smoke-ok" / "tensorboard").rglob("events.out.tfevents.*"))
    assert "[smoke] OK (exit 0)" in proc.stderr


def test_require_gpu_on_a_host_without_gpu_exits_3(built_images, matrix, runs):
    proc = smoke(matrix.default_gpu, runs, "--run-id", "need-gpu", "--require-gpu")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "a GPU is required but TensorFlow sees none" in proc.stderr
    assert "--gpus all" in proc.stderr  # the fix
    report = json.loads((runs / "need-gpu" / "report.json").read_text())
    assert report["error"]["kind"] == "no-gpu" and report["exit_code"] == 3


def test_asking_docker_for_gpus_without_the_toolkit_exits_3_in_one_line(built_images, docker, matrix, runs):
    before = len(smoke_containers(docker))
    proc = smoke(matrix.default_gpu, runs, "--gpus", "all")
    assert proc.returncode == 3, proc.stderr[-3000:]
    error = [line for line in proc.stderr.splitlines() if line.startswith("kerasenv: error:")]
    assert len(error) == 1 and "NVIDIA Container Toolkit" in error[0] and "Traceback" not in proc.stderr
    assert len(smoke_containers(docker)) == before


def test_huge_learning_rate_fails_training_with_exit_4(built_images, matrix, runs):
    proc = smoke(matrix.default_cpu, runs, "--run-id", "diverge", "--learning-rate", "1e9")
    assert proc.returncode == 4, proc.stderr[-3000:]
    report = json.loads((runs / "diverge" / "report.json").read_text())
    assert report["error"]["kind"] in ("nan", "did-not-learn") and not report["verdict"]["learned"]


def test_bad_gpus_spec_is_rejected_before_docker(runs):
    proc = smoke("tf2.21-cpu", runs, "--gpus", "two")
    assert proc.returncode == 2 and "is not a GPU request: use all" in proc.stderr


@pytest.fixture
def invoker_home():
    """A home for the unprivileged invoker (pytest's tmp_path is private to root)."""
    home = Path(tempfile.mkdtemp(prefix="kerasenv-invoker-"))
    os.chown(home, INVOKER_UID, INVOKER_UID)
    yield home
    shutil.rmtree(home)


def test_files_in_the_bind_mount_belong_to_the_invoking_user(built_images, matrix, invoker_home):
    """The CLI, run by an unprivileged user allowed to use Docker, writes ./runs as that user."""
    docker_gid = os.stat("/var/run/docker.sock").st_gid
    runs = invoker_home / "runs"
    proc = subprocess.run(
        ["setpriv", f"--reuid={INVOKER_UID}", f"--regid={INVOKER_UID}", f"--groups={docker_gid}",
         sys.executable, "-m", "kerasenv", "smoke", matrix.default_cpu, "--runs-dir", str(runs),
         "--run-id", "owned"],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "HOME": str(invoker_home)}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = [p for p in runs.rglob("*")]
    assert any(p.name == "report.json" for p in written)
    assert {(p.stat().st_uid, p.stat().st_gid) for p in written} == {(INVOKER_UID, INVOKER_UID)}


def test_sigint_to_the_cli_removes_the_container(built_images, docker, matrix, runs):
    proc = start_cli("smoke", matrix.default_cpu, "--runs-dir", str(runs), "--epochs", "200", stdout=None)
    deadline = time.monotonic() + 120
    mine = {"label": [SMOKE_LABEL, f"io.kerasenv.cli-pid={proc.pid}"]}
    while not docker.containers.list(filters={**mine, "status": "running"}):
        assert proc.poll() is None and time.monotonic() < deadline, "the smoke container never started"
        time.sleep(0.5)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert docker.containers.list(all=True, filters=mine) == []


def test_default_command_of_the_image_is_the_smoke_training(built_images, container, matrix):
    code, out, err = container(matrix.get(matrix.default_cpu).image_ref).run(None, shm_size="1g")
    assert code == 0, err[-3000:]
    assert "[smoke] OK (exit 0)" in err


def test_no_smoke_container_is_left_behind(docker):
    assert smoke_containers(docker) == []


def test_smoke_auto_uses_doctors_recommendation(built_images, matrix, runs):
    proc = smoke("auto", runs, "--run-id", "auto")
    assert f"using {matrix.default_cpu} (no NVIDIA GPU)" in proc.stderr  # this host has no GPU
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_make_run_gpu_stops_with_doctors_explanation_on_a_host_without_gpu():
    proc = subprocess.run(["make", "--no-print-directory", "run-gpu"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert "no GPU variant can run on this host (no NVIDIA GPU)" in proc.stderr
    assert "recommended: kerasenv:" in proc.stdout  # doctor's lines came first

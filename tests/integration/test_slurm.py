"""slurm/kerasenv-jax.sbatch on a real Slurm: the single-node cluster of scripts/slurm-local.sh,
which `make test` sets up (scripts/test-prereqs.sh). Two tasks, each a container of
kerasenv:jax0.12-cpu, form one JAX job from Slurm's variables and train the smoke model; a
cancelled job leaves no container behind. Without Slurm or Docker: tests/unit/repo/test_slurm_script.py."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from .conftest import REPO, SESSION, TEST_LABEL

SCRIPT = REPO / "slurm" / "kerasenv-jax.sbatch"
SLURM_LABEL = "io.kerasenv.kind=slurm"
CANCEL_BOUND_S = 30  # scancel -> every container of the job gone (Slurm's KillWait, 30 s, is the SIGKILL)


@pytest.fixture(scope="module")
def slurm():
    """The local cluster is up (a missing one fails these tests with its one line: never a skip)."""
    proc = subprocess.run(["bash", str(REPO / "scripts" / "slurm-local.sh"), "--check"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.strip() or proc.stdout


def submit(tmp_path, *sbatch_args: str, smoke_args: str = "", timeout: float = 60) -> subprocess.CompletedProcess:
    """sbatch the shipped script from tmp_path, its runs in tmp_path/runs, its containers also
    labelled with this session's TEST_LABEL (the session's leftover check sees them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "KERASENV_", "JAX_"))}
    env.update(KERASENV_IMAGE="kerasenv:jax0.12-cpu", KERASENV_RUNS_DIR=str(tmp_path / "runs"),
               KERASENV_SMOKE_ARGS=smoke_args, KERASENV_DOCKER_ARGS=f"--label {TEST_LABEL}={SESSION}")
    return subprocess.run(["sbatch", "--parsable", f"--chdir={tmp_path}", "--time=00:15:00", *sbatch_args, str(SCRIPT)],
                          env=env, capture_output=True, text=True, timeout=timeout)


def job_id(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.strip().splitlines()[0].split(";")[0]


def containers(docker, job: str | None = None) -> list:
    labels = [SLURM_LABEL] + ([f"io.kerasenv.slurm-job={job}"] if job else [])
    return docker.containers.list(all=True, filters={"label": labels})


def in_queue(job: str) -> bool:
    return bool(subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip())


def test_two_slurm_tasks_train_one_jax_job(slurm, jax_cpu_image, docker, tmp_path):
    proc = submit(tmp_path, "--wait", "--ntasks=2", smoke_args="--epochs 2", timeout=900)
    job = job_id(proc)
    log = (tmp_path / f"kerasenv-jax-{job}.out").read_text()
    assert proc.returncode == 0, f"sbatch exited {proc.returncode}: {proc.stderr}\n{log[-4000:]}"
    assert f"JAX's coordinator: {subprocess.check_output(['hostname', '-s'], text=True).strip()}:" \
           f"{int(job) % 4096 + 61440}" in log
    chief = json.loads((tmp_path / "runs" / job / "report.json").read_text())
    assert chief["status"] == "ok", log[-4000:]
    assert chief["distributed"]["processes"] == 2 and chief["distributed"]["launcher"] == "slurm", chief["distributed"]
    worker = json.loads((tmp_path / "runs" / job / "worker-1" / "report.json").read_text())
    assert worker["status"] == "ok" and worker["distributed"]["process_id"] == 1, worker.get("distributed")
    # --rm: each container is removed before its `docker run` returns, so before the job ends
    assert containers(docker) == [], [c.name for c in containers(docker)]


def test_scancel_removes_the_containers_of_a_running_job(slurm, jax_cpu_image, docker, tmp_path):
    proc = submit(tmp_path, "--ntasks=2", smoke_args="--epochs 1000")
    assert proc.returncode == 0, proc.stderr
    job = job_id(proc)
    try:
        deadline = time.monotonic() + 180
        while len([c for c in containers(docker, job) if c.status == "running"]) < 2:
            assert time.monotonic() < deadline, f"job {job}: its 2 containers did not start within 180 s"
            assert in_queue(job), f"job {job} ended early:\n{(tmp_path / f'kerasenv-jax-{job}.out').read_text()[-3000:]}"
            time.sleep(1)
        names = sorted(c.name for c in containers(docker, job))
        assert names == [f"kerasenv-slurm-{job}-0", f"kerasenv-slurm-{job}-1"]
        started = time.monotonic()
        subprocess.run(["scancel", job], check=True, timeout=30)
        while containers(docker, job):
            assert time.monotonic() - started < CANCEL_BOUND_S, \
                f"still there {CANCEL_BOUND_S} s after scancel: {[c.name for c in containers(docker, job)]}"
            time.sleep(0.5)
    finally:
        subprocess.run(["scancel", job], timeout=30)
    deadline = time.monotonic() + 60  # the node is free again for the next job
    while in_queue(job):
        assert time.monotonic() < deadline, f"job {job} still in the queue 60 s after scancel"
        time.sleep(1)
    assert "SIGTERM: removing the job's containers" in (tmp_path / f"kerasenv-jax-{job}.out").read_text()
    assert containers(docker) == []

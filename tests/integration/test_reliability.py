"""Faults with real containers and real signals: a killed training resumes, an interrupted
CLI leaves nothing behind, out-of-memory and a full disk are named, concurrent runs do not
collide. docs/reference/reliability.md lists each case with the test that proves it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kerasenv.engine import docker_client
from kerasenv.engine.docker_client import CLI_PID_LABEL
from kerasenv.images.clean import cli_is_running

from .conftest import REPO, SESSION, TEST_LABEL, kerasenv, start_cli

SMOKE = "/opt/kerasenv/smoke_train.py"


def containers_of(docker, proc: subprocess.Popen, **filters) -> list:
    return docker.containers.list(all=True, filters={"label": f"io.kerasenv.cli-pid={proc.pid}", **filters})


def wait_for(condition, proc: subprocess.Popen | None, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the CLI exited {proc.returncode} before {what}:\n{proc.stderr.read()[-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kerasenv: error:")]


# --- 1. a killed training resumes ----------------------------------------------------------

def test_training_killed_after_an_epoch_resumes_without_repeating_epochs(built_images, docker, matrix, tmp_path):
    runs, run_id = tmp_path / "runs", "resume-" + uuid.uuid4().hex[:6]
    command = ("smoke", matrix.default_cpu, "--runs-dir", str(runs), "--run-id", run_id,
               "--epochs", "6")
    extra = ("--", "--steps-per-epoch", "64")  # 64 steps an epoch: time to kill it between epochs
    first = start_cli(*command, *extra)
    try:
        # The backup's metadata is written after its weights: once it exists, epoch 1 is saved.
        wait_for(lambda: (runs / run_id / "backup" / "training_metadata.json").exists(), first,
                 "the first epoch backup")
        (container,) = containers_of(docker, first, status="running")
        container.kill()  # `docker kill`: SIGKILL, no chance to write a report
        _, stderr = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 137, stderr[-2000:]
    assert any("was killed (SIGKILL" in line and f"--run-id {run_id}" in line for line in error_lines(stderr))
    assert not (runs / run_id / "report.json").exists()
    assert containers_of(docker, first) == []

    second = kerasenv(*command, "--json", *extra, check=False, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    report = json.loads(second.stdout)
    training = report["training"]
    assert training["resumed"] is True and training["resumed_from_epoch"] >= 1
    assert training["epochs_run"] == 6 - training["resumed_from_epoch"]  # done epochs are not repeated
    assert len(training["loss_per_epoch"]) == 6  # the report covers the whole run, once
    assert report["status"] == "ok" and report["verdict"]["learned"] is True
    assert f"resumed from the backup after epoch {training['resumed_from_epoch']} of 6" in second.stderr


# --- 2. signals to the CLI -------------------------------------------------------------------

@pytest.mark.parametrize("command, signum, code", [
    ("smoke", signal.SIGTERM, 143),
    ("run", signal.SIGINT, 130),
    ("run", signal.SIGTERM, 143),
])
def test_signal_to_the_cli_removes_its_container_and_a_second_run_works(
        built_images, docker, matrix, tmp_path, command, signum, code):
    extra = ("--epochs", "200") if command == "smoke" else ("--", "sleep", "600")
    proc = start_cli(command, matrix.default_cpu, "--runs-dir", str(tmp_path / "runs"), *extra)
    try:
        wait_for(lambda: containers_of(docker, proc, status="running"), proc, "the container to start")
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr[-2000:]
    assert "Traceback" not in stderr
    assert containers_of(docker, proc) == []
    again = kerasenv("run", matrix.default_cpu, "--runs-dir", str(tmp_path / "runs"), "--",
                     "python", "-c", "print('second run')", check=False, timeout=120)
    assert again.returncode == 0 and "second run" in again.stdout, again.stderr[-2000:]


def test_make_clean_removes_the_container_of_a_cli_killed_outright(built_images, docker, matrix, tmp_path):
    proc = start_cli("run", matrix.default_cpu, "--runs-dir", str(tmp_path / "runs"), "--", "sleep", "600")
    try:
        (container,) = wait_for(lambda: containers_of(docker, proc, status="running"), proc,
                                "the container to start")
    finally:
        proc.kill()  # SIGKILL: the CLI gets no chance to clean up
        proc.communicate(timeout=30)
    assert containers_of(docker, proc), "the container should outlive a CLI killed with SIGKILL"
    network = docker.networks.create(f"kerasenv-test-{uuid.uuid4().hex[:8]}",
                                     labels={docker_client.PROJECT_LABEL: "kerasenv"})  # as multiworker makes
    clean = subprocess.run(["make", "--no-print-directory", "clean"], cwd=REPO, capture_output=True,
                           text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    assert f"removed container {container.name}" in clean.stdout
    assert f"removed network {network.name}" in clean.stdout
    assert containers_of(docker, proc) == []


def test_make_clean_keeps_the_build_cache_so_the_next_build_reinstalls_nothing(built_images):
    """The build cache of the pip install (BuildKit's cache records; the classic builder's
    untagged last image of a builder stage): `make clean` must not prune it (it once did, and
    every build after it was cold)."""
    clean = subprocess.run(["make", "--no-print-directory", "clean"], cwd=REPO, capture_output=True,
                           text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    build = kerasenv("build", "tf2.21-cpu", timeout=3600)
    lines = [line.strip() for line in build.stderr.splitlines()]
    # The install steps: the CUDA wheels' `pip install`, and the venv's install script.
    installs = [i for i, line in enumerate(lines)
                if re.search(r"\] step (\S+ )?\(?(\[[^\]]+\] )?RUN (pip install|bash /tmp/build/install-locked-venv\.sh)", line)]
    assert installs, build.stderr[-2000:]
    assert all(_cached(lines, i) for i in installs), build.stderr[-3000:]


def _cached(lines: list[str], i: int) -> bool:
    """Whether step line `i` of `kerasenv build`'s output was a cache hit: the classic builder's
    next line says "---> Using cache"; BuildKit's progress has "CACHED <the step>" somewhere
    (its steps run side by side, so not always next)."""
    if lines[i + 1].endswith("---> Using cache"):
        return True
    step = lines[i].split("] step ", 1)[1]
    return any(line.endswith(f"CACHED {step}") for line in lines)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_build_leaves_the_previous_image_tagged_and_no_container(docker, tmp_path, signum, code):
    """The tag moves only when a build completes: Ctrl-C or SIGTERM halfway keeps the last complete image."""
    images = tmp_path / "images"
    subprocess.run(["cp", "-r", str(REPO / "images"), str(images)], check=True)
    marker = uuid.uuid4().hex  # a fresh first step, so the sleep step is never a cache hit
    (images / "tf2.21-cpu" / "Dockerfile").write_text(
        "ARG BASE_IMAGE=debian:bookworm-slim\nFROM ${BASE_IMAGE}\n"
        f'RUN echo "kerasenv-test {marker}" > /marker\n'
        'RUN echo "kerasenv-test: sleeping" && sleep 300\n')
    before = docker.images.get("kerasenv:tf2.21-cpu").id
    proc = start_cli("--matrix", str(images / "matrix.toml"), "build", "tf2.21-cpu", "--no-ca-cert")

    def sleeping_step():
        # The step's shell, seen from the host: a classic build runs it in a container, BuildKit in
        # an executor of its own (no container to list); both are processes of this machine.
        # os.listdir, not Path.glob: glob stats each match while it lists, so a process that ends
        # between the two raised ProcessLookupError from inside the loop's iterator, outside the try
        # (CI run of 7b9b789).
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if b"kerasenv-test: sleeping" in Path("/proc", pid, "cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                continue  # gone while listed (ProcessLookupError, FileNotFoundError)
        return found

    try:
        wait_for(sleeping_step, proc, "the build's sleep step", timeout=120)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr[-2000:]
    assert docker.images.get("kerasenv:tf2.21-cpu").id == before
    # The daemon cancels the build when the client goes and ends the step (removes its container).
    wait_for(lambda: not sleeping_step(), None, "the build step to end", timeout=60)


# --- 3. out of memory ---------------------------------------------------------------------------

def test_container_oom_killed_under_memory_limit_is_named_with_its_limit(built_images, matrix, tmp_path):
    proc = kerasenv("smoke", matrix.default_cpu, "--runs-dir", str(tmp_path / "runs"), "--memory", "256m",
                    check=False, timeout=300)
    assert proc.returncode == 5, proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert "OOM-killed (limit 256 MiB)" in line and "--memory" in line


def test_resource_exhausted_maps_to_exit_5_with_the_advice(built_images, container, matrix):
    """TensorFlow's ResourceExhaustedError (what a GPU out of memory raises) from a real
    allocation too big for the allocator, inside the real image."""
    code = (
        "import sys; from kerasenv_image.smoke import main as s\n"
        "def train(backend, tf, keras, args, report, gpus):\n"
        "    return tf.zeros([2**22, 2**22], tf.float32).numpy()\n"  # 64 TiB
        "s.train = train\n"
        "sys.exit(s.main(['--run-id', 'oom', '--output-dir', '/tmp/oom']))\n")
    status, _, err = container(matrix.get(matrix.default_cpu).image_ref).run(["python", "-c", code])
    assert status == 5, err[-2000:]
    assert "[smoke] FAILED (exit 5)" in err
    assert "out of memory" in err and "fix: lower --batch-size" in err


# --- 4. a full disk ----------------------------------------------------------------------------

LIST_AFTER = "; code=$?; echo LISTING; ls -A {dir}; exit $code"


def test_full_disk_during_training_fails_with_exit_6_and_leaves_no_report(built_images, container, matrix):
    """A 64 KiB tmpfs as the runs directory: the backup fills it during the first epoch."""
    image = matrix.get(matrix.default_cpu).image_ref
    status, out, err = container(image).run(
        ["sh", "-c", f"python {SMOKE} --run-id full --epochs 2" + LIST_AFTER.format(dir="/workspace/runs/full")],
        tmpfs={"/workspace/runs": "size=64k,uid=1000,gid=1000"})
    assert status == 6, err[-3000:]
    assert "[smoke] FAILED (exit 6)" in err and "no space left in /workspace/runs/full" in err
    assert "report: not written" in err
    left = out.split("LISTING", 1)[1].split()
    assert "report.json" not in left and not [name for name in left if name.startswith(".tmp-")]


def test_report_write_on_a_full_disk_leaves_neither_report_nor_temp_file(built_images, container, matrix):
    """The report itself is what does not fit: an old report.json survives whole."""
    code = (
        "import json, os, sys; from kerasenv_image.smoke import report as s\n"
        "d = '/workspace/runs/r'; os.makedirs(d)\n"
        "assert s.write_report({'status': 'old'}, d)\n"
        "with open(d + '/filler', 'wb') as f:\n"
        "    try:\n"
        "        f.write(b'x' * 10**6)\n"
        "    except OSError:\n"
        "        pass\n"
        "ok = s.write_report({'status': 'new', 'big': 'y' * 200000}, d)\n"
        "print(json.dumps({'ok': ok, 'files': sorted(os.listdir(d)), 'report': json.load(open(d + '/report.json'))}))\n")
    result = container(matrix.get(matrix.default_cpu).image_ref).python_json(
        code, tmpfs={"/workspace/runs": "size=128k,uid=1000,gid=1000"})
    assert result["ok"] is False
    assert result["files"] == ["filler", "report.json"]  # no .tmp-*.json left behind
    assert result["report"] == {"status": "old"}


# --- 5. concurrency --------------------------------------------------------------------------

def test_two_smoke_runs_of_one_variant_at_once_do_not_collide(built_images, docker, matrix, tmp_path):
    runs = tmp_path / "runs"
    procs = [start_cli("smoke", matrix.default_cpu, "--runs-dir", str(runs), "--json") for _ in range(2)]
    try:
        names = wait_for(lambda: [c.name for p in procs for c in containers_of(docker, p)]
                         if all(containers_of(docker, p) for p in procs) else None, None,
                         "both containers", timeout=120)
        outputs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert len(set(names)) == 2
    assert [p.returncode for p in procs] == [0, 0], [err[-1500:] for _, err in outputs]
    reports = [json.loads(out) for out, _ in outputs]
    assert len({r["run_id"] for r in reports}) == 2
    assert sorted(p.name for p in runs.iterdir()) == sorted(r["run_id"] for r in reports)
    assert all((runs / r["run_id"] / "report.json").exists() for r in reports)


def test_no_container_of_these_tests_is_left(docker):
    # Left: a container this session's tests started, or one whose kerasenv command has ended (it removes
    # its containers on the way out). Not one whose command still runs: the acceptance run beside
    # (make test's other lane) has its `kerasenv lab` up (CI 2026-12-02). The same rule as
    # `kerasenv clean`. Sparse: no inspect per container, which races with their removal.
    left = docker.containers.list(all=True, sparse=True, filters={"label": docker_client.PROJECT_LABEL})
    assert [c.attrs["Names"] for c in left
            if (c.attrs.get("Labels") or {}).get(TEST_LABEL) == SESSION
            or CLI_PID_LABEL in (c.attrs.get("Labels") or {})
            and not cli_is_running(c.attrs["Labels"][CLI_PID_LABEL])] == []


def test_unwritable_output_directory_in_the_container_exits_2_with_the_fix(built_images, container, matrix):
    status, _, err = container(matrix.get(matrix.default_cpu).image_ref).run(
        ["python", SMOKE, "--run-id", "ro"], tmpfs={"/workspace/runs": "ro"})
    assert status == 2, err[-2000:]
    assert "output directory /workspace/runs/ro is not writable" in err
    assert "fix: mount a directory you own" in err and "Traceback" not in err
    # Issue 45: a run that fails before the import still names its stack, from the image's ENV and
    # installed metadata: "TensorFlow 2.21.0 / Keras 3.15.1 / Python 3.13.5 (tf2.21-cpu)".
    v = matrix.get(matrix.default_cpu)
    assert re.search(rf"TensorFlow {re.escape(v.tensorflow)} / Keras {re.escape(v.keras)} / "
                     rf"Python {re.escape(v.python)}\.\d+ \({re.escape(v.id)}\)", err), err[-2000:]

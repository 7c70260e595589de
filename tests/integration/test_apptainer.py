"""Apptainer, the way HPC clusters run containers (issue 44): a real SIF of kerasenv:jax0.12-cpu
made by `kerasenv sif` (once per run: `make test` makes it beside the builds, the Makefile's
sif step; 4-8 min on 2 cores), run by a real Apptainer (Debian
sid's 1.4.5, in the sid root of scripts/sid-root.sh: it needs glibc >= 2.38) unprivileged, as a
non-root uid, and a real 2-task Slurm job (scripts/slurm-local.sh) training JAX through it.

Here /dev/fuse is root's only, so Apptainer cannot mount the SIF (squashfuse): every container
is started with --unsquash (the SIF unpacked to APPTAINER_TMPDIR first, 30-60 s). Clusters mount it.
One SIF serves every test: the JAX CPU image is the one the Slurm job needs, and its default
command is the same smoke training as tf2.21-cpu's (the output-folder logic is the same code)."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import REPO, SESSION, kerasenv

SHIM = REPO / "scripts" / "apptainer-sid-root.sh"
SCRIPT = REPO / "slurm" / "kerasenv-jax-apptainer.sbatch"
# KERASENV_APPTAINER_TEST_IMAGE: another local image of the variant (a branch's, under a tag of
# one's own, without retagging the shared engine's kerasenv:jax0.12-cpu).
IMAGE = os.environ.get("KERASENV_APPTAINER_TEST_IMAGE") or "jax0.12-cpu"
USER = "kerasenv-rootless"  # Apptainer's uid here (scripts/test-prereqs.sh makes the user)


def user_ids() -> tuple[int, int]:
    entry = pwd.getpwnam(USER)
    return entry.pw_uid, entry.pw_gid


def shared_dir(name: str) -> Path:
    """A folder Apptainer's uid owns, outside pytest's root-only tmp_path (0700)."""
    path = Path("/var/tmp") / f"kerasenv-test-{name}-{SESSION[:12]}"
    path.mkdir(mode=0o755, exist_ok=True)
    os.chown(path, *user_ids())
    return path


@pytest.fixture(scope="module")
def sif(request):
    """kerasenv-jax.sif, built by `kerasenv sif` from the local image; removed after the module.
    KERASENV_APPTAINER_TEST_SIF: a SIF made so already (make test's sif step, a rerun by hand;
    kept). Then no Docker image is needed: `make test` runs this module in its test lane, beside
    the registry test that untags kerasenv:jax0.12-cpu and pulls it back."""
    given = os.environ.get("KERASENV_APPTAINER_TEST_SIF")
    if given:  # `make test` makes it beside the builds (the Makefile's sif step)
        assert Path(given).is_file(), f"no SIF at {given}: its `kerasenv sif` step failed (see make test's output)"
        yield Path(given)
        return
    request.getfixturevalue("jax_cpu_image")
    check = subprocess.run(["bash", str(REPO / "scripts" / "sid-root.sh"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr.strip()  # no root: one line with the fix, never a skip
    folder = shared_dir("sif")
    started = time.monotonic()
    proc = kerasenv("sif", IMAGE, "--output", str(folder / "kerasenv-jax.sif"), timeout=1800)
    print(f"\n[apptainer] {proc.stdout.strip()} (test wall {time.monotonic() - started:.0f} s)")
    path = folder / "kerasenv-jax.sif"
    assert path.stat().st_size > 200e6, proc.stdout
    assert f"{path}: " in proc.stdout and "run it: apptainer run" in proc.stdout
    assert not list(folder.glob(".kerasenv-sif-*")), "the work folder was left behind"
    yield path
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def no_sandbox_left():
    """--unsquash unpacks the SIF into APPTAINER_TMPDIR/rootfs-* (2 GB) and removes it when the
    container ends, but not always when Apptainer itself fails (one was left here after a FATAL):
    each one this module made goes at its end."""
    tmpdir = Path(os.environ.get("APPTAINER_TMPDIR") or "/var/tmp/kerasenv-apptainer")  # the shim's default
    before = set(tmpdir.glob("rootfs-*"))
    yield
    for left in set(tmpdir.glob("rootfs-*")) - before:
        shutil.rmtree(left, ignore_errors=True)


def apptainer(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(SHIM), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_apptainer_run_trains_from_a_writable_working_directory_as_another_uid(sif):
    work = shared_dir("run")
    try:
        proc = apptainer("run", "--unsquash", str(sif), cwd=work)
        assert proc.returncode == 0, proc.stderr[-4000:]
        # /workspace/runs is the SIF's, read-only: the run went to ./runs and says so
        assert f"/workspace/runs is read-only under Apptainer: this run writes to {work}/runs/" in proc.stderr
        [report_file] = list((work / "runs").glob("*/report.json"))
        report = json.loads(report_file.read_text())
        assert report["status"] == "ok" and report["image"]["variant"] == "jax0.12-cpu", report.get("error")
        assert report_file.stat().st_uid == user_ids()[0]  # written as the caller, not root
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_failure_under_apptainer_speaks_apptainer_and_names_the_stack(sif):
    """A read-only --output-dir: the fix is Apptainer's --bind, never Docker's -v, and the report
    still names JAX's and Keras's versions (they came out as None before the framework import)."""
    work = shared_dir("fail")
    try:
        proc = apptainer("exec", "--unsquash", str(sif), "python", "/opt/kerasenv/smoke_train.py",
                         "--output-dir", "/workspace/runs/given", cwd=work)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert "output directory /workspace/runs/given is not writable (Read-only file system)" in proc.stderr
        assert "fix: run from a folder you can write (the run goes to ./runs), bind one " \
               "(apptainer run --bind $PWD/runs:/workspace/runs ...)" in proc.stderr, proc.stderr[-2000:]
        assert "-v $PWD" not in proc.stderr
        assert "JAX 0.12.0.1 / Keras 3.15.1 / Python 3.13" in proc.stderr, proc.stderr[-2000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_hosts_home_and_user_site_do_not_change_what_the_image_runs(sif):
    """Apptainer binds the host's $HOME, runs as the caller and passes the host's environment: a
    ~/.keras/keras.json (float16, channels_first), a keras.py in ~/.local's user site and one on
    the host's PYTHONPATH are in reach. The image's ENV (KERAS_HOME, PYTHONNOUSERSITE, PYTHONPATH=)
    keeps them out; without it floatx read float16 and the PYTHONPATH's keras.py was imported (seen
    here with kerasenv:jax0.12-cpu before issue 44)."""
    work = shared_dir("home")
    home = work / "home"
    site = home / ".local" / "lib" / "python3.13" / "site-packages"
    site.mkdir(parents=True)
    (site / "keras.py").write_text('raise SystemExit("the host user site shadowed the image")\n')
    (work / "module").mkdir()  # what a host's `module load python` puts on PYTHONPATH
    (work / "module" / "keras.py").write_text('raise SystemExit("the host PYTHONPATH shadowed the image")\n')
    (home / ".keras").mkdir()
    (home / ".keras" / "keras.json").write_text(
        '{"floatx": "float16", "epsilon": 1e-07, "backend": "tensorflow", "image_data_format": "channels_first"}')
    subprocess.run(["chown", "-R", f"{user_ids()[0]}:{user_ids()[1]}", str(work)], check=True)
    probe = ("import keras, site, subprocess; "
             "print(keras.__file__, keras.config.floatx(), keras.config.image_data_format(), keras.backend.backend()); "
             "print(subprocess.run(['/usr/bin/python3', '-c', 'import site; print(site.ENABLE_USER_SITE)'], "
             "capture_output=True, text=True).stdout.strip())")
    try:
        proc = apptainer("exec", "--unsquash", "--home", str(home), str(sif), "python", "-c", probe, cwd=work,
                         env={"PYTHONPATH": str(work / "module")})
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = proc.stdout.strip().splitlines()
        assert lines[-2] == "/opt/venv/lib/python3.13/site-packages/keras/__init__.py float32 channels_last jax", lines
        assert lines[-1] == "False", lines  # Debian's own python3 too: PYTHONNOUSERSITE
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm():
    proc = subprocess.run(["bash", str(REPO / "scripts" / "slurm-local.sh"), "--check"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.strip() or proc.stdout


def test_two_slurm_tasks_train_one_jax_job_through_apptainer(slurm, sif):
    """`srun apptainer exec kerasenv-jax.sif ...` (slurm/kerasenv-jax-apptainer.sbatch): JAX finds
    its Slurm job from the SLURM_* variables Apptainer passes through, the two processes train one
    model, and both end with the same weights (weights_sha256, issue 37's check)."""
    work = shared_dir("slurm")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").symlink_to(SHIM)  # `apptainer` on the tasks' PATH, as on a cluster node
    # The job runs as root here (the batch script makes the runs folder as its user, which on a
    # cluster is the user Apptainer runs as): the folder is Apptainer's uid's from the start.
    (work / "runs").mkdir()
    os.chown(work / "runs", *user_ids())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "KERASENV_", "JAX_"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", KERASENV_SIF=str(sif), KERASENV_SMOKE_ARGS="--epochs 2",
               KERASENV_RUNS_DIR=str(work / "runs"),
               KERASENV_APPTAINER_ARGS="--unsquash")
    try:
        started = time.monotonic()
        proc = subprocess.run(["sbatch", "--parsable", "--wait", "--ntasks=2", f"--chdir={work}", "--time=00:15:00",
                               str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900)
        elapsed = time.monotonic() - started
        job = proc.stdout.strip().splitlines()[0].split(";")[0]
        log = (work / f"kerasenv-jax-{job}.out").read_text()
        print(f"\n[apptainer] Slurm job {job}: 2 tasks through Apptainer in {elapsed:.0f} s")
        assert proc.returncode == 0, f"sbatch exited {proc.returncode}: {proc.stderr}\n{log[-4000:]}"
        assert "Converting SIF file to temporary sandbox" in log  # Apptainer ran it, not Docker
        chief = json.loads((work / "runs" / job / "report.json").read_text())
        worker = json.loads((work / "runs" / job / "worker-1" / "report.json").read_text())
        assert chief["status"] == "ok" and worker["status"] == "ok", log[-4000:]
        for report, pid in ((chief, 0), (worker, 1)):
            dist = report["distributed"]
            assert (dist["processes"], dist["launcher"], dist["process_id"]) == (2, "slurm", pid), dist
        assert re.fullmatch(r"[0-9a-f]{64}", chief["distributed"].get("weights_sha256") or ""), chief["distributed"]
        assert chief["distributed"]["weights_sha256"] == worker["distributed"]["weights_sha256"], \
            "the two processes ended with different weights"
        assert (work / "runs" / job / "report.json").stat().st_uid == user_ids()[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)

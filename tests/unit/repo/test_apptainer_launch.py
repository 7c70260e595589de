"""slurm/kerasenv-jax-apptainer.sbatch without Slurm or Apptainer (stand-ins for srun, scontrol
and apptainer record what each task would run), and the image properties the HPC launchers rely
on, read from the generated Dockerfiles: pyxis skips an ENTRYPOINT by default, Apptainer and
enroot keep the image's ENV. The real runs: tests/integration/test_apptainer.py (Apptainer,
Slurm); read-only root and any uid: smoke_tests/test_user_workloads.py."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ..conftest import REPO

SCRIPT = REPO / "slurm" / "kerasenv-jax-apptainer.sbatch"
SHIM = REPO / "scripts" / "apptainer-sid-root.sh"
DOCKERFILES = sorted(REPO.glob("images/*/*Dockerfile"))
# A variant's own (amd64, arm64); the JupyterLab flavour is FROM it and inherits its ENV.
VARIANT_DOCKERFILES = [p for p in DOCKERFILES if p.name != "jupyter.Dockerfile"]


def test_the_scripts_parse():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    subprocess.run(["bash", "-n", str(SHIM)], check=True)


def commands_of(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def test_the_environment_is_never_cleaned():
    """--cleanenv, --containall (and -e, -C) drop SLURM_*: JAX would train one process per task."""
    code = commands_of(SCRIPT.read_text())
    assert not re.search(r"--cleanenv|--containall|\s-[eC]\s", code)


def run_job(tmp_path: Path, *args: str, **env: str) -> list[list[str]]:
    """The sbatch script with stand-ins: srun runs its command twice (tasks 0 and 1), apptainer
    records its arguments and the SLURM_*/JAX_* variables it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\n'
                                  'for i in 0 1; do SLURM_PROCID=$i SLURM_LOCALID=$i "$@" || exit; done\n')
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho node1\n")
    (bin_dir / "apptainer").write_text(f'#!/bin/bash\n{{ printf "%s\\0" "$@"; echo; env | grep -E "^(SLURM|JAX)_" '
                                       f'| sort | tr "\\n" " "; echo; }} >> {tmp_path}/calls\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "kerasenv-jax.sif").write_text("")
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node1",
            "SLURM_STEP_NODELIST": "node1", "SLURM_NTASKS": "2", "SLURM_SUBMIT_DIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(SCRIPT), *args], cwd=tmp_path, env={**base, **env},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "calls").read_text().splitlines()
    return [(lines[i].rstrip("\0").split("\0"), lines[i + 1]) for i in range(0, len(lines), 2)]


def test_each_task_runs_apptainer_exec_with_the_runs_bound_and_slurms_variables(tmp_path):
    calls = run_job(tmp_path, KERASENV_SMOKE_ARGS="--epochs 2", KERASENV_APPTAINER_ARGS="--unsquash")
    assert len(calls) == 2
    for index, (argv, env) in enumerate(calls):
        assert argv == ["exec", "--unsquash", "--bind", f"{tmp_path}/runs:/workspace/runs", f"{tmp_path}/kerasenv-jax.sif",
                        "python", "/opt/kerasenv/smoke_train.py", "--run-id", "4242", "--output-dir",
                        "/workspace/runs/4242", "--epochs", "2"]
        assert f"SLURM_PROCID={index}" in env and "SLURM_NTASKS=2" in env and "JAX_NUM_CPU_DEVICES=1" in env
    assert (tmp_path / "runs").is_dir()


def test_gpus_are_apptainers_nv_or_rocm_and_a_gres_task_sees_its_gpu_as_index_0(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (argv, env), _ = run_job(tmp_path / "a", "python", "train.py", KERASENV_GPUS="1", SLURM_STEP_GPUS="2,3")
    assert argv[:2] == ["exec", "--nv"] and argv[-2:] == ["python", "train.py"]
    assert "JAX_LOCAL_DEVICE_IDS=0" in env
    (argv, env), _ = run_job(tmp_path / "b", KERASENV_GPUS="rocm")
    assert argv[:2] == ["exec", "--rocm"] and "JAX_LOCAL_DEVICE_IDS" not in env


def test_a_missing_sif_is_one_line_with_the_build(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"] + ":/bin", "SLURM_JOB_ID": "1", "SLURM_SUBMIT_DIR": str(tmp_path),
                               "KERASENV_SIF": str(tmp_path / "none.sif")})
    if "no apptainer" in proc.stderr:  # this machine's apptainer lives in the sid root, off PATH
        assert proc.stderr.count("\n") == 1 and "module load apptainer" in proc.stderr
        return
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"no SIF at {tmp_path}/none.sif: apptainer build" in proc.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_image_needs_an_entrypoint(dockerfile):
    """pyxis (srun --container-image) skips an ENTRYPOINT unless --container-entrypoint, and
    `apptainer exec` runs none: every set-up is ENV and the .pth file."""
    assert not re.search(r"^ENTRYPOINT", dockerfile.read_text(), re.M)


@pytest.mark.parametrize("dockerfile", VARIANT_DOCKERFILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_images_keep_a_bound_host_home_out(dockerfile):
    """KERAS_HOME and PYTHONNOUSERSITE keep a bound host home out (Apptainer binds it; pyxis mounts
    it by default too); the Debian-based images also empty PYTHONPATH."""
    text = dockerfile.read_text()
    assert "KERAS_HOME=/opt/kerasenv/keras-home" in text and "PYTHONNOUSERSITE=1" in text
    if "rocm" not in dockerfile.parent.name:
        assert re.search(r"^    PYTHONPATH=$", text, re.M)
    assert re.search(r'^CMD \["python3?", "/opt/kerasenv/smoke_train.py"\]$', text, re.M)

"""The GitHub workflow validates offline and takes its matrix from the matrix file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from ..conftest import REPO

WORKFLOW = REPO / ".github" / "workflows" / "images.yml"


def kerasenv_json(*args: str):
    out = subprocess.run([sys.executable, "-m", "kerasenv", *args], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def test_workflow_validates_against_the_github_workflow_schema():
    checker = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run([str(checker), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_matrix_job_reads_the_generated_matrix_and_never_fails_fast():
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    setup = "\n".join(step.get("run", "") for step in jobs["matrix"]["steps"])
    assert "kerasenv matrix --github" in setup
    for name, job in jobs.items():
        if "strategy" not in job:
            continue
        include = job["strategy"]["matrix"]["include"]
        assert include.startswith("${{ fromJSON(needs.matrix.outputs.") and "matrix" in job["needs"], name
        assert job["strategy"]["fail-fast"] is False, name
        assert "matrix.name" in job["name"], name


def test_the_generated_matrix_covers_every_variant_once(real_matrix):
    debian = kerasenv_json("matrix", "--github", "--family", "cpu", "--family", "cuda")
    rocm = kerasenv_json("matrix", "--github", "--family", "rocm")
    ids = [row["id"] for row in debian + rocm]
    assert sorted(ids) == sorted(real_matrix.ids) and len(ids) == len(set(ids))
    for row in debian + rocm:
        v = real_matrix.get(row["id"])
        assert v.framework_label in row["name"]
        if v.family == "cuda":
            assert f"CUDA {v.cuda}" in row["name"]


def test_gpu_jobs_cover_every_cuda_variant(real_matrix):
    cuda = kerasenv_json("matrix", "--github", "--family", "cuda")
    assert [row["id"] for row in cuda] == [v.id for v in real_matrix.variants if v.family == "cuda"]
    gpu = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gpu"]
    assert gpu["runs-on"] == ["self-hosted", "gpu"]
    assert any("GPU=1" in step.get("run", "") for step in gpu["steps"])

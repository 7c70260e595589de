"""`python -m kerasenv`: output, exit codes, and one-line errors without tracebacks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kerasenv.images.build import CA_ENV_VARS

REPO = Path(__file__).resolve().parents[3]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
NO_DOCKER = "unix:///nonexistent.sock"
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def kerasenv(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with no CA settings and, unless told, a Docker host that does not exist."""
    environ = {k: v for k, v in os.environ.items() if k not in CA_ENV_VARS}
    environ.update({"DOCKER_HOST": NO_DOCKER, **env})
    return subprocess.run([PYTHON, "-m", "kerasenv", *args], cwd=REPO, env=environ,
                          capture_output=True, text=True, timeout=120)


def usage_error(*args: str) -> str:
    """Run a command that must fail with exit 2 and one stderr line; return that line."""
    proc = kerasenv(*args)
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kerasenv: error: ")
    return lines[0]


def test_list_ids_prints_every_id(real_matrix):
    proc = kerasenv("list", "--ids")
    assert proc.returncode == 0
    assert proc.stdout.split() == real_matrix.ids


def test_list_json_is_one_object_per_variant(real_matrix):
    proc = kerasenv("list", "--json")
    assert proc.returncode == 0
    rows = {row["id"]: row for row in json.loads(proc.stdout)}
    assert list(rows) == real_matrix.ids
    gpu = rows[real_matrix.default_gpu]
    # CUDA 12.9 Update 1 wheels: their driver is the PTX-JIT floor (TF's own PTX needs 555).
    assert (gpu["image"], gpu["min_driver_ptx_jit"]) == (f"kerasenv:{gpu['id']}", "555.42.06")
    assert gpu["cuda_wheels_driver"] == "575.57.08"
    assert gpu["cuda_stack_provenance"]["kind"] == "gpu-verified-override"
    assert gpu["cuda_stack_provenance"]["source"].startswith("https://")
    assert rows["tf2.17-cuda12.3"]["cuda_stack_provenance"]["kind"] == "tensorflow-tested"
    assert "cuda" not in rows[real_matrix.default_cpu]
    assert "cuda_stack_provenance" not in rows[real_matrix.default_cpu]


def test_list_shows_where_each_cuda_stack_comes_from(real_matrix):
    proc = kerasenv("list")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    stack_lines = [line.strip() for line in lines if line.strip().startswith("stack:")]
    cuda = [v for v in real_matrix.variants if v.family == "cuda"]
    assert len(stack_lines) == len(cuda)
    gpu = real_matrix.get(real_matrix.default_gpu)
    assert any(gpu.gpu_evidence.source in line and gpu.gpu_evidence.gpu in line for line in stack_lines)


def test_build_unknown_id_lists_valid_ids(real_matrix):
    line = usage_error("build", "nope")
    assert "'nope'" in line
    assert all(i in line for i in real_matrix.ids)


def test_build_without_ids_is_a_usage_error(real_matrix):
    assert real_matrix.default_gpu in usage_error("build")


def test_build_without_docker_daemon_says_so():
    line = usage_error("build", "tf2.21-cpu", "--no-ca-cert")
    assert "Docker daemon" in line and NO_DOCKER in line


def test_missing_ca_cert_fails_before_docker():
    line = usage_error("build", "tf2.21-cpu", "--ca-cert", "/nonexistent.pem")
    assert "/nonexistent.pem" in line and "does not exist" in line
    assert "Docker" not in line


def test_non_pem_ca_cert_is_rejected(tmp_path):
    ca = tmp_path / "ca.der"
    ca.write_bytes(b"\x30\x82\x01\x0a not pem")
    line = usage_error("build", "tf2.21-cpu", "--ca-cert", str(ca))
    assert str(ca) in line and "not a PEM certificate" in line


def test_ca_from_environment_is_checked_too(tmp_path):
    ca = tmp_path / "proxy.pem"
    ca.write_bytes(PEM)
    # A readable PEM passes the CA check, so the failure is the missing daemon.
    proc = kerasenv("build", "tf2.21-cpu", KERASENV_CA_CERT=str(ca))
    assert proc.returncode == 2 and "Docker daemon" in proc.stderr
    assert "does not exist" in kerasenv("build", "tf2.21-cpu", PIP_CERT=str(tmp_path / "gone.pem")).stderr


def test_bad_matrix_option_names_the_file(write_matrix):
    path = write_matrix('family = "cpu"', 'family = "tpu"')
    assert str(path) in usage_error("--matrix", str(path), "list")


def test_generate_check_passes_on_the_repo():
    proc = kerasenv("generate", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "generated files match" in proc.stdout


@pytest.mark.parametrize("args", [["--version"], ["list", "--markdown"], ["list"]])
def test_informational_commands_succeed(args):
    proc = kerasenv(*args)
    assert proc.returncode == 0 and proc.stdout and not proc.stderr


def test_help_lists_every_command_in_the_order_a_user_meets_them():
    from kerasenv.cli import HELP_ORDER

    # `layers` (which layers two builds share) where images/commands.py registers it: right before
    # `build`, whose `--tag` makes the second image it compares.
    assert HELP_ORDER[HELP_ORDER.index("build") - 1: HELP_ORDER.index("build") + 1] == ("layers", "build")
    proc = kerasenv("--help", COLUMNS="100")
    assert re.findall(r"^    (\S+)(?: |$)", proc.stdout, re.M) == list(HELP_ORDER)
    proc = kerasenv("no-such-command")
    assert proc.returncode == 2
    assert f"(choose from {', '.join(map(repr, HELP_ORDER))})" in proc.stderr


def test_smoke_unknown_variant_lists_valid_ids(real_matrix, tmp_path):
    line = usage_error("smoke", "tf9.9-cpu", "--runs-dir", str(tmp_path))
    assert "tf9.9-cpu" in line and all(i in line for i in real_matrix.ids)


def test_smoke_without_docker_daemon_says_so(tmp_path):
    line = usage_error("smoke", "tf2.21-cpu", "--runs-dir", str(tmp_path))
    assert "Docker daemon" in line and NO_DOCKER in line


def test_runs_dir_that_cannot_be_created_is_named_before_docker(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    line = usage_error("smoke", "tf2.21-cpu", "--runs-dir", str(blocker / "runs"))
    assert str(blocker / "runs") in line and "--runs-dir" in line and "Docker" not in line


@pytest.mark.parametrize("memory", ["lots", "4x", "1k"])
def test_memory_limit_docker_would_reject_is_a_usage_error(memory, tmp_path):
    line = usage_error("smoke", "tf2.21-cpu", "--memory", memory, "--runs-dir", str(tmp_path))
    assert "--memory" in line and memory in line and "Docker daemon" not in line


def test_output_piped_into_a_reader_that_left_is_not_a_traceback():
    """`kerasenv list | head -1`: here the reader has already gone, so the first write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([PYTHON, "-m", "kerasenv", "list", "--json"], cwd=REPO, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert proc.returncode == 141
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr

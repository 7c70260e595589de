"""scripts/test-prereqs.sh, which `make test` runs first: its syntax, and the one line a
user who is not root gets when something needs installing (no Docker or apt touched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ..conftest import REPO

SCRIPT = REPO / "scripts" / "test-prereqs.sh"
# What the script's first part calls; the tools it looks for (docker-registry, tmux, skopeo, ctr,
# chromium, node, npm, devcontainer, docker) are left out on purpose.
BASICS = ("bash", "env", "id", "timeout", "sed", "dirname", "cat", "sort", "head")


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.fixture
def bare_host():
    """A copy of the script and a PATH holding only the basics, readable by any user (as
    root the test runs the script as `nobody`)."""
    root = Path(tempfile.mkdtemp(prefix="kerasenv-prereqs-"))
    try:
        (root / "scripts").mkdir()
        shutil.copy(SCRIPT, root / "scripts")
        (root / "bin").mkdir()
        for name in BASICS:
            (root / "bin" / name).symlink_to(shutil.which(name))
        for path in (root, root / "scripts", root / "bin"):
            path.chmod(0o755)
        (root / "scripts" / SCRIPT.name).chmod(0o755)
        yield root
    finally:
        shutil.rmtree(root)


def test_a_user_without_root_gets_one_line_naming_what_is_missing_and_the_command(bare_host):
    command = [shutil.which("bash"), str(bare_host / "scripts" / SCRIPT.name)]
    if os.geteuid() == 0:
        command = [shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30,
                          env={"PATH": str(bare_host / "bin"), "HOME": str(bare_host), "DOCKER_HOST": "unix:///nonexistent"})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    (line,) = lines
    assert line.startswith("test-prereqs: missing docker-registry, ")
    for what in ("tmux", "skopeo", "containerd", "chromium", "nodejs", "npm", "the devcontainer CLI"):
        assert what in line
    assert "run `sudo make test-prereqs` (or: sudo apt-get install -y docker-registry " in line
    assert line.endswith("&& sudo npm install -g @devcontainers/cli)")


CURRENT = REPO / "scripts" / "docker-current.sh"


def test_the_docker_current_script_parses_and_answers_in_one_line(tmp_path):
    # scripts/docker-current.sh (issue 43): installs and starts Docker 28.5.2 with the containerd
    # store; `which` is what test-prereqs and .ci/run print, and it never starts anything.
    subprocess.run(["bash", "-n", str(CURRENT)], check=True)
    proc = subprocess.run(["bash", str(CURRENT), "which", str(tmp_path / "none.sock")],
                          capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, f"nothing answers on {tmp_path / 'none.sock'}\n")
    bad = subprocess.run(["bash", str(CURRENT), "replace-everything"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.splitlines() == [f"docker-current: usage: {CURRENT} install|main|second|floor|which [SOCKET]|"
                                       "stop-second|stop-floor"]


def test_test_prereqs_refuses_an_unknown_main_engine_in_one_line(bare_host):
    proc = subprocess.run([shutil.which("bash"), str(bare_host / "scripts" / SCRIPT.name)], capture_output=True,
                          text=True, timeout=30, env={"PATH": str(bare_host / "bin"), "HOME": str(bare_host),
                                                      "KERASENV_MAIN_ENGINE": "podman"})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["test-prereqs: KERASENV_MAIN_ENGINE=podman: choose docker28 (Docker 28.5.2, "
                                        "containerd store) or debian (Docker 20.10)"]

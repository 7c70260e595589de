"""scripts/sid-root.sh, which `make test-prereqs` runs (the sid root of Podman 5): its syntax,
and what --check says of a root that is missing or lacks packages, without making one."""

from __future__ import annotations

import os
import re
import subprocess

from ..conftest import REPO

SCRIPT = REPO / "scripts" / "sid-root.sh"
# The packages the script makes the root with (its PACKAGES array: Podman 5's, then Apptainer's).
PACKAGES = re.search(r"^PACKAGES=\(([^)]*)\)", SCRIPT.read_text(), re.M).group(1).split()


def check(root) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True,
                          env={**os.environ, "SID_ROOT": str(root)})


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_check_says_in_one_line_what_is_missing_and_changes_nothing(tmp_path):
    missing = check(tmp_path / "sid-root")
    assert missing.returncode == 1 and missing.stdout == ""
    (line,) = missing.stderr.splitlines()
    assert line.startswith(f"sid-root: no sid root at {tmp_path}/sid-root") and "`sudo scripts/sid-root.sh`" in line
    assert not (tmp_path / "sid-root").exists()
    (tmp_path / "sid-root").mkdir()
    (tmp_path / "sid-root" / ".kerasenv-sid-root").write_text(" podman crun runc conmon netavark catatonit \n")
    lacking = check(tmp_path / "sid-root")
    assert lacking.returncode == 1
    assert lacking.stderr.strip() == (f"sid-root: {tmp_path}/sid-root lacks {' '.join(PACKAGES[6:])}: "
                                      "run `sudo scripts/sid-root.sh`")


def test_a_complete_root_is_only_looked_at(tmp_path):
    assert PACKAGES[:6] == ["podman", "crun", "runc", "conmon", "netavark", "catatonit"] and "apptainer" in PACKAGES
    (tmp_path / ".kerasenv-sid-root").write_text(f" {' '.join(PACKAGES)} \n")
    done = subprocess.run(["bash", str(SCRIPT), "--quiet"], capture_output=True, text=True,
                          env={**os.environ, "SID_ROOT": str(tmp_path)})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_test_prereqs_makes_it_as_root_and_names_the_command_otherwise():
    text = (REPO / "scripts" / "test-prereqs.sh").read_text()
    assert "bash scripts/sid-root.sh --quiet" in text
    assert "bash scripts/sid-root.sh --check >/dev/null || bash scripts/sid-root.sh --check" in text


def test_a_failed_download_is_retried_on_the_same_lines_as_base_offline():
    """The sid root's debootstrap retries on the lines kerasenv base-offline retries on."""
    from kerasenv.images import base_offline

    line = re.search(r'^\s*transient="([^"]*)"', SCRIPT.read_text(), re.M).group(1)
    assert line.split("|") == list(base_offline.TRANSIENT)

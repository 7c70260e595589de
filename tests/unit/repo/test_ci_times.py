"""scripts/timed-step and scripts/ci_times.py: the timing lines of `make test`'s lanes, and
benchmarks/ci-times.md written from a CI log (a cold and a warm section, each replaced by the
next run of its kind)."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import REPO

LOG = """\
[ci   97s] make test
built kerasenv:tf2.21-cpu: 1.77 GB uncompressed, 124 s
[tf2.21-cuda12.9] Step 3/40 : RUN pip install
========== 77 passed, 3 deselected in 131.20s (0:02:11) ==========
[step] build tf2.21-cpu: 160 s, exit 0 (at +98..+258 s)
[step] acceptance tf2.21-cpu: 133 s, exit 0 (at +258..+391 s)
35.21s call     smoke_tests/test_hygiene.py::test_no_build_ca_in_the_image[tf2.21-cpu]
2.10s setup    smoke_tests/test_user.py::test_default_user_is_keras_uid_1000[tf2.21-cpu]
=== 1 failed, 800 passed in 500.00s ===
[step] pytest tests: 505 s, exit 1 (at +391..+896 s)
"""


def write(tmp_path, *extra: str, log: str = LOG):
    path = tmp_path / "ci.log"
    path.write_text(log)
    out = tmp_path / "ci-times.md"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "ci_times.py"), str(path), "--total", "1950",
                           "--prereqs", "33", "--peak-extra-gb", "41.2", "--status", "0", "--cpus", "2",
                           "--out", str(out), *extra], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return out.read_text()


def test_each_step_build_and_slow_test_is_tabled(tmp_path):
    text = write(tmp_path, "--cold")
    assert "## Last cold run" in text and "**total 1950 s (32.5 min)**" in text and "**41.2 GB**" in text
    assert "| build tf2.21-cpu | 160 | 98 | 258 | 0 |  |" in text
    assert "| acceptance tf2.21-cpu | 133 | 258 | 391 | 0 | 77 passed, 3 deselected |" in text
    assert "| pytest tests | 505 | 391 | 896 | 1 | 1 failed, 800 passed |" in text
    assert "| `kerasenv:tf2.21-cpu` | 1.77 GB | 124 s |" in text
    assert text.index("35.2 | call") < text.index("2.1 | setup")


def test_the_cpu_idle_share_is_recorded_when_given_and_left_out_when_not(tmp_path):
    text = write(tmp_path, "--cold", "--cpu-idle", "+0: 3%, +300: 38%")
    assert "The CPU's idle share by 5-minute window (seconds since the start): +0: 3%, +300: 38%." in text
    assert "idle share" not in write(tmp_path, "--cold")


def test_a_run_replaces_only_the_section_of_its_kind(tmp_path):
    write(tmp_path, "--cold")
    text = write(tmp_path, log="[step] build tf2.21-cpu: 20 s, exit 0\n")  # a warm run after it
    assert text.count("## Last cold run") == 1 and text.count("## Last warm run") == 1
    assert "| build tf2.21-cpu | 160 |" in text and "| build tf2.21-cpu | 20 |" in text
    text = write(tmp_path, log="[step] build tf2.21-cpu: 21 s, exit 0\n")
    assert text.count("## Last warm run") == 1 and "| build tf2.21-cpu | 20 |" not in text


def test_timed_step_prints_one_line_and_keeps_the_exit_status(tmp_path):
    proc = subprocess.run([str(REPO / "scripts" / "timed-step"), "acceptance x", "sh", "-c", "echo hi; exit 3"],
                          capture_output=True, text=True, env={"KERASENV_CI_STARTED": "0", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3
    lines = proc.stdout.splitlines()
    assert lines[0] == "hi"
    assert lines[1].startswith("[step] acceptance x: 0 s, exit 3 (at +")

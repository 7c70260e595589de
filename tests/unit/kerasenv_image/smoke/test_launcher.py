"""images/common/smoke_train.py, the images' default command: it runs kerasenv_image.smoke."""

from __future__ import annotations

import os
import subprocess
import sys

from ...conftest import REPO


def test_the_launcher_runs_the_package(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "images" / "common" / "smoke_train.py"), "--help"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0 and "--steps-per-epoch" in proc.stdout


def test_the_launcher_needs_no_installed_package():
    """Run as a script, its own folder is on sys.path: the images' default command works even
    where no .pth file names /opt/kerasenv (-S: no site-packages, so no installed kerasenv_image)."""
    proc = subprocess.run([sys.executable, "-S", str(REPO / "images" / "common" / "smoke_train.py"), "--help"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0 and "--steps-per-epoch" in proc.stdout

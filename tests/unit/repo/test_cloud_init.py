"""scripts/cloud-init.yaml cannot run here (no cloud VM): check its YAML and shell syntax."""

from __future__ import annotations

import subprocess

import yaml

from ..conftest import REPO

CLOUD_INIT = REPO / "scripts" / "cloud-init.yaml"


def test_it_is_cloud_config_yaml():
    text = CLOUD_INIT.read_text()
    assert text.startswith("#cloud-config\n")
    config = yaml.safe_load(text)
    assert {"packages", "write_files", "runcmd"} <= set(config)
    assert "docker.io" in config["packages"]


def test_the_setup_script_is_valid_bash_and_runs_doctor_probe_and_smoke(tmp_path):
    script = yaml.safe_load(CLOUD_INIT.read_text())["write_files"][0]["content"]
    path = tmp_path / "setup.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    for needle in ("nvidia-ctk runtime configure --runtime=docker", "nvidia-container-toolkit",
                   "--gpus all", "smoke_train.py --require-gpu", "docker pull"):
        assert needle in script

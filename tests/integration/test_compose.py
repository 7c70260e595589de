"""Docker Compose: every file combination validates; train + TensorBoard really run."""

from __future__ import annotations

import gzip
import json
import os
import time
import urllib.request
import uuid

import pytest

from .conftest import compose, free_port

pytestmark = pytest.mark.usefixtures("compose_plugin")

COMBINATIONS = [[], ["nvidia"], ["nvidia-devices"], ["nvidia-cdi"], ["rocm"]]
# What `kerasenv rocm-groups` prints on the AMD host shape tests/fixtures/amd-hosts/ubuntu-render-993
# (simulated; the render GID 993 of ROCm/ROCm-docker#116), which `make up COMPOSE_GPU=rocm` passes.
ROCM_GIDS = {"KERASENV_KFD_GID": "993", "KERASENV_RENDER_GID": "993"}





@pytest.mark.parametrize("overrides", COMBINATIONS, ids=lambda o: "+".join(["base", *o]))
def test_every_compose_combination_validates(overrides):
    env = ROCM_GIDS if overrides == ["rocm"] else None
    resolved = json.loads(compose("config", "--format", "json", overrides=overrides, env=env).stdout)
    train = resolved["services"]["train"]
    assert train["init"] is True and train["shm_size"]
    if overrides and overrides[0].startswith("nvidia"):
        device = train["deploy"]["resources"]["reservations"]["devices"][0]
        if overrides == ["nvidia-cdi"]:  # what kerasenv run sends where the engine takes CDI
            assert device["driver"] == "cdi" and device["device_ids"] == ["nvidia.com/gpu=all"]
        else:
            assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    if overrides == ["rocm"]:
        assert {d["source"] for d in train["devices"]} == {"/dev/kfd", "/dev/dri"}
        assert train["group_add"] == ["0", "993"]  # the base's group 0 (pip install), the nodes' GID (once)
        assert train["security_opt"] == ["seccomp=unconfined"]
    assert "deploy" not in resolved["services"]["tensorboard"]  # TensorBoard never takes a GPU
    assert "0" in train["group_add"]  # the venv is group-0 writable: pip install under any UID


def test_the_rocm_override_without_the_gids_stops_naming_them():
    """By hand, without `kerasenv rocm-groups`: an error, not a container that cannot open the GPU."""
    proc = compose("config", overrides=["rocm"], clean_env=True, check=False)
    assert proc.returncode != 0
    assert "KERASENV_KFD_GID" in proc.stderr and "kerasenv rocm-groups" in proc.stderr


def scalar_tags(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as r:
        return json.load(r)


def profile_runs(port: int) -> list:
    """The profile plugin's runs (XProf answers gzip-compressed)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/data/plugin/profile/runs",
                                     headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as r:
        body = r.read()
        return json.loads(gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body)


def test_train_and_tensorboard_come_up_and_tensorboard_lists_the_scalars_and_the_profile(built_images, docker,
                                                                                        tmp_path):
    project = f"kerasenv-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {"RUNS_DIR": str(runs), "TENSORBOARD_PORT": str(port), "RUN_ID": "compose-test", "PROFILE": "1",
           "KERASENV_UID": str(os.getuid()), "KERASENV_GID": str(os.getgid())}
    try:
        compose("up", "-d", project=project, env=env)
        train = docker.containers.list(all=True, filters={"label": [f"com.docker.compose.project={project}",
                                                                    "com.docker.compose.service=train"]})[0]
        assert train.wait(timeout=600)["StatusCode"] == 0, train.logs()[-3000:]
        assert (runs / "compose-test" / "report.json").exists()
        deadline, tags = time.monotonic() + 120, {}
        while time.monotonic() < deadline:
            try:
                tags = scalar_tags(port)
            except OSError:
                tags = {}
            run = next((r for r in tags if r.startswith("compose-test/") and r.endswith("train")), None)
            if run and {"epoch_loss", "epoch_accuracy"} <= set(tags[run]):
                break
            time.sleep(2)
        else:
            pytest.fail(f"TensorBoard never listed the run's loss and accuracy: {tags}")
        # PROFILE=1: the smoke ran --profile, and the read-only TensorBoard serves the profile
        assert json.loads((runs / "compose-test" / "report.json").read_text())["profile"]["steps"] == [35, 40]
        assert [r for r in profile_runs(port) if r.startswith("compose-test/tensorboard/")]
    finally:
        compose("down", "--remove-orphans", project=project, env=env, check=False)
    left = docker.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})
    assert left == []

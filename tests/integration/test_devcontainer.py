"""The devcontainer with the real devcontainer CLI: `up` on the CPU configuration, then a
short Keras training through `exec` as the remote user; files it writes in the workspace
belong to the host user (updateRemoteUserUID)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import REPO, local_wheels

HOST_UID = 4321  # an unprivileged host user allowed to use Docker
CONFIG = REPO / ".devcontainer" / "cpu" / "devcontainer.json"


TRAIN = (
    "import numpy as np, keras\n"
    "x = np.random.default_rng(0).normal(size=(256, 8)).astype('float32')\n"
    "y = (x.sum(axis=1) > 0).astype('int32')\n"
    "m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation='relu'), keras.layers.Dense(2)])\n"
    "m.compile('adam', keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=['accuracy'])\n"
    "h = m.fit(x, y, epochs=5, verbose=0)\n"
    "m.save('trained.keras')\n"
    "print('accuracy', h.history['accuracy'][-1])\n"
)


def as_host_user(args: list[str], home: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    docker_gid = os.stat("/var/run/docker.sock").st_gid
    return subprocess.run(["setpriv", f"--reuid={HOST_UID}", f"--regid={HOST_UID}", f"--groups={docker_gid}", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HOME": str(home)})


@pytest.fixture
def host_user():
    """The devcontainer CLI asks `id -un`: the host UID needs a passwd entry."""
    try:
        pwd.getpwuid(HOST_UID)
        yield
        return
    except KeyError:
        pass
    subprocess.run(["useradd", "--no-create-home", "--uid", str(HOST_UID), "--user-group",
                    "kerasenv-host"], check=True)
    try:
        yield
    finally:
        subprocess.run(["userdel", "kerasenv-host"], check=False)


@pytest.fixture
def workspace(host_user):
    root = Path(tempfile.mkdtemp(prefix="kerasenv-devcontainer-"))
    for path in (root, root / "home", root / "project"):
        path.mkdir(exist_ok=True)
        os.chown(path, HOST_UID, HOST_UID)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_devcontainer_trains_as_the_remote_user_and_files_belong_to_the_host_user(built_images, docker, workspace):
    if shutil.which("devcontainer") is None:
        pytest.fail("the devcontainer CLI is missing: `sudo make test-prereqs` installs it "
                    "(or `sudo npm install -g @devcontainers/cli`); `make test` does it as root")
    project, home = workspace / "project", workspace / "home"
    cli = ["devcontainer", "--workspace-folder", str(project), "--config", str(CONFIG)]
    container_id = None
    try:
        started = time.monotonic()
        up = as_host_user(["devcontainer", "up", "--workspace-folder", str(project), "--config", str(CONFIG)], home)
        up_seconds = time.monotonic() - started
        assert up.returncode == 0, up.stderr[-3000:] + up.stdout[-3000:]
        result = json.loads(up.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "success" and result["remoteUser"] == "keras"
        container_id = result["containerId"]
        exec_ = as_host_user(["devcontainer", "exec", *cli[1:], "python", "-c", TRAIN], home)
        assert exec_.returncode == 0, exec_.stderr[-3000:]
        assert "accuracy" in exec_.stdout
        whoami = as_host_user(["devcontainer", "exec", *cli[1:], "id", "-un"], home)
        assert whoami.stdout.strip().splitlines()[-1] == "keras"
        # keras now has the host user's UID, no longer the venv's owner: --group-add=0 in
        # runArgs is what lets it install on top (offline, from a wheel in the workspace).
        wheels = project / "wheels"
        local_wheels.wheel(wheels, "kerasenv-devcontainer-demo", "1.0")
        for path in (wheels, *wheels.iterdir()):
            os.chown(path, HOST_UID, HOST_UID)
        install = as_host_user(["devcontainer", "exec", *cli[1:], "bash", "-c",
                                "pip install --no-index --find-links wheels kerasenv-devcontainer-demo && "
                                "python -c 'import kerasenv_devcontainer_demo as m; print(\"DEMO\", m.VERSION)'"], home)
        assert install.returncode == 0, install.stderr[-2000:] + install.stdout[-2000:]
        assert "DEMO 1.0" in install.stdout
        trained = project / "trained.keras"
        assert trained.exists()
        assert (trained.stat().st_uid, trained.stat().st_gid) == (HOST_UID, HOST_UID)
        print(f"devcontainer up: {up_seconds:.1f} s")
    finally:
        if container_id:
            container = docker.containers.get(container_id)
            image = container.image
            container.remove(force=True)
            if any(tag.startswith("vsc-") for tag in image.tags):  # the CLI's UID-update image
                docker.images.remove(image.id, force=True)

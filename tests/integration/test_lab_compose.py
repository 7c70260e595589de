"""JupyterLab outside the acceptance suite: the compose `lab` service (profile "lab", what
`make lab-up` runs) really serves over the project folder behind its token, `make up` does
not need a token, and `kerasenv lab` refuses a taken port or a variant without the flavour
before it creates anything."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from .conftest import REPO, compose as _compose, free_port


def compose(*args: str, env: dict, **kwargs):
    """compose.yaml with exactly `env` deciding its variables."""
    return _compose(*args, env=env, clean_env=True, **kwargs)


pytestmark = pytest.mark.usefixtures("compose_plugin")

LAB_IMAGE = "kerasenv:tf2.21-cpu-jupyter"  # compose.yaml's default KERASENV_JUPYTER_IMAGE






def request(method: str, url: str, *, token: str | None = None, body=None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# --- compose config ---------------------------------------------------------------------------

def test_compose_config_needs_no_jupyter_token_and_leaves_lab_out_of_make_up():
    proc = compose("config", "--format", "json", env={})
    assert "JUPYTER_TOKEN" not in proc.stderr, proc.stderr  # no "variable is not set" warning
    services = json.loads(proc.stdout)["services"]
    assert set(services) == {"train", "tensorboard"}  # `make up`: lab only with --profile lab
    assert compose("config", env={}).returncode == 0


def test_compose_lab_service_config_is_loopback_only_and_never_an_empty_token(tmp_path):
    unset = json.loads(compose("--profile", "lab", "config", "--format", "json", env={}).stdout)["services"]["lab"]
    assert unset["environment"].get("JUPYTER_TOKEN") is None  # unset: not passed, the server makes its own
    assert unset["image"] == LAB_IMAGE
    (port,) = unset["ports"]
    assert (port["host_ip"], port["published"], port["target"]) == ("127.0.0.1", "8888", 8888)

    env = {"JUPYTER_TOKEN": "abc123", "JUPYTER_PORT": "18999", "PROJECT_DIR": str(tmp_path),
           "KERASENV_JUPYTER_IMAGE": "kerasenv:jax0.12-cpu-jupyter"}
    lab = json.loads(compose("--profile", "lab", "config", "--format", "json", env=env).stdout)["services"]["lab"]
    assert lab["environment"]["JUPYTER_TOKEN"] == "abc123"
    assert lab["image"] == "kerasenv:jax0.12-cpu-jupyter"
    assert (lab["ports"][0]["host_ip"], lab["ports"][0]["published"]) == ("127.0.0.1", "18999")
    assert {(v["source"], v["target"]) for v in lab["volumes"]} == {(str(tmp_path), "/workspace")}
    assert lab["group_add"] == ["0"] and lab["init"] is True


# --- compose up --profile lab ------------------------------------------------------------------

def test_compose_lab_serves_the_project_behind_its_token(docker, tmp_path):
    from docker.errors import ImageNotFound

    try:
        docker.images.get(LAB_IMAGE)
    except ImageNotFound:
        pytest.fail(f"{LAB_IMAGE} is not built here: build it: kerasenv build tf2.21-cpu --jupyter", pytrace=False)
    project_name = f"kerasenv-test-lab-{uuid.uuid4().hex[:8]}"
    port, token = free_port(), uuid.uuid4().hex
    workspace = tmp_path / "project"
    workspace.mkdir()
    env = {"JUPYTER_TOKEN": token, "JUPYTER_PORT": str(port), "PROJECT_DIR": str(workspace),
           "KERASENV_UID": str(os.getuid()), "KERASENV_GID": str(os.getgid())}
    base = f"http://127.0.0.1:{port}"
    try:
        compose("--profile", "lab", "up", "-d", "lab", project=project_name, env=env)
        deadline, status = time.monotonic() + 180, None
        while time.monotonic() < deadline:
            try:
                status = request("GET", f"{base}/api/status", token=token)
            except OSError as exc:  # not listening yet
                status = (None, str(exc).encode())
            if status[0] == 200:
                break
            time.sleep(1)
        else:
            logs = compose("logs", "lab", project=project_name, env=env, check=False).stdout[-3000:]
            pytest.fail(f"lab never answered /api/status with its token: {status}\n{logs}")
        assert "started" in json.loads(status[1])
        assert request("GET", f"{base}/api/contents")[0] == 403
        assert request("GET", f"{base}/api/contents", token="not-" + token)[0] == 403

        code, raw = request("PUT", f"{base}/api/contents/from-lab.txt", token=token,
                            body={"type": "file", "format": "text", "content": "written through compose lab\n"})
        assert code in (200, 201), raw[:300]
        written = workspace / "from-lab.txt"
        assert written.read_text() == "written through compose lab\n"
        assert written.stat().st_uid == os.getuid()

        (container,) = docker.containers.list(filters={"label": [f"com.docker.compose.project={project_name}",
                                                                  "com.docker.compose.service=lab"]})
        assert container.attrs["HostConfig"]["PortBindings"]["8888/tcp"] == [
            {"HostIp": "127.0.0.1", "HostPort": str(port)}]
    finally:
        compose("--profile", "lab", "down", "--remove-orphans", project=project_name, env=env, check=False)
    left = docker.containers.list(all=True, filters={"label": f"com.docker.compose.project={project_name}"})
    assert left == []


# --- kerasenv lab refusals ----------------------------------------------------------------------

def lab_containers_of(docker, pid: int) -> list:
    return docker.containers.list(all=True, filters={"label": ["io.kerasenv.kind=lab", f"io.kerasenv.cli-pid={pid}"]})


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_kerasenv_lab_refuses_a_port_in_use_and_creates_no_container(docker, bind):
    with socket.socket() as held:
        held.bind((bind, 0))
        held.listen()
        port = held.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "kerasenv", "lab", "tf2.21-cpu", "--port", str(port)],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            made = lab_containers_of(docker, proc.pid)
            for c in made:
                c.remove(force=True)
    assert proc.returncode == 2, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"port {port}" in lines[0] and "in use" in lines[0], err
    assert out == ""
    assert made == []


def test_kerasenv_lab_refuses_a_variant_without_a_jupyter_flavour(docker):
    proc = subprocess.run([sys.executable, "-m", "kerasenv", "lab", "tf2.17-rocm6.3", "--port", str(free_port())],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "tf2.17-rocm6.3 has no JupyterLab flavour" in lines[0], proc.stderr
    assert "tf2.21-cpu" in lines[0]  # it names those that have one

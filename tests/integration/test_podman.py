"""Podman behind DOCKER_HOST, for real: Debian's podman 4.3 serving the Docker API on a unix
socket, driven by our CLI (`kerasenv doctor`, `smoke`, `run`) exactly as a RHEL/Fedora user or an
HPC login node would.

- The CPU image's smoke training passes through it (the image copied into a throwaway Podman
  storage with `docker save | podman load`).
- A GPU request is refused in one line naming the fix: Podman 4.x's compat API would accept it
  with HTTP 201 and start the container without a GPU (containers/podman#22645), so the CPU
  fallback would "pass".
- The doctor names the engine, and a rootless Podman run by an unprivileged user is seen as
  rootless (its compat /info says `"Rootless": true`).

The services are this module's own (their storage in a temporary folder, stopped and removed at
the end); `make test-prereqs` installs podman, catatonit (Podman's --init) and uidmap, and makes
the unprivileged user kerasenv-rootless.
"""

from __future__ import annotations

import json
import os
import pwd
import resource
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kerasenv.engine import server_process

from .conftest import kerasenv

ROOTLESS_USER = "kerasenv-rootless"
CPU_IMAGE = "kerasenv:tf2.21-cpu"


def _wait_for(sock: Path, proc: subprocess.Popen, what: str) -> None:
    for _ in range(100):
        if sock.exists():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{what} did not open {sock} (exit {proc.poll()})")


@pytest.fixture(scope="module")
def podman(tmp_path_factory, cpu_image):
    """A rootful Podman API service of our own, with the CPU image loaded; its DOCKER_HOST."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run `sudo make test-prereqs` (apt-get install podman catatonit uidmap)")
    top = tmp_path_factory.mktemp("podman")
    storage = ["--root", str(top / "root"), "--runroot", str(top / "run"), "--storage-driver", "overlay"]
    # Podman's own default ulimits for root containers (nofile 1048576) are above this machine's
    # hard limits, which runc then cannot set ("error setting rlimit type 7: operation not
    # permitted"; seen here): below them, in a containers.conf of the test's own.
    nofile = min(16384, resource.getrlimit(resource.RLIMIT_NOFILE)[1] // 2)
    nproc = min(16384, resource.getrlimit(resource.RLIMIT_NPROC)[1] // 2)
    conf = top / "containers.conf"
    conf.write_text(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n')
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    started = time.monotonic()
    save = subprocess.Popen(["docker", "save", cpu_image], stdout=subprocess.PIPE)
    load = subprocess.run(["podman", *storage, "load", "-q"], stdin=save.stdout, capture_output=True, text=True,
                          env=env, timeout=600)
    save.stdout.close()
    assert save.wait() == 0 and load.returncode == 0, load.stderr
    print(f"\n[podman] {cpu_image} loaded in {time.monotonic() - started:.0f} s")
    sock = top / "podman.sock"
    log = open(top / "service.log", "w")
    proc = subprocess.Popen(["podman", *storage, "system", "service", "--time=0", f"unix://{sock}"],
                            stdout=log, stderr=log, env=env, preexec_fn=server_process._default_signals)
    try:
        _wait_for(sock, proc, "podman system service")
        yield f"unix://{sock}"
    finally:
        server_process.stop(proc)
        log.close()
        subprocess.run(["podman", *storage, "rm", "-a", "-f"], capture_output=True, env=env)
        subprocess.run(["podman", *storage, "system", "reset", "-f"], capture_output=True, env=env)
        shutil.rmtree(top, ignore_errors=True)


def cli(docker_host: str, *args: str, env_extra: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": docker_host, **(env_extra or {})}
    return kerasenv(*args, check=False, env=env, timeout=900, **kwargs)


def podman_containers(docker_host: str) -> list:
    import docker

    return docker.DockerClient(base_url=docker_host).containers.list(all=True)


def test_the_doctor_names_podman_and_that_it_refuses_gpu_requests(podman):
    proc = cli(podman, "doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    engine = next(c for c in json.loads(proc.stdout)["host"] if c["name"] == "engine")
    assert engine["message"].startswith("Podman 4.3.1, behind the Docker API, rootful")
    assert "GPU requests are refused" in engine["message"] and "containers/podman#22645" in engine["message"]


def test_the_cpu_smoke_training_passes_through_podman(podman, tmp_path):
    proc = cli(podman, "smoke", "tf2.21-cpu", "--runs-dir", str(tmp_path), "--run-id", "podman", "--json",
               "--", "--epochs", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "podman" / "report.json").read_text())
    assert report["verdict"]["learned"] and report["exit_code"] == 0
    assert podman_containers(podman) == []  # removed, as every kerasenv container is


def test_a_gpu_request_through_podman_is_refused_in_one_line_and_nothing_starts(podman):
    proc = cli(podman, "run", "tf2.21-cuda12.9", "--gpus", "all", "--", "true")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("kerasenv: error: --gpus refused: Podman 4.3.1's Docker API accepts a GPU request")
    assert "Podman >= 5.4 with a CDI spec" in line and "--gpus none" in line
    assert podman_containers(podman) == []


def test_podman_4_refuses_a_gpu_request_even_with_an_nvidia_cdi_spec(podman, tmp_path):
    """A spec does not help Podman 4's Docker API (CDI DeviceRequests from 5.4: containers/podman#25171);
    the line names the routes that work. (The spec is a fake one's shape: only its names are read.)"""
    (tmp_path / "nvidia.json").write_text(json.dumps(
        {"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [{"name": "all", "containerEdits": {}}]}))
    proc = cli(podman, "run", "tf2.21-cuda12.9", "--gpus", "all", "--", "true",
               env_extra={"KERASENV_CDI_SPEC_DIRS": str(tmp_path)})
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("kerasenv: error: --gpus refused: Podman 4.3.1's Docker API accepts a GPU request")
    assert "`podman run --device nvidia.com/gpu=all IMAGE`" in line
    assert podman_containers(podman) == []


@pytest.fixture(scope="module")
def rootless_podman():
    """Podman's API service run by the unprivileged user kerasenv-rootless: a real rootless engine."""
    import tempfile

    try:
        user = pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        pytest.fail(f"no user {ROOTLESS_USER}: run `sudo make test-prereqs` (it creates it, with a subuid range)")
    # Its runtime folder: the user's own, where the user can reach it (pytest's tmp is root's, 0700).
    run_dir = Path(tempfile.mkdtemp(prefix="kerasenv-rootless-"))
    os.chown(run_dir, user.pw_uid, user.pw_gid)
    sock = run_dir / "podman.sock"
    log = run_dir / "service.log"
    proc = subprocess.Popen(
        ["su", "-s", "/bin/sh", ROOTLESS_USER, "-c",
         f"cd; XDG_RUNTIME_DIR={run_dir} exec podman system service --time=0 unix://{sock} >{log} 2>&1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=server_process._default_signals)
    try:
        try:
            _wait_for(sock, proc, "rootless podman system service")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {log.read_text()[-1500:] if log.exists() else ''}") from None
        yield f"unix://{sock}"
    finally:
        server_process.stop(proc)
        # The user is the tests' own: its rootless Podman leaves a pause process (catatonit -P).
        subprocess.run(["pkill", "-KILL", "-u", ROOTLESS_USER], capture_output=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_rootless_engine_is_named_rootless(rootless_podman):
    proc = cli(rootless_podman, "doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    engine = next(c for c in json.loads(proc.stdout)["host"] if c["name"] == "engine")
    assert engine["message"].startswith("Podman 4.3.1, behind the Docker API, rootless")

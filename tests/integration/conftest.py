"""Fixtures for tests that build and run real images (marker `docker`)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kerasenv.engine import docker_client
from kerasenv.matrix import schema as matrix_mod

REPO = Path(__file__).resolve().parents[2]
# The variants the integration tests build through the CLI (issue #2), with the build cache
# `make test` keeps for them (BUILD_CACHE_KEPT): the TensorFlow and JAX CPU images. Two small
# caches; the default GPU image's (its CUDA wheels a second time, 6.5 GB) goes once the JAX image
# that shares its CUDA layer is built.
BUILT_IN_TESTS = ("tf2.21-cpu", "jax0.12-cpu")
# Every image (`kerasenv:<ref>`: a variant or its JupyterLab flavour) the integration tests that
# run after all builds use. `make test DROP_TESTED_IMAGES=1` (what .ci/run does) removes every
# other image of a variant once its acceptance run is over, and the tests marked
# lane_image(<id>) with it (they run then, in that variant's lane: `--lane-image <id>`). A unit
# test checks that each variant and flavour named under tests/integration/ is listed here or
# named by a lane_image marker of its file, and that the Makefile's IMAGES_FOR_INTEGRATION
# equals this.
IMAGES_FOR_INTEGRATION = ("tf2.21-cpu", "tf2.21-cpu-jupyter", "tf2.21-cuda12.9", "jax0.12-cpu", "jax0.12-cpu-jupyter")
TEST_LABEL = "io.kerasenv.test"
# This session's value of TEST_LABEL, so the leftover check sees this run's containers only.
SESSION = uuid.uuid4().hex


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def matrix():
    return matrix_mod.load()


@pytest.fixture(scope="session")
def docker():
    """The Docker client; a missing daemon fails these tests (never a silent skip)."""
    return docker_client.client()


def multiworker_left(docker, variant_id: str) -> list:
    """The multi-worker containers of one variant's image still there (none once a run is over).
    By image, not by the label alone: the test lanes' lane_image steps run beside each other and
    beside the build lane's integration tests, each with its own multi-worker runs (in the warm
    .ci/run of d341ca4 the PyTorch lane's check counted the Keras 2 lane's two running workers)."""
    return docker.containers.list(all=True, ignore_removed=True,  # one removed between list and inspect
                                  filters={"label": "io.kerasenv.kind=multiworker", "ancestor": f"kerasenv:{variant_id}"})


def kerasenv(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run the real CLI (`python -m kerasenv`), as a user would."""
    proc = subprocess.run([sys.executable, "-m", "kerasenv", *args], cwd=REPO,
                          capture_output=True, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"kerasenv {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def cpu_image(docker):
    """kerasenv:tf2.21-cpu, built through the CLI only when it is missing (`make test` has
    built it already; the tests that take this fixture need no CUDA image)."""
    from docker.errors import ImageNotFound

    try:
        docker.images.get("kerasenv:tf2.21-cpu")
    except ImageNotFound:
        kerasenv("build", "tf2.21-cpu", timeout=3600)
    return "kerasenv:tf2.21-cpu"


@pytest.fixture(scope="session")
def jax_cpu_image(docker):
    """kerasenv:jax0.12-cpu, built through the CLI only when it is missing (`make test` has
    built it already)."""
    from docker.errors import ImageNotFound

    try:
        docker.images.get("kerasenv:jax0.12-cpu")
    except ImageNotFound:
        kerasenv("build", "jax0.12-cpu", timeout=3600)
    return "kerasenv:jax0.12-cpu"


# What compose/compose.yaml reads from the environment: left out by compose(clean_env=True).
_COMPOSE_VARIABLES = ("JUPYTER_", "KERASENV_", "TENSORBOARD_", "PROJECT_DIR", "RUNS_DIR")


def compose(*args: str, project: str | None = None, env: dict | None = None, check: bool = True,
            overrides: list[str] | tuple[str, ...] = (), clean_env: bool = False) -> subprocess.CompletedProcess:
    """`docker compose` on compose/compose.yaml (+ compose.<override>.yaml) from the repo root,
    with `env` on top of this process's environment (`clean_env`: without the variables
    compose.yaml reads, so exactly `env` decides them)."""
    import os

    files = ["-f", "compose/compose.yaml"] + [x for o in overrides for x in ("-f", f"compose/compose.{o}.yaml")]
    cmd = ["docker", "compose", *(["-p", project] if project else []), *files, *args]
    base = {k: v for k, v in os.environ.items() if not (clean_env and k.startswith(_COMPOSE_VARIABLES))}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**base, **(env or {})}, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def compose_plugin():
    """Docker Compose v2 as a docker CLI plugin (`make compose-plugin`)."""
    subprocess.run(["make", "--no-print-directory", "compose-plugin"], cwd=REPO, check=True,
                   capture_output=True, timeout=120)


def _load_local_wheels():
    """smoke_tests/local_wheels.py (small offline wheels) by path: the two suites are
    separate pytest roots."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kerasenv_local_wheels", REPO / "smoke_tests" / "local_wheels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


local_wheels = _load_local_wheels()


@pytest.fixture(scope="session")
def built_images(docker, matrix):
    """Build the test variants through the CLI (Docker's layer cache makes reruns quick)."""
    result = kerasenv("build", *BUILT_IN_TESTS, timeout=3600)
    return {line.split("\t")[0]: line for line in result.stdout.splitlines() if "\t" in line}


def default_signal_dispositions() -> None:
    """preexec_fn for a CLI a test signals: SIGINT back to its default.

    A shell starts background jobs with SIGINT ignored, the child inherits that, and
    Python then installs no KeyboardInterrupt handler, so a test that sends SIGINT would
    see nothing happen. Resetting it in the child makes the test independent of how the
    suite was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start_cli(*args: str, **kwargs) -> subprocess.Popen:
    """Start the real CLI in the background (stdout/stderr piped) for a test that signals it."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "kerasenv", *args], cwd=REPO, text=True,
                            preexec_fn=default_signal_dispositions, **kwargs)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TrackedContainer:
    """Runs one command in a container and always removes the container."""

    def __init__(self, docker, image: str) -> None:
        self.docker, self.image = docker, image

    def run(self, command, *, timeout: int = 300, **kwargs) -> tuple[int, str, str]:
        container = self.docker.containers.run(
            self.image, command, detach=True, network_mode="none",
            labels={docker_client.PROJECT_LABEL: "kerasenv", TEST_LABEL: SESSION},
            **kwargs)
        try:
            status = container.wait(timeout=timeout)
            out = container.logs(stdout=True, stderr=False).decode()
            err = container.logs(stdout=False, stderr=True).decode()
            return status["StatusCode"], out, err
        finally:
            container.remove(force=True)

    def python_json(self, code: str, **kwargs) -> dict:
        """Run Python code that prints one JSON object as its last stdout line."""
        code_, out, err = self.run(["python", "-c", code], **kwargs)
        assert code_ == 0, f"python in {self.image} exited {code_}:\n{err[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def container(docker):
    def make(image: str) -> TrackedContainer:
        return TrackedContainer(docker, image)
    return make


@pytest.fixture(autouse=True, scope="session")
def no_leftover_containers(docker):
    """After the session, no container started by a test may remain."""
    yield
    left = docker.containers.list(all=True, filters={"label": f"{TEST_LABEL}={SESSION}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"

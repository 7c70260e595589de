"""Connect to the Docker daemon, or fail with one line that says how to fix it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DockerUnavailable

if TYPE_CHECKING:
    import docker

# Every container and image the tool creates carries this label, so `make clean`
# finds leftovers even from a killed CLI.
PROJECT_LABEL = "io.kerasenv.project"
KIND_LABEL = "io.kerasenv.kind"  # on every container the tool (or compose) starts: what it is for
# The kerasenv process that started a container and removes it when it ends: `kerasenv clean`
# (and `make clean` in another terminal, or in make test's other lane) leaves a container
# alone while that process lives.
CLI_PID_LABEL = "io.kerasenv.cli-pid"


def container_labels(kind: str, **more: str) -> dict[str, str]:
    """The labels of a container this kerasenv process starts (and removes)."""
    import os

    return {PROJECT_LABEL: "kerasenv", KIND_LABEL: kind, CLI_PID_LABEL: str(os.getpid()), **more}


def client() -> "docker.DockerClient":
    import os
    import re

    import docker
    from docker.errors import DockerException

    try:
        c = docker.from_env(timeout=600)
        c.ping()
    except DockerException as exc:
        text = str(exc)
        known = re.search(r"No such file or directory|Connection refused|Permission denied|timed out", text)
        reason = known.group(0) if known else text[:120]
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        hint = " or add your user to the docker group" if reason == "Permission denied" else ""
        raise DockerUnavailable(
            f"cannot reach the Docker daemon at {where} ({reason}): start it{hint} "
            "(`sudo systemctl start docker`, or `sudo dockerd &`) and check DOCKER_HOST"
        ) from None
    return c

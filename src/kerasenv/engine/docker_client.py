"""Connect to the Docker daemon, or fail with one line that says how to fix it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DockerUnavailable

if TYPE_CHECKING:
    import docker

# Every container and image the tool creates carries this label, so `make clean`
# finds leftovers even from a killed CLI.
PROJECT_LABEL = "io.kerasenv.project"


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

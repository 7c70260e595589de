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


def local_tags(c, name: str | None = None) -> set[str]:
    """The tags of the engine's local images (those of `name`, a repository or ref, if given).

    One `GET /images/json`, never docker-py's `images.list()`: that inspects each listed image
    in a second request, and an image removed between the two (another terminal's `docker rmi`,
    make test's other lane) made the whole listing fail with "404 ... no such image" (seen in
    CI: `kerasenv doctor` then called the daemon unreachable)."""
    return {t for row in c.api.images(name=name) for t in (row.get("RepoTags") or []) if t != "<none>:<none>"}


def has_image(c, ref: str) -> bool:
    """Whether `ref` (repository:tag) is a local image; race-free as local_tags."""
    return bool(local_tags(c, name=ref))


# Docker unpacks zstd-compressed layers from 23.0 on (moby/moby#41759, "compression: add support
# for the zstd algorithm", first released in 23.0.0); 20.10 fails the pull with `failed to register layer:
# Error processing tar file(exit status 1): archive/tar: invalid tar header` (seen here,
# Debian's docker.io 20.10.24). containerd (Kubernetes nodes, nerdctl) unpacks zstd since 1.5.
ZSTD_SINCE = (23, 0)


def engine_version(server_version: str) -> tuple[int, int] | None:
    """(major, minor) of a daemon's version string ("20.10.24+dfsg1", "29.3.0"), or None."""
    import re

    m = re.match(r"\s*(\d+)\.(\d+)", server_version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def unpacks_zstd(server_version: str) -> bool | None:
    """Whether a Docker daemon of this version unpacks zstd layers (None: version unknown)."""
    version = engine_version(server_version)
    return None if version is None else version >= ZSTD_SINCE


# `GET /images/{name}/json?platform=...` selects one platform of a multi-platform image from
# Engine API 1.49 (Docker 28.1) on. The containerd image store keeps every platform pulled under
# one tag (a graph driver keeps one image per tag), and a plain inspect then answers for the
# host's platform whenever that one is there too, whatever `pull --platform` asked for.
PLATFORM_INSPECT_API = (1, 49)


def api_at_least(api_version: str | None, wanted: tuple[int, int]) -> bool:
    """Whether an Engine API version ("1.41", as /version or docker-py's negotiation names it)
    is `wanted` or later; False when there is none."""
    import re

    m = re.match(r"(\d+)\.(\d+)", api_version or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= wanted


def inspect_platform(c, ref: str, platform: str, api_version: str | None) -> dict | None:
    """`ref`'s image for `platform` ("linux/arm64"), as image inspect answers it, on an engine
    whose store holds several platforms under one tag; None where the engine predates the
    platform parameter or keeps one image per tag (the plain inspect is that image then)."""
    import json

    if not api_at_least(api_version, PLATFORM_INSPECT_API):
        return None
    parts = platform.split("/")
    wanted = {"os": parts[0], "architecture": parts[1], **({"variant": parts[2]} if len(parts) > 2 else {})}
    version = ".".join(api_version.split(".")[:2])
    response = c.api._get(f"{c.api.base_url}/v{version}/images/{ref}/json", params={"platform": json.dumps(wanted)})
    if response.status_code != 200:  # a single-platform image of another platform: the caller's check says so
        return None
    return response.json()

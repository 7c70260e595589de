"""One tag, two architectures (issue 36): the image index of a variant with an arm64 image.

Each architecture's image goes to the registry under its own tag, `<id>-amd64` and `<id>-arm64`
(`<id>-zstd-amd64` ... for zstd), and every tag of the variant (`kerasenv tags`) is then an image
index over those two: a `docker pull` picks the host's architecture, `--platform` another one.
Docker 20.10's image store keeps one image per tag and no index, so the index is made in the
registry, with the Docker CLI's `docker manifest create/push` (it reads both manifests from the
registry and writes the list; it uses `docker login`'s credentials, as the pushes do). NVIDIA's
JAX-Toolbox makes its index from per-architecture digests the same way (with `buildx imagetools`),
but publishes whatever built; here the GitHub workflow makes the index only once both
architectures passed their checks (`kerasenv push ID --index`, in a job that needs both).
"""

from __future__ import annotations

import re
import shutil
import subprocess

from ..errors import KerasenvError, UsageError
from . import compression as compression_mod

ARCHES = ("amd64", "arm64")
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


def arch_tag(tag: str, arch: str) -> str:
    """The per-architecture tag an index points at: `<tag>-arm64`, `<id>-zstd-arm64`."""
    return f"{tag}-{arch}"


def _docker_cli() -> str:
    exe = shutil.which("docker")
    if exe is None:
        raise UsageError("the docker CLI is not on PATH: it writes the image index (`docker manifest`)")
    return exe


def create(index_ref: str, sources: list[str], *, insecure: bool, timeout: float = 300) -> str:
    """Write the image index `index_ref` over the manifests `sources` (refs in the same repository,
    already in the registry); returns the index's digest."""
    docker = _docker_cli()
    flag = ["--insecure"] if insecure else []
    # --amend: a list left from an earlier run in the CLI's local store is replaced, not an error.
    steps = [[docker, "manifest", "create", *flag, "--amend", index_ref, *sources],
             [docker, "manifest", "push", *flag, "--purge", index_ref]]
    out = ""
    for command in steps:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
            if "no such manifest" in last or "manifest unknown" in last:
                raise KerasenvError(f"cannot make the image index {index_ref}: {last[:300]}; push each architecture "
                                    f"first (`kerasenv push ID --platform linux/amd64` and `--platform linux/arm64`)")
            raise KerasenvError(f"`docker manifest {command[2]}` of {index_ref} failed: {last[:300]}")
        out = proc.stdout
    found = _DIGEST_RE.findall(out)
    if not found:
        raise KerasenvError(f"`docker manifest push {index_ref}` printed no digest: {out.strip()[:200]!r}")
    return found[-1]


def platforms_of(index_ref: str, *, insecure: bool, timeout: float = 120) -> list[str]:
    """The platforms an index in the registry lists (`os/arch`), read back with `docker manifest inspect`."""
    import json

    command = [_docker_cli(), "manifest", "inspect", *(["--insecure"] if insecure else []), index_ref]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise KerasenvError(f"`docker manifest inspect {index_ref}` failed: "
                            f"{(proc.stderr.strip() or 'no output').splitlines()[-1][:300]}")
    data = json.loads(proc.stdout)
    return [f"{m['platform']['os']}/{m['platform']['architecture']}" for m in data.get("manifests", [])]


def insecure(registry: str) -> bool:
    """Plain HTTP, as Docker itself assumes for 127.0.0.0/8 and localhost (the local test registry)."""
    return compression_mod.is_plain_http(registry)

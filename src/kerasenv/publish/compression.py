"""Layer compression in a registry: gzip (what `docker push` writes, every engine unpacks it)
and zstd (smaller, and it decompresses several times faster, but Docker < 23 cannot unpack it).

A tag says its compression: the plain tags (`tf2.21-cuda12.9`, the full tag, `latest-gpu`)
are always gzip; their zstd twins end in `-zstd` (`tf2.21-cuda12.9-zstd`). So no plain tag
ever breaks an older engine, and a pull knows what it asks for before it starts.

The recompression is skopeo's (containers/image): `docker push` can only write gzip, and
`skopeo copy docker-daemon:IMAGE docker://REF --dest-compress-format zstd` reads the layers
uncompressed from the engine and writes zstd. (A registry-to-registry `skopeo copy` would
reuse the gzip blobs, which is why the source is the engine.)

Debian 12's skopeo 1.9.3 reads `docker-daemon:` through Engine API 1.22 and ignores DOCKER_HOST.
Docker >= 25 refuses API < 1.24 ("client version 1.22 is too old", measured on Docker 28.5.2;
Docker 29 refuses < 1.44, moby#51186), so where the engine's MinAPIVersion is above 1.22 the
image is saved through the Engine API first (the engine DOCKER_HOST names; Docker >= 25 writes
manifest.json in its OCI layout, which `docker-archive:` reads) and skopeo copies that file;
elsewhere skopeo reads the engine itself, told DOCKER_HOST (`--src-daemon-host`).
"""

from __future__ import annotations

import shutil
import subprocess
import time

from ..errors import KerasenvError, UsageError

GZIP, ZSTD, BOTH = "gzip", "zstd", "both"
CHOICES = (GZIP, ZSTD, BOTH)
ZSTD_SUFFIX = "-zstd"
# zstd level 3 (zstd's own default). Measured on tf2.21-cpu (1.77 GB; skopeo 1.9.3 from the
# engine into an OCI layout, 2 cores), size against gzip's 524 MB and the compression time:
# level 1 0.93x 23 s, 3 0.87x 27 s, 9 0.82x 55 s, 15 0.76x 203 s. Decompression speed hardly
# depends on the level, so a higher level buys only bytes on the wire, at 2x (9) to 7.5x (15)
# the push time; benchmarks/pull.md has the full figures and the CUDA image's.
ZSTD_LEVEL = 3
INSTALL_HINT = "`sudo apt-get install -y skopeo` (or `sudo make test-prereqs`)"


def zstd_tag(tag: str) -> str:
    return tag + ZSTD_SUFFIX


def is_zstd_tag(tag: str) -> bool:
    return tag.endswith(ZSTD_SUFFIX)


def gzip_tag(tag: str) -> str:
    return tag[: -len(ZSTD_SUFFIX)] if is_zstd_tag(tag) else tag


def tags_for(tags: list[str], compression: str) -> list[tuple[str, str]]:
    """(tag, compression) pairs a push writes."""
    if compression not in CHOICES:
        raise UsageError(f"--compression {compression!r}: choose one of {', '.join(CHOICES)}")
    pairs = [(t, GZIP) for t in tags] if compression in (GZIP, BOTH) else []
    return pairs + ([(zstd_tag(t), ZSTD) for t in tags] if compression in (ZSTD, BOTH) else [])


def is_plain_http(registry: str) -> bool:
    """Whether Docker talks plain HTTP to this registry without being told: its default
    insecure range is 127.0.0.0/8 (and `localhost`), so skopeo must be told the same."""
    host = registry.split("/", 1)[0].rsplit(":", 1)[0]
    return host == "localhost" or host.startswith("127.")


def zstd_refusal(message: str) -> bool:
    """Whether a daemon's pull error is Docker < 23 failing to unpack a zstd layer."""
    return "invalid tar header" in message or ("zstd" in message and "unsupported" in message.lower())


def _skopeo() -> str:
    exe = shutil.which("skopeo")
    if exe is None:
        raise UsageError(f"skopeo is missing (it writes zstd layers; `docker push` cannot): install it with {INSTALL_HINT}")
    return exe


def preflight(compression: str) -> None:
    """Everything a push of this compression needs, checked before anything is sent."""
    if compression in (ZSTD, BOTH):
        _skopeo()


# The Engine API version skopeo's docker-daemon: transport speaks (containers/image
# docker/daemon/client.go, defaultAPIVersion), newer engines' floor above it: see the docstring.
SKOPEO_DAEMON_API = (1, 22)


def _api_tuple(version: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (version or "").split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _engine_min_api() -> str | None:
    """The engine's MinAPIVersion (the one DOCKER_HOST names), None where it cannot be asked."""
    from ..engine import docker_client

    try:
        return docker_client.client().version().get("MinAPIVersion")
    except Exception:  # the push then fails in skopeo with its own line
        return None


def _save(image_ref: str, folder: str) -> str:
    """`docker save` of image_ref through the Engine API into folder: the archive's path."""
    import os

    from ..engine import docker_client

    path = os.path.join(folder, "image.tar")
    with open(path, "wb") as out:
        for chunk in docker_client.client().images.get(image_ref).save(named=True):
            out.write(chunk)
    return path


def push_zstd(image_ref: str, dest_ref: str, level: int = ZSTD_LEVEL, timeout: float = 7200) -> float:
    """Recompress the engine's image `image_ref` to zstd and push it as `dest_ref`
    (registry/repository:tag); return the seconds it took."""
    import os
    import tempfile

    registry = dest_ref.split("/", 1)[0]
    # --retry-times: skopeo retries a failed layer upload itself (containers/common's retry
    # package: network errors and 5xx), as dockerd does for `docker push`.
    command = [_skopeo(), "copy", "--quiet", "--retry-times", "3",
               "--dest-compress-format", "zstd", "--dest-compress-level", str(level)]
    if is_plain_http(registry):
        command.append("--dest-tls-verify=false")
    started = time.perf_counter()
    min_api = _api_tuple(_engine_min_api())
    with tempfile.TemporaryDirectory(prefix="kerasenv-zstd-") as folder:
        if min_api is not None and min_api > SKOPEO_DAEMON_API:
            source = f"docker-archive:{_save(image_ref, folder)}"
        else:
            if os.environ.get("DOCKER_HOST"):
                command += ["--src-daemon-host", os.environ["DOCKER_HOST"]]
            source = f"docker-daemon:{image_ref}"
        proc = subprocess.run(command + [source, f"docker://{dest_ref}"], capture_output=True, text=True,
                              timeout=timeout)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()
        raise KerasenvError(f"skopeo could not push {dest_ref}: {lines[-1][:300]}; check that the registry is up and "
                            f"you are logged in to it (`skopeo login {registry}`; skopeo keeps its own login)")
    return time.perf_counter() - started


def copy_tag(source_ref: str, dest_ref: str, timeout: float = 600) -> None:
    """Give an image in a registry another tag there: the blobs are mounted, not sent again,
    and the manifest is copied as it is (so the digest is the same)."""
    registry = dest_ref.split("/", 1)[0]
    command = [_skopeo(), "copy", "--quiet", "--retry-times", "3", "--preserve-digests"]
    if is_plain_http(registry):
        command += ["--src-tls-verify=false", "--dest-tls-verify=false"]
    proc = subprocess.run(command + [f"docker://{source_ref}", f"docker://{dest_ref}"],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or "no output").splitlines()
        raise KerasenvError(f"skopeo could not tag {source_ref} as {dest_ref}: {lines[-1][:300]}")


def manifest_digest(ref: str, timeout: float = 120) -> str:
    """The digest of the manifest `ref` names in its registry."""
    registry = ref.split("/", 1)[0]
    command = [_skopeo(), "inspect", "--format", "{{.Digest}}"]
    if is_plain_http(registry):
        command.append("--tls-verify=false")
    proc = subprocess.run(command + [f"docker://{ref}"], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise KerasenvError(f"skopeo could not inspect {ref}: {(proc.stderr.strip() or 'no output').splitlines()[-1][:300]}")
    return proc.stdout.strip()

"""A throwaway registry on 127.0.0.1: Debian's `docker-registry` (the CNCF distribution
registry) in a directory of its own, started and removed by the caller.

Used by `kerasenv bench-pull` and the registry tests. Docker treats 127.0.0.0/8 as an
insecure registry without configuration, and skopeo and ctr are told to speak plain HTTP
to it (`skopeo_tls_flag`, `--plain-http`), so nothing on the host is reconfigured.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..engine import server_process
from ..errors import UsageError

INSTALL_HINT = "`sudo apt-get install -y docker-registry` (or `sudo make test-prereqs`)"
# The manifest kinds a registry may hold for our images: Docker's (what `docker push`
# writes, gzip layers) and OCI's (what skopeo writes for zstd layers, which Docker's
# schema has no media type for).
MANIFEST_ACCEPT = ", ".join((
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
))


@dataclass(frozen=True)
class LocalRegistry:
    address: str  # 127.0.0.1:PORT
    data: Path  # the registry's storage root

    def manifest(self, repository: str, tag: str) -> dict:
        """The image manifest of repository:tag, as the registry stores it."""
        request = urllib.request.Request(f"http://{self.address}/v2/{repository}/manifests/{tag}",
                                         headers={"Accept": MANIFEST_ACCEPT})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def stored_bytes(self) -> int:
        """Every blob the registry holds, in bytes."""
        blobs = self.data / "docker" / "registry" / "v2" / "blobs"
        return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.exists() else 0


def layer_bytes(manifest: dict) -> int:
    """What a pull downloads for an image: the compressed size of its layers and config."""
    return sum(layer["size"] for layer in manifest["layers"]) + manifest["config"]["size"]


def layer_media_types(manifest: dict) -> set[str]:
    return {layer["mediaType"] for layer in manifest["layers"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(parent: Path | None = None) -> Iterator[LocalRegistry]:
    """Start a registry in a new directory under `parent` (default: the system's temporary
    directory); on exit stop it and delete the directory with every blob in it."""
    exe = shutil.which("docker-registry")
    if exe is None:
        raise UsageError(f"Debian's docker-registry is missing: install it with {INSTALL_HINT}")
    root = Path(tempfile.mkdtemp(prefix="kerasenv-registry-", dir=parent))
    port = free_port()
    (root / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    proc = server_process.start([exe, "serve", str(root / "config.yml")])
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise UsageError(f"docker-registry did not start on 127.0.0.1:{port} (exit {proc.poll()}): "
                                     f"run `docker-registry serve {root / 'config.yml'}` to see why") from None
                time.sleep(0.2)
        yield LocalRegistry(f"127.0.0.1:{port}", root / "data")
    finally:
        server_process.stop(proc)
        shutil.rmtree(root, ignore_errors=True)

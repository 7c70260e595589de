"""A throwaway containerd: an empty engine of its own, for measuring a cold pull and for
proving that an image unpacks where Docker's engine cannot (zstd layers on Docker < 23).

It runs from its own root, state directory and socket under a new directory, with the CRI
plugin off, so it creates no network, touches no other engine's images (the host's
dockerd runs its own containerd under /var/run/docker/containerd) and leaves nothing once
stopped: the directory goes, after anything still mounted under it is unmounted. Why not a
second dockerd: one started here with `--bridge none` deleted the main engine's `docker0`
bridge, and every container on the default network then failed to start.

`ctr` (containerd's own client, shipped with Debian's containerd package, which docker.io
depends on) drives it. Needs root, as containerd does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import KerasenvError, UsageError
from . import server_process

NAMESPACE = "kerasenv"
INSTALL_HINT = "`sudo apt-get install -y containerd` (Debian's docker.io depends on it)"

_CONFIG = """\
version = 2
root = "{root}"
state = "{state}"
# The CRI plugin (Kubernetes' interface) would set up CNI networking: not wanted here.
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
"""


@dataclass(frozen=True)
class Containerd:
    socket: Path
    root: Path

    def ctr(self, *args: str, timeout: float = 3600, check: bool = True) -> subprocess.CompletedProcess:
        """Run `ctr` against this containerd, in our namespace."""
        proc = subprocess.run(["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args],
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise KerasenvError(f"ctr {' '.join(args[:2])} failed: {detail[-1] if detail else 'no output'}")
        return proc

    def pull(self, ref: str, plain_http: bool = True, platform: str | None = None) -> float:
        """Fetch and unpack `ref` (for `platform`, default this host's) into the default
        snapshotter; return the seconds it took."""
        started = time.perf_counter()
        self.ctr("image", "pull", *(["--plain-http"] if plain_http else []),
                 *(["--platform", platform] if platform else []), ref)
        return time.perf_counter() - started

    def run(self, ref: str, name: str, *command: str, timeout: float = 1800,
            platform: str | None = None) -> subprocess.CompletedProcess:
        """Run a container of `ref` to its end (its default command when none is given), with
        no network but loopback, as the image's own user; removed after."""
        return self.ctr("run", "--rm", *(["--platform", platform] if platform else []), ref, name, *command,
                        timeout=timeout, check=False)

    def remove_containers(self) -> None:
        """Kill every task and remove every container (after an interrupted run): their
        shims would outlive containerd otherwise."""
        for task in self.ctr("task", "ls", "--quiet", check=False, timeout=30).stdout.split():
            self.ctr("task", "kill", "--signal", "SIGKILL", task, check=False, timeout=30)
            self.ctr("task", "delete", "--force", task, check=False, timeout=60)
        for container in self.ctr("container", "ls", "--quiet", check=False, timeout=30).stdout.split():
            self.ctr("container", "delete", container, check=False, timeout=60)

    def snapshot_count(self) -> int:
        lines = self.ctr("snapshot", "ls").stdout.strip().splitlines()
        return max(len(lines) - 1, 0)  # less the header


def preflight() -> None:
    """Root and the binaries, checked before anything starts."""
    if os.geteuid() != 0:
        raise UsageError("a throwaway containerd needs root: run this with sudo (it starts its own "
                         "containerd in a temporary directory and removes it after)")
    for exe in ("containerd", "ctr", "containerd-shim-runc-v2"):
        if shutil.which(exe) is None:
            raise UsageError(f"{exe} is missing: install it with {INSTALL_HINT}")


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root) + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].replace("\\040", " ") for line in f]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


@contextlib.contextmanager
def running(parent: Path | None = None) -> Iterator[Containerd]:
    """Start an empty containerd under a new directory in `parent` (default: the system's
    temporary directory; overlayfs needs it on a real file system, not on an overlay); on
    exit stop it and remove the directory."""
    preflight()
    root = Path(tempfile.mkdtemp(prefix="kerasenv-containerd-", dir=parent))
    socket = root / "containerd.sock"
    (root / "config.toml").write_text(_CONFIG.format(root=root / "root", state=root / "state",
                                                     socket=socket, opt=root / "opt"))
    log = open(root / "containerd.log", "wb")
    proc = server_process.start(["containerd", "--config", str(root / "config.toml")], log)
    engine = Containerd(socket, root)
    try:
        deadline = time.monotonic() + 30
        while engine.ctr("version", check=False, timeout=10).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "containerd.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise KerasenvError(f"the throwaway containerd did not start (exit {proc.poll()}): "
                                    f"{tail[0] if tail else 'no log'}")
            time.sleep(0.2)
        yield engine
    finally:
        if proc.poll() is None:
            engine.remove_containers()
        server_process.stop(proc)
        log.close()
        for point in _mounts_under(root):
            subprocess.run(["umount", "--lazy", point], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)

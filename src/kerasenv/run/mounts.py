"""What `kerasenv run` / `shell` / `lab` mount: the project at /workspace and `-v` mounts.

Checked before Docker is asked anything, because Docker's own answer to a missing host
path is to create it as an empty root-owned directory and run on: the user's script then
finds no data, and their project tree has a directory they cannot delete.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

WORKSPACE = "/workspace"
RUNS = "/workspace/runs"
# Where the image keeps what it is made of: a mount there would hide TensorFlow or our code.
_RESERVED = ("/opt/venv", "/opt/kerasenv", "/etc/kerasenv", "/var/cache/kerasenv")
# What Docker accepts as a local volume name (anything else it refuses only at create time).
_VOLUME_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+")


@dataclass(frozen=True)
class Mount:
    source: str  # absolute host path, or a Docker named volume
    target: str
    read_only: bool = False

    def sdk(self) -> tuple[str, dict]:
        """(key, value) of the docker SDK's `volumes=` mapping."""
        return self.source, {"bind": self.target, "mode": "ro" if self.read_only else "rw"}


def parse_volume(spec: str, cwd: Path) -> Mount:
    """`-v HOST:CONTAINER[:ro|rw]`, as `docker run -v` reads it: a HOST with a `/` or
    starting with `.` or `~` is a path (it must exist), anything else a named volume."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise UsageError(f"-v {spec!r}: expected HOST:CONTAINER or HOST:CONTAINER:ro, e.g. -v ./data:/data:ro")
    host, target = parts[0], parts[1]
    mode = parts[2] if len(parts) == 3 else "rw"
    if mode not in ("ro", "rw"):
        raise UsageError(f"-v {spec!r}: the mode {mode!r} is not ro or rw")
    if not target.startswith("/"):
        raise UsageError(f"-v {spec!r}: the container path {target!r} must be absolute, e.g. /data")
    target = _normalise(target)
    _refuse_reserved(spec, target)
    if "/" in host or host.startswith((".", "~")):
        path = (cwd / Path(host).expanduser()).resolve()
        if not path.exists():
            raise UsageError(f"-v {spec!r}: {path} does not exist on this host; create it or fix the path "
                             "(Docker would create an empty root-owned directory in its place)")
        host = str(path)
    elif not _VOLUME_NAME.fullmatch(host):
        raise UsageError(f"-v {spec!r}: {host!r} is neither a path nor a valid volume name "
                         "(letters, digits, _ . -, at least 2 characters); for a folder here write ./" + host)
    return Mount(host, target, mode == "ro")


def _normalise(target: str) -> str:
    """/a/../b, /a/./b/ and //a as Docker reads them: /b, /a/b and /a (so the checks below
    see the path the mount really lands on)."""
    return "/" + posixpath.normpath(target).lstrip("/")


def _refuse_reserved(spec: str, target: str) -> None:
    for reserved in _RESERVED:
        if target == reserved or target.startswith(reserved + "/"):
            raise UsageError(f"-v {spec!r}: {target} is inside {reserved}, which holds the image's own "
                             "software; mount your files elsewhere, e.g. /data")
        if target == "/" or reserved.startswith(target + "/"):
            raise UsageError(f"-v {spec!r}: a mount on {target} would hide {reserved}, which holds the image's "
                             "own software; mount your files elsewhere, e.g. /data")


def project_mount(project: Path) -> Mount:
    """The project directory at /workspace (the image's working directory)."""
    path = project.expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"--project {project}: not a directory; pass your project folder, or --no-project")
    if path == Path(path.anchor):
        raise UsageError(f"the project directory is {path}, the whole file system: cd into your project "
                         "folder first, or pass --no-project")
    return Mount(str(path), WORKSPACE)


def plan(*, project: Path | None, runs_dir: Path | None, volumes: list[str], cwd: Path) -> list[Mount]:
    """Every bind mount of a container, in order, refusing two on the same target.

    The runs directory gets its own mount only where the project mount does not already
    put it at /workspace/runs (./runs inside the project)."""
    mounts = [project_mount(project)] if project is not None else []
    if runs_dir is not None:
        runs = runs_dir if runs_dir.is_absolute() else cwd / runs_dir
        runs = runs.resolve()
        if not (mounts and runs == Path(mounts[0].source) / "runs"):
            mounts.append(Mount(str(runs), RUNS))
    mounts += [parse_volume(spec, cwd) for spec in volumes]
    seen: dict[str, Mount] = {}
    for mount in mounts:
        if ":" in mount.source:  # the bind string SOURCE:TARGET:MODE cannot carry it
            raise UsageError(f"{mount.source} has a ':' in its path, which Docker cannot mount; rename or "
                             "move that folder" + (", or pass --project DIR / --no-project"
                                                   if mount.target == WORKSPACE else ""))
        if mount.target in seen:
            raise UsageError(f"two mounts on {mount.target} ({seen[mount.target].source} and {mount.source}): "
                             "give each -v its own container path")
        seen[mount.target] = mount
    return mounts

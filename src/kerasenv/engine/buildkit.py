"""BuildKit builds through the docker CLI, and the build cache they leave.

docker-py speaks only the classic builder: BuildKit needs a gRPC session the client holds open
while the daemon builds (docker/docker-py#2230, open since 2019), so `kerasenv build` runs the
docker CLI for it. Why BuildKit: on Debian 12's Docker 20.10, the same CUDA image, the same
context, --no-cache both times, took 225 and 209 s with the classic builder and 100 s with
BuildKit (docs/using/engines.md). The classic builder commits every step as a tar that the
daemon hashes and unpacks again, so a venv or the CUDA wheels are written in the builder stage and
again by the runtime's COPY --from; BuildKit copies between snapshots and builds independent
stages side by side.

Which CLI: a CLI with the buildx plugin (`docker buildx build --load`: Docker >= 23 sends every
`docker build` there), else a CLI older than 23 with BuildKit built in (`DOCKER_BUILDKIT=1
docker build`: Debian 12's 20.10). A Docker 23+ CLI without buildx refuses DOCKER_BUILDKIT=1
("BuildKit is enabled but the buildx component is missing or broken"), so it is passed over,
and with no usable CLI (or Podman, whose builder is Buildah's) kerasenv builds with the classic
builder through the API, as before.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..errors import UsageError

BUILDERS = ("auto", "buildkit", "classic")
BUILDER_ENV = "KERASENV_BUILDER"  # auto (default) | buildkit | classic
CLI_ENV = "KERASENV_DOCKER_CLI"  # the docker CLI to build with (default: `docker` on PATH, then /usr/bin/docker)
# Docker 23 made buildx the only BuildKit client of `docker build` (docker/cli#3314).
BUILDX_ONLY_FROM = 23


@dataclass(frozen=True)
class BuildkitCli:
    """How to run one BuildKit build with the docker CLI found here."""

    path: str
    version: str
    buildx: bool  # `docker buildx build --load`; else `DOCKER_BUILDKIT=1 docker build`

    def argv(self) -> list[str]:
        # --builder default: the engine's own BuildKit (buildx's docker driver), whose images land
        # in the engine's image store; a docker-container builder would need the moby/buildkit
        # image from a registry and --load's tar round trip.
        return [self.path, "buildx", "build", "--builder", "default", "--load"] if self.buildx else [self.path, "build"]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["DOCKER_BUILDKIT"] = "1"
        # The daemon the docker SDK talks to (DOCKER_HOST, else the default socket), never another
        # one that a `docker context use` would pick for the CLI alone.
        env["DOCKER_HOST"] = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        env.pop("DOCKER_CONTEXT", None)
        # Plain progress lines for parsing, whatever the user's BUILDKIT_PROGRESS says.
        env.pop("BUILDKIT_PROGRESS", None)
        env.pop("BUILDX_BUILDER", None)
        return env

    def describe(self) -> str:
        how = "docker buildx build" if self.buildx else "DOCKER_BUILDKIT=1 docker build"
        return f"BuildKit ({how}, CLI {self.version} at {self.path})"


def _cli_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "version", "--format", "{{.Client.Version}}"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = out.stdout.strip()  # printed even when the daemon is not reachable (exit 1)
    return version or None


def _has_buildx(path: str) -> bool:
    try:
        return subprocess.run([path, "buildx", "version"], capture_output=True, text=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _major(version: str) -> int | None:
    match = re.match(r"(\d+)\.", version)
    return int(match.group(1)) if match else None


def candidates() -> list[str]:
    """The docker CLIs to try, in order: KERASENV_DOCKER_CLI alone if set, else `docker` on PATH,
    then Debian's /usr/bin/docker (a newer CLI without buildx may come first on PATH)."""
    explicit = os.environ.get(CLI_ENV)
    if explicit:
        return [explicit]
    found = [p for p in (shutil.which("docker"), "/usr/bin/docker") if p and os.access(p, os.X_OK)]
    return list(dict.fromkeys(os.path.realpath(p) for p in found))


_found: dict[tuple, BuildkitCli | None] = {}


def find_cli() -> BuildkitCli | None:
    """The first docker CLI here that can run a BuildKit build, or None (once per process)."""
    key = tuple(candidates())
    if key not in _found:
        _found[key] = None
        for path in key:
            version = _cli_version(path)
            if version is None:
                continue
            if _has_buildx(path):
                _found[key] = BuildkitCli(path, version, buildx=True)
                break
            major = _major(version)
            if major is not None and major < BUILDX_ONLY_FROM:
                _found[key] = BuildkitCli(path, version, buildx=False)
                break
    return _found[key]


def choose(engine, wanted: str | None = None) -> BuildkitCli | None:
    """The BuildKit CLI to build with, or None for the classic builder. `wanted` (--builder, else
    KERASENV_BUILDER): auto takes BuildKit where it can; buildkit fails in one line where it
    cannot; classic never takes it."""
    wanted = wanted or os.environ.get(BUILDER_ENV) or "auto"
    if wanted not in BUILDERS:
        raise UsageError(f"builder {wanted!r} (--builder or {BUILDER_ENV}): choose one of {', '.join(BUILDERS)}")
    if wanted == "classic":
        return None
    if engine.is_podman:
        if wanted == "buildkit":
            raise UsageError("Podman builds with Buildah, not BuildKit: pass --builder classic (or auto), "
                             "which builds through Podman's Docker API")
        return None
    cli = find_cli()
    if cli is None and wanted == "buildkit":
        tried = ", ".join(candidates()) or "no docker CLI on PATH"
        raise UsageError(f"no docker CLI here can run a BuildKit build (tried: {tried}): install the buildx "
                         f"plugin (Debian: docker-buildx), point {CLI_ENV} at a CLI that has it, or pass "
                         "--builder classic")
    return cli


def what_builds(engine) -> tuple[str, str, str]:
    """For the doctor: ("buildkit" | "classic", what builds here and why, the fix or "")."""
    wanted = os.environ.get(BUILDER_ENV) or "auto"
    if wanted == "classic":
        return "classic", f"{BUILDER_ENV}=classic: builds use the classic builder (Engine API)", ""
    if engine.is_podman:
        return "classic", "Podman builds through its Docker API (Buildah), not BuildKit", ""
    cli = find_cli()
    if cli is not None:
        return "buildkit", f"builds use {cli.describe()}", ""
    tried = ", ".join(f"{p} {_cli_version(p) or '(does not run)'}" for p in candidates()) or "no docker CLI on PATH"
    return ("classic", f"no docker CLI here runs BuildKit (tried: {tried}): builds use the classic builder, "
                       "about twice as slow for a CUDA image",
            f"install the buildx plugin (Debian: docker-buildx) or point {CLI_ENV} at a CLI that has it")


# --- the build cache a BuildKit build leaves ---------------------------------------------------------

@dataclass(frozen=True)
class CacheRecord:
    id: str
    description: str
    size: int
    in_use: bool
    shared: bool
    last_used: datetime | None
    parent: str | None = None
    kind: str = ""
    created: datetime | None = None


def _when(text: str | None) -> datetime | None:
    if not text or text.startswith("0001-"):
        return None
    # RFC 3339 with nanoseconds: Python's fromisoformat takes at most microseconds before 3.11.
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$", text)
    if not match:
        return None
    micro = (match.group(2) or ".0")[1:7].ljust(6, "0")
    zone = match.group(3) or "Z"
    return datetime.fromisoformat(f"{match.group(1)}.{micro}{'+00:00' if zone == 'Z' else zone}")


def _parent(row: dict) -> str | None:
    """A record's parent: `Parent` up to API 1.41 (Docker 20.10), the first of `Parents` from
    1.42 (Docker 23+, which leaves `Parent` empty)."""
    return row.get("Parent") or next(iter(row.get("Parents") or ()), None) or None


def parse_records(df: dict) -> list[CacheRecord]:
    """The build cache records of an Engine API /system/df answer."""
    rows = df.get("BuildCache") or []
    return [CacheRecord(id=str(r.get("ID")), description=str(r.get("Description") or ""),
                        size=int(r.get("Size") or 0), in_use=bool(r.get("InUse")), shared=bool(r.get("Shared")),
                        last_used=_when(r.get("LastUsedAt")), parent=_parent(r), created=_when(r.get("CreatedAt")),
                        kind=str(r.get("Type") or ""))
            for r in rows if r.get("ID")]


def records(client, attempts: int = 5, pause: float = 1.0) -> list[CacheRecord]:
    """The engine's build cache records (GET /system/df).

    Two engine races answer that call with a 500 while an image or a snapshot goes at the same
    moment: Docker 20.10 walks every image's layers for the answer and fails with "layer does not
    exist" when another lane removes an image (moby/moby#21215; CI's run of d56adce failed a built
    image's cache drop on it, 2026-12-06), and the containerd store failed the same way on a
    snapshot a prune removed (moby/moby#51979). From API 1.42 (Docker 23)
    `type=build-cache` asks for the build cache alone and no image is walked; on 20.10 the call is
    asked again, a second later, up to `attempts` times."""
    import time

    from docker.errors import APIError

    from .docker_client import api_at_least

    api = client.api
    build_cache_only = api_at_least(getattr(api, "_version", None), (1, 42))
    for attempt in range(attempts):
        try:
            if build_cache_only:
                return parse_records(api._result(api._get(api._url("/system/df"), params={"type": "build-cache"}), True))
            return parse_records(api.df())
        except APIError as exc:
            if exc.status_code is None or exc.status_code < 500 or attempt == attempts - 1:
                raise
            time.sleep(pause * (attempt + 1))
    raise AssertionError("unreachable")  # the loop returns or raises


def now() -> datetime:
    return datetime.now(timezone.utc)


def used_since(all_records: list[CacheRecord], since: datetime) -> list[str]:
    """The records a build that started at `since` made or took from the cache: made since then
    (CreatedAt), or handed out since then (LastUsedAt, stamped when a build releases a record).
    Another build in the same minutes has its own among them: images/build.py's drop keeps the
    records another build's note names."""
    return [r.id for r in all_records
            if any(t is not None and t >= since for t in (r.last_used, r.created))]


def released(client, ids: set[str], timeout: float = 5.0, poll: float = 0.5) -> list[CacheRecord]:
    """The build cache once none of these records is in use, or after `timeout`. The CLI ends
    when the image is exported, and the daemon releases the build's records a moment later: a
    drop that read them at once found the final stage's still in use and skipped them, so they
    outlived their images (36 GB of the first cold CI run with BuildKit, 2026-12-06). Short: a
    build beside this one holds records of its own among `ids` until it ends (waiting 30 s for
    those cost each build of the next run up to 30 s)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        now_records = records(client)
        if not any(r.in_use for r in now_records if r.id in ids) or time.monotonic() >= deadline:
            return now_records
        time.sleep(poll)


@dataclass
class PruneResult:
    removed: int = 0
    bytes: int = 0
    errors: list[str] = field(default_factory=list)


def children_first(all_records: list[CacheRecord], ids: list[str]) -> list[str]:
    """`ids`, each record before its parent: BuildKit keeps a record while a child needs it."""
    parent = {r.id: r.parent for r in all_records}

    def depth(record_id: str) -> int:
        n, seen = 0, set()
        while parent.get(record_id) and record_id not in seen:
            seen.add(record_id)
            record_id, n = parent[record_id], n + 1
        return n

    return sorted(ids, key=depth, reverse=True)


def prune(client, ids: list[str]) -> PruneResult:
    """Remove these build cache records (POST /build/prune with an id filter, one record a call:
    Docker 20.10 answers a filter of several ids with "filters expect only one value"). `all`:
    without it the daemon prunes only records that no image shares, and a record under an image's
    layer then outlives the image (`docker rmi` frees nothing while it is there). Pass them children
    first (children_first); one in use, or with a child left, stays."""
    result = PruneResult()
    for record_id in ids:
        try:
            answer = client.api._result(client.api._post(
                client.api._url("/build/prune"), params={"all": "1", "filters": json.dumps({"id": [record_id]})}),
                True)
        except Exception as exc:  # noqa: BLE001 -- a cache record that could not go costs disk, not the build
            result.errors.append(f"{record_id}: {getattr(exc, 'explanation', None) or exc}")
            continue
        gone = answer.get("CachesDeleted") or []
        result.removed += len(gone)
        result.bytes += int(answer.get("SpaceReclaimed") or 0)
    return result

"""Build variant images, with progress: BuildKit through the docker CLI where one here can
(engine/buildkit.py), else the classic builder through the docker SDK."""

from __future__ import annotations

import io
import json
import os
import platform
import re
import subprocess
import shutil
import signal
import sys
import tarfile
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..engine.docker_client import PROJECT_LABEL, has_image
from ..errors import BuildFailed, UsageError
from ..matrix.schema import (AMD64, ARM64, ARM64_DOCKERFILE, IN_IMAGE_DIR, JUPYTER_DOCKERFILE, REPO_ROOT, Matrix,
                             Variant, debian_suite_of)
from .generate import BUILD_DIR

CA_ENV_VARS = ("KERASENV_CA_CERT", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
_STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)")
# The classic builder prints the image of every finished step as " ---> <12 hex>".
_STEP_IMAGE_RE = re.compile(r"^ ---> ([0-9a-f]{12})$")


@dataclass
class BuildResult:
    variant: Variant
    image_id: str
    size_bytes: int
    seconds: float
    # The last image of each stage before the final one (python-base, build-trust, cuda-libs,
    # builder, ...): the classic builder's layer cache of those stages, not part of the image.
    stage_images: tuple[str, ...] = ()
    # A BuildKit build's: the build cache records it made or took (engine/buildkit.py).
    cache_records: tuple[str, ...] = ()
    builder: str = "classic"  # or "buildkit"
    tag: str = ""  # kerasenv:<id>, <id>-jupyter or <id>-arm64 ("": the variant's own)


def default_ca_cert(explicit: str | None) -> str | None:
    """--ca-cert, else the first CA setting the host's pip/requests use."""
    if explicit:
        return explicit
    for name in CA_ENV_VARS:
        value = os.environ.get(name)
        if value:
            return value
    return None


def read_ca_cert(path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"CA certificate {path} does not exist: pass --ca-cert / CA_CERT "
                         "with the PEM file of your proxy's CA") from None
    except OSError as exc:
        raise UsageError(f"CA certificate {path} cannot be read ({exc.strerror}): "
                         "fix its permissions or pass another --ca-cert") from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise UsageError(f"CA certificate {path} is not a PEM certificate: pass the PEM file "
                         "(-----BEGIN CERTIFICATE-----) of your proxy's CA")
    return data


def context_tar(folder: Path, ca_pem: bytes | None) -> io.BytesIO:
    """The build context: images/ holding only what this variant's build needs (its
    folder, the in-image code in images/common/, the build steps' scripts and build-ca.md in
    images/build/) plus, optionally, <id>/build-ca.pem.

    The same layout as `docker build -f images/<id>/Dockerfile images`, built in memory so
    the CA never gets written into the source tree.
    """
    images = folder.parent
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name != "build-ca.pem":
                tar.add(path, arcname=f"{folder.name}/{path.name}")
        common = images / IN_IMAGE_DIR
        for path in sorted(common.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix == ".py":
                tar.add(path, arcname=str(path.relative_to(images)))
        for path in sorted((images / BUILD_DIR).iterdir()):
            if path.is_file() and (path.suffix == ".sh" or path.name == "build-ca.md"):
                tar.add(path, arcname=f"{BUILD_DIR}/{path.name}")
        if ca_pem is not None:
            info = tarfile.TarInfo(f"{folder.name}/build-ca.pem")
            info.size, info.mode = len(ca_pem), 0o644
            tar.addfile(info, io.BytesIO(ca_pem))
    buf.seek(0)
    return buf


def git_revision(root: Path = REPO_ROOT) -> str:
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build_date(revision: str | None = None, root: Path = REPO_ROOT) -> str:
    """RFC 3339. SOURCE_DATE_EPOCH wins (reproducible builds); a build of a clean checkout
    is dated by its commit, so rebuilding the same commit hits Docker's cache for every
    step and gives the same image instead of a new one (and a dangling old one) each
    time; a dirty tree gets the current time."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch and revision and revision != "unknown" and not revision.endswith("-dirty"):
        try:
            epoch = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct", revision],
                                   capture_output=True, text=True, check=True).stdout.strip() or None
        except (OSError, subprocess.CalledProcessError):
            epoch = None
    when = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch else datetime.now(timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def effective_base(v: Variant, override: str | None, matrix: Matrix) -> str:
    """--base-image (BASE_IMAGE) replaces the base of the variants on the Debian suite it names
    (`debian:bookworm-slim@sha256:...` the Debian 12 ones, `registry/debian:trixie-slim` the
    Debian 13 ones): a variant's Python is its suite's, so another suite's base would not build.
    A base naming no suite replaces the default CPU image's; AMD's image is never replaced."""
    if not override or v.debian_suite is None:
        return v.base_image
    suite = debian_suite_of(override) or matrix.get(matrix.default_cpu).debian_suite
    return override if v.debian_suite == suite else v.base_image


def host_platform() -> str:
    return ARM64 if platform.machine() in ("aarch64", "arm64") else AMD64


def arm64_base(base: str) -> str:
    """The local tag of a base image's arm64 image (Docker 20.10 keeps one image per tag):
    `kerasenv base-offline --platform linux/arm64` makes it, or a pull with --platform."""
    return f"{base}-arm64"


def ensure_emulation() -> None:
    """On an amd64 machine the arm64 build's base and runtime stages run under qemu-user."""
    if host_platform() == ARM64:
        return
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        raise UsageError("this amd64 machine cannot run arm64 programs (no qemu-aarch64 in binfmt_misc): "
                         "run `sudo bash scripts/arm64-emulation.sh` and retry")


def ensure_arm64_base(client, base: str, local: str, say: Callable[[str], None]) -> None:
    """The arm64 base under its local tag: already here, else pulled for linux/arm64 and tagged."""
    from docker.errors import APIError, ImageNotFound

    try:
        image = client.images.get(local)
    except ImageNotFound:
        say(f"pulling base image {base} for linux/arm64 ...")
        try:
            repo, _, tag = base.rpartition(":")
            image = client.images.pull(repo, tag=tag, platform=ARM64)
            image.tag(*local.rsplit(":", 1))
        except APIError as exc:
            reason = (exc.explanation or str(exc)).splitlines()[0]
            raise UsageError(f"the arm64 base {local} is not here and {base} could not be pulled for linux/arm64 "
                             f"({reason}): run `make base-offline PLATFORM=linux/arm64` (debootstrap under qemu) "
                             "and retry") from None
    if image.attrs.get("Architecture") != "arm64":
        raise UsageError(f"{local} is a {image.attrs.get('Architecture')} image, not arm64: remove it and run "
                         "`make base-offline PLATFORM=linux/arm64`")


def ensure_base(client, v: Variant, base: str, say: Callable[[str], None]) -> None:
    """Use the local base image, or pull it; a failed pull gets its fix."""
    from docker.errors import APIError, ImageNotFound

    try:
        client.images.get(base)
        return
    except ImageNotFound:
        pass
    say(f"pulling base image {base} ...")
    try:
        repo, _, tag = base.rpartition(":") if ":" in base.split("/")[-1] else (base, "", "latest")
        client.images.pull(repo, tag=tag or None)
    except APIError as exc:
        reason = (exc.explanation or str(exc)).splitlines()[0]
        if v.family == "rocm":
            raise UsageError(
                f"{v.id}: AMD's base image {base} could not be pulled ({reason}); the ROCm "
                "variant can only be built where Docker Hub is reachable (no offline recreation "
                "of AMD's image exists)") from None
        raise UsageError(
            f"{v.id}: base image {base} could not be pulled ({reason}); on a host without "
            "registry access run `make base-offline` (debootstrap from Debian's archive) and retry"
        ) from None


POINT_RELEASE_ONLY = "point-release"  # --debian-updates: the suite's point release, no -updates/-security
_debian_states: dict[str, str] = {}  # suite -> the state read from the archive by this process


def point_release(state: str, suite: str) -> str:
    """The suite's own entry of a DEBIAN_UPDATES state ("trixie@<Date>"): the point release that
    python-base and every layer below the runtime's last step are built at (issue 52), the build
    arg DEBIAN_POINT_RELEASE. It moves only when Debian publishes a point release, so a security
    rebuild keeps those layers."""
    from ..security import debian

    parsed = debian.parse_label(state)
    when = parsed.as_dict().get(suite) if parsed else None
    if when is None:
        raise UsageError(f"the Debian state {state!r} names no date for {suite}, the point release a build on "
                         f"it starts from: pass what `kerasenv debian-updates` prints")
    return f"{suite}@{when}"


def debian_updates(suite: str, explicit: str | None = None) -> str:
    """The Debian archive state a build on `suite` applies (security/debian.py), in the label's
    form: `suite`'s three entries of `explicit`, else of KERASENV_DEBIAN_UPDATES (`make test`
    reads every suite's once, so every variant of one run on one suite gets the same base
    layers), else `suite`'s read from the archive now (once per suite and process). Only the
    suite's own entries: apt in the image sees just those, and debian-updates.sh wants exactly
    what it sees."""
    from ..security import debian

    if explicit == POINT_RELEASE_ONLY:
        # The point release alone (issue 52): the last step applies no -updates or -security fix.
        # Release N of `kerasenv bench-update`, and the CI check that a rebuild at another state
        # changes the last layer only; an image that scanners will find unpatched.
        return point_release(debian_updates(suite), suite)
    chosen = explicit or os.environ.get("KERASENV_DEBIAN_UPDATES")
    if chosen:
        source = "--debian-updates" if explicit else "KERASENV_DEBIAN_UPDATES"
        state = debian.parse_label(chosen)
        if state is None:
            raise UsageError(f"{source} {chosen!r}: expected the io.kerasenv.debian-updates label's form, e.g. "
                             f"{suite}@2026-07-11T10:16:37Z {suite}-updates@... {suite}-security@...")
        missing = state.missing(suite)
        if missing:
            raise UsageError(f"{source} names no date for {', '.join(missing)}, which a build on Debian {suite} "
                             f"applies: pass what `kerasenv debian-updates` prints (every suite the matrix "
                             f"builds on), or leave it unset to read the archive now")
        return state.of_suite(suite).label()
    if suite not in _debian_states:
        _debian_states[suite] = debian.archive_state(suite).label()
    return _debian_states[suite]


def build(client, matrix: Matrix, v: Variant, *, base_image: str | None = None,
          ca_cert: str | None = None, no_cache: bool = False, jupyter: bool = False,
          progress: "Progress | None" = None, debian_state: str | None = None,
          platform: str = AMD64, network: str | None = None, builder: str | None = None,
          tag: str | None = None) -> BuildResult:
    """kerasenv:<id>, or with `jupyter` its JupyterLab flavour kerasenv:<id>-jupyter (built
    FROM the variant's image, which must exist). `debian_state`: the Debian archive state to
    apply (debian_updates). platform=linux/arm64: the variant's arm64 image, kerasenv:<id>-arm64,
    from images/<id>/arm64.Dockerfile (pip natively with --platform, the rest under qemu on amd64).
    `builder`: auto (default: KERASENV_BUILDER, else BuildKit where a docker CLI here can run it),
    buildkit or classic."""
    from ..engine import buildkit, engine_facts

    folder = matrix.path.parent / v.id
    arm = platform == ARM64
    if arm:
        if jupyter:
            raise UsageError("the arm64 images have no JupyterLab flavour: build the image (without --jupyter)")
        v.platform_ref(ARM64)  # a UsageError naming the platforms when the variant has no arm64 image
        ensure_emulation()
    dockerfile = JUPYTER_DOCKERFILE if jupyter else ARM64_DOCKERFILE if arm else "Dockerfile"
    if not (folder / dockerfile).exists():
        hint = f"{v.id} has no JupyterLab flavour" if jupyter and v not in matrix.with_jupyter() else \
            "run `make generate`"
        raise UsageError(f"{folder}/{dockerfile} is missing: {hint}")
    ca_pem = read_ca_cert(ca_cert) if ca_cert else None
    progress = progress or Progress.for_stream(sys.stderr)
    revision = git_revision()
    buildargs = {"KERASENV_REVISION": revision, "KERASENV_CREATED": build_date(revision)}
    if jupyter:
        if not has_image(client, v.image_ref):
            raise UsageError(f"{v.image_ref} is not built here; the JupyterLab flavour is built on it: "
                             f"run `kerasenv build {v.id}` first")
        buildargs["VARIANT_IMAGE"] = v.image_ref
    else:
        buildargs["BASE_IMAGE"] = effective_base(v, base_image, matrix)
        if base_image and buildargs["BASE_IMAGE"] != base_image and v.debian_suite:
            progress.note(f"{v.id} is built on Debian {v.debian_suite} (Python {v.python}): --base-image "
                          f"{base_image} is another suite's, so its own base {v.base_image} is used")
        ensure_base(client, v, buildargs["BASE_IMAGE"], progress.note)
        if arm:
            # pip's stages run on this machine's own base; the image's stages on the arm64 one.
            buildargs["BUILD_IMAGE"] = buildargs["BASE_IMAGE"]
            buildargs["TARGET_PLATFORM"] = ARM64
            if host_platform() != ARM64:
                buildargs["BASE_IMAGE"] = arm64_base(buildargs["BASE_IMAGE"])
            if host_platform() != ARM64:
                ensure_arm64_base(client, buildargs["BUILD_IMAGE"], buildargs["BASE_IMAGE"], progress.note)
        if v.debian_suite:  # AMD's image (no Debian base) is AMD's to update
            buildargs["DEBIAN_UPDATES"] = debian_updates(v.debian_suite, debian_state)
            buildargs["DEBIAN_POINT_RELEASE"] = point_release(buildargs["DEBIAN_UPDATES"], v.debian_suite)
    tag = tag or (v.jupyter_ref if jupyter else v.platform_ref(platform))
    name = tag.rsplit(":", 1)[1]
    wanted = builder or os.environ.get(buildkit.BUILDER_ENV) or "auto"
    cli = None if wanted == "classic" else buildkit.choose(engine_facts.ask(client), wanted)
    started = time.monotonic()

    def run_build() -> tuple[str, list[str], list[str]]:
        if cli is not None:
            return _buildkit_build(client, cli, folder, v, dockerfile, ca_pem, tag, name, no_cache, buildargs,
                                   progress, network)
        image_id, stages = _stream_build(client, folder, v, dockerfile, ca_pem, tag, name, no_cache, buildargs,
                                         progress, network)
        return image_id, stages, []

    try:
        image_id, stage_images, cache_records = run_build()
    except BuildFailed as exc:
        fresh = _archive_moved_state(exc, v, buildargs, debian_state)
        if fresh is None:
            raise
        # The run's state (KERASENV_DEBIAN_UPDATES, read when `make test` started) is older
        # than the archive now: Debian published in between, and apt only ever sees the newest.
        # Build on the state read now; only this image's Debian layers differ from the ones
        # built before it. An explicit --debian-updates is never replaced.
        progress.note(f"{name}: Debian's archive published since its state was read "
                      f"({buildargs['DEBIAN_UPDATES']}); building again on the state now: {fresh}")
        buildargs["DEBIAN_UPDATES"] = fresh
        buildargs["DEBIAN_POINT_RELEASE"] = point_release(fresh, v.debian_suite)
        image_id, stage_images, cache_records = run_build()
    image = client.images.get(image_id)
    if arm and image.attrs.get("Architecture") != "arm64":
        raise BuildFailed(f"building {name} gave a {image.attrs.get('Architecture')} image, not arm64")
    # The Id that image inspect answers, which drop_recorded_build_cache compares with later: on
    # the containerd image store that is the manifest digest, not the config digest (issue 43;
    # the classic builder's aux ID was that Id on Docker 28.5.2, measured, but nothing promises
    # it). The size: unpacked layers on both stores (images/sizes.py), never attrs["Size"].
    from .sizes import unpacked_bytes

    result = BuildResult(v, image.id, unpacked_bytes(image), time.monotonic() - started,
                         tuple(dict.fromkeys(stage_images)), tuple(cache_records),
                         "buildkit" if cli is not None else "classic", tag)
    record_stage_images(tag, result)
    progress.note(f"built {tag}: {result.size_bytes / 1e9:.2f} GB "
                  f"uncompressed, {result.seconds:.0f} s ({cli.describe() if cli else 'classic builder'})")
    return result


ARCHIVE_MOVED = "debian-updates.sh: Debian's archive is at"  # images/build/debian-updates.sh
UNREACHED = "debian-updates.sh: Debian's archive could not be reached"  # the same script, no network
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def _unreached(tail) -> str | None:
    """debian-updates.sh's own words when the build's last lines say the archive was not reached
    (the classic builder wraps a step's stderr in ANSI colour codes), else None."""
    said = next((_ANSI_RE.sub("", line).split(UNREACHED, 1)[1] for line in reversed(tail) if UNREACHED in line),
                None)
    return said and UNREACHED.split(": ", 1)[1] + said


def _archive_moved_state(exc: BuildFailed, v: Variant, buildargs: dict, explicit: str | None) -> str | None:
    """The archive's state now, when `exc` is debian-updates.sh refusing a state that came from
    the run (not --debian-updates) and the archive has moved on since; else None."""
    if explicit or "DEBIAN_UPDATES" not in buildargs or ARCHIVE_MOVED not in (exc.details or ""):
        return None
    from ..security import debian

    fresh = debian.archive_state(v.debian_suite).label()
    if fresh == buildargs["DEBIAN_UPDATES"]:
        return None
    _debian_states[v.debian_suite] = fresh
    return fresh


def _stream_build(client, folder: Path, v: Variant, dockerfile: str, ca_pem: bytes | None, tag: str,
                  name: str, no_cache: bool, buildargs: dict, progress: "Progress",
                  network: str | None = None) -> tuple[str, list[str]]:
    """One docker build of `tag`, its steps shown on `progress`: the image id and the builder
    stages' images; BuildFailed with the step and its last lines."""
    progress.start(name)
    tail: deque[str] = deque(maxlen=25)
    step = "(before the first step)"
    image_id = None
    stage_images: list[str] = []
    last_step_image = None
    stream = client.api.build(
        fileobj=context_tar(folder, ca_pem), custom_context=True, encoding="identity",
        dockerfile=f"{v.id}/{dockerfile}",
        tag=tag, rm=True, forcerm=True, pull=False, nocache=no_cache, decode=True,
        buildargs=buildargs, labels={PROJECT_LABEL: "kerasenv"}, network_mode=network,
    )
    try:
        for chunk in stream:
            if "error" in chunk:
                progress.stop()
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                # A step that says why in a line of its own (debian-updates.sh: the archive not
                # reached) is named by that line, not by the exit code it ended with.
                said = _unreached(tail)
                raise BuildFailed(
                    f"building {name} failed at {step}: {said or detail.strip().splitlines()[-1]}",
                    details="\n".join(tail))
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            for line in chunk.get("stream", "").splitlines():
                if not line.strip():
                    continue
                tail.append(line)
                finished = _STEP_IMAGE_RE.match(line)
                if finished:
                    last_step_image = finished.group(1)
                match = _STEP_RE.match(line)
                if match and match.group(3).upper().startswith("FROM ") and last_step_image:
                    stage_images.append(last_step_image)  # the stage before this FROM is complete
                if match:
                    step = f"step {match.group(1)}/{match.group(2)} ({match.group(3)[:120]})"
                    progress.step(step)
                else:
                    progress.line(line)
    finally:
        progress.stop()
    if image_id is None:
        raise BuildFailed(f"building {name} ended without an image", details="\n".join(tail))
    return image_id, stage_images


# BuildKit's plain progress (`--progress=plain`, the same from Docker 20.10's CLI and buildx):
# "#7 [python-base 3/3] RUN ..." opens a step, "#7 1.931 <output>" is its output, "#7 CACHED" a
# cache hit, "#7 ERROR: <why>" its failure; the CLI's last lines repeat the failure.
_BK_STEP_RE = re.compile(r"^#(\d+) \[([^\]]+)\] (.*)$")
_BK_OUTPUT_RE = re.compile(r"^#(\d+) \d+\.\d+ (.*)$")
_BK_STATE_RE = re.compile(r"^#(\d+) (CACHED|DONE [0-9.]+s|ERROR: (.*))$")
_BK_EXIT_RE = re.compile(r"exit code: (\d+)")
# A step the Dockerfile has in every variant is not a stage that the build makes anew: kept
# through a drop (below), it is what the next variant on the same Debian suite starts from. The
# point-release steps only (python-base's, build-trust's): the runtime's last step runs
# debian-updates.sh too, and a record kept there kept every record under it, the image's venv and
# CUDA layers, which then outlived the image (33 GB of build cache and a build waiting for disk in
# the first cold run of issue 52's layout).
SHARED_STEP_MARK = "debian-updates.sh --point-release"


def _buildkit_build(client, cli, folder: Path, v: Variant, dockerfile: str, ca_pem: bytes | None, tag: str,
                    name: str, no_cache: bool, buildargs: dict, progress: "Progress",
                    network: str | None = None) -> tuple[str, list[str], list[str]]:
    """One BuildKit build of `tag` through the docker CLI, its steps shown on `progress`: the
    image id, no stage images, and the build cache records it used; BuildFailed with the step
    and its last lines. The context is the classic build's, written to a private temporary
    folder (the CA with it) that goes when the build ends."""
    from docker.errors import APIError

    from ..engine import buildkit

    progress.start(name)
    tail: deque[str] = deque(maxlen=25)
    steps: dict[str, str] = {}
    failed: tuple[str, str] | None = None  # (step, why)
    last_error = ""
    workdir = Path(tempfile.mkdtemp(prefix="kerasenv-build-"))
    proc = None
    try:
        context, iidfile = workdir / "context", workdir / "iid"
        with tarfile.open(fileobj=context_tar(folder, ca_pem)) as tar:
            tar.extractall(context)
        argv = cli.argv() + ["--progress=plain", "-f", str(context / v.id / dockerfile), "-t", tag,
                             "--iidfile", str(iidfile), "--label", f"{PROJECT_LABEL}=kerasenv"]
        for key, value in buildargs.items():
            argv += ["--build-arg", f"{key}={value}"]
        if no_cache:
            argv.append("--no-cache")
        if network:
            argv += ["--network", network]
        since = buildkit.now()
        proc = subprocess.Popen(argv + [str(context)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", env=cli.env())
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            opened = _BK_STEP_RE.match(line)
            if opened:
                steps[opened.group(1)] = f"[{opened.group(2)}] {opened.group(3)}"[:140]
                if not opened.group(2).startswith("internal"):
                    progress.step(f"step {steps[opened.group(1)]}")
                continue
            output = _BK_OUTPUT_RE.match(line)
            if output:
                tail.append(output.group(2))
                progress.line(output.group(2))
                continue
            state = _BK_STATE_RE.match(line)
            if state:
                step = steps.get(state.group(1), f"#{state.group(1)}")
                if state.group(2) == "CACHED":
                    progress.line(f"CACHED {step}")
                elif state.group(3) is not None:
                    failed = failed or (step, state.group(3))
                continue
            if line.startswith("#"):
                continue  # sha256 lines, transfers, exporting layers
            tail.append(line)
            if re.match(r"(ERROR|error)\b|failed to solve", line):
                last_error = line
        rc = proc.wait()
    finally:
        if proc is not None and proc.poll() is None:
            # Interrupted (Ctrl-C, SIGTERM): the CLI cancels the build when it gets SIGINT; a CLI
            # that has not ended after that is killed, which ends its session and so the build.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        progress.stop()
        image_id = None
        try:
            image_id = (workdir / "iid").read_text().strip() or None
        except OSError:
            pass
        shutil.rmtree(workdir, ignore_errors=True)
    if rc != 0 or image_id is None:
        said = _unreached(tail)
        if failed:
            step, why = failed
            code = _BK_EXIT_RE.search(why)
            where = f"step {step}"
            reason = said or (f"exit code {code.group(1)}" if code else why.strip())
        else:
            where = "(before the first step)" if not steps else "the end"
            reason = said or (last_error or "the docker CLI exited with code %d" % rc).strip()
        raise BuildFailed(f"building {name} failed at {where}: {reason}", details="\n".join(tail))
    try:
        used = buildkit.used_since(buildkit.records(client), since)  # made since: listed before their release
    except APIError as exc:
        # The image is built; an unreadable cache list costs its cache drop (disk), not the build.
        progress.note(f"could not list the build cache after building {name} ({exc.explanation or exc}): "
                      "its cache stays until `docker builder prune`")
        used = []
    return image_id, [], used


DEFAULT_DOCKER_HOSTS = ("", "unix:///var/run/docker.sock", "unix:///run/docker.sock")


def stage_record_path(tag: str) -> Path:
    """Where the last build of `tag` here noted its builder-stage images: one folder per engine,
    so a second daemon's build of the same tag (CI's Docker 20.10 floor beside Docker 28, issue 43)
    does not overwrite the main engine's note and leave its build cache undroppable."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "kerasenv" / "build-stages"
    host = os.environ.get("DOCKER_HOST", "")
    if host not in DEFAULT_DOCKER_HOSTS:
        import re

        folder = folder / re.sub(r"[^A-Za-z0-9._-]+", "_", host).strip("_")
    return folder / f"{tag.split(':', 1)[1]}.json"


def record_stage_images(tag: str, result: BuildResult) -> None:
    """Note which builder-stage images this build of `tag` left, so `kerasenv drop-build-cache`
    can remove them later without building again: a cached rebuild only to learn them reads
    every file a COPY --from copies to check the cache (about 170 s for a 6.7 GB CUDA image)."""
    path = stage_record_path(tag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"image_id": result.image_id, "stage_images": list(result.stage_images),
                                    "cache_records": list(result.cache_records)}))
    except OSError:
        pass  # a cache note: without it, drop-build-cache says there is nothing it knows to drop


def drop_recorded_build_cache(client, v: Variant, say: Callable[[str], None]) -> int:
    """Drop the builder-stage images the last build of kerasenv:<id> noted, if that build made
    the image the tag names now; how many went."""
    from docker.errors import ImageNotFound

    tag = v.image_ref
    path = stage_record_path(tag)
    try:
        record = json.loads(path.read_text())
        current = client.images.get(tag).id
    except (OSError, ValueError, ImageNotFound):
        say(f"{tag}: no build of it noted here ({path}): no build cache of it to drop")
        return 0
    if record.get("image_id") != current:
        say(f"{tag}: the build noted in {path} made another image (rebuilt since, or pulled): "
            "no build cache of it to drop")
        return 0
    removed = drop_build_cache(client, BuildResult(v, current, 0, 0.0, tuple(record.get("stage_images", ())),
                                                   tuple(record.get("cache_records", ())), tag=tag), say)
    path.unlink(missing_ok=True)
    return removed


def drop_build_cache(client, result: BuildResult, say: Callable[[str], None]) -> int:
    """Remove the build cache a finished build left; how many stage images or cache records went.

    A CUDA image's builder stages hold its CUDA wheels and TensorFlow a second time (about the
    image's size again), so a machine that builds every variant once, as CI does, needs about
    half the disk without them. The price: the next build of that variant installs everything
    again. Classic builder: a stage image that another image still builds on (python-base under
    the runtime, a stage shared with a variant whose cache is kept) stays: Docker refuses to
    remove it. BuildKit: the records this build used, but those another build's note here names
    (a variant whose cache is kept, a CUDA layer's giver) and the Debian step every variant on
    a suite starts from (SHARED_STEP_MARK); records backing the image's own layers free nothing
    until the image goes, and then nothing holds them."""
    if result.builder == "buildkit" or result.cache_records:
        return _drop_buildkit_cache(client, result, say)
    from docker.errors import APIError, ImageNotFound

    removed = 0
    for stage_image in reversed(result.stage_images):
        try:
            if client.images.get(stage_image).tags:
                continue
            client.images.remove(stage_image, force=False, noprune=False)
            removed += 1
        except ImageNotFound:
            continue  # gone with a later stage whose only parent it was
        except APIError as exc:
            if exc.status_code != 409:  # 409: still the parent of another image
                # The image is built; a cache that could not go costs disk, not the build.
                say(f"could not drop builder-stage image {stage_image}: {exc.explanation or exc}")
    say(f"dropped the build cache of {result.variant.id}: {removed} builder-stage image(s) removed")
    return removed


def _notes_folder() -> Path:
    return stage_record_path("kerasenv:any").parent


def _drop_buildkit_cache(client, result: BuildResult, say: Callable[[str], None]) -> int:
    from ..engine import buildkit

    kept: set[str] = set()
    for note in sorted(_notes_folder().glob("*.json")):
        try:
            record = json.loads(note.read_text())
        except (OSError, ValueError):
            continue
        if record.get("image_id") == result.image_id:
            note.unlink(missing_ok=True)  # this build's own note: its cache is going
            continue
        kept.update(record.get("cache_records") or ())
    from docker.errors import APIError

    try:
        now = buildkit.released(client, set(result.cache_records) - kept)
    except APIError as exc:  # the image is built: a cache that could not go costs disk, not the build
        say(f"could not read the build cache to drop that of {result.variant.id} "
            f"({exc.explanation or exc}): it stays until `docker builder prune`")
        return 0
    here = {r.id: r for r in now}
    ids = [i for i in result.cache_records
           if i in here and i not in kept and not here[i].in_use and SHARED_STEP_MARK not in here[i].description]
    pruned = buildkit.prune(client, buildkit.children_first(now, ids))
    for error in pruned.errors:
        say(f"could not drop build cache record {error}")
    name = result.tag.split(":", 1)[1] if ":" in result.tag else result.variant.id
    say(f"dropped the build cache of {name}: {pruned.removed} BuildKit cache record(s), "
        f"{pruned.bytes / 1e9:.2f} GB")
    return pruned.removed


class Progress:
    """Plain lines for logs and CI; a one-line live status on a terminal (rich)."""

    def __init__(self, stream, live: bool) -> None:
        self.stream, self.live = stream, live
        self._status = None

    @classmethod
    def for_stream(cls, stream) -> "Progress":
        return cls(stream, live=stream.isatty() and os.environ.get("CI") is None)

    def start(self, variant_id: str) -> None:
        self.variant_id = variant_id
        if self.live:
            from rich.console import Console

            self._console = Console(file=self.stream)
            self._status = self._console.status(f"building {variant_id}")
            self._status.start()
        else:
            self.note(f"building {variant_id}")

    def step(self, text: str) -> None:
        if self._status is not None:
            self._status.update(f"{self.variant_id}: {text}")
            self._console.print(f"[dim]{self.variant_id}[/dim] {text}", highlight=False)
        else:
            print(f"[{self.variant_id}] {text}", file=self.stream, flush=True)

    def line(self, text: str) -> None:
        if self._status is None:
            print(f"[{self.variant_id}]   {text}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        if self._status is not None:
            self._console.print(text, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


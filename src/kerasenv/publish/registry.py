"""Push and pull variant images with the docker SDK, with progress, a stale-tag check and
retries of transient registry errors.

Retry policy: a whole push (of one tag) or pull is tried again when the Docker daemon
reports a transient registry failure (HTTP 5xx, connection refused/reset, EOF, timeouts),
at most KERASENV_REGISTRY_ATTEMPTS times in all (default 4), waiting
KERASENV_REGISTRY_BACKOFF_S (default 2) seconds, then twice as long each time (2, 4, 8 s;
at most 60 s). Each retry prints one line. Anything else (denied, unauthorized, not found,
rate-limited, TLS/DNS setup) fails at once with the fix. The daemon already retries single
layer uploads/downloads a few times itself; this wraps the whole operation, which is cheap
to repeat since layers the registry already has are skipped.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..matrix import labels as labels_mod
from . import compression as compression_mod
from . import continuity
from . import index as index_mod
from . import tags as tags_mod
from ..engine import docker_client
from ..errors import KerasenvError, UsageError
from ..matrix.schema import Matrix, Variant

ATTEMPTS_ENV = "KERASENV_REGISTRY_ATTEMPTS"
BACKOFF_ENV = "KERASENV_REGISTRY_BACKOFF_S"
DEFAULT_ATTEMPTS = 4
DEFAULT_BACKOFF_S = 2.0
MAX_ATTEMPTS = 20
MAX_DELAY_S = 60.0

_sleep = time.sleep  # replaced by the unit tests


@dataclass
class Transfer:
    variant: Variant
    ref: str
    digest: str | None
    seconds: float
    layers_sent: int = 0
    layers_skipped: int = 0
    stale: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    compression: str = compression_mod.GZIP


# --- classifying the daemon's error text ------------------------------------------------
#
# The daemon reports a registry failure as text only: the `error` of a push/pull progress
# event, or the explanation of the API error when it fails before any progress. The texts
# below are what moby (dockerd) and the distribution client it uses produce:
#
# - "received unexpected HTTP status: 502 Bad Gateway" (older daemons: "Received ..."):
#   distribution/distribution registry/client/errors.go, UnexpectedHTTPStatusError,
#   returned for every status outside 200-499 (HandleErrorResponse); seen in
#   goharbor/harbor#16653 (push, 502), docker/hub-feedback#1761 (push, 500),
#   moby/moby#17506 (push, 500), guix77/phpcs-drupal-action#3 (pull, 502).
# - "unavailable: service unavailable" / "unknown: unknown error": the errcode texts of a
#   JSON error body (distribution registry/api/errcode/register.go: UNAVAILABLE is 503,
#   UNKNOWN 500).
# - Go net errors, wrapped by net/url as `Get "http://R/v2/": <err>`:
#   "dial tcp 1.2.3.4:443: connect: connection refused" (ocurrent/ocluster#246),
#   "read tcp ...: read: connection reset by peer" (Azure/iotedgedev#359,
#   distribution/distribution#785, nanobox-io/nanobox#252), "EOF" / "unexpected EOF"
#   (moby/moby#28596, distribution/distribution#1568, goharbor/harbor#20405),
#   "net/http: TLS handshake timeout" (docker/hub-feedback#1195, docker/for-win#437),
#   "net/http: request canceled while waiting for connection (Client.Timeout exceeded
#   while awaiting headers)" (docker/for-win#5983, exadel-inc/CompreFace#1277),
#   "dial tcp 52.85.151.90:443: i/o timeout" (docker/for-linux#3,
#   docker-archive-public/docker.kitematic#2194).
# - Seen here from dockerd 20.10.24 through tests/integration/fault_proxy.py:
#   push: "received unexpected HTTP status: 503 Service Unavailable" (an error event);
#   pull: `Head "http://127.0.0.1:P/v2/kerasenv/manifests/T": read tcp ...: read:
#   connection reset by peer` (the API error, before any progress); registry down behind
#   the proxy: `Get "http://127.0.0.1:P/v2/": read tcp ...: connection reset by peer`.
# - Not transient, and not retried by dockerd either (moby distribution/errors.go,
#   retryOnError: UNAUTHORIZED, DENIED, TOOMANYREQUESTS, NAME_UNKNOWN are DoNotRetry):
#   "unauthorized: authentication required", "denied: requested access to the resource is
#   denied", "toomanyrequests: ..." (errcode/register.go), "manifest unknown",
#   "name unknown: repository name not known to registry" (registry/api/v2), and the pull
#   translations of moby distribution/errors.go, TranslatePullError: "pull access denied
#   for X, repository does not exist or may require 'docker login'", "manifest for X not
#   found: manifest unknown: manifest unknown" (also seen here), "repository X not found";
#   Docker Hub's "toomanyrequests: You have reached your pull rate limit. ..."
#   (docker/hub-feedback#2429).

TRANSIENT = "transient"


class Failure(NamedTuple):
    kind: str  # "transient", "auth", "not_found", "rate_limit", "plain_http", "tls", "dns", "other"
    cause: str  # short, for the retry line: "502 Bad Gateway", "connection reset", ...


_PERMANENT: tuple[tuple[str, re.Pattern], ...] = tuple((kind, re.compile(rx, re.I)) for kind, rx in (
    # Status codes only as "429 Too Many Requests", "401 Unauthorized", "403 Forbidden",
    # "404 Not Found": a bare number could be a port in `dial tcp 127.0.0.1:NNN`.
    ("rate_limit", r"toomanyrequests|too many requests|rate limit"),
    ("auth", r"unauthorized|authentication required|\bdenied\b|forbidden|docker login|insufficient_scope"
             r"|no basic auth credentials"),
    ("not_found", r"manifest unknown|name unknown|not known to registry|\bnot found\b"),
    ("plain_http", r"server gave HTTP response to HTTPS client"),
    ("tls", r"x509:|certificate"),
    ("dns", r"no such host|server misbehaving"),
))

_TRANSIENT: tuple[tuple[re.Pattern, str | None], ...] = tuple((re.compile(rx, re.I), cause) for rx, cause in (
    # cause: the status as the server sent it, "502 Bad Gateway", nginx's "504 Gateway Time-out"
    (r"unexpected HTTP status: (5\d\d(?: [A-Za-z][A-Za-z -]*[A-Za-z])?)", None),
    (r"unavailable: service unavailable", "503 service unavailable"),
    (r"unknown: unknown error", "500 unknown error"),
    (r"connection refused", "connection refused"),
    (r"connection reset", "connection reset"),
    (r"broken pipe", "broken pipe"),  # Go's syscall.EPIPE text: the registry closed mid-upload
    (r"TLS handshake timeout", "TLS handshake timeout"),
    (r"i/o timeout", "i/o timeout"),
    (r"request canceled", "request canceled (timeout)"),
    (r"Client\.Timeout exceeded", "request canceled (timeout)"),
    (r"server closed idle connection", "connection closed"),
    (r"\bunexpected EOF\b", "unexpected EOF"),
    (r"(?:^|[\s:])EOF\s*$", "EOF"),
))


def classify(message: str) -> Failure:
    """What kind of registry failure the daemon's error text names."""
    for kind, rx in _PERMANENT:
        if rx.search(message):
            return Failure(kind, kind.replace("_", " "))
    for rx, cause in _TRANSIENT:
        m = rx.search(message)
        if m:
            return Failure(TRANSIENT, cause or m.group(1))
    return Failure("other", "error")


# --- the retry policy ------------------------------------------------------------------------

@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = DEFAULT_ATTEMPTS
    backoff_s: float = DEFAULT_BACKOFF_S

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt `failed_attempt` (1-based) failed: 2, 4, 8, ..."""
        return min(self.backoff_s * 2 ** (failed_attempt - 1), MAX_DELAY_S)

    @classmethod
    def from_env(cls, environ=None) -> "RetryPolicy":
        environ = os.environ if environ is None else environ
        raw_attempts = environ.get(ATTEMPTS_ENV, "").strip()
        raw_backoff = environ.get(BACKOFF_ENV, "").strip()
        try:
            attempts = int(raw_attempts) if raw_attempts else DEFAULT_ATTEMPTS
            if not 1 <= attempts <= MAX_ATTEMPTS:
                raise ValueError
        except ValueError:
            raise UsageError(f"{ATTEMPTS_ENV}={raw_attempts!r} is not a whole number from 1 to {MAX_ATTEMPTS}: "
                             f"set it to e.g. {DEFAULT_ATTEMPTS}, or unset it") from None
        try:
            backoff = float(raw_backoff) if raw_backoff else DEFAULT_BACKOFF_S
            if not 0 <= backoff <= MAX_DELAY_S:
                raise ValueError
        except ValueError:
            raise UsageError(f"{BACKOFF_ENV}={raw_backoff!r} is not a number of seconds from 0 to "
                             f"{MAX_DELAY_S:g}: set it to e.g. {DEFAULT_BACKOFF_S:g}, or unset it") from None
        return cls(attempts, backoff)


class _RegistryFailure(Exception):
    """The daemon reported a failed push/pull; `detail` is its full error text."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _one_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "unknown error")[:limit]


def _fix(failure: Failure, action: str, registry: str, ref: str, variant_id: str) -> str:
    login = f"`docker login {registry}`" if registry else "`docker login`"
    where = registry or "Docker Hub"
    if failure.kind == "auth":
        return (f"log in with {login} as a user allowed to {action} {ref.rsplit(':', 1)[0]}; "
                f"not retried, it is not a transient error")
    if failure.kind == "not_found":
        if action == "pull":
            return (f"the tag is not in the registry: push it first (`kerasenv push {variant_id} --registry "
                    f"{registry or 'R'}`) or check the registry and the variant id (`kerasenv list`)")
        return f"check the registry name ({where}) and that the repository may be created there"
    if failure.kind == "rate_limit":
        return f"{where} is rate-limiting you: wait and run it again later, or {login} for a higher limit"
    if failure.kind == "plain_http":
        return (f"{where} speaks plain HTTP: add it to \"insecure-registries\" in /etc/docker/daemon.json "
                f"(and restart dockerd) or serve it with TLS")
    if failure.kind == "tls":
        return f"the daemon does not trust {where}'s certificate: put its CA in /etc/docker/certs.d/{where}/ca.crt"
    if failure.kind == "dns":
        return f"{where} does not resolve from the Docker daemon: check --registry and the host's DNS"
    return f"not a known transient error, so not retried: check {where} and the daemon log (`journalctl -u docker`)"


def _with_retries(run: Callable[[], tuple], *, what: str, action: str, registry: str, ref: str,
                  variant_id: str, say, policy: RetryPolicy | None = None):
    """Call run() until it succeeds, retrying transient registry failures with backoff."""
    policy = policy or RetryPolicy.from_env()
    for attempt in range(1, policy.attempts + 1):
        try:
            return run()
        except _RegistryFailure as exc:
            detail = exc.detail
        failure = classify(detail)
        if failure.kind != TRANSIENT:
            raise KerasenvError(f"{what} failed: {_one_line(detail)}; "
                                f"{_fix(failure, action, registry, ref, variant_id)}")
        if attempt == policy.attempts:
            break
        delay = policy.delay(attempt)
        say(f"kerasenv: {what} failed ({failure.cause}); retrying in {delay:g} s "
            f"(attempt {attempt + 1} of {policy.attempts})")
        _sleep(delay)
    where = registry or "Docker Hub"
    raise KerasenvError(
        f"{what} failed {policy.attempts} time{'s' if policy.attempts > 1 else ''}, last with "
        f"{failure.cause}: {_one_line(detail, 200)}; the registry {where} is down, failing or unreachable "
        f"from the Docker daemon: check it is up, then run "
        f"`kerasenv {action} {variant_id} --registry {registry or 'R'}` again (layers already there are "
        f"skipped; {ATTEMPTS_ENV}/{BACKOFF_ENV} set the retries)")


_PUSHED_DIGEST = re.compile(r": digest: (sha256:[0-9a-f]{64}) size: \d+$")


def _stream(events, say, what: str) -> tuple[str | None, int, int]:
    """Follow push/pull progress; return (digest, layers transferred, layers already there)."""
    digest, sent, skipped, last = None, 0, 0, 0.0
    for event in events:
        if "error" in event:
            raise _RegistryFailure(event.get("errorDetail", {}).get("message") or event["error"])
        status = event.get("status", "")
        if status in ("Pushed", "Pull complete"):
            sent += 1
        elif status in ("Layer already exists", "Already exists"):
            skipped += 1
        if "aux" in event and event["aux"].get("Digest"):
            digest = event["aux"]["Digest"]
        if status.startswith("Digest: "):
            digest = status.split(": ", 1)[1]
        elif digest is None and _PUSHED_DIGEST.search(status):
            # "<tag>: digest: sha256:... size: 424": all Docker 28.5.2's push says on the
            # containerd image store, which sends no aux event with the digest (issue 43)
            digest = _PUSHED_DIGEST.search(status).group(1)
        now = time.monotonic()
        if status in ("Pushed", "Pull complete", "Layer already exists", "Already exists") or now - last > 10:
            say(f"  {what}: {event.get('id', '')} {status} {event.get('progress', '')}".rstrip())
            last = now
    return digest, sent, skipped


def _transfer(start, say, what: str):
    """Start a daemon push/pull and follow it; API errors become _RegistryFailure too."""
    from docker.errors import APIError

    try:
        return _stream(start(), say, what)
    except APIError as exc:
        raise _RegistryFailure(str(exc.explanation or exc)) from None


def push(client, matrix: Matrix, v: Variant, registry: str, compression: str = compression_mod.GZIP,
         say=lambda m: print(m, file=sys.stderr), platform: str | None = None,
         index_only: bool = False) -> list[Transfer]:
    """Push every tag of the variant: gzip through the daemon, zstd (the `-zstd` tags) through
    skopeo. One Transfer per compression. A variant with an arm64 image (issue 36): each
    architecture's image under its own tag and every tag as an image index over the two
    (publish/index.py); `platform` pushes one architecture's tag only, `index_only` writes the
    indexes over architecture tags already pushed (the workflow's job that needs both)."""
    from docker.errors import ImageNotFound

    policy = RetryPolicy.from_env()
    compression_mod.preflight(compression)
    if not v.arm64:
        if platform not in (None, "linux/amd64") or index_only:
            raise UsageError(f"{v.id} has one architecture (linux/amd64): push it without "
                             f"{'--index' if index_only else '--platform'}")
        return _push_single(client, matrix, v, registry, compression, say, policy)
    arches = [] if index_only else [platform.split("/")[1]] if platform else list(index_mod.ARCHES)
    images = {}
    for arch in arches:
        ref = v.platform_ref(f"linux/{arch}")
        try:
            images[arch] = client.images.get(ref)
        except ImageNotFound:
            how = f"make build VARIANT={v.id}" + (" PLATFORM=linux/arm64" if arch == "arm64" else "")
            one = "" if platform else (f", or push one architecture with --platform linux/{index_mod.ARCHES[0]} and "
                                       f"join them later with --index")
            raise UsageError(f"{ref} is not built here: run `{how}` first{one}") from None
        if images[arch].attrs.get("Architecture") != arch:
            raise UsageError(f"{ref} is a {images[arch].attrs.get('Architecture')} image, not {arch}: rebuild it")
    labels = next(iter(images.values())).labels if images else None
    repo = tags_mod.repository(registry)
    transfers = []
    for comp in ((compression_mod.GZIP, compression_mod.ZSTD) if compression == compression_mod.BOTH else (compression,)):
        started = time.monotonic()
        base = v.id if comp == compression_mod.GZIP else compression_mod.zstd_tag(v.id)
        digest = None
        for arch, image in images.items():
            tag = index_mod.arch_tag(base, arch)
            what = f"push {repo}:{tag}"
            previous = continuity.read(f"{repo}:{tag}")  # the release this architecture's tag replaces
            if comp == compression_mod.GZIP:
                primed = continuity.prime(client, repo, tag, previous, say)
                digest, _, _ = _push_tag(client, image, repo, tag, registry, v, say, policy)
                if primed:
                    continuity.forget(client, primed, image.id)
            else:
                say(f"  {what}: recompressing {image.tags[0] if image.tags else arch} to zstd with skopeo")
                compression_mod.push_zstd(v.platform_ref(f"linux/{arch}"), f"{repo}:{tag}")
                digest = compression_mod.manifest_digest(f"{repo}:{tag}")
            _say_continuity(previous, f"{repo}:{tag}", say)
            say(f"pushed {repo}:{tag} ({arch}) digest {digest}")
        if platform:
            transfers.append(Transfer(v, f"{repo}:{index_mod.arch_tag(base, arches[0])}", digest,
                                      time.monotonic() - started, compression=comp))
            continue
        sources = [f"{repo}:{index_mod.arch_tag(base, arch)}" for arch in index_mod.ARCHES]
        for tag in tags_mod.tags(matrix, v, labels):
            tag = tag if comp == compression_mod.GZIP else compression_mod.zstd_tag(tag)
            digest = index_mod.create(f"{repo}:{tag}", sources, insecure=index_mod.insecure(registry))
            say(f"pushed {repo}:{tag}: an image index over {', '.join(index_mod.ARCHES)}, digest {digest}")
        transfers.append(Transfer(v, f"{repo}:{base}", digest, time.monotonic() - started, compression=comp))
    return transfers


def _push_tag(client, image, repo: str, tag: str, registry: str, v: Variant, say,
              policy: RetryPolicy) -> tuple[str | None, int, int]:
    """Tag the local image as repo:tag and push it through the daemon (gzip), with retries."""
    image.tag(repo, tag)
    what = f"push {repo}:{tag}"
    return _with_retries(
        lambda: _transfer(lambda: client.images.push(repo, tag=tag, stream=True, decode=True), say, what),
        what=what, action="push", registry=registry, ref=f"{repo}:{tag}", variant_id=v.id, say=say, policy=policy)


def _say_continuity(previous, ref: str, say) -> None:
    """How many blobs of the release it replaced the push of `ref` kept (publish/continuity.py)."""
    if previous is None:
        return
    new = continuity.read(ref)
    if new is not None:
        for line in continuity.report(continuity.compare(previous, new), previous, new):
            say(line)


def _push_single(client, matrix: Matrix, v: Variant, registry: str, compression: str, say,
                 policy: RetryPolicy) -> list[Transfer]:
    from docker.errors import ImageNotFound

    try:
        image = client.images.get(v.image_ref)
    except ImageNotFound:
        raise UsageError(f"{v.image_ref} is not built here: run `make build VARIANT={v.id}` first") from None
    pairs = compression_mod.tags_for(tags_mod.tags(matrix, v, image.labels), compression)
    repo = tags_mod.repository(registry)
    transfers = []
    gzip_tags = [t for t, c in pairs if c == compression_mod.GZIP]
    if gzip_tags:
        started = time.monotonic()
        digest, sent, skipped = None, 0, 0
        # The release this push replaces (issue 52): pulled first, so Docker keeps its blobs.
        if not continuity.can_check():
            say(continuity.NO_SKOPEO)
        previous = continuity.read(f"{repo}:{gzip_tags[0]}")
        primed = continuity.prime(client, repo, gzip_tags[0], previous, say)
        for tag in gzip_tags:
            d, s, k = _push_tag(client, image, repo, tag, registry, v, say, policy)
            digest = digest or d
            sent, skipped = sent + s, skipped + k
        if primed:
            continuity.forget(client, primed, image.id)
        _say_continuity(previous, f"{repo}:{gzip_tags[0]}", say)
        say(f"pushed {repo}:{v.id} ({', '.join(gzip_tags[1:])}) digest {digest}")
        transfers.append(Transfer(v, f"{repo}:{v.id}", digest, time.monotonic() - started, sent, skipped))
    zstd_tags = [t for t, c in pairs if c == compression_mod.ZSTD]
    if zstd_tags:
        started = time.monotonic()
        first = f"{repo}:{zstd_tags[0]}"
        previous = continuity.read(first)
        say(f"  push {first}: recompressing {v.image_ref} to zstd (level {compression_mod.ZSTD_LEVEL}) with skopeo")
        compression_mod.push_zstd(v.image_ref, first)
        _say_continuity(previous, first, say)
        for tag in zstd_tags[1:]:
            compression_mod.copy_tag(first, f"{repo}:{tag}")
        digest = compression_mod.manifest_digest(first)
        say(f"pushed {first} ({', '.join(zstd_tags[1:])}) digest {digest}: zstd layers, for Docker >= 23 "
            f"and containerd (older Docker pulls {repo}:{v.id})")
        transfers.append(Transfer(v, first, digest, time.monotonic() - started, compression=compression_mod.ZSTD))
    return transfers


def stale_labels(matrix: Matrix, v: Variant, got: dict[str, str],
                 arch: str = "amd64") -> dict[str, tuple[str, str | None]]:
    """Labels that differ from what the matrix says for this variant's image of `arch`: {key: (matrix, image)}."""
    return {k: (want, got.get(k)) for k, want in labels_mod.static_labels(matrix, v, arch).items()
            if got.get(k) != want}


def zstd_refused(engine_version: str, ref: str, fix: str) -> UsageError:
    """The one line for a zstd image this Docker cannot unpack."""
    return UsageError(f"{ref} has zstd layers, which Docker {engine_version} cannot unpack (Docker >= "
                      f"{'.'.join(map(str, docker_client.ZSTD_SINCE))} and containerd can): {fix}, or upgrade Docker")


def pull(client, matrix: Matrix, v: Variant, registry: str, compression: str = compression_mod.GZIP,
         say=lambda m: print(m, file=sys.stderr), platform: str | None = None) -> Transfer:
    """Pull the variant's tag (the engine picks its own architecture from an index, or `platform`'s),
    check it is that architecture's image and its labels the matrix's, and name it locally
    kerasenv:<id> (kerasenv:<id>-arm64 for the arm64 image of an amd64 engine, as a build would)."""
    if compression not in (compression_mod.GZIP, compression_mod.ZSTD):
        raise UsageError(f"--compression {compression!r} for a pull: choose gzip or zstd (one image is pulled)")
    policy = RetryPolicy.from_env()
    repo = tags_mod.repository(registry)
    tag = compression_mod.zstd_tag(v.id) if compression == compression_mod.ZSTD else v.id
    ref, gzip_ref = f"{repo}:{tag}", f"{repo}:{v.id}"
    engine_version = client.version().get("Version", "")
    use_gzip = f"pull the gzip tag {gzip_ref} instead (`kerasenv pull {v.id} --registry {registry}`)"
    if compression == compression_mod.ZSTD and docker_client.unpacks_zstd(engine_version) is False:
        raise zstd_refused(engine_version, ref, use_gzip)
    started = time.monotonic()
    what = f"pull {ref}"
    try:
        digest, sent, skipped = _with_retries(
            lambda: _transfer(lambda: client.api.pull(repo, tag=tag, stream=True, decode=True,
                                                      **({"platform": platform} if platform else {})), say, what),
            what=what, action="pull", registry=registry, ref=ref, variant_id=v.id,
            say=say, policy=policy)
    except KerasenvError as exc:
        # A zstd image under a plain tag (pushed by other tools): the daemon downloads it and
        # fails to unpack the first layer; it removes what it fetched itself.
        if compression_mod.zstd_refusal(exc.message) and docker_client.unpacks_zstd(engine_version) is False:
            raise zstd_refused(engine_version, ref, use_gzip if tag != v.id else
                               f"push it again as gzip (`kerasenv push {v.id} --registry {registry}`: plain tags "
                               f"are gzip, zstd goes to {repo}:{compression_mod.zstd_tag(v.id)})") from None
        raise
    image = client.images.get(ref)
    # The containerd image store keeps both platforms under the tag, and a plain inspect answers
    # for the host's whenever it is there too (issue 43): ask for the platform pulled.
    picked = docker_client.inspect_platform(client, ref, platform, client.version().get("ApiVersion")) \
        if platform else None
    attrs = picked or image.attrs
    local = v.platform_ref(platform) if platform and v.arm64 and platform != "linux/amd64" else v.image_ref
    if not attrs.get("Architecture") and not (attrs.get("RootFS") or {}).get("Layers"):
        # The containerd image store skips fetching the layers of a pull whose unpacked layers it
        # already has from another image (the same image pushed from here in another compression,
        # say) and then answers inspect with no platform, config or layers (measured on Docker
        # 28.5.2, issue 43). Tagging that as kerasenv:<id> would break every later inspect.
        raise KerasenvError(f"{ref} was pulled, but the engine keeps only its manifest (the containerd image store "
                            f"skipped layers it already had unpacked, so inspect names no platform): remove the "
                            f"local image that shares them (`docker rmi {local}`) and pull again")
    arch = attrs.get("Architecture", "amd64")
    if platform and arch != platform.split("/")[1]:
        raise KerasenvError(f"{ref} gave a {arch} image for --platform {platform}: the registry has no {platform} "
                            f"image under that tag (`docker manifest inspect {ref}` lists what it has)")
    if arch == "arm64" and not v.arm64:
        raise KerasenvError(f"{ref} is an arm64 image, but {v.id} has no arm64 image in the matrix: a stale or foreign tag")
    local = v.platform_ref(f"linux/{arch}") if v.arm64 else v.image_ref
    # The local name the rest of the tooling uses, for that platform's image alone: by the Id
    # picked, which on the containerd store is that platform's manifest, not the whole index.
    if picked:
        client.api.tag(picked["Id"], *local.split(":", 1))
        labels = (picked.get("Config") or {}).get("Labels") or {}
    else:
        image.tag(*local.split(":", 1))
        labels = image.labels or {}
    stale = stale_labels(matrix, v, labels, arch)
    if stale:
        detail = ", ".join(f"{k}={got!r} (matrix: {want!r})" for k, (want, got) in list(stale.items())[:3])
        say(f"kerasenv: warning: {repo}:{v.id} is stale: {detail}; rebuild and push it, or pull by digest")
    return Transfer(v, ref, digest, time.monotonic() - started, sent, skipped, stale, compression)

"""Push and pull variant images with the docker SDK, with progress and a stale-tag check."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from . import labels as labels_mod
from . import tags as tags_mod
from .errors import KerasenvError, UsageError
from .matrix import Matrix, Variant


@dataclass
class Transfer:
    variant: Variant
    ref: str
    digest: str | None
    seconds: float
    layers_sent: int = 0
    layers_skipped: int = 0
    stale: dict[str, tuple[str, str | None]] = field(default_factory=dict)


def _stream(events, say, what: str) -> tuple[str | None, int, int]:
    """Follow push/pull progress; return (digest, layers transferred, layers already there)."""
    digest, sent, skipped, last = None, 0, 0, 0.0
    for event in events:
        if "error" in event:
            detail = event.get("errorDetail", {}).get("message") or event["error"]
            raise KerasenvError(f"{what} failed: {detail.strip().splitlines()[0][:300]}")
        status = event.get("status", "")
        if status in ("Pushed", "Pull complete"):
            sent += 1
        elif status in ("Layer already exists", "Already exists"):
            skipped += 1
        if "aux" in event and event["aux"].get("Digest"):
            digest = event["aux"]["Digest"]
        if status.startswith("Digest: "):
            digest = status.split(": ", 1)[1]
        now = time.monotonic()
        if status in ("Pushed", "Pull complete", "Layer already exists", "Already exists") or now - last > 10:
            say(f"  {what}: {event.get('id', '')} {status} {event.get('progress', '')}".rstrip())
            last = now
    return digest, sent, skipped


def push(client, matrix: Matrix, v: Variant, registry: str, say=lambda m: print(m, file=sys.stderr)) -> Transfer:
    from docker.errors import APIError, ImageNotFound

    try:
        image = client.images.get(v.image_ref)
    except ImageNotFound:
        raise UsageError(f"{v.image_ref} is not built here: run `make build VARIANT={v.id}` first") from None
    repo = tags_mod.repository(registry)
    started = time.monotonic()
    digest, sent, skipped = None, 0, 0
    for tag in tags_mod.tags(matrix, v):
        image.tag(repo, tag)
        try:
            d, s, k = _stream(client.images.push(repo, tag=tag, stream=True, decode=True), say, f"push {repo}:{tag}")
        except APIError as exc:
            raise KerasenvError(f"push to {registry} failed: {exc.explanation or exc}") from None
        digest = digest or d
        sent, skipped = sent + s, skipped + k
    say(f"pushed {repo}:{v.id} ({', '.join(tags_mod.tags(matrix, v)[1:])}) digest {digest}")
    return Transfer(v, f"{repo}:{v.id}", digest, time.monotonic() - started, sent, skipped)


def stale_labels(matrix: Matrix, v: Variant, got: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Labels that differ from what the matrix says for this variant: {key: (matrix, image)}."""
    return {k: (want, got.get(k)) for k, want in labels_mod.static_labels(matrix, v).items()
            if got.get(k) != want}


def pull(client, matrix: Matrix, v: Variant, registry: str, say=lambda m: print(m, file=sys.stderr)) -> Transfer:
    from docker.errors import APIError

    repo = tags_mod.repository(registry)
    started = time.monotonic()
    try:
        digest, sent, skipped = _stream(client.api.pull(repo, tag=v.id, stream=True, decode=True), say,
                                        f"pull {repo}:{v.id}")
    except APIError as exc:
        raise KerasenvError(f"pull of {repo}:{v.id} failed: {exc.explanation or exc}") from None
    image = client.images.get(f"{repo}:{v.id}")
    image.tag("kerasenv", v.id)  # the local name the rest of the tooling uses
    stale = stale_labels(matrix, v, image.labels or {})
    if stale:
        detail = ", ".join(f"{k}={got!r} (matrix: {want!r})" for k, (want, got) in list(stale.items())[:3])
        say(f"kerasenv: warning: {repo}:{v.id} is stale: {detail}; rebuild and push it, or pull by digest")
    return Transfer(v, f"{repo}:{v.id}", digest, time.monotonic() - started, sent, skipped, stale)

"""The blobs a release keeps from the one before it (issue 52).

A layer that is the same bytes as the previous release's (every layer but the last since the
security state went last) must also keep the previous release's *blob*, its compressed bytes:
a client that matches blobs by digest (containerd, Podman, Docker's containerd store) fetches it
again otherwise. Two things make that so:

- gzip (`docker push`): Docker skips a layer only when its own records map the layer's diff id
  to a blob of that repository. So `kerasenv push` pulls the previous release first: on Docker's
  classic store that fetches just the layers the new image lacks (its lower layers have the same
  chain), and records the previous release's blobs for all of them, so the push answers "Layer
  already exists" with the previous digests whatever the compressor would write now.
- zstd (skopeo): skopeo recompresses every layer; its output is the same bytes for the same
  layer as long as its compressor is (klauspost/compress, level 3, in the skopeo the workflow
  installs), and not otherwise.

Either way every push compares the new release's layers with the previous release's, by diff id,
and says how many blobs it kept, and names in one line a layer whose bytes are the same but whose
blob changed (the compressor did): the check of the pinned compressor's output.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from . import compression as compression_mod


NO_SKOPEO = ("  skopeo is not installed: this push neither keeps nor checks the blobs of the release it replaces, "
             "so clients may fetch unchanged layers again (`sudo apt-get install -y skopeo`)")


def can_check() -> bool:
    import shutil

    return shutil.which("skopeo") is not None


@dataclass(frozen=True)
class Published:
    """A release's layers in the registry: (diff id, blob digest, compressed bytes), bottom first."""

    ref: str
    layers: tuple[tuple[str, str, int], ...]


def _skopeo_json(args: list[str], ref: str, timeout: float) -> dict | None:
    registry = ref.split("/", 1)[0]
    if not can_check():
        return None  # a gzip push without skopeo: no check, and no pull before it (NO_SKOPEO says so)
    command = [compression_mod._skopeo(), "inspect", *args]
    if compression_mod.is_plain_http(registry):
        command.append("--tls-verify=false")
    try:
        proc = subprocess.run(command + [f"docker://{ref}"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        return None  # no such tag yet (the first release), or a registry that will fail the push itself
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return None


def read(ref: str, timeout: float = 120) -> Published | None:
    """The layers `ref` has in its registry now, or None where it has no such single-platform image."""
    manifest = _skopeo_json(["--raw"], ref, timeout)
    if not manifest or "layers" not in manifest:  # none, or an image index (the arm64 variants' short tags)
        return None
    config = _skopeo_json(["--config", "--raw"], ref, timeout)
    diff_ids = ((config or {}).get("rootfs") or {}).get("diff_ids") or []
    if len(diff_ids) != len(manifest["layers"]):
        return None
    return Published(ref, tuple((d, layer["digest"], int(layer.get("size", 0)))
                                for d, layer in zip(diff_ids, manifest["layers"])))


@dataclass(frozen=True)
class Continuity:
    kept: int  # layers whose blob is the previous release's
    recompressed: tuple[str, ...]  # diff ids the previous release has under another blob
    new_bytes: int  # compressed bytes of the layers the previous release does not have
    total: int  # layers of the new release


def compare(previous: Published, new: Published) -> Continuity:
    blobs = {}
    for diff_id, digest, _ in previous.layers:
        blobs.setdefault(diff_id, set()).add(digest)
    kept, recompressed, new_bytes = 0, [], 0
    for diff_id, digest, size in new.layers:
        if diff_id not in blobs:
            new_bytes += size
        elif digest in blobs[diff_id]:
            kept += 1
        else:
            recompressed.append(diff_id)
            new_bytes += size
    return Continuity(kept, tuple(recompressed), new_bytes, len(new.layers))


def report(c: Continuity, previous: Published, new: Published) -> list[str]:
    lines = [f"  {new.ref}: kept {c.kept} of {c.total} layer blobs of the release it replaced; "
             f"a client holding that one fetches {c.new_bytes / 1e6:.1f} MB"]
    if c.recompressed:
        lines.append(f"  {new.ref}: {len(c.recompressed)} layer(s) are the same bytes as in {previous.ref}'s release but "
                     f"were compressed to other blobs ({', '.join(d[7:19] for d in c.recompressed)}): clients fetch "
                     "them again; the compressor changed (Docker's or skopeo's version): push from the pinned one")
    return lines


def prime(client, repo: str, tag: str, previous: Published | None, say) -> str | None:
    """Pull the previous release of repo:tag into the daemon (gzip pushes), so that the push keeps
    its blobs; the previous image's id, for `forget`, or None when there is none or it failed
    (the push then goes on: only the reuse is lost, and its check says so)."""
    if previous is None:
        return None
    try:
        image = client.images.pull(repo, tag=tag)
    except Exception as exc:  # docker.errors.APIError and the transport's: the push itself will tell
        say(f"  could not pull the release {repo}:{tag} replaces ({str(exc).splitlines()[0][:200]}): its blobs may be "
            "sent again")
        return None
    return image.id


def forget(client, image_id: str | None, pushed_id: str) -> None:
    """Remove the previous release pulled by `prime` (its last layers; the rest is the new image's)."""
    if image_id and image_id != pushed_id:
        try:
            client.images.remove(image_id, noprune=False)
        except Exception:  # still tagged elsewhere, or in use: it stays, as any pulled image would
            pass

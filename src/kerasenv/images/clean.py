"""`kerasenv clean`: remove what the project left in Docker, found by its labels.

Always: every container the tool or compose started (they carry io.kerasenv.kind: smoke, run,
shell, lab, bench, multiworker, gpu-probe, sbom, compose), every network with the project label,
and old final images a rebuild left untagged (they carry the variant label). Not every container
with the project label: a container inherits its image's labels, so a training someone started
with a plain `docker run kerasenv:<id>` carries it too, and is theirs to stop, not ours (as are
the boxes of an acceptance run going on beside). Nor a container whose CLI is still running
(io.kerasenv.cli-pid names a live kerasenv process): it is that command's, which removes it when
it ends; `make clean` in one terminal (or in the integration tests) must not pull a `kerasenv
lab` out from under another (an acceptance run's lab vanished that way, CI 2026-12-02). The
untagged last image of each
builder stage carries only the project label: it is Docker's build cache for the pip
install steps (pruning it made the next build cold), so it stays unless `images` asks
for everything to go, with every kerasenv:<id> image and the PTX JIT-cache volumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..engine.docker_client import CLI_PID_LABEL, KIND_LABEL, PROJECT_LABEL, has_image
from ..matrix.schema import Matrix

VARIANT_LABEL = "io.kerasenv.variant"
CUDA_CACHE_FILTER = f"{KIND_LABEL}=cuda-cache"


def cli_is_running(pid: str | None, proc: Path = Path("/proc")) -> bool:
    """True when `pid` is a live kerasenv process on this host (not a reused PID)."""
    if not pid or not pid.isdigit():
        return False
    try:
        cmdline = (proc / pid / "cmdline").read_bytes()
    except OSError:
        return False
    return b"kerasenv" in cmdline


@dataclass
class Cleaned:
    containers: int
    reclaimed_bytes: int


def clean(client, matrix: Matrix, *, images: bool = False, say=print) -> Cleaned:
    """Remove the project's leftovers; `say` gets one line per thing removed."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": KIND_LABEL}):
        if cli_is_running(container.labels.get(CLI_PID_LABEL)):
            say(f"kept container {container.name}: its kerasenv command (pid "
                f"{container.labels[CLI_PID_LABEL]}) is still running")
            continue
        container.remove(force=True)
        say(f"removed container {container.name}")
        removed += 1
    for network in client.networks.list(filters={"label": PROJECT_LABEL}):  # multi-worker networks
        network.remove()
        say(f"removed network {network.name}")
    reclaimed = prune_dangling(client, VARIANT_LABEL, say)
    if images:
        for v in matrix.variants:
            if has_image(client, v.image_ref):
                client.images.remove(v.image_ref)
                say(f"removed image {v.image_ref}")
        reclaimed += prune_dangling(client, PROJECT_LABEL, say)
        # The PTX JIT caches belong to the images (kept by plain `clean`: they are caches).
        for volume in client.volumes.list(filters={"label": CUDA_CACHE_FILTER}):
            volume.remove()
            say(f"removed volume {volume.name}")
    return Cleaned(removed, reclaimed)


def prune_dangling(client, label: str, say=print) -> int:
    """Prune untagged images with `label`; the bytes reclaimed."""
    pruned = client.images.prune(filters={"dangling": True, "label": label})
    for item in pruned.get("ImagesDeleted") or []:
        if item.get("Deleted"):
            say(f"removed dangling image {item['Deleted']}")
    return pruned.get("SpaceReclaimed", 0)

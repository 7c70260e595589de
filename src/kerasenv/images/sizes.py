"""Image sizes: total, layers attributed to base / Python / CUDA / TensorFlow / ours,
bytes shared between images, and the matrix's size budgets.

Every number is the sum of the image's unpacked layers, as the image history reports them, on
both of Docker's image stores (issue 43). Not `docker image inspect`'s `Size`: on the containerd
image store that counts the image's content blobs, i.e. the *compressed* layers of a pulled
image, on Docker 28 and 29.0-29.7 (moby#53398, moby#53426; a user's tf2.21-cpu read 0.57 GB
there against 1.79 GB on overlay2, and `make size-check` passed on it).

What remains different between the stores, measured (docs/using/engines.md): overlay2 counts the
bytes of the files in a layer (moby's graphdriver directory.Size), the containerd snapshotter
the disk blocks they take (containerd's fs.DiskUsage, st_blocks), so every layer reads a few
percent larger there, most in layers of many small files: debian:trixie-slim 78.8 MB vs 87.8 MB.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine import docker_client
from ..errors import UsageError
from ..matrix.schema import Matrix, Variant

PARTS = ("base", "python", "cuda", "framework", "kerasenv")
TREE_TO_ROOT = "tree"  # a classic builder's "COPY dir:... in /", sorted out by measure()
TREE_BIG_BYTES = 200_000_000  # a venv or a CUDA part; the user, pins and scripts are kilobytes
SHARED_MIN_BYTES = 100e6  # pairs of images sharing less are not worth a line


@dataclass
class ImageSize:
    ref: str
    total: int
    parts: dict[str, int] = field(default_factory=dict)
    layers: list[tuple[str, int]] = field(default_factory=list)  # (diff id, bytes)

    def over_budget(self, v: Variant) -> bool:
        return v.size_budget_mb is not None and self.total > v.size_budget_mb * 1_000_000


BUILDKIT_MARK = "# buildkit"  # BuildKit ends every history entry that made a layer with it


def _part(created_by: str, below_base: bool) -> str:
    if below_base:
        return "base"
    if created_by.rstrip().endswith(BUILDKIT_MARK) and created_by.startswith(("COPY ", "ADD ")):
        return _buildkit_copy_part(created_by)
    # The history reads "COPY dir:<sum> in <dest>" or, with --chown, "COPY --chown=1000:0dir:<sum>
    # in <dest>": match the source kind and the destination, not the flags.
    copies_dir = "COPY " in created_by and "dir:" in created_by
    if copies_dir and created_by.rstrip().endswith(" in /"):
        # Since issue 52 every COPY into the runtime is a tree to /, and the classic builder's
        # history names no source: measure() tells them apart by size and place.
        return TREE_TO_ROOT
    if copies_dir and " in /opt/venv/lib/" in created_by:
        # COPY --from=cuda-libs: the four parts of the CUDA wheels, each a tree from /
        # (build/split-cuda-layers.sh), or, in images built before the split, one layer into
        # /opt/venv/lib/pythonX.Y/site-packages/
        return "cuda"
    if copies_dir and created_by.rstrip().endswith("in /opt/venv"):
        return "framework"  # COPY --from=builder /opt/venv: TensorFlow, JAX or PyTorch, Keras, the rest
    # Debian's packages: Python and Graphviz in the base stage (and PyTorch's compiler), installed
    # through build/debian-updates.sh since issue 31; a plain apt-get install in older images.
    if "apt-get install" in created_by or "build/debian-updates.sh" in created_by:
        return "python"
    return "kerasenv"


def _buildkit_copy_part(created_by: str) -> str:
    """BuildKit (Docker >= 23's `docker build`, buildx) writes a COPY as its sources and
    destination, "COPY /opt/venv /opt/venv # buildkit", where the classic builder wrote
    "COPY dir:<sum> in /opt/venv" (recorded from Docker 28.5.2's BuildKit:
    tests/fixtures/engines/docker-28.5.2-containerd/image-buildkit-probe.json)."""
    words = [w for w in created_by.rstrip()[: -len(BUILDKIT_MARK)].split()[1:] if not w.startswith("--")]
    dest = words[-1] if words else ""
    sources = " ".join(words[:-1])
    # Since issue 52 every COPY into the runtime is a tree from / (images/templates/debian.Dockerfile.in):
    # told apart by their sources.
    if dest == "/" and "/venv-tree/" in sources:
        return "framework"
    if dest == "/" and ("/cuda-parts/" in sources or "/cuda-extras/" in sources):
        return "cuda"
    if dest == "/" and any(name in sources for name in ("/tree/", "/out/", "/out-cuda/", "/kerasenv-pins/")):
        return "kerasenv"
    if dest == "/" or "/opt/venv/lib/" in dest:
        return "cuda"  # COPY --from=cuda-libs /opt/cuda-parts/N/ /, or the pre-split site-packages copy
    if dest.rstrip("/") == "/opt/venv":
        return "framework"
    return "kerasenv"


def measure(client, ref: str, base_ref: str | None) -> ImageSize:
    image = client.images.get(ref)
    diff_ids = image.attrs["RootFS"]["Layers"]
    base_layers = 0
    if base_ref:
        try:
            base_diff = client.images.get(base_ref).attrs["RootFS"]["Layers"]
            if diff_ids[: len(base_diff)] == base_diff:
                base_layers = len(base_diff)
        except Exception:  # base not present locally: attribute nothing to it
            base_layers = 0
    history = layer_history(image.history(), len(diff_ids))
    result = ImageSize(ref, sum(int(h.get("Size", 0)) for h in history))
    parts = [_part(entry.get("CreatedBy", ""), index < base_layers) for index, entry in enumerate(history)]
    sizes = [int(entry.get("Size", 0)) for entry in history]
    trees = [i for i, part in enumerate(parts) if part == TREE_TO_ROOT]
    big = [i for i in trees if sizes[i] >= TREE_BIG_BYTES]
    for i in trees:
        # The classic builder's trees to /: the venv is the last big one (it comes after the four
        # CUDA parts), the other big ones are CUDA's, the small ones ours (user, pins, scripts).
        parts[i] = "framework" if big and i == big[-1] else "cuda" if i in big else "kerasenv"
    for diff_id, size, part in zip(diff_ids, sizes, parts):
        result.parts[part] = result.parts.get(part, 0) + size
        result.layers.append((diff_id, size))
    return result


# The Dockerfile instructions that never make a filesystem layer: BuildKit writes them bare in
# the history ("LABEL a=b", "ARG X=1", "SHELL [/bin/bash -c]"), the classic builder after "#(nop)".
_METADATA_STEPS = ("ARG", "ENV", "LABEL", "SHELL", "CMD", "ENTRYPOINT", "USER", "EXPOSE", "VOLUME",
                   "STOPSIGNAL", "HEALTHCHECK", "ONBUILD", "MAINTAINER")


def _is_empty_layer(entry: dict) -> bool:
    # The Engine API's history has no EmptyLayer flag (the image config has): a metadata step has
    # size 0 and reads "... #(nop) LABEL ..." (classic builder) or "LABEL ..." (BuildKit).
    # COPY/ADD are layers even when #(nop) and empty.
    if int(entry.get("Size", 0)) != 0:
        return False
    created = entry.get("CreatedBy", "")
    if "#(nop)" in created:
        return " COPY " not in created and " ADD " not in created
    return created.split(" ", 1)[0] in _METADATA_STEPS


def layer_history(history: list[dict], layers: int) -> list[dict]:
    """The history entries that made the image's `layers` filesystem layers, oldest first (the
    order of RootFS.Layers). Where the steps are not told apart by their text alone (a size-0
    step of another builder), the remaining size-0 entries are dropped, newest first, until the
    count matches the layers: a layer of size 0 adds nothing to any total either way."""
    made = [h for h in reversed(history) if not _is_empty_layer(h)]
    for index in range(len(made) - 1, -1, -1):
        if len(made) <= layers:
            break
        if int(made[index].get("Size", 0)) == 0:
            del made[index]
    return made[:layers]


def unpacked_bytes(image) -> int:
    """An image's size unpacked, the same on overlay2 and the containerd store (see the module's
    docstring): the sum of its layers' sizes from the history, never `attrs["Size"]`."""
    return sum(int(h.get("Size", 0)) for h in layer_history(image.history(), len(image.attrs["RootFS"]["Layers"])))


def shared_bytes(a: ImageSize, b: ImageSize) -> int:
    """Bytes of layers stored once for both images: their common run of layers from the base up.
    Docker keys a stored layer by its chain (its diff id and every layer below it), so an
    identical layer on two different parents is stored twice (measured, backends.md): counting
    equal diff ids anywhere said 4.58 GB shared for two images whose Debian step differed, of
    which only the 79 MB base was stored once."""
    shared = 0
    for (diff_a, size), (diff_b, _) in zip(a.layers, b.layers):
        if diff_a != diff_b:
            break
        shared += size
    return shared


def built_variants(client, matrix: Matrix, ids: list[str]) -> list[Variant]:
    """The variants named by `ids`, or, without ids, every variant built locally."""
    if ids:
        return matrix.select(ids)
    return [v for v in matrix.variants if docker_client.has_image(client, v.image_ref)]


def measure_variants(client, variants: list[Variant]) -> dict[str, ImageSize]:
    """Each variant's image, by id; a variant not built here is a UsageError."""
    measured = {}
    for v in variants:
        if not docker_client.has_image(client, v.image_ref):
            raise UsageError(f"{v.image_ref} is not built here: run `make build VARIANT={v.id}`")
        measured[v.id] = measure(client, v.image_ref, v.base_image)
    return measured


def shared_pairs(measured: dict[str, ImageSize], min_bytes: float = SHARED_MIN_BYTES) -> list[tuple[str, str, int]]:
    """(id, id, bytes) for each pair of images that stores more than `min_bytes` once."""
    ids = list(measured)
    pairs = [(a, b, shared_bytes(measured[a], measured[b])) for i, a in enumerate(ids) for b in ids[i + 1:]]
    return [pair for pair in pairs if pair[2] > min_bytes]


def over_budget(variants: list[Variant], measured: dict[str, ImageSize]) -> list[Variant]:
    return [v for v in variants if measured[v.id].over_budget(v)]

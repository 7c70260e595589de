"""Image sizes: total, layers attributed to base / Python / CUDA / TensorFlow / ours,
bytes shared between images, and the matrix's size budgets."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine import docker_client
from ..errors import UsageError
from ..matrix.schema import Matrix, Variant

PARTS = ("base", "python", "cuda", "framework", "kerasenv")
SHARED_MIN_BYTES = 100e6  # pairs of images sharing less are not worth a line


@dataclass
class ImageSize:
    ref: str
    total: int
    parts: dict[str, int] = field(default_factory=dict)
    layers: list[tuple[str, int]] = field(default_factory=list)  # (diff id, bytes)

    def over_budget(self, v: Variant) -> bool:
        return v.size_budget_mb is not None and self.total > v.size_budget_mb * 1_000_000


def _part(created_by: str, below_base: bool) -> str:
    if below_base:
        return "base"
    # The history reads "COPY dir:<sum> in <dest>" or, with --chown, "COPY --chown=1000:0dir:<sum>
    # in <dest>": match the source kind and the destination, not the flags.
    copies_dir = "COPY " in created_by and "dir:" in created_by
    if copies_dir and (" in /opt/venv/lib/" in created_by or created_by.rstrip().endswith(" in /")):
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
    # History is newest first; entries that made a filesystem layer map onto RootFS in order.
    history = [h for h in reversed(image.history()) if not _is_empty_layer(h)]
    result = ImageSize(ref, image.attrs["Size"])
    for index, (diff_id, entry) in enumerate(zip(diff_ids, history)):
        size = int(entry.get("Size", 0))
        part = _part(entry.get("CreatedBy", ""), index < base_layers)
        result.parts[part] = result.parts.get(part, 0) + size
        result.layers.append((diff_id, size))
    return result


def _is_empty_layer(entry: dict) -> bool:
    # The classic builder marks metadata-only steps with "#(nop)" and size 0, except COPY/ADD.
    created = entry.get("CreatedBy", "")
    return entry.get("Size", 0) == 0 and "#(nop)" in created and " COPY " not in created and " ADD " not in created


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

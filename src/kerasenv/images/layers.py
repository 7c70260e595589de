"""Which layers two builds of an image share, and what a user holding one fetches for the other.

Issue 52: a security rebuild should change only the runtime's last layer. Two clients count
differently (both measured here, `kerasenv bench-update` has the figures):
- Docker's classic image store (overlay2) keys a layer by its chain, the layer and every layer
  below it (moby `distribution/xfer/download.go`): from the first layer that differs upward,
  everything is fetched again, byte-identical or not.
- containerd-based clients (containerd, Kubernetes nodes, nerdctl, Podman, Docker's containerd
  image store) fetch each blob once: only layers whose digest the client does not hold.

Sizes here are the layers' unpacked bytes (the image history's); the bytes on the wire are
`kerasenv bench-update`'s to measure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .sizes import layer_history


@dataclass(frozen=True)
class Layer:
    diff_id: str  # sha256 of the uncompressed tar: the same bytes, the same id
    size: int
    created_by: str


def of_image(client, ref: str) -> list[Layer]:
    from docker.errors import ImageNotFound

    try:
        image = client.images.get(ref)
    except ImageNotFound:
        raise UsageError(f"{ref} is not here: build it (`kerasenv build ID`, `--tag` for a second build) "
                         "or pull it first") from None
    ids = image.attrs["RootFS"]["Layers"]
    history = layer_history(image.history(), len(ids))
    if len(history) != len(ids):  # an imported image whose history lost entries: sizes unknown
        history = history + [{}] * (len(ids) - len(history))
    return [Layer(diff_id, int(h.get("Size", 0)), " ".join(str(h.get("CreatedBy", "")).split()))
            for diff_id, h in zip(ids, history)]


@dataclass(frozen=True)
class Comparison:
    old: list[Layer]
    new: list[Layer]

    @property
    def first_changed(self) -> int | None:
        """The index of the lowest layer of `new` that differs from `old`'s at that place."""
        for index, layer in enumerate(self.new):
            if index >= len(self.old) or self.old[index].diff_id != layer.diff_id:
                return index
        return None

    @property
    def changed(self) -> list[int]:
        """The layers of `new` whose bytes `old` does not have at all (a blob-matching client's fetch)."""
        held = {layer.diff_id for layer in self.old}
        return [i for i, layer in enumerate(self.new) if layer.diff_id not in held]

    @property
    def total(self) -> int:
        return sum(layer.size for layer in self.new)

    @property
    def by_blob(self) -> int:
        return sum(self.new[i].size for i in self.changed)

    @property
    def by_chain(self) -> int:
        first = self.first_changed
        return 0 if first is None else sum(layer.size for layer in self.new[first:])

    def only_last_changed(self, last: int = 1) -> bool:
        """Every layer but the last `last` is the same, in the same place."""
        first = self.first_changed
        return len(self.old) == len(self.new) and (first is None or first >= len(self.new) - last)


def compare(client, old_ref: str, new_ref: str) -> Comparison:
    return Comparison(of_image(client, old_ref), of_image(client, new_ref))


def _share(part: int, total: int) -> str:
    return f"{part / 1e6:.1f} MB of {total / 1e6:.1f} MB ({100 * part / total if total else 0:.1f} %)"


def report(c: Comparison, old_ref: str, new_ref: str) -> list[str]:
    held = {layer.diff_id for layer in c.old}
    lines = [f"{'#':>2}  {'same':<4}  {'MB':>9}  layer of {new_ref}"]
    for index, layer in enumerate(c.new):
        same = "yes" if index < len(c.old) and c.old[index].diff_id == layer.diff_id else \
            "elsewhere" if layer.diff_id in held else "no"
        lines.append(f"{index:>2}  {same:<4}  {layer.size / 1e6:>9.1f}  {layer.diff_id[7:19]}  {layer.created_by[:90]}")
    first = c.first_changed
    lines.append(f"{len(c.new) - len(c.changed)} of {len(c.new)} layers of {new_ref} are in {old_ref}; "
                 f"first changed layer: {'none' if first is None else first}")
    lines.append(f"a client holding {old_ref} fetches: containerd, Podman, Docker's containerd store "
                 f"{_share(c.by_blob, c.total)}; Docker's classic store (overlay2) {_share(c.by_chain, c.total)} "
                 "(unpacked sizes)")
    return lines

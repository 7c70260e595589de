"""`kerasenv size` without Docker: which images are measured, shared bytes, budgets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kerasenv.images import sizes
from kerasenv.errors import UsageError


def fake_client(built: set[str]):
    return SimpleNamespace(api=SimpleNamespace(images=lambda name=None: [{"RepoTags": [name]}] if name in built else []))


def test_without_ids_every_variant_built_here_is_measured_in_matrix_order(real_matrix):
    built = {"kerasenv:tf2.21-cpu", real_matrix.get(real_matrix.default_gpu).image_ref}
    chosen = sizes.built_variants(fake_client(built), real_matrix, [])
    assert [v.image_ref for v in chosen] == [v.image_ref for v in real_matrix.variants if v.image_ref in built]
    assert [v.id for v in sizes.built_variants(fake_client(set()), real_matrix, ["tf2.21-cpu"])] == ["tf2.21-cpu"]


def test_a_named_variant_that_is_not_built_is_a_usage_error_naming_the_fix(real_matrix):
    v = real_matrix.get("tf2.21-cpu")
    with pytest.raises(UsageError, match=r"kerasenv:tf2.21-cpu is not built here: run `make build VARIANT=tf2.21-cpu`"):
        sizes.measure_variants(fake_client(set()), [v])


def _image(ref: str, *layers: tuple[str, int]) -> sizes.ImageSize:
    return sizes.ImageSize(ref, sum(n for _, n in layers), layers=list(layers))


def test_only_pairs_sharing_more_than_100_mb_are_listed():
    measured = {"a": _image("a", ("base", 80_000_000), ("tf", 400_000_000)),
                "b": _image("b", ("base", 80_000_000), ("tf", 400_000_000), ("own", 1)),
                "c": _image("c", ("base", 80_000_000))}
    assert sizes.shared_pairs(measured) == [("a", "b", 480_000_000)]
    assert sizes.shared_pairs(measured, min_bytes=0) == [("a", "b", 480_000_000), ("a", "c", 80_000_000),
                                                        ("b", "c", 80_000_000)]


def test_an_identical_layer_on_another_parent_is_not_counted_as_shared():
    # Docker stores a layer per parent chain: the same CUDA layer above two different Debian
    # steps is stored twice (tf2.21-cuda12.9 and jax0.12-cuda12.9 built across an edit of
    # build/debian-updates.sh).
    a = _image("a", ("base", 80_000_000), ("debian-1", 100_000_000), ("cuda", 4_500_000_000))
    b = _image("b", ("base", 80_000_000), ("debian-2", 100_000_000), ("cuda", 4_500_000_000))
    assert sizes.shared_bytes(a, b) == 80_000_000
    c = _image("c", ("base", 80_000_000), ("debian-1", 100_000_000), ("cuda", 4_500_000_000), ("jax", 1))
    assert sizes.shared_bytes(a, c) == 4_680_000_000


def test_over_budget_lists_the_images_above_their_matrix_budget(real_matrix):
    budgeted = [v for v in real_matrix.variants if v.size_budget_mb][:2]
    assert len(budgeted) == 2
    big, small = budgeted
    measured = {big.id: sizes.ImageSize(big.image_ref, big.size_budget_mb * 1_000_000 + 1),
                small.id: sizes.ImageSize(small.image_ref, small.size_budget_mb * 1_000_000)}
    assert sizes.over_budget(budgeted, measured) == [big]


@pytest.mark.parametrize("created_by,part", [
    # a tree copied to / (since issue 52 every COPY into the runtime: the CUDA parts, the venv, the
    # user and the pins): the classic builder's history names no source, measure() sorts them out
    ("/bin/bash -o pipefail -c #(nop) COPY dir:c81e0a3f in / ", sizes.TREE_TO_ROOT),
    # an image built before the split: one layer into site-packages
    ("/bin/bash -o pipefail -c #(nop) COPY dir:a5a0 in /opt/venv/lib/python3.11/site-packages/ ", "cuda"),
    ("/bin/bash -o pipefail -c #(nop) COPY dir:e04 in /opt/venv ", "framework"),
    ("/bin/bash -o pipefail -c #(nop) COPY dir:3b5 in /opt/kerasenv/ ", "kerasenv"),
    ("/bin/bash -o pipefail -c #(nop) COPY file:e5 in /etc/pip.conf ", "kerasenv"),
    # Debian's Python and Graphviz, through build/debian-updates.sh (docker history of jax0.12-cuda12.9)
    ("|1 DEBIAN_UPDATES=trixie@2026-11-21T09:15:44Z trixie-updates@2026-12-03T02:15:27Z /bin/bash -o pipefail "
     "-c bash /tmp/build/debian-updates.sh \"$DEBIAN_UPDATES\" ca-certificates python3 graphviz && rm -rf /tmp/build", "python"),
    # the script's own COPY is not the install
    ("/bin/bash -o pipefail -c #(nop) COPY file:7a7d in /tmp/build/ ", "kerasenv"),
])
def test_each_layer_is_attributed_by_what_its_step_copied(created_by, part):
    assert sizes._part(created_by, below_base=False) == part


# --- issue 43: the same meaning on both of Docker's image stores ------------------------------
# Recorded from Docker 28.5.2 with the containerd image store (tests/fixtures/engines/README.md).
import json  # noqa: E402

from ...conftest import REPO  # noqa: E402

D28 = REPO / "tests" / "fixtures" / "engines" / "docker-28.5.2-containerd"


class RecordedImage:
    def __init__(self, name: str) -> None:
        recorded = json.loads((D28 / f"{name}.json").read_text())
        self.attrs, self._history = recorded["inspect"], recorded["history"]
        self.id = self.attrs["Id"]

    def history(self):
        return self._history


def recorded_client(**images: str):
    return SimpleNamespace(images=SimpleNamespace(get=lambda ref: RecordedImage(images[ref])))


def test_on_the_containerd_store_the_total_is_the_unpacked_layers_not_the_compressed_size():
    # The classic builder's tf2.21-cpu on Docker 28.5.2: inspect's Size is the compressed
    # content (0.57 GB, moby#53398); the layers unpacked add up to 1.86 GB, which is what
    # overlay2 calls 1.79 GB (files' bytes there, disk blocks here: the module's docstring).
    client = recorded_client(**{"kerasenv:tf2.21-cpu": "image-tf2.21-cpu-classic-builder",
                                "debian:trixie-slim": "image-debian-trixie-slim-loaded"})
    size = sizes.measure(client, "kerasenv:tf2.21-cpu", "debian:trixie-slim")
    assert client.images.get("kerasenv:tf2.21-cpu").attrs["Size"] == 574_551_101
    assert size.total == sum(size.parts.values()) == sum(n for _, n in size.layers) == 1_858_940_928
    assert size.parts["base"] == 87_781_376 and size.parts["python"] > 100e6
    assert 1.6e9 < size.parts["framework"] < 1.7e9 and "cuda" not in size.parts
    assert len(size.layers) == 9  # every layer of RootFS, none of the metadata steps
    assert sizes.unpacked_bytes(client.images.get("kerasenv:tf2.21-cpu")) == size.total


def test_an_image_built_by_buildkit_is_attributed_and_its_metadata_steps_are_no_layers():
    # Docker 28's `docker build` (BuildKit): "LABEL ..." and "ARG ..." with no "#(nop)" are not
    # layers; COPYs read "COPY <src> <dest> # buildkit" (a probe Dockerfile with kerasenv's steps).
    client = recorded_client(probe="image-buildkit-probe", base="image-debian-trixie-slim-loaded")
    size = sizes.measure(client, "probe", "base")
    assert len(size.layers) == 8 == len(client.images.get("probe").attrs["RootFS"]["Layers"])
    assert set(size.parts) == {"base", "python", "cuda", "framework", "kerasenv"}
    assert size.total == sum(size.parts.values()) == 87_891_968


def test_the_classic_builders_trees_to_root_are_told_apart_by_size_and_place():
    """Issue 52: the runtime's COPYs are trees to /, "COPY dir:<sum> in /" in the classic builder's
    history whatever they copy: the last big one is the venv (after the four CUDA parts), the other
    big ones CUDA's, the small ones ours (the image tree, the pins, the scripts)."""
    tree = "/bin/bash -o pipefail -c #(nop) COPY dir:{} in / "
    steps = [("", 80_000_000), (tree.format("s"), 5_000), ("|1 DEBIAN_POINT_RELEASE=trixie@x /bin/bash -o pipefail -c "
             "bash /tmp/build/debian-updates.sh --point-release \"$DEBIAN_POINT_RELEASE\" python3", 97_000_000),
             (tree.format("t"), 300_000)] + [(tree.format(f"c{i}"), 1_000_000_000 + i) for i in range(4)] + \
            [(tree.format("v"), 2_000_000_000), (tree.format("x"), 40_000), (tree.format("p"), 2_000),
             ('|2 DEBIAN_UPDATES=trixie@x /bin/bash -o pipefail -c bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES"', 13_800_000)]
    history = [{"CreatedBy": c, "Size": n} for c, n in reversed(steps)]  # newest first, as the API answers
    image = SimpleNamespace(attrs={"RootFS": {"Layers": [f"sha256:{i}" for i in range(len(steps))]}}, history=lambda: history)
    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: image))
    size = sizes.measure(client, "kerasenv:tf2.21-cuda12.9", None)
    assert size.parts["framework"] == 2_000_000_000
    assert size.parts["cuda"] == sum(1_000_000_000 + i for i in range(4))
    assert size.parts["kerasenv"] == 80_000_000 + 5_000 + 300_000 + 40_000 + 2_000  # no base given: the first too
    assert size.parts["python"] == 97_000_000 + 13_800_000
    assert sizes.TREE_TO_ROOT not in size.parts


@pytest.mark.parametrize("created_by,part", [
    ("COPY /opt/cuda-parts/1/ / # buildkit", "cuda"),
    ("COPY /opt/venv-tree/ / # buildkit", "framework"),
    ("COPY /opt/cuda-extras/tree/ / # buildkit", "cuda"),
    ("COPY /tree/ / # buildkit", "kerasenv"),
    ("COPY /opt/kerasenv-pins/ / # buildkit", "kerasenv"),
    ("COPY /out/ / # buildkit", "kerasenv"),
    ("COPY /out-cuda/ / # buildkit", "kerasenv"),
    ("COPY /opt/venv/lib/python3.13/site-packages/ /opt/venv/lib/python3.13/site-packages/ # buildkit", "cuda"),
    ("COPY /opt/venv /opt/venv # buildkit", "framework"),
    ("COPY --chown=1000:0 common/ /opt/kerasenv/ # buildkit", "kerasenv"),
    ("COPY /opt/kerasenv-pins/pip.conf /etc/pip.conf # buildkit", "kerasenv"),
    ('RUN |1 DEBIAN_UPDATES=trixie@x /bin/bash -o pipefail -c bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES" '
     "ca-certificates python3 graphviz && rm -rf /tmp/build # buildkit", "python"),
])
def test_buildkit_history_is_attributed_as_the_classic_builders(created_by, part):
    assert sizes._part(created_by, below_base=False) == part


def test_size_zero_steps_the_text_does_not_tell_apart_are_dropped_to_the_layer_count():
    history = [{"CreatedBy": "WORKDIR /workspace", "Size": 0}, {"CreatedBy": "RUN x # buildkit", "Size": 5},
               {"CreatedBy": "", "Size": 7}]  # newest first, as the API answers
    assert [h["Size"] for h in sizes.layer_history(history, 2)] == [7, 5]
    assert [h["Size"] for h in sizes.layer_history(history, 3)] == [7, 5, 0]

"""images/layers.py: which layers a rebuild shares with the image a user holds, and what each kind
of client fetches for it (issue 52). Docker's classic store keys a layer by its chain, so it fetches
every layer from the first that differs; containerd-based clients fetch the blobs they lack."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kerasenv.errors import UsageError
from kerasenv.images import layers
from kerasenv.images.layers import Comparison, Layer


def stack(*pairs: tuple[str, int]) -> list[Layer]:
    return [Layer(f"sha256:{name}", size, f"step {name}") for name, size in pairs]


BASE = [("base", 80), ("python", 100), ("tree", 1), ("venv", 1600), ("pins", 1)]


def test_a_rebuild_that_changes_only_the_last_layer_costs_that_layer_on_either_store():
    c = Comparison(stack(*BASE, ("fixes-n", 14)), stack(*BASE, ("fixes-n1", 12)))
    assert c.first_changed == 5 and c.changed == [5]
    assert c.by_chain == c.by_blob == 12 and c.total == 1794
    assert c.only_last_changed(1)


def test_a_changed_second_layer_costs_the_classic_store_everything_above_it_and_containerd_one_layer():
    """The layout before issue 52: the security state in python-base. The layers above it are
    byte-identical, yet the classic store fetches them again (their chain changed)."""
    old = stack(("base", 80), ("python-n", 100), ("tree", 1), ("venv", 1600), ("pins", 1))
    new = stack(("base", 80), ("python-n1", 101), ("tree", 1), ("venv", 1600), ("pins", 1))
    c = Comparison(old, new)
    assert c.first_changed == 1 and c.changed == [1]
    assert c.by_chain == 101 + 1 + 1600 + 1 and c.by_blob == 101
    assert not c.only_last_changed(1) and not c.only_last_changed(3) and c.only_last_changed(4)


def test_a_layer_the_client_holds_elsewhere_is_not_fetched_by_blob_but_is_by_chain():
    old = stack(("base", 80), ("a", 5), ("b", 7))
    new = stack(("base", 80), ("b", 7), ("a", 5))
    c = Comparison(old, new)
    assert c.changed == [] and c.by_blob == 0
    assert c.first_changed == 1 and c.by_chain == 12


def test_identical_images_share_everything_and_a_different_layer_count_is_never_only_the_last():
    c = Comparison(stack(*BASE), stack(*BASE))
    assert c.first_changed is None and c.by_chain == c.by_blob == 0 and c.only_last_changed(1)
    longer = Comparison(stack(*BASE), stack(*BASE, ("extra", 3)))
    assert longer.first_changed == 5 and not longer.only_last_changed(1)


def test_the_report_names_each_layer_and_both_shares():
    c = Comparison(stack(*BASE, ("fixes-n", 14)), stack(*BASE, ("fixes-n1", 12)))
    lines = layers.report(c, "kerasenv:x", "kerasenv:x-again")
    assert lines[-2] == "5 of 6 layers of kerasenv:x-again are in kerasenv:x; first changed layer: 5"
    assert "containerd, Podman, Docker's containerd store 0.0 MB of 0.0 MB (0.7 %)" in lines[-1]
    assert "Docker's classic store (overlay2) 0.0 MB of 0.0 MB (0.7 %)" in lines[-1]
    assert [line.split()[1] for line in lines[1:-2]] == ["yes"] * 5 + ["no"]


def test_an_image_that_is_not_here_is_a_usage_error_naming_the_fix():
    from docker.errors import ImageNotFound

    def missing(ref):
        raise ImageNotFound(ref)

    client = SimpleNamespace(images=SimpleNamespace(get=missing))
    with pytest.raises(UsageError, match=r"^kerasenv:gone is not here: build it \(`kerasenv build ID`"):
        layers.of_image(client, "kerasenv:gone")


def test_layers_come_from_the_rootfs_with_the_history_s_sizes_and_steps():
    history = [{"CreatedBy": "WORKDIR /workspace", "Size": 0},  # newest first, no layer (classic)
               {"CreatedBy": "RUN fixes", "Size": 14}, {"CreatedBy": "COPY dir:x in / ", "Size": 1600},
               {"CreatedBy": "", "Size": 80}]
    image = SimpleNamespace(attrs={"RootFS": {"Layers": ["sha256:b", "sha256:v", "sha256:f"]}}, history=lambda: history)
    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: image))
    got = layers.of_image(client, "kerasenv:x")
    assert [(l.diff_id, l.size, l.created_by) for l in got] == [
        ("sha256:b", 80, ""), ("sha256:v", 1600, "COPY dir:x in /"), ("sha256:f", 14, "RUN fixes")]

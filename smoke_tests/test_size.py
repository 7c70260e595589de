"""The image fits the size budget its matrix entry sets (uncompressed, as `kerasenv size`); an
arm64 image its own ([variant.arm64] size_budget_mb) where the matrix sets one."""

from __future__ import annotations

from kerasenv.images.sizes import unpacked_bytes

from . import platforms

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's base image sets the size, no budget of ours


def test_image_is_within_its_size_budget(image, target):
    budget_mb = platforms.size_budget_mb(target.variant, target.arch)
    assert budget_mb, f"{target.variant.id} has no size_budget_mb in images/matrix.toml"
    # The unpacked layers, as `kerasenv size` counts them: attrs["Size"] is the compressed content on
    # Docker's containerd image store (moby#53398), where this passed on a number that meant something else.
    size_mb = unpacked_bytes(image) / 1e6
    assert size_mb <= budget_mb, f"{size_mb:.0f} MB > budget {budget_mb} MB"

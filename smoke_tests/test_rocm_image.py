"""ROCm images (when built: AMD's base must be pullable) are ROCm builds of TensorFlow."""

from __future__ import annotations

FAMILIES = {"rocm"}


def test_tensorflow_is_a_rocm_build(inventory):
    assert inventory["build_info"]["is_rocm_build"] is True
    assert inventory["build_info"].get("is_cuda_build") is False


def test_default_user_is_in_the_video_group(host):
    assert "video" in host.user("keras").groups

"""CPU images carry no CUDA at all."""

from __future__ import annotations

FAMILIES = {"cpu"}


def test_no_cuda_libraries_anywhere(box):
    code, out = box.exec(["find", "/", "-xdev", "(", "-name", "libcudnn*", "-o", "-name", "libcublas*",
                          "-o", "-name", "libcudart*", "-o", "-name", "libnccl*", ")", "-print"], user="0")
    assert code == 0 and out.strip() == "", out


def test_no_nvidia_wheels(inventory):
    assert [d for d in inventory["dists"] if d.lower().startswith("nvidia")] == []


def test_the_framework_is_not_a_cuda_build(inventory, target):
    framework = inventory["framework"]
    assert framework["name"] == target.variant.backend
    assert framework["build"]["is_cuda_build"] is False, framework
    assert not any(k.startswith("NVIDIA_") for k in inventory["env"])

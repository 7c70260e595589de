"""Why a container has no GPU (kerasenv_image.smoke.environment)."""

from __future__ import annotations

from kerasenv_image.smoke import environment


def test_a_container_given_only_dev_nvidia1_is_not_called_gpu_less(monkeypatch):
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(environment.glob, "glob", lambda pattern: ["/dev/nvidia1"])
    reason, _ = environment.no_gpu_reason({"present": False})
    assert "started without a GPU" not in reason and "cannot use it" in reason


def test_a_container_without_any_gpu_node_is_told_to_use_gpus_all(monkeypatch):
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(environment.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(environment.os.path, "exists", lambda path: False)
    reason, fix = environment.no_gpu_reason({"present": False})
    assert "started without a GPU" in reason and "--gpus all" in fix

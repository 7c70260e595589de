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


def test_a_gpu_without_a_memory_figure_is_said_not_reported_not_zero(monkeypatch):
    """CONSTRUCTED: the GB10's `--query-gpu=...,memory.total --format=csv,noheader,nounits` row was
    not seen; "[N/A]" is the driver's placeholder for a value it cannot give."""
    from types import SimpleNamespace

    out = "0, NVIDIA GB10, 580.126.09, [N/A]\n"
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(environment.subprocess, "run",
                        lambda *a, **k: SimpleNamespace(returncode=0, stdout=out, stderr=""))
    smi = environment.nvidia_smi()
    (gpu,) = smi["gpus"]
    assert gpu["memory_total_mb"] is None
    assert gpu["memory_note"] == "unified memory: not reported by the driver (memory.total reads '[N/A]')"
    monkeypatch.setattr(environment.subprocess, "run", lambda *a, **k: SimpleNamespace(
        returncode=0, stdout="0, NVIDIA H200, 580.159.04, 143771\n", stderr=""))
    assert "memory_note" not in environment.nvidia_smi()["gpus"][0]

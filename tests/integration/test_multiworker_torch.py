"""Keras's DDP guide under torchrun across two containers of the PyTorch image, on the CPU (gloo):
a Keras model, torch DistributedDataParallel, a custom loop (issue 37: Keras 3.15's fit() has no
multi-process path on PyTorch). Run in the PyTorch image's test lane (lane_image)."""

from __future__ import annotations

import json

import pytest

from .conftest import kerasenv, multiworker_left

TORCH = "torch2.15-cuda13.2"


@pytest.mark.lane_image("torch2.15-cuda13.2")
def test_keras_ddp_trains_across_two_containers_under_torchrun(docker, tmp_path):
    proc = kerasenv("multiworker", TORCH, "--workers", "2", "--runs-dir", str(tmp_path / "runs"),
                    "--", "--epochs", "2", timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch DDP under torchrun" in proc.stderr
    line = next(x for x in reversed(proc.stderr.splitlines()) if x.startswith("{"))
    result = json.loads(line)
    assert (result["status"], result["processes"], result["backend"]) == ("ok", 2, "gloo")
    assert result["replicas_agree"] and result["learned"], result
    assert multiworker_left(docker, TORCH) == []

"""GPU visibility (marker gpu): run with --gpu on a GPU host; there a missing GPU FAILS."""

from __future__ import annotations

import pytest

from kerasenv.host import gpu_choice

from .conftest import run_once

FAMILIES = {"cuda", "rocm"}
pytestmark = pytest.mark.gpu


def gpus_for(docker, target) -> dict:
    """`--gpus all` as kerasenv sends it on this host's engine (the runtime hook, CDI, ROCm nodes)."""
    return dict(gpu_choice.Resolver(docker)(target.variant, "all").kwargs)


def test_nvidia_smi_inside_lists_the_gpus(docker, target):
    if target.variant.family != "cuda":
        cmd = ["bash", "-c", "rocm-smi --showproductname"]
    else:
        cmd = ["nvidia-smi", "-L"]
    code, out, err = run_once(docker, target.ref, cmd, **gpus_for(docker, target))
    assert code == 0, err[-2000:] or out[-2000:]
    assert ("GPU 0:" in out) if target.variant.family == "cuda" else out.strip()


# How many GPUs the backend's framework sees, printed as the last line.
COUNT_GPUS = {
    "tensorflow": "import tensorflow as tf; g = tf.config.list_physical_devices('GPU'); print(len(g)); assert g",
    "jax": "import jax; g = jax.devices('gpu'); print(len(g)); assert g",
    "torch": "import torch; n = torch.cuda.device_count(); print(n); assert n and torch.cuda.is_available()",
}


def test_the_framework_sees_a_gpu(docker, target):
    python = "python3" if target.variant.family == "rocm" else "python"
    code, out, err = run_once(
        docker, target.ref, [python, "-c", COUNT_GPUS[target.variant.backend]],
        **gpus_for(docker, target))
    assert code == 0, err[-3000:]
    assert int(out.strip().splitlines()[-1]) >= 1

"""GPU utilisation and memory during a benchmark: `nvidia-smi --query-gpu ... -lms N`
sampling in the background, and the mean over a steady-state window.

One implementation: the code is the in-image package's
images/common/kerasenv_image/gpu_sampler.py (also the images' GpuMonitor callback's
sampler), loaded here from the repository by path, so `kerasenv bench` on the host and
the callback inside a container parse and average nvidia-smi the same way. This module
*is* that one: `from kerasenv import gpu_sampler` gives the loaded module itself
(Sample, Parsed, QUERY_FIELDS, DEFAULT_INTERVAL_MS, parse_*, steady_state,
NvidiaSmiSampler, ...).
"""

from __future__ import annotations

import importlib.util
import sys

from ..matrix.schema import IN_IMAGE_DIR, REPO_ROOT

IN_IMAGE_PATH = REPO_ROOT / "images" / IN_IMAGE_DIR / "kerasenv_image" / "gpu_sampler.py"


def _load():
    spec = importlib.util.spec_from_file_location(__name__, IN_IMAGE_PATH)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the in-image GPU sampler {IN_IMAGE_PATH}")
    module = importlib.util.module_from_spec(spec)
    module.IN_IMAGE_PATH = IN_IMAGE_PATH
    # Registered under this module's name before it runs (dataclasses look their module
    # up there), and left there: the import statement hands out sys.modules[__name__].
    sys.modules[__name__] = module
    spec.loader.exec_module(module)
    return module


_load()

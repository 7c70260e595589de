"""Which GPUs are Blackwell (compute capability 10.x-12.x), for every tool that must know.

TF's XLA takes its PTX version from the CUDA TF was built with (8.5 for TF 2.21), while
LLVM needs PTX 8.6 for sm_100 and 8.7 for sm_120, and aborts the whole process there
("LLVM ERROR: PTX version 8.5 does not support target 'sm_120'",
tensorflow/tensorflow#111958). So the smoke training turns XLA off on these GPUs
(backends.tensorflow), the bench skips its XLA rows (bench.capabilities), and
`kerasenv doctor` on the host warns (src/kerasenv/host/blackwell.py, which imports this
module): one line drawn in one place.
"""

from __future__ import annotations

BLACKWELL_MAJORS = (10, 11, 12)  # sm_100/sm_101/sm_103, sm_110, sm_120/sm_121


def is_blackwell(compute_capability: str) -> bool:
    """'12.0' -> True, '9.0' -> False."""
    return int(str(compute_capability).split(".")[0]) in BLACKWELL_MAJORS

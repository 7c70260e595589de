"""What `kerasenv bench` on the host and the bench in the container agree on: the choices
of the command line, the result line and the exit codes (the host imports this module)."""

from __future__ import annotations

# The bench exits as the smoke does for the same outcomes (0 ok, 2 bad usage, 3 no GPU).
from ..smoke.errors import EXIT_NO_GPU, EXIT_OK, EXIT_USAGE  # noqa: F401 - the bench's exit codes

RESULT_PREFIX = "KERASENV_BENCH_RESULT "  # the one stdout line that carries the results
SCHEMA = 1  # of the container's result document
MODELS = ("conv", "mlp")
JIT_CHOICES = ("off", "on")
PRECISIONS = ("off", "float16", "bfloat16")

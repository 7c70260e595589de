"""Stand-ins for the frameworks' error classes and the smoke's arguments (no framework on the host)."""

from __future__ import annotations

import types


def args(**overrides) -> types.SimpleNamespace:
    values = {"memory_limit": 0, "no_memory_growth": False, "logical_cpus": 0, "visible_gpu_indexes": [],
              "visible_gpus": "", "jit_compile": "auto"}
    values.update(overrides)
    return types.SimpleNamespace(**values)


def no_log():
    return None

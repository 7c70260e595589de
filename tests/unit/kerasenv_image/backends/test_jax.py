"""The JAX backend's parts that run without JAX: the environment it sets, versions, errors."""

from __future__ import annotations

import types

import pytest

from kerasenv_image.backends import jax as jax_backend
from kerasenv_image.smoke import errors

from .fakes import args

SMI = {"present": True, "gpus": [{"index": "0", "memory_total_mb": 81920}]}


def test_memory_grows_on_demand_unless_the_user_chose():
    environ: dict = {}
    settings = jax_backend.prepare(args(), SMI, environ)
    assert environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert settings["xla_python_client_preallocate"] == "false"
    mine = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}
    jax_backend.prepare(args(), SMI, mine)
    assert mine["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    kept: dict = {}
    jax_backend.prepare(args(no_memory_growth=True), SMI, kept)
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in kept


def test_a_memory_limit_becomes_jaxs_memory_fraction_of_the_smallest_gpu():
    environ: dict = {}
    jax_backend.prepare(args(memory_limit=20480), SMI, environ)
    assert environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.2500"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in environ  # the fraction is allocated up front: a limit
    unknown: dict = {}
    settings = jax_backend.prepare(args(memory_limit=1024), {"present": False}, unknown)
    assert "not applied" in settings["memory_limit_note"] and "XLA_PYTHON_CLIENT_MEM_FRACTION" not in unknown


def test_a_memory_limit_on_unified_memory_says_why_it_is_not_applied():
    """GB10 (smoke.environment's reading: no memory.total, a note): no GPU total to take a
    fraction of; the fraction kerasenv run set (XLA_PYTHON_CLIENT_MEM_FRACTION=0.5) stays."""
    smi = {"present": True, "gpus": [{"index": "0", "name": "NVIDIA GB10", "memory_total_mb": None,
                                      "memory_note": "unified memory: not reported by the driver (...)"}]}
    environ = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}
    settings = jax_backend.prepare(args(memory_limit=8192), smi, environ)
    assert settings["memory_limit_note"].startswith("--memory-limit not applied: unified memory: not reported")
    assert environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"


def test_logical_cpus_are_host_devices_and_the_images_xla_flags_stay():
    environ = {"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/cuda --xla_force_host_platform_device_count=8"}
    jax_backend.prepare(args(logical_cpus=2), SMI, environ)
    assert environ["XLA_FLAGS"] == "--xla_gpu_cuda_data_dir=/cuda --xla_force_host_platform_device_count=2"
    untouched = {"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/cuda"}
    jax_backend.prepare(args(logical_cpus=1), SMI, untouched)
    assert untouched["XLA_FLAGS"] == "--xla_gpu_cuda_data_dir=/cuda"


@pytest.mark.parametrize("number, shown", [(12090, "12.9"), (13020, "13.2"), (0, None), (None, None)])
def test_cuda_build_numbers_are_shown_as_versions(number, shown):
    assert jax_backend._cuda_version(number) == shown


def test_cudnn_build_numbers_are_shown_as_versions():
    assert jax_backend._cudnn_version(92400) == "9.24.0"
    assert jax_backend._cudnn_version(None) is None


def test_xla_stays_on_for_blackwell_on_jax():
    assert jax_backend.jit_compile("auto", None, [{"name": "RTX 5090", "compute_capability": "12.0"}]) == \
        ("auto", "auto", None)
    assert jax_backend.jit_compile("off", None, [])[:2] == (False, "off")


class JaxRuntimeError(RuntimeError):
    pass


FAKE_JAX = types.SimpleNamespace(errors=types.SimpleNamespace(JaxRuntimeError=JaxRuntimeError))


def test_xla_runtime_errors_map_onto_the_smokes_kinds():
    oom = jax_backend.classify_error(FAKE_JAX, JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating"),
                                     lambda: None, "/r")
    assert (oom.exit_code, oom.kind) == (errors.EXIT_OOM, "oom")
    ptx = jax_backend.classify_error(FAKE_JAX, JaxRuntimeError("INTERNAL: CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
                                     lambda: None, "/r")
    assert (ptx.exit_code, ptx.kind) == (errors.EXIT_GPU_RUNTIME, "ptx-jit") and ptx.message.startswith("JAX ")
    other = jax_backend.classify_error(FAKE_JAX, JaxRuntimeError("INVALID_ARGUMENT: shapes"), lambda: None, "/r")
    assert (other.exit_code, other.kind) == (errors.EXIT_TF_RUNTIME, "jax-runtime")
    assert jax_backend.classify_error(FAKE_JAX, ValueError("x"), lambda: None, "/r") is None


def test_tf_config_is_refused_naming_jaxs_own_multi_host_api():
    reason = jax_backend.multi_worker_supported()
    assert "TensorFlow" in reason and "keras.distribution.initialize" in reason

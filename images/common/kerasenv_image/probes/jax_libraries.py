"""JAX's own GPU-library check, run inside a CUDA image; no GPU is needed.

How jax-cuda12-plugin (0.10.x) finds the CUDA libraries, read from
`jax_plugins/xla_cuda12/__init__.py`: `initialize()` first calls `_load_nvidia_libraries()`,
which loads each library **by path** from the pip wheel's directory
(`nvidia/<module>/lib/<soname>`, `nvidia/cu13/lib` for CUDA 13) and silently ignores a
failure; then it checks the versions (cudart, cuDNN, cuFFT, cuBLAS, cuSPARSE, cuSOLVER,
CUPTI against the ones JAX was built with) and counts the GPUs (cuInit: error 303 without
a driver, which makes JAX fall back to the CPU); then it registers the PJRT plugin
`xla_cuda_plugin.so`, whose XLA loads the rest by soname (dlopen), finding the copies
already loaded or, failing that, going through the loader's search (ld.so.conf).

This probe does the same: the plugin's own `_load_nvidia_libraries()`, then each library
by soname (resolving to the copy already mapped, or searching as XLA does), each file
read from /proc/self/maps; the plugin's version checks that need no GPU; `import jax;
jax.devices()` with the plugin's error text (the CPU-fallback evidence); and ptxas, the one
XLA uses, compiling a kernel for the lowest target and sm_100a / sm_120a.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys

from . import loading, ptxas

VERSION_CHECKS = ("cuda_runtime", "cudnn", "cufft", "cublas", "cusparse", "cusolver", "cupti")


def expected(cuda_major: str, cudnn_major: str = "9") -> dict[str, list[str]]:
    groups = {k: list(v) for k, v in loading.LIBRARIES.get(cuda_major, loading.LIBRARIES["12"]).items()}
    groups["cudnn"] = [f"libcudnn.so.{cudnn_major}", *loading.CUDNN_SUBLIBRARIES.get(cudnn_major, ())]
    return groups


def plugin() -> tuple[str | None, object | None, str | None]:
    """(CUDA major, the plugin's jax_plugins module, the import error) for the installed plugin."""
    for major in ("13", "12"):
        try:
            importlib.import_module(f"jax_cuda{major}_plugin")
        except ImportError:
            continue
        try:
            return major, importlib.import_module(f"jax_plugins.xla_cuda{major}"), None
        except Exception as exc:  # noqa: BLE001 - the plugin's own failure is the finding
            return major, None, f"{type(exc).__name__}: {exc}"
    return None, None, "no jax-cuda12/13 plugin installed"


def versions(major: str) -> dict:
    """The plugin's version checks that need no GPU: {name: {version, build} | {error}}."""
    out: dict = {}
    try:
        v = importlib.import_module(f"jax_cuda{major}_plugin._versions")
    except ImportError as exc:
        return {"error": str(exc)}
    for name in VERSION_CHECKS:
        try:
            out[name] = {"version": getattr(v, f"{name}_get_version")(),
                         "build": getattr(v, f"{name}_build_version")()}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def plugin_error(log: str) -> str | None:
    """The plugin's last error line from JAX's log ('... cuInit(0) failed: Unknown CUDA error
    303 ...' without a driver)."""
    lines = [line.strip() for line in log.splitlines() if "Error" in line or "error" in line]
    errors = [line for line in lines if line.startswith(("RuntimeError", "ImportError", "OSError"))]
    return (errors or lines or [None])[-1]


def check(targets: list[str] | None = None) -> dict:
    restore = loading.capture_stderr()
    logging.basicConfig(stream=sys.stderr)
    result: dict = {"backend": "jax"}
    try:
        major, module, import_error = plugin()
        result["cuda_major"] = major
        result["plugin"] = module.__name__ if module else None
        result["plugin_import_error"] = import_error
        preload_error = None
        if module is not None and hasattr(module, "_load_nvidia_libraries"):
            try:
                module._load_nvidia_libraries()
            except Exception as exc:  # noqa: BLE001
                preload_error = f"{type(exc).__name__}: {exc}"
        result["preload_error"] = preload_error
        preloaded = loading.mapped_libraries()
        result["preloaded_by_plugin"] = dict(sorted((n, p) for n, p in preloaded.items() if "/nvidia/" in p))
        groups = expected(major or "12")
        spec = importlib.util.find_spec("jax")
        site = os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else None
        result["libraries"] = {g: {name: loading.dlopen_or_wheel(name, site) for name in names}
                               for g, names in groups.items()}
        result["versions"] = versions(major) if major else {}
        try:
            import jax

            devices = jax.devices()
            result["jax"] = jax.__version__
            result["devices"] = [f"{d.platform}:{d.id}" for d in devices]
            result["default_backend"] = jax.default_backend()
            from jax._src import xla_bridge

            result["platforms"] = sorted(xla_bridge.backends())  # the backends JAX initialised
            result["backend_errors"] = {k: str(v) for k, v in getattr(xla_bridge, "_backend_errors", {}).items()}
            result["jax_error"] = None
        except Exception as exc:  # noqa: BLE001
            result["jax_error"] = f"{type(exc).__name__}: {exc}"
    finally:
        log = restore()
    result["plugin_error"] = plugin_error(log)
    spec = importlib.util.find_spec("jax")
    site = os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else None
    result["ptxas"] = ptxas.check(ptxas.xla_ptxas(site=site), targets)
    result["gpu"] = any(d.startswith(("cuda", "gpu")) for d in result.get("devices", []))
    result["failed"] = summarize(result)
    return result


def summarize(result: dict) -> list[str]:
    failed = []
    if result.get("plugin") is None:
        failed.append(f"JAX's CUDA plugin: {result.get('plugin_import_error')}")
    for group, libs in result.get("libraries", {}).items():
        for name, r in libs.items():
            if not r["ok"]:
                failed.append(f"{group}: {name} ({r['error']})")
    for name, v in result.get("versions", {}).items():
        if isinstance(v, dict) and "error" in v and not any(name in f for f in failed):
            failed.append(f"JAX's {name} version check: {v['error']}")
    if result.get("jax_error"):
        failed.append(f"import jax; jax.devices(): {result['jax_error']}")
    failed += ptxas.failures("ptxas", result["ptxas"])
    return failed

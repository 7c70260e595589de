"""Can this image's ptxas compile a kernel for a GPU architecture? No GPU is needed.

XLA (JAX, TensorFlow) compiles its generated PTX with ptxas: the nvcc wheel's
`nvidia/cuda_nvcc/bin/ptxas`, found through `XLA_FLAGS=--xla_gpu_cuda_data_dir=DIR`
(`DIR/bin/ptxas`). Triton (PyTorch's torch.compile) carries its own ptxas in
`triton/backends/nvidia/bin/`. Either one rejects a target it does not know (`ptxas fatal
: Value 'sm_120a' is not defined for option 'gpu-name'`), which on that GPU means no
compiled kernels at all. This module writes the smallest kernel there is, with the lowest
PTX ISA version that allows the target, and asks ptxas for a cubin.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

KERNEL_PTX = """.version {isa}
.target {arch}
.address_size 64
.visible .entry kerasenv_probe(.param .u64 out)
{{
    .reg .u64 %rd<2>;
    .reg .u32 %r<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 42;
    st.global.u32 [%rd1], %r1;
    ret;
}}
"""

# The lowest PTX ISA that allows each target (PTX ISA docs, "Release Notes" / target table):
# sm_90a 8.0 (CUDA 12.0), sm_100a/sm_101a 8.6 (12.8), sm_120a 8.7 (12.8), sm_103a/sm_121a
# 8.8 (12.9), sm_110a 9.0 (13.0; sm_101 was renamed sm_110). Everything up to sm_90: 7.8,
# which every ptxas from CUDA 11.8 on reads.
MIN_ISA = {"sm_90a": "8.0", "sm_100": "8.6", "sm_100a": "8.6", "sm_101a": "8.6", "sm_120": "8.7",
           "sm_120a": "8.7", "sm_103a": "8.8", "sm_121a": "8.8", "sm_110a": "9.0"}
BLACKWELL = ("sm_100a", "sm_120a")


def isa_for(arch: str) -> str:
    return MIN_ISA.get(arch, "7.8")


def kernel(arch: str) -> str:
    return KERNEL_PTX.format(isa=isa_for(arch), arch=arch)


def release(version_text: str) -> tuple[int, int] | None:
    """'Cuda compilation tools, release 12.9, V12.9.86' -> (12, 9)."""
    m = re.search(r"release (\d+)\.(\d+)", version_text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def lowest_target(version_text: str) -> str:
    """The oldest architecture this ptxas still compiles for: sm_75 from CUDA 13 (Maxwell,
    Pascal and Volta were dropped), sm_50 before (sm_35 went in CUDA 12.0)."""
    r = release(version_text)
    return "sm_75" if r and r[0] >= 13 else "sm_50"


def xla_ptxas(env: dict | None = None, site: str | None = None) -> str | None:
    """The ptxas XLA uses: `--xla_gpu_cuda_data_dir`'s bin/ptxas, else the nvcc wheel's,
    else the first on PATH."""
    env = os.environ if env is None else env
    m = re.search(r"--xla_gpu_cuda_data_dir=(\S+)", env.get("XLA_FLAGS", ""))
    candidates = [os.path.join(m.group(1), "bin", "ptxas")] if m else []
    if site:
        candidates.append(os.path.join(site, "nvidia", "cuda_nvcc", "bin", "ptxas"))
    for c in candidates:
        if os.access(c, os.X_OK):
            return c
    return shutil.which("ptxas", path=env.get("PATH"))


def version(ptxas: str) -> str:
    try:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return next((line for line in lines if "release" in line), lines[-1] if lines else "")


def compile_for(ptxas: str, arch: str) -> dict:
    """Compile the kernel for `arch`: ok, the PTX ISA used, and ptxas's words when it fails."""
    with tempfile.TemporaryDirectory(prefix="kerasenv-ptxas-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(kernel(arch))
        try:
            r = subprocess.run([ptxas, f"-arch={arch}", src, "-o", out], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ok": False, "isa": isa_for(arch), "error": str(exc)}
        ok = r.returncode == 0 and os.path.exists(out) and os.path.getsize(out) > 0
        result = {"ok": ok, "isa": isa_for(arch)}
        if not ok:
            lines = (r.stderr or r.stdout).strip().splitlines()
            result["error"] = lines[-1].strip() if lines else f"exit {r.returncode}"
        return result


def check(ptxas: str | None, targets: list[str] | None = None) -> dict:
    """{path, version, targets: {arch: {ok, isa[, error]}}, ok}; the lowest target this
    ptxas supports and sm_100a / sm_120a unless `targets` says otherwise."""
    if not ptxas:
        return {"path": None, "version": None, "targets": {}, "ok": False, "error": "no ptxas found"}
    v = version(ptxas)
    targets = targets or [lowest_target(v), *BLACKWELL]
    results = {arch: compile_for(ptxas, arch) for arch in dict.fromkeys(targets)}
    return {"path": ptxas, "version": v, "targets": results, "ok": all(r["ok"] for r in results.values())}


def failures(name: str, result: dict) -> list[str]:
    """One phrase per target ptxas could not compile for."""
    if result.get("path") is None:
        return [f"{name}: {result.get('error', 'no ptxas found')}"]
    return [f"{name} ({result['version']}) cannot compile for {arch}: {r.get('error', '')}"
            for arch, r in result["targets"].items() if not r["ok"]]

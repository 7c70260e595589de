"""`kerasenv doctor --container ID`: what the image itself sees, with the GPU flags.

Inside the image: nvidia-smi -L, the backend's GPU list and, in CUDA images, the backend's
own GPU-library check: the image's own probe, `python -m kerasenv_image.probes.gpu_libraries`
(TensorFlow: TryDlopenCUDALibraries(); JAX: what its CUDA plugin loads, and ptxas for
sm_100a/sm_120a; PyTorch: what `import torch` maps and opens later, and Triton's ptxas).
That check needs no GPU, so when Docker cannot give one it still runs, in a container
without GPUs. Lines are named after the backend: tf_gpus / tf_gpu_libraries,
jax_gpus / jax_gpu_libraries, torch_gpus / torch_gpu_libraries.
"""

from __future__ import annotations

import io
import json

from kerasenv_image.probes import gpu_libraries

from ..errors import KerasenvError
from ..matrix.schema import Variant


PREFIX = {"tensorflow": "tf", "jax": "jax", "torch": "torch"}


def keys(v: Variant) -> tuple[str, str]:
    """The report's line names for this image's backend: ('tf_gpus', 'tf_gpu_libraries'), ..."""
    prefix = PREFIX.get(getattr(v, "backend", "tensorflow"), "tf")
    return f"{prefix}_gpus", f"{prefix}_gpu_libraries"


def probe(v: Variant, gpus: str) -> dict:
    """The probe's findings (nvidia_smi_l, <backend>_gpus, for CUDA <backend>_gpu_libraries)
    and a PASS/FAIL `status` for each of them."""
    from ..engine import docker_client
    from . import gpu_choice

    client = docker_client.client()
    gpus_key, libraries_key = keys(v)
    backend = getattr(v, "backend", "tensorflow")
    # TF images built before the backend field ignore --backend; naming it keeps `env -i` safe.
    library_check = [v.interpreter, "-m", gpu_libraries.__name__] + \
        (["--backend", backend] if backend != "tensorflow" else [])
    command = library_check + (["--devices"] if v.family == "cuda" else ["--devices-only"])
    started = True
    try:
        # Resolved for this engine (CDI, Podman, WSL2, MIG: host/gpu_choice); a request the
        # engine would drop is a failed line here, and the library check still runs below.
        data = probe_json(client, v, command, gpu_choice.Resolver(client)(v, gpus))
    except KerasenvError as exc:
        started = False
        data = {"nvidia_smi_l": exc.message, "tf_gpus": []}
        if v.family == "cuda":
            try:
                libraries = probe_json(client, v, library_check, None)
                data.update({k: libraries[k] for k in ("failed", "later", "libraries", "ptxas", "backend")
                             if k in libraries})
            except KerasenvError:
                pass
    if gpus_key != "tf_gpus":
        data[gpus_key] = data.pop("gpus", None) or data.get("tf_gpus") or []
        data.pop("tf_gpus", None)
    data["status"] = {"nvidia_smi_l": "PASS" if started and data.get("nvidia_smi_l") else "FAIL",
                      gpus_key: "PASS" if started and data.get(gpus_key) else "FAIL"}
    if v.family == "rocm":
        # AMD's image has no nvidia-smi: the backend's GPU list alone says whether HIP sees the
        # GPU (`make verify-gpu VARIANT=tf2.17-rocm6.3` on an AMD host).
        del data["status"]["nvidia_smi_l"]
    if v.family == "cuda":
        data[libraries_key], data["status"][libraries_key] = gpu_library_verdict(data, v)
    return data


def probe_json(client, v: Variant, command: list[str], gpus) -> dict:
    """Run a probe that prints one JSON line; its dict, or a failure entry when it printed none."""
    from ..run import runner

    stdout, stderr = io.StringIO(), io.StringIO()
    result = runner.run(client, v, command, gpus=gpus, runs_dir=None, user=None,
                        kind="probe", stream=stderr, stdout=stdout, network="none")
    return parse_output(stdout.getvalue(), result.exit_code, stderr.getvalue())


def parse_output(stdout: str, exit_code: int, stderr: str = "") -> dict:
    """The probe's last JSON line, or a failure entry naming the exit status (and, for an
    image built before the probe was part of kerasenv_image, the rebuild it needs)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    if "No module named 'kerasenv_image" in stderr:
        return {"nvidia_smi_l": f"probe failed (exit {exit_code}): this image has no {gpu_libraries.__name__}, "
                                "it was built by an older kerasenv; rebuild it (`make build VARIANT=<id>`)",
                "tf_gpus": []}
    return {"nvidia_smi_l": f"probe failed (exit {exit_code})", "tf_gpus": []}


def gpu_library_verdict(data: dict, v: Variant) -> tuple[str, str]:
    """One line for the backend's own GPU-library check, with its fix when it failed."""
    failed = data.get("failed")
    if failed is None:
        return "not checked: the probe printed no result", "FAIL"
    backend = getattr(v, "backend", "tensorflow")
    if not failed and backend != "tensorflow":
        targets = ", ".join(_ptxas_targets(data.get("ptxas") or {}))
        what = ("JAX's CUDA plugin libraries load (cudart, cuBLAS(Lt), cuDNN 9 + sub-libraries, cuSOLVER, "
                "cuSPARSE, cuFFT, NCCL, nvJitLink, NVRTC, CUPTI); XLA's ptxas compiles for " if backend == "jax" else
                "import torch maps its CUDA libraries; NVRTC, CUPTI and cuDNN's sub-libraries load; "
                "Triton's ptxas compiles for ")
        return what + (targets or "nothing checked"), "PASS"
    if not failed:
        return ("TryDlopenCUDALibraries() OK; cuDNN sub-libraries, NVRTC, NCCL, CUPTI load"
                f"{', nvJitLink' if 'nvjitlink' in data.get('later', {}) else ''}"), "PASS"
    return (f"{'; '.join(failed[:3])}{' ...' if len(failed) > 3 else ''} -- fix: rebuild the image "
            f"(`make build VARIANT={v.id}`); an image built by an older kerasenv lacks "
            "/etc/ld.so.conf.d/kerasenv-cuda-wheels.conf"), "FAIL"


def _ptxas_targets(ptxas: dict) -> list[str]:
    """The architectures a ptxas result (one, or Triton's several by name) compiled for."""
    results = [ptxas] if "targets" in ptxas else list(ptxas.values())
    return list(dict.fromkeys(arch for r in results if isinstance(r, dict)
                              for arch, t in r.get("targets", {}).items() if t.get("ok")))

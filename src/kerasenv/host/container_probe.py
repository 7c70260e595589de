"""`kerasenv doctor --container ID`: what the image itself sees, with the GPU flags.

Inside the image: nvidia-smi -L, TensorFlow's GPU list and, in CUDA images, TensorFlow's
own GPU-library check: the image's own probe, `python -m kerasenv_image.probes.gpu_libraries`.
That check needs no GPU, so when Docker cannot give one it still runs, in a container
without GPUs.
"""

from __future__ import annotations

import io
import json

from kerasenv_image.probes import gpu_libraries

from ..errors import KerasenvError
from ..matrix.schema import Variant


def probe(v: Variant, gpus: str) -> dict:
    """The probe's findings (nvidia_smi_l, tf_gpus, for CUDA tf_gpu_libraries) and a
    PASS/FAIL `status` for each of them."""
    from ..engine import docker_client

    client = docker_client.client()
    library_check = [v.interpreter, "-m", gpu_libraries.__name__]
    command = library_check + (["--devices"] if v.family == "cuda" else ["--devices-only"])
    started = True
    try:
        data = probe_json(client, v, command, gpus)
    except KerasenvError as exc:
        started = False
        data = {"nvidia_smi_l": exc.message, "tf_gpus": []}
        if v.family == "cuda":
            try:
                libraries = probe_json(client, v, library_check, "none")
                data.update({k: libraries[k] for k in ("failed", "later") if k in libraries})
            except KerasenvError:
                pass
    data["status"] = {"nvidia_smi_l": "PASS" if started and data.get("nvidia_smi_l") else "FAIL",
                      "tf_gpus": "PASS" if started and data.get("tf_gpus") else "FAIL"}
    if v.family == "cuda":
        data["tf_gpu_libraries"], data["status"]["tf_gpu_libraries"] = gpu_library_verdict(data, v)
    return data


def probe_json(client, v: Variant, command: list[str], gpus: str) -> dict:
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
    """One line for TensorFlow's own GPU-library check, with its fix when it failed."""
    failed = data.get("failed")
    if failed is None:
        return "not checked: the probe printed no result", "FAIL"
    if not failed:
        return ("TryDlopenCUDALibraries() OK; cuDNN sub-libraries, NVRTC, NCCL, CUPTI load"
                f"{', nvJitLink' if 'nvjitlink' in data.get('later', {}) else ''}"), "PASS"
    return (f"{'; '.join(failed[:3])}{' ...' if len(failed) > 3 else ''} -- fix: rebuild the image "
            f"(`make build VARIANT={v.id}`); an image built by an older kerasenv lacks "
            "/etc/ld.so.conf.d/kerasenv-cuda-wheels.conf"), "FAIL"

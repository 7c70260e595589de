"""`kerasenv doctor`: the host preflight, a verdict for every variant, and optionally a probe
inside an image."""

from __future__ import annotations

import json
import sys

from ..matrix.schema import Matrix


def register(subparsers) -> None:
    s = subparsers.add_parser("doctor", help="host preflight and a verdict for every variant (works without a GPU)")
    s.add_argument("--json", action="store_true", help="machine-readable report")
    s.add_argument("--require-gpu", action="store_true", help="exit 3 when no GPU variant can run here")
    s.add_argument("--container", metavar="ID",
                   help="also run nvidia-smi -L and the backend's GPU probe (TensorFlow, JAX or PyTorch) inside this image")
    s.add_argument("--gpus", default="all", help="GPU request for --container (default: all)")
    s.set_defaults(handler=_cmd_doctor)
    s = subparsers.add_parser("rocm-groups", help="KERASENV_KFD_GID=... KERASENV_RENDER_GID=...: the GIDs owning "
                                                  "/dev/kfd and the AMD render nodes, for compose's ROCm override")
    s.set_defaults(handler=_cmd_rocm_groups)
    from . import gpu_host_check

    gpu_host_check.register(subparsers)


def _cmd_doctor(args, matrix: Matrix) -> int:
    from . import container_probe
    from . import doctor
    from ..engine import docker_client

    facts = doctor.gather(docker_client.client)
    report = doctor.judge(facts, matrix)
    result = report.as_dict()
    container = None
    if args.container:
        container = container_probe.probe(matrix.get(args.container), args.gpus)
        result["container"] = container
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(doctor.format_text(report))
        if container:
            for key in container["status"]:
                print(f"{container['status'][key]:<4}  container {key:<16} {container[key]}")
    if any(c.status == doctor.FAIL for c in report.host if c.name == "docker"):
        return 1
    if container and "FAIL" in container["status"].values():
        return 3
    if args.require_gpu and not report.gpu_usable:
        print(f"kerasenv: error: no GPU variant can run on this host ({report.reason}); the lines "
              "above say what to fix (driver, NVIDIA Container Toolkit, AMD device access), then rerun "
              "`kerasenv doctor`",
              file=sys.stderr)
        return 3
    return 0


def _cmd_rocm_groups(args, matrix: Matrix) -> int:
    """One line of assignments for `env $(kerasenv rocm-groups) docker compose ...` (what
    `make up COMPOSE_GPU=rocm` runs): compose/compose.rocm.yaml adds the two GIDs by number."""
    from ..engine import amd_devices
    from ..errors import KerasenvError

    try:
        values = amd_devices.compose_env(amd_devices.scan())
    except ValueError as exc:
        raise KerasenvError(str(exc)) from None
    print(" ".join(f"{k}={v}" for k, v in values.items()))
    return 0

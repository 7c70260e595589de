"""Which variant a command runs: the one named, or the one this host calls for.

`named` is the first step of run, smoke, bench and multiworker: an unknown id fails there,
before Docker is asked anything. Without a name the host decides, after Docker was asked:
`recommended` (`kerasenv run/smoke auto`: doctor's pick) or `default_for_gpus`
(`kerasenv bench` without an id: the default GPU image, or the default CPU image).
"""

from __future__ import annotations

from ..matrix.schema import Matrix, Variant

AUTO = "auto"  # `kerasenv run/smoke auto`: doctor's recommendation


def named(matrix: Matrix, variant_id: str | None) -> Variant | None:
    """The variant `variant_id` names (an unknown id is a UsageError); None when no id is
    given, for `recommended` or `default_for_gpus` to decide once Docker can be asked."""
    return None if variant_id is None else matrix.get(variant_id)


def recommended(matrix: Matrix, client) -> tuple[Variant, str]:
    """Doctor's recommendation for this host (NVIDIA GPU and toolkit, else an AMD GPU,
    else the CPU image), and its reason."""
    from . import doctor
    from ..errors import UsageError

    report = doctor.judge(doctor.gather(lambda: client), matrix)
    if not report.recommended:
        raise UsageError(f"no image to pick: {report.reason}; `kerasenv doctor` says what to use instead")
    return matrix.get(report.recommended), report.reason


def default_for_gpus(matrix: Matrix, gpus: str | list[int], host_gpus, docker_gpus: bool) -> Variant:
    """The default GPU image when GPUs can be had (an NVIDIA GPU on the host and Docker's
    yes), or were asked for by name (then the GPU image says why there are none); else the
    default CPU image. `gpus`: bench.parse_gpus's auto | all | none | [indexes]."""
    can_gpu = gpus != "none" and host_gpus.present and not host_gpus.error and bool(host_gpus.gpus) and docker_gpus
    can_gpu = can_gpu or gpus not in ("auto", "none")
    return matrix.get(matrix.default_gpu if can_gpu else matrix.default_cpu)

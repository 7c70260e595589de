"""report.json: written atomically, always (a reader never sees half of one), and the summary."""

from __future__ import annotations

import math
import os
import platform
import sys
import tempfile
from importlib import metadata

from .. import jsonfile
from .console import log
from .errors import EXIT_USAGE, SmokeFailure
from .log_filter import hidden_note


REPORT_SCHEMA = 1
# The distributions that carry each backend's framework (the TF images: tensorflow, or
# tensorflow-cpu in the CPU image; AMD's image: tensorflow-rocm).
FRAMEWORK_DISTS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-rocm"), "jax": ("jax",),
                   "torch": ("torch",)}


def declared_stack(environ=os.environ) -> dict:
    """What the report says of the stack before the framework is imported: the backend from
    KERAS_BACKEND (each image sets it), the framework's and Keras's versions from their installed
    metadata (no import), Python's own, and the image's variant and family from its ENV. A run that
    fails before training (an unwritable output directory, say) still names its stack (issue 45):
    it read "TensorFlow None / Keras None / Python None (no variant)". The import replaces the
    versions with what the framework itself reports."""
    backend = environ.get("KERAS_BACKEND") or "tensorflow"  # unset: Keras' own default

    def installed(*names: str) -> str | None:
        for name in names:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return None

    return {"backend": backend,
            "versions": {backend: installed(*FRAMEWORK_DISTS.get(backend, (backend,))),
                         "keras": installed("keras"), "python": platform.python_version(), "backend": backend},
            "image": {"variant": environ.get("KERASENV_VARIANT") or None, "family": environ.get("KERASENV_FAMILY") or None}}


def prepare_output_dir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-", delete=True)
        probe.close()
    except OSError as exc:
        raise SmokeFailure(
            EXIT_USAGE, "output-dir", f"output directory {path} is not writable ({exc.strerror})",
            "mount a directory you own (e.g. -v $PWD/runs:/workspace/runs with --user $(id -u):$(id -g)) "
            "or pass --output-dir") from None


def strict_json(value):
    """NaN/inf are not JSON: they become null (the verdict's `finite` says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def write_json_atomically(value, target: str) -> None:
    """`value` in `target`, atomically (kerasenv_image.jsonfile), NaN and infinities as null."""
    jsonfile.write_atomically(strict_json(value), target)


def write_report(report: dict, output_dir: str | None) -> bool:
    """report.json is written atomically: a reader never sees half a report. Returns
    False (and says why) when it could not be written, e.g. the disk is full."""
    if not output_dir or not os.path.isdir(output_dir):
        return True
    target = os.path.join(output_dir, "report.json")
    try:
        write_json_atomically(report, target)
    except OSError as exc:
        log(f"ERROR: could not write {target} ({exc.strerror}); no partial report was left behind")
        return False
    return True


def summary(report: dict, report_written: bool = True, hidden_log_lines: int = 0) -> None:
    t = report.get("training") or {}
    versions = report.get("versions") or {}
    device = report.get("placement", {}).get("result_device", "?")
    backend = report.get("backend") or "tensorflow"
    framework = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}.get(backend, backend)
    lines = [f"{framework} {versions.get(backend)} / Keras {versions.get('keras')} / "
             f"Python {versions.get('python')} ({report.get('image', {}).get('variant') or 'no variant'})",
             f"device: {device}; GPUs: {len(report.get('gpus') or [])}; driver: {report.get('driver_version') or '-'}"]
    if t:
        lines.append(f"loss {t['first_loss']:.3f} -> {t['final_loss']:.3f}, accuracy {t['final_accuracy']:.3f}, "
                     f"{t['samples_per_second'] or 0:.0f} samples/s, first step after {t['time_to_first_step_s'] or 0:.1f} s"
                     if t.get("final_loss") is not None and math.isfinite(t["final_loss"]) else "loss not finite")
    monitor = report.get("gpu_monitor") or {}
    if monitor.get("sampled") and monitor.get("verdict"):  # on the CPU: nothing (report: sampled false)
        lines += monitor["verdict"]["lines"]
    profile = report.get("profile")
    if profile:
        said = " ".join(lines)
        if "input pipeline waited" not in said:  # the GPU line already says it when it matters
            lines.append(f"profile: {profile['line']}")
        lines.append(f"profile: steps {profile['steps'][0]}-{profile['steps'][1]} in "
                     f"{profile.get('xplane') or profile.get('trace') or profile['log_dir']}")
    status = report["status"].upper()
    if report.get("error"):
        lines.append(f"{report['error']['message']}")
        if report["error"].get("fix"):
            lines.append(f"fix: {report['error']['fix']}")
    print(f"[smoke] {status} (exit {report['exit_code']})", file=sys.stderr)
    for line in lines:
        print(f"[smoke]   {line}", file=sys.stderr)
    dist = report.get("distributed")
    if dist:
        # TF's MultiWorkerMirroredStrategy counts workers; Keras on JAX counts processes.
        of = dist.get("workers", dist.get("processes"))
        what = "process" if dist.get("launcher") else "worker"
        print(f"[smoke]   multi-worker: {what} {dist['task_index']} of {of}"
              f"{' (chief)' if dist['chief'] else ''}", file=sys.stderr)
    where = os.path.join(worker_dir_or_none(report) or "-", "report.json")
    print(f"[smoke]   report: {where if report_written else 'not written'}", file=sys.stderr)
    note = hidden_note(hidden_log_lines)
    if note:  # the filter never hides silently
        print(f"[smoke]   {note}", file=sys.stderr)


def worker_dir_or_none(report: dict) -> str | None:
    base = report.get("output_dir")
    dist = report.get("distributed")
    # On JAX (a "launcher" is named) main.process_job already made output_dir this process's own.
    if base and dist and not dist["chief"] and not dist.get("launcher"):
        return os.path.join(base, f"worker-{dist['task_index']}")
    return base

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


RUNS = "/workspace/runs"
# Apptainer (and SingularityCE, and Singularity before the rename) sets these in every container
# it starts; `apptainer exec --cleanenv` keeps them too.
APPTAINER_MARKERS = ("APPTAINER_CONTAINER", "APPTAINER_NAME", "SINGULARITY_CONTAINER", "SINGULARITY_NAME")


def container_runtime(environ=os.environ) -> str:
    """"apptainer" inside Apptainer or Singularity, else "docker" (Docker, Podman, Kubernetes,
    enroot: each mounts a folder with -v/--mount/volumes the same way); the fix lines speak it."""
    return "apptainer" if any(environ.get(name) for name in APPTAINER_MARKERS) else "docker"


def _unwritable(path: str) -> str | None:
    """Why `path` (made if missing) takes no file, or None when it does."""
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-", delete=True)
        probe.close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def default_output_dir(path: str, run_id: str, environ=os.environ) -> tuple[str, str | None]:
    """Where the default run goes, and the line that says so when it moved. A SIF is a read-only
    squashfs and Apptainer runs as the caller's own uid, so /workspace/runs takes no file there
    (issue 44: `apptainer run kerasenv.sif` failed with Docker's fix). Apptainer mounts the
    working directory and /tmp from the host by default: the run goes to ./runs/<run-id>, or to
    $TMPDIR (else /tmp)/kerasenv-runs/<run-id> when the working directory is not writable either.
    Outside Apptainer nothing moves: a read-only /workspace/runs under Docker is a mount to fix."""
    if container_runtime(environ) != "apptainer" or _unwritable(os.path.dirname(path)) is None:
        return path, None
    places = []
    try:
        places.append(os.path.join(os.getcwd(), "runs"))
    except OSError:  # the working directory is gone (or not mounted)
        pass
    places.append(os.path.join(environ.get("TMPDIR") or "/tmp", "kerasenv-runs"))
    for base in places:
        if _unwritable(base) is None:
            moved = os.path.join(base, run_id)
            return moved, (f"{RUNS} is read-only under Apptainer: this run writes to {moved} "
                           f"(--bind DIR:{RUNS} or --output-dir picks another)")
    return path, None


def prepare_output_dir(path: str, environ=os.environ) -> None:
    why = _unwritable(path)
    if why is None:
        return
    if container_runtime(environ) == "apptainer":
        fix = (f"run from a folder you can write (the run goes to ./runs), bind one "
               f"(apptainer run --bind $PWD/runs:{RUNS} ...) or pass --output-dir")
    else:
        fix = ("mount a directory you own (e.g. -v $PWD/runs:/workspace/runs with --user $(id -u):$(id -g)) "
               "or pass --output-dir")
    raise SmokeFailure(EXIT_USAGE, "output-dir", f"output directory {path} is not writable ({why})", fix)


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

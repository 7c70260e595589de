"""The run: environment, devices, placement, training, verdict; the report is always written.
The framework (KERAS_BACKEND) is reached only through kerasenv_image.backends."""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
import traceback
from datetime import datetime, timezone

from ..gpu_sampler import stop_all as stop_all_samplers
from .args import parse_args
from .console import log
from .. import backends
from ..backends.keras_release import keras_version
from .environment import no_gpu_reason, nvidia_smi, shm_report
from .errors import (EXIT_NO_GPU, EXIT_OK, EXIT_OOM, EXIT_OUTPUT, EXIT_SIGINT, EXIT_SIGTERM, EXIT_TRAINING,
                     EXIT_UNEXPECTED, EXIT_USAGE, Interrupted, SmokeFailure, disk_full, is_disk_full)
from .log_filter import LogFilter
from .multiworker import multi_worker, train_multi_worker, worker_dir
from .report import REPORT_SCHEMA, declared_stack, default_output_dir, prepare_output_dir, strict_json, summary, write_report
from .tf_log import StderrTee
from .training import train
from .verdict import ACCURACY_MIN, LOSS_RATIO_MAX, verdict


def process_job(args, report: dict):
    """The multi-process job the environment describes (Keras on JAX: backends.jax_processes), checked
    before any framework is imported; None for one process. A process other than 0 writes
    everything (report, epochs, TensorBoard, backup) to worker-<id>/ of the run directory, which
    the processes may share (`kerasenv multiworker` mounts one runs directory into every container)."""
    from ..backends import jax_processes

    try:
        backend_name = backends.name()
    except backends.UnknownBackend:
        return None  # run() says so, with the fix
    keras_vars = [n for n in jax_processes.KERAS_VARS if os.environ.get(n)]
    if backend_name != "jax":
        if keras_vars:
            how = ("TensorFlow trains across processes with TF_CONFIG (`kerasenv multiworker` on a tf2.* image)"
                   if backend_name == "tensorflow" else
                   "Keras 3.15 on PyTorch has no keras.distribution across processes (it is on Keras's master, "
                   "unreleased): use torchrun with torch DDP in a custom loop (docs/using/multi-worker.md)")
            raise SmokeFailure(EXIT_USAGE, "distributed-config",
                               f"{', '.join(keras_vars)} set, but this image trains on "
                               f"{backends.DISPLAY[backend_name]}: {how}", "unset them, or use a jax* image")
        return None
    job = jax_processes.job_from_env()
    if job is None:
        return None
    report["distributed"] = {"strategy": "DataParallel", "launcher": job.launcher, "processes": job.num_processes,
                             "process_id": job.process_id, "task_index": job.process_id,
                             "chief": job.process_id == 0, "coordinator": job.coordinator}
    for line in jax_processes.check(job):
        log(f"WARNING: {line}")
    if job.process_id:
        args.output_dir = os.path.join(args.output_dir, f"worker-{job.process_id}")
        prepare_output_dir(args.output_dir)
    return job


def run(args, report: dict, tee: StderrTee | None = None) -> int:
    if not getattr(args, "output_dir_given", True):
        args.output_dir, moved = default_output_dir(args.output_dir, args.run_id)
        if moved:
            log(moved)
    prepare_output_dir(args.output_dir)
    job = process_job(args, report)
    report["output_dir"] = args.output_dir
    shm = shm_report()
    report["shm"] = shm
    if shm["warning"]:
        log(f"WARNING: {shm['warning']}")
    try:
        backend = backends.current()
    except backends.UnknownBackend as exc:
        raise SmokeFailure(EXIT_USAGE, "backend", str(exc), "unset KERAS_BACKEND to use the image's own") from None
    report["backend"] = backend.NAME
    if os.environ.get("TF_CONFIG") and backend.multi_worker_supported():
        raise SmokeFailure(EXIT_USAGE, "tf-config", f"TF_CONFIG is set but this image trains on {backend.DISPLAY}: "
                           f"{backend.multi_worker_supported()}", "unset TF_CONFIG, or use a tensorflow image")
    smi = nvidia_smi()
    # Settings the framework reads once, at import (JAX's memory and host device count).
    backend_settings = backend.prepare(args, smi)
    log(f"importing {backend.DISPLAY}")
    fw, keras = backend.import_stack()
    if job is not None:
        # Before anything else of JAX runs: jax.distributed.initialize() must come first.
        backend.join_processes(fw, keras, job, report, log)
    build_info = backend.build_info(fw)
    report["versions"] = {**backend.versions(fw, keras), "keras": keras_version(keras),
                          "python": platform.python_version(), "numpy": __import__("numpy").__version__}
    report["versions"]["backend"] = backend.NAME
    report["build_info"] = build_info
    family = os.environ.get("KERASENV_FAMILY", "")
    report["image"] = {"variant": os.environ.get("KERASENV_VARIANT"), "family": family or None}
    report["nvidia_smi"] = smi
    report["driver_version"] = smi.get("driver_version")
    if family == "cuda" and not build_info.get("is_cuda_build"):
        raise SmokeFailure(EXIT_NO_GPU, "wrong-build", f"this is a CUDA image but {backend.DISPLAY} is not a CUDA build",
                           "rebuild the image (`make build`); the lock installed the wrong wheel")
    if family == "rocm" and not build_info.get("is_rocm_build"):
        raise SmokeFailure(EXIT_NO_GPU, "wrong-build", f"this is a ROCm image but {backend.DISPLAY} is not a ROCm build",
                           "rebuild the image from AMD's rocm/tensorflow base")
    try:
        training = devices_and_training(backend, fw, keras, args, report, smi, family, backend_settings)
    except SmokeFailure:
        raise
    except Exception as exc:
        failure = backend.classify_error(fw, exc, (tee.relevant if tee else lambda: None), args.output_dir)
        if failure is None:
            failure = host_failure(exc, args.output_dir)
        if failure is None:
            raise
        raise failure from None
    report["training"] = training
    report["verdict"] = verdict(training, report["placement"])
    if not report["verdict"]["placement_ok"]:
        placement = report["placement"]
        raise SmokeFailure(EXIT_TRAINING, "wrong-device",
                           f"the placement check asked for {placement['requested']} but the result lives on "
                           f"{placement['result_device']}", "run `kerasenv doctor --container ID`: "
                           f"{backend.DISPLAY} registered the device but does not run ops on it")
    if not report["verdict"]["finite"]:
        raise SmokeFailure(EXIT_TRAINING, "nan", "training diverged: the loss became NaN or infinite",
                           "lower --learning-rate; with float16, try --mixed-precision bfloat16 or off")
    if not report["verdict"]["learned"]:
        v = report["verdict"]
        ratio = "n/a" if v["loss_ratio"] is None else f"{v['loss_ratio']:.2f}"
        raise SmokeFailure(EXIT_TRAINING, "did-not-learn",
                           f"the model did not learn (loss ratio {ratio}, needs < {LOSS_RATIO_MAX}; "
                           f"accuracy {v['accuracy']}, needs >= {ACCURACY_MIN})",
                           f"check --learning-rate and the {backend.DISPLAY} log above")
    return EXIT_OK


def host_failure(exc: BaseException, output_dir: str) -> SmokeFailure | None:
    """A full disk, an I/O error in the run directory or host memory exhaustion, whatever
    the backend; None for anything else."""
    if isinstance(exc, OSError):
        if is_disk_full(exc):
            return disk_full(exc, output_dir)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        return SmokeFailure(EXIT_OUTPUT, "output-io", f"I/O error in {output_dir}: {first}",
                            "check the mounted runs directory (permissions, free space, a damaged "
                            "backup/: delete it or use a new --run-id)")
    if isinstance(exc, MemoryError):
        return SmokeFailure(EXIT_OOM, "oom", "host out of memory",
                            "lower --batch-size / --samples or give the container more memory")
    return None


def devices_and_training(backend, fw, keras, args, report: dict, smi: dict, family: str,
                         backend_settings: dict | None = None) -> dict:
    """Everything that runs framework ops: its errors are classified by the caller."""
    gpus = backend.configure_gpus(fw, args, report)
    report["gpu_config"].update(backend_settings or {})
    strategy = multi_worker(fw, os.environ["TF_CONFIG"], report) if os.environ.get("TF_CONFIG") else None
    report["devices"] = backend.devices(fw)
    if not gpus:
        reason, fix = no_gpu_reason(smi, backend.DISPLAY)
        if args.require_gpu:
            raise SmokeFailure(EXIT_NO_GPU, "no-gpu", f"a GPU is required but {backend.DISPLAY} sees none: {reason}",
                               fix)
        if family in ("cuda", "rocm"):
            log(f"WARNING: no GPU visible ({reason}); training on the CPU")
    for gpu in report["gpus"]:
        log(f"GPU {gpu['device']}: {gpu['name']} (compute capability {gpu['compute_capability']})")
    report["placement"] = backend.placement_check(fw, gpus)
    log(f"placement: requested {report['placement']['requested']}, "
        f"result on {report['placement']['result_device']}")
    _TRAINING.update(args=args, report=report, started=_STARTED[0], tee=_STARTED[1])
    try:
        if strategy is not None:
            return train_multi_worker(fw, keras, args, report, strategy)
        return train(backend, fw, keras, args, report, gpus)
    finally:
        _TRAINING.clear()


_STARTED: list = [0.0, None]  # main()'s start time and tee, for the signal handler
# Set while TensorFlow trains: (args, report, started, tee) of the running main().
_TRAINING: dict = {}


def _on_signal(signum, frame):
    code = EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT
    if not _TRAINING:
        raise Interrupted(code)
    # During training, unwinding the exception through fit() can crash TensorFlow while
    # its tf.data threads run (a `docker stop` once ended in exit 139 instead of 143): the
    # report is written from here and the process leaves at once. The last epoch backup is
    # on disk, so the same --run-id resumes as before.
    args, report, started, tee = (_TRAINING[k] for k in ("args", "report", "started", "tee"))
    _TRAINING.clear()
    tee.stop()
    report.update(status="interrupted", exit_code=code,
                  error={"kind": "interrupted", "message": "the run was interrupted; "
                         "the same --run-id resumes it from the last epoch backup", "fix": ""})
    report["wall_seconds"] = round(time.perf_counter() - started, 3)
    written = write_report(report, worker_dir(args, report))
    summary(report, report_written=written, hidden_log_lines=tee.hidden)
    exit_now(code)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # As PID 1 without --init, Python ignores SIGTERM unless it handles it: handle it so
    # `docker stop` ends the run at once instead of waiting 10 s for SIGKILL.
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.perf_counter()
    report: dict = {"schema_version": REPORT_SCHEMA, "run_id": args.run_id,
                    "started_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "require_gpu": args.require_gpu, "gpus": [], **declared_stack()}
    output_ready = False
    # The terminal gets TF's log without its known noise; the tee keeps all of it for the report.
    tee = StderrTee(echo_filter=None if args.verbose else LogFilter()).start()
    _STARTED[:] = [started, tee]
    try:
        code = run(args, report, tee)
        output_ready = True
        report.update(status="ok", exit_code=code)
    except SmokeFailure as exc:
        output_ready = exc.kind != "output-dir"
        report.update(status="failed", exit_code=exc.exit_code,
                      error={"kind": exc.kind, "message": exc.message, "fix": exc.fix})
        if exc.tf_log:
            report["error"]["tf_log"] = exc.tf_log
    except Interrupted as exc:
        output_ready = True
        report.update(status="interrupted", exit_code=exc.exit_code,
                      error={"kind": "interrupted", "message": "the run was interrupted; "
                             "the same --run-id resumes it from the last epoch backup", "fix": ""})
    except Exception as exc:  # noqa: BLE001 - a bug of ours still ends in a report
        output_ready = True
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        report.update(status="failed", exit_code=EXIT_UNEXPECTED,
                      error={"kind": "unexpected", "message": f"{type(exc).__name__}: {first}",
                             "fix": "a bug in the smoke training: report it with report.json and the traceback above"})
    finally:
        tee.stop()
    report["wall_seconds"] = round(time.perf_counter() - started, 3)
    written = write_report(report, worker_dir(args, report) if output_ready else None)
    if not written:
        # Training may have passed, but a run whose results are not on disk has not.
        if report["exit_code"] == EXIT_OK:
            report.update(status="failed", exit_code=EXIT_OUTPUT)
        report.setdefault("error", {"kind": "disk-full", "message": "report.json could not be written "
                                    f"to {args.output_dir} (see the ERROR above)",
                                    "fix": "free space on the disk behind the runs directory, "
                                    "or pass --runs-dir on a larger disk"})
    summary(report, report_written=written and output_ready, hidden_log_lines=tee.hidden)
    if args.json:
        print(json.dumps(strict_json(report), indent=2, sort_keys=True, allow_nan=False))
    return report["exit_code"]


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown. A run that failed inside fit() leaves
    tf.data's endless-pipeline threads running, and TensorFlow then segfaults while Python
    finalises (exit 139 instead of the run's own code: seen here on a full disk). The report
    is already fsynced, and every writer of a finished fit() is closed. GpuMonitor's
    nvidia-smi is stopped first (os._exit skips atexit)."""
    stop_all_samplers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

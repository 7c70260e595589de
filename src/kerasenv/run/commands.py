"""`kerasenv smoke`, `run`, `shell`, `lab` and `multiworker`: their options, and handlers that
hand them to run/session.py (multiworker: run/multiworker.py).

These commands need two things from above run/ in the layering: `auto` is doctor's pick
(host/variant_choice) and --build-missing builds (images/build). cli.py, which may import
every package, hands them in: `register(subparsers, upstream)`. Registering these commands
from cli.py itself instead would make it the catch-all it was split from again; a module of
run/ importing host/ or images/ would be an arrow back up the layers.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from . import multiworker
from . import runner
from . import session
from ..engine import docker_client
from ..engine import gpu_request
from ..matrix.schema import Matrix
from ..errors import UsageError

GPUS_HELP = ("all | N | device=0,1 | GPU-<uuid> | MIG-<uuid> | 0:1 (MIG device 1 of GPU 0) | none; "
             "auto: all when the host can give GPUs")


def register(subparsers, upstream: session.Upstream) -> None:
    for command, text in (("smoke", "run the smoke training in a variant (the verification); "
                                    "`-- FLAGS` passes smoke_train.py flags"),
                          ("run", "run a command in a variant with the current directory at /workspace: "
                                  "`kerasenv run ID -- python train.py` (default: the smoke training)"),
                          ("shell", "an interactive shell in a variant with the current directory at /workspace "
                                    "(`-- CMD...` instead of bash); exits with the shell's status")):
        s = subparsers.add_parser(command, help=text, description=text)
        _add_variant(s)
        s.add_argument("--gpus", default="auto", help=f"{GPUS_HELP} (default)")
        _add_shm_size(s, f"default {runner.DEFAULT_SHM}; Docker's is 64m")
        s.add_argument("--runs-dir", type=Path, default=Path("runs"),
                       help="host directory mounted at /workspace/runs (default ./runs)")
        _add_user(s, "the container")
        s.add_argument("--memory", help="container memory limit, e.g. 4g")
        s.add_argument("--build-missing", action="store_true", help="build the image first if it is missing")
        s.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE")
        if command != "smoke":
            _add_mounts(s, volume="also mount HOST (a path or a named volume) at CONTAINER, e.g. -v ~/data:/data:ro",
                        project="host folder mounted at /workspace, the working directory (default: .)",
                        no_project="mount no project: /workspace is the image's own (./runs still mounted)")
        if command == "run":
            s.add_argument("-i", "--interactive", action="store_true",
                           help="attach this terminal (a TTY when it is one), e.g. for `-- python`")
        if command == "smoke":
            s.add_argument("--require-gpu", action="store_true", help="exit 3 unless TensorFlow sees a GPU")
            s.add_argument("--epochs", type=int)
            s.add_argument("--batch-size", type=int)
            s.add_argument("--learning-rate", type=float)
            s.add_argument("--mixed-precision", choices=("auto", "off", "float16", "bfloat16"))
            s.add_argument("--run-id", help="name of ./runs/<run-id> (the same id resumes)")
            s.add_argument("--json", action="store_true", help="print the report on stdout")
            s.add_argument("--verbose", action="store_true",
                           help="show TensorFlow's full log, its start-up noise included")
            s.add_argument("--profile", action="store_true",
                           help="capture 6 steady steps with TensorFlow's profiler (TensorBoard's Profile tab: "
                                "`make tensorboard`) and report the input pipeline's share of step time")
        handler = {"smoke": _cmd_smoke, "run": _cmd_run, "shell": _cmd_shell}[command]
        s.set_defaults(handler=functools.partial(handler, upstream=upstream))

    text = ("JupyterLab of a variant (its -jupyter flavour) on 127.0.0.1 with a fresh token, the current "
            "directory as the notebook folder; Ctrl-C stops it")
    s = subparsers.add_parser("lab", help=text, description=text)
    _add_variant(s)
    s.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (default 8888)")
    s.add_argument("--gpus", default="auto", help=GPUS_HELP)
    _add_shm_size(s, f"default {runner.DEFAULT_SHM}")
    _add_user(s, "the container")
    _add_mounts(s, volume="also mount HOST at CONTAINER, e.g. -v ~/data:/data:ro",
                project="notebook folder, at /workspace (default: .)", no_project="mount no project folder")
    s.add_argument("--build-missing", action="store_true", help="build the image and its flavour if missing")
    s.add_argument("--detach", action="store_true",
                   help="print the URL and return, leaving the server running (`docker rm -f NAME` ends it)")
    s.set_defaults(handler=functools.partial(_cmd_lab, upstream=upstream))

    s = subparsers.add_parser("multiworker", help="train across N containers, one process each: TensorFlow's "
                                                   "MultiWorkerMirroredStrategy, or Keras's distribution over JAX "
                                                   "processes (`-- FLAGS` passes smoke_train.py flags; on JAX "
                                                   "`-- python train.py` runs your script in each)")
    s.add_argument("id", metavar="ID", help="variant id")
    s.add_argument("--workers", type=int, default=2, help="number of worker containers (default 2)")
    s.add_argument("--runs-dir", type=Path, default=Path("runs"), help="host directory for ./runs")
    s.add_argument("--run-id", help="name of runs/<run-id> (the chief's report; worker-<i>/ for the others)")
    _add_user(s, "the containers")
    s.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    s.add_argument("--gpus", default="none", help="none (the CPU, default), or one GPU or MIG slice per worker: "
                                                  "device=0,1 / device=0:0,0:1 / MIG-<uuid>,MIG-<uuid>")
    s.add_argument("--json", action="store_true", help="print the chief's report on stdout")
    s.add_argument("--cpu-devices", type=int, help="JAX on the CPU: devices per worker (JAX_NUM_CPU_DEVICES; default 2)")
    s.add_argument("--port", type=int, help="the coordinator's port (JAX, default 1234) or the workers' (TensorFlow, "
                                            "default 12345)")
    s.add_argument("--init-timeout", type=int, metavar="SECONDS",
                   help="JAX: how long the workers wait for each other at the start (default 120)")
    s.add_argument("--project", type=Path, default=Path("."),
                   help="with a command after --: the folder mounted at /workspace, its working directory (default .)")
    s.set_defaults(handler=functools.partial(_cmd_multiworker, upstream=upstream))


# Options several of these commands share; the help text may differ by command.

def _add_variant(s) -> None:
    s.add_argument("id", metavar="ID", help="variant id, or auto (doctor's recommendation)")


def _add_shm_size(s, note: str) -> None:
    s.add_argument("--shm-size", default=runner.DEFAULT_SHM, help=f"shared memory ({note})")


def _add_user(s, where: str) -> None:
    s.add_argument("--user", help=f"UID:GID inside {where} (default: yours)")


def _add_mounts(s, *, volume: str, project: str, no_project: str) -> None:
    """-v, and the project folder at /workspace: --project DIR or --no-project."""
    s.add_argument("-v", "--volume", action="append", default=[], metavar="HOST:CONTAINER[:ro]", help=volume)
    where = s.add_mutually_exclusive_group()
    where.add_argument("--project", type=Path, default=Path("."), help=project)
    where.add_argument("--no-project", action="store_true", help=no_project)


def _request(args, **overrides) -> session.Request:
    """smoke, run and shell's options as a session.Request."""
    fields = dict(variant_id=args.id, command=args.cmd, gpus=args.gpus, shm_size=args.shm_size,
                  runs_dir=args.runs_dir, user=args.user, memory=args.memory, env=args.env,
                  build_missing=args.build_missing)
    if "no_project" in args:  # run and shell; the smoke mounts no project
        fields.update(project=None if args.no_project else args.project, volumes=args.volume)
    return session.Request(**{**fields, **overrides})


def _cmd_smoke(args, matrix: Matrix, *, upstream: session.Upstream) -> int:
    flags = runner.smoke_flags(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
                               mixed_precision=args.mixed_precision, require_gpu=args.require_gpu,
                               verbose=args.verbose, profile=args.profile)
    return session.run_workload(matrix, upstream, _request(args, smoke=True, flags=flags, run_id=args.run_id,
                                                           json=args.json))


def _cmd_run(args, matrix: Matrix, *, upstream: session.Upstream) -> int:
    return session.run_workload(matrix, upstream, _request(args, interactive=args.interactive))


def _cmd_shell(args, matrix: Matrix, *, upstream: session.Upstream) -> int:
    return session.run_workload(matrix, upstream, _request(args, command=args.cmd or ["bash"], interactive=True))


def _cmd_lab(args, matrix: Matrix, *, upstream: session.Upstream) -> int:
    return session.run_lab(matrix, upstream, session.LabRequest(
        variant_id=args.id, port=args.port, gpus=args.gpus, shm_size=args.shm_size, user=args.user,
        project=None if args.no_project else args.project, volumes=args.volume,
        build_missing=args.build_missing, detach=args.detach))


def _cmd_multiworker(args, matrix: Matrix, *, upstream: session.Upstream) -> int:
    v = upstream.chooser.named(matrix, args.id)
    spec = gpu_request.parse(args.gpus)
    extra = list(args.cmd)
    # Refused before Docker is asked for anything (bad flags, the wrong backend).
    multiworker.check_options(v, workers=args.workers, command=extra if multiworker.is_command(extra) else None,
                              cpu_devices=args.cpu_devices, port=args.port, gpus=spec.kind != "none")
    if args.init_timeout is not None and args.init_timeout < 5:
        raise UsageError(f"--init-timeout {args.init_timeout}: at least 5 s")
    specs = gpu_request.per_worker(spec, args.workers) if args.workers >= 2 else []  # < 2: multiworker says so
    run_id = args.run_id or runner.new_run_id("mw-")
    client = docker_client.client()
    gpus = [upstream.gpus.resolve(client, v, s, say=session.say) for s in specs] if spec.kind != "none" else None
    extra = list(args.cmd)
    command = extra if multiworker.is_command(extra) else None
    code = multiworker.run(client, v, workers=args.workers, runs_dir=args.runs_dir, run_id=run_id,
                           smoke_args=[] if command else extra, user=args.user, timeout=args.timeout, gpus=gpus,
                           command=command, cpu_devices=args.cpu_devices, port=args.port,
                           init_timeout=args.init_timeout, project=args.project)
    report = runner.report_path(args.runs_dir, run_id)
    if args.json and report.exists():
        sys.stdout.write(report.read_text())
    print(f"kerasenv: chief's report {report}", file=sys.stderr)
    return code

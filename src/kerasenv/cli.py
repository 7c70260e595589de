"""`kerasenv` command line: argument parsing and error reporting only."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from . import __version__
from .errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_OK, EXIT_OOM, EXIT_TERMINATED, KerasenvError, Terminated, UsageError
from .matrix.schema import DEFAULT_MATRIX, Matrix, load


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kerasenv",
        description="Versioned TensorFlow + Keras images that prove they work on your GPU.")
    p.add_argument("--version", action="version", version=f"kerasenv {__version__}")
    p.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX,
                   help="version matrix file (default: images/matrix.toml)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("list", help="list the variants of the matrix")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="the README variant table")
    fmt.add_argument("--json", action="store_true", help="one object per variant")
    fmt.add_argument("--ids", action="store_true", help="ids only, one a line")
    s.add_argument("--debian-based", action="store_true",
                   help="only the variants built FROM Debian (all but ROCm): what `build --all` and CI build")

    s = sub.add_parser("generate", help="write Dockerfiles and the README table from the matrix")
    s.add_argument("--check", action="store_true",
                   help="write nothing; fail when a committed file differs (drift)")

    s = sub.add_parser("lock", help="re-resolve hash-locked requirements with uv (needs PyPI)")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants (default: all but ROCm)")
    s.add_argument("--ca-cert", help="CA bundle for PyPI behind a TLS-intercepting proxy")
    s.add_argument("--jupyter-only", action="store_true",
                   help="re-lock only the JupyterLab layer (requirements-jupyter.lock), on the variant's locks")

    s = sub.add_parser("build", help="build variant images as kerasenv:<id>")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants to build")
    s.add_argument("--all", action="store_true", help="every variant except ROCm")
    s.add_argument("--base-image", help="FROM for the Debian-based variants "
                   "(default: the matrix's, debian:bookworm-slim; env BASE_IMAGE)")
    s.add_argument("--ca-cert", help="extra CA trusted in the builder stages only (env "
                   "KERASENV_CA_CERT; default: the host's PIP_CERT / REQUESTS_CA_BUNDLE / SSL_CERT_FILE)")
    s.add_argument("--no-ca-cert", action="store_true", help="do not pass any CA to the build")
    s.add_argument("--no-cache", action="store_true", help="build without Docker's layer cache")
    s.add_argument("--jupyter", action="store_true",
                   help="also build the JupyterLab flavour kerasenv:<id>-jupyter (cpu and cuda variants)")
    s.add_argument("--drop-build-cache", action="store_true",
                   help="remove each build's builder-stage images once its image is built: about the image's "
                        "size again in disk; the next build of that variant starts cold")

    s = sub.add_parser("base-offline", help="make the Debian base image with debootstrap (no registry)")
    s.add_argument("--suite", default="bookworm", help="Debian suite (default: bookworm)")
    s.add_argument("--tag", help="image name (default: debian:<suite>-slim)")
    s.add_argument("--mirror", default="http://deb.debian.org/debian", help="Debian mirror")
    s.add_argument("--force", action="store_true", help="rebuild even if the tag exists")

    s = sub.add_parser("doctor", help="host preflight and a verdict for every variant (works without a GPU)")
    s.add_argument("--json", action="store_true", help="machine-readable report")
    s.add_argument("--require-gpu", action="store_true", help="exit 3 when no GPU variant can run here")
    s.add_argument("--container", metavar="ID", help="also run nvidia-smi -L and a TF GPU probe inside this image")
    s.add_argument("--gpus", default="all", help="GPU request for --container (default: all)")

    for command, text in (("smoke", "run the smoke training in a variant (the verification); "
                                    "`-- FLAGS` passes smoke_train.py flags"),
                          ("run", "run a command in a variant with the current directory at /workspace: "
                                  "`kerasenv run ID -- python train.py` (default: the smoke training)"),
                          ("shell", "an interactive shell in a variant with the current directory at /workspace "
                                    "(`-- CMD...` instead of bash); exits with the shell's status")):
        s = sub.add_parser(command, help=text, description=text)
        s.add_argument("id", metavar="ID", help="variant id, or auto (doctor's recommendation)")
        s.add_argument("--gpus", default="auto",
                       help="all | N | device=0,1 | none; auto: all when the host can give GPUs (default)")
        s.add_argument("--shm-size", default="2g", help="shared memory (default 2g; Docker's is 64m)")
        s.add_argument("--runs-dir", type=Path, default=Path("runs"),
                       help="host directory mounted at /workspace/runs (default ./runs)")
        s.add_argument("--user", help="UID:GID inside the container (default: yours)")
        s.add_argument("--memory", help="container memory limit, e.g. 4g")
        s.add_argument("--build-missing", action="store_true", help="build the image first if it is missing")
        s.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE")
        if command != "smoke":
            s.add_argument("-v", "--volume", action="append", default=[], metavar="HOST:CONTAINER[:ro]",
                           help="also mount HOST (a path or a named volume) at CONTAINER, e.g. -v ~/data:/data:ro")
            where = s.add_mutually_exclusive_group()
            where.add_argument("--project", type=Path, default=Path("."),
                               help="host folder mounted at /workspace, the working directory (default: .)")
            where.add_argument("--no-project", action="store_true",
                               help="mount no project: /workspace is the image's own (./runs still mounted)")
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

    text = ("JupyterLab of a variant (its -jupyter flavour) on 127.0.0.1 with a fresh token, the current "
            "directory as the notebook folder; Ctrl-C stops it")
    s = sub.add_parser("lab", help=text, description=text)
    s.add_argument("id", metavar="ID", help="variant id, or auto (doctor's recommendation)")
    s.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (default 8888)")
    s.add_argument("--gpus", default="auto", help="all | N | device=0,1 | none; auto: all when the host can give GPUs")
    s.add_argument("--shm-size", default="2g", help="shared memory (default 2g)")
    s.add_argument("--user", help="UID:GID inside the container (default: yours)")
    s.add_argument("-v", "--volume", action="append", default=[], metavar="HOST:CONTAINER[:ro]",
                   help="also mount HOST at CONTAINER, e.g. -v ~/data:/data:ro")
    where = s.add_mutually_exclusive_group()
    where.add_argument("--project", type=Path, default=Path("."), help="notebook folder, at /workspace (default: .)")
    where.add_argument("--no-project", action="store_true", help="mount no project folder")
    s.add_argument("--build-missing", action="store_true", help="build the image and its flavour if missing")
    s.add_argument("--detach", action="store_true",
                   help="print the URL and return, leaving the server running (`docker rm -f NAME` ends it)")

    s = sub.add_parser("multiworker", help="train across N containers with MultiWorkerMirroredStrategy "
                                            "(`-- FLAGS` passes smoke_train.py flags)")
    s.add_argument("id", metavar="ID", help="variant id")
    s.add_argument("--workers", type=int, default=2, help="number of worker containers (default 2)")
    s.add_argument("--runs-dir", type=Path, default=Path("runs"), help="host directory for ./runs")
    s.add_argument("--run-id", help="name of runs/<run-id> (the chief's report; worker-<i>/ for the others)")
    s.add_argument("--user", help="UID:GID inside the containers (default: yours)")
    s.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    s.add_argument("--json", action="store_true", help="print the chief's report on stdout")

    for command, text in (("push", "tag (short, full, latest-*) and push variant images to a registry"),
                          ("pull", "pull variant images and check their labels against the matrix")):
        s = sub.add_parser(command, help=text)
        s.add_argument("ids", nargs="+", metavar="ID")
        s.add_argument("--registry", required=True, help="e.g. ghcr.io/you, or 127.0.0.1:5000")
        s.add_argument("--json", action="store_true", help="one JSON object per image on stdout")

    s = sub.add_parser("matrix", help="the variant matrix for CI (GitHub Actions `fromJSON`)")
    s.add_argument("--github", action="store_true", required=True, help="a JSON list for strategy.matrix.include")
    s.add_argument("--family", choices=("cpu", "cuda", "rocm"), action="append",
                   help="only these families (repeatable; default all)")

    s = sub.add_parser("sbom", help="CycloneDX JSON SBOM of an image's Python environment")
    s.add_argument("id", metavar="ID")
    s.add_argument("-o", "--output", type=Path, help="file to write (default: sbom-<id>.cdx.json; - for stdout)")

    s = sub.add_parser("tags", help="the tags of each variant")
    s.add_argument("ids", nargs="*", metavar="ID")
    s.add_argument("--registry", default="", help="prefix the repository with this registry")

    s = sub.add_parser("size", help="image sizes, layer attribution, shared bytes, budgets")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants (default: every one built locally)")
    s.add_argument("--check", action="store_true", help="exit 1 when an image exceeds its budget")
    s.add_argument("--json", type=Path, metavar="FILE",
                   help="also write the sizes as JSON, e.g. benchmarks/results/sizes.json for the report (- for stdout)")

    s = sub.add_parser("bench", help="training throughput on the CPU and each GPU: JSON results and the report")
    s.add_argument("id", nargs="?", metavar="ID",
                   help="variant (default: the default GPU image when this host can give GPUs, else the CPU image)")
    s.add_argument("--quick", action="store_true", help="a short run: batch sizes 32,256, jit off, short time boxes")
    s.add_argument("--models", help="conv,mlp (default: both)")
    s.add_argument("--batch-sizes", help="comma-separated (default 32,128,512,1024; --quick 32,256)")
    s.add_argument("--jit", help="XLA jit_compile settings, off,on (default both; --quick off)")
    s.add_argument("--precision", help="auto (default: float32, plus float16 / bfloat16 on GPUs with compute "
                                       "capability >= 7.0 / 8.0) or a list of off,float16,bfloat16")
    s.add_argument("--gpus", default="auto", help="auto | all | none | host GPU indexes like 0,1 "
                                                  "(each GPU is measured on its own; default auto)")
    s.add_argument("-o", "--output-dir", type=Path, help="benchmark directory: results/ in it, report.md and "
                                                         "charts/ (default ./benchmarks)")
    s.add_argument("--timeout", type=float, default=1800, help="give up on a device after this many seconds")
    s.add_argument("--report-only", action="store_true", help="measure nothing; regenerate the report from results/")

    s = sub.add_parser("bench-report", help="regenerate the benchmark report (report.md, charts/) from results/")
    s.add_argument("-o", "--output-dir", type=Path, help="benchmark directory (default ./benchmarks)")

    s = sub.add_parser("clean", help="remove the project's containers, networks and superseded images "
                                     "(keeps Docker's build cache)")
    s.add_argument("--images", action="store_true",
                   help="also remove every kerasenv:<id> image and the build cache of its stages")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` goes to the container: a command (run) or extra
    # smoke_train.py flags (smoke). Split before argparse, which would mix them up.
    extra: list[str] = []
    if "--" in argv:
        extra, argv = argv[argv.index("--") + 1:], argv[: argv.index("--")]
    args = _parser().parse_args(argv)
    args.cmd = extra
    # SIGTERM is handled like Ctrl-C so `finally` blocks clean up (containers, temp files),
    # and exits 143 as a process killed by SIGTERM would.
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        matrix = load(args.matrix)
        return COMMANDS[args.command](args, matrix) or EXIT_OK
    except KerasenvError as exc:
        if args.debug:
            raise
        print(f"kerasenv: error: {exc.message}", file=sys.stderr)
        if exc.details:
            print(exc.details, file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `kerasenv list | head -1`: the reader left. Say nothing more, as `cat` would;
        # stdout goes to /dev/null so the interpreter's final flush cannot fail again.
        # https://docs.python.org/3/library/signal.html#note-on-sigpipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"kerasenv: {'terminated (SIGTERM)' if terminated else 'interrupted'}: nothing was left "
              "running; `make clean` removes leftovers of a CLI that was killed outright", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


def _say(message: str) -> None:
    """Progress and notes go to stderr; stdout is the command's output."""
    print(message, file=sys.stderr)


def _raise_terminated(signum, frame):
    # Only the first SIGTERM interrupts: a second one during clean-up must not cut it short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def _cmd_list(args, matrix: Matrix) -> int:
    from .matrix import table

    if args.markdown:
        sys.stdout.write(table.markdown(matrix))
    elif args.ids:
        print("\n".join(v.id for v in (matrix.debian_based if args.debian_based else matrix.variants)))
    elif args.json:
        rows = []
        for v in matrix.variants:
            row = {k: val for k, val in vars(v).items() if val is not None and k != "gpu_evidence"}
            row.update(image=v.image_ref, min_driver=v.min_driver, min_driver_ptx_jit=v.min_driver_ptx,
                       cuda_wheels_driver=v.min_driver_toolkit,
                       cuda_compute_capabilities=list(v.compute_capabilities),
                       cuda_stack_provenance=vars(v.provenance) if v.provenance else None)
            rows.append({k: val for k, val in row.items() if val not in (None, [])})
        print(json.dumps(rows, indent=2))
    else:
        for v in matrix.variants:
            stack = {"cuda": f"CUDA {v.cuda} / cuDNN {v.cudnn}", "rocm": f"ROCm {v.rocm}"}.get(v.family, "CPU")
            print(f"{v.id:<18} TF {v.tensorflow:<7} Keras {v.keras:<7} Python {v.python:<5} {stack}")
            if v.provenance:
                print(f"{'':<18} stack: {v.provenance.one_line()}")
    return 0


def _cmd_generate(args, matrix: Matrix) -> int:
    from .build import generate

    root = matrix.path.parent.parent
    if args.check:
        drift = generate.check(matrix, root)
        for item in drift:
            print(f"drift: {item}", file=sys.stderr)
        if drift:
            raise KerasenvError(f"{len(drift)} generated file(s) out of date with {matrix.path}: "
                                "run `make generate` (and `kerasenv lock ID` for locks)")
        print(f"generated files match {matrix.path}")
        return 0
    for path in generate.write(matrix, root):
        print(f"wrote {path}")
    return 0


def _cmd_lock(args, matrix: Matrix) -> int:
    from .build import locks

    ids = args.ids or [v.id for v in matrix.variants if v.family != "rocm"]
    for v in matrix.select(ids):
        if v.family == "rocm":
            print(f"{v.id}: nothing to lock (AMD's base image brings TensorFlow)")
            continue
        folder = matrix.path.parent / v.id
        if not args.jupyter_only:
            for path in locks.write(v, folder, locks.resolve(v, ca_cert=args.ca_cert, folder=folder)):
                print(f"wrote {path}")
        if matrix.jupyter and v in matrix.with_jupyter():
            lab = matrix.jupyter.jupyterlab
            pins = locks.resolve_jupyter(v, folder, lab, ca_cert=args.ca_cert)
            print(f"wrote {locks.write_jupyter(v, folder, lab, pins)} ({len(pins)} packages)")
    return 0


def _cmd_build(args, matrix: Matrix) -> int:
    from .build import images as build
    from .engine import docker_client

    if args.all:
        variants = matrix.debian_based
    elif args.ids:
        variants = matrix.select(args.ids)
    else:
        raise UsageError(f"name the variants to build (or --all); valid ids: {', '.join(matrix.ids)}")
    ca_cert = None if args.no_ca_cert else build.default_ca_cert(args.ca_cert)
    if ca_cert:
        build.read_ca_cert(ca_cert)  # fail before touching Docker
    client = docker_client.client()
    if args.jupyter and not [v for v in variants if v in matrix.with_jupyter()]:
        raise UsageError(f"--jupyter: none of {', '.join(v.id for v in variants)} has a JupyterLab flavour "
                         f"(those that do: {', '.join(v.id for v in matrix.with_jupyter())})")
    client = docker_client.client()
    options = dict(base_image=args.base_image or os.environ.get("BASE_IMAGE"), ca_cert=ca_cert, no_cache=args.no_cache)
    results = []
    for v in variants:
        built = [build.build(client, matrix, v, **options)]
        if args.jupyter and v in matrix.with_jupyter():
            built.append(build.build(client, matrix, v, jupyter=True, **options))
        for result in built if args.drop_build_cache else ():
            build.drop_build_cache(client, result, lambda line: print(line, file=sys.stderr))
        results += [(r.variant.jupyter_ref if i else v.image_ref, r) for i, r in enumerate(built)]
    for ref, r in results:
        print(f"{ref}\t{r.size_bytes / 1e9:.2f} GB\t{r.seconds:.0f} s")
    return 0


def _cmd_base_offline(args, matrix: Matrix) -> int:
    from .build import base_offline
    from .engine import docker_client

    base_offline.make(docker_client.client(), suite=args.suite, tag=args.tag, mirror=args.mirror,
                      force=args.force, say=lambda m: print(m, file=sys.stderr))
    return 0


def _cmd_clean(args, matrix: Matrix) -> int:
    from .build import clean
    from .engine import docker_client

    done = clean.clean(docker_client.client(), matrix, images=args.images, say=print)
    print(f"clean: {done.containers} container(s), {done.reclaimed_bytes / 1e6:.0f} MB reclaimed")
    return 0


def _cmd_size(args, matrix: Matrix) -> int:
    from .engine import docker_client
    from .build import sizes

    client = docker_client.client()
    variants = sizes.built_variants(client, matrix, args.ids)
    measured = sizes.measure_variants(client, variants)
    # With `--json -` stdout is the JSON document alone; the table goes to stderr.
    table = sys.stderr if str(args.json) == "-" else sys.stdout
    print(f"{'image':<26}{'total':>9}{'budget':>9}" + "".join(f"{p:>12}" for p in sizes.PARTS), file=table)
    for v in variants:
        m = measured[v.id]
        budget = f"{v.size_budget_mb / 1000:.2f}" if v.size_budget_mb else "-"
        print(f"{v.image_ref:<26}{m.total / 1e9:>8.2f}G{budget:>8}G"
              + "".join(f"{m.parts.get(p, 0) / 1e6:>11.0f}M" for p in sizes.PARTS), file=table)
    shared = sizes.shared_pairs(measured)
    for a, b, nbytes in shared:
        print(f"shared by {a} and {b}: {nbytes / 1e9:.2f} GB", file=table)
    if args.json:
        _write_sizes_json(args.json, variants, measured, shared)
    over = sizes.over_budget(variants, measured)
    if args.check and over:
        raise KerasenvError("over budget: " + ", ".join(
            f"{v.id} {measured[v.id].total / 1e9:.2f} GB > {v.size_budget_mb / 1000:.2f} GB" for v in over))
    return 0


def _write_sizes_json(path: Path, variants, measured, shared) -> None:
    from .bench import throughput as bench
    from .bench import report as bench_report

    doc = bench_report.sizes_document(variants, measured, shared)
    if str(path) == "-":
        print(json.dumps(doc, indent=2))
    else:
        bench.write_json(path, doc)
        print(f"wrote {path}", file=sys.stderr)


def _cmd_bench(args, matrix: Matrix) -> int:
    import time

    from .bench import throughput as bench
    from .bench import report as bench_report
    from .engine import docker_client
    from .engine import docker_gpus
    from .host import doctor
    from .host import variant_choice as variants

    if args.report_only:
        return _cmd_bench_report(args, matrix)
    # Every input is checked before Docker is asked anything.
    settings = bench.settings_from(models=args.models, batch_sizes=args.batch_sizes, jit=args.jit,
                                   precision=args.precision, quick=args.quick)
    gpus = bench.parse_gpus(args.gpus)
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    v = variants.named(matrix, args.id or None)
    root = args.output_dir or bench.BENCH_ROOT
    client = docker_client.client()
    host_gpus = doctor.probe_nvidia()
    can_give = gpus != "none" and docker_gpus.can_give(client)
    if v is None:
        v = variants.default_for_gpus(matrix, gpus, host_gpus, can_give)
        print(f"kerasenv: benchmarking {v.image_ref}", file=sys.stderr)
    devices = bench.plan_devices(v, gpus, host_gpus, can_give, say=_say)
    host = bench.host_info(client, host_gpus)
    started = time.perf_counter()
    runs = [bench.run_device(client, v, d, settings, root, host=host, timeout=args.timeout) for d in devices]
    wall = time.perf_counter() - started
    for run in runs:
        for line in bench.summary_lines(run.document):
            print(line)
    written = bench_report.generate(root)
    print(f"kerasenv: bench wall time {wall:.0f} s; report {written['report']} "
          f"({len(written) - 1} chart(s) in {written['report'].parent / 'charts'})", file=sys.stderr)
    return 0


def _cmd_bench_report(args, matrix: Matrix) -> int:
    from .bench import throughput as bench
    from .bench import report as bench_report

    root = args.output_dir or bench.BENCH_ROOT
    if not (root / "results").is_dir():
        raise UsageError(f"{root / 'results'} does not exist: run `kerasenv bench` first (or pass -o DIR)")
    written = bench_report.generate(root)
    print(f"wrote {written['report']}")
    for name, path in written.items():
        if name != "report":
            print(f"wrote {path}")
    return 0


def _cmd_doctor(args, matrix: Matrix) -> int:
    from .host import container_probe
    from .engine import docker_client
    from .host import doctor

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
              "above say what to fix (driver, NVIDIA Container Toolkit), then rerun `kerasenv doctor`",
              file=sys.stderr)
        return 3
    return 0


def _cmd_run(args, matrix: Matrix) -> int:
    return _run_container(args, matrix, smoke=False)


def _cmd_smoke(args, matrix: Matrix) -> int:
    return _run_container(args, matrix, smoke=True)


def _cmd_shell(args, matrix: Matrix) -> int:
    args.cmd = args.cmd or ["bash"]
    args.interactive = True
    return _run_container(args, matrix, smoke=False)


def _run_container(args, matrix: Matrix, *, smoke: bool) -> int:
    from .build import images as build
    from .engine import docker_client
    from .engine import docker_gpus
    from .run import mounts
    from .run import runner
    from .host import variant_choice as variants

    # Everything that can be checked is, before Docker is asked anything.
    v = variants.named(matrix, None if args.id == variants.AUTO else args.id)
    runner.check_options(gpus=args.gpus, shm_size=args.shm_size, memory=args.memory, runs_dir=args.runs_dir,
                         user=args.user)
    project = None if smoke or args.no_project else args.project
    mounts.plan(project=project, runs_dir=None, volumes=getattr(args, "volume", []), cwd=Path.cwd())
    client = docker_client.client()
    if v is None:
        v, reason = variants.recommended(matrix, client)
        print(f"kerasenv: using {v.id} ({reason})", file=sys.stderr)
    if args.build_missing and not client.images.list(name=v.image_ref):
        build.build(client, matrix, v, ca_cert=build.default_ca_cert(None))
    gpus = docker_gpus.request_for(client, v, args.gpus, say=_say)
    env = runner.parse_env(args.env)
    flags = runner.smoke_flags(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
                               mixed_precision=args.mixed_precision, require_gpu=args.require_gpu,
                               verbose=args.verbose, profile=args.profile) if smoke else []
    cmd, run_id = runner.workload(v, args.cmd, smoke=smoke, run_id=getattr(args, "run_id", None), flags=flags)
    result = runner.run(client, v, cmd, gpus=gpus, shm_size=args.shm_size, runs_dir=args.runs_dir,
                        user=args.user, env=env, memory=args.memory, kind="smoke" if smoke else "run",
                        missing_hint=" (or pass --build-missing)",
                        network="none" if smoke else None,
                        project=project, volumes=getattr(args, "volume", ()),
                        interactive=getattr(args, "interactive", False),
                        stdout=None if smoke else sys.stdout)  # `run`: the command's stdout is ours
    if result.oom_killed:
        limit = runner.format_limit(result.memory_limit) if result.memory_limit else "host memory"
        print(f"kerasenv: error: the container was OOM-killed (limit {limit}): lower BATCH_SIZE or "
              "raise --memory", file=sys.stderr)
        return EXIT_OOM
    if result.exit_code == 137:
        resume = f" --run-id {run_id}" if run_id else ""
        print("kerasenv: error: the container was killed (SIGKILL, e.g. `docker kill`), not by the OOM killer: "
              f"rerun the same command{resume} to resume from the last epoch backup", file=sys.stderr)
    if run_id:
        report = runner.report_path(args.runs_dir, run_id)
        if getattr(args, "json", False) and report.exists():
            sys.stdout.write(report.read_text())
        print(f"kerasenv: report {report}" if report.exists() else
              f"kerasenv: no report was written ({report})", file=sys.stderr)
    return result.exit_code


def _cmd_lab(args, matrix: Matrix) -> int:
    from .build import images as build
    from .engine import docker_client
    from .engine import docker_gpus
    from .run import lab
    from .run import mounts
    from .run import runner
    from .host import variant_choice as variants

    v = variants.named(matrix, None if args.id == variants.AUTO else args.id)
    if v is not None and v not in matrix.with_jupyter():
        raise UsageError(f"{v.id} has no JupyterLab flavour; those that do: "
                         f"{', '.join(x.id for x in matrix.with_jupyter())}")
    runner.check_options(gpus=args.gpus, shm_size=args.shm_size, memory=None, runs_dir=None, user=args.user)
    project = None if args.no_project else args.project
    mounts.plan(project=project, runs_dir=None, volumes=args.volume, cwd=Path.cwd())
    lab.check_port(args.port)
    client = docker_client.client()
    if v is None:
        v, reason = variants.recommended(matrix, client)
        if v not in matrix.with_jupyter():  # ROCm: AMD's image, no flavour built on it
            v, reason = matrix.get(matrix.default_cpu), f"{v.id} has no JupyterLab flavour; the CPU image's instead"
        print(f"kerasenv: using {v.id} ({reason})", file=sys.stderr)
    if args.build_missing and not client.images.list(name=v.jupyter_ref):
        ca_cert = build.default_ca_cert(None)
        if not client.images.list(name=v.image_ref):
            build.build(client, matrix, v, ca_cert=ca_cert)
        build.build(client, matrix, v, jupyter=True, ca_cert=ca_cert)
    gpus = docker_gpus.request_for(client, v, args.gpus, say=_say)
    token = lab.new_token()
    result = runner.run(client, v, None, image=v.jupyter_ref, gpus=gpus, shm_size=args.shm_size, runs_dir=None,
                        user=args.user, env={"JUPYTER_TOKEN": token}, kind="lab", project=project,
                        volumes=args.volume, ports=lab.ports(args.port), detach=args.detach,
                        missing_hint=" --jupyter (or pass --build-missing)",
                        on_started=lab.announce(args.port, token, _say, wait=args.detach))
    if args.detach:
        print(f"kerasenv: {result.container_name} runs in the background; stop it with "
              f"`docker rm -f {result.container_name}` (or `make clean`)", file=sys.stderr)
    return result.exit_code


def _cmd_multiworker(args, matrix: Matrix) -> int:
    from .engine import docker_client
    from .run import multiworker
    from .run import runner
    from .host import variant_choice as variants

    v = variants.named(matrix, args.id)
    run_id = args.run_id or runner.new_run_id("mw-")
    code = multiworker.run(docker_client.client(), v, workers=args.workers, runs_dir=args.runs_dir, run_id=run_id,
                           smoke_args=list(args.cmd), user=args.user, timeout=args.timeout)
    report = runner.report_path(args.runs_dir, run_id)
    if args.json and report.exists():
        sys.stdout.write(report.read_text())
    print(f"kerasenv: chief's report {report}", file=sys.stderr)
    return code


def _cmd_transfer(args, matrix: Matrix) -> int:
    from .engine import docker_client
    from .publish import registry

    client = docker_client.client()
    action = registry.push if args.command == "push" else registry.pull
    stale = False
    for v in matrix.select(args.ids):
        t = action(client, matrix, v, args.registry)
        stale = stale or bool(t.stale)
        line = {"variant": v.id, "ref": t.ref, "digest": t.digest, "seconds": round(t.seconds, 1),
                "layers_transferred": t.layers_sent, "layers_already_there": t.layers_skipped,
                "stale_labels": {k: list(pair) for k, pair in t.stale.items()}}
        print(json.dumps(line) if args.json else
              f"{t.ref}@{t.digest}\t{t.seconds:.0f} s\t{t.layers_sent} layers sent, {t.layers_skipped} already there")
    return 0


def _cmd_matrix(args, matrix: Matrix) -> int:
    from .publish import tags

    rows = []
    for v in matrix.variants:
        if args.family and v.family not in args.family:
            continue
        stack = {"cuda": f"CUDA {v.cuda} / cuDNN {v.cudnn}", "rocm": f"ROCm {v.rocm}"}.get(v.family, "CPU")
        rows.append({"id": v.id, "family": v.family, "name": f"{v.id} (TF {v.tensorflow}, {stack})",
                     "tensorflow": v.tensorflow, "cuda": v.cuda or "", "full_tag": tags.full_tag(v)})
    print(json.dumps(rows, separators=(",", ":")))
    return 0


def _cmd_sbom(args, matrix: Matrix) -> int:
    from .engine import docker_client
    from .build import sbom

    v = matrix.get(args.id)
    bom = sbom.generate(docker_client.client(), v)
    if str(args.output) == "-":
        print(json.dumps(bom, indent=2))
        return 0
    path = args.output or Path(f"sbom-{v.id}.cdx.json")
    sbom.write(bom, path)
    print(f"wrote {path}: {len(bom.get('components', []))} components", file=sys.stderr)
    return 0


def _cmd_tags(args, matrix: Matrix) -> int:
    from .publish import tags

    for v in (matrix.select(args.ids) if args.ids else matrix.variants):
        repo = tags.repository(args.registry)
        print(" ".join(f"{repo}:{t}" for t in tags.tags(matrix, v)))
    return 0


COMMANDS = {
    "list": _cmd_list,
    "generate": _cmd_generate,
    "lock": _cmd_lock,
    "build": _cmd_build,
    "base-offline": _cmd_base_offline,
    "doctor": _cmd_doctor,
    "smoke": _cmd_smoke,
    "shell": _cmd_shell,
    "lab": _cmd_lab,
    "run": _cmd_run,
    "multiworker": _cmd_multiworker,
    "push": _cmd_transfer,
    "pull": _cmd_transfer,
    "tags": _cmd_tags,
    "sbom": _cmd_sbom,
    "matrix": _cmd_matrix,
    "size": _cmd_size,
    "bench": _cmd_bench,
    "bench-report": _cmd_bench_report,
    "clean": _cmd_clean,
}

"""`kerasenv bench`, `bench-report` and `size`: training throughput, image sizes, and the
benchmark report made of both.

`size` (images/sizes measures) is registered here: its JSON is the report's input
(bench/report.sizes_document), and so images/ needs nothing of bench/. `bench` without an id
asks host/ which image this host calls for.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ..errors import KerasenvError, UsageError
from ..matrix.schema import Matrix
from ..run.session import say


def register(subparsers) -> None:
    s = subparsers.add_parser("size", help="image sizes, layer attribution, shared bytes, budgets")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants (default: every one built locally)")
    s.add_argument("--check", action="store_true", help="exit 1 when an image exceeds its budget")
    s.add_argument("--json", type=Path, metavar="FILE",
                   help="also write the sizes as JSON, e.g. benchmarks/results/sizes.json for the report (- for stdout)")
    s.set_defaults(handler=_cmd_size)

    s = subparsers.add_parser("bench", help="training throughput on the CPU and each GPU: JSON results and the report")
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
    s.set_defaults(handler=_cmd_bench)

    s = subparsers.add_parser("bench-pull", help="pull-to-first-step: push to a throwaway registry, cold pull into a "
                                                 "throwaway containerd, run the default command; gzip vs zstd (root)")
    s.add_argument("id", nargs="?", default=None, metavar="ID", help="variant (default: the default GPU image)")
    s.add_argument("--compression", default="gzip,zstd", help="gzip, zstd or both in one run: gzip,zstd (default)")
    s.add_argument("--zstd-level", type=int, default=None, metavar="N",
                   help="zstd level for the zstd push (default: kerasenv push's, publish/compression.ZSTD_LEVEL)")
    s.add_argument("--rounds", type=int, default=1, help="cold pulls per compression, alternating (default 1)")
    s.add_argument("--platform", choices=("linux/amd64", "linux/arm64"), default="linux/amd64",
                   help="linux/arm64: the variant's arm64 image (kerasenv:ID-arm64), pulled for that platform; on an "
                        "amd64 host its default command runs under qemu, so only the pull figures are the arm64 "
                        "host's own")
    s.add_argument("--image", metavar="REF", help="measure this local image in ID's place (e.g. an experimental "
                                                  "build of it); its results go to results/pull-ID-<label>.json")
    s.add_argument("--label", default="", help="a name for this measurement, with --image (e.g. split-layers)")
    s.add_argument("--dry-run", action="store_true", help="check what it needs, start and remove the throwaway "
                                                          "registry and containerd, print the plan; measure nothing")
    s.add_argument("--work-dir", type=Path, help="where the throwaway registry and containerd live (default: the "
                                                 "system's temporary directory; a real file system, not an overlay)")
    s.add_argument("-o", "--output-dir", type=Path, help="benchmark directory: results/pull-ID.json, pull.md, "
                                                         "charts/pull.png (default ./benchmarks)")
    s.set_defaults(handler=_cmd_bench_pull)

    s = subparsers.add_parser("bench-report", help="regenerate the benchmark report (report.md, charts/) from results/")
    s.add_argument("-o", "--output-dir", type=Path, help="benchmark directory (default ./benchmarks)")
    s.set_defaults(handler=_cmd_bench_report)


def _cmd_size(args, matrix: Matrix) -> int:
    from ..images import sizes
    from ..engine import docker_client

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
    from . import report as bench_report
    from . import throughput as bench

    doc = bench_report.sizes_document(variants, measured, shared)
    if str(path) == "-":
        print(json.dumps(doc, indent=2))
    else:
        bench.write_json(path, doc)
        print(f"wrote {path}", file=sys.stderr)


def _cmd_bench(args, matrix: Matrix) -> int:
    import time

    from . import report as bench_report
    from . import throughput as bench
    from ..engine import docker_client
    from ..engine import docker_gpus
    from ..host import doctor
    from ..host import variant_choice as variants

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
    from ..host import wsl

    devices = bench.plan_devices(v, gpus, host_gpus, can_give, say=say, all_only=wsl.detect().present)
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


def _cmd_bench_pull(args, matrix: Matrix) -> int:
    from . import pull
    from . import pull_report
    from . import throughput as bench
    from ..engine import docker_client
    from ..publish import compression

    # Every input is checked before anything starts.
    compressions = pull.parse_compressions(args.compression)
    level = compression.ZSTD_LEVEL if args.zstd_level is None else args.zstd_level
    if not 1 <= level <= 22:
        raise UsageError(f"--zstd-level {level}: zstd levels are 1 to 22 (default {compression.ZSTD_LEVEL})")
    if not 1 <= args.rounds <= 20:
        raise UsageError(f"--rounds {args.rounds}: from 1 to 20")
    if args.work_dir is not None and not args.work_dir.is_dir():
        raise UsageError(f"--work-dir {args.work_dir}: not a directory; create it or leave the option out")
    v = matrix.get(args.id or matrix.default_gpu)
    if args.image and not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", args.label or ""):
        raise UsageError("--image needs --label NAME (lower-case letters, digits, dots, dashes): its results must "
                         "not overwrite the variant's own")
    if v.family == "rocm":
        raise UsageError(f"{v.id} is built FROM AMD's image and not here: choose a Debian-based variant (`kerasenv list`)")
    root = args.output_dir or bench.BENCH_ROOT
    if args.dry_run:
        for line in pull.dry_run(docker_client.client(), v, compressions, level, args.work_dir, say,
                                 image_ref=args.image or v.platform_ref(args.platform)):
            print(line)
        return 0
    arm = args.platform != "linux/amd64"
    doc = pull.measure(docker_client.client(), v, compressions, args.rounds, level, args.work_dir, say,
                       image_ref=args.image or v.platform_ref(args.platform), platform=args.platform if arm else None)
    name = f"pull-{v.id}" + ("-arm64" if arm else "") + (f"-{args.label}" if args.image else "")
    doc["label"] = args.label if args.image else ""
    bench.write_json(root / "results" / f"{name}.json", doc)
    for line in pull.summary_lines(doc):
        print(line)
    written = pull_report.generate(root)
    print(f"kerasenv: wrote {root / 'results' / f'{name}.json'} and {written['pull']}", file=sys.stderr)
    return 0


def _cmd_bench_report(args, matrix: Matrix) -> int:
    from . import pull_report
    from . import report as bench_report
    from . import throughput as bench

    root = args.output_dir or bench.BENCH_ROOT
    if not (root / "results").is_dir():
        raise UsageError(f"{root / 'results'} does not exist: run `kerasenv bench` first (or pass -o DIR)")
    written = bench_report.generate(root)
    written.update(pull_report.generate(root))
    print(f"wrote {written['report']}")
    for name, path in written.items():
        if name not in ("report",):
            print(f"wrote {path}")
    return 0

#!/usr/bin/env python3
"""Benchmark: training across containers against the single-container smoke run, same image,
same per-replica batch, measured in one run (the configurations alternate, round by round).

TensorFlow (default tf2.21-cpu): 2 workers of MultiWorkerMirroredStrategy against 1.
JAX (--variant jax0.12-cpu): 1, 2 and 4 processes of one keras.distribution job, one CPU device
each (--cpu-devices 1), so each process trains the same batch and the global batch grows with
them: the ratio is samples/s against one process, and what a step costs more than one process's
step is everything running several processes adds (on one machine mostly their sharing its
cores). What the gloo all-reduce itself costs per step is measured apart: the probe
benchmarks/probes/jax_allreduce.py, run as a user's own script across the same processes, sums
one vector of the smoke model's parameter count over them, as DataParallel does each step.

Usage: .venv/bin/python scripts/bench_multiworker.py [--variant tf2.21-cpu] [--rounds 2] [--quick]
--quick trains each configuration (JAX: 1 and 2 processes) for 2 epochs of 1536 samples (the smallest run whose smoke
verdict still passes with a margin, smoke_tests/test_user_workloads.py's SMALL_SMOKE): it shows the
benchmark runs end to end (the integration test's use), and its figures are not a measurement.
Writes benchmarks/results/multiworker-<variant>.json and prints Markdown rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLAGS = ["--epochs", "4", "--samples", "8192", "--batch-size", "64"]


def kerasenv(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "kerasenv", *args], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


JAX_FLAGS = ["--epochs", "3", "--samples", "4096", "--batch-size", "64"]
JAX_PROCESSES = (1, 2, 4)
# --quick: 1 and 2 processes, which show every path (the smoke, the multi-process job, the all-reduce
# probe across containers); 4 added 8 containers, each importing JAX, to the integration test (its
# slowest, 144 s in the cold run of 312070d), for a ratio --quick does not claim anyway.
QUICK_PROCESSES = (1, 2)
QUICK_FLAGS = ["--epochs", "2", "--samples", "1536", "--batch-size", "64"]


def step_seconds(training: dict) -> float:
    return training["global_batch_size"] / training["samples_per_second"]


PROBE = REPO / "benchmarks" / "probes" / "jax_allreduce.py"


def allreduce_probe(variant: str, processes: int, tmp: str) -> dict:
    """The probe across `processes` containers; process 0's JSON line (kerasenv prints the chief's output)."""
    project = Path(tmp, "probe")
    project.mkdir(exist_ok=True)
    shutil.copy(PROBE, project / PROBE.name)
    proc = subprocess.run([sys.executable, "-m", "kerasenv", "multiworker", variant, "--workers", str(processes),
                           "--cpu-devices", "1", "--project", str(project), "--runs-dir", tmp, "--",
                           "python", PROBE.name], cwd=REPO, capture_output=True, text=True)
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith('{"processes"')]
    if proc.returncode or not lines:
        sys.exit(f"bench-multiworker: the all-reduce probe on {processes} processes failed "
                 f"(exit {proc.returncode}): {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(lines[-1])


def bench_jax(variant: str, rounds: int, quick: bool) -> int:
    flags = QUICK_FLAGS if quick else JAX_FLAGS
    processes = QUICK_PROCESSES if quick else JAX_PROCESSES
    runs: dict[int, list[dict]] = {n: [] for n in processes}
    probes: dict[int, list[dict]] = {n: [] for n in processes if n > 1}
    with tempfile.TemporaryDirectory(prefix="kerasenv-bench-mw-") as tmp:
        for i in range(rounds):
            for n in processes:
                run_id = f"p{n}-{i}"
                if n == 1:
                    kerasenv("smoke", variant, "--runs-dir", tmp, "--run-id", run_id, "--", *flags)
                else:
                    kerasenv("multiworker", variant, "--workers", str(n), "--cpu-devices", "1", "--runs-dir", tmp,
                             "--run-id", run_id, "--", *flags)
                    probes[n].append(allreduce_probe(variant, n, tmp))
                runs[n].append(json.loads(Path(tmp, run_id, "report.json").read_text())["training"])
    sps = {n: statistics.median(t["samples_per_second"] for t in runs[n]) for n in processes}
    step = {n: statistics.median(step_seconds(t) for t in runs[n]) for n in processes}
    allreduce_ms = {n: statistics.median(p["allreduce_ms"] for p in probes[n]) for n in probes}
    out = {"variant": variant, "flags": flags, "quick": quick, "rounds": rounds, "cpus": os.cpu_count(),
           "samples_per_second": sps, "step_seconds": step,
           "ratio_to_one_process": {n: sps[n] / sps[1] for n in processes},
           "extra_seconds_per_step": {n: step[n] - step[1] for n in processes},
           "allreduce_ms": allreduce_ms, "allreduce_bytes": probes[2][0]["bytes"], "runs": runs, "probes": probes}
    path = REPO / "benchmarks" / "results" / f"multiworker-{variant}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print("| variant | processes | samples/s | ratio to 1 | ms per step | ms more than 1 | gloo all-reduce ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in processes:
        reduce = f"{allreduce_ms[n]:.1f}" if n in allreduce_ms else "-"
        print(f"| {variant} | {n} | {sps[n]:.0f} | {sps[n] / sps[1]:.2f} | {step[n] * 1000:.1f} | "
              f"{(step[n] - step[1]) * 1000:+.1f} | {reduce} |")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="tf2.21-cpu")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--quick", action="store_true",
                   help="2 epochs of 1536 samples per configuration: shows the benchmark runs, measures nothing")
    args = p.parse_args()
    if args.variant.startswith("jax"):
        return bench_jax(args.variant, args.rounds, args.quick)
    flags = QUICK_FLAGS if args.quick else FLAGS
    single, multi = [], []
    with tempfile.TemporaryDirectory(prefix="kerasenv-bench-mw-") as tmp:
        for i in range(args.rounds):
            kerasenv("smoke", args.variant, "--runs-dir", tmp, "--run-id", f"single{i}", "--", *flags)
            single.append(json.loads(Path(tmp, f"single{i}", "report.json").read_text())["training"])
            kerasenv("multiworker", args.variant, "--workers", "2", "--runs-dir", tmp, "--run-id", f"multi{i}",
                     "--", *flags)
            multi.append(json.loads(Path(tmp, f"multi{i}", "report.json").read_text())["training"])
    s = statistics.median(t["samples_per_second"] for t in single)
    m = statistics.median(t["samples_per_second"] for t in multi)
    out = {"variant": args.variant, "flags": flags, "quick": args.quick, "rounds": args.rounds, "single_samples_per_second": s,
           "two_workers_samples_per_second": m, "ratio": m / s, "single": single, "multi": multi}
    path = REPO / "benchmarks" / "results" / f"multiworker-{args.variant}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"| {args.variant} | {s:.0f} | {m:.0f} | {m / s:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

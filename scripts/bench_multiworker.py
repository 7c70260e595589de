#!/usr/bin/env python3
"""Benchmark: 2-worker MultiWorkerMirroredStrategy vs the single-container smoke run,
same image, same per-replica batch and samples, measured in one run (alternating).

Usage: .venv/bin/python scripts/bench_multiworker.py [--variant tf2.21-cpu] [--rounds 2]
Writes benchmarks/results/multiworker-<variant>.json and prints a Markdown row.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="tf2.21-cpu")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    single, multi = [], []
    with tempfile.TemporaryDirectory(prefix="kerasenv-bench-mw-") as tmp:
        for i in range(args.rounds):
            kerasenv("smoke", args.variant, "--runs-dir", tmp, "--run-id", f"single{i}", "--", *FLAGS)
            single.append(json.loads(Path(tmp, f"single{i}", "report.json").read_text())["training"])
            kerasenv("multiworker", args.variant, "--workers", "2", "--runs-dir", tmp, "--run-id", f"multi{i}",
                     "--", *FLAGS)
            multi.append(json.loads(Path(tmp, f"multi{i}", "report.json").read_text())["training"])
    s = statistics.median(t["samples_per_second"] for t in single)
    m = statistics.median(t["samples_per_second"] for t in multi)
    out = {"variant": args.variant, "flags": FLAGS, "rounds": args.rounds, "single_samples_per_second": s,
           "two_workers_samples_per_second": m, "ratio": m / s, "single": single, "multi": multi}
    path = REPO / "benchmarks" / "results" / f"multiworker-{args.variant}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"| {args.variant} | {s:.0f} | {m:.0f} | {m / s:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

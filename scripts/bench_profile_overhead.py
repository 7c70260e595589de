#!/usr/bin/env python3
"""Benchmark: what the smoke's --profile costs, wall time of the whole container run
(`kerasenv smoke`, start to exit) and the training's own time, with and without
--profile, alternating, same image.

Usage: .venv/bin/python scripts/bench_profile_overhead.py [--variant tf2.21-cpu] [--rounds 7]
Writes benchmarks/results/profile-overhead-<variant>.json and prints a Markdown row.
Where the time goes with --profile: the profiled steps run slower (tracing), the trace is
collected and written (the stop at the last profiled step), and after fit() the plugin's
input-pipeline analysis runs in a child Python (report: profile).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def smoke(variant: str, runs_dir: str, run_id: str, profile: bool) -> dict:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kerasenv", "smoke", variant, "--runs-dir", runs_dir, "--run-id", run_id,
                    *(["--profile"] if profile else [])],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    report = json.loads(Path(runs_dir, run_id, "report.json").read_text())
    training = report["training"]
    return {"wall_s": wall, "fit_s": sum(training["epoch_seconds"]), "epoch_seconds": training["epoch_seconds"],
            "profile": report.get("profile")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="tf2.21-cpu")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    plain, profiled = [], []
    with tempfile.TemporaryDirectory(prefix="kerasenv-bench-profile-") as tmp:
        for i in range(args.rounds):
            plain.append(smoke(args.variant, tmp, f"plain{i}", profile=False))
            profiled.append(smoke(args.variant, tmp, f"profiled{i}", profile=True))
    median = {name: {key: statistics.median(r[key] for r in runs) for key in ("wall_s", "fit_s")}
              for name, runs in (("plain", plain), ("profiled", profiled))}
    added_wall = median["profiled"]["wall_s"] - median["plain"]["wall_s"]
    added_fit = median["profiled"]["fit_s"] - median["plain"]["fit_s"]
    analysis = statistics.median(r["profile"]["analysis_s"] for r in profiled)
    out = {"variant": args.variant, "rounds": args.rounds, "median": median, "added_wall_s": added_wall,
           "added_fit_s": added_fit, "analysis_s": analysis, "plain": plain, "profiled": profiled}
    path = REPO / "benchmarks" / "results" / f"profile-overhead-{args.variant}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"| {args.variant} | {median['plain']['wall_s']:.1f} | {median['profiled']['wall_s']:.1f} | "
          f"{added_wall:+.1f} s ({100 * added_wall / median['plain']['wall_s']:+.0f} %) | "
          f"{added_fit:+.2f} s | {analysis:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

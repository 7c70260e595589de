#!/usr/bin/env python3
"""Benchmark: the smoke training in the container vs. in a host venv, same versions.

The host venv is installed from the image's own lock (hash-checked), so both sides run
the same TensorFlow/Keras/NumPy. Runs alternate (container, host, container, ...) to
spread machine noise over both; the ratio is of medians of steady-state samples/s.

Usage: .venv/bin/python scripts/bench_container_vs_host.py [--variant tf2.21-cpu] [--rounds 3]
Writes benchmarks/results/container-vs-host-<variant>.json and prints a Markdown row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "images" / "common" / "smoke_train.py"
SMOKE_ARGS = ["--epochs", "4", "--samples", "8192", "--batch-size", "128", "--json"]


def host_venv(variant: str) -> Path:
    venv = REPO / ".bench" / f"venv-{variant}"
    lock = REPO / "images" / variant / "requirements.lock"
    stamp = venv / ".lock-installed"
    if stamp.exists() and stamp.read_text() == lock.read_text():
        return venv
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-deps", "--require-hashes",
                    "--only-binary=:all:", "-r", str(lock)], check=True)
    stamp.write_text(lock.read_text())
    return venv


def run_once(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"benchmark run failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    t = report["training"]
    return {"samples_per_second": t["samples_per_second"], "time_to_first_step_s": t["time_to_first_step_s"],
            "process_wall_s": wall, "report_wall_s": report["wall_seconds"]}


def commands(image: str, host_python: Path, container_out: str, host_out: str) -> tuple[list[str], list[str]]:
    """One round: the smoke training in the container, then the same in the host venv."""
    container = ["docker", "run", "--rm", "--network", "none", "--shm-size", "2g", "--init",
                 "-e", "TF_CPP_MIN_LOG_LEVEL=2", image, "python", "/opt/kerasenv/smoke_train.py",
                 "--output-dir", container_out, *SMOKE_ARGS]
    # The image's default command, from the checkout: run as a script, smoke_train.py has its
    # own folder (images/common) on sys.path, so the host venv (the lock's packages only)
    # imports kerasenv_image from there, the same code as in the image.
    host = [str(host_python), str(LAUNCHER), "--output-dir", host_out, *SMOKE_ARGS]
    return container, host


def dry_run(variant: str, image: str) -> int:
    """Everything a real run needs, checked in a second: the lock the host venv is installed
    from, the image, and the smoke launcher the host runs (its argument parsing, which comes
    before any TensorFlow import, run by this Python). `make bench-container` once ran a
    launcher that had moved, and nothing noticed: this is what a test can afford to run."""
    lock = REPO / "images" / variant / "requirements.lock"
    problems = [f"{lock} is missing"] if not lock.exists() else []
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        problems.append(f"{image} is not built (make build VARIANT={variant})")
    launcher = subprocess.run([sys.executable, str(LAUNCHER), "--help"], capture_output=True, text=True)
    if launcher.returncode != 0:
        problems.append(f"{LAUNCHER} --help exited {launcher.returncode}: {launcher.stderr.strip()[-300:]}")
    if problems:
        print(f"bench-container: {'; '.join(problems)}", file=sys.stderr)
        return 2
    container, host = commands(image, REPO / ".bench" / f"venv-{variant}" / "bin" / "python", "/tmp/run0", "HOST_TMP/host0")
    print("dry run: each round runs")
    print("  " + " ".join(container))
    print("  " + " ".join(host))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="tf2.21-cpu")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dry-run", action="store_true",
                   help="check what the benchmark needs (the lock, the image, the smoke launcher) and print the "
                        "two commands of a round, without installing the host venv or training")
    args = p.parse_args()
    image = f"kerasenv:{args.variant}"
    if args.dry_run:
        return dry_run(args.variant, image)
    venv = host_venv(args.variant)
    env = {"TF_CPP_MIN_LOG_LEVEL": "2"}
    results: dict[str, list[dict]] = {"container": [], "host": []}
    with tempfile.TemporaryDirectory(prefix="kerasenv-bench-") as tmp:
        for i in range(args.rounds):
            container, host = commands(image, venv / "bin" / "python", f"/tmp/run{i}", f"{tmp}/host{i}")
            results["container"].append(run_once(container))
            results["host"].append(run_once(host, env))
    med = {side: statistics.median(r["samples_per_second"] for r in runs) for side, runs in results.items()}
    ttfs = {side: statistics.median(r["time_to_first_step_s"] for r in runs) for side, runs in results.items()}
    ratio = med["container"] / med["host"]
    out = {
        "variant": args.variant, "rounds": args.rounds, "smoke_args": SMOKE_ARGS,
        "host": {"cpu_count": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()},
        "median_samples_per_second": med, "median_time_to_first_step_s": ttfs,
        "container_over_host": ratio, "runs": results,
    }
    path = REPO / "benchmarks" / "results" / f"container-vs-host-{args.variant}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"| {args.variant} | {med['container']:.0f} | {med['host']:.0f} | {ratio:.3f} | "
          f"{ttfs['container']:.2f} s | {ttfs['host']:.2f} s |")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

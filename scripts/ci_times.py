#!/usr/bin/env python3
"""Write benchmarks/ci-times.md from the log of one `.ci/run`: the one place that keeps the
measured CI figures (total, each step of `make test`'s lanes, each build, the slowest
tests, the peak disk), so no prose has to repeat numbers that change with every run.

The file keeps one section for the last cold run (no kerasenv image in Docker at the start)
and one for the last warm run; a run replaces the section of its kind. Standard library only:
.ci/run calls it with the host's python3, before or without the tooling venv.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

STEP = re.compile(r"^\[step\] (?P<name>.+): (?P<s>\d+) s, exit (?P<rc>\d+)(?: \(at \+(?P<a>\d+)\.\.\+(?P<b>\d+) s\))?$")
BUILT = re.compile(r"^built (?P<ref>\S+): (?P<gb>[\d.]+) GB uncompressed, (?P<s>\d+) s$")
PYTEST_END = re.compile(r"^=+ (?P<summary>.*\b(?:passed|failed|error|errors)\b.*) in (?P<s>[\d.]+)s")
DURATION = re.compile(r"^(?P<s>\d+\.\d+)s (?P<when>call|setup|teardown)\s+(?P<test>\S+)$")
HEADER = """# CI times, as measured

Written by `.ci/run` ([`scripts/ci_times.py`](../scripts/ci_times.py)) from its own log at the
end of each run; commit it after a run worth keeping. Nothing else in the repository repeats
these figures. How `make test` spends its time (its three lanes) is in
[docs/contributing/ci.md](../docs/contributing/ci.md).
"""


def parse(text: str) -> dict:
    steps, builds, slowest = [], [], []
    pending_summary = None
    for line in text.splitlines():
        line = line.rstrip()
        if m := PYTEST_END.match(line):
            pending_summary = m.group("summary")
        elif m := STEP.match(line):
            tests = ""
            if m.group("name").startswith(("acceptance", "unit", "integration", "pytest")) and pending_summary:
                tests, pending_summary = pending_summary, None
            steps.append({**m.groupdict(), "tests": tests})
        elif m := BUILT.match(line):
            builds.append(m.groupdict())
        elif m := DURATION.match(line):
            slowest.append((float(m.group("s")), m.group("when"), m.group("test")))
    slowest.sort(reverse=True)
    return {"steps": steps, "builds": builds, "slowest": slowest[:20]}


def section(kind: str, data: dict, args) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"<!-- BEGIN {kind} -->", f"## Last {kind} run", "",
           f"{when}, commit `{commit or 'unknown'}`, {args.cpus} cores: **total {args.total} s "
           f"({args.total / 60:.1f} min)**, peak extra disk **{args.peak_extra_gb} GB**, "
           f"`make test` exit {args.status}; `make test-prereqs` took {args.prereqs} s.", ""]
    if args.cpu_idle:
        out += [f"The CPU's idle share by 5-minute window (seconds since the start): {args.cpu_idle}.", ""]
    if data["steps"]:
        out += ["The steps of `make test`'s lanes (seconds from the start of `.ci/run`):", "",
                "| step | seconds | from | to | exit | tests |", "| --- | ---: | ---: | ---: | ---: | --- |"]
        out += [f"| {s['name']} | {s['s']} | {s['a'] or ''} | {s['b'] or ''} | {s['rc']} | {s['tests']} |"
                for s in data["steps"]]
        out.append("")
    if data["builds"]:
        out += ["| image | uncompressed | build |", "| --- | ---: | ---: |"]
        out += [f"| `{b['ref']}` | {b['gb']} GB | {b['s']} s |" for b in data["builds"]]
        out.append("")
    if data["slowest"]:
        out += ["The slowest test phases (pytest `--durations`):", "",
                "| seconds | phase | test |", "| ---: | --- | --- |"]
        out += [f"| {s:.1f} | {when} | `{test}` |" for s, when, test in data["slowest"]]
        out.append("")
    out.append(f"<!-- END {kind} -->")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--total", type=int, required=True)
    parser.add_argument("--prereqs", type=int, required=True)
    parser.add_argument("--peak-extra-gb", required=True)
    parser.add_argument("--status", type=int, required=True)
    parser.add_argument("--cold", action="store_true", help="no kerasenv image was in Docker at the start")
    parser.add_argument("--cpus", type=int, default=len(__import__("os").sched_getaffinity(0)))
    parser.add_argument("--cpu-idle", default="", help="the CPU's idle share by window, as .ci/run logs it")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    kind = "cold" if args.cold else "warm"
    new = section(kind, parse(args.log.read_text(errors="replace")), args)
    old = args.out.read_text() if args.out.exists() else HEADER
    pattern = re.compile(rf"<!-- BEGIN {kind} -->.*?<!-- END {kind} -->\n", re.S)
    text = pattern.sub(lambda _: new, old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + new
    args.out.write_text(text)
    print(f"wrote {args.out} ({kind} run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

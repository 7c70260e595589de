"""GPU utilisation and memory over time: `nvidia-smi --query-gpu ... -lms N` sampling in
the background, and the mean over a steady-state window.

One implementation, two users: `kerasenv bench` on the host (src/kerasenv/bench/throughput.py
imports this module) and, inside the images (/opt/kerasenv/kerasenv_image/), the Keras
callback `kerasenv_image.GpuMonitor`. Standard library only, Python >= 3.10, nothing
imported from the host package.

nvidia-smi's `utilization.gpu` is "percent of time over the past sample period during
which one or more kernels was executing on the GPU", the period being between 1/6 s and
1 s depending on the product (`nvidia-smi --help-query-gpu`). A sample taken just after a
window opens therefore still covers time before it: `steady_state` drops the samples of
the first `settle_s` seconds of the window.

The query asks for `timestamp` so each sample carries nvidia-smi's own clock (host local
time, `YYYY/MM/DD HH:MM:SS.mmm`); containers share the host's clock, so the windows the
in-container bench reports (epoch seconds) line up with it. Without a timestamp column
the time a line arrived is used instead.

Recorded real outputs of such queries: tests/fixtures/nvidia-smi-query/ (SOURCES.md).
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

QUERY_FIELDS = ("timestamp", "index", "utilization.gpu", "memory.used", "memory.total")
DEFAULT_INTERVAL_MS = 200
_MISSING = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
            "insufficient permissions", "[insufficient permissions]"}
# A GPU that shares the system's RAM has no memory of its own for the driver to report: on GB10
# (DGX Spark, driver 580) nvidia-smi's Memory-Usage reads "Not Supported" and NVML's memory
# queries return NOT_SUPPORTED (tests/fixtures/nvidia-smi/gb10-580; leptonai/gpud#1170), and
# CUDA's cudaMemGetInfo says almost nothing is free (PennyLaneAI/pennylane-lightning#1357,
# NVIDIA/cuQuantum#215). Such a reading is missing, never 0 and never "full": the smoke's report
# and GpuMonitor say this instead of a figure, and no out-of-memory margin is computed from it.
# Not seen here on a GB10: which placeholder its --query-gpu prints ([N/A] or [Not Supported];
# parse_value reads both as missing).
MEMORY_NOT_REPORTED = "unified memory: not reported by the driver"
MEMORY_NOT_REPORTED_WHY = ("nvidia-smi's memory.total was N/A: a GPU that shares the system's RAM (GB10, DGX Spark) "
                           "has no memory of its own to report")

# Samplers whose nvidia-smi is running: stop_all() (also at interpreter exit) ends them, so
# an exception out of fit() never leaves an nvidia-smi loop behind.
_RUNNING: set = set()


@dataclass
class Sample:
    time: float  # epoch seconds
    index: int | None
    utilization_gpu: float | None  # percent
    memory_used_mib: float | None
    memory_total_mib: float | None


@dataclass
class Parsed:
    samples: list[Sample] = field(default_factory=list)
    skipped_lines: list[str] = field(default_factory=list)  # headers, errors, anything not a sample


def parse_fields(query: str) -> tuple[str, ...]:
    """'--query-gpu=a,b' or 'a,b' -> ('a', 'b')."""
    query = query.split("=", 1)[1] if query.startswith("--query-gpu=") else query
    return tuple(f.strip() for f in query.split(",") if f.strip())


def parse_value(text: str) -> float | None:
    """A number as nvidia-smi prints it with or without units ('97 %', '13066 MiB',
    '13066'); None for N/A, [Not Supported] and the like: a reading nvidia-smi cannot give
    is missing, never 0 (utilization.gpu is `[N/A]` on a MIG-enabled GPU and on vGPUs, and
    the driver prints every such placeholder in brackets: [Unknown Error], [GPU requires
    reset], ...). Raises ValueError otherwise."""
    value = text.strip()
    if value.lower() in _MISSING or (value.startswith("[") and value.endswith("]")):
        return None
    for unit in (" %", "%", " MiB", "MiB", " W", " MHz"):
        if value.endswith(unit):
            value = value[: -len(unit)].strip()
            break
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {text!r}")
    return number


def parse_timestamp(text: str) -> float:
    """nvidia-smi's `timestamp` field (host local time) -> epoch seconds."""
    stamp = datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f")
    return time.mktime(stamp.timetuple()) + stamp.microsecond / 1e6


def parse_output(text: str, fields: tuple[str, ...] | list[str] = QUERY_FIELDS,
                 arrival_times: list[float] | None = None) -> Parsed:
    """Parse `--query-gpu=<fields> --format=csv[,noheader][,nounits]` output, one GPU per
    line, columns in the order asked. Lines that are not samples (the csv header, an
    error such as `Failed to initialize NVML`) are kept in `skipped_lines`."""
    fields = tuple(fields)
    col = {name: i for i, name in enumerate(fields)}
    if "utilization.gpu" not in col:
        raise ValueError("the query must include utilization.gpu")
    if "timestamp" not in col and arrival_times is None:
        raise ValueError("without a timestamp field, pass the arrival time of each line")
    out = Parsed()
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            out.skipped_lines.append(line)
            continue
        try:
            when = parse_timestamp(values[col["timestamp"]]) if "timestamp" in col else arrival_times[n]
            index = int(values[col["index"]]) if "index" in col else None
            sample = Sample(
                time=when, index=index,
                utilization_gpu=parse_value(values[col["utilization.gpu"]]),
                memory_used_mib=parse_value(values[col["memory.used"]]) if "memory.used" in col else None,
                memory_total_mib=parse_value(values[col["memory.total"]]) if "memory.total" in col else None)
        except (ValueError, IndexError):
            out.skipped_lines.append(line)
            continue
        out.samples.append(sample)
    return out


def default_settle(start: float, end: float) -> float:
    """Seconds at the start of a window whose samples still average in pre-window time:
    up to 1 s (nvidia-smi's longest utilisation period), at most a quarter of the window."""
    return min(1.0, max(0.0, (end - start) * 0.25))


def steady_state(samples: list[Sample], start: float, end: float, *, index: int | None = None,
                 settle_s: float | None = None) -> dict:
    """Utilisation and memory of the samples taken in (start + settle_s, end] on GPU `index`."""
    settle = default_settle(start, end) if settle_s is None else settle_s
    chosen = [s for s in samples if (index is None or s.index == index) and start + settle < s.time <= end]
    util = [s.utilization_gpu for s in chosen if s.utilization_gpu is not None]
    used = [s.memory_used_mib for s in chosen if s.memory_used_mib is not None]
    total = [s.memory_total_mib for s in chosen if s.memory_total_mib is not None]
    result = {"samples": len(chosen), "window_s": end - start, "settle_s": settle,
              "utilization_gpu_mean": sum(util) / len(util) if util else None,
              "utilization_gpu_min": min(util) if util else None,
              "utilization_gpu_max": max(util) if util else None,
              "memory_used_mib_max": max(used) if used else None,
              "memory_total_mib": max(total) if total else None}
    if not chosen:
        result["note"] = "no sample inside the steady-state window (shorter than the sampling interval?)"
    elif not util:
        result["note"] = "utilization.gpu was N/A in every sample (e.g. a MIG instance or vGPU)"
    return result


class NvidiaSmiSampler:
    """`nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N [-i I]` in the
    background; `stop()` ends it and returns what it printed, parsed."""

    def __init__(self, exe: str | None = None, *, indexes: list[int] | None = None,
                 interval_ms: int = DEFAULT_INTERVAL_MS, fields: tuple[str, ...] = QUERY_FIELDS) -> None:
        self.exe = exe or os.environ.get("KERASENV_NVIDIA_SMI") or shutil.which("nvidia-smi")
        self.indexes, self.interval_ms, self.fields = indexes, interval_ms, tuple(fields)
        self._proc: subprocess.Popen | None = None
        self._lines: list[str] = []
        self._arrivals: list[float] = []
        self._reader: threading.Thread | None = None
        self.stderr = ""

    @property
    def available(self) -> bool:
        return bool(self.exe)

    def command(self) -> list[str]:
        cmd = [self.exe or "nvidia-smi", f"--query-gpu={','.join(self.fields)}", "--format=csv,noheader,nounits",
               "-lms", str(self.interval_ms)]
        if self.indexes:
            cmd += ["-i", ",".join(str(i) for i in self.indexes)]
        return cmd

    def start(self) -> NvidiaSmiSampler:
        if not self.exe:
            raise FileNotFoundError("nvidia-smi is not installed on this host")
        # Line-buffer it where coreutils' stdbuf exists: a pipe would otherwise hold samples back
        # (harmless either way: each sample carries its own timestamp).
        stdbuf = shutil.which("stdbuf")
        cmd = ([stdbuf, "-oL"] if stdbuf else []) + self.command()
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        _RUNNING.add(self)
        return self

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_first_line(self, timeout: float) -> bool:
        """Wait until nvidia-smi printed a line, exited or `timeout` passed; True when a
        line came (a sample or not: parse it to know)."""
        deadline = time.monotonic() + timeout
        while not self._lines and time.monotonic() < deadline:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                if self._reader is not None:
                    self._reader.join(timeout=1)  # what it printed before exiting
                break
            time.sleep(0.02)
        return bool(self._lines)

    def snapshot(self) -> Parsed:
        """What it printed so far, parsed; the loop keeps running."""
        n = len(self._lines)  # the reader appends the arrival time first
        return parse_output("\n".join(self._lines[:n]), self.fields, arrival_times=list(self._arrivals[:n]))

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._arrivals.append(time.time())
            self._lines.append(line.rstrip("\n"))

    def stop(self) -> Parsed:
        proc = self._proc
        if proc is None:
            return Parsed()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self.stderr = proc.stderr.read() if proc.stderr else ""
        self._proc = None
        _RUNNING.discard(self)
        text = "\n".join(self._lines)
        return parse_output(text, self.fields, arrival_times=list(self._arrivals))


def stop_all() -> None:
    """Stop every running sampler's nvidia-smi (at interpreter exit, and before
    os._exit()). The pipe is the last resort: an nvidia-smi whose reader died gets SIGPIPE
    at its next sample."""
    for sampler in list(_RUNNING):
        try:
            sampler.stop()
        except Exception:  # noqa: BLE001, S110 - best effort on the way out
            pass


atexit.register(stop_all)

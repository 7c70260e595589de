"""`kerasenv bench`: training throughput per device, in the project's own images.

One container per device, each removed on every exit path: the CPU (the container gets
no GPU) and every GPU on its own (`--gpus device=N`). Each runs the image's own bench,
`python -m kerasenv_image.bench` (images/common/kerasenv_image/bench/, installed in every
image at /opt/kerasenv). While a GPU container runs, `nvidia-smi --query-gpu ... -lms N`
samples that GPU on the host (kerasenv_image.gpu_sampler, the images' own sampler), and
the samples inside each configuration's steady-state window are averaged into its
utilisation.

Results: `<DIR>/results/bench-<variant>-<device>.json` (written atomically), then the
report `<DIR>/report.md` and `<DIR>/charts/*.png` are regenerated from every result
file there (`bench_report`). DIR defaults to ./benchmarks.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from kerasenv_image import bench as in_image_bench
from kerasenv_image import gpu_sampler, jsonfile
from kerasenv_image.bench.protocol import EXIT_NO_GPU, JIT_CHOICES, MODELS, PRECISIONS, RESULT_PREFIX

from .. import __version__
from ..errors import KerasenvError, UsageError
from ..matrix.schema import REPO_ROOT, Variant

BENCH_ROOT = REPO_ROOT / "benchmarks"
SCHEMA = 1  # of the host's result document (kind kerasenv-bench), which wraps the container's


class NoGpuForBench(KerasenvError):
    """GPUs were asked for, and this host (or Docker) cannot give them."""

    exit_code = EXIT_NO_GPU


@dataclass
class Settings:
    models: list[str]
    batch_sizes: list[int]
    jit: list[str]
    precision: str | list[str]  # "auto" or a list
    warmup_steps: int
    min_steps: int
    max_steps: int
    time_box_s: float  # seconds of timed steady state per configuration on the CPU
    gpu_time_box_s: float  # ... on a GPU (long enough for several utilisation samples)
    sample_interval_ms: int = gpu_sampler.DEFAULT_INTERVAL_MS
    quick: bool = False

    def container_args(self, device: str) -> list[str]:
        precision = self.precision if isinstance(self.precision, str) else ",".join(self.precision)
        box = self.gpu_time_box_s if device == "gpu" else self.time_box_s
        return ["--device", device, "--models", ",".join(self.models),
                "--batch-sizes", ",".join(str(b) for b in self.batch_sizes), "--jit", ",".join(self.jit),
                "--precision", precision, "--warmup-steps", str(self.warmup_steps),
                "--min-steps", str(self.min_steps), "--max-steps", str(self.max_steps), "--time-box", str(box)]


FULL = {"batch_sizes": [32, 128, 512, 1024], "jit": ["off", "on"], "warmup_steps": 3, "min_steps": 5,
        "max_steps": 2000, "time_box_s": 1.5, "gpu_time_box_s": 3.0}
QUICK = {"batch_sizes": [32, 256], "jit": ["off"], "warmup_steps": 2, "min_steps": 3, "max_steps": 500,
         "time_box_s": 0.3, "gpu_time_box_s": 1.0}


@dataclass
class Device:
    id: str  # cpu | gpu0 | gpu1 ...
    kind: str  # cpu | gpu
    gpus_request: str  # for gpu_request: none | device=N
    host_index: int | None = None
    name: str | None = None
    compute_capability: str | None = None
    memory_mib: int | None = None


@dataclass
class DeviceRun:
    device: Device
    path: Path
    document: dict = field(default_factory=dict)


# --- input ----------------------------------------------------------------------------

def _split(text: str) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def parse_choices(text: str, allowed: tuple[str, ...], option: str) -> list[str]:
    items = _split(text)
    bad = [x for x in items if x not in allowed]
    if not items or bad:
        shown = ", ".join(repr(b) for b in bad) if bad else "nothing"
        raise UsageError(f"{option} {text!r}: unknown {shown}; use a comma-separated list of {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def parse_batch_sizes(text: str) -> list[int]:
    items = _split(text)
    if not items or not all(x.isdigit() and 1 <= int(x) <= 65536 for x in items):
        raise UsageError(f"--batch-sizes {text!r}: use a comma-separated list of integers from 1 to 65536, "
                         "e.g. 32,128,512,1024")
    return sorted({int(x) for x in items})


def parse_precision(text: str) -> str | list[str]:
    if (text or "").strip() == "auto":
        return "auto"
    return parse_choices(text, PRECISIONS, "--precision")


def parse_gpus(text: str | None) -> str | list[int]:
    """auto | all | none | a list of host GPU indexes ("0,1")."""
    spec = (text or "auto").strip()
    if spec in ("auto", "all", "none"):
        return spec
    items = _split(spec.removeprefix("device="))
    if not items or not all(x.isdigit() for x in items):
        raise UsageError(f"--gpus {text!r}: use auto, all, none or GPU indexes like 0,1")
    return sorted({int(x) for x in items})


def settings_from(*, models: str | None, batch_sizes: str | None, jit: str | None, precision: str | None,
                  quick: bool) -> Settings:
    base = dict(QUICK if quick else FULL)
    return Settings(
        models=parse_choices(models, MODELS, "--models") if models is not None else list(MODELS),
        batch_sizes=parse_batch_sizes(batch_sizes) if batch_sizes is not None else list(base["batch_sizes"]),
        jit=parse_choices(jit, JIT_CHOICES, "--jit") if jit is not None else list(base["jit"]),
        precision=parse_precision(precision) if precision is not None else "auto",
        warmup_steps=base["warmup_steps"], min_steps=base["min_steps"], max_steps=base["max_steps"],
        time_box_s=base["time_box_s"], gpu_time_box_s=base["gpu_time_box_s"], quick=quick)


# --- host and devices --------------------------------------------------------------------

def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_info(client=None, host_gpus=None) -> dict:
    info = {"cpu_model": cpu_model(), "cpu_cores": os.cpu_count(), "memory_bytes": memory_bytes(),
            "platform": platform.platform(), "machine": platform.machine(), "gpus": []}
    if client is not None:
        try:
            info["docker"] = client.version().get("Version")
        except Exception:  # noqa: BLE001 - informational
            info["docker"] = None
    if host_gpus is not None and host_gpus.present and not host_gpus.error:
        info["nvidia_driver"] = host_gpus.driver_version
        info["gpus"] = [{"index": g.index, "name": g.name, "compute_capability": g.compute_capability,
                         "memory_mib": g.memory_mib} for g in host_gpus.gpus]
    return info


def plan_devices(v: Variant, gpus: str | list[int], host_gpus, docker_gpus: bool, say=lambda m: None,
                 all_only: bool = False) -> list[Device]:
    """The CPU always; then the GPUs asked for (auto: every GPU when the host and Docker can give them).
    `all_only`: the engine hands out every GPU or none (WSL2: NVIDIA's CUDA on WSL guide, 5.1),
    so one GPU is benchmarked through `--gpus all`, and several cannot be told apart."""
    devices = [Device(id="cpu", kind="cpu", gpus_request="none", name=cpu_model())]
    if gpus == "none":
        return devices
    if v.family != "cuda":
        if gpus == "auto":
            return devices
        raise UsageError(f"--gpus {gpus if isinstance(gpus, str) else ','.join(map(str, gpus))}: "
                         f"{v.image_ref} is a {v.family.upper()} image; GPU benchmarks run in a CUDA variant "
                         "(e.g. `kerasenv bench tf2.21-cuda12.9`)")
    available = host_gpus is not None and host_gpus.present and not host_gpus.error and bool(host_gpus.gpus)
    if not available or not docker_gpus:
        why = ("no NVIDIA GPU on this host (nvidia-smi: "
               f"{'not installed' if host_gpus is None or not host_gpus.present else host_gpus.error or 'no GPU'})"
               if not available else "Docker cannot give GPUs to containers (no NVIDIA runtime or CDI spec)")
        if gpus == "auto":
            say(f"kerasenv: {why}: benchmarking the CPU only")
            return devices
        raise NoGpuForBench(f"--gpus {gpus if isinstance(gpus, str) else ','.join(map(str, gpus))}: {why}; "
                            "`kerasenv doctor` says how to fix it")
    by_index = {g.index: g for g in host_gpus.gpus}
    wanted = sorted(by_index) if gpus in ("auto", "all") else gpus
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise UsageError(f"--gpus {','.join(map(str, gpus))}: this host has GPU index(es) "
                         f"{', '.join(map(str, sorted(by_index)))}, not {', '.join(map(str, missing))}")
    if all_only and len(by_index) > 1:
        raise UsageError(f"under WSL2 a container gets every GPU or none, so the {len(by_index)} GPUs of this host "
                         "cannot be benchmarked one by one: benchmark them on Linux, or keep one GPU visible to WSL")
    for i in wanted:
        g = by_index[i]
        devices.append(Device(id=f"gpu{i}", kind="gpu", gpus_request="all" if all_only else f"device={i}",
                              host_index=i, name=g.name,
                              compute_capability=g.compute_capability, memory_mib=g.memory_mib))
    return devices


# --- running one device ----------------------------------------------------------------

def container_command(v: Variant, settings: Settings, device: Device) -> list[str]:
    return [v.interpreter, "-m", in_image_bench.__name__, *settings.container_args(device.kind)]


class _ProgressRelay:
    """Keeps the container's whole stderr and relays only its `[bench]` progress lines
    (TensorFlow's own warnings stay out of the terminal)."""

    def __init__(self, stream) -> None:
        self.stream, self.parts, self._pending = stream, [], ""

    def write(self, text: str) -> None:
        self.parts.append(text)
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            if line.startswith("[bench]"):
                self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


def run_container(client, v: Variant, command: list[str], *, gpus_request: str, timeout: float,
                  stream=sys.stderr) -> tuple[int, str, str]:
    """Run the bench container (runner.run: labelled, always removed), its GPU request resolved
    for this engine (host/gpu_choice); relay its progress live; return (exit code, stdout, stderr)."""
    import io

    from ..host import gpu_choice
    from ..run import runner

    gpus = gpu_choice.Resolver(client)(v, gpus_request)
    stdout, stderr = io.StringIO(), _ProgressRelay(stream)
    try:
        result = runner.run(client, v, command, gpus=gpus, runs_dir=None, user=None,
                            env={"TF_CPP_MIN_LOG_LEVEL": "2"}, network="none", kind="bench",
                            timeout=timeout, stream=stderr, stdout=stdout)
    except runner.RunTimeout as exc:
        raise KerasenvError(f"the bench container did not finish: {exc.message}; use --quick or fewer "
                            "--batch-sizes, or raise --timeout") from None
    return result.exit_code, stdout.getvalue(), "".join(stderr.parts)


def parse_container_output(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    return None


def attach_gpu_samples(results: list[dict], samples: list[gpu_sampler.Sample], index: int | None) -> None:
    """Each successful configuration gets the steady-state mean of the samples in its window."""
    for r in results:
        if r.get("status") == "ok" and r.get("window"):
            start, end = r["window"]
            r["gpu"] = gpu_sampler.steady_state(samples, start, end, index=index)


def run_device(client, v: Variant, device: Device, settings: Settings, out_dir: Path, *, host: dict,
               timeout: float = 1800, runner=run_container, sampler_factory=gpu_sampler.NvidiaSmiSampler,
               say=lambda m: print(m, file=sys.stderr)) -> DeviceRun:
    command = container_command(v, settings, device)
    say(f"kerasenv: bench {v.image_ref} on {device.id}" + (f" ({device.name})" if device.name else "")
        + f": {', '.join(settings.models)}; batch {','.join(map(str, settings.batch_sizes))}; "
          f"jit {','.join(settings.jit)}; precision {settings.precision if isinstance(settings.precision, str) else ','.join(settings.precision)}")
    sampler = None
    sampling: dict | None = None
    if device.kind == "gpu":
        sampler = sampler_factory(indexes=[device.host_index], interval_ms=settings.sample_interval_ms)
        if sampler.available:
            sampler.start()
        else:
            sampling = {"tool": None, "note": "nvidia-smi not found on the host: GPU utilisation not sampled"}
            sampler = None
    started = time.perf_counter()
    try:
        code, stdout, stderr = runner(client, v, command, gpus_request=device.gpus_request, timeout=timeout)
    finally:
        parsed = sampler.stop() if sampler is not None else None
    wall = time.perf_counter() - started
    result = parse_container_output(stdout)
    if result is None:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise KerasenvError(f"the bench in {v.image_ref} on {device.id} exited {code} without results",
                            details=tail)
    if result.get("error"):
        raise (NoGpuForBench if code == EXIT_NO_GPU else KerasenvError)(
            f"the bench in {v.image_ref} on {device.id}: {result['error']}")
    if parsed is not None:
        sampling = {"tool": "nvidia-smi", "command": " ".join(["nvidia-smi", *sampler.command()[1:]]),
                    "query": list(sampler.fields), "interval_ms": settings.sample_interval_ms,
                    "gpu_index": device.host_index, "samples": len(parsed.samples),
                    "skipped_lines": parsed.skipped_lines[:5], "stderr": (sampler.stderr or "")[:300] or None}
        attach_gpu_samples(result["results"], parsed.samples, device.host_index)
    doc = {
        "schema": SCHEMA, "kind": "kerasenv-bench",
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kerasenv_version": __version__,
        "host": host,
        "variant": v.id,
        "image": {"ref": v.image_ref, "family": v.family, "id": _image_id(client, v)},
        "versions": result.get("versions"),
        "device": {**asdict(device), **{k: val for k, val in (result.get("device") or {}).items() if val is not None},
                   "id": device.id, "kind": device.kind},
        "settings": {**asdict(settings), "container": result.get("settings")},
        "models": result.get("models"),
        "gpu_sampling": sampling,
        "results": result.get("results", []),
        "container_wall_seconds": result.get("wall_seconds"),
        "wall_seconds": wall,
        "exit_code": code,
        "interrupted": bool(result.get("interrupted")),
    }
    if device.kind == "cpu":
        doc["device"]["name"] = doc["device"].get("name") or host.get("cpu_model")
        doc["device"]["cores"] = host.get("cpu_cores")
    path = out_dir / "results" / f"bench-{v.id}-{device.id}.json"
    write_json(path, doc)
    say(f"kerasenv: wrote {path} ({wall:.0f} s)")
    return DeviceRun(device, path, doc)


def _image_id(client, v: Variant) -> str | None:
    try:
        return client.images.get(v.image_ref).id
    except Exception:  # noqa: BLE001 - informational
        return None


def write_json(path: Path, data: dict) -> None:
    """Atomically (kerasenv_image.jsonfile): a reader (the report) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonfile.write_atomically(data, str(path), sort_keys=False)


def summary_lines(doc: dict) -> list[str]:
    lines = []
    for r in doc["results"]:
        head = f"{doc['variant']:<16} {doc['device']['id']:<5} {r['model']:<4} batch {r['batch_size']:>5} " \
               f"jit {r['jit']:<3} {r['precision']:<8}"
        if r.get("status") != "ok":
            lines.append(f"{head} FAILED: {r.get('reason')}")
            continue
        gpu = r.get("gpu") or {}
        util = gpu.get("utilization_gpu_mean")
        lines.append(f"{head} {r['samples_per_second']:>9.0f} samples/s  first step {r['time_to_first_step_s']:5.2f} s"
                     + (f"  GPU {util:.0f}%" if util is not None else ""))
    return lines

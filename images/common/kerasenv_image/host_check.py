"""The GPU-host check's runner: on a machine with JAX and/or PyTorch installed (no Docker, no
TensorFlow, no network), run each backend's GPU-library probe, the smoke training and
`kerasenv bench`'s protocol, and capture the host's own nvidia-smi outputs; everything goes
to one folder.

Standard library only, Python 3.9+ syntax (an older or unsupported interpreter gets the one
line below, not a SyntaxError). Run from a folder packed by `kerasenv gpu-host-check --pack
DIR` as `python3 DIR/run.py --out OUT`:

1. The interpreter: the pack holds Keras's dependency closure for CPython 3.11, 3.12 and 3.13
   on x86_64 Linux (kerasenv_image.host_site); any other interpreter, CPython 3.10 included
   (Keras 3.15 requires Python >= 3.11), stops here with one line naming what the pack holds
   and the fix (exit 3).
2. Its site-packages: keras from the pack always; every other distribution of the closure
   only when this Python cannot import it (which import names a distribution provides is
   read from its wheel), unpacked into a temporary folder (removed at the end: the pack
   stays as small as it was carried) and put on PYTHONPATH; nothing is installed.
3. Per installed backend: the probe, the smoke training, then the bench (python -m
   kerasenv_image.bench, `kerasenv bench`'s protocol: two models, four batch sizes, float32
   and the mixed precisions the device runs, XLA off and on) on the GPU when the backend
   sees one, with nvidia-smi sampling it, and on the CPU.

Writes OUT/<hostname>-<date>/:

- summary.json: host, Python, what came from the pack and what from the host, the GPU
  requirement, per backend its exit codes, verdict, seconds and bench figures, the
  nvidia-smi captures' exit codes, and the bench table's rows;
- nvidia-smi.txt, list.txt (-L), query-gpu.csv (--query-gpu=QUERY_FIELDS --format=csv),
  nvidia-smi-q.xml (-q -x), each command's stderr in <name>.err when it failed;
- probe-<backend>.json / .err: `python -m kerasenv_image.probes.gpu_libraries --devices`;
- smoke-<backend>.json / .log and smoke-<backend>/ (the run directory, GPU samples included):
  `python -m kerasenv_image.smoke --json --mixed-precision M [--require-gpu]`;
- bench.md (the table), bench/results/bench-host-<backend>-<device>.json (`kerasenv
  bench`'s result documents: `kerasenv bench-report -o <folder>/bench` draws the report and
  its charts), bench-<backend>-<device>.log.

Exit status: 0 when every backend found passed, 1 when one failed, 2 when none is
installed, 3 when this interpreter cannot use the pack.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

BACKENDS = ("jax", "torch")
EXIT_OK, EXIT_FAILED, EXIT_NO_BACKEND, EXIT_INTERPRETER = 0, 1, 2, 3
# The fields kerasenv's host side asks for (src/kerasenv/host/nvidia_smi.py QUERY_FIELDS).
QUERY_FIELDS = ("index", "name", "driver_version", "memory.total", "compute_cap")
CAPTURES = {  # file name -> nvidia-smi arguments (the fixture names of tests/fixtures/nvidia-smi/)
    "nvidia-smi.txt": [],
    "list.txt": ["-L"],
    "query-gpu.csv": [f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv"],
    "nvidia-smi-q.xml": ["-q", "-x"],
}
# `kerasenv bench`'s full protocol (src/kerasenv/bench/throughput.py FULL, which a unit test
# keeps equal): precision "auto" and the jit list are narrowed per device by the bench itself
# (kerasenv_image.bench.capabilities: float16 from compute capability 7.0, bfloat16 from 8.0,
# bfloat16 on a CPU only with AMX-BF16/AVX512-BF16, torch.compile only with a C compiler).
BENCH = {"models": ("conv", "mlp"), "batch_sizes": (32, 128, 512, 1024), "jit": ("off", "on"),
         "precision": "auto", "warmup_steps": 3, "min_steps": 5, "max_steps": 2000,
         "time_box_s": 1.5, "gpu_time_box_s": 3.0}
PREFIX = "kerasenv host check"


def say(message: str) -> None:
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)


def installed_backends(find=importlib.util.find_spec) -> list[str]:
    return [b for b in BACKENDS if find(b) is not None]


def capture_nvidia_smi(out: str, runner=subprocess.run) -> dict:
    """Run each nvidia-smi command; its stdout verbatim into its file, stderr into .err."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {name: {"exit": None, "error": "nvidia-smi not found on PATH"} for name in CAPTURES}
    status = {}
    for name, args in CAPTURES.items():
        try:
            r = runner([smi, *args], capture_output=True, text=True, timeout=120)
            code, stdout, stderr = r.returncode, r.stdout, r.stderr
        except (OSError, subprocess.TimeoutExpired) as exc:
            code, stdout, stderr = None, "", str(exc)
        with open(os.path.join(out, name), "w") as f:
            f.write(stdout)
        if code != 0:
            with open(os.path.join(out, name + ".err"), "w") as f:
                f.write(stderr)
        status[name] = {"exit": code, "command": " ".join(["nvidia-smi", *args])}
    return status


def run_logged(cmd: list[str], env: dict, stdout_path: str, stderr_path: str, timeout: float) -> tuple[int, float]:
    start = time.monotonic()
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        try:
            code = subprocess.run(cmd, env=env, stdout=out, stderr=err, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            err.write(f"\n{PREFIX}: timed out after {timeout} s\n")
            code = 124
    return code, round(time.monotonic() - start, 1)


def last_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            lines = [line for line in f.read().splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# --- the bench ----------------------------------------------------------------------------

def bench_command(device: str, args) -> list[str]:
    """`python -m kerasenv_image.bench` with the protocol's settings for `device`."""
    box = args.bench_time_box
    if box is None:
        box = BENCH["gpu_time_box_s"] if device == "gpu" else BENCH["time_box_s"]
    sizes = args.bench_batch_sizes or ",".join(str(b) for b in BENCH["batch_sizes"])
    return [sys.executable, "-m", "kerasenv_image.bench", "--device", device,
            "--models", args.bench_models or ",".join(BENCH["models"]), "--batch-sizes", sizes,
            "--jit", ",".join(BENCH["jit"]),
            "--precision", BENCH["precision"], "--warmup-steps", str(BENCH["warmup_steps"]),
            "--min-steps", str(BENCH["min_steps"]), "--max-steps", str(BENCH["max_steps"]), "--time-box", f"{box:g}"]


def bench_result(stdout_path: str) -> dict | None:
    """The bench's one result line (kerasenv_image.bench.protocol.RESULT_PREFIX)."""
    from .bench.protocol import RESULT_PREFIX

    try:
        with open(stdout_path) as f:
            lines = [line for line in f.read().splitlines() if line.startswith(RESULT_PREFIX)]
        return json.loads(lines[-1][len(RESULT_PREFIX):]) if lines else None
    except (OSError, ValueError):
        return None


def attach_gpu_samples(results: list[dict], samples: list, index: int | None) -> str | None:
    """Each measured configuration gets the steady-state utilisation and memory of the
    samples in its window (gpu_sampler.steady_state, as `kerasenv bench` does); a note when
    they cannot be attributed: CUDA's GPU 0 has no nvidia-smi index here (a MIG slice, a GPU
    named by UUID) and nvidia-smi lists several GPUs."""
    from . import gpu_sampler

    if index is None:
        seen = sorted({s.index for s in samples if s.index is not None})
        if len(seen) > 1:
            return (f"GPU utilisation not attributed: the bench's GPU has no nvidia-smi index here "
                    f"(CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES name it by UUID or MIG slice) and nvidia-smi "
                    f"lists GPUs {', '.join(map(str, seen))}")
        index = seen[0] if seen else None
    for r in results:
        if r.get("status") == "ok" and r.get("window"):
            r["gpu"] = gpu_sampler.steady_state(samples, r["window"][0], r["window"][1], index=index)
    return None


def host_facts() -> dict:
    from .bench.main import cpu_model

    return {"hostname": socket.gethostname(), "cpu_model": cpu_model() or platform.processor() or None,
            "cpu_cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def run_bench(backend: str, device: str, args, out: str, env: dict, runner=run_logged, sampler_factory=None) -> dict:
    """One bench run: its result document under bench/results/ (kerasenv bench's kind, so
    `kerasenv bench-report` reads it) and a summary for summary.json."""
    from . import gpu_monitor, gpu_sampler

    cmd = bench_command(device, args)
    stdout_path = os.path.join(out, f"bench-{backend}-{device}.out")
    log_path = os.path.join(out, f"bench-{backend}-{device}.log")
    sampler, index, sampling = None, None, None
    if device == "gpu":
        index = gpu_monitor.smi_index(0, env)  # the bench trains on the framework's GPU 0
        sampler = (sampler_factory or gpu_sampler.NvidiaSmiSampler)(indexes=[index] if index is not None else None)
        if sampler.available:
            try:
                sampler.start()
            except OSError as exc:
                sampling, sampler = {"tool": None, "note": f"nvidia-smi did not start: {exc}"}, None
        else:
            sampling, sampler = {"tool": None, "note": "nvidia-smi not found: GPU utilisation not sampled"}, None
    try:
        code, seconds = runner(cmd, env, stdout_path, log_path, args.timeout)
    finally:
        parsed = sampler.stop() if sampler is not None else None
    result = bench_result(stdout_path)
    summary = {"exit": code, "seconds": seconds, "command": " ".join(cmd[1:]), "log": os.path.basename(log_path)}
    if result is None:
        summary["error"] = f"the bench exited {code} without a result line (see {os.path.basename(log_path)})"
        return summary
    if result.get("error"):
        summary["error"] = result["error"]
    if parsed is not None:
        note = attach_gpu_samples(result.get("results", []), parsed.samples, index)
        sampling = {"tool": "nvidia-smi", "command": " ".join(["nvidia-smi", *sampler.command()[1:]]),
                    "gpu_index": index, "samples": len(parsed.samples), "note": note,
                    "skipped_lines": parsed.skipped_lines[:5], "stderr": (sampler.stderr or "")[:300] or None}
    results = result.get("results", [])
    device_doc = {"id": "gpu0" if device == "gpu" else "cpu", "kind": device, "host_index": index,
                  **{k: v for k, v in (result.get("device") or {}).items() if v is not None}}
    host = host_facts()
    if device == "cpu":
        device_doc["name"] = device_doc.get("name") or host["cpu_model"]
        device_doc["cores"] = host["cpu_cores"]
    doc = {"schema": 1, "kind": "kerasenv-bench", "source": "kerasenv gpu-host-check",
           "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": host, "variant": f"host-{backend}",
           "image": {"ref": f"no image: CPython {platform.python_version()} (gpu-host-check)", "family": None,
                     "id": None},
           "versions": result.get("versions"),
           "device": device_doc, "settings": {"command": " ".join(cmd[1:]), "container": result.get("settings")},
           "models": result.get("models"), "gpu_sampling": sampling, "results": results,
           "container_wall_seconds": result.get("wall_seconds"), "wall_seconds": seconds, "exit_code": code,
           "interrupted": bool(result.get("interrupted"))}
    results_dir = os.path.join(out, "bench", "results")
    os.makedirs(results_dir, exist_ok=True)
    path = os.path.join(results_dir, f"bench-host-{backend}-{device}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, allow_nan=False)
    settings = result.get("settings") or {}
    summary.update({"file": os.path.relpath(path, out), "device": device_doc.get("name"),
                    "configurations": len(results), "ok": sum(r.get("status") == "ok" for r in results),
                    "failed": [f"{r.get('model')} batch {r.get('batch_size')} jit {r.get('jit')} {r.get('precision')}: "
                               f"{r.get('reason')}" for r in results if r.get("status") != "ok"],
                    "precisions": settings.get("precisions"), "precisions_skipped": settings.get("precisions_skipped"),
                    "jit_skipped": settings.get("jit_skipped"), "gpu_sampling_note": (sampling or {}).get("note")})
    summary["rows"] = bench_rows(backend, device, device_doc.get("name"), results)
    return summary


def bench_rows(backend: str, device: str, name: str | None, results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        gpu = r.get("gpu") or {}
        ok = r.get("status") == "ok"
        rows.append({"backend": backend, "device": device, "device_name": name, "model": r.get("model"),
                     "batch_size": r.get("batch_size"), "jit": r.get("jit"), "precision": r.get("precision"),
                     "samples_per_second": round(r["samples_per_second"], 1) if ok else None,
                     "time_to_first_step_s": round(r["time_to_first_step_s"], 2) if ok else None,
                     "gpu_utilization_percent": gpu.get("utilization_gpu_mean"),
                     "status": r.get("status"), "reason": r.get("reason")})
    return rows


PRECISION_NAME = {"off": "float32", "float16": "mixed float16", "bfloat16": "mixed bfloat16"}


def bench_table(rows: list[dict], summary: dict) -> str:
    """bench.md: one Markdown table of every configuration measured, as the README shows it."""
    versions = {}
    for r in summary["backends"].values():
        versions.update({k: v for k, v in (r.get("versions") or {}).items() if isinstance(v, str) and k != "backend"})
    lines = [f"# kerasenv gpu-host-check bench: {summary['host']}, {summary['date']}", "",
             ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or f"python {summary['python']}",
             "",
             "`kerasenv bench`'s protocol: synthetic data, one in-memory batch repeated; samples/s over the timed "
             "steps after the first step and the warm-up; GPU utilisation: nvidia-smi's mean over each "
             "configuration's steady state (`-` where nvidia-smi gave none, e.g. `[N/A]` on a MIG slice).", "",
             "jit: Keras' jit_compile, XLA on JAX (off: JAX runs op by op), torch.compile on PyTorch.", "",
             "| backend | device | model | batch | jit | precision | samples/s | first step (s) | GPU util | status |",
             "| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        device = r["device"] + (f" ({r['device_name']})" if r["device_name"] else "")
        status = "ok" if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
        lines.append(f"| {r['backend']} | {device} | {r['model']} | {r['batch_size']} | {r['jit']} "
                     f"| {PRECISION_NAME.get(r['precision'], r['precision'])} | {_num(r['samples_per_second'], '.0f')} "
                     f"| {_num(r['time_to_first_step_s'], '.2f')} | {_num(r['gpu_utilization_percent'], '.0f', '%')} "
                     f"| {status} |")
    return "\n".join(lines) + "\n"


def _num(value, fmt: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{fmt}}{suffix}"


# --- one backend --------------------------------------------------------------------------

def probe_judged(backend: str, probe: dict, require_gpu: bool) -> bool:
    """Whether the GPU-library probe's exit counts: always when a GPU is required, and for a
    CUDA build of the framework (its GPU libraries must load even where no GPU is). A
    CPU-only build (JAX without a CUDA plugin, PyTorch's CPU wheel) has no GPU libraries to
    check, so with --no-require-gpu its probe is recorded only. A probe without a result
    (it crashed) always counts."""
    if require_gpu or not probe:
        return True
    if backend == "jax":
        return probe.get("plugin") is not None
    if backend == "torch":
        return probe.get("cuda_version") is not None or bool(probe.get("import_error"))
    return True


def check_backend(backend: str, args, out: str, env: dict) -> dict:
    env = {**env, "KERAS_BACKEND": backend}
    probe_cmd = [sys.executable, "-m", "kerasenv_image.probes.gpu_libraries", "--backend", backend, "--devices"]
    probe_code, probe_s = run_logged(probe_cmd, env, os.path.join(out, f"probe-{backend}.json"),
                                     os.path.join(out, f"probe-{backend}.err"), args.timeout)
    probe = last_json(os.path.join(out, f"probe-{backend}.json")) or {}
    smoke_cmd = [sys.executable, "-m", "kerasenv_image.smoke", "--json", "--mixed-precision", args.mixed_precision,
                 "--output-dir", os.path.join(out, f"smoke-{backend}"), "--run-id", f"host-check-{backend}",
                 *(["--require-gpu"] if args.require_gpu else []), *args.smoke_args]
    smoke_code, smoke_s = run_logged(smoke_cmd, env, os.path.join(out, f"smoke-{backend}.json"),
                                     os.path.join(out, f"smoke-{backend}.log"), args.timeout)
    smoke = read_json(os.path.join(out, f"smoke-{backend}", "report.json")) or {}
    judged = probe_judged(backend, probe, args.require_gpu)
    ok = (probe_code == 0 or not judged) and smoke_code == 0
    result = {"probe": {"exit": probe_code, "seconds": probe_s, "failed": probe.get("failed"),
                        "gpus": probe.get("gpus"), "judged": judged,
                        **({} if judged else {"note": f"a CPU-only build of {backend} with --no-require-gpu: its "
                                                      "GPU-library check is recorded, not judged"})},
              "smoke": {"exit": smoke_code, "seconds": smoke_s, "command": " ".join(smoke_cmd[1:]),
                        "verdict": smoke.get("verdict"), "error": (smoke.get("error") or {}).get("message"),
                        "gpus": smoke.get("gpus")},
              "versions": smoke.get("versions")}
    seconds = probe_s + smoke_s
    if not args.bench:
        result["bench"] = {"skipped": "--no-bench"}
    elif not ok:
        result["bench"] = {"skipped": "the probe or the smoke training failed"}
    else:
        devices = (["gpu"] if probe.get("gpus") else []) + ["cpu"]
        result["bench"] = {}
        for device in devices:
            say(f"{backend}: bench on the {device.upper()} ...")
            b = result["bench"][device] = run_bench(backend, device, args, out, env)
            seconds += b["seconds"]
            say(f"{backend}: bench on the {device.upper()}: "
                + (f"{b['ok']} of {b['configurations']} configurations measured" if "configurations" in b
                   else b.get("error", "")) + f" ({b['seconds']} s)")
            ok = ok and b["exit"] == 0 and not b.get("error")
    result["verdict"] = "PASS" if ok else "FAIL"
    result["seconds"] = round(seconds, 1)
    return result


# --- the command line ---------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="parent folder of the report folder <hostname>-<date>/")
    p.add_argument("--require-gpu", action=argparse.BooleanOptionalAction, default=True,
                   help="the smoke training fails without a GPU (default); --no-require-gpu: CPU results")
    p.add_argument("--backends", default=",".join(BACKENDS), help="which of jax,torch to check if installed")
    p.add_argument("--mixed-precision", default="bfloat16", choices=("auto", "off", "float16", "bfloat16"))
    p.add_argument("--bench", action=argparse.BooleanOptionalAction, default=True,
                   help="run kerasenv bench's protocol per backend on the GPU and the CPU (default; --no-bench)")
    p.add_argument("--bench-time-box", type=float, metavar="SECONDS",
                   help="seconds of timed steady state per bench configuration on every device (default: kerasenv "
                        f"bench's {BENCH['time_box_s']:g} on the CPU, {BENCH['gpu_time_box_s']:g} on a GPU)")
    p.add_argument("--bench-batch-sizes", metavar="LIST",
                   help=f"bench batch sizes (default {','.join(map(str, BENCH['batch_sizes']))})")
    p.add_argument("--bench-models", metavar="LIST", help=f"bench models (default {','.join(BENCH['models'])})")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per probe, smoke or bench run")
    p.add_argument("--archive", action="store_true", help="also write the folder as one <name>.tar.gz beside it")
    p.add_argument("smoke_args", nargs="*", help="after --: more smoke arguments (e.g. -- --epochs 1)")
    args = p.parse_args(argv)
    if args.bench_time_box is not None and not args.bench_time_box >= 0:
        p.error("--bench-time-box must be a number of seconds >= 0")
    return args


def prepare_site(pack: str, find=importlib.util.find_spec) -> tuple[str | None, dict]:
    """Check the interpreter against the pack and unpack what this Python lacks; (site
    folder, facts for summary.json), or (None, {"refusal": line}) when it cannot."""
    from . import host_site

    try:
        index = host_site.load_index(pack)
    except host_site.PackError as exc:
        return None, {"refusal": str(exc)}
    interp = host_site.interpreter()
    line = host_site.refusal(index, interp)
    if line:
        return None, {"refusal": line}
    chosen = host_site.choose(index, interp["tag"], find=find)
    line = host_site.glibc_refusal(chosen, interp)
    if line:
        return None, {"refusal": line}
    site = tempfile.mkdtemp(prefix=f"kerasenv-host-check-{interp['tag']}-")
    names = [d["name"] for d in chosen if d["source"] == "pack"]
    try:
        files = host_site.extract(pack, index, interp["tag"], names, site)
    except host_site.PackError as exc:
        shutil.rmtree(site, ignore_errors=True)
        return None, {"refusal": str(exc)}
    return site, {"interpreter": interp, "pack": {"keras": index.get("keras"), "holds": host_site.held(index),
                                                  "files_unpacked": files},
                  "distributions": chosen}


def main(argv: list[str] | None = None, pack: str | None = None) -> int:
    args = parse_args(argv)
    pack = pack or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds kerasenv_image/
    site, facts = prepare_site(pack)
    if site is None:
        say(facts["refusal"])
        return EXIT_INTERPRETER
    try:
        return _run(args, pack, site, facts)
    finally:
        shutil.rmtree(site, ignore_errors=True)


def _run(args, pack: str, site: str, facts: dict) -> int:
    from_pack = [f"{d['name']} {d['version']}" for d in facts["distributions"] if d["source"] == "pack"]
    say(f"CPython {platform.python_version()}: from the pack {', '.join(from_pack)}; the rest from this Python")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"{socket.gethostname()}-{stamp}"
    out = os.path.join(os.path.abspath(args.out), name)
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pack, site] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    summary = {"host": socket.gethostname(), "date": stamp, "python": platform.python_version(),
               "platform": platform.platform(), "require_gpu": args.require_gpu,
               "mixed_precision": args.mixed_precision, **facts, "nvidia_smi": capture_nvidia_smi(out),
               "bench_settings": None if not args.bench else {
                   **BENCH, "models": args.bench_models or ",".join(BENCH["models"]),
                   "batch_sizes": args.bench_batch_sizes or ",".join(map(str, BENCH["batch_sizes"])),
                   "time_box_s": args.bench_time_box if args.bench_time_box is not None else BENCH["time_box_s"],
                   "gpu_time_box_s": (args.bench_time_box if args.bench_time_box is not None
                                      else BENCH["gpu_time_box_s"])},
               "backends": {}}
    wanted = [b for b in args.backends.split(",") if b]
    found = [b for b in installed_backends() if b in wanted]
    summary["not_installed"] = [b for b in wanted if b not in found]
    rows = []
    for backend in found:
        say(f"{backend} ...")
        r = summary["backends"][backend] = check_backend(backend, args, out, env)
        for b in (r.get("bench") or {}).values():
            if isinstance(b, dict):
                rows += b.pop("rows", [])
        judged = "" if r["probe"]["judged"] else ", not judged: a CPU-only build"
        say(f"{backend}: {r['verdict']} (probe exit {r['probe']['exit']}{judged}, smoke exit {r['smoke']['exit']}, "
            f"{r['seconds']} s)")
    if rows:
        summary["bench_table"] = rows
        with open(os.path.join(out, "bench.md"), "w") as f:
            f.write(bench_table(rows, summary))
    code = EXIT_NO_BACKEND if not found else (
        EXIT_OK if all(r["verdict"] == "PASS" for r in summary["backends"].values()) else EXIT_FAILED)
    summary["exit"] = code
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if args.archive:
        with tarfile.open(out + ".tar.gz", "w:gz") as tar:
            tar.add(out, arcname=name)
    print(out)
    return code


if __name__ == "__main__":
    sys.exit(main())

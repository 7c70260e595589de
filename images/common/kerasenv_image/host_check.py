"""The GPU-host check's runner: on a machine with JAX and/or PyTorch installed (no Docker, no
TensorFlow, no network), run each backend's GPU-library probe and the smoke training, and
capture the host's own nvidia-smi outputs; everything goes to one folder.

Standard library only (Python 3.9+). Run from a folder packed by `kerasenv gpu-host-check
--pack DIR` as `python3 DIR/run.py --out OUT`: the packed wheels (keras, and the small deps
keras needs that this Python lacks) are unpacked into a `site` folder inside the pack (or a
temporary one when the pack is read-only) and put on PYTHONPATH; nothing is installed
system-wide. Writes OUT/<hostname>-<date>/:

- summary.json: host, Python, the GPU requirement, per backend its exit codes, verdict and
  seconds, and the nvidia-smi captures' exit codes;
- nvidia-smi.txt, list.txt (-L), query-gpu.csv (--query-gpu=QUERY_FIELDS --format=csv),
  nvidia-smi-q.xml (-q -x), each command's stderr in <name>.err when it failed;
- probe-<backend>.json / .err: `python -m kerasenv_image.probes.gpu_libraries --devices`;
- smoke-<backend>.json / .log and smoke-<backend>/ (the run directory, GPU samples included):
  `python -m kerasenv_image.smoke --json --mixed-precision M [--require-gpu]`.

Exit status: 0 when every backend found passed, 1 when one failed, 2 when none is installed.
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
import zipfile

BACKENDS = ("jax", "torch")
# The fields kerasenv's host side asks for (src/kerasenv/host/nvidia_smi.py QUERY_FIELDS).
QUERY_FIELDS = ("index", "name", "driver_version", "memory.total", "compute_cap")
CAPTURES = {  # file name -> nvidia-smi arguments (the fixture names of tests/fixtures/nvidia-smi/)
    "nvidia-smi.txt": [],
    "list.txt": ["-L"],
    "query-gpu.csv": [f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv"],
    "nvidia-smi-q.xml": ["-q", "-x"],
}
# import name -> wheel name prefix: what keras 3 imports at `import keras`.
KERAS_DEPS = {"absl": "absl_py", "rich": "rich", "markdown_it": "markdown_it_py", "mdurl": "mdurl",
              "pygments": "pygments", "namex": "namex", "packaging": "packaging", "optree": "optree",
              "ml_dtypes": "ml_dtypes", "h5py": "h5py", "numpy": "numpy"}


def installed_backends(find=importlib.util.find_spec) -> list[str]:
    return [b for b in BACKENDS if find(b) is not None]


def wheels_to_unpack(wheels: list[str], find=importlib.util.find_spec) -> list[str]:
    """keras always (the matrix's release); a dependency only when this Python lacks it and the
    wheel is for this interpreter (or pure Python)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    chosen = []
    for path in sorted(wheels):
        name = os.path.basename(path)
        if name.startswith("keras-"):
            chosen.append(path)
            continue
        module = next((m for m, prefix in KERAS_DEPS.items() if name.startswith(prefix + "-")), None)
        if module is None or find(module) is not None:
            continue
        if "-py3-none-any" in name or f"-{tag}-" in name:
            chosen.append(path)
    return chosen


def unpack(wheels: list[str], site: str) -> None:
    """A wheel is a zip of its site-packages layout: extracting it is the install."""
    os.makedirs(site, exist_ok=True)
    for path in wheels:
        with zipfile.ZipFile(path) as z:
            z.extractall(site)
    for root, _, files in os.walk(site):  # zipfile drops the mode bits of .so files
        for f in files:
            if ".so" in f:
                os.chmod(os.path.join(root, f), 0o755)


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


def run_logged(cmd: list[str], env: dict, stdout_path: str, stderr_path: str, timeout: int) -> tuple[int, float]:
    start = time.monotonic()
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        try:
            code = subprocess.run(cmd, env=env, stdout=out, stderr=err, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            err.write(f"\nkerasenv host_check: timed out after {timeout} s\n")
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
    ok = probe_code == 0 and smoke_code == 0
    return {"verdict": "PASS" if ok else "FAIL", "seconds": round(probe_s + smoke_s, 1),
            "probe": {"exit": probe_code, "seconds": probe_s, "failed": probe.get("failed"),
                      "gpus": probe.get("gpus")},
            "smoke": {"exit": smoke_code, "seconds": smoke_s, "command": " ".join(smoke_cmd[1:]),
                      "verdict": smoke.get("verdict"), "error": (smoke.get("error") or {}).get("message"),
                      "gpus": smoke.get("gpus")}}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="parent folder of the report folder <hostname>-<date>/")
    p.add_argument("--require-gpu", action=argparse.BooleanOptionalAction, default=True,
                   help="the smoke training fails without a GPU (default); --no-require-gpu: CPU results")
    p.add_argument("--backends", default=",".join(BACKENDS), help="which of jax,torch to check if installed")
    p.add_argument("--mixed-precision", default="bfloat16", choices=("auto", "off", "float16", "bfloat16"))
    p.add_argument("--timeout", type=int, default=1800, help="seconds per probe or smoke run")
    p.add_argument("--archive", action="store_true", help="also write the folder as one <name>.tar.gz beside it")
    p.add_argument("smoke_args", nargs="*", help="after --: more smoke arguments (e.g. -- --epochs 1)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, pack: str | None = None) -> int:
    args = parse_args(argv)
    pack = pack or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds kerasenv_image/
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"{socket.gethostname()}-{stamp}"
    out = os.path.join(os.path.abspath(args.out), name)
    os.makedirs(out, exist_ok=True)
    wheels_dir = os.path.join(pack, "wheels")
    wheels = [os.path.join(wheels_dir, w) for w in os.listdir(wheels_dir)] if os.path.isdir(wheels_dir) else []
    site = os.path.join(pack, "site")
    if not os.access(pack, os.W_OK):
        site = tempfile.mkdtemp(prefix="kerasenv-host-check-site-")
    unpacked = wheels_to_unpack(wheels)
    unpack(unpacked, site)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pack, site] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    summary = {"host": socket.gethostname(), "date": stamp, "python": platform.python_version(),
               "platform": platform.platform(), "require_gpu": args.require_gpu,
               "mixed_precision": args.mixed_precision,
               "unpacked_wheels": [os.path.basename(w) for w in unpacked], "nvidia_smi": capture_nvidia_smi(out),
               "backends": {}}
    wanted = [b for b in args.backends.split(",") if b]
    found = [b for b in installed_backends() if b in wanted]
    summary["not_installed"] = [b for b in wanted if b not in found]
    for backend in found:
        print(f"kerasenv host check: {backend} ...", file=sys.stderr, flush=True)
        summary["backends"][backend] = check_backend(backend, args, out, env)
        r = summary["backends"][backend]
        print(f"kerasenv host check: {backend}: {r['verdict']} (probe exit {r['probe']['exit']}, "
              f"smoke exit {r['smoke']['exit']}, {r['seconds']} s)", file=sys.stderr, flush=True)
    code = 2 if not found else (0 if all(r["verdict"] == "PASS" for r in summary["backends"].values()) else 1)
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

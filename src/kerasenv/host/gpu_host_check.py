"""`kerasenv gpu-host-check`: prove Keras trains on a GPU machine that has JAX and/or PyTorch
but neither Docker nor TensorFlow (docs/using/gpu-host-check.md).

- `--pack DIR`: a self-contained folder (<= 64 MiB) to carry there: for each target CPython
  (`--python-versions`, default 3.11, 3.12, 3.13; manylinux x86_64), the full dependency
  closure of the matrix's Keras as pip resolves it from the packages' metadata (`pip download
  keras==K --only-binary=:all: --python-version 3.X ...`), unpacked into one tree per
  interpreter and stored in one tar.xz with the files the trees share stored once
  (kerasenv_image.host_site); the in-image package kerasenv_image (probes, smoke training,
  bench, GPU monitor) and run.py / run.sh (kerasenv_image.host_check: standard library only).
- `--out DIR`: run that check (from a pack, `--from DIR`, or packing into a temporary folder
  first): per installed backend the GPU-library probe, the smoke training with mixed
  precision, `kerasenv bench`'s protocol on the GPU and the CPU, the GPU monitor sampling, and
  the host's own nvidia-smi outputs; all written to DIR/<hostname>-<date>/ with summary.json.
- `--import-fixtures REPORT_DIR NAME`: copy a real capture's nvidia-smi outputs into
  tests/fixtures/nvidia-smi/NAME/ under the fixture file names (nvidia-smi.txt, list.txt,
  query-gpu.csv), to replace a simulated folder (tests/fixtures/nvidia-smi/SOURCES.md).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from argparse import BooleanOptionalAction as _BooleanOptional
from pathlib import Path

from kerasenv_image import host_site

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "images" / "common" / "kerasenv_image"
FIXTURES = REPO / "tests" / "fixtures" / "nvidia-smi"
LIMIT = 64 * 2**20  # what a lent GPU machine takes with the working tree
# Keras 3.15 requires Python >= 3.11 (its Requires-Python); 3.11-3.13 is what NumPy, h5py,
# optree and ml-dtypes publish manylinux x86_64 wheels for alongside it.
PYTHON_VERSIONS = ("3.11", "3.12", "3.13")
# pip matches manylinux_2_N exactly: the glibc floors Keras's binary dependencies use.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
RUN_PY = '''#!/usr/bin/env python3
"""kerasenv GPU-host check: python3 run.py --out DIR [--no-require-gpu] (see README.txt)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kerasenv_image import host_check  # noqa: E402

sys.exit(host_check.main(sys.argv[1:], pack=HERE))
'''
RUN_SH = '''#!/bin/sh
# kerasenv GPU-host check: ./run.sh --out DIR [--no-require-gpu]; the first python3 on PATH
# that has jax or torch is the one checked (PYTHON=/path/to/python to choose).
exec "${PYTHON:-python3}" "$(dirname "$0")/run.py" "$@"
'''
README = '''kerasenv GPU-host check (packed by `kerasenv gpu-host-check --pack`; Keras {keras})

On a machine with a GPU and JAX and/or PyTorch installed in CPython {pythons} on x86_64
Linux (no Docker, TensorFlow or network needed; nothing is installed system-wide):

    python3 run.py --out OUT                 # the GPU is required (a CPU-only run fails)
    python3 run.py --out OUT --no-require-gpu
    python3 run.py --out OUT --archive -- --epochs 1   # also OUT/<host>-<date>.tar.gz
    python3 run.py --out OUT --bench-time-box 0.5      # a shorter bench; --no-bench: none

Keras comes from this folder; every other package it needs only when that Python lacks it.
Everything lands in OUT/<hostname>-<date>/ (summary.json first, bench.md the bench's table).
Exit 0: every installed backend passed; 1: one failed; 2: neither jax nor torch is
installed; 3: this Python cannot use the pack (one line says why and what to do).
'''


def parse_python_versions(text: str) -> tuple[str, ...]:
    """'3.11,3.12' -> ('3.11', '3.12'); one-line refusal of anything else."""
    from ..errors import UsageError

    versions = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in versions if not re.fullmatch(r"3\.\d{1,2}", v)]
    if not versions or bad:
        raise UsageError(f"--python-versions {text!r}: use CPython minor versions such as 3.11,3.12,3.13")
    return tuple(dict.fromkeys(versions))


def resolve_closure(dest: Path, keras: str, version: str, python=sys.executable, runner=subprocess.run) -> list[Path]:
    """Keras's whole dependency closure for CPython `version` on manylinux x86_64, as binary
    wheels: pip resolves it from the packages' metadata (through its configured index)."""
    from ..errors import KerasenvError

    platforms = [x for p in PLATFORMS for x in ("--platform", p)]
    cmd = [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
           "--python-version", version, "--implementation", "cp", *platforms, "-d", str(dest), f"keras=={keras}"]
    proc = runner(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        said = [line for line in (proc.stderr or "").splitlines() if line.startswith("ERROR:")]
        raise KerasenvError(f"pip could not resolve keras=={keras} for CPython {version} on manylinux x86_64: "
                            f"{said[-1][len('ERROR:'):].strip() if said else f'exit {proc.returncode}'}",
                            details=(proc.stderr or "")[-2000:])
    return sorted(dest.glob("*.whl"))


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def pack(dest: Path, keras: str, versions=PYTHON_VERSIONS, resolve=resolve_closure) -> dict:
    """Write the folder; {"size", "seconds", "index"}. Raises when it would not fit a lent machine."""
    from ..errors import KerasenvError

    started = time.monotonic()
    dest.mkdir(parents=True, exist_ok=True)
    for old in ("wheels", "site", "kerasenv_image"):  # wheels/, site/: the layout before the closure
        if (dest / old).exists():
            shutil.rmtree(dest / old)
    with tempfile.TemporaryDirectory(prefix="kerasenv-gpu-host-check-wheels-") as tmp:
        closures = {}
        for version in versions:
            wheels = resolve(Path(tmp) / version, keras, version)
            closures[host_site.tag_of(version)] = {"python": version, "wheels": [str(w) for w in wheels]}
        index = host_site.build(closures, str(dest))
    shutil.copytree(PACKAGE, dest / "kerasenv_image", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    readme = README.format(keras=keras, pythons=", ".join(versions))
    for name, text, mode in (("run.py", RUN_PY, 0o755), ("run.sh", RUN_SH, 0o755), ("README.txt", readme, 0o644)):
        (dest / name).write_text(text)
        (dest / name).chmod(mode)
    size = size_of(dest)
    if size > LIMIT:
        raise KerasenvError(f"the pack is {size / 2**20:.1f} MiB, over the {LIMIT // 2**20} MiB a lent GPU "
                            f"machine carries: pack fewer interpreters (--python-versions)")
    return {"size": size, "seconds": round(time.monotonic() - started, 1), "index": index}


def describe(dest: Path, packed: dict, keras: str) -> str:
    """One line: the size, the time, and what each tree holds."""
    trees = packed["index"]["trees"]
    numpy = {t: next((d["version"] for d in tree["distributions"] if d["name"].lower() == "numpy"), None)
             for t, tree in trees.items()}
    return (f"packed {dest} ({packed['size'] / 2**20:.1f} MiB, Keras {keras} and its "
            f"{len(next(iter(trees.values()))['distributions']) - 1} dependencies, in {packed['seconds']:.0f} s) for "
            + ", ".join(f"{t} (numpy {numpy[t]})" for t in sorted(trees))
            + f"; carry it to the GPU machine and run `python3 {dest}/run.py --out OUT`")


def run(pack_dir: Path, out: Path, require_gpu: bool, extra: list[str], python=sys.executable) -> int:
    """Run the packed runner with this (or the given) Python; its exit status."""
    cmd = [python, str(pack_dir / "run.py"), "--out", str(out),
           "--require-gpu" if require_gpu else "--no-require-gpu", *extra]
    return subprocess.run(cmd).returncode


# fixture file name -> the capture's file name (the same names: the runner writes fixture names)
FIXTURE_FILES = ("nvidia-smi.txt", "list.txt", "query-gpu.csv")


def import_fixtures(report: Path, name: str, fixtures: Path = FIXTURES) -> list[Path]:
    """Copy a real capture's nvidia-smi outputs into fixtures/NAME/ (only those that
    succeeded: a capture with an .err file is skipped) and drop NAME from SIMULATED."""
    from ..errors import KerasenvError

    copied = []
    target = fixtures / name
    for f in FIXTURE_FILES:
        src = report / f
        if src.is_file() and src.stat().st_size and not (report / (f + ".err")).exists():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target / f)
            copied.append(target / f)
    if not copied:
        raise KerasenvError(f"{report} has no successful nvidia-smi capture ({', '.join(FIXTURE_FILES)})")
    simulated = fixtures / "SIMULATED"
    if simulated.exists():
        lines = simulated.read_text().splitlines(keepends=True)
        simulated.write_text("".join(line for line in lines if line.strip() != name))
    return copied


def register(subparsers) -> None:
    s = subparsers.add_parser(
        "gpu-host-check", help="pack or run the check for a GPU machine with JAX/PyTorch and no Docker "
                               "(docs/using/gpu-host-check.md)")
    s.add_argument("--pack", metavar="DIR", help="write the self-contained folder to carry (needs pip's index)")
    s.add_argument("--python-versions", metavar="LIST",
                   help=f"with --pack (or --out alone): the CPython versions to pack for "
                        f"(default {','.join(PYTHON_VERSIONS)}; Keras {PYTHON_VERSIONS[0]}+)")
    s.add_argument("--out", metavar="DIR", help="run the check here; reports under DIR/<hostname>-<date>/")
    s.add_argument("--from", dest="from_pack", metavar="DIR", help="with --out: the packed folder to run "
                                                                   "(default: --pack's, else a temporary pack)")
    s.add_argument("--require-gpu", action=_BooleanOptional, default=True,
                   help="with --out: a run without a GPU fails (default; --no-require-gpu for CPU results)")
    s.add_argument("--python", default=sys.executable, help="with --out: the Python that has jax/torch")
    s.add_argument("--import-fixtures", nargs=2, metavar=("REPORT_DIR", "NAME"),
                   help="copy a capture's nvidia-smi outputs to tests/fixtures/nvidia-smi/NAME/")
    s.add_argument("extra", nargs="*", help="after --: runner options (--archive, --backends, --no-bench, "
                                            "--bench-time-box S, -- smoke args)")
    s.set_defaults(handler=_cmd)


def check_options(args) -> None:
    """The options that do not go together, each refused in one line."""
    from ..errors import UsageError

    if args.import_fixtures and (args.pack or args.out or args.from_pack or args.python_versions):
        raise UsageError("--import-fixtures copies a capture and does nothing else: give it alone")
    if args.from_pack and not args.out:
        raise UsageError("--from DIR runs an existing pack: add --out DIR")
    if not args.import_fixtures and not args.pack and not args.out:
        raise UsageError("say what to do: --pack DIR, --out DIR (or both), or --import-fixtures")
    if args.from_pack and args.pack:
        raise UsageError("--from runs an existing pack and --pack writes a new one: give one of them")
    if args.from_pack and args.python_versions:
        raise UsageError("--python-versions chooses what to pack, and --from packs nothing: re-pack with --pack "
                         "DIR --python-versions ...")


def _cmd(args, matrix) -> int:
    check_options(args)
    if args.import_fixtures:
        for path in import_fixtures(Path(args.import_fixtures[0]), args.import_fixtures[1]):
            print(path)
        return 0
    versions = parse_python_versions(args.python_versions) if args.python_versions else PYTHON_VERSIONS
    keras = _matrix_keras(matrix)
    pack_dir = Path(args.pack) if args.pack else None
    if pack_dir:
        print(describe(pack_dir, pack(pack_dir, keras, versions), keras), file=sys.stderr)
    if not args.out:
        return 0
    source = Path(args.from_pack) if args.from_pack else pack_dir
    if source is None:
        with tempfile.TemporaryDirectory(prefix="kerasenv-gpu-host-check-") as tmp:
            pack(Path(tmp), keras, versions)
            return run(Path(tmp), Path(args.out), args.require_gpu, args.extra, args.python)
    return run(source, Path(args.out), args.require_gpu, args.extra, args.python)


def _matrix_keras(matrix) -> str:
    """The Keras release of the matrix's JAX/PyTorch variants (they share one)."""
    versions = {v.keras for v in matrix.variants if getattr(v, "backend", "tensorflow") != "tensorflow"}
    return sorted(versions)[-1] if versions else sorted({v.keras for v in matrix.variants})[-1]


"""`kerasenv gpu-host-check`: prove Keras trains on a GPU machine that has JAX and/or PyTorch
but neither Docker nor TensorFlow (docs/using/gpu-host-check.md).

- `--pack DIR`: a self-contained folder (< 64 MiB) to carry there: the matrix's Keras wheel
  and the small deps keras imports that a stock jax/torch environment may lack (downloaded
  here with pip), the in-image package kerasenv_image (probes, smoke training, GPU monitor)
  and run.py / run.sh (kerasenv_image.host_check: standard library only).
- `--out DIR`: run that check (from a pack, `--from DIR`, or packing into a temporary folder
  first): per installed backend the GPU-library probe and the smoke training with mixed
  precision, the GPU monitor sampling, and the host's own nvidia-smi outputs; all written
  to DIR/<hostname>-<date>/ with summary.json.
- `--import-fixtures REPORT_DIR NAME`: copy a real capture's nvidia-smi outputs into
  tests/fixtures/nvidia-smi/NAME/ under the fixture file names (nvidia-smi.txt, list.txt,
  query-gpu.csv), to replace a simulated folder (tests/fixtures/nvidia-smi/SOURCES.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from argparse import BooleanOptionalAction as _BooleanOptional
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "images" / "common" / "kerasenv_image"
FIXTURES = REPO / "tests" / "fixtures" / "nvidia-smi"
LIMIT = 64 * 2**20  # what a lent GPU machine takes with the working tree
# Pure Python: always packed (each is small). Binary: packed for CPython 3.12 x86_64 only
# (the GPU machines' Python); a host Python that lacks one and is not 3.12 gets an error at
# `import keras` naming it. numpy is there wherever JAX is; PyTorch does not require it.
PURE = ("absl-py", "rich", "markdown-it-py", "mdurl", "pygments", "namex", "packaging")
BINARY = ("optree", "ml-dtypes", "h5py", "numpy")
BINARY_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64")
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

On a machine with a GPU and JAX and/or PyTorch installed (no Docker, TensorFlow or network
needed; nothing is installed system-wide):

    python3 run.py --out OUT                 # the GPU is required (a CPU-only run fails)
    python3 run.py --out OUT --no-require-gpu
    python3 run.py --out OUT --archive -- --epochs 1   # also OUT/<host>-<date>.tar.gz

Everything lands in OUT/<hostname>-<date>/ (summary.json first). Exit 0: every installed
backend passed; 1: one failed; 2: neither jax nor torch is installed.
'''


def pip_download(dest: Path, keras: str, python=sys.executable, runner=subprocess.run) -> None:
    """The Keras wheel and its small deps, through pip (and its configured index/proxy)."""
    base = [python, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    runner([*base, f"keras=={keras}", *PURE], check=True)
    platforms = [x for p in BINARY_PLATFORMS for x in ("--platform", p)]
    runner([*base, "--python-version", "3.12", "--implementation", "cp", *platforms, *BINARY], check=True)


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def pack(dest: Path, keras: str, download=pip_download) -> int:
    """Write the folder; its size in bytes. Raises when it would not fit a lent machine."""
    from ..errors import KerasenvError

    dest.mkdir(parents=True, exist_ok=True)
    wheels = dest / "wheels"
    if wheels.exists():
        shutil.rmtree(wheels)
    wheels.mkdir()
    download(wheels, keras)
    target = dest / "kerasenv_image"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, text, mode in (("run.py", RUN_PY, 0o755), ("run.sh", RUN_SH, 0o755),
                             ("README.txt", README.format(keras=keras), 0o644)):
        (dest / name).write_text(text)
        (dest / name).chmod(mode)
    (dest / "site").mkdir(exist_ok=True)
    size = size_of(dest)
    if size > LIMIT:
        raise KerasenvError(f"the pack is {size / 2**20:.1f} MiB, over the {LIMIT // 2**20} MiB a lent GPU "
                            "machine carries")
    return size


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
    s.add_argument("--out", metavar="DIR", help="run the check here; reports under DIR/<hostname>-<date>/")
    s.add_argument("--from", dest="from_pack", metavar="DIR", help="with --out: the packed folder to run "
                                                                   "(default: --pack's, else a temporary pack)")
    s.add_argument("--require-gpu", action=_BooleanOptional, default=True,
                   help="with --out: a run without a GPU fails (default; --no-require-gpu for CPU results)")
    s.add_argument("--python", default=sys.executable, help="with --out: the Python that has jax/torch")
    s.add_argument("--import-fixtures", nargs=2, metavar=("REPORT_DIR", "NAME"),
                   help="copy a capture's nvidia-smi outputs to tests/fixtures/nvidia-smi/NAME/")
    s.add_argument("extra", nargs="*", help="after --: runner options (--archive, --backends, -- smoke args)")
    s.set_defaults(handler=_cmd)


def _cmd(args, matrix) -> int:
    from ..errors import KerasenvError

    if args.import_fixtures:
        for path in import_fixtures(Path(args.import_fixtures[0]), args.import_fixtures[1]):
            print(path)
        return 0
    if not args.pack and not args.out:
        raise KerasenvError("say what to do: --pack DIR, --out DIR (or both), or --import-fixtures")
    keras = _matrix_keras(matrix)
    pack_dir = Path(args.pack) if args.pack else None
    if pack_dir:
        size = pack(pack_dir, keras)
        print(f"packed {pack_dir} ({size / 2**20:.1f} MiB, Keras {keras}); carry it to the GPU machine and run "
              f"`python3 {pack_dir}/run.py --out OUT`", file=sys.stderr)
    if not args.out:
        return 0
    source = Path(args.from_pack) if args.from_pack else pack_dir
    if source is None:
        with tempfile.TemporaryDirectory(prefix="kerasenv-gpu-host-check-") as tmp:
            pack(Path(tmp), keras)
            return run(Path(tmp), Path(args.out), args.require_gpu, args.extra, args.python)
    return run(source, Path(args.out), args.require_gpu, args.extra, args.python)


def _matrix_keras(matrix) -> str:
    """The Keras release of the matrix's JAX/PyTorch variants (they share one)."""
    versions = {v.keras for v in matrix.variants if getattr(v, "backend", "tensorflow") != "tensorflow"}
    return sorted(versions)[-1] if versions else sorted({v.keras for v in matrix.variants})[-1]


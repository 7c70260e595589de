"""`kerasenv gpu-host-check` with real parts: the pack made by the real CLI through pip's
index, then its run.py in fresh virtual environments of real CPython interpreters that hold
nothing but one backend, on the CPU (`--no-require-gpu`: this machine has no GPU), with the
bench included at a short time box:

- CPython 3.13 with only `pip install jax==0.12.0.1` (jaxlib from PyPI: a CPU build): the
  Python and JAX of the JAX images on Debian 13, so the pack's cp313 tree is the one run. The
  machine of issue 29 (CPython 3.12, JAX 0.10.2): there `import keras` failed at optree's
  typing_extensions, which the hand-kept list of the old pack lacked.
- CPython 3.11 with only `pip install torch==2.13.0`. PyPI's x86_64 torch is the CUDA build
  (gigabytes with its nvidia-* wheels) and the CPU wheel lives on download.pytorch.org, which
  this machine cannot reach; this machine's pip configuration has a local CPU wheel for
  CPython 3.11 (find-links /opt/wheels: torch-2.13.0+cpu-cp311), which `torch==2.13.0`
  resolves to (the test checks that it did). **For CPython 3.12 the same request resolves to
  PyPI's CUDA wheel: a 3.12 torch CPU wheel does not resolve here**, so torch is run on 3.11.
- CPython 3.10: the runner stops with its one line (Keras 3.15 requires Python >= 3.11).

The pack is made once for the module. A missing interpreter fails the test with the way to
get one; the venvs need pip's index (PyPI through the configured proxy).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import kerasenv

LIMIT = 64 * 2**20
BENCH = ["--bench-time-box", "0.1", "--bench-batch-sizes", "32", "--bench-models", "mlp"]


def cpython(minor: str) -> str:
    """A real CPython `minor` interpreter: pyenv's, else python<minor> on PATH."""
    root = os.environ.get("PYENV_ROOT", "/root/.pyenv")
    candidates = sorted(glob.glob(f"{root}/versions/{minor}.*/bin/python{minor}"), reverse=True)
    candidates += [p for p in [shutil.which(f"python{minor}")] if p]
    for exe in candidates:
        probe = subprocess.run([exe, "-c", "import sys, platform; print(platform.python_implementation(), "
                                           "'%d.%d' % sys.version_info[:2])"], capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.split() == ["CPython", minor]:
            return exe
    pytest.fail(f"no CPython {minor} on this machine (pyenv's {root}/versions/{minor}.*, python{minor} on PATH): "
                f"install one, e.g. `pyenv install {minor}` or `apt-get install python{minor} python{minor}-venv`")


def clean_env(**extra) -> dict:
    """What a user's shell has: no PYTHONPATH of this test run, no virtualenv of ours."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "PIP_CERT", "PIP_DEFAULT_TIMEOUT",
                                       "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_FIND_LINKS", "SSL_CERT_FILE")
           if k in os.environ}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.executable).parent)))
    return {**env, **extra}


def venv_with(tmp_path: Path, minor: str, requirement: str) -> Path:
    """A fresh venv of CPython `minor` with `pip install <requirement>` and nothing else."""
    venv = tmp_path / f"venv{minor}"
    subprocess.run([cpython(minor), "-m", "venv", str(venv)], check=True, env=clean_env(), timeout=300)
    python = venv / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", requirement], capture_output=True,
                          text=True, env=clean_env(), timeout=900)
    assert proc.returncode == 0, f"pip install {requirement} into a CPython {minor} venv: {proc.stderr[-3000:]}"
    return python


def installed(python: Path) -> dict:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                         env=clean_env(), check=True).stdout
    return {p["name"].lower(): p["version"] for p in json.loads(out)}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("gpu-host-check") / "pack"
    started = time.monotonic()
    proc = kerasenv("gpu-host-check", "--pack", str(dest), timeout=900)
    print(f"pack: {time.monotonic() - started:.1f} s; {proc.stderr.strip().splitlines()[-1]}")
    return dest, proc.stderr


def run_pack(python: Path, pack: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(pack / "run.py"), "--out", str(out), *args], capture_output=True,
                          text=True, env=clean_env(), timeout=1500)


def report_of(out: Path) -> tuple[Path, dict]:
    (report,) = [p for p in out.iterdir() if p.is_dir()]
    return report, json.loads((report / "summary.json").read_text())


def test_the_pack_fits_a_lent_machine_and_holds_three_interpreters(packed):
    pack, stderr = packed
    size = sum(f.stat().st_size for f in pack.rglob("*") if f.is_file())
    assert size <= LIMIT, f"{size / 2**20:.1f} MiB"
    index = json.loads((pack / "site-packages.json").read_text())
    assert sorted(index["trees"]) == ["cp311", "cp312", "cp313"] and index["requires_python"] == ">=3.11"
    for tag, tree in index["trees"].items():
        names = {d["name"].lower().replace("_", "-") for d in tree["distributions"]}
        # pip's closure, from the metadata: what the old hand list lacked is there (optree's needs)
        assert {"keras", "optree", "typing-extensions", "numpy", "ml-dtypes", "h5py", "absl-py", "rich"} <= names, tag
    assert f"packed {pack} (" in stderr and "MiB, Keras 3." in stderr
    assert (pack / "run.py").is_file() and (pack / "kerasenv_image" / "host_check.py").is_file()


def check_summary(report: Path, summary: dict, backend: str, code: int, stderr: str) -> dict:
    assert list(summary["backends"]) == [backend] and summary["require_gpu"] is False
    result = summary["backends"][backend]
    assert (report / f"probe-{backend}.json").is_file() and (report / f"smoke-{backend}" / "report.json").is_file()
    assert all(c["exit"] is None for c in summary["nvidia_smi"].values())  # no nvidia-smi here: recorded, not faked
    assert result["smoke"]["exit"] == 0, f"the smoke: {result['smoke'].get('error')} ({report}/smoke-{backend}.log)"
    bench = result["bench"]["cpu"]
    assert list(result["bench"]) == ["cpu"] and bench["exit"] == 0 and not bench.get("error"), bench
    assert bench["configurations"] == bench["ok"] > 0, bench
    rows = [r for r in summary["bench_table"] if r["backend"] == backend]
    combos = {(r["jit"], r["precision"]) for r in rows}
    jits = [j for j in ("off", "on") if j not in bench["jit_skipped"]]
    assert combos == {(j, p) for j in jits for p in bench["precisions"]} and "off" in bench["precisions"]
    assert all(r["samples_per_second"] > 0 and r["gpu_utilization_percent"] is None for r in rows)
    doc = json.loads((report / bench["file"]).read_text())
    assert doc["kind"] == "kerasenv-bench" and doc["device"]["kind"] == "cpu" and len(doc["results"]) == len(rows)
    assert "| mlp | 32 |" in (report / "bench.md").read_text()
    assert result["verdict"] == "PASS" and code == summary["exit"] == 0, (result, stderr[-3000:])
    return result


def test_a_cpython_313_venv_with_only_jax_passes(packed, tmp_path):
    pack, _ = packed
    python = venv_with(tmp_path, "3.13", "jax==0.12.0.1")
    have = installed(python)
    assert have["jax"] == "0.12.0.1" and "keras" not in have and "optree" not in have and "typing-extensions" not in have
    bare = subprocess.run([str(python), "-c", "import keras"], capture_output=True, text=True, env=clean_env())
    assert bare.returncode != 0 and "No module named 'keras'" in bare.stderr
    proc = run_pack(python, pack, tmp_path / "out", "--no-require-gpu", "--archive", *BENCH)
    report, summary = report_of(tmp_path / "out")
    assert summary["interpreter"]["tag"] == "cp313" and summary["python"].startswith("3.13.")
    source = {d["name"].lower().replace("_", "-"): d["source"] for d in summary["distributions"]}
    assert source["keras"] == source["optree"] == source["typing-extensions"] == "pack"
    assert source["numpy"] == source["ml-dtypes"] == "host"  # jax's own: never shadowed by the pack's
    result = check_summary(report, summary, "jax", proc.returncode, proc.stderr)
    assert result["probe"]["judged"] is False  # jaxlib from PyPI has no CUDA plugin: recorded, not judged
    assert (tmp_path / "out" / f"{report.name}.tar.gz").is_file()


def test_a_cpython_311_venv_with_only_torch_passes(packed, tmp_path):
    pack, _ = packed
    python = venv_with(tmp_path, "3.11", "torch==2.13.0")
    have = installed(python)
    assert have["torch"] == "2.13.0+cpu", f"torch==2.13.0 did not resolve to the local CPU wheel: {have['torch']}"
    assert "numpy" not in have and "keras" not in have
    proc = run_pack(python, pack, tmp_path / "out", "--no-require-gpu", *BENCH)
    report, summary = report_of(tmp_path / "out")
    source = {d["name"].lower().replace("_", "-"): d["source"] for d in summary["distributions"]}
    assert source["keras"] == source["numpy"] == source["ml-dtypes"] == "pack"  # torch brings no numpy
    assert source["typing-extensions"] == "host"  # torch requires it
    check_summary(report, summary, "torch", proc.returncode, proc.stderr)


def test_cpython_310_gets_one_line_naming_the_cause_and_the_fix(packed, tmp_path):
    pack, _ = packed
    proc = run_pack(Path(cpython("3.10")), pack, tmp_path / "out")
    assert proc.returncode == 3 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    keras = json.loads((pack / "site-packages.json").read_text())["keras"]
    assert lines[0].startswith(f"kerasenv host check: Keras {keras} needs Python >=3.11 (its Requires-Python) and "
                               "this is CPython 3.10.")
    assert "run it with CPython 3.11, 3.12, 3.13 instead" in lines[0]
    assert not (tmp_path / "out").exists()

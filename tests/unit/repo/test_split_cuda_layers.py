"""images/build/split-cuda-layers.sh: the CUDA wheels in N parts of similar size, one library
never split, and parts whose bytes depend on the wheels alone (not on when they were
installed), so rebuilt images keep their layer digests and images with the same wheels share
them. Run on a made-up wheel tree, twice, at different times."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

from ..conftest import REPO

SCRIPT = REPO / "images" / "build" / "split-cuda-layers.sh"
# Sizes in KiB, in the proportions of the CUDA 12.9 wheels (cuDNN 1242 MB, cuBLAS 817, ...).
LIBS = {"cudnn": 1242, "cublas": 817, "cusolver": 473, "cusparse": 465, "nccl": 400, "cufft": 281,
        "cuda_nvrtc": 217, "curand": 162, "cuda_nvcc": 95, "nvjitlink": 92, "cuda_cupti": 43, "cuda_runtime": 10}


def wheel_tree(root: Path, mtime: int) -> Path:
    src = root / "cuda-libs"
    for lib, kib in LIBS.items():
        (src / "nvidia" / lib / "lib").mkdir(parents=True)
        (src / "nvidia" / lib / "lib" / f"lib{lib}.so").write_bytes(hashlib.sha256(lib.encode()).digest() * (kib * 32))
        (src / "nvidia" / lib / "__init__.py").write_text("")
        (src / "nvidia" / lib / "__pycache__").mkdir()
        (src / "nvidia" / lib / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(mtime.to_bytes(8, "little"))
        (src / f"nvidia_{lib}_cu12-1.0.dist-info").mkdir()
        (src / f"nvidia_{lib}_cu12-1.0.dist-info" / "RECORD").write_text(f"nvidia/{lib}/lib/lib{lib}.so\n")
    (src / "nvidia" / "__init__.py").write_text("")
    for path in src.rglob("*"):
        os.utime(path, (mtime, mtime))
    return src


SITE = "opt/venv/lib/python3.11/site-packages"


def split(tmp: Path, mtime: int, parts: int = 4) -> tuple[Path, str]:
    src = wheel_tree(tmp, mtime)
    proc = subprocess.run(["bash", str(SCRIPT), str(src), str(tmp / "parts"), str(parts), f"/{SITE}"],
                          capture_output=True, text=True, check=True)
    return tmp / "parts", proc.stdout


def layer_digest(folder: Path) -> str:
    """What Docker's COPY would put in a layer: every path with its bytes, mode and mtime."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_file():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def test_each_library_lands_in_exactly_one_part_and_the_parts_are_of_similar_size(tmp_path):
    parts, said = split(tmp_path, 1_700_000_000)
    where = {lib: [p.name for p in sorted(parts.iterdir()) if (p / SITE / "nvidia" / lib).is_dir()] for lib in LIBS}
    assert all(len(found) == 1 for found in where.values()), where
    sizes = [sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in sorted(parts.iterdir())]
    assert len(sizes) == 4 and max(sizes) / min(sizes) < 1.35, sizes
    assert where["cudnn"] == ["1"]  # the biggest library first
    assert said.count("part ") == 4
    assert not (tmp_path / "cuda-libs").exists()  # moved, not copied: no second 4.5 GB in the stage


def test_metadata_goes_with_the_last_part_and_no_bytecode_is_kept(tmp_path):
    parts, _ = split(tmp_path, 1_700_000_000)
    assert (parts / "4" / SITE / "nvidia" / "__init__.py").is_file()
    assert len(list((parts / "4" / SITE).glob("*.dist-info"))) == len(LIBS)
    assert list(parts.rglob("__pycache__")) == []


def test_the_same_wheels_installed_at_another_time_give_byte_identical_parts(tmp_path):
    first, _ = split(tmp_path / "a", 1_700_000_000)
    second, _ = split(tmp_path / "b", 1_800_000_000)
    for n in ("1", "2", "3", "4"):
        assert layer_digest(first / n) == layer_digest(second / n), n
    # SOURCE_DATE_EPOCH's default, on the parent directories from / too
    assert {int(p.stat().st_mtime) for p in first.rglob("*")} == {0}
    assert (first / "1" / "opt" / "venv").is_dir()

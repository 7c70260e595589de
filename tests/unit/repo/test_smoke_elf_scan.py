"""smoke_tests/elf_scan.py: the e_machine of each ELF file in a tar stream, whatever tar format
the engine writes (GNU long names, PAX, ustar prefixes), in chunks of any size."""

from __future__ import annotations

import importlib.util
import io
import struct
import sys
import tarfile

import pytest

from ..conftest import REPO

_spec = importlib.util.spec_from_file_location("kerasenv_smoke_elf_scan", REPO / "smoke_tests" / "elf_scan.py")
elf_scan = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = elf_scan  # its dataclasses look their module up there
_spec.loader.exec_module(elf_scan)


def elf(machine: int, *, big_endian: bool = False, size: int = 4096) -> bytes:
    """An ELF64 header with `machine`, padded to `size` bytes."""
    order = ">" if big_endian else "<"
    ident = b"\x7fELF" + bytes([2, 2 if big_endian else 1, 1]) + bytes(9)
    header = ident + struct.pack(order + "HHI", 3, machine, 1)
    return header + bytes(size - len(header))


def archive(files: dict[str, bytes], fmt: int, symlinks: dict[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        folder = tarfile.TarInfo("venv")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for path, target in (symlinks or {}).items():
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return out.getvalue()


def chunked(data: bytes, size: int):
    return (data[i:i + size] for i in range(0, len(data), size))


LONG = "venv/lib/python3.13/site-packages/nvidia/" + "deep/" * 30 + "libcudnn_engines_precompiled.so.9"
FILES = {
    "venv/bin/python-helper": elf(183),
    "venv/lib/libtorch_cpu.so": elf(183, size=3_000_001),  # several chunks, not block aligned
    LONG: elf(183),
    "venv/lib/kernels.cubin": elf(190),  # GPU code: not host code
    "venv/lib/wrong.so": elf(62),
    "venv/lib/big-endian.so": elf(22, big_endian=True),
    "venv/lib/script.py": b"print('not an ELF file')\n",
    "venv/lib/short": b"\x7fELF\x02",  # the magic, no header
    "venv/lib/empty": b"",
}


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT],
                         ids=["gnu", "pax", "ustar"])
@pytest.mark.parametrize("chunk", [1, 511, 4096, 2**21])
def test_every_regular_file_is_read_and_each_elf_counted_by_machine(fmt, chunk):
    files = dict(FILES)
    if fmt == tarfile.USTAR_FORMAT:  # ustar: 155 + 100 characters at most, split in prefix/name
        files["venv/lib/python3.13/site-packages/" + "p/" * 60 + "libx.so"] = files.pop(LONG)
    data = archive(files, fmt, symlinks={"venv/bin/python": "/usr/bin/python3"})
    if chunk == 1 and len(data) > 200_000:
        data_chunks = chunked(data, 7)  # byte-wise over 3 MB is slow; odd sizes show the same
    else:
        data_chunks = chunked(data, chunk)
    result = elf_scan.scan(data_chunks)
    assert result.files == len(files)
    assert result.bytes <= len(data)
    assert dict(result.machines) == {183: 3, 190: 1, 62: 1, 22: 1}
    assert result.elf_files == 6
    assert dict(result.host_machines()) == {183: 3, 62: 1, 22: 1}
    assert result.not_built_for(183) == {"x86-64(62)": ["venv/lib/wrong.so"], "s390(22)": ["venv/lib/big-endian.so"]}
    assert result.truncated == ["venv/lib/short"]
    long_path = next(p for p in files if p.endswith("libcudnn_engines_precompiled.so.9") or p.endswith("libx.so"))
    assert long_path in result.examples[183]


def test_elf_files_under_a_prefix_are_counted_apart():
    files = {"venv/lib/nvidia/cudnn/lib/libcudnn.so.9": elf(183), "venv/lib/nvidia/x.py": b"",
             "venv/lib/torch/lib/libtorch.so": elf(183)}
    result = elf_scan.scan([archive(files, tarfile.PAX_FORMAT)], under=("venv/lib/nvidia/", "venv/none/"))
    assert dict(result.under) == {"venv/lib/nvidia/": 1}


def test_an_archive_of_one_machine_has_nothing_built_for_another():
    result = elf_scan.scan(chunked(archive({"venv/a.so": elf(62), "venv/b.so": elf(62)}, tarfile.PAX_FORMAT), 100))
    assert result.not_built_for(62) == {} and result.elf_files == 2


def test_examples_are_capped_per_machine():
    files = {f"venv/lib{i}.so": elf(62, size=64) for i in range(elf_scan.EXAMPLES + 5)}
    result = elf_scan.scan([archive(files, tarfile.GNU_FORMAT)])
    assert result.machines[62] == elf_scan.EXAMPLES + 5 and len(result.examples[62]) == elf_scan.EXAMPLES


def test_a_stream_that_ends_inside_a_member_is_an_error():
    data = archive({"venv/a.so": elf(62, size=100_000)}, tarfile.GNU_FORMAT)
    with pytest.raises(ValueError, match="ended inside a member"):
        elf_scan.scan([data[:50_000]])


def test_base256_sizes_and_e_machine():
    assert elf_scan._number(bytes([0x80]) + bytes(3) + (5 * 2**33).to_bytes(8, "big")) == 5 * 2**33
    assert elf_scan._number(b"00000001750\0") == 0o1750
    assert elf_scan.e_machine(elf(183)) == 183 and elf_scan.e_machine(b"#!/bin/sh\n" * 3) is None


def test_headers_read_in_place_count_as_the_archive_of_the_same_folder(tmp_path):
    """A natively running image reads its venv's headers in place (read_headers, its source run
    by the image's Python): the same Scan as the engine's archive of that folder gives."""
    import inspect
    import json
    import os
    import subprocess

    files = {p: d for p, d in FILES.items() if p != LONG} | {"venv/lib/nvidia/cudnn/libcudnn.so.9": elf(183)}
    for path, data in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    os.symlink("/usr/bin/python3", tmp_path / "venv/bin/python")  # a link, as in every venv: not read
    os.symlink("lib", tmp_path / "venv/lib64")  # a linked folder: not walked twice
    script = inspect.getsource(elf_scan.read_headers) + \
        f"import json; print(json.dumps(read_headers({str(tmp_path / 'venv')!r}, {str(tmp_path)!r})))"
    found = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                      check=True).stdout)
    in_place = elf_scan.from_headers(found, under=("venv/lib/nvidia/",), seconds=0.5)
    archived = elf_scan.scan([archive(files, tarfile.PAX_FORMAT, symlinks={"venv/bin/python": "/usr/bin/python3"})],
                             under=("venv/lib/nvidia/",))
    assert in_place.files == archived.files == len(files)
    assert dict(in_place.machines) == dict(archived.machines) == {183: 3, 190: 1, 62: 1, 22: 1}
    assert in_place.truncated == archived.truncated == ["venv/lib/short"]
    assert dict(in_place.under) == dict(archived.under) == {"venv/lib/nvidia/": 1}
    assert in_place.not_built_for(183) == archived.not_built_for(183)
    assert sorted(map(sorted, in_place.examples.values())) == sorted(map(sorted, archived.examples.values()))
    assert in_place.bytes <= 64 * len(files) and in_place.seconds == 0.5

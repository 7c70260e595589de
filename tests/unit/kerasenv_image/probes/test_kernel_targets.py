"""The fat binary reader of kerasenv_image.probes.kernel_targets, on synthetic ELF files.

No real GPU library is small enough to commit, so `elf_with_fatbins` builds an ELF64 file
with the real header layout (the probe's docstring: container header 0xBA55ED50, entry
headers of 64/80/96/104 bytes as nvcc writes them, the flag bits cuobjdump 13.5 agreed with on
jax-cuda12-plugin 0.10.2's _prng.so, torch 2.15.0's libtorch_cuda.so and TF 2.21's libraries).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kerasenv_image.probes import kernel_targets as probe

LINUX_64 = 0x11
LZ4, ZSTD, ARCH_SPECIFIC, SM100_BIT = 0x2000, 0x8000, 0x100000, 0x1000000


def entry(kind: int, arch: int, flags: int = LINUX_64 | LZ4, header_size: int = 64, payload: int = 40) -> bytes:
    """One fat binary entry: its header (padded to header_size) and a payload of junk."""
    head = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, header_size, payload, payload, 0, 8, 1, arch, 0, 0,
                       flags, 0, payload * 3)
    return head[:header_size].ljust(header_size, b"\0") + bytes(range(256))[:payload].ljust(payload, b"\xba")


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def elf_with_fatbins(sections: dict[str, bytes]) -> bytes:
    """A minimal little-endian ELF64 file: a NULL section, the named sections, .shstrtab."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in sections) + b".shstrtab\0"
    data, offsets = bytearray(b"\0" * 64), []
    for body in sections.values():
        data += b"\0" * (-len(data) % 8)
        offsets.append(len(data))
        data += body
    names_at = len(data)
    data += names
    data += b"\0" * (-len(data) % 8)
    shoff = len(data)
    name_offset = 1
    headers = [b"\0" * 64]
    for (name, body), offset in zip(sections.items(), offsets):
        headers.append(struct.pack("<IIQQQQIIQQ", name_offset, 1, 2, 0, offset, len(body), 0, 0, 8, 0))
        name_offset += len(name) + 1
    headers.append(struct.pack("<IIQQQQIIQQ", name_offset, 3, 0, 0, names_at, len(names), 0, 0, 1, 0))
    data += b"".join(headers)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers),
                                 len(headers) - 1)
    data[:64] = header
    return bytes(data)


@pytest.fixture
def write(tmp_path):
    def write(relpath: str, content: bytes) -> Path:
        path = tmp_path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return path
    return write


def test_sass_and_ptx_per_container_entry_with_every_header_size(write):
    fatbin = container(entry(2, 120, header_size=96), entry(1, 120, header_size=80), entry(2, 60),
                       entry(2, 100, SM100_BIT | LINUX_64 | LZ4, header_size=104))
    found = probe.parse_file(str(write("lib.so", elf_with_fatbins({".text": b"\x90" * 30, ".nv_fatbin": fatbin}))))
    assert found.sass == {"sm_60", "sm_100", "sm_120"} and found.ptx == {"compute_120"}
    assert found.entries == 4 and found.compression == {"lz4"}


def test_arch_specific_entries_are_told_apart_and_zstd_is_seen(write):
    fatbin = container(entry(2, 90, LINUX_64 | ZSTD), entry(2, 90, LINUX_64 | ZSTD | ARCH_SPECIFIC),
                       entry(2, 120, LINUX_64 | ZSTD | ARCH_SPECIFIC | SM100_BIT, header_size=104))
    found = probe.parse_file(str(write("lib.so", elf_with_fatbins({".nv_fatbin": fatbin}))))
    assert probe.sorted_archs(found.sass) == ["sm_90", "sm_90a", "sm_120a"]
    assert found.compression == {"zstd"}


def test_containers_back_to_back_and_after_padding_are_all_read(write):
    first = container(entry(2, 70, payload=36))  # 16 + 64 + 36 = 116 bytes: 4 bytes to the next 8
    section = first + b"\0" * 4 + container(entry(2, 80)) + b"\0" * 24 + container(entry(1, 90))
    found = probe.parse_file(str(write("lib.so", elf_with_fatbins({".nv_fatbin": section}))))
    assert found.sass == {"sm_70", "sm_80"} and found.ptx == {"compute_90"} and found.entries == 3


def test_relocatable_fatbin_counts_only_without_an_executable_one(write):
    both = elf_with_fatbins({"__nv_relfatbin": container(entry(1, 120)), ".nv_fatbin": container(entry(2, 90))})
    assert probe.parse_file(str(write("both.so", both))).ptx == set()
    only_rel = elf_with_fatbins({"__nv_relfatbin": container(entry(1, 120))})
    assert probe.parse_file(str(write("rel.so", only_rel))).ptx == {"compute_120"}


def test_a_library_without_gpu_code_has_empty_sets(write):
    found = probe.parse_file(str(write("libcudart.so.12", elf_with_fatbins({".text": b"\xc3" * 16}))))
    assert (found.sass, found.ptx, found.entries) == (set(), set(), 0)


@pytest.mark.parametrize("content", [b"/* GNU ld script */ GROUP ( libc.so.6 )", b"\x7fELF\x01\x01\x01" + b"\0" * 60])
def test_anything_but_elf64_is_refused_by_name(write, content):
    with pytest.raises(probe.NotElf64):
        probe.parse_file(str(write("libc.so", content)))


def test_arch_order_is_numeric_with_the_plain_target_first():
    assert probe.sorted_archs({"sm_120", "sm_90a", "sm_100", "sm_90", "sm_60"}) == \
        ["sm_60", "sm_90", "sm_90a", "sm_100", "sm_120"]


def test_library_names_come_from_the_wheel_folder_or_for_cuda_13_the_file():
    assert probe.library_name("nvidia/cudnn/lib/libcudnn_cnn.so.9") == "cudnn"
    assert probe.library_name("nvidia/cu13/lib/libcublasLt.so.13") == "cublasLt"


def test_environment_scan_splits_framework_and_nvidia_libraries(write, tmp_path):
    write("tensorflow/libtensorflow_cc.so.2", elf_with_fatbins({".nv_fatbin": container(
        entry(2, 60), entry(2, 90), entry(1, 90))}))
    write("tensorflow/python/_pywrap.so", elf_with_fatbins({".nv_fatbin": container(entry(2, 89))}))
    write("tensorflow/libtensorflow_framework.so.2", elf_with_fatbins({".text": b"\0"}))
    write("nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", elf_with_fatbins({".nv_fatbin": container(
        entry(2, 100), entry(2, 120))}))
    write("nvidia/cudnn/lib/libcudnn.so.9", elf_with_fatbins({".text": b"\0"}))
    write("nvidia/cuda_runtime/lib/libcudart.so.12", elf_with_fatbins({".text": b"\0"}))
    write("nvidia/cudnn/lib/README.so.txt", b"not an ELF file")
    result = probe.scan_environment(str(tmp_path))
    tf = result["frameworks"]["tensorflow"]
    assert (tf["sass"], tf["ptx"]) == (["sm_60", "sm_89", "sm_90"], ["compute_90"])
    assert tf["files_with_gpu_code"] == ["tensorflow/libtensorflow_cc.so.2", "tensorflow/python/_pywrap.so"]
    assert result["libraries"] == {"cuda_runtime": {"sass": [], "ptx": []},
                                   "cudnn": {"sass": ["sm_100", "sm_120"], "ptx": []}}
    assert result["fatbin_entries"] == 6 and result["tool_version"] == probe.TOOL_VERSION
    assert result["seconds"] >= 0 and result["unreadable"] == []


def test_jax_and_torch_layouts_are_found(write, tmp_path):
    write("jaxlib/libjax_common.so", elf_with_fatbins({".text": b"\0"}))
    write("jax_plugins/xla_cuda12/xla_cuda_plugin.so", elf_with_fatbins({".nv_fatbin": container(
        entry(2, 120), entry(1, 120))}))
    write("jax_cuda12_plugin/_prng.so", elf_with_fatbins({".nv_fatbin": container(entry(2, 50))}))
    write("torch/lib/libtorch_cuda.so", elf_with_fatbins({".nv_fatbin": container(entry(2, 90, LINUX_64 | ARCH_SPECIFIC))}))
    write("nvidia/cu13/lib/libcublasLt.so.13", elf_with_fatbins({".nv_fatbin": container(entry(2, 100))}))
    result = probe.scan_environment(str(tmp_path))
    assert result["frameworks"]["jax"]["sass"] == ["sm_50", "sm_120"]
    assert result["frameworks"]["jax"]["ptx"] == ["compute_120"]
    assert result["frameworks"]["torch"]["sass"] == ["sm_90a"]
    assert result["libraries"] == {"cublasLt": {"sass": ["sm_100"], "ptx": []}}


def test_main_prints_one_json_line_for_the_environment(write, tmp_path, capsys):
    write("torch/lib/libtorch_cuda.so", elf_with_fatbins({".nv_fatbin": container(entry(2, 80))}))
    assert probe.main(["--json", "--site-packages", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1 and json.loads(out)["frameworks"]["torch"]["sass"] == ["sm_80"]
    assert probe.main(["--site-packages", str(tmp_path)]) == 0
    assert "torch ?" in capsys.readouterr().out


def test_main_reads_named_files(write, capsys):
    path = write("lib.so", elf_with_fatbins({".nv_fatbin": container(entry(2, 80), entry(1, 80))}))
    assert probe.main(["--json", str(path)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["sass"], row["ptx"], row["entries"]) == (["sm_80"], ["compute_80"], 2)


@pytest.mark.parametrize("argv, says", [(["/nonexistent.so"], "readable ELF64"),
                                        (["--site-packages", "/nonexistent"], "--site-packages DIR")])
def test_bad_input_is_one_line_with_the_fix_and_exit_2(argv, says, capsys):
    assert probe.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err

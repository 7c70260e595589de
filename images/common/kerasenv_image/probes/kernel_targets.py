"""Which GPU code the installed framework and NVIDIA libraries really carry: the SASS
(cubin, runs natively) and PTX (JIT-compiled by the driver) targets of every CUDA fat binary
in their shared objects, read from the ELF files themselves.

Why read the binaries: a hand-kept list of compute capabilities drifts (TF 2.21 carries
SASS sm_90, which TF's .bazelrc list does not say), and `strings | grep sm_` proves
nothing, since LLVM/XLA lookup tables name every arch (compatibility.md, "Which GPU code
the wheels really carry"). Standard library only: it runs inside the images, which have no
pyelftools; it reads only the ELF section headers and the fat binary headers, seeking over
the payloads, so TensorFlow's ~1 GB libraries take well under a second each.

Layout (what NVIDIA's fatbinary.h leaves undocumented; as read by
n-eiling/cuda-fatbin-decompression and checked here against cuobjdump 13.5 from PyPI's
nvidia-cuda-cuobjdump wheel on TF 2.14-2.21, jax-cuda12 0.10.2 and torch 2.15.0):

- The fat binaries the CUDA runtime loads sit in the ELF section `.nv_fatbin`: one or more
  containers back to back, 8-byte aligned. `__nv_relfatbin` holds relocatable device code
  for a later device link (torch 2.15's libtorch_nvshmem.so carries both, and its
  relocatable part has PTX compute_120 the loaded part lacks); like cuobjdump's default, it
  is read only from a file without `.nv_fatbin`.
- Container header, 16 bytes little-endian: u32 magic 0xBA55ED50, u16 version, u16 header
  size, u64 size of the entries that follow.
- Entry header (64 bytes and more; its own size is in it): u16 kind (1 PTX, 2 ELF/SASS),
  u16 version, u32 header size, u64 payload size, u32 compressed size, u32 ?, u16 minor,
  u16 major, u32 arch (e.g. 90, 100, 120), u32 name offset, u32 name length, u64 flags,
  u64 0, u64 uncompressed size. The payload follows the header.
- Flags: 0x1 64-bit, 0x10 Linux, 0x2000 LZ4-compressed, 0x8000 ZSTD-compressed (CUDA 13
  toolchains), 0x100000 arch-specific (`sm_90a`, `sm_100a`, `sm_120a`: cuobjdump names exactly
  the entries with this bit `a`). Seen but not named by cuobjdump: 0x1000000 on every
  sm_100+ entry and 0x200000 on torch 2.15's sm_103 entries (cuobjdump lists them as plain
  sm_103, perhaps family-specific `f`); both are reported as the plain arch, as cuobjdump does.

Run in an image as `python -m kerasenv_image.probes.kernel_targets [--json]`
(`kerasenv kernel-targets ID`, smoke_tests/test_kernel_targets.py), or on files:
`python -m kerasenv_image.probes.kernel_targets FILE...`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import struct
import sys
import sysconfig
import time
from dataclasses import dataclass, field

# Bumped whenever what the parser reports changes, so a recorded parse (images/<id>/
# kernel-targets.json) says which parser wrote it.
TOOL_VERSION = 1

EXECUTABLE_FATBIN, RELOCATABLE_FATBIN = b".nv_fatbin", b"__nv_relfatbin"
CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_HEADER = struct.Struct("<IHHQ")
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQ")  # up to and including the flags
KIND_PTX, KIND_SASS = 1, 2
FLAG_LZ4, FLAG_ZSTD, FLAG_ARCH_SPECIFIC = 0x2000, 0x8000, 0x100000
ALIGNMENT = 8
ELF_MAGIC = b"\x7fELF"
ELFCLASS64, ELFDATA2LSB = 2, 1
SCAN_CHUNK = 1 << 16


class NotElf64(ValueError):
    """Not a little-endian ELF64 file (a linker script, a 32-bit object, a truncated file)."""


@dataclass
class FileTargets:
    """The GPU code of one shared object."""

    path: str
    sass: set = field(default_factory=set)  # "sm_90", "sm_90a", ...
    ptx: set = field(default_factory=set)  # "compute_90", ...
    entries: int = 0
    compression: set = field(default_factory=set)  # "lz4", "zstd"
    other_kinds: set = field(default_factory=set)  # entry kinds other than PTX and SASS


def arch_name(prefix: str, arch: int, flags: int) -> str:
    return f"{prefix}_{arch}" + ("a" if flags & FLAG_ARCH_SPECIFIC else "")


def arch_key(name: str) -> tuple:
    """Sort key: numeric arch, then the plain target before its arch-specific one."""
    match = re.match(r"^[a-z]+_(\d+)([a-z]*)$", name)
    return (int(match.group(1)), match.group(2)) if match else (1 << 30, name)


def sorted_archs(names) -> list:
    return sorted(names, key=arch_key)


def fatbin_sections(f) -> list:
    """(offset, size) of the fat binary sections of the open ELF64 file `f` that count: the
    executable ones, else the relocatable ones (cuobjdump's default)."""
    f.seek(0)
    ident = f.read(64)
    if len(ident) < 64 or ident[:4] != ELF_MAGIC:
        raise NotElf64("not an ELF file")
    if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB:
        raise NotElf64("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if shoff == 0 or shentsize < 64:
        return []
    if shnum == 0 or shstrndx == 0xFFFF:
        # More than 0xff00 sections: the real numbers are in section 0 (ELF gABI).
        f.seek(shoff)
        first = f.read(64)
        if len(first) < 64:
            raise NotElf64("truncated section header table")
        shnum = shnum or struct.unpack_from("<Q", first, 0x20)[0]
        if shstrndx == 0xFFFF:
            shstrndx = struct.unpack_from("<I", first, 0x18)[0]
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    if len(table) < shentsize * shnum or shstrndx >= shnum:
        raise NotElf64("truncated section header table")
    headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
    f.seek(names_at)
    names = f.read(names_size)
    found = {EXECUTABLE_FATBIN: [], RELOCATABLE_FATBIN: []}
    for name_offset, kind, _flags, _addr, offset, size in headers:
        name = names[name_offset:names.find(b"\0", name_offset)]
        if name in found and kind != 8 and size:  # 8: SHT_NOBITS
            found[name].append((offset, size))
    return found[EXECUTABLE_FATBIN] or found[RELOCATABLE_FATBIN]


def _next_container(f, at: int, end: int):
    """The offset of the next container magic at or after `at` (8-byte aligned), or None.
    Containers normally follow each other directly; this skips any padding between them."""
    magic = struct.pack("<I", CONTAINER_MAGIC)
    while at + CONTAINER_HEADER.size <= end:
        f.seek(at)
        chunk = f.read(min(SCAN_CHUNK, end - at))
        for i in range(0, len(chunk) - 3, ALIGNMENT):
            if chunk[i:i + 4] == magic:
                return at + i
        at += len(chunk) - len(chunk) % ALIGNMENT or ALIGNMENT
    return None


def walk_section(f, offset: int, size: int, found: FileTargets) -> None:
    """Add the entries of every container in the section at `offset` to `found`."""
    end = offset + size
    at = offset
    while at + CONTAINER_HEADER.size <= end:
        f.seek(at)
        magic, _version, header_size, entries_size = CONTAINER_HEADER.unpack(f.read(CONTAINER_HEADER.size))
        if magic != CONTAINER_MAGIC:
            at = _next_container(f, at + ALIGNMENT - (at - offset) % ALIGNMENT, end)
            if at is None:
                return
            continue
        entry = at + header_size
        container_end = min(entry + entries_size, end)
        while entry + ENTRY_HEADER.size <= container_end:
            f.seek(entry)
            (kind, _v, entry_header_size, payload_size, _csize, _u, _minor, _major, arch, _name_off,
             _name_len, flags) = ENTRY_HEADER.unpack(f.read(ENTRY_HEADER.size))
            if entry_header_size < ENTRY_HEADER.size:
                break  # not an entry header: the rest of this container is unreadable
            found.entries += 1
            if kind == KIND_SASS:
                found.sass.add(arch_name("sm", arch, flags))
            elif kind == KIND_PTX:
                found.ptx.add(arch_name("compute", arch, flags))
            else:
                found.other_kinds.add(kind)
            if flags & FLAG_ZSTD:
                found.compression.add("zstd")
            elif flags & FLAG_LZ4:
                found.compression.add("lz4")
            entry += entry_header_size + payload_size
        at = entry_end = at + header_size + entries_size
        at = entry_end + (-(entry_end - offset)) % ALIGNMENT


def parse_file(path: str) -> FileTargets:
    """The GPU code of one shared object (empty sets: no fat binary in it).
    NotElf64 for anything that is not a little-endian ELF64 file."""
    found = FileTargets(path)
    with open(path, "rb") as f:
        for offset, size in fatbin_sections(f):
            walk_section(f, offset, size, found)
    return found


# --- an installed Python environment ---------------------------------------------------------

# The framework's own GPU libraries, per package directory in site-packages.
FRAMEWORK_GLOBS = {
    "tensorflow": ("tensorflow/**/*.so*",),
    # jax-cuda12-pjrt (jax_plugins/xla_cuda12), jax-cuda12-plugin (jax_cuda12_plugin), jaxlib.
    "jax": ("jax_plugins/**/*.so*", "jax_cuda*_plugin/**/*.so*", "jaxlib/**/*.so*"),
    "torch": ("torch/lib/*.so*",),
}
# Distribution whose version names the framework (first one installed).
FRAMEWORK_DISTRIBUTIONS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-rocm"),
                           "jax": ("jaxlib",), "torch": ("torch",)}
NVIDIA_GLOB = "nvidia/*/lib/*.so*"
# CUDA 13 wheels put every toolkit library in one nvidia/cu13/lib: name those by file.
SHARED_LIB_DIR = re.compile(r"^cu\d+$")


def site_packages_default() -> str:
    return sysconfig.get_paths()["purelib"]


def library_name(relpath: str) -> str:
    """'nvidia/cudnn/lib/libcudnn_cnn.so.9' -> 'cudnn'; 'nvidia/cu13/lib/libcublasLt.so.13'
    -> 'cublasLt'."""
    parts = relpath.split("/")
    if not SHARED_LIB_DIR.match(parts[1]):
        return parts[1]
    return re.sub(r"\.so.*$", "", re.sub(r"^lib", "", parts[-1]))


def _files(site: str, patterns) -> list:
    paths = set()
    for pattern in patterns:
        paths.update(p for p in glob.glob(os.path.join(site, pattern), recursive=True)
                     if os.path.isfile(p) and not os.path.islink(p))
    return sorted(paths)


def _version(names) -> str | None:
    import importlib.metadata as md

    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def _targets(parsed: list) -> dict:
    return {"sass": sorted_archs(set().union(*(p.sass for p in parsed))),
            "ptx": sorted_archs(set().union(*(p.ptx for p in parsed)))}


def _parse_all(site: str, paths: list) -> tuple[list, list]:
    parsed, unreadable = [], []
    for path in paths:
        try:
            parsed.append(parse_file(path))
        except NotElf64:
            continue  # a linker script or a data file named *.so*: no GPU code
        except OSError as exc:
            unreadable.append(f"{os.path.relpath(path, site)}: {exc.strerror or exc}")
    return parsed, unreadable


def scan_environment(site: str) -> dict:
    """The framework's and the NVIDIA wheels' GPU code in the site-packages folder `site`."""
    started = time.monotonic()
    frameworks = {}
    entries = 0
    unreadable_all = []
    for name, patterns in FRAMEWORK_GLOBS.items():
        if not os.path.isdir(os.path.join(site, name if name != "jax" else "jaxlib")):
            continue
        parsed, unreadable = _parse_all(site, _files(site, patterns))
        unreadable_all += unreadable
        entries += sum(p.entries for p in parsed)
        with_code = [p for p in parsed if p.entries]
        frameworks[name] = {"version": _version(FRAMEWORK_DISTRIBUTIONS[name]), **_targets(with_code),
                            "files_with_gpu_code": sorted(os.path.relpath(p.path, site) for p in with_code)}
    libraries: dict = {}
    parsed, unreadable = _parse_all(site, _files(site, (NVIDIA_GLOB,)))
    unreadable_all += unreadable
    entries += sum(p.entries for p in parsed)
    for p in parsed:
        libraries.setdefault(library_name(os.path.relpath(p.path, site)), []).append(p)
    return {
        "tool_version": TOOL_VERSION,
        "site_packages": site,
        "frameworks": frameworks,
        "libraries": {name: _targets(files) for name, files in sorted(libraries.items())},
        "fatbin_entries": entries,
        "unreadable": unreadable_all,
        "seconds": round(time.monotonic() - started, 2),
    }


def format_environment(result: dict) -> str:
    lines = [f"GPU code in {result['site_packages']} (parser v{result['tool_version']}, "
             f"{result['fatbin_entries']} fat binary entries, {result['seconds']} s)"]
    rows = [(f"{name} {info['version'] or '?'}", info) for name, info in result["frameworks"].items()]
    rows += [(f"  {name}", info) for name, info in result["libraries"].items()]
    for label, info in rows:
        lines.append(f"{label:<24} SASS {','.join(info['sass']) or '-':<40} PTX {','.join(info['ptx']) or '-'}")
    lines += [f"unreadable: {u}" for u in result["unreadable"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kerasenv_image.probes.kernel_targets",
                                     description="SASS and PTX targets of the CUDA fat binaries installed")
    parser.add_argument("files", nargs="*", help="shared objects to read (default: the environment's)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument("--site-packages", default=None, help="site-packages folder to scan "
                        "(default: this interpreter's)")
    args = parser.parse_args(argv)
    if args.files:
        results = []
        for path in args.files:
            try:
                found = parse_file(path)
            except (OSError, NotElf64) as exc:
                print(f"kernel_targets: {path}: {getattr(exc, 'strerror', None) or exc}; "
                      "give a readable ELF64 shared object", file=sys.stderr)
                return 2
            results.append({"path": path, "sass": sorted_archs(found.sass), "ptx": sorted_archs(found.ptx),
                            "entries": found.entries, "compression": sorted(found.compression)})
        if args.json:
            print(json.dumps(results))
        else:
            for r in results:
                print(f"{r['path']}: {r['entries']} entries; SASS {','.join(r['sass']) or '-'}; "
                      f"PTX {','.join(r['ptx']) or '-'}")
        return 0
    site = args.site_packages or site_packages_default()
    if not os.path.isdir(site):
        print(f"kernel_targets: {site} is not a folder; pass --site-packages DIR", file=sys.stderr)
        return 2
    result = scan_environment(site)
    print(json.dumps(result) if args.json else format_environment(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which machine each ELF file in a tar stream is built for: its ELF header's e_machine.

The acceptance suite feeds it the engine's archive of a folder of an image (`GET
/containers/ID/archive`, from a container that is created and never started), so the files are
read as bytes and no program of the image runs: an arm64 image is checked on an amd64 machine
without emulation. The tar stream is parsed here rather than by `tarfile` because only the
first 20 bytes of each file are needed and the rest (several GB of CUDA libraries) is skipped
chunk by chunk without being copied.

Standard library only, no relative imports: tests/unit/repo/test_smoke_elf_scan.py loads this
file by path.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

BLOCK = 512
ELF_MAGIC = b"\x7fELF"
# e_machine values (the ELF specification's EM_*) a Python environment may hold.
MACHINE_NAMES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390", 40: "arm", 62: "x86-64",
                 183: "aarch64", 190: "cuda", 224: "amdgpu", 243: "riscv"}
# Device code, not host code: NVIDIA's cubins (and AMD's code objects) are ELF files too, for a GPU.
GPU_MACHINES = frozenset({190, 224})
REGULAR = (b"0", b"\0", b"7")
EXAMPLES = 20  # paths kept per machine


@dataclass
class Scan:
    files: int = 0  # regular files seen
    bytes: int = 0  # bytes of the archive read
    machines: Counter = field(default_factory=Counter)  # e_machine -> ELF files
    examples: dict = field(default_factory=dict)  # e_machine -> up to EXAMPLES paths
    truncated: list = field(default_factory=list)  # files with the ELF magic but no full header
    under: Counter = field(default_factory=Counter)  # prefix asked for -> ELF files below it
    seconds: float = 0.0

    @property
    def elf_files(self) -> int:
        return sum(self.machines.values())

    def host_machines(self) -> Counter:
        """ELF files by machine, GPU code left out."""
        return Counter({m: n for m, n in self.machines.items() if m not in GPU_MACHINES})

    def not_built_for(self, machine: int) -> dict[str, list[str]]:
        """Host-code ELF files built for another machine: its name -> example paths."""
        return {name(m): self.examples[m] for m in self.host_machines() if m != machine}


def name(machine: int) -> str:
    return f"{MACHINE_NAMES.get(machine, 'EM')}({machine})"


def e_machine(header: bytes) -> int | None:
    """The e_machine of an ELF header (its first 20 bytes or more); None when not ELF or too short."""
    if len(header) < 20 or header[:4] != ELF_MAGIC:
        return None
    return int.from_bytes(header[18:20], "big" if header[5] == 2 else "little")


class _Reader:
    """Exact reads and skips over an iterable of byte chunks, counting what it consumed."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._chunk = memoryview(b"")
        self._at = 0
        self.consumed = 0

    def _fill(self) -> bool:
        for chunk in self._chunks:
            if chunk:
                self._chunk, self._at = memoryview(chunk), 0
                return True
        return False

    def read(self, n: int) -> bytes:
        parts = []
        while n > 0:
            if self._at >= len(self._chunk) and not self._fill():
                break
            take = min(n, len(self._chunk) - self._at)
            parts.append(self._chunk[self._at:self._at + take])
            self._at += take
            n -= take
            self.consumed += take
        return b"".join(parts)

    def skip(self, n: int) -> None:
        while n > 0:
            if self._at >= len(self._chunk) and not self._fill():
                raise ValueError("tar stream ended inside a member")
            take = min(n, len(self._chunk) - self._at)
            self._at += take
            n -= take
            self.consumed += take


def _number(field_bytes: bytes) -> int:
    """A tar numeric field: octal text, or GNU's base-256 (high bit of the first byte set)."""
    if field_bytes and field_bytes[0] & 0x80:
        value = field_bytes[0] & 0x7F
        for byte in field_bytes[1:]:
            value = (value << 8) | byte
        return value
    text = field_bytes.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _pax(data: bytes) -> dict[str, str]:
    """PAX extended header records: 'LEN key=value\\n' each."""
    records, at = {}, 0
    while at < len(data):
        space = data.index(b" ", at)
        length = int(data[at:space])
        key, _, value = data[space + 1:at + length - 1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        at += length
    return records


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def scan(chunks: Iterable[bytes], under: tuple[str, ...] = ()) -> Scan:
    """Walk a tar stream; for each regular file read its first 20 bytes and skip the rest.
    `under`: path prefixes whose ELF files are also counted apart (Scan.under)."""
    started = time.monotonic()
    reader, result = _Reader(chunks), Scan()
    pending: dict[str, str] = {}  # what a PAX or GNU long-name header says about the next member
    while True:
        header = reader.read(BLOCK)
        if len(header) < BLOCK or header == bytes(BLOCK):
            break  # end of archive (two zero blocks; the engine may close after the first)
        size = _number(header[124:136])
        kind = header[156:157]
        if kind in (b"x", b"g", b"L", b"K"):
            data = reader.read(size)
            reader.skip(_padded(size) - size)
            if kind == b"x":
                pending.update(_pax(data))
            elif kind == b"L":
                pending["path"] = data.split(b"\0", 1)[0].decode("utf-8", "replace")
            continue
        path = pending.get("path")
        if path is None:
            base = header[0:100].split(b"\0", 1)[0]
            # POSIX ustar's prefix field (GNU's "ustar  " headers keep other fields there)
            prefix = header[345:500].split(b"\0", 1)[0] if header[257:263] == b"ustar\0" else b""
            path = (prefix + b"/" + base if prefix else base).decode("utf-8", "replace")
        size = int(pending.get("size", size))
        pending = {}
        if kind not in REGULAR:
            reader.skip(_padded(size))
            continue
        result.files += 1
        head = reader.read(min(size, 64))
        reader.skip(_padded(size) - len(head))
        _count(result, path, head, under)
    result.bytes = reader.consumed
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _count(result: Scan, path: str, head: bytes, under: tuple[str, ...]) -> None:
    """One regular file's first bytes: counted by machine if it is ELF."""
    if head[:4] != ELF_MAGIC:
        return
    machine = e_machine(head)
    if machine is None:
        result.truncated.append(path)
        return
    result.machines[machine] += 1
    for prefix in under:
        if path.startswith(prefix):
            result.under[prefix] += 1
    examples = result.examples.setdefault(machine, [])
    if len(examples) < EXAMPLES:
        examples.append(path)


def read_headers(root: str, relative_to: str) -> dict:
    """Run inside an image that runs natively here (its own Python, standard library only: the
    acceptance suite sends this function's source): every regular file under `root`, symlinks
    not followed (the engine's archive keeps them as links too), and the first 64 bytes of those
    that start with the ELF magic, paths relative to `relative_to` as the archive names them.
    Reading headers in place costs about a second where streaming a CUDA image's venv through
    the engine's archive took 16-34 s (cold run of 2a3dcb5); an emulated image keeps the
    archive, so nothing of it runs."""
    import os
    import stat

    files, read, heads = 0, 0, []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            files += 1
            with open(path, "rb") as f:
                head = f.read(64)
            read += len(head)
            if head[:4] == b"\x7fELF":
                heads.append([os.path.relpath(path, relative_to), head.hex()])
    return {"files": files, "bytes": read, "heads": heads}


def from_headers(found: dict, under: tuple[str, ...] = (), seconds: float = 0.0) -> Scan:
    """The Scan of what read_headers() found (its JSON), counted as scan() counts an archive."""
    result = Scan(files=found["files"], bytes=found["bytes"], seconds=round(seconds, 2))
    for path, head in found["heads"]:
        _count(result, path, bytes.fromhex(head), under)
    return result

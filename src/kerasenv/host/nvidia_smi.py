"""Parse what `nvidia-smi` prints, in the formats NVIDIA documents and real hosts show.

Three probes, each optional (older drivers lack some query fields, e.g. `compute_cap`
before R510/R525; the plain table truncates long GPU names with "..."):

- plain `nvidia-smi`: the table, for the driver version, GPU names and memory;
- `nvidia-smi --query-gpu=FIELDS --format=csv`: columns in the order asked, header
  first, values separated by ", " (memory as "81920 MiB");
- `nvidia-smi -L`: "GPU 0: NAME (UUID: GPU-...)", full names and UUIDs, and under a GPU in
  MIG mode its MIG devices, "  MIG 3g.40gb     Device  0: (UUID: MIG-...)" (NVIDIA MIG user
  guide, "MIG Device Names"; the `--query-gpu` rows stay one per physical GPU).

Recorded real outputs live in tests/fixtures/nvidia-smi/ (SOURCES.md says where from).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

QUERY_FIELDS = ("index", "name", "driver_version", "memory.total", "compute_cap")

_DRIVER_RE = re.compile(r"(?:Driver Version|KMD Version):\s*([0-9]+(?:\.[0-9]+)+)")
_CUDA_RE = re.compile(r"(?:CUDA Version|CUDA UMD Version):\s*([0-9]+\.[0-9]+)")
_ROW_RE = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s*\|")
_MEM_RE = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_LIST_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")
_MIG_LIST_RE = re.compile(r"^MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*(MIG-[^)]+)\)")
_MIG_MODE_RE = re.compile(r"\|\s*(Enabled|Disabled|N/A)\s*\|\s*$")
# The table's "MIG devices:" section: "|  0    3   0   0  |" = GPU, GPU instance, compute
# instance, MIG device index (a second line per device carries BAR1 usage only).
_MIG_ROW_RE = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|")

# Compute capability by GPU name, for drivers whose nvidia-smi cannot report it.
# Source: NVIDIA, "CUDA GPUs - Compute Capability", https://developer.nvidia.com/cuda-gpus
# Regexes over the upper-cased name, most specific first; a model number must not run
# on into more digits ("L4" is not "L40").
COMPUTE_CAPABILITY_BY_NAME: tuple[tuple[str, str], ...] = (
    (r"GH200|H200|H100|H800", "9.0"),
    (r"GB10", "12.1"), (r"GB300|B300", "10.3"), (r"GB200|B200|B100", "10.0"),
    (r"RTX 50\d\d|RTX PRO 6000 BLACKWELL", "12.0"),
    (r"L40S?|L4|RTX 40\d\d|ADA GENERATION", "8.9"),
    (r"A100|A800|A30", "8.0"),
    (r"A40|A10G?|A16|A2|RTX 30\d\d|RTX A\d+", "8.6"),
    (r"T4|RTX 20\d\d|TITAN RTX|QUADRO RTX|GTX 16\d\d", "7.5"),
    (r"V100|TITAN V", "7.0"),
    (r"P100", "6.0"), (r"P40|P4|GTX 10\d\d|TITAN XP?", "6.1"),
    (r"M60|M40|GTX 9\d\d", "5.2"),
    (r"K80", "3.7"),
)


@dataclass
class Gpu:
    index: int
    name: str
    memory_mib: int | None = None
    compute_capability: str | None = None  # "8.0"
    compute_capability_source: str = "unknown"  # nvidia-smi | name table | unknown
    uuid: str | None = None  # GPU-... (nvidia-smi -L)
    mig_mode: str | None = None  # Enabled | Disabled | N/A (the table's "MIG M." cell)

    @property
    def unified_memory(self) -> bool:
        """Whether this GPU's memory is the system's RAM (UNIFIED_MEMORY_GPUS): known by its
        name or compute capability, and confirmed by nvidia-smi reporting no memory for it."""
        return self.memory_mib is None and is_unified_memory_gpu(self.name, self.compute_capability)


# GPUs with no memory of their own: the CPU and the GPU share the system's RAM. GB10 (DGX
# Spark, compute capability 12.1) shares 128 GB of LPDDR5x with its Grace CPU, and its driver
# has no memory to report: nvidia-smi's Memory-Usage reads "Not Supported" (the gb10-580
# capture; NVIDIA's DGX Spark known issues) and NVML's memory queries return NOT_SUPPORTED
# (leptonai/gpud#1170, rossumai/nvgpu#37). Both signs are required, the model and the missing
# reading: a GB10 whose driver one day reports memory is treated as any GPU, and a reading
# missing for another reason (a vGPU, an old nvidia-smi) does not make a discrete GPU unified.
# Not GH200/GB200/GB300: their GPUs have HBM of their own, which nvidia-smi reports (the Grace
# CPU's coherent LPDDR5x is extra, not what JAX preallocates from). Jetson Thor (11.0) is
# integrated too, but no nvidia-smi output of it was seen, so it is not listed.
UNIFIED_MEMORY_GPUS: tuple[tuple[str, str], ...] = ((r"GB10", "12.1"),)  # (name pattern, compute capability)


def is_unified_memory_gpu(name: str, compute_capability: str | None) -> bool:
    """A model from UNIFIED_MEMORY_GPUS, by its name or its compute capability."""
    upper = name.upper()
    return any(compute_capability == cc or re.search(rf"(?<![A-Z0-9])(?:{pattern})(?![0-9])", upper)
               for pattern, cc in UNIFIED_MEMORY_GPUS)


@dataclass(frozen=True)
class MigSlice:
    """One MIG device, as `nvidia-smi -L` lists it under its GPU."""

    gpu: int
    index: int
    profile: str  # 3g.40gb
    uuid: str  # MIG-...


@dataclass
class HostGpus:
    """What nvidia-smi says about the host; `error` set when it could not say."""

    present: bool
    driver_version: str | None = None
    cuda_version: str | None = None  # the driver's maximum CUDA
    gpus: list[Gpu] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    mig: list[MigSlice] = field(default_factory=list)  # every MIG device, by GPU

    def unified_memory(self) -> list[int]:
        """GPUs whose memory is the system's RAM (Gpu.unified_memory)."""
        return [g.index for g in self.gpus if g.unified_memory] if self.present and not self.error else []

    def mig_enabled(self) -> list[int]:
        """GPUs in MIG mode: the table says Enabled, or -L lists MIG devices under them."""
        return sorted({g.index for g in self.gpus if g.mig_mode == "Enabled"} | {m.gpu for m in self.mig})


def compute_capability_from_name(name: str) -> str | None:
    upper = name.upper()
    for pattern, cc in COMPUTE_CAPABILITY_BY_NAME:
        if re.search(rf"(?<![A-Z0-9])(?:{pattern})(?![0-9])", upper):
            return cc
    return None


def parse_table(text: str) -> HostGpus:
    """The plain `nvidia-smi` table (R470 79-column through R550+ 91-column layouts)."""
    driver = _DRIVER_RE.search(text)
    if driver is None:
        raise ValueError("no 'Driver Version:' in nvidia-smi output")
    cuda = _CUDA_RE.search(text)
    host = HostGpus(present=True, driver_version=driver.group(1), cuda_version=cuda.group(1) if cuda else None)
    lines = text.splitlines()
    in_mig = False
    for i, line in enumerate(lines):
        if "MIG devices:" in line:
            in_mig = True
        elif "Processes:" in line:
            in_mig = False
        mig_row = _MIG_ROW_RE.match(line) if in_mig else None
        if mig_row:
            host.mig.append(MigSlice(gpu=int(mig_row.group(1)), index=int(mig_row.group(4)), profile="", uuid=""))
            continue
        row = _ROW_RE.match(line) if not in_mig else None
        if not row:
            continue
        memory = _MEM_RE.search(lines[i + 1]) if i + 1 < len(lines) else None
        # R450+ tables have a third line per GPU whose last cell is "MIG M.": Enabled,
        # Disabled or N/A (GPUs without MIG).
        mig = _MIG_MODE_RE.search(lines[i + 2]) if i + 2 < len(lines) and "MIG M." in text else None
        host.gpus.append(Gpu(index=int(row.group(1)), name=row.group(2).strip(),
                             memory_mib=int(memory.group(2)) if memory else None,
                             mig_mode=mig.group(1) if mig else None))
    return host


def parse_query_csv(text: str) -> list[dict[str, str]]:
    """`--format=csv` output (with header) as rows keyed by field name (units stripped)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return []
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        values = [v.strip() for v in line.split(", ")]
        if len(values) != len(header):
            raise ValueError(f"CSV row has {len(values)} fields, header has {len(header)}: {line!r}")
        rows.append(dict(zip(header, (re.sub(r"\s*MiB$", "", v) for v in values))))
    return rows


def parse_list(text: str) -> dict[int, str]:
    """`nvidia-smi -L`: index -> full GPU name."""
    return {index: name for index, (name, _) in parse_list_full(text)[0].items()}


def parse_list_full(text: str) -> tuple[dict[int, tuple[str, str]], list[MigSlice]]:
    """`nvidia-smi -L`: index -> (name, UUID), and the MIG devices listed under each GPU."""
    gpus: dict[int, tuple[str, str]] = {}
    slices: list[MigSlice] = []
    current = None
    for line in text.splitlines():
        match = _LIST_RE.match(line.strip())
        if match:
            current = int(match.group(1))
            gpus[current] = (match.group(2), match.group(3))
            continue
        mig = _MIG_LIST_RE.match(line.strip())
        if mig and current is not None:
            slices.append(MigSlice(gpu=current, index=int(mig.group(2)), profile=mig.group(1), uuid=mig.group(3)))
    return gpus, slices


def classify_error(text: str) -> str:
    """A one-line diagnosis of an nvidia-smi failure."""
    if "couldn't communicate with the NVIDIA driver" in text:
        return "the NVIDIA kernel driver is not loaded (nvidia-smi cannot reach it)"
    if "Driver/library version mismatch" in text:
        return "the loaded kernel driver and the installed driver libraries differ (an upgrade without reboot)"
    if "No devices were found" in text:
        return "the driver is loaded but sees no NVIDIA GPU"
    first = text.strip().splitlines()[0] if text.strip() else "no output"
    return f"nvidia-smi failed: {first[:160]}"


def merge(table: HostGpus, query_rows: list[dict[str, str]] | None, listed: dict[int, str] | None,
          list_text: str | None = None) -> HostGpus:
    """Combine the probes: CSV values win, then -L names, then the table. `list_text`: the
    whole `nvidia-smi -L` output, for the UUIDs and the MIG devices."""
    by_index = {g.index: g for g in table.gpus}
    for row in query_rows or []:
        index = int(row.get("index", len(by_index)))
        gpu = by_index.setdefault(index, Gpu(index=index, name=row.get("name", "")))
        gpu.name = row.get("name") or gpu.name
        if row.get("memory.total", "").isdigit():
            gpu.memory_mib = int(row["memory.total"])
        cc = row.get("compute_cap", "")
        if re.fullmatch(r"\d+\.\d+", cc):
            gpu.compute_capability, gpu.compute_capability_source = cc, "nvidia-smi"
        if row.get("driver_version") and not table.driver_version:
            table.driver_version = row["driver_version"]
    full, slices = parse_list_full(list_text) if list_text else ({}, [])
    listed = {**{i: name for i, (name, _) in full.items()}, **(listed or {})}
    for index, name in listed.items():
        gpu = by_index.setdefault(index, Gpu(index=index, name=name))
        if gpu.name.endswith("...") or not gpu.name:
            gpu.name = name
        if index in full:
            gpu.uuid = full[index][1]
    if slices:  # -L's MIG devices carry their profiles and UUIDs; the table's only numbers
        table.mig = slices
    for gpu in by_index.values():
        if gpu.compute_capability is None:
            cc = compute_capability_from_name(gpu.name)
            if cc:
                gpu.compute_capability, gpu.compute_capability_source = cc, "name table"
    table.gpus = [by_index[i] for i in sorted(by_index)]
    return table

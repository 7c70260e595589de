"""The AMD GPU device nodes of a host: who owns them, which render node is which GPU, and
the groups a container needs to open them.

A ROCm container needs /dev/kfd (the compute interface, one for all GPUs) and a
/dev/dri/renderD<minor> node per GPU (AMD, "Running ROCm Docker containers":
https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html). On current
distributions both are `root:render` mode 0660 (ROCm/ROCm-docker#116: `crw-rw---- 1 root
render ... /dev/kfd`), and the render group's GID is the host's own (993 there; AMD's guide
reads it with `getent group render | cut -d: -f3`). Our containers run as the user's UID, not
root, so they must get that GID, by number: a group *name* given to Docker is looked up in
the image's /etc/group, not the host's (#116: "groups: cannot find name for group ID 993").

Which render node is GPU N: ROCm numbers GPUs in the order of the KFD topology
(/sys/class/kfd/kfd/topology/nodes/<n>, the nodes with a non-zero gpu_id; each names its
render node in `properties` as `drm_render_minor`, Linux drivers/gpu/drm/amd/amdkfd/kfd_topology.c).
`renderD{128+N}` is wrong as soon as another GPU (an integrated one, a BMC's) holds a lower
minor. Without a readable topology: the AMD render nodes (PCI vendor 0x1002) by minor.

Everything is read below `root` (default /), so tests pass a fake tree; `from_record` builds
the same facts from a recorded shape (tests/fixtures/amd-hosts/).
"""

from __future__ import annotations

import json
import os
import re
import stat as stat_mod
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

AMD_PCI_VENDOR = "0x1002"
KFD = "/dev/kfd"
DRI = "/dev/dri"
TOPOLOGY = "sys/class/kfd/kfd/topology/nodes"
RW = 0o6  # read and write, as the bits of one of owner/group/other


@dataclass(frozen=True)
class Node:
    """A device node: `path` as the container sees it (the same path as on the host)."""

    path: str
    uid: int
    gid: int
    mode: int  # permission bits, e.g. 0o660
    host_path: str | None = None  # where it lies on this machine when not at `path` (a scanned fake root)
    pci: str | None = None  # /dev/dri nodes: their GPU's PCI address

    @property
    def source(self) -> str:
        return self.host_path or self.path

    def describe(self, groups: dict[int, str]) -> str:
        name = groups.get(self.gid)
        return f"{self.path} group {self.gid}{f' ({name})' if name else ''} mode {self.mode:04o}"


@dataclass(frozen=True)
class AmdHost:
    kfd: Node | None = None
    dri: tuple[Node, ...] = ()  # every node in /dev/dri (card*, renderD*), by path
    gpus: tuple[str, ...] = ()  # render node paths in ROCm's device order: index 0 first
    order: str = "none"  # how `gpus` was ordered: kfd-topology | pci-vendor | none
    groups: dict[int, str] = field(default_factory=dict)  # the host's /etc/group: gid -> name
    driver_loaded: bool = False  # /sys/module/amdgpu
    amd_pci_gpus: tuple[str, ...] = ()  # PCI display controllers of vendor 0x1002

    @property
    def has_gpu(self) -> bool:
        """An AMD GPU on the PCI bus, or its device nodes: the host means to use one."""
        return bool(self.amd_pci_gpus or self.kfd or self.gpus)

    def node(self, path: str) -> Node | None:
        return self.kfd if path == KFD else next((n for n in self.dri if n.path == path), None)

    def render_nodes(self, indexes: list[int]) -> list[str]:
        """The render nodes of ROCm devices `indexes` (`--gpus device=0,1`); ValueError names
        the indexes this host has. Nothing known (no AMD GPU seen): renderD{128+N}, which
        Docker then reports missing."""
        if not self.gpus:
            return [f"{DRI}/renderD{128 + i}" for i in indexes]
        bad = [i for i in indexes if not 0 <= i < len(self.gpus)]
        if bad:
            have = ", ".join(f"{i}={Path(p).name}" for i, p in enumerate(self.gpus))
            raise ValueError(f"device={','.join(map(str, indexes))}: this host's AMD GPUs are {have}, "
                             f"not {', '.join(map(str, bad))}")
        return [self.gpus[i] for i in indexes]

    def handed_over(self, indexes: list[int] | None) -> list[Node]:
        """The nodes a container gets: /dev/kfd and all of /dev/dri (`indexes` None, as AMD
        documents), or /dev/kfd and the render nodes of those GPUs. Only nodes that exist."""
        wanted = [n for n in self.dri] if indexes is None else \
            [n for n in (self.node(p) for p in self.render_nodes(indexes)) if n is not None]
        return [n for n in [self.kfd, *wanted] if n is not None]

    def gids(self, indexes: list[int] | None = None) -> list[int]:
        """The GIDs owning the nodes handed over, numeric, sorted, without root's 0 (which
        every kerasenv container has already: the venv is group-0 writable)."""
        return sorted({n.gid for n in self.handed_over(indexes)} - {0})

    def as_record(self) -> dict:
        record = asdict(self)
        record["groups"] = {str(k): v for k, v in self.groups.items()}
        for n in [record["kfd"], *record["dri"]]:
            if n is not None:
                n["mode"] = f"{n['mode']:04o}"
        return record


def can_open(node: Node, uid: int, gids: list[int] | set[int]) -> bool:
    """Read and write for `uid` with supplementary groups `gids`, by the mode bits (as the
    kernel checks them: owner, else group, else other; root passes)."""
    if uid == 0:
        return True
    if uid == node.uid:
        bits = node.mode >> 6
    elif node.gid in gids:
        bits = node.mode >> 3
    else:
        bits = node.mode
    return bits & RW == RW


# --- reading a host -------------------------------------------------------------------

def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _node(root: Path, path: str, pci: str | None = None) -> Node | None:
    where = root / path.lstrip("/")
    try:
        st = os.stat(where)
    except OSError:
        return None
    return Node(path=path, uid=st.st_uid, gid=st.st_gid, mode=stat_mod.S_IMODE(st.st_mode),
                host_path=None if root == Path("/") else str(where), pci=pci)


def _pci_of(root: Path, name: str) -> str | None:
    """The PCI address behind /sys/class/drm/<name> (its `device` link's target)."""
    link = root / "sys/class/drm" / name / "device"
    try:
        return os.path.basename(os.path.realpath(link)) if link.exists() else None
    except OSError:
        return None


def _topology_order(root: Path) -> list[int]:
    """The render minors of the KFD topology's GPU nodes, in node order."""
    folder = root / TOPOLOGY
    try:
        nodes = sorted((p for p in folder.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    except OSError:
        return []
    minors = []
    for node in nodes:
        if (_read(node / "gpu_id") or "0") == "0":  # a CPU node
            continue
        match = re.search(r"^drm_render_minor\s+(\d+)$", _read(node / "properties") or "", re.M)
        if match and int(match.group(1)) > 0:
            minors.append(int(match.group(1)))
    return minors


def _groups(root: Path) -> dict[int, str]:
    groups = {}
    for line in (_read(root / "etc/group") or "").splitlines():
        parts = line.split(":")
        if len(parts) >= 3 and parts[2].isdigit():
            groups.setdefault(int(parts[2]), parts[0])
    return groups


def _amd_pci_gpus(root: Path) -> tuple[str, ...]:
    folder = root / "sys/bus/pci/devices"
    try:
        devices = sorted(folder.iterdir())
    except OSError:
        return ()
    return tuple(d.name for d in devices if _read(d / "vendor") == AMD_PCI_VENDOR
                 and (_read(d / "class") or "").startswith("0x03"))  # display controller


def scan(root: str | Path = "/") -> AmdHost:
    """The AMD GPU facts of the host whose file system is at `root`."""
    root = Path(root)
    try:
        names = sorted(os.listdir(root / DRI.lstrip("/")))
    except OSError:
        names = []
    dri = tuple(n for n in (_node(root, f"{DRI}/{name}", _pci_of(root, name)) for name in names
                            if re.fullmatch(r"(card|renderD)\d+", name)) if n is not None)
    renders = {int(n.path.rsplit("renderD", 1)[1]): n for n in dri if "renderD" in n.path}
    minors, order = _topology_order(root), "kfd-topology"
    if not minors:
        amd = set(_amd_pci_gpus(root))
        minors = sorted(m for m, n in renders.items() if n.pci in amd)
        order = "pci-vendor" if minors else "none"
    return AmdHost(kfd=_node(root, KFD), dri=dri, gpus=tuple(f"{DRI}/renderD{m}" for m in minors), order=order,
                   groups=_groups(root), driver_loaded=(root / "sys/module/amdgpu").is_dir(),
                   amd_pci_gpus=_amd_pci_gpus(root))


def from_record(record: dict) -> AmdHost:
    """The facts of a recorded host shape (tests/fixtures/amd-hosts/<name>/host.json)."""
    def node(n: dict | None) -> Node | None:
        if n is None:
            return None
        return Node(path=n["path"], uid=int(n["uid"]), gid=int(n["gid"]), mode=int(str(n["mode"]), 8),
                    pci=n.get("pci"))
    return AmdHost(kfd=node(record.get("kfd")), dri=tuple(node(n) for n in record.get("dri", [])),
                   gpus=tuple(record.get("gpus", [])), order=record.get("order", "none"),
                   groups={int(k): v for k, v in (record.get("groups") or {}).items()},
                   driver_loaded=bool(record.get("driver_loaded")),
                   amd_pci_gpus=tuple(record.get("amd_pci_gpus", [])))


def load_record(path: str | Path) -> AmdHost:
    return from_record(json.loads(Path(path).read_text()))


def with_sources(host: AmdHost, source: str) -> AmdHost:
    """The same host with every node's host side at `source` (a node that exists on this
    machine, e.g. /dev/null): Docker can then be asked to take the exact arguments of a
    recorded host's shape on a machine without its device nodes (the integration test)."""
    move = (lambda n: None if n is None else replace(n, host_path=source))
    return replace(host, kfd=move(host.kfd), dri=tuple(move(n) for n in host.dri))


def compose_env(host: AmdHost) -> dict[str, str]:
    """What compose/compose.rocm.yaml reads: the GIDs owning /dev/kfd and the AMD render
    nodes (`kerasenv rocm-groups`, which `make up COMPOSE_GPU=rocm` runs). ValueError with the
    reason when there is no AMD GPU to hand over, or its render nodes have more than one group
    (the override has room for one)."""
    if host.kfd is None or not host.gpus:
        raise ValueError("no AMD GPU here (/dev/kfd or its render nodes missing): compose's ROCm override "
                         "has no device to hand over; `kerasenv doctor` says why")
    render = sorted({n.gid for n in (host.node(p) for p in host.gpus) if n is not None})
    if len(render) != 1:
        raise ValueError(f"the AMD render nodes belong to groups {', '.join(map(str, render)) or 'none'}: compose's "
                         "ROCm override takes one; use `kerasenv run`/`smoke`, which adds each")
    return {"KERASENV_KFD_GID": str(host.kfd.gid), "KERASENV_RENDER_GID": str(render[0])}


def toolkit_facts(root: str | Path = "/") -> tuple[list[str], list[str]]:
    """The AMD Container Toolkit's programs on PATH and the amd.com/gpu CDI specs under `root`."""
    import shutil

    from .cdi import SPEC_DIRS

    tools = [f"{name} at {path}" for name in ("amd-ctk", "amd-container-runtime")
             if (path := shutil.which(name))]
    specs = []
    for folder in SPEC_DIRS:
        where = Path(root) / folder.lstrip("/")
        try:
            files = sorted(where.iterdir())
        except OSError:
            continue
        for spec in files:
            try:
                if spec.suffix in (".yaml", ".yml", ".json") and "amd.com/gpu" in spec.read_text(errors="replace"):
                    specs.append(f"{folder}/{spec.name}")
            except OSError:
                continue
    return tools, specs

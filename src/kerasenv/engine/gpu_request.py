"""The user's `--gpus` turned into what this engine takes: the one place it happens.

`parse` reads the value once (before Docker is asked anything): `all`, a count `N`, or devices
as `device=...` or bare: GPU indexes (`0,1`), `GPU-<uuid>`, `MIG-<uuid>` and `N:M` (MIG device M
of GPU N). A bare single number is a count, as in `docker run --gpus 2`.

`resolve` then decides, once per command, how the container gets them on this host:

- NVIDIA, Docker's runtime hook: a DeviceRequest, as `docker run --gpus` sends;
- NVIDIA, CDI (where the engine applies CDI requests and the host has an NVIDIA CDI spec that
  names the devices; NVIDIA's recommended route, and the only one on a hook-less host, rootless
  Docker without `no-cgroups`, and Podman >= 5.4): `DeviceRequest(driver="cdi",
  device_ids=["nvidia.com/gpu=all"])`;
- ROCm: the /dev/kfd and /dev/dri device nodes, the GIDs that own them on this host (by
  number, read by amd_devices) and seccomp unconfined, as AMD documents for `docker run`;
- a request this engine would drop (Podman's Docker API before 5.4, or without CDI) or this host
  cannot honour (a device selection on WSL2, a MIG slice that is not there, a whole MIG-enabled
  card) is refused here, in one line naming the fix: never a container that quietly trains on
  the CPU.

The host's GPUs (`HostGpus`: indexes, UUIDs, MIG slices, WSL2, CDI names) come from the
doctor's probes (host/), handed in as plain data; `None` skips the checks that need them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UsageError
from . import amd_devices
from .cdi import DIRS_ENV, GENERATE_FIX, CdiDevices
from .engine_facts import Engine

_ID = r"(?:[0-9]+(?::[0-9]+)?|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+)"
_IDS_RE = re.compile(rf"^{_ID}(?:,{_ID})*$")
HELP = ("use all, a count like 2, device=0,1, GPU-<uuid>, MIG-<uuid>, 0:1 (MIG device 1 of GPU 0) "
        "or none")
ROUTE_NONE, ROUTE_HOOK, ROUTE_CDI, ROUTE_ROCM = "none", "nvidia-hook", "cdi", "rocm"
DOCKER_FIX = ("Docker with the NVIDIA Container Toolkit (`sudo nvidia-ctk runtime configure --runtime=docker "
              "&& sudo systemctl restart docker`)")


@dataclass(frozen=True)
class GpuSpec:
    """A parsed `--gpus` value."""

    kind: str  # none | all | count | devices
    count: int | None = None
    devices: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "count":
            return str(self.count)
        if self.kind == "devices":
            return "device=" + ",".join(self.devices)
        return self.kind


@dataclass(frozen=True)
class MigDevice:
    gpu: int  # the parent GPU's index
    index: int  # the MIG device's index on that GPU (`nvidia-smi -L`: "Device  1")
    uuid: str  # MIG-...
    profile: str = ""  # 3g.40gb

    @property
    def name(self) -> str:
        return f"{self.gpu}:{self.index}"


@dataclass(frozen=True)
class HostGpus:
    """What the doctor saw of this host's NVIDIA GPUs, for checking a device selection."""

    indexes: tuple[int, ...] = ()
    uuids: dict = field(default_factory=dict)  # index -> GPU-uuid
    mig_enabled: tuple[int, ...] = ()  # GPU indexes in MIG mode
    mig: tuple[MigDevice, ...] = ()
    wsl: bool = False
    cdi: CdiDevices = field(default_factory=CdiDevices)


@dataclass(frozen=True)
class GpuAccess:
    """How a container gets its GPUs on this engine: the create() arguments, and the route."""

    spec: GpuSpec
    route: str  # none | nvidia-hook | cdi | rocm
    kwargs: dict = field(default_factory=dict)  # device_requests, devices, group_add, security_opt
    engine: str = ""  # Engine.describe() of the engine it was resolved for

    @property
    def wants_gpu(self) -> bool:
        return self.route != ROUTE_NONE

    def describe(self) -> str:
        if self.route == ROUTE_NONE:
            return "no GPU"
        if self.route == ROUTE_CDI:
            names = [d for r in self.kwargs.get("device_requests", []) for d in (r.get("DeviceIDs") or [])]
            return f"--gpus {self.spec} through CDI ({', '.join(names)})"
        if self.route == ROUTE_ROCM:
            return f"--gpus {self.spec}: AMD device nodes and their groups"
        return f"--gpus {self.spec} through NVIDIA's runtime hook"


NO_GPU = GpuAccess(GpuSpec("none"), ROUTE_NONE)


def parse(spec: str | GpuSpec | None) -> GpuSpec:
    """A GpuSpec. Raises UsageError on what no engine would take."""
    if isinstance(spec, GpuSpec):
        return spec
    if spec is None or spec.strip() in ("", "none"):
        return GpuSpec("none")
    text = spec.strip().strip("\"'")
    if text == "all":
        return GpuSpec("all")
    if text.isdigit():
        if int(text) < 1:
            raise UsageError(f"--gpus {text}: a GPU count must be at least 1 ({HELP})")
        return GpuSpec("count", count=int(text))
    ids = text.removeprefix("device=")
    if _IDS_RE.match(ids) and (text.startswith("device=") or not ids.isdigit()):
        return GpuSpec("devices", devices=tuple(ids.split(",")))
    raise UsageError(f"--gpus {spec!r} is not a GPU request: {HELP}")


def resolve(spec: str | GpuSpec | None, family: str, *, engine: Engine | None = None,
            host: HostGpus | None = None, amd: amd_devices.AmdHost | None = None) -> GpuAccess:
    """What the container gets for `spec` on this engine and host (see the module docstring).
    `engine` None: Docker with the runtime hook, as `docker run --gpus` assumes; `host` None:
    the device selection is not checked against the host's GPUs; `amd`: the host's AMD
    device facts (default: read from this host, ROCm only)."""
    parsed = parse(spec)
    if parsed.kind == "none" or family == "cpu":
        return GpuAccess(parsed if family != "cpu" else GpuSpec("none"), ROUTE_NONE)
    engine = engine or Engine("docker")
    if family == "rocm":
        kwargs = rocm_kwargs(parsed, amd if amd is not None else amd_devices.scan())
        return GpuAccess(parsed, ROUTE_ROCM, kwargs, engine.describe())
    if host is not None:
        check_devices(parsed, host)
    cdi = host.cdi if host is not None else CdiDevices()
    names = cdi_names(parsed, cdi, host) if engine.cdi_enabled else None
    if names:
        from docker.types import DeviceRequest

        request = DeviceRequest(driver="cdi", device_ids=names)
        return GpuAccess(parsed, ROUTE_CDI, {"device_requests": [request]}, engine.describe())
    if engine.drops_gpu_requests:
        raise UsageError(podman_refusal(engine, cdi))
    return GpuAccess(parsed, ROUTE_HOOK, hook_kwargs(parsed), engine.describe())


def podman_refusal(engine: Engine, cdi: CdiDevices) -> str:
    """Podman takes only CDI requests through its Docker API: why this one cannot be sent."""
    if engine.cdi_enabled:
        # Podman does not say where it reads specs (its /info CDISpecDirs is null, 5.8.6): the
        # folders read are named, and how to name Podman's own (containers.conf cdi_spec_dirs).
        why = (f"Podman {engine.version} takes GPUs through its Docker API only as CDI devices, and this host "
               f"has no NVIDIA CDI spec naming them (in {cdi.where()}; {DIRS_ENV}=DIR:DIR names Podman's "
               "cdi_spec_dirs when they are others)")
        fix = f"generate one: {GENERATE_FIX}"
    else:
        why = (f"Podman {engine.version}'s Docker API accepts a GPU request and starts the container without "
               "the GPU (containers/podman#22645): it would train on the CPU")
        # Podman's own CLI applies CDI devices (from 4.1, NVIDIA's CDI guide; seen with 4.3.1 here, a
        # fake spec in /etc/cdi): only its Docker API drops them.
        fix = (f"use Podman >= 5.4 with a CDI spec ({GENERATE_FIX}), Podman's own CLI with that spec (`podman run "
               f"--device nvidia.com/gpu=all IMAGE`), or {DOCKER_FIX}; --gpus none runs on the CPU on purpose")
    return f"--gpus refused: {why}; {fix}"


def hook_kwargs(spec: GpuSpec) -> dict:
    """`docker run --gpus`'s DeviceRequest (the NVIDIA runtime hook serves it)."""
    from docker.types import DeviceRequest

    if spec.kind == "all":
        request = DeviceRequest(count=-1, capabilities=[["gpu"]])
    elif spec.kind == "count":
        request = DeviceRequest(count=spec.count, capabilities=[["gpu"]])
    else:
        request = DeviceRequest(device_ids=list(spec.devices), capabilities=[["gpu"]])
    return {"device_requests": [request]}


def cdi_names(spec: GpuSpec, cdi: CdiDevices, host: HostGpus | None) -> list[str] | None:
    """The CDI device names for `spec` from the host's NVIDIA spec; None when it names none
    of them (then the hook route is tried). nvidia-ctk names devices by index ("0", "0:1",
    "all") or, with --device-name-strategy=uuid, by UUID: a UUID given for an index-named
    spec (and back) is mapped through what the doctor saw."""
    if not cdi.present:
        return None
    if spec.kind == "all":
        name = cdi.qualified("all")
        return [name] if name else None
    if spec.kind == "count":
        numbered = [cdi.qualified(str(i)) for i in range(spec.count or 0)]
        return numbered if all(numbered) else None
    names = []
    for device in spec.devices:
        name = cdi.qualified(device) or cdi.qualified(_other_name(device, host))
        if name is None:
            return None
        names.append(name)
    return names


def _other_name(device: str, host: HostGpus | None) -> str:
    """The same device under nvidia-ctk's other naming strategy ("" when unknown)."""
    if host is None:
        return ""
    by_uuid = {u: str(i) for i, u in host.uuids.items()}
    by_uuid.update({m.uuid: m.name for m in host.mig})
    by_name = {v: k for k, v in by_uuid.items()}
    return by_uuid.get(device) or by_name.get(device, "")


def check_devices(spec: GpuSpec, host: HostGpus) -> None:
    """Refuse, in one line, a selection this host cannot honour."""
    if host.wsl and spec.kind != "all":
        raise UsageError(f"--gpus {spec}: under WSL2 a container gets every GPU or none (NVIDIA's CUDA on WSL "
                         "guide, 5.1: no GPU selection); use --gpus all, or --gpus none for the CPU")
    if spec.kind != "devices" or not host.indexes:
        return
    uuids = set(host.uuids.values())
    slices = {m.name: m for m in host.mig} | {m.uuid: m for m in host.mig}
    for device in spec.devices:
        if device.isdigit():
            index = int(device)
            if index not in host.indexes:
                raise UsageError(f"--gpus {spec}: this host has GPU index(es) "
                                 f"{', '.join(map(str, host.indexes))}, not {index} (`kerasenv doctor` lists them)")
            if index in host.mig_enabled:
                mine = [m for m in host.mig if m.gpu == index]
                choice = ", ".join(f"{m.name} ({m.profile})" for m in mine) or "none created yet"
                raise UsageError(f"--gpus {spec}: GPU {index} is in MIG mode, and a whole-card request gives the "
                                 f"container no MIG device to run CUDA on; pick slices: {choice} "
                                 "(device=N:M or MIG-<uuid>; `kerasenv doctor` lists them)")
        elif device.startswith("GPU-"):
            if uuids and device not in uuids:
                raise UsageError(f"--gpus {spec}: no GPU {device} on this host (`nvidia-smi -L` lists the UUIDs)")
        elif device not in slices:
            have = ", ".join(f"{m.name} = {m.uuid}" for m in host.mig) or "none (no GPU is in MIG mode)"
            raise UsageError(f"--gpus {spec}: no MIG device {device} on this host; its MIG devices: {have}")


def per_worker(spec: GpuSpec, workers: int) -> list[GpuSpec]:
    """One GPU spec per worker (`kerasenv multiworker`): none for all, or one device each."""
    if spec.kind == "none":
        return [spec] * workers
    if spec.kind == "devices" and len(spec.devices) == workers:
        return [GpuSpec("devices", devices=(d,)) for d in spec.devices]
    raise UsageError(f"--gpus {spec}: give each of the {workers} workers its own GPU or MIG slice, one id each "
                     f"(e.g. device={','.join(str(i) for i in range(workers))} or device=0:0,0:1), or none")


def rocm_kwargs(spec: GpuSpec, amd: amd_devices.AmdHost) -> dict:
    """/dev/kfd and the render nodes (all of /dev/dri for `all`), the GIDs owning them, and
    seccomp unconfined."""
    if spec.kind == "count":
        raise UsageError("--gpus N is NVIDIA-only; for ROCm use all or device=0,1")
    indexes = None
    if spec.kind == "devices":
        if not all(d.isdigit() for d in spec.devices):
            raise UsageError("--gpus for ROCm takes indexes (device=0,1), not UUIDs or MIG devices")
        indexes = [int(d) for d in spec.devices]
        try:
            amd.render_nodes(indexes)
        except ValueError as exc:
            raise UsageError(f"--gpus {exc}: pick from those (`kerasenv doctor` lists them)") from None
    nodes = amd.handed_over(indexes)
    kfd = amd.kfd or amd_devices.Node(amd_devices.KFD, 0, 0, 0)  # missing: Docker says so, runner explains
    devices = [kfd] + [n for n in nodes if n.path != amd_devices.KFD]
    specs = [f"{n.source}:{n.path}:rwm" for n in devices]
    if indexes is None and not amd.dri:
        specs.append(f"{amd_devices.DRI}:{amd_devices.DRI}:rwm")  # nothing read: the whole folder
    elif indexes is not None:
        listed = {n.path for n in devices}
        specs += [f"{p}:{p}:rwm" for p in amd.render_nodes(indexes) if p not in listed]
    return {
        "devices": specs,
        # The GIDs that own /dev/kfd and the render nodes on this host (render: 993 on the host
        # of ROCm/ROCm-docker#116; each host has its own), by number: our containers run as the
        # user's UID, and a name would be looked up in the image's /etc/group.
        "group_add": [str(g) for g in amd.gids(indexes)],
        # AMD documents seccomp=unconfined for ROCm containers ("enables memory mapping",
        # rocm.docs.amd.com, Running ROCm Docker containers).
        "security_opt": ["seccomp=unconfined"],
    }


# What the daemon (or the toolkit under it) answers when a GPU container cannot start, and
# what to do about it. Matched on the words the engines print, quoted from the issues cited.
ROOTLESS_FIX = ("rootless Docker needs the NVIDIA toolkit without cgroup handling: `sudo nvidia-ctk config "
                "--set nvidia-container-cli.no-cgroups --in-place` (host-wide; it can break rootful GPU "
                "containers, NVIDIA/libnvidia-container#154), or CDI instead: "
                f"{GENERATE_FIX} with Docker >= 28.2 (or features.cdi on 25-28.1)")


def explain_start_error(text: str, access: GpuAccess) -> str | None:
    """One line for a GPU container the engine could not start; None: not a GPU failure."""
    if "bpf_prog_query(BPF_CGROUP_DEVICE)" in text or ("devices.allow" in text and "permission denied" in text):
        # cgroup v2 (NVIDIA/nvidia-container-toolkit#139) and v1 (moby#38729) under rootless Docker
        return f"the NVIDIA runtime hook may not set up the device cgroup here (rootless): {ROOTLESS_FIX}"
    if "unresolvable CDI devices" in text or ("CDI" in text and "not found" in text and access.route == ROUTE_CDI):
        return (f"the engine cannot resolve the CDI devices of {access.describe()} (a spec made before the last "
                f"driver upgrade, or for other GPUs): regenerate it with {GENERATE_FIX}")
    if 'could not select device driver "cdi"' in text or (access.route == ROUTE_CDI and
                                                          "could not select device driver" in text):
        return ("this Docker does not apply CDI device requests: enable CDI (`\"features\": {\"cdi\": true}` in "
                "/etc/docker/daemon.json on Docker 25-28.1; on by default from 28.2), or use NVIDIA's runtime "
                "hook: `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`")
    if "could not select device driver" in text or "nvidia-container-cli" in text or "unknown runtime" in text:
        return (f"Docker cannot give GPUs to containers here (--gpus {access.spec}): the NVIDIA Container Toolkit "
                "is not installed or not configured for Docker; install it, run "
                "`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` "
                f"(or, with Docker >= 28.2, {GENERATE_FIX}), then `kerasenv doctor`")
    return None

"""A command's `--gpus`, resolved once for this host and engine (run, smoke, shell, lab,
multiworker, bench, doctor --container).

engine/gpu_request.resolve turns the value into what the engine takes; this module gathers
what it needs to know first, the doctor's way: the engine behind the Docker API (Docker or
Podman, rootless, CDI), the host's NVIDIA CDI devices, WSL2, and the GPUs nvidia-smi lists with
their UUIDs and MIG devices (to check a selection against them). `auto` is decided here too:
all when Docker says it can hand GPUs out (docker_gpus.ask, with the request this engine
takes), else none, and why.
"""

from __future__ import annotations

from ..engine import cdi as cdi_mod
from ..engine import docker_gpus, engine_facts, gpu_request
from ..matrix.schema import Variant
from . import facts as facts_mod
from . import wsl as wsl_mod


def host_gpus(nvidia, wsl: wsl_mod.Wsl, cdi: cdi_mod.CdiDevices) -> gpu_request.HostGpus:
    """The doctor's view of the GPUs, as the plain data gpu_request checks a selection with."""
    usable = nvidia is not None and nvidia.present and not nvidia.error
    gpus = nvidia.gpus if usable else []
    return gpu_request.HostGpus(
        indexes=tuple(g.index for g in gpus), uuids={g.index: g.uuid for g in gpus if g.uuid},
        mig_enabled=tuple(nvidia.mig_enabled()) if usable else (),
        mig=tuple(gpu_request.MigDevice(m.gpu, m.index, m.uuid, m.profile) for m in nvidia.mig) if usable else (),
        wsl=wsl.present, cdi=cdi)


def from_facts(facts) -> gpu_request.HostGpus:
    """The same view from the doctor's gathered HostFacts."""
    return host_gpus(facts.nvidia, facts.wsl, facts.cdi)


class Resolver:
    """Resolves `--gpus` for variants run through one Docker client; what it learns of the
    host is read once (a command may resolve several containers: bench, multiworker)."""

    def __init__(self, client, *, root: str = "/", nvidia_exe: str | None = None) -> None:
        self.client, self.root, self.nvidia_exe = client, root, nvidia_exe
        self._engine = self._cdi = self._host = None

    @property
    def engine(self) -> engine_facts.Engine:
        if self._engine is None:
            self._engine = engine_facts.ask(self.client)
        return self._engine

    @property
    def cdi(self) -> cdi_mod.CdiDevices:
        if self._cdi is None:
            self._cdi = cdi_mod.scan(self.root, dirs=cdi_mod.spec_dirs(self.engine))  # the engine's folders
        return self._cdi

    @property
    def host(self) -> gpu_request.HostGpus:
        if self._host is None:
            self._host = host_gpus(facts_mod.probe_nvidia(self.nvidia_exe), wsl_mod.detect(self.root), self.cdi)
        return self._host

    def __call__(self, v: Variant, spec, say=lambda message: None) -> gpu_request.GpuAccess:
        """The GPU access for a container of `v`; `spec`: a GpuSpec, a --gpus string or auto."""
        if spec == "auto":  # CUDA: Docker is asked; ROCm: all; CPU: none (nothing asked)
            spec = docker_gpus.request_for(self.client, v, "auto", say, engine=self.engine, cdi=self.cdi) \
                if v.family == "cuda" else docker_gpus.request_for(None, v, "auto")
        parsed = gpu_request.parse(spec)
        if parsed.kind == "none" or v.family != "cuda":  # the engine and the NVIDIA GPUs do not matter
            return gpu_request.resolve(parsed, v.family)
        return gpu_request.resolve(parsed, v.family, engine=self.engine, host=self.host)


def resolve(client, v: Variant, spec, say=lambda message: None) -> gpu_request.GpuAccess:
    """One container's GPU access (run/session's `Upstream.gpus`)."""
    return Resolver(client)(v, spec, say)

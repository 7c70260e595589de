"""What the doctor knows about this host, gathered in one place (judging is doctor.py's).

Gathering (running nvidia-smi, asking Docker, reading /proc, /dev and /etc/cdi) is kept apart
from judging, so the verdicts are unit-tested against recorded outputs: nvidia-smi from
tests/fixtures/nvidia-smi/ (public captures, and a simulator's for the hosts listed in
SIMULATED there), engines from tests/fixtures/engines/, host trees (WSL2, CDI, AMD) from
tests/fixtures/host-shapes/ and amd-hosts/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from . import nvidia_smi
from . import wsl as wsl_mod
from ..engine import amd_devices
from ..engine import cdi as cdi_mod
from ..engine.engine_facts import Engine


@dataclass
class HostFacts:
    nvidia: nvidia_smi.HostGpus
    docker_error: str | None = None  # None: reachable
    docker_runtimes: list[str] = field(default_factory=list)
    cdi_specs: list[str] = field(default_factory=list)
    # AMD: the device nodes, their owners and the driver (engine/amd_devices; judged by
    # rocm_checks), the AMD Container Toolkit's programs and CDI specs, Docker's version.
    amd: amd_devices.AmdHost = field(default_factory=amd_devices.AmdHost)
    amd_tools: list[str] = field(default_factory=list)
    amd_cdi_specs: list[str] = field(default_factory=list)
    docker_version: str | None = None
    container_uid: int = field(default_factory=os.getuid)  # what kerasenv runs containers as
    local_images: set[str] | None = None  # tags Docker holds; None: not asked
    shm_bytes: int | None = None
    # Docker's own answer to `--gpus all` (docker_gpus.ask); None: not asked (e.g. a
    # replayed host in tests), and then the runtime/CDI hints above decide, as before.
    docker_gpus: object | None = None
    cuda_cache_volumes: list[str] = field(default_factory=list)  # the JIT-cache volumes present
    # Host shapes (issue 29): the engine behind the Docker API (Docker or Podman, rootless,
    # CDI on or off), WSL2, the NVIDIA CDI devices the host defines. MIG is in `nvidia`.
    engine: Engine | None = None  # None: not asked (Docker unreachable, or a replayed host)
    # Which builder `kerasenv build` takes here (engine/buildkit.what_builds); None: not asked.
    builder: tuple[str, str, str] | None = None
    wsl: wsl_mod.Wsl = field(default_factory=wsl_mod.Wsl)
    cdi: cdi_mod.CdiDevices = field(default_factory=cdi_mod.CdiDevices)
    machine: str = field(default_factory=lambda: os.uname().machine)  # uname -m


def _run(cmd: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 124, f"{cmd[0]} did not answer within 60 s"
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


def probe_nvidia(exe: str | None = None) -> nvidia_smi.HostGpus:
    """Ask nvidia-smi (KERASENV_NVIDIA_SMI overrides which binary, e.g. a fixture replay).

    The CSV query is authoritative (full names, compute_cap); the plain table adds the
    driver's CUDA version and the MIG mode, and works on every driver; either alone is
    enough. `-L` adds the UUIDs and the MIG devices (and the full names the table cuts).
    """
    exe = exe or os.environ.get("KERASENV_NVIDIA_SMI") or shutil.which("nvidia-smi")
    if not exe:
        return nvidia_smi.HostGpus(present=False)
    table_code, table_out = _run([exe])
    query_code, query_out = _run([exe, f"--query-gpu={','.join(nvidia_smi.QUERY_FIELDS)}", "--format=csv"])
    host, rows, notes = None, None, []
    if table_code == 0:
        try:
            host = nvidia_smi.parse_table(table_out)
        except ValueError as exc:
            notes.append(f"unreadable nvidia-smi table ({exc})")
    if query_code == 0:
        try:
            rows = nvidia_smi.parse_query_csv(query_out)
        except ValueError as exc:
            notes.append(f"unreadable --query-gpu output ({exc})")
    elif "not a valid field" in query_out:
        notes.append("this nvidia-smi has no compute_cap query field (nvidia-smi older than R510): "
                     "compute capability taken from the GPU name")
    if host is None:
        driver = next((r.get("driver_version") for r in rows or [] if r.get("driver_version")), None)
        if driver is None:
            return nvidia_smi.HostGpus(present=True, error=nvidia_smi.classify_error(table_out or query_out),
                                       notes=notes)
        host = nvidia_smi.HostGpus(present=True, driver_version=driver)
    host.notes += notes
    list_code, list_out = _run([exe, "-L"])
    return nvidia_smi.merge(host, rows, None, list_out if list_code == 0 else None)


def gather(client_factory, nvidia_exe: str | None = None, root: str = "/") -> HostFacts:
    """The host's facts; `root`: where its file system is (the AMD device nodes, /sys, CDI
    specs, WSL2's files)."""
    from ..engine import docker_client, docker_gpus, engine_facts

    facts = HostFacts(nvidia=probe_nvidia(nvidia_exe))
    try:
        client = client_factory()
        info = client.info()
        facts.docker_runtimes = sorted((info.get("Runtimes") or {}).keys())
        facts.docker_version = info.get("ServerVersion")
        facts.engine = engine_facts.parse(client.version(), info)
        facts.local_images = docker_client.local_tags(client)
        facts.cuda_cache_volumes = sorted(v.name for v in client.volumes.list(
            filters={"label": f"{docker_client.KIND_LABEL}=cuda-cache"}))
    except Exception as exc:  # DockerUnavailable carries the one-line fix
        facts.docker_error = getattr(exc, "message", str(exc))
    facts.cdi = cdi_mod.scan(root, dirs=cdi_mod.spec_dirs(facts.engine))  # the engine's folders
    facts.cdi_specs = list(facts.cdi.specs)
    facts.wsl = wsl_mod.detect(root)
    if facts.docker_error is None and facts.engine is not None:
        # Docker's own answer to a GPU request, sent the way this host's engine takes it
        # (the runtime hook's request, or CDI's); Podman before 5.4 is not asked: it says yes
        # and gives no GPU.
        facts.docker_gpus = docker_gpus.ask(client, engine=facts.engine, cdi=facts.cdi)
        from ..engine import buildkit

        facts.builder = buildkit.what_builds(facts.engine)
    facts.amd = amd_devices.scan(root)
    facts.amd_tools, facts.amd_cdi_specs = amd_devices.toolkit_facts(root)
    try:
        st = os.statvfs("/dev/shm")
        facts.shm_bytes = st.f_frsize * st.f_blocks
    except OSError:
        facts.shm_bytes = None
    return facts

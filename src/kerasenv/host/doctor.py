"""`kerasenv doctor`: host preflight and a compatibility verdict for every variant.

Gathering (running nvidia-smi, asking Docker) is kept apart from judging, so the
verdicts are unit-tested against recorded nvidia-smi outputs (tests/fixtures/nvidia-smi/:
public captures, and a simulator's for the hosts listed in SIMULATED there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from . import blackwell
from . import kernel_choice
from . import nvidia_smi
from ..engine import amd_devices
from ..engine.docker_gpus import CDI_SPEC_DIRS
from ..matrix.schema import Matrix, Variant
from ..matrix.nvidia_drivers import driver_tuple

PASS, WARN, FAIL, INFO = "PASS", "WARN", "FAIL", "INFO"
TOOLKIT_FIX = ("install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure "
               "--runtime=docker && sudo systemctl restart docker`")


@dataclass
class Check:
    status: str
    name: str
    message: str
    fix: str = ""


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


# --- gathering ---------------------------------------------------------------------------

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
    driver's CUDA version and works on every driver; either alone is enough.
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
    listed = None
    if any(g.name.endswith("...") for g in host.gpus) and not rows:
        code, out = _run([exe, "-L"])
        listed = nvidia_smi.parse_list(out) if code == 0 else None
    return nvidia_smi.merge(host, rows, listed)


def gather(client_factory, nvidia_exe: str | None = None, root: str = "/") -> HostFacts:
    """The host's facts; `root`: where its file system is (the AMD device nodes, /sys, CDI specs)."""
    from . import rocm_checks

    facts = HostFacts(nvidia=probe_nvidia(nvidia_exe))
    try:
        client = client_factory()
        info = client.info()
        facts.docker_runtimes = sorted((info.get("Runtimes") or {}).keys())
        facts.docker_version = info.get("ServerVersion")
        facts.local_images = {t for image in client.images.list() for t in (image.tags or [])}
        from ..engine import docker_client, docker_gpus

        facts.docker_gpus = docker_gpus.ask(client)
        facts.cuda_cache_volumes = sorted(v.name for v in client.volumes.list(
            filters={"label": f"{docker_client.KIND_LABEL}=cuda-cache"}))
    except Exception as exc:  # DockerUnavailable carries the one-line fix
        facts.docker_error = getattr(exc, "message", str(exc))
    for folder in CDI_SPEC_DIRS:
        if os.path.isdir(folder):
            facts.cdi_specs += [os.path.join(folder, f) for f in sorted(os.listdir(folder))
                                if f.startswith("nvidia") and f.endswith((".yaml", ".json"))]
    facts.amd = amd_devices.scan(root)
    facts.amd_tools, facts.amd_cdi_specs = rocm_checks.device_facts(root)
    try:
        st = os.statvfs("/dev/shm")
        facts.shm_bytes = st.f_frsize * st.f_blocks
    except OSError:
        facts.shm_bytes = None
    return facts


# --- judging -----------------------------------------------------------------------------

def host_checks(facts: HostFacts) -> list[Check]:
    checks = []
    if facts.docker_error:
        checks.append(Check(FAIL, "docker", facts.docker_error,
                            "start Docker (`sudo systemctl start docker`) and check DOCKER_HOST"))
    else:
        checks.append(Check(PASS, "docker", "Docker daemon reachable"))
        if facts.docker_version:
            checks.append(zstd_check(facts.docker_version))
    nv = facts.nvidia
    if not nv.present:
        checks.append(Check(INFO, "nvidia-driver", "no nvidia-smi on this host: no NVIDIA GPU in use",
                            "for NVIDIA GPUs install the driver (>= 525.60.13 for the CUDA 12 images); "
                            "otherwise use the CPU image"))
    elif nv.error:
        fix = ("reboot so the new driver's kernel module loads" if "differ" in nv.error
               else "install or load the NVIDIA driver (`sudo modprobe nvidia`), then check `nvidia-smi`")
        checks.append(Check(FAIL, "nvidia-driver", nv.error, fix))
    else:
        checks.append(Check(PASS, "nvidia-driver",
                            f"driver {nv.driver_version} (supports CUDA <= {nv.cuda_version or '?'}), "
                            f"{len(nv.gpus)} GPU(s)"))
        for gpu in nv.gpus:
            cc = gpu.compute_capability or "unknown"
            mem = f", {gpu.memory_mib} MiB" if gpu.memory_mib else ""
            status = PASS if gpu.compute_capability else WARN
            checks.append(Check(status, f"gpu{gpu.index}",
                                f"{gpu.name}: compute capability {cc} ({gpu.compute_capability_source}){mem}",
                                "" if gpu.compute_capability else "look up its compute capability at "
                                "https://developer.nvidia.com/cuda-gpus"))
        for note in nv.notes:
            checks.append(Check(INFO, "nvidia-smi", note))
    gpus_here = nv.present and not nv.error and bool(nv.gpus)
    answer = facts.docker_gpus
    if answer is not None and answer.available is not None:
        if answer.available:
            checks.append(Check(PASS, "container-toolkit", answer.detail))
        elif gpus_here:
            checks.append(Check(FAIL, "container-toolkit", f"containers cannot get the GPU: {answer.explain()}",
                                TOOLKIT_FIX))
        else:
            checks.append(Check(INFO, "container-toolkit", "Docker cannot give GPUs to containers (not needed "
                                                           f"without a GPU): {answer.detail}"))
    elif "nvidia" in facts.docker_runtimes or facts.cdi_specs:
        how = "nvidia runtime registered in Docker" if "nvidia" in facts.docker_runtimes else \
              f"CDI spec {', '.join(facts.cdi_specs)}"
        checks.append(Check(PASS, "container-toolkit", how))
    elif gpus_here:
        checks.append(Check(FAIL, "container-toolkit",
                            "no NVIDIA runtime in `docker info` and no CDI spec: containers cannot get the GPU",
                            TOOLKIT_FIX))
    else:
        checks.append(Check(INFO, "container-toolkit", "NVIDIA Container Toolkit not found (not needed without a GPU)"))
    from . import rocm_checks

    checks += rocm_checks.host_checks(facts)
    where = ", ".join(facts.cuda_cache_volumes) or "none yet (created on the first CUDA run)"
    checks.append(Check(INFO, "cuda-jit-cache", "the driver's PTX JIT cache (Hopper/Blackwell kernels compiled on "
                                                "first use) is kept in Docker volumes kerasenv-cuda-cache-<id>, "
                                                "mounted at /var/cache/kerasenv/cuda by kerasenv run/smoke, the "
                                                f"compose NVIDIA overrides and the GPU devcontainer; here: {where}"))
    if facts.shm_bytes is not None:
        checks.append(Check(INFO, "shm", f"host /dev/shm {facts.shm_bytes // 2**20} MiB; containers get their "
                                         "own: kerasenv passes --shm-size 2g (Docker's default is 64 MB)"))
    return checks


def zstd_check(docker_version: str) -> Check:
    """Whether this engine unpacks the `-zstd` tags (kerasenv push --compression zstd)."""
    from ..engine import docker_client

    unpacks = docker_client.unpacks_zstd(docker_version)
    since = ".".join(map(str, docker_client.ZSTD_SINCE))
    if unpacks:
        return Check(PASS, "zstd", f"Docker {docker_version} unpacks zstd layers: the `-zstd` tags pull faster "
                                   "(`kerasenv pull ID --registry R --compression zstd`)")
    if unpacks is None:
        return Check(INFO, "zstd", f"Docker {docker_version}: version not understood; zstd layers need Docker >= {since}")
    return Check(INFO, "zstd", f"Docker {docker_version} cannot unpack zstd layers (Docker >= {since} and containerd "
                               "can): pull the plain (gzip) tags, not the `-zstd` ones",
                 f"to pull the smaller, faster `-zstd` tags, upgrade to Docker >= {since}")


# CUDA's binary compatibility rules live in kernel_choice; the doctor judges with them.
kernel_support = kernel_choice.kernel_support


def variant_verdict(v: Variant, facts: HostFacts, matrix: Matrix) -> Check:
    name = f"variant {v.id}"
    nv = facts.nvidia
    if v.family == "cpu":
        return Check(PASS, name, "runs on any x86_64 host (CPU only)")
    if v.family == "rocm":
        from . import rocm_checks

        return rocm_checks.variant_verdict(v, facts)
    if not nv.present or nv.error or not nv.driver_version:
        return Check(INFO, name, "no usable NVIDIA GPU: this image would train on the CPU")
    driver = driver_tuple(nv.driver_version)
    assert v.min_driver and v.min_driver_ptx and v.min_driver_toolkit
    full_floor = max(v.min_driver_ptx, v.min_driver_toolkit, key=driver_tuple)
    if driver < driver_tuple(v.min_driver):
        runnable = [x.id for x in matrix.variants if x.family == "cuda" and x.min_driver
                    and driver >= driver_tuple(x.min_driver)]
        # Where the GPUs are known, the image with native kernels for all of them that this
        # driver runs (on Blackwell: the JAX image, not TensorFlow's JIT-only one).
        ccs = [g.compute_capability for g in nv.gpus if g.compute_capability]
        native = kernel_choice.best_native(list(matrix.variants), ccs, nv.driver_version, matrix.default_gpu) \
            if ccs and len(ccs) == len(nv.gpus) else None
        alternative = (f"{native.id} runs on it, with native kernels for this GPU" if native else
                       f"the newest variant this driver runs is {runnable[0]}" if runnable else
                       "no CUDA variant runs on it (use the CPU image)")
        return Check(FAIL, name, f"driver {nv.driver_version} is older than {v.min_driver}, the minimum "
                                 f"for CUDA {v.cuda}; {alternative}",
                     f"upgrade the NVIDIA driver to >= {full_floor}"
                     + (f" (>= {v.min_driver} to load at all)" if full_floor != v.min_driver else ""))
    problems, notes, ptx_gpus, warnings, native_notes = [], [], [], [], []
    for gpu in nv.gpus:
        if not gpu.compute_capability:
            notes.append(f"GPU {gpu.index} compute capability unknown: kernel support not checked")
            continue
        if blackwell.is_blackwell(gpu.compute_capability):
            found = blackwell.verdict(v, gpu.name, gpu.compute_capability, nv.driver_version,
                                      [x for x in matrix.variants if x.family == "cuda"], matrix.default_gpu)
            if found.status == PASS:
                native_notes.append(found.message)
            else:
                (problems if found.status == FAIL else warnings).append((found.status, found.message, found.fix))
            continue
        # The recorded targets (read from the image's binaries), else TF's published list.
        targets = kernel_choice.targets_of(v)
        if targets is None:
            notes.append(f"GPU {gpu.index}: {v.framework_label}'s kernel targets "
                         "unknown (not recorded): kernel support not checked")
            continue
        support = kernel_support(gpu.compute_capability, targets.all)
        lowest = min(targets.all, key=lambda t: kernel_choice.parse_target(t)[1:3])
        if support == "none":
            problems.append((FAIL, f"{gpu.name} (compute capability {gpu.compute_capability}) is older "
                                   f"than {targets.framework} {targets.version} supports (lowest target {lowest})",
                             "use an older variant or a newer GPU"))
        elif support == "ptx" and driver < driver_tuple(v.min_driver_ptx):
            problems.append((FAIL, f"{gpu.name} (compute capability {gpu.compute_capability}) gets only PTX "
                                   f"from {targets.framework} {targets.version}'s build "
                                   f"({kernel_choice.describe(targets)}); "
                                   f"JIT-compiling it needs driver >= {v.min_driver_ptx}, this host has "
                                   f"{nv.driver_version} (expect CUDA_ERROR_UNSUPPORTED_PTX_VERSION)",
                             f"upgrade the NVIDIA driver to >= {v.min_driver_ptx}"))
        elif support == "ptx":
            ptx_gpus.append(str(gpu.index))
    if ptx_gpus:
        notes.append(f"GPU {','.join(ptx_gpus)} run{'s' if len(ptx_gpus) == 1 else ''} JIT-compiled PTX "
                     "(the first run compiles kernels)")
    if problems:
        status, message, fix = problems[0]
        return Check(status, name, "; ".join(p[1] for p in problems), fix)
    if driver < driver_tuple(v.min_driver_toolkit):
        notes.append(f"driver below {v.min_driver_toolkit}, the CUDA {v.cuda} wheels' own: "
                     "runs under CUDA minor-version compatibility")
    if warnings:
        return Check(WARN, name, "; ".join([w[1] for w in warnings] + notes), warnings[0][2])
    status = WARN if any("unknown" in n for n in notes) else PASS
    notes = native_notes + notes
    return Check(status, name, "compatible" + (f" ({'; '.join(notes)})" if notes else ""))


@dataclass
class Report:
    host: list[Check]
    variants: list[Check]
    recommended: str
    reason: str
    gpu_usable: bool

    def as_dict(self) -> dict:
        return {"host": [asdict(c) for c in self.host], "variants": [asdict(c) for c in self.variants],
                "recommended": self.recommended, "reason": self.reason, "gpu_usable": self.gpu_usable}


def _preference(usable: list[Variant], status: dict[str, str], facts: HostFacts, matrix: Matrix) -> list[Variant]:
    """Usable CUDA variants, best first: the default GPU image when it passes; else among the
    passing ones the best with native kernels for every GPU (kernel_choice.best_native, as the
    Blackwell verdicts name it); then the other passing ones, then those that only warn (e.g.
    PTX JIT on a Blackwell GPU), the default GPU image first."""
    ordered = sorted(usable, key=lambda v: (status[v.id] != PASS, v.id != matrix.default_gpu))
    passing = [v for v in ordered if status[v.id] == PASS]
    if not passing or passing[0].id == matrix.default_gpu:
        return ordered
    ccs = [g.compute_capability for g in facts.nvidia.gpus if g.compute_capability]
    best = kernel_choice.best_native(passing, ccs, facts.nvidia.driver_version, matrix.default_gpu) if ccs else None
    return ([best] + [v for v in ordered if v is not best]) if best else ordered


def judge(facts: HostFacts, matrix: Matrix) -> Report:
    host = host_checks(facts)
    verdicts = [variant_verdict(v, facts, matrix) for v in matrix.variants]
    toolkit_ok = any(c.name == "container-toolkit" and c.status == PASS for c in host)
    usable = [v for v, c in zip(matrix.variants, verdicts) if v.family == "cuda" and c.status in (PASS, WARN)]
    preferred = _preference(usable, {v.id: c.status for v, c in zip(matrix.variants, verdicts)}, facts, matrix)
    if preferred and toolkit_ok and not facts.docker_error:
        return Report(host, verdicts, preferred[0].id, "a usable NVIDIA GPU and the container toolkit", True)
    from . import rocm_checks

    if rocm_checks.usable(facts):
        return Report(host, verdicts, matrix.default_rocm, "an AMD GPU that a non-root container can open", True)
    why = ("no NVIDIA GPU" if not facts.nvidia.present or facts.nvidia.error else
           "no CUDA variant fits this driver/GPU" if not usable else
           "Docker cannot give the GPU to containers (NVIDIA Container Toolkit)")
    return Report(host, verdicts, matrix.default_cpu, why, False)


def format_text(report: Report) -> str:
    lines = []
    for check in report.host + report.variants:
        lines.append(f"{check.status:<4}  {check.name:<26} {check.message}")
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"{'':<6}{'':<26} fix: {check.fix}")
    lines.append(f"recommended: kerasenv:{report.recommended} ({report.reason})")
    return "\n".join(lines)

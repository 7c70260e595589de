"""The doctor's host-shape lines: the CPU architecture (amd64, arm64), the engine behind the
Docker API (Docker or Podman, rootful or rootless), WSL2, MIG, CDI and a unified-memory GPU
(GB10), one line each, and what each shape changes in the verdicts.

Judging only: the facts come from host/facts.gather (engine_facts, wsl, nvidia_smi's MIG
devices and unified memory, engine/cdi) and are replayed in tests from recorded outputs
(tests/fixtures/engines/, tests/fixtures/host-shapes/, tests/fixtures/nvidia-smi/).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..engine.cdi import GENERATE_FIX
from ..engine.gpu_request import DOCKER_FIX, ROOTLESS_FIX
from ..matrix.nvidia_drivers import driver_tuple
from ..matrix.schema import Matrix, Variant
from ..matrix.tested_builds import version_tuple
from .checks import FAIL, INFO, PASS, WARN, Check
from .facts import HostFacts
from .nvidia_smi import HostGpus
from .wsl import Wsl

# Every variant has a linux/amd64 image; those with [variant.arm64] in the matrix also a
# linux/arm64 one under the same tag (Variant.platforms: JAX and PyTorch, whose aarch64 wheels
# carry CUDA). TensorFlow has none: its aarch64 wheel is CPU-only (tensorflow/tensorflow#121157,
# open), so TF's GPU images are amd64 only. An image of the other architecture fails at once
# with `exec format error`; the doctor says so per variant and names the image to use.
ARCH_OF_MACHINE = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
TF_AARCH64_CPU_ONLY = "TensorFlow's aarch64 wheel is CPU-only (tensorflow/tensorflow#121157)"
GRACE = "NVIDIA Grace: GH200, GB200, DGX Spark / GB10"
# Where no kerasenv image runs on this CPU at all (another architecture, or a matrix without
# arm64 images).
NO_IMAGE_FIX = ("on arm64 use NVIDIA's NGC containers, which ship linux/arm64 (nvcr.io/nvidia/jax, "
                "nvcr.io/nvidia/pytorch), or check JAX/PyTorch installed natively with `kerasenv gpu-host-check` "
                "(docs/using/grace-arm64.md)")

# CUDA enumerates one MIG device per process before R570; from R570 every MIG device handed
# to the process is a CUDA device (shared/reference/compatibility.md, "MIG").
MIG_MANY_PER_PROCESS = "570"
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"


@dataclass(frozen=True)
class HostDefect:
    """A backend release that fails on a host shape, with its public report."""

    shape: str  # wsl2
    backend: str
    versions: tuple[str, ...]
    report: str  # the public issue
    what: str


# Sourced defects (compatibility.md, "WSL2"): each names its issue; a new release is added
# here only with a report of its own.
DEFECTS = (
    HostDefect("wsl2", "jax", ("0.10.2",), "https://github.com/jax-ml/jax/issues/40558",
               "JAX {version}'s first GPU allocation fails under WSL2 with CUDA_ERROR_UNKNOWN although "
               "jax.devices() lists the GPU (jax-ml/jax#40558, open; no workaround confirmed in the thread)"),
)


@dataclass(frozen=True)
class HostSetting:
    """A container environment variable that a backend's releases from `since` on need on a host
    shape, with its public report: the doctor names it (a WARN, not a FAIL) and `kerasenv run`,
    `shell`, `smoke` and `lab` set it there (host/container_env.py) unless the user already did."""

    shape: str  # wsl2 | unified-memory (SHAPES)
    backend: str
    family: str  # the images it applies to: cuda
    since: str  # the first release that needs it
    key: str
    value: str
    report: str  # the public issue
    what: str

    def applies(self, v: Variant, shape: str) -> bool:
        return (shape == self.shape and v.backend == self.backend and v.family == self.family
                and version_tuple(v.framework_version) >= version_tuple(self.since))

    @property
    def assignment(self) -> str:
        return f"{self.key}={self.value}"

    @property
    def short_report(self) -> str:
        """openxla/xla#48979 from its URL."""
        owner, repo, _, number = self.report.removeprefix("https://github.com/").split("/")[:4]
        return f"{owner}/{repo}#{number}"


# Sourced settings, keyed on the release, not on an image id, so the next JAX image inherits
# them until a release is reported fixed (then it gets an upper bound here, with that report).
# - WSL2 (compatibility.md, "WSL2 and JAX >= 0.11"): openxla/xla#48979 (open; RTX 4070, Windows
#   driver 591.86, jax-cuda13 0.11.1): under WSL2, JAX >= 0.11's default BFC allocator on
#   exportable (POSIX-fd) VMM memory fails every single allocation of 4 GiB or more with
#   out-of-memory although the memory is free; JAX 0.10.1 is not affected, and the CUDA async
#   allocator works.
# - Unified memory (compatibility.md, "arm64 GPUs as users meet them"): JAX preallocates 75 % of
#   the GPU's memory at its first operation (XLA_PYTHON_CLIENT_MEM_FRACTION, .75 by default in
#   current JAX; a share of the total, not of the free memory, since jax-ml/jax#13413); on GB10
#   that memory is the system's RAM, which the CPU side (the OS, the input pipeline, the
#   notebook) needs too. marin's DGX Spark guide has JAX users set it "to something like 0.5"
#   (marin-community/marin#2142); 0.5 is what kerasenv applies. Every JAX release preallocates
#   so: `since` 0. Not seen here on a GB10: how far 75 % starves the host, and whether 0.5 is
#   the best figure.
SETTINGS = (
    HostSetting("wsl2", "jax", "cuda", "0.11", "XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async",
                "https://github.com/openxla/xla/issues/48979",
                "JAX {version}'s default GPU allocator fails any single allocation of 4 GiB or more under WSL2 "
                "with out-of-memory although the memory is free (openxla/xla#48979, open; the cuda_async "
                "allocator works)"),
    HostSetting("unified-memory", "jax", "cuda", "0", "XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5",
                "https://github.com/marin-community/marin/pull/2142",
                "JAX preallocates 75 % of the GPU's memory at its first operation, and a GB10's memory is the "
                "system RAM the CPU side needs too; DGX Spark users set XLA_PYTHON_CLIENT_MEM_FRACTION to about "
                "0.5 (marin-community/marin#2142)"),
)
# How each shape is named in the doctor's lines and in `kerasenv run`'s one line.
SHAPES = {"wsl2": "WSL2", "unified-memory": "a unified-memory GPU (GB10)"}
BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


def shape_of(wsl: Wsl) -> str:
    """The host shape DEFECTS are keyed on ("": none of them)."""
    return "wsl2" if wsl.present else ""


def shapes_of(wsl: Wsl, nvidia: HostGpus | None = None) -> frozenset[str]:
    """The host shapes SETTINGS are keyed on: WSL2, and a unified-memory GPU among the GPUs
    nvidia-smi lists (nvidia_smi.UNIFIED_MEMORY_GPUS)."""
    shapes = {"wsl2"} if wsl.present else set()
    if nvidia is not None and nvidia.unified_memory():
        shapes.add("unified-memory")
    return frozenset(shapes)


def settings(v: Variant, wsl: Wsl, nvidia: HostGpus | None = None) -> tuple[HostSetting, ...]:
    """Every setting `v`'s containers need on this host's shapes, in SETTINGS' order."""
    shapes = shapes_of(wsl, nvidia)
    return tuple(s for s in SETTINGS if any(s.applies(v, shape) for shape in shapes))


def setting(v: Variant, wsl: Wsl, nvidia: HostGpus | None = None) -> HostSetting | None:
    """The first setting `v`'s containers need on this host's shapes, if any."""
    found = settings(v, wsl, nvidia)
    return found[0] if found else None


def host_arch(facts: HostFacts) -> str:
    """amd64 | arm64 (or what uname says for any other CPU)."""
    return ARCH_OF_MACHINE.get(facts.machine, facts.machine)


def image_here(v: Variant, facts: HostFacts) -> bool:
    """Whether `v` has an image for this host's CPU (Variant.platforms)."""
    return f"linux/{host_arch(facts)}" in v.platforms


def images_here(matrix: Matrix, facts: HostFacts) -> list[Variant]:
    """The variants with an image for this host's CPU."""
    return [v for v in matrix.variants if image_here(v, facts)]


def runs_here(facts: HostFacts, matrix: Matrix | None = None) -> bool:
    """Whether this host's CPU runs any image of the matrix (without one: whether it is amd64,
    the architecture every variant has)."""
    if matrix is None:
        return host_arch(facts) == "amd64"
    return bool(images_here(matrix, facts))


def arch_verdict(v: Variant, facts: HostFacts, matrix: Matrix) -> Check | None:
    """FAIL for a variant without an image for this host's CPU, in one line: why (TensorFlow:
    its aarch64 wheel is CPU-only), and the image of this architecture to use instead (the same
    backend's where there is one). None when `v` has an image here."""
    if image_here(v, facts):
        return None
    arch = host_arch(facts)
    here = images_here(matrix, facts)
    same = [x for x in here if x.backend == v.backend and x.family == "cuda"]
    gpu_here = [x for x in here if x.family == "cuda"]
    if v.backend == "tensorflow" and v.family == "cuda" and arch == "arm64":
        why = TF_AARCH64_CPU_ONLY
    else:
        why = f"no linux/{arch} image of it"
    if same:
        fix = f"use kerasenv:{same[0].id}, its backend's linux/{arch} image"
    elif gpu_here:
        cpu = "; without a GPU it trains on the CPU" if v.family == "cpu" else ""
        fix = (f"use {' or '.join(f'kerasenv:{x.id}' for x in gpu_here)} (Keras 3 on "
               f"{' or '.join(dict.fromkeys(x.framework_name for x in gpu_here))}{cpu})")
    else:
        fix = NO_IMAGE_FIX
    return Check(FAIL, f"variant {v.id}", f"linux/{'+'.join(p.split('/')[1] for p in v.platforms)} only "
                                          f"({facts.machine} host): {why}", fix)


def os_of(facts: HostFacts) -> str:
    """Whose driver floors apply: the Windows driver's under WSL2, else Linux's."""
    return "windows" if facts.wsl.present else "linux"


def defect(v: Variant, facts: HostFacts) -> HostDefect | None:
    shape = shape_of(facts.wsl)
    return next((d for d in DEFECTS if d.shape == shape and d.backend == v.backend
                 and v.framework_version in d.versions), None)


def usable_here(facts: HostFacts):
    """A predicate: can this variant be recommended on this host shape at all."""
    return lambda v: defect(v, facts) is None


# --- the lines -------------------------------------------------------------------------

def host_checks(facts: HostFacts, root: str = "/", matrix: Matrix | None = None) -> list[Check]:
    checks = [arch_check(facts, matrix), platform_check(facts)]
    if facts.engine is not None:
        checks.append(engine_check(facts, root))
    mig = mig_check(facts)
    if mig is not None:
        checks.append(mig)
    memory = memory_check(facts)
    if memory is not None:
        checks.append(memory)
    checks.append(cdi_check(facts))
    return checks


def _gpus_here(facts: HostFacts) -> bool:
    nv = facts.nvidia
    return nv.present and not nv.error and bool(nv.gpus)


def arch_check(facts: HostFacts, matrix: Matrix | None = None) -> Check:
    """The CPU architecture against the images': which of them have an image for it (an image
    of another architecture fails at once with `exec format error`). Without the matrix: as
    when every image was linux/amd64."""
    arch = host_arch(facts)
    grace = f" ({GRACE})" if arch == "arm64" else ""
    if matrix is None:
        if arch == "amd64":
            return Check(PASS, "architecture", f"{facts.machine}: kerasenv's images are linux/amd64")
        return Check(FAIL, "architecture", f"{facts.machine}{grace}: kerasenv's images are linux/amd64 only and "
                                           "cannot run here (`exec format error`)", NO_IMAGE_FIX)
    here = images_here(matrix, facts)
    arm64 = [v.id for v in matrix.variants if "linux/arm64" in v.platforms]
    if arch == "amd64":
        also = f"; {', '.join(arm64)} also linux/arm64 (Grace hosts)" if arm64 else ""
        return Check(PASS, "architecture", f"{facts.machine}: every kerasenv image is linux/amd64{also}")
    if not here:
        return Check(FAIL, "architecture", f"{facts.machine}{grace}: no kerasenv image is linux/{arch} (they are "
                                           "linux/amd64) and an amd64 image cannot run here (`exec format error`)",
                     NO_IMAGE_FIX)
    others = [v for v in matrix.variants if v not in here]
    tf = any(v.backend == "tensorflow" and v.family == "cuda" for v in others)
    return Check(PASS, "architecture",
                 f"{facts.machine}{grace}: linux/{arch} images: {', '.join(v.id for v in here)}; the other variants "
                 "are linux/amd64 only and cannot run here" + (" (TensorFlow's GPU images: its aarch64 wheel is "
                                                               "CPU-only, tensorflow/tensorflow#121157)" if tf else ""))


def platform_check(facts: HostFacts) -> Check:
    w = facts.wsl
    if not w.present:
        return Check(INFO, "wsl2", f"not WSL2 ({facts.machine}, kernel {w.kernel or 'unknown'})")
    message = (f"WSL2 ({w.describe()}): the driver is the Windows one, checked against NVIDIA's Windows "
               "driver floors; containers get every GPU or none (--gpus all); pinned memory is limited and "
               "NVML reports no GPU utilisation (NVIDIA's CUDA on WSL guide, 5)")
    if _gpus_here(facts) and not w.libcuda:
        return Check(WARN, "wsl2", message + "; /usr/lib/wsl/lib/libcuda.so.1 is missing",
                     "update the Windows NVIDIA driver and WSL (`wsl --update`); never install a Linux NVIDIA "
                     "driver inside WSL (microsoft/WSL#9099)")
    return Check(PASS if _gpus_here(facts) else INFO, "wsl2", message)


def no_cgroups_set(root: str = "/") -> bool | None:
    """Whether the NVIDIA toolkit's config has `no-cgroups = true` (None: no config here)."""
    path = Path(root) / TOOLKIT_CONFIG.lstrip("/")
    try:
        text = path.read_text()
    except OSError:
        return None
    return any(line.split("#")[0].replace(" ", "") == "no-cgroups=true" for line in text.splitlines())


def engine_check(facts: HostFacts, root: str = "/") -> Check:
    e = facts.engine
    assert e is not None
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    gpus = _gpus_here(facts)
    if e.is_podman:
        message = f"{e.describe()} at {where}: CPU images run"
        if e.cdi_enabled and facts.cdi.present:
            return Check(PASS, "engine", message + "; GPU requests go through CDI (Podman >= 5.4)")
        if e.cdi_enabled:
            return Check(WARN if gpus else INFO, "engine",
                         message + "; GPU requests need an NVIDIA CDI spec, and this host has none",
                         f"generate it: {GENERATE_FIX}")
        return Check(WARN if gpus else INFO, "engine",
                     message + "; GPU requests are refused: Podman before 5.4 accepts them and gives the "
                               "container no GPU (containers/podman#22645)",
                     f"Podman >= 5.4 with a CDI spec ({GENERATE_FIX}), or {DOCKER_FIX}")
    if e.rootless and gpus:
        if e.cdi_enabled and facts.cdi.present:
            return Check(PASS, "engine", f"{e.describe()}: GPU requests go through CDI, which needs no cgroup "
                                         "access")
        if no_cgroups_set(root):
            return Check(PASS, "engine", f"{e.describe()}: the NVIDIA toolkit has no-cgroups = true "
                                         f"({TOOLKIT_CONFIG}), as rootless Docker needs")
        return Check(WARN, "engine", f"{e.describe()}: the NVIDIA runtime hook fails here without "
                                     "no-cgroups (\"bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not "
                                     "permitted\" on cgroup v2, NVIDIA/nvidia-container-toolkit#139; "
                                     "\"devices.allow: permission denied\" on v1, moby#38729)", ROOTLESS_FIX)
    return Check(PASS, "engine", e.describe())


def mig_check(facts: HostFacts) -> Check | None:
    """MIG mode and slices: which slices a container gets, and what each backend then sees."""
    nv = facts.nvidia
    if not _gpus_here(facts):
        return None
    enabled = nv.mig_enabled()
    if not enabled:
        return Check(INFO, "mig", "no GPU in MIG mode")
    names = {g.index: g.name for g in nv.gpus}
    empty = [i for i in enabled if not any(m.gpu == i for m in nv.mig)]
    if empty:
        return Check(WARN, "mig", f"GPU {', '.join(map(str, empty))} is in MIG mode with no MIG devices: CUDA has "
                                  "nothing to run on there",
                     f"create slices (`sudo nvidia-smi mig -i {empty[0]} -cgi <profiles> -C`) or turn MIG off "
                     f"(`sudo nvidia-smi -i {empty[0]} -mig 0`)")
    slices = "; ".join(f"{m.gpu}:{m.index} {m.profile} {m.uuid}" for m in nv.mig)
    many = nv.driver_version and driver_tuple(nv.driver_version) >= driver_tuple(MIG_MANY_PER_PROCESS)
    sees = ("each slice handed to a container is one GPU to TensorFlow, JAX and PyTorch alike (driver >= R570)"
            if many else f"with driver {nv.driver_version} (< R570) CUDA shows a process only the first slice it "
                         "is given: give each container one slice")
    which = ", ".join(f"{i} ({names.get(i, '?')})" for i in enabled)
    return Check(INFO, "mig", f"GPU {which} in MIG mode, "
                              f"{len(nv.mig)} slice(s): {slices}. --gpus device=N:M or MIG-<uuid> gives a slice "
                              "(a whole-card device=N gives none), --gpus all every slice; "
                              f"{sees}; GPU utilisation reads N/A per slice (recorded as missing, not 0)")


def memory_check(facts: HostFacts) -> Check | None:
    """A GPU that shares the system's RAM (GB10): which setting the JAX images get for it, and
    which readings mean nothing there. None without such a GPU."""
    nv = facts.nvidia
    unified = nv.unified_memory()
    if not unified:
        return None
    names = {g.index: g.name for g in nv.gpus}
    which = ", ".join(f"{i} ({names.get(i, '?')})" for i in unified)
    applied = " ".join(f"The {BACKEND_NAMES.get(s.backend, s.backend)} images get {s.assignment} from `kerasenv "
                       "run`, `shell`, `smoke` and `lab` (your own -e wins; with `docker run` or Compose pass it "
                       f"yourself): {s.what.format(version='')}."
                       for s in SETTINGS if s.shape == "unified-memory")
    return Check(INFO, "unified-memory",
                 f"GPU {which} shares the system's RAM with the CPU and the driver reports no memory for it "
                 "(nvidia-smi: \"Not Supported\"); CUDA's free-memory reading (cudaMemGetInfo) says almost none is "
                 "free there (PennyLaneAI/pennylane-lightning#1357, NVIDIA/cuQuantum#215), so the smoke and "
                 f"GpuMonitor say \"not reported\" instead of a figure. {applied}")


def cdi_check(facts: HostFacts) -> Check:
    c, e = facts.cdi, facts.engine
    if c.errors:
        return Check(WARN, "cdi", f"unreadable CDI spec: {'; '.join(c.errors)}", f"regenerate it: {GENERATE_FIX}")
    if not c.present:
        return Check(INFO, "cdi", f"no NVIDIA CDI spec ({c.where()})" +
                     (f"; generate one to use CDI: {GENERATE_FIX}" if _gpus_here(facts) else ""))
    shown = ", ".join(c.short_names()[:6]) + (", ..." if len(c.names) > 6 else "")
    where = ", ".join(c.specs) or "nvidia-ctk cdi list"
    if e is None:
        use = "the engine was not asked"
    elif e.cdi_enabled:
        use = "this engine applies CDI: kerasenv sends GPU requests through it"
    elif e.is_podman:  # its Docker API drops every GPU request (containers/podman#22645)
        use = (f"Podman {e.version}'s Docker API applies no CDI request (Podman >= 5.4 does), so kerasenv refuses "
               "GPU requests to it")
    else:
        use = ("this engine has CDI off, so kerasenv uses NVIDIA's runtime hook (CDI: Docker >= 28.2, or "
               "features.cdi on 25-28.1; Podman >= 5.4)")
    return Check(PASS if e is not None and e.cdi_enabled else INFO, "cdi",
                 f"NVIDIA CDI devices nvidia.com/gpu={{{shown}}} ({where}); {use}")


def toolkit_fix(facts: HostFacts, default: str) -> str:
    """The fix for "containers cannot get the GPU", by engine mode."""
    e = facts.engine
    if e is None:
        return default
    if e.is_podman and e.cdi_enabled:  # Podman >= 5.4: only the spec is missing
        return f"generate an NVIDIA CDI spec: {GENERATE_FIX}"
    if e.is_podman:
        return f"Podman >= 5.4 with a CDI spec ({GENERATE_FIX}), or {DOCKER_FIX}"
    if e.rootless:
        return ROOTLESS_FIX
    if facts.cdi.present and not e.cdi_enabled:
        return ("enable CDI in Docker (`\"features\": {\"cdi\": true}` in /etc/docker/daemon.json on 25-28.1, on "
                "by default from 28.2), or " + default)
    return default


def defect_verdict(v: Variant, facts: HostFacts, alternative: Variant | None) -> Check | None:
    """FAIL for a variant with a known defect on this host shape, naming the image to use."""
    found = defect(v, facts)
    if found is None:
        return None
    instead = f"use kerasenv:{alternative.id}" if alternative else "use another backend's image"
    return Check(FAIL, f"variant {v.id}", found.what.format(version=v.framework_version) + f" ({found.report})",
                 instead + " (`kerasenv doctor` ranks them for this GPU)")


def with_setting(check: Check, v: Variant, facts: HostFacts) -> Check:
    """A verdict that holds only with host settings (SETTINGS): a WARN that names them, why, and
    who sets them. A FAIL stays one (a setting does not mend it), and INFO (no usable GPU) too."""
    found = settings(v, facts.wsl, facts.nvidia)
    if not found or check.status not in (PASS, WARN):
        return check
    where = " and ".join(dict.fromkeys(f"on {SHAPES[s.shape]}" for s in found))
    needs = (f"works with {' and '.join(s.assignment for s in found)}, which `kerasenv run`, `shell`, `smoke` and "
             f"`lab` set {where}: " + "; ".join(s.what.format(version=v.framework_version) for s in found))
    message = f"{needs}; otherwise {check.message}" if check.status == PASS else f"{needs}; {check.message}"
    fix = (f"with `docker run`, Compose or the devcontainer pass "
           f"{' '.join(f'`-e {s.assignment}`' for s in found)} yourself "
           f"({', '.join(s.short_report for s in found)})")
    return Check(WARN, check.name, message, f"{check.fix}; {fix}" if check.fix else fix)

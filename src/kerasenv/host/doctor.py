"""`kerasenv doctor`: host preflight and a compatibility verdict for every variant.

Gathering (host/facts.py: running nvidia-smi, asking Docker, reading /proc, /dev and
/etc/cdi) is kept apart from judging (this module, rocm_checks and shape_checks), so the
verdicts are unit-tested against recorded outputs (tests/fixtures/nvidia-smi/: public
captures, and a simulator's for the hosts listed in SIMULATED there; tests/fixtures/engines/
and host-shapes/ for the engines, WSL2 and CDI).
"""

from __future__ import annotations

import shutil  # noqa: F401 - tests patch doctor.shutil.which (the same module facts uses)
from dataclasses import asdict, dataclass

from . import blackwell
from . import kernel_choice
from . import rocm_checks
from . import shape_checks
from .checks import FAIL, INFO, PASS, WARN, Check
from .facts import HostFacts, gather, probe_nvidia  # noqa: F401 - the doctor's own gathering, re-exported
from ..matrix.schema import Matrix, Variant
from ..matrix.nvidia_drivers import driver_tuple

TOOLKIT_FIX = ("install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure "
               "--runtime=docker && sudo systemctl restart docker`")


# --- judging -----------------------------------------------------------------------------

def host_checks(facts: HostFacts, matrix: Matrix | None = None) -> list[Check]:
    """The host's lines; with the matrix, the architecture line names the images this CPU runs."""
    checks = []
    if facts.docker_error:
        checks.append(Check(FAIL, "docker", facts.docker_error,
                            "start Docker (`sudo systemctl start docker`) and check DOCKER_HOST"))
    else:
        checks.append(Check(PASS, "docker", "Docker daemon reachable"))
        if facts.docker_version:
            podman = facts.engine is not None and facts.engine.is_podman
            checks.append(zstd_check(facts.engine.version if podman else facts.docker_version, podman=podman))
        if facts.engine is not None and facts.engine.image_store:
            checks.append(image_store_check(facts.engine))
        if facts.builder is not None:
            _, said, fix = facts.builder
            checks.append(Check(INFO, "builder", said, fix))
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
            mem = (f", {gpu.memory_mib} MiB" if gpu.memory_mib else
                   ", unified memory (shared with the CPU; not reported by the driver)" if gpu.unified_memory else "")
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
                                shape_checks.toolkit_fix(facts, TOOLKIT_FIX)))
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
                            shape_checks.toolkit_fix(facts, TOOLKIT_FIX)))
    else:
        checks.append(Check(INFO, "container-toolkit", "NVIDIA Container Toolkit not found (not needed without a GPU)"))
    checks += shape_checks.host_checks(facts, matrix=matrix)
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


def image_store_check(engine) -> Check:
    """Which image store Docker keeps images in, and what that changes for the user (issue 43)."""
    name = f"Docker {engine.version}: image store {engine.image_store}"
    if engine.containerd_store:
        return Check(INFO, "image-store",
                     f"{name}: one tag can hold several platforms (`docker run --platform linux/arm64`; "
                     "kerasenv still tags its arm64 builds `<id>-arm64`), zstd layers unpack natively, image "
                     "Ids are manifest digests, and each layer is kept compressed and unpacked (more disk "
                     "than overlay2); `docker images` SIZE counts compressed content on Docker 29.0-29.7 "
                     "(moby#53398), so `kerasenv size` reads the unpacked layers instead")
    return Check(INFO, "image-store",
                 f"{name}: one platform per tag (kerasenv tags arm64 images `<id>-arm64`); fresh Docker 29 "
                 "installs use the containerd image store instead (kerasenv works on both)")


def zstd_check(docker_version: str, podman: bool = False) -> Check:
    """Whether this engine unpacks the `-zstd` tags (kerasenv push --compression zstd). Podman pulls
    through containers/image, which reads zstd layers: its version is not Docker's (it said "Docker
    5.8.6 cannot unpack zstd layers" behind Podman 5.8.6's Docker API)."""
    from ..engine import docker_client

    if podman:
        return Check(PASS, "zstd", f"Podman {docker_version} unpacks zstd layers (containers/image): the `-zstd` "
                                   "tags pull faster (`kerasenv pull ID --registry R --compression zstd`)")
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
    """The variant's verdict on this host: where it needs a host setting (JAX >= 0.11 on WSL2,
    shape_checks.SETTINGS), a WARN naming it on top of what its driver and kernels say."""
    return shape_checks.with_setting(base_verdict(v, facts, matrix), v, facts)


def base_verdict(v: Variant, facts: HostFacts, matrix: Matrix) -> Check:
    """The verdict from the driver, the kernels and the host shape's defects, before any host
    setting kerasenv applies itself."""
    name = f"variant {v.id}"
    nv = facts.nvidia
    # An image of another architecture cannot start here (`exec format error`); an arm64 host
    # judges the arm64 images as an amd64 host the amd64 ones, with their own kernels. Tested
    # with recorded nvidia-smi outputs of GB10, GH200 and GB200 only: no arm64 GPU ran them here.
    elsewhere = shape_checks.arch_verdict(v, facts, matrix)
    if elsewhere is not None:
        return elsewhere
    arch = shape_checks.host_arch(facts)
    if v.family == "cpu":
        return Check(PASS, name, "runs on any x86_64 host (CPU only)")
    if v.family == "rocm":
        return rocm_checks.variant_verdict(v, facts)
    if not nv.present or nv.error or not nv.driver_version:
        return Check(INFO, name, "no usable NVIDIA GPU: this image would train on the CPU")
    driver = driver_tuple(nv.driver_version)
    os_name = shape_checks.os_of(facts)  # under WSL2 the driver is Windows's: Windows floors
    floors = v.driver_floors(os_name)
    assert floors is not None
    which = " Windows" if os_name == "windows" else ""
    full_floor = max(floors.ptx_jit, floors.toolkit, key=driver_tuple)
    usable = shape_checks.usable_here(facts)
    # Where the GPUs are known, the image with native kernels for all of them that this
    # driver runs (on Blackwell: the JAX image, not TensorFlow's JIT-only one), among this
    # CPU's images.
    ccs = [g.compute_capability for g in nv.gpus if g.compute_capability]
    native = kernel_choice.best_native([x for x in matrix.variants if usable(x)], ccs, nv.driver_version,
                                       matrix.default_gpu, os=os_name, arch=arch) \
        if ccs and len(ccs) == len(nv.gpus) else None
    if driver < driver_tuple(floors.load):
        runnable = [x.id for x in matrix.variants if x.family == "cuda" and usable(x)
                    and shape_checks.image_here(x, facts) and driver >= driver_tuple(x.driver_floors(os_name).load)]
        alternative = (f"{native.id} runs on it, with native kernels for this GPU" if native else
                       f"the newest variant this driver runs is {runnable[0]}" if runnable else
                       "no CUDA variant runs on it (use the CPU image)")
        return Check(FAIL, name, f"{which.strip() + ' ' if which else ''}driver {nv.driver_version} is older than "
                                 f"{floors.load}, the{which} minimum for CUDA {v.cuda}; {alternative}",
                     f"upgrade the{which} NVIDIA driver to >= {full_floor}"
                     + (f" (>= {floors.load} to load at all)" if full_floor != floors.load else ""))
    broken = shape_checks.defect_verdict(v, facts, native if native is not None and native.id != v.id else
                                         next((x for x in matrix.variants if x.family == "cuda" and usable(x)
                                               and x.id == matrix.default_gpu
                                               and shape_checks.image_here(x, facts)), None))
    if broken is not None:
        return broken
    problems, notes, ptx_gpus, warnings, native_notes = [], [], [], [], []
    for gpu in nv.gpus:
        if not gpu.compute_capability:
            notes.append(f"GPU {gpu.index} compute capability unknown: kernel support not checked")
            continue
        if blackwell.is_blackwell(gpu.compute_capability):
            found = blackwell.verdict(v, gpu.name, gpu.compute_capability, nv.driver_version,
                                      [x for x in matrix.variants if x.family == "cuda"], matrix.default_gpu,
                                      os=os_name, usable=usable, arch=arch)
            if found.status == PASS:
                native_notes.append(found.message)
            else:
                (problems if found.status == FAIL else warnings).append((found.status, found.message, found.fix))
            continue
        # The recorded targets of this architecture's image (read from its binaries), else
        # (amd64) TF's published list.
        targets = kernel_choice.targets_of(v, arch)
        if targets is None:
            where = "" if arch == "amd64" else f" for its linux/{arch} image ({kernel_choice.record_name(arch)})"
            notes.append(f"GPU {gpu.index}: {v.framework_label}'s kernel targets "
                         f"unknown (not recorded{where}): kernel support not checked")
            continue
        support = kernel_support(gpu.compute_capability, targets.all)
        lowest = min(targets.all, key=lambda t: kernel_choice.parse_target(t)[1:3])
        if support == "none":
            problems.append((FAIL, f"{gpu.name} (compute capability {gpu.compute_capability}) is older "
                                   f"than {targets.framework} {targets.version} supports (lowest target {lowest})",
                             "use an older variant or a newer GPU"))
        elif support == "ptx" and driver < driver_tuple(floors.ptx_jit):
            problems.append((FAIL, f"{gpu.name} (compute capability {gpu.compute_capability}) gets only PTX "
                                   f"from {targets.framework} {targets.version}'s build "
                                   f"({kernel_choice.describe(targets)}); "
                                   f"JIT-compiling it needs{which} driver >= {floors.ptx_jit}, this host has "
                                   f"{nv.driver_version} (expect CUDA_ERROR_UNSUPPORTED_PTX_VERSION)",
                             f"upgrade the{which} NVIDIA driver to >= {floors.ptx_jit}"))
        elif support == "ptx":
            ptx_gpus.append(str(gpu.index))
    if ptx_gpus:
        notes.append(f"GPU {','.join(ptx_gpus)} run{'s' if len(ptx_gpus) == 1 else ''} JIT-compiled PTX "
                     "(the first run compiles kernels)")
    if problems:
        status, message, fix = problems[0]
        return Check(status, name, "; ".join(p[1] for p in problems), fix)
    if driver < driver_tuple(floors.toolkit):
        notes.append(f"{which.strip() + ' ' if which else ''}driver below {floors.toolkit}, the CUDA {v.cuda} "
                     "wheels' own: runs under CUDA minor-version compatibility")
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
    best = kernel_choice.best_native(passing, ccs, facts.nvidia.driver_version, matrix.default_gpu,
                                     os=shape_checks.os_of(facts), arch=shape_checks.host_arch(facts)) if ccs else None
    return ([best] + [v for v in ordered if v is not best]) if best else ordered


def cpu_fallback(facts: HostFacts, matrix: Matrix) -> tuple[str, str]:
    """The image to train on the CPU with, and what to add to the reason: the default CPU image
    where this CPU runs it; else (arm64, where no CPU-only image is built) this CPU's first CUDA
    image of the default CPU image's backend, else its first CUDA image, which falls back to
    the CPU without a GPU (.ci/run checks that fallback on every CUDA image)."""
    default = matrix.get(matrix.default_cpu)
    if shape_checks.image_here(default, facts):
        return default.id, ""
    here = [v for v in shape_checks.images_here(matrix, facts) if v.family == "cuda"]
    pick = next((v for v in here if v.backend == default.backend), here[0])
    return pick.id, (f"; no CPU-only linux/{shape_checks.host_arch(facts)} image: kerasenv:{pick.id} trains on "
                     "the CPU without a GPU")


def judge(facts: HostFacts, matrix: Matrix) -> Report:
    host = host_checks(facts, matrix)
    base = [base_verdict(v, facts, matrix) for v in matrix.variants]
    verdicts = [shape_checks.with_setting(c, v, facts) for v, c in zip(matrix.variants, base)]
    if not shape_checks.runs_here(facts, matrix):  # no image of the matrix runs on this CPU: no pick
        platforms = ", ".join(sorted({p for v in matrix.variants for p in v.platforms}))
        return Report(host, verdicts, "", f"no kerasenv image for {facts.machine} (they are {platforms})", False)
    toolkit_ok = any(c.name == "container-toolkit" and c.status == PASS for c in host)
    usable = [v for v, c in zip(matrix.variants, verdicts) if v.family == "cuda" and c.status in (PASS, WARN)]
    # Ranked by the verdict before host settings: a setting `kerasenv run auto` applies itself (JAX
    # >= 0.11 on WSL2, openxla/xla#48979) is no reason to prefer another image; its WARN is for
    # the paths that do not (docker run, Compose, the devcontainer).
    preferred = _preference(usable, {v.id: c.status for v, c in zip(matrix.variants, base)}, facts, matrix)
    if preferred and toolkit_ok and not facts.docker_error:
        return Report(host, verdicts, preferred[0].id, "a usable NVIDIA GPU and the container toolkit", True)
    if rocm_checks.usable(facts) and shape_checks.image_here(matrix.get(matrix.default_rocm), facts):
        return Report(host, verdicts, matrix.default_rocm, "an AMD GPU that a non-root container can open", True)
    why = ("no NVIDIA GPU" if not facts.nvidia.present or facts.nvidia.error else
           "no CUDA variant fits this driver/GPU" if not usable else
           "Docker cannot give the GPU to containers (NVIDIA Container Toolkit)")
    cpu, note = cpu_fallback(facts, matrix)
    return Report(host, verdicts, cpu, why + note, False)


def format_text(report: Report) -> str:
    lines = []
    for check in report.host + report.variants:
        lines.append(f"{check.status:<4}  {check.name:<26} {check.message}")
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"{'':<6}{'':<26} fix: {check.fix}")
    lines.append(f"recommended: kerasenv:{report.recommended} ({report.reason})" if report.recommended else
                 f"recommended: none ({report.reason}): {shape_checks.NO_IMAGE_FIX}")
    return "\n".join(lines)

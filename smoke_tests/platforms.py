"""Which image of a variant's tag is under test, and what legitimately differs between its
linux/amd64 and linux/arm64 images (issue 36: `[variant.arm64]` in images/matrix.toml).

Pure helpers of the acceptance suite (no Docker): the architecture as the engine names it, the
test id, the locks the image was installed from, its size budget, the GPUs whose ptxas targets
and kernels an image for that architecture must serve. Unit-tested in
tests/unit/repo/test_smoke_platforms.py, which loads this file by path: absolute imports only.
"""

from __future__ import annotations

import re
from pathlib import Path

from kerasenv.images import locks

AMD64, ARM64 = "amd64", "arm64"
# The engine's names: an image's "Architecture" is Go's GOARCH (amd64, arm64); `docker info`'s
# "Architecture" is the kernel's machine (x86_64, aarch64).
_ARCH_NAMES = {"amd64": AMD64, "x86_64": AMD64, "x86-64": AMD64, "arm64": ARM64, "aarch64": ARM64}

# ELF e_machine of each architecture's host code (the ELF specification's EM_* numbers).
ELF_MACHINE = {AMD64: 62, ARM64: 183}  # EM_X86_64, EM_AARCH64

# What ptxas must compile for, per architecture (the probes' `--ptxas-targets`). amd64: the
# probe's own default, its lowest target plus Blackwell sm_100a / sm_120a (RTX 50xx, B200).
# arm64: the GPUs of the arm64 hosts the images are for: GH200 (sm_90a), GB200 (sm_100a) and
# DGX Spark's GB10 (sm_121a), each arch-specific target with its own instructions (wgmma,
# tcgen05), which only a ptxas that knows that GPU compiles.
PTXAS_TARGETS = {AMD64: ("sm_100a", "sm_120a"), ARM64: ("sm_90a", "sm_100a", "sm_121a")}
# The GPUs (compute capability major, minor) of the arm64 hosts, which the arm64 image's native
# kernels must run on: GH200, GB200 (GB300's 10.3 runs sm_100 code), DGX Spark's GB10. (amd64's
# PyTorch check names its flags exactly: sm_100 and sm_120.)
ARM64_GPUS = ((9, 0), (10, 0), (12, 1))


# The CPU qemu-user emulates for an arm64 image on an amd64 engine: QEMU_CPU in the container's
# environment, which qemu reads at each exec (https://www.qemu.org/docs/master/user/main.html,
# "QEMU_CPU"). qemu's default model, `max`, has 512-bit SVE and SME, which Grace (GH200, GB200)
# has not: PyTorch 2.15 then takes its generic CPU kernels ("DEFAULT"), each step of the small smoke
# about 5 s. neoverse-n2 is Armv9.0 with 128-bit SVE2 and no SME, the vector width of Grace's
# Neoverse V2 cores ("4x 128b SVE2", https://docs.nvidia.com/grace-perf-tuning-guide/index.html);
# qemu 10.0 has no V2 model. PyTorch's CPU capability there is
# "SVE128", its kernels for Grace's vector width, and the small smoke took 96 s against 305 s (189 CPU-s
# against about 600), the same losses to the last digit (2026-12-07, this 2-core machine). It
# has the LSE atomics PyTorch's aarch64 wheels need (scripts/arm64-emulation.sh).
EMULATED_ARM64_CPU = "neoverse-n2"


def emulated_environment(environment):
    """A container's `environment` (dict, list of "K=V", or None) with QEMU_CPU set to
    EMULATED_ARM64_CPU, unless the caller set QEMU_CPU itself."""
    if environment is None:
        return {"QEMU_CPU": EMULATED_ARM64_CPU}
    if isinstance(environment, dict):
        return {"QEMU_CPU": EMULATED_ARM64_CPU, **environment}
    items = list(environment)
    if any(str(item).split("=", 1)[0] == "QEMU_CPU" for item in items):
        return items
    return [f"QEMU_CPU={EMULATED_ARM64_CPU}", *items]


def normalize_arch(name: str | None) -> str:
    """amd64 | arm64 from an image's or the engine's architecture name (anything else as is)."""
    return _ARCH_NAMES.get((name or "").lower(), (name or "").lower())


def local_ref(variant, arch: str) -> str | None:
    """The tag `kerasenv build` gives this variant's image for `arch` (kerasenv:<id>,
    kerasenv:<id>-arm64); None where the variant has no image for it."""
    platform = f"linux/{arch}"
    return variant.platform_ref(platform) if platform in variant.platforms else None


def target_id(variant, ref: str, arch: str) -> str:
    """The test id: the variant id for kerasenv:<id>; `<id>@arm64` for its arm64 image built
    here (kerasenv:<id>-arm64); `<id>@<ref>` for any other reference, `<id>@arm64@<ref>` when
    that one is an arm64 image."""
    at_arch = "" if arch == AMD64 else f"@{arch}"
    if ref == local_ref(variant, arch):
        return f"{variant.id}{at_arch}"
    return f"{variant.id}{at_arch}@{ref}"


def lock_names(variant, arch: str) -> tuple[str, ...]:
    """The locks an image of `arch` is installed from: requirements.lock (amd64) or
    requirements-arm64.lock (arm64: `tensorflow` where amd64 has `tensorflow-cpu`, which has no
    aarch64 wheel), and the CUDA lock both share."""
    main = locks.ARM64_LOCK if arch == ARM64 else locks.MAIN_LOCK
    return (main, locks.CUDA_LOCK) if variant.family == "cuda" else (main,)


def image_pins(variant, arch: str, images_dir: Path) -> dict[str, str]:
    """name -> version of every pin the image of `arch` was installed from (images_dir/<id>/);
    a main lock this checkout lacks is an AssertionError naming `kerasenv lock`."""
    pins: dict[str, str] = {}
    for name in lock_names(variant, arch):
        path = images_dir / variant.id / name
        if name == locks.CUDA_LOCK and not path.exists():
            continue  # a CUDA variant whose wheels are all in the main lock
        assert path.exists(), f"{path} is missing: run `kerasenv lock {variant.id}`"
        pins.update({k: p.version for k, p in locks.parse(path.read_text(encoding="utf-8")).items()})
    return pins


def tensorflow_distribution(variant, arch: str) -> str:
    """The distribution that is TensorFlow in the image: the framework's own on a TensorFlow
    image; beside JAX/PyTorch tensorflow-cpu on amd64, and on arm64 `tensorflow`, whose aarch64
    wheel is the CPU build (tensorflow/tensorflow#121157)."""
    if variant.backend == "tensorflow":
        return variant.framework_package
    return "tensorflow" if arch == ARM64 else "tensorflow-cpu"


_NOT_SUPPORTED = re.compile(r"^(\S+) (\S+) is not supported on this platform$")


def unsupported_platform(line: str) -> tuple[str, str] | None:
    """(name, version) of a `pip check` line 'NAME VERSION is not supported on this platform'."""
    match = _NOT_SUPPORTED.match(line.strip())
    return (match.group(1), match.group(2)) if match else None


def sbsa_only(wheel_file: str) -> bool:
    """Does a WHEEL file tag the wheel for sbsa only (`py3-none-manylinux2014_sbsa`)? NVIDIA's
    name for Arm servers, which pip does not know as aarch64: its `pip check` then says "not
    supported on this platform" on every arm64 machine (nvidia-cusparselt-cu13 0.8.1)."""
    tags = [line.split(":", 1)[1].strip() for line in wheel_file.splitlines() if line.startswith("Tag:")]
    return bool(tags) and all(tag.endswith("_sbsa") for tag in tags)


def size_budget_mb(variant, arch: str) -> int | None:
    """[variant.arm64] size_budget_mb for the arm64 image where set, else the variant's."""
    if arch == ARM64 and variant.arm64 is not None and variant.arm64.size_budget_mb:
        return variant.arm64.size_budget_mb
    return variant.size_budget_mb


def ptxas_probe_args(arch: str) -> list[str]:
    """The gpu_libraries probe's arguments: none on amd64 (its default targets), the arm64
    GPUs' targets on arm64."""
    return [] if arch == AMD64 else ["--ptxas-targets", ",".join(PTXAS_TARGETS[arch])]


def sass_runs_on(flag: str, gpu: tuple[int, int]) -> bool:
    """Does SASS built for `flag` (sm_90, sm_121a, ...) run on a GPU of compute capability
    `gpu`? Plain sm_XY (and family-specific sm_XYf) runs on the same major at minor >= Y
    (sm_120 on GB10's 12.1, sm_100 on GB300's 10.3); arch-specific sm_XYa only on exactly X.Y."""
    match = re.fullmatch(r"sm_(\d+)(\d)([af]?)", flag)
    if match is None:
        return False
    major, minor = int(match.group(1)), int(match.group(2))
    if match.group(3) == "a":
        return (major, minor) == gpu
    return major == gpu[0] and minor <= gpu[1]


def gpus_without_native_kernels(flags, gpus=ARM64_GPUS) -> list[str]:
    """The GPUs (compute capabilities) none of `flags` (a build's sm_XX list) runs on, as
    'sm_XY' names; [] when every one has native code."""
    return [f"sm_{major}{minor}" for major, minor in gpus
            if not any(sass_runs_on(flag, (major, minor)) for flag in flags)]

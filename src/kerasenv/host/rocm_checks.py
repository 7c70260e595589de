"""The doctor's AMD checks: the amdgpu driver, the device nodes, whether the UID our
containers run as can open them with the groups we add, the AMD Container Toolkit, and the
ROCm image's verdict. Each failure is one line naming the cause, and its fix.

Judging only: the facts (engine/amd_devices.AmdHost and the Docker facts in
doctor.HostFacts) are gathered by doctor.gather, and replayed from tests/fixtures/amd-hosts/.
"""

from __future__ import annotations

from pathlib import Path

from ..engine import amd_devices
from .checks import FAIL, INFO, PASS, WARN, Check
from .facts import HostFacts

# Docker takes `--gpus` for AMD GPUs from 29.3 (through CDI: moby daemon/amd_linux.go, PRs
# #49952 and #52048; AMD Instinct docs). Before, `--gpus` is NVIDIA's alone.
DOCKER_AMD_GPUS = (29, 3)
DRIVER_FIX = ("`sudo modprobe amdgpu`; if it is not installed, install the ROCm driver (amdgpu-dkms: "
              "`sudo amdgpu-install --usecase=dkms`) and reboot")
KFD_FIX = ("install the ROCm kernel driver (amdgpu-dkms: `sudo amdgpu-install --usecase=dkms`) or a kernel "
           "built with CONFIG_HSA_AMD, then reboot")
# systemd's default udev rules give /dev/kfd and the render nodes to the render group
# (50-udev-default.rules, quoted in netblue30/firejail#6380); a host without them leaves
# /dev/kfd root's alone, and no group we could add opens it.
UDEV_FIX = ("give the nodes to the render group as systemd's default udev rules do: `printf '%s\\n' "
            "'KERNEL==\"kfd\", GROUP=\"render\", MODE=\"0660\"' 'SUBSYSTEM==\"drm\", KERNEL==\"renderD*\", "
            "GROUP=\"render\", MODE=\"0660\"' | sudo tee /etc/udev/rules.d/70-kfd-render.rules && "
            "sudo udevadm control --reload && sudo udevadm trigger`")
CDI_FIX = "`sudo amd-ctk cdi generate --output=/etc/cdi/amd.json`"


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in (text or "").split("-")[0].split(".")[:2])
    except ValueError:
        return None


def docker_takes_amd_gpus(version: str | None) -> bool:
    parsed = _version(version)
    return bool(parsed) and parsed >= DOCKER_AMD_GPUS


def _gpu_list(amd: amd_devices.AmdHost) -> str:
    pci = {n.path: n.pci for n in amd.dri}
    return ", ".join(f"GPU {i} {Path(p).name}" + (f" ({pci[p]})" if pci.get(p) else "")
                     for i, p in enumerate(amd.gpus))


def host_checks(facts: HostFacts) -> list[Check]:
    amd = facts.amd
    if not amd.has_gpu and not amd.driver_loaded:
        return [Check(INFO, "rocm", "no AMD GPU (no amdgpu driver, no /dev/kfd)")]
    checks = [_driver(amd)]
    if checks[0].status == FAIL and not amd.kfd:
        return checks + [_toolkit(facts)]  # the nodes come with the driver: one cause, one line
    checks.append(_devices(amd))
    if checks[-1].status != FAIL:
        checks.append(_access(amd, facts.container_uid))
    return checks + [_toolkit(facts)]


def _driver(amd: amd_devices.AmdHost) -> Check:
    if amd.driver_loaded:
        count = len(amd.amd_pci_gpus)
        return Check(PASS, "amd-driver", "amdgpu kernel driver loaded" + (f", {count} AMD GPU(s) on PCI" if count else ""))
    where = ", ".join(amd.amd_pci_gpus) or "device nodes present"
    return Check(FAIL, "amd-driver", f"AMD GPU ({where}) but the amdgpu kernel module is not loaded", DRIVER_FIX)


def _devices(amd: amd_devices.AmdHost) -> Check:
    if amd.kfd is None:
        return Check(FAIL, "rocm-devices", "/dev/kfd missing: no ROCm compute interface (KFD) in this kernel", KFD_FIX)
    if not amd.gpus:
        return Check(FAIL, "rocm-devices", "/dev/kfd present but no AMD render node in /dev/dri", KFD_FIX)
    how = {"kfd-topology": "numbered as ROCm does (KFD topology)",
           "pci-vendor": "numbered by render minor (no KFD topology readable)"}.get(amd.order, "")
    return Check(PASS, "rocm-devices", f"/dev/kfd and {_gpu_list(amd)}; --gpus device=N {how}")


def _access(amd: amd_devices.AmdHost, uid: int) -> Check:
    """/dev/kfd and the GPUs' render nodes (what ROCm opens), for `uid` with the groups that
    own them, which kerasenv and compose's ROCm override add (and group 0, which every
    container of ours has)."""
    nodes = [n for n in [amd.kfd, *(amd.node(p) for p in amd.gpus)] if n is not None]
    if uid == 0:
        return Check(PASS, "rocm-access", "containers run as root here (uid 0): the device nodes open")
    gids = sorted({n.gid for n in nodes} - {0})
    added = ",".join(map(str, gids)) or "none"
    for node in nodes:
        if not amd_devices.can_open(node, uid, set(gids) | {0}):
            return Check(FAIL, "rocm-access",
                         f"{node.describe(amd.groups)} owner uid {node.uid}: uid {uid} cannot read and write it "
                         f"even with the groups kerasenv adds ({added})", UDEV_FIX)
    shown = "; ".join(n.describe(amd.groups) for n in nodes)
    hand = " ".join(f"--group-add {g}" for g in gids)
    return Check(PASS, "rocm-access",
                 f"uid {uid} opens {shown} through group(s) {added}, which kerasenv and `make up COMPOSE_GPU=rocm` "
                 "add" + (f"; with `docker run` by hand add `{hand}`" if hand else ""))


def _toolkit(facts: HostFacts) -> Check:
    found = list(facts.amd_tools) + [f"CDI spec {s}" for s in facts.amd_cdi_specs]
    have = f"AMD Container Toolkit: {', '.join(found)}" if found else "no AMD Container Toolkit (amd-ctk, " \
        "amd-container-runtime) and no amd.com/gpu CDI spec in /etc/cdi or /var/run/cdi"
    version = facts.docker_version
    if version is None:
        docker = "Docker's version unknown"
    elif docker_takes_amd_gpus(version):
        docker = (f"Docker {version} takes `--gpus` for AMD through CDI" if facts.amd_cdi_specs else
                  f"Docker {version} takes `--gpus` for AMD once a CDI spec exists ({CDI_FIX})")
    else:
        docker = f"Docker {version} takes `--gpus` for NVIDIA only (AMD from 29.3)"
    # Not required: kerasenv hands the device nodes over itself (AMD's "manual passthrough").
    return Check(INFO, "amd-toolkit", f"{have}; {docker}; kerasenv passes the device nodes itself, "
                                      "without the toolkit")


def usable(facts: HostFacts) -> bool:
    """Can a kerasenv ROCm container here use the AMD GPU (as far as the host shows)?"""
    return all(c.status != FAIL for c in host_checks(facts)) and facts.amd.kfd is not None and bool(facts.amd.gpus)


def image_note(v, facts: HostFacts) -> str | None:
    """None when the image is here (or Docker was not asked); else what to do about it."""
    if facts.local_images is None or v.image_ref in facts.local_images:
        return None
    return (f"{v.image_ref} is not here: this image is built FROM AMD's image ({v.base_image}): pull or build "
            f"it where Docker Hub is reachable (`make build VARIANT={v.id}`, or `kerasenv pull {v.id} "
            "--registry REGISTRY`)")


def variant_verdict(v, facts: HostFacts) -> Check:
    name = f"variant {v.id}"
    note = image_note(v, facts)
    if not facts.amd.has_gpu:
        return Check(INFO, name, "needs an AMD GPU (/dev/kfd, /dev/dri)" + (f"; {note}" if note else ""))
    failed = next((c for c in host_checks(facts) if c.status == FAIL), None)
    if failed is not None:
        return Check(FAIL, name, f"the AMD GPU cannot be used in containers: {failed.message}", failed.fix)
    if note:
        return Check(WARN, name, f"AMD GPU ready; {note}",
                     f"on a host that reaches Docker Hub: `make build VARIANT={v.id}`, then here "
                     f"`make verify-gpu VARIANT={v.id}`")
    return Check(PASS, name, "AMD GPU ready for a non-root container (device nodes, groups, driver)")

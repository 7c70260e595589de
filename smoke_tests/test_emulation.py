"""An arm64 image under emulation runs on the arm64 hosts' CPU shape, not qemu's default one.

On this amd64 machine qemu-user runs the arm64 images, and every container the suite starts of one
carries QEMU_CPU (platforms.EMULATED_ARM64_CPU, set in conftest.start). qemu reads it at each exec;
a qemu that ignored it would fall back to its `max` model (512-bit SVE, SME), whose PyTorch kernels
are not those of a Grace host and made the small smoke three times slower. This asks the kernel
what the emulated CPU is, from inside the container, with the interpreter alone (no framework
import): SVE's vector length and whether SME exists (prctl PR_SVE_GET_VL, PR_SME_GET_VL).
"""

from __future__ import annotations

import json

import pytest

from . import platforms
from .conftest import run_once

FAMILIES = {"cpu", "cuda"}
ARCHES = {platforms.ARM64}
# prctl(2) option numbers (linux/prctl.h): PR_SVE_GET_VL 51, PR_SME_GET_VL 64. The low 16 bits of
# the result are the vector length in bytes; -1 (EINVAL) where the CPU has no such extension.
VECTOR_LENGTHS = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
def vl(option):
    got = libc.prctl(option, 0, 0, 0, 0)
    return got & 0xFFFF if got >= 0 else None
print(json.dumps({"sve_bytes": vl(51), "sme_bytes": vl(64)}))
"""


@pytest.mark.arm64_ci
def test_an_emulated_arm64_image_runs_on_128_bit_sve2_without_sme_as_grace_does(docker, target):
    if not target.emulated:
        pytest.skip(f"{target.ref} runs natively on this engine: no qemu, the CPU is the host's")
    code, out, err = run_once(docker, target.ref, ["python", "-c", VECTOR_LENGTHS], network_mode="none")
    assert code == 0, err[-2000:]
    lengths = json.loads(out.strip().splitlines()[-1])
    assert lengths == {"sve_bytes": 16, "sme_bytes": None}, (
        f"qemu did not emulate {platforms.EMULATED_ARM64_CPU} (QEMU_CPU): {lengths}; qemu's default `max` "
        "has 64-byte SVE and SME")

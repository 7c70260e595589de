"""Every ELF file of the image's Python environment is built for the image's architecture:
x86-64 in an amd64 image, AArch64 in an arm64 one (issue 36).

An arm64 image is cross-built on amd64 (pip installs aarch64 wheels with --platform), so a wheel
resolved for the wrong machine would install without complaint and fail only on the arm64 host,
at `import`. Read from the files: each regular file's ELF header (e_machine) in /opt/venv (the CUDA
wheels under site-packages/nvidia included; smoke_tests/elf_scan.py). An emulated image (arm64
here) runs nothing: its venv is the engine's archive of a container that is created and never
started, each header read from the tar stream and the rest skipped. An image that runs natively
reads the headers in place, with its own Python (elf_scan.read_headers, about a second, where
streaming a CUDA venv of 5-8 GB took 16-34 s). Device code (NVIDIA cubins, EM_CUDA) is not host
code and is counted apart.
"""

from __future__ import annotations

import inspect
import json
import time

import pytest

from . import elf_scan, platforms
from .conftest import created, run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, its Python is not in /opt/venv
VENV = "/opt/venv"


@pytest.fixture(scope="module")
def scans(docker, target) -> dict:
    """The venv's and the interpreter's ELF machines, and what reading them took."""
    site = f"venv/lib/python{target.variant.python}/site-packages/"
    started = time.monotonic()
    if not target.emulated:
        script = (inspect.getsource(elf_scan.read_headers)
                  + f"import json; print(json.dumps(read_headers({VENV!r}, {VENV.rsplit('/', 1)[0] or '/'!r})))")
        # as root: the engine's archive reads every file, whoever owns it
        code, out, err = run_once(docker, target.ref, ["python", "-c", script], user="0:0", network_mode="none")
        assert code == 0, err[-3000:]
        venv = elf_scan.from_headers(json.loads(out), under=(site + "nvidia/",),
                                     seconds=time.monotonic() - started)
    with created(docker, target.ref) as container:
        if target.emulated:
            chunks, _ = container.get_archive(VENV)
            venv = elf_scan.scan(chunks, under=(site + "nvidia/",))
        # the interpreter the venv runs (/opt/venv/bin/python links to it): Debian's, from the base
        chunks, _ = container.get_archive(f"/usr/bin/python{target.variant.python}")
        interpreter = elf_scan.scan(chunks)
    return {"venv": venv, "interpreter": interpreter, "nvidia": site + "nvidia/",
            "seconds": round(time.monotonic() - started, 1)}


@pytest.mark.arm64_ci
def test_every_elf_file_in_the_venv_is_built_for_the_images_architecture(scans, target, capsys):
    venv, machine = scans["venv"], platforms.ELF_MACHINE[target.arch]
    gpu_code = venv.elf_files - sum(venv.host_machines().values())
    with capsys.disabled():
        print(f"\n[architecture] {target.id}: {venv.elf_files} ELF files in {VENV} "
              f"({venv.under[scans['nvidia']]} in site-packages/nvidia, {gpu_code} of them GPU code) "
              f"among {venv.files} files, "
              + (f"{venv.bytes / 1e9:.2f} GB of archive read" if target.emulated
                 else f"their first bytes read in place ({venv.bytes / 1e6:.1f} MB)")
              + f" in {venv.seconds} s "
              f"({scans['seconds']} s with the container)")
    assert venv.host_machines()[machine] > 0, f"no {elf_scan.name(machine)} ELF file in {VENV}: {dict(venv.machines)}"
    assert venv.not_built_for(machine) == {}, f"ELF files in a {target.arch} image built for another machine"
    assert venv.truncated == [], "files with the ELF magic but no ELF header"
    if target.variant.family == "cuda":  # the CUDA wheels were read too
        assert venv.under[scans["nvidia"]] > 0, f"no ELF file under {scans['nvidia']}"


@pytest.mark.arm64_ci
def test_the_interpreter_is_built_for_the_images_architecture(scans, target):
    interpreter, machine = scans["interpreter"], platforms.ELF_MACHINE[target.arch]
    assert dict(interpreter.machines) == {machine: 1}, {elf_scan.name(m): n for m, n in interpreter.machines.items()}

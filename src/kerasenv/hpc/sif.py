"""`kerasenv sif`: an Apptainer image (SIF) from a local kerasenv image: `docker save` to a
docker-archive, then `apptainer build OUT docker-archive:TAR` (Apptainer 1.x reads a
docker-archive itself; no registry, no Docker daemon for Apptainer). Which `apptainer`: the one
on PATH (a cluster's login node), else this repository's scripts/apptainer-sid-root.sh (Debian
sid's apptainer 1.4.5 needs glibc >= 2.38: on a bookworm host it lives in the sid root of
scripts/sid-root.sh, issue 44).

Measured here (2 cores, 2026-12-06): kerasenv:jax0.12-cpu (2.63 GB) -> 748 MB SIF in 205 s of
`apptainer build --disable-cache` (mksquashfs, gzip; 376 s with the cache) plus 22 s of `docker save`.
Of those 205 s, mksquashfs's gzip was 112 s (218 s of CPU on 2 cores); zstd level 3 squashed the same
2.6 GB root in 6 s (8 s of CPU) to 758 MB against gzip's 748 MB (`--compression zstd`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from ..errors import BuildFailed, UsageError

REPO = Path(__file__).resolve().parents[3]
SID_SHIM = REPO / "scripts" / "apptainer-sid-root.sh"
SID_ROOT = Path(os.environ.get("SID_ROOT", "/var/lib/kerasenv/sid-root"))
INSTALL_HINT = ("install Apptainer (https://apptainer.org/docs/admin/latest/installation.html; Debian sid/trixie-"
                "backports, Ubuntu's ppa:apptainer/ppa, EPEL's apptainer), or on this Debian host "
                "`sudo scripts/sid-root.sh` (sid's apptainer in a root)")
# What a build needs on the output's file system, as parts of the image's unpacked size: the
# docker-archive (1x), Apptainer's unpacked root in APPTAINER_TMPDIR (1x), and the SIF (0.3x
# measured, 0.45x with room).
SPACE_FACTOR = 2.45
# mksquashfs's compressor (`apptainer build --mksquashfs-args`). gzip is Apptainer's default and every
# runtime reads it: a kernel's squashfs (setuid installs), squashfuse, unsquashfs (`--unsquash`).
# zstd is 20x quicker to make at about the same size (measured above), and reads where the kernel's
# squashfs has CONFIG_SQUASHFS_ZSTD (Linux >= 4.14) or squashfuse / squashfs-tools link libzstd
# (Debian sid's do: ldd): CI's SIF, made once per run and run with --unsquash, is zstd.
COMPRESSIONS = {"gzip": [], "zstd": ["-comp", "zstd", "-Xcompression-level", "3"]}
# Harmless, but one line per file of the image: a rootless build cannot setxattr nor mknod.
NOISE = re.compile(r"warn rootless\{|ignoring \(usually\) harmless EPERM|creating empty file in place of device")


def apptainer_command(which: Callable[[str], str | None] = shutil.which, uid: int | None = None,
                      sid_root: Path = SID_ROOT) -> list[str]:
    """The command that runs Apptainer here, or a UsageError that names the fix."""
    found = which("apptainer")
    if found:
        return [found]
    uid = os.getuid() if uid is None else uid
    if (sid_root / "usr" / "bin" / "apptainer").exists() and SID_SHIM.exists():
        if uid != 0:
            raise UsageError(f"apptainer is in the sid root {sid_root}, which only root can enter: "
                             f"run this as root, or {INSTALL_HINT.split(', or on')[0]}")
        return [str(SID_SHIM)]
    raise UsageError(f"apptainer is not installed: {INSTALL_HINT}")


def needed_bytes(image_bytes: int) -> int:
    return int(image_bytes * SPACE_FACTOR)


def check_space(folder: Path, image_bytes: int, free: Callable[[Path], int] | None = None) -> None:
    have = (free or (lambda p: shutil.disk_usage(p).free))(folder)
    need = needed_bytes(image_bytes)
    if have < need:
        raise UsageError(f"no space: a SIF of a {image_bytes / 1e9:.1f} GB image needs about {need / 1e9:.1f} GB "
                         f"in {folder} (the docker-archive, the unpacked image, the SIF), {have / 1e9:.1f} GB free: "
                         f"free some, or --output on a bigger disk")


def mksquashfs_args(compression: str) -> list[str]:
    """`apptainer build` arguments for the compressor (none for gzip, Apptainer's own default)."""
    if compression not in COMPRESSIONS:
        raise UsageError(f"--compression {compression}: not one of {', '.join(COMPRESSIONS)} (gzip reads everywhere, "
                         "zstd builds 20x quicker)")
    extra = COMPRESSIONS[compression]
    return ["--mksquashfs-args", " ".join(extra)] if extra else []


def build_sif(client, ref: str, output: Path, say: Callable[[str], None] = print,
              command: list[str] | None = None, compression: str = "gzip") -> dict:
    """Build `output` from the local image `ref`; returns what it measured."""
    from ..engine import docker_client

    if not docker_client.has_image(client, ref):
        variant = ref.split(":", 1)[1] if ref.startswith("kerasenv:") else None
        fix = f"kerasenv build {variant} (make build VARIANT={variant})" if variant else f"docker pull {ref}"
        raise UsageError(f"{ref} is not a local image: {fix}")
    squash = mksquashfs_args(compression)
    command = command or apptainer_command()
    output = output.resolve()
    if not output.parent.is_dir():
        raise UsageError(f"--output {output}: no folder {output.parent}")
    image_bytes = int(client.api.inspect_image(ref).get("Size") or 0)
    check_space(output.parent, image_bytes)
    started = time.monotonic()
    # Beside the output: one file system, so the SIF is renamed into place, never half-written
    # there. World-readable (0755), written by Apptainer's uid: the sid root's shim runs it as a
    # non-root user.
    work = Path(tempfile.mkdtemp(prefix=".kerasenv-sif-", dir=output.parent))
    try:
        work.chmod(0o777)
        tar = work / "image.tar"
        say(f"docker save {ref} -> {tar}")
        try:
            with open(tar, "wb") as f:
                for chunk in client.images.get(ref).save(named=True):
                    f.write(chunk)
        except OSError as exc:
            if exc.errno == 28:
                raise UsageError(f"no space left in {output.parent} while saving {ref}: free some, or --output "
                                 "on a bigger disk") from None
            raise
        tar.chmod(0o644)
        saved = time.monotonic()
        sif = work / "image.sif"
        (work / "tmp").mkdir(mode=0o777)
        (work / "tmp").chmod(0o777)
        env = {**os.environ, "APPTAINER_TMPDIR": str(work / "tmp")}
        say(f"apptainer build {output.name} docker-archive:{tar.name} ({' '.join(command)})")
        # --disable-cache: the archive is local and used once; Apptainer's cache (~/.apptainer/cache)
        # kept its layers, 831 MB per image here, and grew with every build.
        proc = subprocess.Popen([*command, "build", "--force", "--disable-cache", *squash, str(sif), f"docker-archive:{tar}"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            if NOISE.search(line):
                continue
            tail = (tail + [line.rstrip()])[-20:]
            say(line.rstrip())
        if proc.wait() != 0:
            said = "\n".join(tail)
            if re.search(r"no space left on device", said, re.I):
                raise UsageError(f"no space left while building the SIF in {output.parent}: free some, or --output "
                                 "on a bigger disk")
            last = next((line for line in reversed(tail) if line.strip()), "no output")
            raise BuildFailed(f"apptainer build failed (exit {proc.returncode}): {last}")
        os.replace(sif, output)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done = time.monotonic()
    return {"image": ref, "sif": str(output), "image_bytes": image_bytes, "sif_bytes": output.stat().st_size, "compression": compression,
            "save_s": round(saved - started, 1), "build_s": round(done - saved, 1)}

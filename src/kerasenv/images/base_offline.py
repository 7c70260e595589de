"""Make the Debian base images locally when no registry is reachable.

debootstrap builds the same Debian suite from Debian's archive and `docker import`
turns it into a local image under the name the matrix gives it (debian:<suite>-slim), so
`docker build` finds it without pulling: one per suite the matrix builds on (bookworm,
trixie). Needs root (debootstrap) and Docker.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..engine.docker_client import PROJECT_LABEL
from ..errors import KerasenvError, UsageError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# What the official -slim images leave out (docs, man pages, locales): keeps later
# `apt-get install`s small too.
_DPKG_EXCLUDES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""


def default_tag(suite: str) -> str:
    return f"debian:{suite}-slim"


def make(client, *, suite: str, tag: str | None = None, mirror: str = DEFAULT_MIRROR,
         force: bool = False, say=print) -> str:
    from docker.errors import ImageNotFound

    tag = tag or default_tag(suite)
    if not force:
        try:
            client.images.get(tag)
            say(f"{tag} already exists locally; `--force` rebuilds it")
            return tag
        except ImageNotFound:
            pass
    if shutil.which("debootstrap") is None:
        raise UsageError("debootstrap is not installed: `sudo apt-get install debootstrap` and retry")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kerasenv-base-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp, "rootfs")
        say(f"debootstrap --variant=minbase {suite} from {mirror} (about a minute) ...")
        proc = subprocess.run(["debootstrap", "--variant=minbase", suite, str(rootfs), mirror],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["(no output)"]
            hint = " (debootstrap needs root)" if "root" in last[0].lower() else ""
            raise KerasenvError(f"debootstrap of {suite} from {mirror} failed{hint}: {last[0]}")
        _slim(rootfs, suite, mirror)
        archive = Path(tmp, "rootfs.tar")
        subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
                       check=True)
        repo, _, version = tag.rpartition(":")
        client.api.import_image_from_file(
            str(archive), repository=repo, tag=version,
            changes=['CMD ["bash"]', f'LABEL {PROJECT_LABEL}="kerasenv" '
                     f'io.kerasenv.base-offline="debootstrap --variant=minbase {suite} {mirror}"'])
    size = client.images.get(tag).attrs["Size"]
    say(f"imported {tag}: {size / 1e6:.0f} MB, {time.monotonic() - started:.0f} s")
    return tag


def _slim(rootfs: Path, suite: str, mirror: str) -> None:
    Path(rootfs, "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    Path(rootfs, "etc/dpkg/dpkg.cfg.d/kerasenv-slim").write_text(_DPKG_EXCLUDES)
    # Security and point-release updates, as in Debian's official images.
    security = mirror.replace("/debian", "/debian-security")
    Path(rootfs, "etc/apt/sources.list").write_text(
        f"deb {mirror} {suite} main\n"
        f"deb {mirror} {suite}-updates main\n"
        f"deb {security} {suite}-security main\n")
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*",
                    "usr/share/doc/*/*", "usr/share/man/*", "usr/share/info/*",
                    "usr/share/locale/*", "var/log/*.log", "tmp/*"):
        for path in rootfs.glob(pattern):
            if path.name in ("copyright", "locale.alias", "lock", "partial"):
                continue  # licences stay, as in Debian's slim images; apt's lock files too
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()

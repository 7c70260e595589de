"""Make the Debian base images locally when no registry is reachable.

debootstrap builds the same Debian suite from Debian's archive and `docker import`
turns it into a local image under the name the matrix gives it (debian:<suite>-slim), so
`docker build` finds it without pulling: one per suite the matrix builds on (bookworm,
trixie). Needs root (debootstrap) and Docker. With arch="arm64" (issue 36) it makes the
arm64 base the arm64 images are cross-built on, debian:<suite>-slim-arm64 (the local tag: Docker
20.10 keeps one image per tag), running debootstrap's second stage under qemu-user
(scripts/arm64-emulation.sh).
"""

from __future__ import annotations

import json
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


def default_tag(suite: str, arch: str = "amd64") -> str:
    return f"debian:{suite}-slim" + ("" if arch == "amd64" else f"-{arch}")


def make(client, *, suite: str, tag: str | None = None, mirror: str = DEFAULT_MIRROR,
         force: bool = False, say=print, arch: str = "amd64") -> str:
    from docker.errors import ImageNotFound

    tag = tag or default_tag(suite, arch)
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
        foreign = arch != "amd64"
        say(f"debootstrap --variant=minbase --arch={arch} {suite} from {mirror} "
            f"({'about 3 minutes, under qemu' if foreign else 'about a minute'}) ...")
        if foreign and not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
            raise UsageError("no qemu registered for arm64 programs: run `sudo bash scripts/arm64-emulation.sh` and retry")
        _debootstrap(["debootstrap", "--variant=minbase", f"--arch={arch}", suite, str(rootfs), mirror],
                     rootfs, f"{suite} from {mirror}", say)
        _slim(rootfs, suite, mirror)
        archive = Path(tmp, "rootfs.tar")
        subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
                       check=True)
        repo, _, version = tag.rpartition(":")
        client.api.import_image_from_file(
            str(archive), repository=repo, tag=version,
            changes=['CMD ["bash"]', f'LABEL {PROJECT_LABEL}="kerasenv" '
                     f'io.kerasenv.base-offline="debootstrap --variant=minbase --arch={arch} {suite} {mirror}"'])
        if foreign:
            _set_architecture(client, tag, arch, Path(tmp))
    from .sizes import unpacked_bytes

    size = unpacked_bytes(client.images.get(tag))  # attrs["Size"] is compressed on the containerd store
    say(f"imported {tag}: {size / 1e6:.0f} MB, {time.monotonic() - started:.0f} s")
    return tag


# What debootstrap prints when a download from the archive failed: worth another try. A cold CI
# run of 8beda00 (2026-12-06) lost its arm64 base, and with it the run, to one package the
# mirror did not deliver ("E: Couldn't download packages: libdebconfclient0").
TRANSIENT = ("Couldn't download", "Failed getting release file", "Failed getting release signature file",
             "Couldn't get", "Temporary failure resolving", "Connection timed out")
ATTEMPTS = 3


def _debootstrap(argv: list[str], rootfs: Path, what: str, say, attempts: int = ATTEMPTS, pause: float = 10.0) -> None:
    """debootstrap into `rootfs`, again from an empty folder after a failed download (up to
    `attempts` times); any other failure, or the last, is a one-line error."""
    for attempt in range(1, attempts + 1):
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode == 0:
            return
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["(no output)"]
        if attempt < attempts and any(t in last[0] for t in TRANSIENT):
            say(f"debootstrap of {what}: {last[0]}: trying again ({attempt + 1} of {attempts})")
            shutil.rmtree(rootfs, ignore_errors=True)
            time.sleep(pause)
            continue
        hint = " (debootstrap needs root)" if "root" in last[0].lower() else ""
        tries = f" ({attempt} tries)" if attempt > 1 else ""
        raise KerasenvError(f"debootstrap of {what} failed{hint}{tries}: {last[0]}")


def _set_architecture(client, tag: str, arch: str, tmp: Path) -> None:
    """`docker import` on Docker 20.10 records the engine's architecture whatever the files are, and
    `docker build --platform linux/arm64` then refuses the base: rewrite the image config's
    architecture (save, edit, load: about 2 s).

    Through `docker save`'s manifest.json, which both image stores write (Docker >= 25 saves an
    OCI layout around it). The edited config is stored under its new digest and the OCI index is
    dropped: the containerd store loads an index by content digest and would refuse a config
    edited in place (issue 43); without index.json both stores load manifest.json."""
    import hashlib

    folder = tmp / "image"
    folder.mkdir()
    saved = tmp / "image.tar"
    with saved.open("wb") as out:
        for chunk in client.images.get(tag).save(named=True):
            out.write(chunk)
    subprocess.run(["tar", "-C", str(folder), "-xf", str(saved)], check=True)
    manifest = json.loads((folder / "manifest.json").read_text())
    config_path = folder / manifest[0]["Config"]
    config = json.loads(config_path.read_text())
    config["architecture"] = arch
    if arch == "arm64":
        config["variant"] = "v8"
    data = json.dumps(config).encode()
    digest = hashlib.sha256(data).hexdigest()
    # blobs/sha256/<digest> in an OCI layout (Docker >= 25), <digest>.json before
    new_name = f"blobs/sha256/{digest}" if manifest[0]["Config"].startswith("blobs/") else f"{digest}.json"
    (folder / new_name).write_bytes(data)
    manifest[0]["Config"] = new_name
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for oci in ("index.json", "oci-layout"):
        (folder / oci).unlink(missing_ok=True)
    saved.unlink()
    subprocess.run(["tar", "-C", str(folder), "-cf", str(saved), "."], check=True)
    client.images.remove(tag)
    with saved.open("rb") as data_file:
        client.images.load(data_file.read())
    got = client.images.get(tag).attrs.get("Architecture")
    if got != arch:
        raise KerasenvError(f"{tag} is recorded as {got}, not {arch}, after rewriting its config")


def _slim(rootfs: Path, suite: str, mirror: str) -> None:
    Path(rootfs, "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    Path(rootfs, "etc/dpkg/dpkg.cfg.d/kerasenv-slim").write_text(_DPKG_EXCLUDES)
    # A build step's container gets the engine's /etc/hosts bind-mounted; where the file is missing
    # (debootstrap's minbase has none) BuildKit makes an empty one for the mount and deletes it
    # afterwards, which dates /etc in that step's layer with the build's time (issue 52).
    hosts = Path(rootfs, "etc/hosts")
    if not hosts.exists():
        hosts.write_text("127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n")
    # Security and point-release updates, as in Debian's official images.
    security = mirror.replace("/debian", "/debian-security")
    Path(rootfs, "etc/apt/sources.list").write_text(
        f"deb {mirror} {suite} main\n"
        f"deb {mirror} {suite}-updates main\n"
        f"deb {security} {suite}-security main\n")
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*",
                    "usr/share/doc/*/*", "usr/share/man/*", "usr/share/info/*",
                    "usr/share/locale/*", "var/log/*.log", "tmp/*",
                    # ldconfig's aux-cache (inode numbers and times): every later apt step would
                    # rewrite it in its own layer, and deleting it there leaves a whiteout dated by
                    # the build (issue 52); Debian's official images leave it out too.
                    "var/cache/ldconfig/aux-cache"):
        for path in rootfs.glob(pattern):
            if path.name in ("copyright", "locale.alias", "lock", "partial"):
                continue  # licences stay, as in Debian's slim images; apt's lock files too
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()

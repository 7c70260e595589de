"""The GPU-host check's site-packages: what `import keras` needs, for several CPython
versions in one pack, and the runner's choice of what to unpack from it.

Pack side (`kerasenv gpu-host-check --pack`, src/kerasenv/host/gpu_host_check.py): pip
resolves Keras's whole dependency closure from the packages' metadata, once per target
interpreter (cp311, cp312, cp313; manylinux x86_64), into wheels. `build` unpacks each
closure into its own tree (`cp3XY/`: a wheel is a zip of its site-packages layout) and
writes all trees into one tar.xz (ARCHIVE) in which a file that is identical in several
trees is stored once: the first copy is a regular member, the others hard links to it, so
`tar -xJf` gives the three complete trees. Beside it, INDEX (JSON): per tree, each
distribution's name, version, wheel, the import names it provides (read from the wheel
itself: top_level.txt, else the top-level entries of its RECORD), its glibc floor and its
files; and every hard link's target.

Run side (kerasenv_image.host_check, on the GPU machine): `refusal` says in one line why
this interpreter cannot use the pack; `choose` takes keras always and every other
distribution only when this Python cannot import it (a pack's numpy must not shadow the
numpy jax or torch was built with); `extract` writes just those files, in one pass over the
archive. Not `tarfile.extractall(members=...)`: it does copy the data of a hard link whose
target is not among the members, but reaches that data by seeking back in the xz stream,
which decompresses from the start again, once per such link (thousands here).

Standard library only, Python 3.9+ syntax: the runner imports this before it knows whether
the interpreter is one the pack serves.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import lzma
import os
import platform
import re
import shutil
import tarfile
import zipfile

SCHEMA = 1
ARCHIVE = "site-packages.tar.xz"
INDEX = "site-packages.json"
# xz preset 1, measured on the three closures of Keras 3.15.1 (288 MB unpacked, 92 MB of it
# duplicates): 36 MB in 8 s; preset 3 32 MB in 24 s; preset 6 29 MB in 66 s (2 cores).
PRESET = 1
MACHINES = ("x86_64", "AMD64")
# Wheel platform tags without a glibc version in their name (PEP 513, 571, 599).
LEGACY_GLIBC = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


class PackError(Exception):
    """The pack cannot serve this interpreter, or is damaged: one line, cause and fix."""


def tag_of(version: str) -> str:
    """'3.12' -> 'cp312'."""
    major, minor = version.split(".")[:2]
    return f"cp{major}{minor}"


# --- reading a wheel ---------------------------------------------------------------------

def _dist_info(names: list[str]) -> str:
    found = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
    if len(found) != 1:
        raise ValueError(f"a wheel has one .dist-info folder, this one has {found or 'none'}")
    return found[0]


def _metadata(text: str) -> dict:
    """The METADATA headers this needs (the email-header format of the core metadata)."""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the body (the long description) follows the first empty line
        key, _, value = line.partition(":")
        if key in ("Name", "Version", "Requires-Python"):
            fields[key] = value.strip()
    return fields


def import_names(top_level: str | None, record: str) -> list[str]:
    """What `import X` the distribution provides: top_level.txt when the wheel has one,
    else the top-level entries of its RECORD (a package folder, or a module file)."""
    if top_level is not None:
        return sorted({n.strip() for n in top_level.split() if n.strip().isidentifier()})
    names = set()
    for row in csv.reader(io.StringIO(record)):
        if not row or not row[0]:
            continue
        first = row[0].split("/")[0]
        if first.endswith((".dist-info", ".data")):
            continue
        if "/" in row[0]:
            if first.isidentifier():  # numpy.libs/ is no package
                names.add(first)
        elif first.endswith((".py", ".so", ".pyd")) and first.split(".")[0].isidentifier():
            names.add(first.split(".")[0])
    return sorted(names)


def glibc_floor(wheel_name: str) -> tuple[int, int] | None:
    """The oldest glibc the wheel runs on (the lowest of its manylinux tags); None for a
    wheel that has no manylinux tag (pure Python)."""
    platforms = wheel_name[:-len(".whl")].split("-")[-1].split(".")
    floors = []
    for tag in platforms:
        m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
        if m:
            floors.append((int(m.group(1)), int(m.group(2))))
        elif tag.split("_")[0] in LEGACY_GLIBC:
            floors.append(LEGACY_GLIBC[tag.split("_")[0]])
    return min(floors) if floors else None


def wheel_files(names: list[str], dist_info: str) -> list[tuple[str, str]]:
    """(zip member, path in site-packages) of every file the wheel installs there: its
    .data/purelib and .data/platlib go to the root; its scripts, headers and data do not."""
    data = dist_info[:-len(".dist-info")] + ".data/"
    out = []
    for name in names:
        if name.endswith("/"):
            continue
        if name.startswith(data):
            rest = name[len(data):]
            kind, _, path = rest.partition("/")
            if kind in ("purelib", "platlib") and path:
                out.append((name, path))
            continue
        out.append((name, name))
    return out


def read_wheel(path: str) -> dict:
    """The index entry of one wheel, read from the wheel itself."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        info = _dist_info(names)
        meta = _metadata(z.read(f"{info}/METADATA").decode("utf-8", "replace"))
        top = f"{info}/top_level.txt"
        top_level = z.read(top).decode("utf-8", "replace") if top in names else None
        record = z.read(f"{info}/RECORD").decode("utf-8", "replace")
    floor = glibc_floor(os.path.basename(path))
    return {"name": meta.get("Name") or os.path.basename(path).split("-")[0],
            "version": meta.get("Version"), "wheel": os.path.basename(path),
            "requires_python": meta.get("Requires-Python"), "imports": import_names(top_level, record),
            "glibc": f"{floor[0]}.{floor[1]}" if floor else None,
            "files": sorted(dest for _, dest in wheel_files(names, info))}


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --- building (the pack side) -------------------------------------------------------------

def _order(tag: str, path: str) -> tuple:
    """Members of one package and one file type together, and the same path of every tree
    side by side, so xz sees a file's near-twin (cp312's numpy .so beside cp313's) close by."""
    first = path.split("/")[0]
    return (re.split(r"[-.]", first)[0].lower(), os.path.splitext(path)[1], path, tag)


def _mode(info: zipfile.ZipInfo, path: str) -> int:
    mode = (info.external_attr >> 16) & 0o777 or 0o644
    if ".so" in os.path.basename(path):  # some wheels drop the x bit of their libraries
        mode |= 0o755
    return mode | 0o644


def build(closures: dict, dest: str, preset: int = PRESET) -> dict:
    """closures: {tag: {"python": "3.12", "wheels": [paths]}}. Writes dest/ARCHIVE and
    dest/INDEX; returns the index."""
    trees, zips, members = {}, {}, []
    try:
        for tag, closure in sorted(closures.items()):
            dists = []
            for wheel in sorted(closure["wheels"]):
                entry = read_wheel(wheel)
                dists.append(entry)
                z = zips[wheel] = zipfile.ZipFile(wheel)
                info = _dist_info(z.namelist())
                for name, path in wheel_files(z.namelist(), info):
                    members.append((_order(tag, path), tag, path, wheel, name))
            trees[tag] = {"python": closure["python"], "distributions": dists}
        links, first = {}, {}
        archive = os.path.join(dest, ARCHIVE)
        filters = [{"id": lzma.FILTER_LZMA2, "preset": preset}]
        with lzma.open(archive + ".part", "w", format=lzma.FORMAT_XZ, filters=filters) as xz, \
                tarfile.open(fileobj=xz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for _, tag, path, wheel, name in sorted(members):
                info = zips[wheel].getinfo(name)
                data = zips[wheel].read(info)
                member = tarfile.TarInfo(f"{tag}/{path}")
                member.mode, member.mtime = _mode(info, path), 0
                key = (hashlib.sha256(data).digest(), member.mode)
                if key in first:
                    member.type, member.linkname = tarfile.LNKTYPE, first[key]
                    links[member.name] = first[key]
                    tar.addfile(member)
                else:
                    first[key] = member.name
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))
        os.replace(archive + ".part", archive)
    finally:
        for z in zips.values():
            z.close()
    keras = next((d for t in trees.values() for d in t["distributions"] if normalize(d["name"]) == "keras"), None)
    index = {"schema": SCHEMA, "archive": ARCHIVE, "xz_preset": preset, "platform": "manylinux x86_64",
             "keras": keras and keras["version"], "requires_python": keras and keras["requires_python"],
             "trees": trees, "links": links}
    with open(os.path.join(dest, INDEX), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    return index


# --- choosing and extracting (the run side) -----------------------------------------------

def interpreter() -> dict:
    """What the pack must match: the implementation, its version, the machine and C library."""
    libc, libc_version = platform.libc_ver()
    return {"implementation": platform.python_implementation(), "version": platform.python_version(),
            "tag": tag_of(platform.python_version()), "system": platform.system(),
            "machine": platform.machine(), "glibc": libc_version if libc == "glibc" else None}


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def satisfies(version: str, specifier: str | None) -> bool:
    """Whether a Python version meets a Requires-Python such as '>=3.11' or '>=3.9,<4'
    (the comparison operators; a wildcard clause is not judged)."""
    have = _version_tuple(version)
    for clause in (specifier or "").split(","):
        m = re.match(r"\s*(>=|<=|==|!=|>|<|~=)\s*([\d.]+)\s*$", clause)
        if not m:
            continue
        op, want = m.group(1), _version_tuple(m.group(2))
        mine = have[:len(want)] if op in ("==", "!=") else have + (0,) * (len(want) - len(have))
        ok = {">=": mine >= want, "<=": mine <= want, ">": mine > want, "<": mine < want, "==": mine == want,
              "!=": mine != want, "~=": mine >= want and mine[:len(want) - 1] == want[:len(want) - 1]}[op]
        if not ok:
            return False
    return True


def held(index: dict) -> str:
    """'CPython 3.11, 3.12, 3.13 on x86_64 Linux'."""
    versions = sorted((t["python"] for t in index["trees"].values()), key=_version_tuple)
    return f"CPython {', '.join(versions)} on x86_64 Linux"


def refusal(index: dict, interp: dict) -> str | None:
    """Why this interpreter cannot use the pack, in one line naming the fix; None when it can."""
    keras, pythons = index.get("keras"), held(index)
    what = f"this pack holds Keras {keras} with its dependencies for {pythons}"
    versions = sorted((t["python"] for t in index["trees"].values()), key=_version_tuple)
    run_with = (f"run it with CPython {', '.join(versions)} instead (`python{versions[-1]} run.py ...`, or "
                f"PYTHON=python{versions[-1]} ./run.sh ...)")
    impl, version = interp["implementation"], interp["version"]
    if impl != "CPython":
        return f"{what}, and this is {impl} {version}: {run_with}"
    if not satisfies(version, index.get("requires_python")):
        return (f"Keras {keras} needs Python {index['requires_python']} (its Requires-Python) and this is "
                f"CPython {version}: {run_with}")
    if interp["system"] != "Linux" or interp["machine"] not in MACHINES:
        return (f"{what}, and this machine is {interp['system']} {interp['machine']}: kerasenv packs manylinux "
                f"x86_64 wheels only; there, `pip install keras=={keras}` instead")
    if interp["tag"] not in index["trees"]:
        minor = ".".join(version.split(".")[:2])
        return (f"{what}, not CPython {minor}: pack for it with `kerasenv gpu-host-check --pack DIR "
                f"--python-versions {minor}` (where Keras's dependencies have wheels for it), or {run_with}")
    return None


def _importable(name: str, find) -> bool:
    try:
        return find(name) is not None
    except (ImportError, ValueError):  # a broken or half-installed package: not importable
        return False


def _host_version(name: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:  # noqa: BLE001 - no metadata (a vendored copy, a bare folder): unknown
        return None


def choose(index: dict, tag: str, find=importlib.util.find_spec) -> list[dict]:
    """Every distribution of the tree, each with `source`: "pack" for keras (the pack's
    release, always) and for every distribution one of whose import names this Python
    cannot find; "host" for the others (with `host_version`)."""
    chosen = []
    for d in index["trees"][tag]["distributions"]:
        missing = [m for m in d["imports"] if not _importable(m, find)]
        from_pack = normalize(d["name"]) == "keras" or bool(missing)
        entry = {k: d[k] for k in ("name", "version", "imports", "glibc")}
        entry["source"] = "pack" if from_pack else "host"
        if not from_pack:
            entry["host_version"] = _host_version(d["name"])
        chosen.append(entry)
    return chosen


def glibc_refusal(chosen: list[dict], interp: dict) -> str | None:
    """One line when a binary distribution the pack must provide needs a newer glibc than
    this machine's (or glibc, where the C library is another)."""
    for d in chosen:
        if d["source"] != "pack" or not d.get("glibc"):
            continue
        need = _version_tuple(d["glibc"])
        have = interp.get("glibc")
        if have is None or _version_tuple(have) < need:
            this = f"glibc {have}" if have else "no glibc (another C library)"
            return (f"the pack's {d['name']} {d['version']} is a manylinux wheel for glibc >= {d['glibc']} and this "
                    f"machine has {this}: install {d['name']} into this Python there, then the pack uses it")
    return None


def extract(pack: str, index: dict, tag: str, names: list[str], site: str) -> int:
    """Write the files of the distributions `names` of tree `tag` into `site`, in one pass
    over the archive; the number of files written."""
    wanted = {}  # member holding the data -> site paths it goes to
    expected = 0
    by_name = {normalize(d["name"]): d for d in index["trees"][tag]["distributions"]}
    for name in names:
        for path in by_name[normalize(name)]["files"]:
            if path.startswith("/") or ".." in path.split("/"):
                raise PackError(f"the pack's index names an unsafe path {path!r}: re-pack it")
            member = f"{tag}/{path}"
            wanted.setdefault(index["links"].get(member, member), []).append(path)
            expected += 1
    written = 0
    with tarfile.open(os.path.join(pack, index.get("archive", ARCHIVE)), "r|xz") as tar:
        for member in tar:
            paths = wanted.pop(member.name, None)
            if not paths or not member.isfile():
                continue
            source = tar.extractfile(member)
            first = os.path.join(site, paths[0])
            os.makedirs(os.path.dirname(first), exist_ok=True)
            with open(first, "wb") as out:
                shutil.copyfileobj(source, out)
            os.chmod(first, member.mode)
            for path in paths[1:]:
                target = os.path.join(site, path)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(first, target)
                os.chmod(target, member.mode)
            written += len(paths)
            if not wanted:
                break
    if written != expected:
        missing = sorted(p for paths in wanted.values() for p in paths)
        raise PackError(f"the pack's archive lacks {expected - written} file(s) its index lists "
                        f"(e.g. {tag}/{missing[0] if missing else '?'}): re-pack it with "
                        "`kerasenv gpu-host-check --pack`")
    return written


def load_index(pack: str) -> dict:
    path = os.path.join(pack, INDEX)
    try:
        with open(path) as f:
            index = json.load(f)
    except (OSError, ValueError) as exc:
        raise PackError(f"{path} is missing or unreadable ({exc.__class__.__name__}): re-pack with "
                        "`kerasenv gpu-host-check --pack DIR`") from None
    if index.get("schema") != SCHEMA:
        raise PackError(f"{path} is schema {index.get('schema')}, this runner reads {SCHEMA}: re-pack with "
                        "`kerasenv gpu-host-check --pack DIR`")
    return index

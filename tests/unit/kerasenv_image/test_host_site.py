"""The GPU-host check's site-packages (kerasenv_image.host_site): import names read from the
wheel, the deduplicated archive of several interpreters' trees, the runner's choice of
distributions, its one-pass extraction of one tree, and the one-line refusals. The wheels are
small real zips in the layout pip downloads (METADATA, RECORD, top_level.txt where the
project writes one)."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tarfile
import zipfile

import pytest
from kerasenv_image import host_site

NUMPY_SO = {"cp311": b"\x7fELF numpy built for 3.11", "cp312": b"\x7fELF numpy built for 3.12"}


def make_wheel(directory, name, version, files: dict, *, tag="py3-none-any", top_level=None, requires_python=None):
    """A wheel as pip downloads it: `files` {path: bytes}, its dist-info with METADATA and
    RECORD (and top_level.txt when given)."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    meta += "\nA long description: with: colons\n"
    content = {**files, f"{info}/METADATA": meta.encode(), f"{info}/WHEEL": b"Wheel-Version: 1.0\n"}
    if top_level is not None:
        content[f"{info}/top_level.txt"] = top_level.encode()
    record = io.StringIO()
    writer = csv.writer(record)
    for path in content:
        writer.writerow([path, "sha256=x", "1"])
    writer.writerow([f"{info}/RECORD", "", ""])
    content[f"{info}/RECORD"] = record.getvalue().encode()
    path = os.path.join(directory, f"{dist}-{tag}.whl")
    with zipfile.ZipFile(path, "w") as z:
        for member, data in content.items():
            info_ = zipfile.ZipInfo(member)
            info_.external_attr = (0o755 if member.endswith(".so") else 0o644) << 16
            z.writestr(info_, data)
    return path


def closures(tmp_path) -> dict:
    """Two interpreters' closures: keras and a pure dependency shared byte for byte, numpy
    built per interpreter (its .py identical, its extension not), absl without top_level.txt."""
    out = {}
    for tag, python in (("cp311", "3.11"), ("cp312", "3.12")):
        d = tmp_path / "wheels" / tag
        d.mkdir(parents=True)
        wheels = [
            make_wheel(d, "keras", "3.15.1", {"keras/__init__.py": b"__version__ = '3.15.1'\n",
                                              "keras/src/__init__.py": b""},
                       top_level="keras\n", requires_python=">=3.11"),
            make_wheel(d, "absl-py", "2.5.1", {"absl/__init__.py": b"", "absl/logging/__init__.py": b"x = 1\n"}),
            make_wheel(d, "typing_extensions", "4.16.0", {"typing_extensions.py": b"TE = 1\n"}),
            make_wheel(d, "numpy", "2.4.6", {"numpy/__init__.py": b"NUMPY = 1\n", "numpy/_core/__init__.py": b"",
                                             f"numpy/_core/_multiarray_umath.cpython-{tag[2:]}-x86_64-linux-gnu.so":
                                                 NUMPY_SO[tag],
                                             "numpy.libs/libopenblas.so": b"the same library in both"},
                       tag=f"{tag}-{tag}-manylinux_2_27_x86_64.manylinux_2_28_x86_64"),
        ]
        out[tag] = {"python": python, "wheels": wheels}
    return out


@pytest.fixture
def built(tmp_path):
    dest = tmp_path / "pack"
    dest.mkdir()
    index = host_site.build(closures(tmp_path), str(dest))
    return dest, index


def test_import_names_come_from_top_level_txt_else_from_the_record():
    assert host_site.import_names("keras\n", "") == ["keras"]
    record = ("absl/__init__.py,sha256=x,1\nabsl/logging/__init__.py,,\nabsl_py-2.5.1.dist-info/RECORD,,\n"
              "numpy.libs/libopenblas.so,,\nnumpy/__init__.py,,\ntyping_extensions.py,,\n"
              "_cffi_backend.cpython-312-x86_64-linux-gnu.so,,\nsetuptools-distutils.pth,,\n")
    assert host_site.import_names(None, record) == ["_cffi_backend", "absl", "numpy", "typing_extensions"]


def test_a_wheel_entry_is_read_from_the_wheel_itself(tmp_path):
    whl = make_wheel(str(tmp_path), "absl-py", "2.5.1", {"absl/__init__.py": b""}, requires_python=">=3.8")
    entry = host_site.read_wheel(whl)
    assert (entry["name"], entry["version"], entry["imports"], entry["glibc"]) == ("absl-py", "2.5.1", ["absl"], None)
    assert entry["requires_python"] == ">=3.8"
    assert "absl/__init__.py" in entry["files"] and "absl_py-2.5.1.dist-info/RECORD" in entry["files"]


def test_glibc_floor_is_the_lowest_manylinux_tag_of_the_wheel():
    assert host_site.glibc_floor("numpy-2.5.5-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl") == (2, 27)
    assert host_site.glibc_floor("grpcio-1.85.3-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl") == (2, 17)
    assert host_site.glibc_floor("keras-3.15.1-py3-none-any.whl") is None


def test_data_purelib_goes_to_the_root_and_scripts_do_not():
    names = ["x-1.data/purelib/x/__init__.py", "x-1.data/scripts/x-cli", "x/core.py", "x/", "x-1.dist-info/RECORD"]
    assert host_site.wheel_files(names, "x-1.dist-info") == [
        ("x-1.data/purelib/x/__init__.py", "x/__init__.py"), ("x/core.py", "x/core.py"),
        ("x-1.dist-info/RECORD", "x-1.dist-info/RECORD")]


def test_identical_files_are_stored_once_and_tar_gives_every_tree(built, tmp_path):
    dest, index = built
    with tarfile.open(dest / host_site.ARCHIVE, "r:xz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        tar.extractall(tmp_path / "all")  # what `tar -xJf` gives: the complete trees
    # keras is byte-identical in both trees: one copy, the other a hard link to it
    assert members["cp311/keras/__init__.py"].isfile() and members["cp312/keras/__init__.py"].islnk()
    assert members["cp312/keras/__init__.py"].linkname == "cp311/keras/__init__.py"
    assert index["links"]["cp312/numpy.libs/libopenblas.so"] == "cp311/numpy.libs/libopenblas.so"
    so312 = "cp312/numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so"
    assert members[so312].isfile() and so312 not in index["links"]  # built per interpreter: its own copy
    assert members[so312].mode & 0o111
    for tag in ("cp311", "cp312"):
        for d in index["trees"][tag]["distributions"]:
            for f in d["files"]:
                assert (tmp_path / "all" / tag / f).is_file(), f"{tag}/{f}"
    assert (tmp_path / "all" / "cp312" / "typing_extensions.py").read_bytes() == b"TE = 1\n"


def test_the_index_says_what_each_tree_holds(built):
    _, index = built
    assert index["keras"] == "3.15.1" and index["requires_python"] == ">=3.11"
    tree = index["trees"]["cp312"]
    assert tree["python"] == "3.12"
    by_name = {d["name"]: d for d in tree["distributions"]}
    assert by_name["absl-py"]["imports"] == ["absl"]  # no top_level.txt: read from RECORD
    assert by_name["typing_extensions"]["imports"] == ["typing_extensions"]
    assert by_name["numpy"]["imports"] == ["numpy"] and by_name["numpy"]["glibc"] == "2.27"
    assert json.loads((built[0] / host_site.INDEX).read_text()) == index


def test_keras_always_and_a_dependency_only_when_this_python_cannot_import_it(built):
    _, index = built
    present = {"numpy"}  # as in a JAX install: numpy yes, absl and typing_extensions no
    chosen = host_site.choose(index, "cp312", find=lambda m: object() if m in present else None)
    assert {d["name"]: d["source"] for d in chosen} == {
        "keras": "pack", "absl-py": "pack", "typing_extensions": "pack", "numpy": "host"}
    with_keras = host_site.choose(index, "cp312", find=lambda m: object())
    assert {d["name"] for d in with_keras if d["source"] == "pack"} == {"keras"}  # the matrix's, always

    def broken(name):
        if name == "absl":
            raise ImportError("a half-installed absl")
        return object()

    assert {d["name"] for d in host_site.choose(index, "cp312", find=broken) if d["source"] == "pack"} == {
        "keras", "absl-py"}


def test_one_tree_is_extracted_alone_with_the_data_of_files_stored_in_another(built, tmp_path):
    dest, index = built
    site = tmp_path / "site"
    site.mkdir()
    written = host_site.extract(str(dest), index, "cp312", ["keras", "numpy"], str(site))
    keras_files = next(d for d in index["trees"]["cp312"]["distributions"] if d["name"] == "keras")["files"]
    assert written == len(keras_files) + len(
        next(d for d in index["trees"]["cp312"]["distributions"] if d["name"] == "numpy")["files"])
    # stored in cp311's tree (hard links in cp312's): the data is there all the same
    assert (site / "keras" / "__init__.py").read_text() == "__version__ = '3.15.1'\n"
    assert (site / "numpy.libs" / "libopenblas.so").read_bytes() == b"the same library in both"
    so = site / "numpy" / "_core" / "_multiarray_umath.cpython-312-x86_64-linux-gnu.so"
    assert so.read_bytes() == NUMPY_SO["cp312"] and so.stat().st_mode & 0o111
    assert not (site / "absl").exists() and not (site / "typing_extensions.py").exists()
    assert not list(site.rglob("*cpython-311*"))


def test_an_archive_that_lacks_a_file_of_its_index_is_refused_in_one_line(built, tmp_path):
    dest, index = built
    numpy = next(d for d in index["trees"]["cp312"]["distributions"] if d["name"] == "numpy")
    numpy["files"].append("numpy/missing.py")
    with pytest.raises(host_site.PackError, match=r"lacks 1 file\(s\) .*cp312/numpy/missing.py.*re-pack"):
        host_site.extract(str(dest), index, "cp312", ["numpy"], str(tmp_path / "s"))
    numpy["files"].append("../escape.py")
    with pytest.raises(host_site.PackError, match="unsafe path"):
        host_site.extract(str(dest), index, "cp312", ["numpy"], str(tmp_path / "s"))


def interp(version="3.12.4", impl="CPython", machine="x86_64", system="Linux", glibc="2.35"):
    return {"implementation": impl, "version": version, "tag": host_site.tag_of(version), "system": system,
            "machine": machine, "glibc": glibc}


INDEX = {"keras": "3.15.1", "requires_python": ">=3.11",
         "trees": {"cp311": {"python": "3.11"}, "cp312": {"python": "3.12"}, "cp313": {"python": "3.13"}}}


def test_interpreters_the_pack_serves_and_the_one_line_refusals():
    assert host_site.refusal(INDEX, interp("3.11.7")) is None
    assert host_site.refusal(INDEX, interp("3.13.0")) is None
    old = host_site.refusal(INDEX, interp("3.10.13"))
    assert old.startswith("Keras 3.15.1 needs Python >=3.11 (its Requires-Python) and this is CPython 3.10.13: "
                          "run it with CPython 3.11, 3.12, 3.13 instead")
    new = host_site.refusal(INDEX, interp("3.14.0"))
    assert "for CPython 3.11, 3.12, 3.13 on x86_64 Linux, not CPython 3.14" in new
    assert "`kerasenv gpu-host-check --pack DIR --python-versions 3.14`" in new
    pypy = host_site.refusal(INDEX, interp("3.11.9", impl="PyPy"))
    assert "this is PyPy 3.11.9: run it with CPython 3.11, 3.12, 3.13 instead" in pypy
    arm = host_site.refusal(INDEX, interp(machine="aarch64"))
    assert "this machine is Linux aarch64: kerasenv packs manylinux x86_64 wheels only" in arm
    assert "pip install keras==3.15.1" in arm
    for line in (old, new, pypy, arm):
        assert "\n" not in line


def test_a_binary_dependency_needs_its_glibc():
    chosen = [{"name": "numpy", "version": "2.5.5", "glibc": "2.27", "source": "pack"},
              {"name": "h5py", "version": "3.16.0", "glibc": "2.28", "source": "host"}]
    assert host_site.glibc_refusal(chosen, interp(glibc="2.27")) is None
    assert host_site.glibc_refusal(chosen, interp(glibc="2.31")) is None
    line = host_site.glibc_refusal(chosen, interp(glibc="2.17"))
    assert line.startswith("the pack's numpy 2.5.5 is a manylinux wheel for glibc >= 2.27 and this machine has "
                           "glibc 2.17: install numpy into this Python there")
    assert "no glibc" in host_site.glibc_refusal(chosen, interp(glibc=None))


@pytest.mark.parametrize("version, spec, ok", [
    ("3.11.0", ">=3.11", True), ("3.10.13", ">=3.11", False), ("3.13.1", ">=3.9,<4", True),
    ("4.0", ">=3.9,<4", False), ("3.12", "!=3.12.*,>=3.8", True), ("3.8.1", "~=3.8", True), ("3.12", None, True)])
def test_requires_python(version, spec, ok):
    assert host_site.satisfies(version, spec) is ok


def test_this_interpreter_is_described_as_the_pack_needs():
    facts = host_site.interpreter()
    assert facts["tag"] == f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert facts["implementation"] == "CPython" and facts["system"] == "Linux"


def test_a_missing_or_foreign_index_is_one_line(tmp_path):
    with pytest.raises(host_site.PackError, match="missing or unreadable.*re-pack"):
        host_site.load_index(str(tmp_path))
    (tmp_path / host_site.INDEX).write_text('{"schema": 99}')
    with pytest.raises(host_site.PackError, match="schema 99, this runner reads 1"):
        host_site.load_index(str(tmp_path))

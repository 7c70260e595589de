"""`kerasenv gpu-host-check`'s host side: pip's closure resolution per interpreter (pip's
calls faked; the real pip: tests/integration/test_gpu_host_check.py), the pack's layout and
size limit, the options that do not go together, the fixture import."""

from __future__ import annotations

import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from kerasenv.errors import KerasenvError, UsageError
from kerasenv.host import gpu_host_check
from kerasenv_image import host_site

from ...kerasenv_image.test_host_site import make_wheel


def fake_resolve(seen=None):
    """Stands in for pip: the closure it would download, as wheels, per target version."""

    def resolve(dest: Path, keras: str, version: str) -> list[Path]:
        if seen is not None:
            seen.append(version)
        dest.mkdir(parents=True)
        tag = host_site.tag_of(version)
        extension = f"optree/_C.cpython-{tag[2:]}-x86_64-linux-gnu.so"
        return [Path(make_wheel(str(dest), "keras", keras, {"keras/__init__.py": b""}, top_level="keras\n",
                                requires_python=">=3.11")),
                Path(make_wheel(str(dest), "optree", "0.20.0", {"optree/__init__.py": b"", extension: tag.encode()},
                                tag=f"{tag}-{tag}-manylinux_2_27_x86_64.manylinux_2_28_x86_64")),
                Path(make_wheel(str(dest), "typing_extensions", "4.16.0", {"typing_extensions.py": b"x = 1\n"}))]

    return resolve


def test_the_pack_has_the_runner_the_package_and_every_interpreters_tree(tmp_path):
    seen = []
    packed = gpu_host_check.pack(tmp_path / "p", "3.15.1", resolve=fake_resolve(seen))
    p = tmp_path / "p"
    assert seen == ["3.11", "3.12", "3.13"]  # the default: every Python Keras 3.15 runs on
    assert sorted(packed["index"]["trees"]) == ["cp311", "cp312", "cp313"]
    with tarfile.open(p / host_site.ARCHIVE, "r:xz") as tar:
        names = tar.getnames()
    assert "cp313/optree/_C.cpython-313-x86_64-linux-gnu.so" in names and "cp311/typing_extensions.py" in names
    assert (p / "kerasenv_image" / "host_check.py").is_file() and (p / "kerasenv_image" / "host_site.py").is_file()
    assert (p / "kerasenv_image" / "probes" / "gpu_libraries.py").is_file()
    assert (p / "kerasenv_image" / "bench" / "__main__.py").is_file()
    assert not list(p.rglob("__pycache__")) and not (p / "wheels").exists()
    assert (p / "run.py").stat().st_mode & 0o111 and "host_check.main" in (p / "run.py").read_text()
    readme = (p / "README.txt").read_text()
    assert "Keras 3.15.1" in readme and "CPython 3.11, 3.12, 3.13" in readme and not (p / "site").exists()
    assert 0 < packed["size"] < gpu_host_check.LIMIT
    line = gpu_host_check.describe(p, packed, "3.15.1")
    assert re.search(r"^packed .*p \(\d+\.\d MiB, Keras 3\.15\.1 and its 2 dependencies, in \d+ s\) for "
                     r"cp311 \(numpy None\), cp312 \(numpy None\), cp313 \(numpy None\); carry it", line), line


def test_a_repack_replaces_the_old_layout_and_can_be_for_fewer_pythons(tmp_path):
    p = tmp_path / "p"
    (p / "wheels").mkdir(parents=True)  # the layout before the closure: hand-picked wheels
    (p / "site" / "cp312" / "keras").mkdir(parents=True)  # what an earlier runner left in the pack
    packed = gpu_host_check.pack(p, "3.15.1", versions=("3.12",), resolve=fake_resolve())
    assert list(packed["index"]["trees"]) == ["cp312"]
    assert not (p / "wheels").exists() and not (p / "site").exists()


def test_a_pack_over_64_mib_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_host_check, "LIMIT", 1000)
    with pytest.raises(KerasenvError, match="over the 0 MiB a lent GPU machine carries: pack fewer interpreters"):
        gpu_host_check.pack(tmp_path / "p", "3.15.1", resolve=fake_resolve())


def test_pip_resolves_kerass_whole_closure_for_each_target_interpreter():
    calls = []

    def runner(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    gpu_host_check.resolve_closure(Path("/d/3.12"), "3.15.1", "3.12", python="py", runner=runner)
    (cmd,) = calls
    assert cmd[:4] == ["py", "-m", "pip", "download"] and cmd[-1] == "keras==3.15.1"
    assert "--no-deps" not in cmd  # the closure comes from the packages' metadata, not a list of ours
    assert "--only-binary=:all:" in cmd and cmd[cmd.index("-d") + 1] == "/d/3.12"
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and cmd[cmd.index("--implementation") + 1] == "cp"
    platforms = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"]
    assert platforms == ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                         "manylinux2014_x86_64"]


def test_pips_refusal_is_one_line_naming_the_interpreter():
    def runner(cmd, **kwargs):  # pip 26's words for keras 3.15.1 and Python 3.10
        return subprocess.CompletedProcess(
            cmd, 1, "", "WARNING: Location 'file:///x' is ignored\n"
                        "ERROR: Package 'keras' requires a different Python: 3.10.0 not in '>=3.11'\n")

    with pytest.raises(KerasenvError) as info:
        gpu_host_check.resolve_closure(Path("/d"), "3.15.1", "3.10", runner=runner)
    assert info.value.message == ("pip could not resolve keras==3.15.1 for CPython 3.10 on manylinux x86_64: "
                                  "Package 'keras' requires a different Python: 3.10.0 not in '>=3.11'")


def test_python_versions_are_cpython_minor_versions():
    assert gpu_host_check.parse_python_versions("3.12, 3.11,3.12") == ("3.12", "3.11")
    for bad in ("", "3", "3.12.1", "pypy3.10", "cp312"):
        with pytest.raises(UsageError, match="use CPython minor versions"):
            gpu_host_check.parse_python_versions(bad)


def parse(*argv):
    from kerasenv import cli

    return cli._parser().parse_args(["gpu-host-check", *argv])


@pytest.mark.parametrize("argv, message", [
    ((), "say what to do"),
    (("--from", "p"), "--from DIR runs an existing pack: add --out DIR"),
    (("--from", "p", "--pack", "q", "--out", "o"), "give one of them"),
    (("--from", "p", "--out", "o", "--python-versions", "3.12"), "--from packs nothing"),
    (("--import-fixtures", "r", "n", "--out", "o"), "give it alone"),
])
def test_options_that_do_not_go_together_are_refused_in_one_line(argv, message):
    with pytest.raises(UsageError, match=message):
        gpu_host_check.check_options(parse(*argv))


def test_the_cli_has_the_command_and_its_options(tmp_path):
    args = parse("--out", str(tmp_path), "--no-require-gpu")
    assert args.require_gpu is False and args.out == str(tmp_path) and args.python_versions is None
    args = parse("--pack", "p", "--python-versions", "3.12", "--", "--no-bench", "--bench-time-box", "0.5")
    assert args.python_versions == "3.12" and args.extra == ["--no-bench", "--bench-time-box", "0.5"]
    gpu_host_check.check_options(args)


def test_import_fixtures_copies_successful_captures_and_unmarks_the_folder(tmp_path):
    report, fixtures = tmp_path / "report", tmp_path / "fixtures"
    report.mkdir()
    fixtures.mkdir()
    (fixtures / "SIMULATED").write_text("# comment\nh100-550\nh200-550\n")
    (report / "nvidia-smi.txt").write_text("| NVIDIA-SMI 580.95.05 |\n")
    (report / "list.txt").write_text("GPU 0: NVIDIA H200 (UUID: GPU-x)\n")
    (report / "query-gpu.csv").write_text("")  # failed: empty, with its .err
    (report / "query-gpu.csv.err").write_text("error")
    copied = gpu_host_check.import_fixtures(report, "h200-550", fixtures)
    assert sorted(p.name for p in copied) == ["list.txt", "nvidia-smi.txt"]
    assert (fixtures / "h200-550" / "list.txt").read_text().startswith("GPU 0: NVIDIA H200")
    assert (fixtures / "SIMULATED").read_text() == "# comment\nh100-550\n"
    with pytest.raises(KerasenvError, match="no successful nvidia-smi capture"):
        gpu_host_check.import_fixtures(tmp_path / "empty", "x", fixtures)

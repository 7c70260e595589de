"""kerasenv sif's one-line errors (hpc/sif.py) without Docker or Apptainer; the real build:
tests/integration/test_apptainer.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerasenv.errors import UsageError
from kerasenv.hpc import sif


def test_the_apptainer_on_path_comes_first(tmp_path):
    assert sif.apptainer_command(which=lambda name: "/usr/bin/apptainer", sid_root=tmp_path) == ["/usr/bin/apptainer"]


def test_no_apptainer_names_the_fix(tmp_path):
    with pytest.raises(UsageError) as err:
        sif.apptainer_command(which=lambda name: None, uid=0, sid_root=tmp_path / "none")
    assert str(err.value).startswith("apptainer is not installed: install Apptainer (https://apptainer.org/")
    assert "sudo scripts/sid-root.sh" in str(err.value) and "\n" not in str(err.value)


def test_the_sid_roots_apptainer_through_the_shim_for_root_only(tmp_path):
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "apptainer").write_text("")
    assert sif.apptainer_command(which=lambda name: None, uid=0, sid_root=tmp_path) == [str(sif.SID_SHIM)]
    with pytest.raises(UsageError, match=r"only root can enter: run this as root, or install Apptainer"):
        sif.apptainer_command(which=lambda name: None, uid=1000, sid_root=tmp_path)


def test_too_little_space_says_how_much_and_where(tmp_path):
    sif.check_space(tmp_path, 2_600_000_000, free=lambda p: 7_000_000_000)
    with pytest.raises(UsageError) as err:
        sif.check_space(tmp_path, 2_600_000_000, free=lambda p: 3_000_000_000)
    assert str(err.value) == (f"no space: a SIF of a 2.6 GB image needs about 6.4 GB in {tmp_path} (the docker-archive, "
                              "the unpacked image, the SIF), 3.0 GB free: free some, or --output on a bigger disk")


class NoImages:
    class api:  # noqa: N801 - docker-py's shape
        @staticmethod
        def images(name=None):
            return []


def test_an_image_not_built_names_the_build(tmp_path):
    with pytest.raises(UsageError, match=r"^kerasenv:jax0.12-cpu is not a local image: kerasenv build jax0.12-cpu "
                                         r"\(make build VARIANT=jax0.12-cpu\)$"):
        sif.build_sif(NoImages(), "kerasenv:jax0.12-cpu", tmp_path / "x.sif", command=["apptainer"])
    with pytest.raises(UsageError, match=r"^ghcr.io/x/y:1 is not a local image: docker pull ghcr.io/x/y:1$"):
        sif.build_sif(NoImages(), "ghcr.io/x/y:1", tmp_path / "x.sif", command=["apptainer"])


def test_the_rootless_build_noise_is_left_out():
    assert sif.NOISE.search('2026/12/06 02:43:49  warn rootless{dev/null} creating empty file in place of device 1:3')
    assert not sif.NOISE.search("FATAL:   While performing build: failed to read /etc/hosts")


def test_the_shim_exists_and_is_executable():
    assert sif.SID_SHIM.is_file() and sif.SID_SHIM.stat().st_mode & 0o111
    assert Path(sif.REPO / "scripts" / "sid-root.sh").is_file()


def test_the_compressor_is_passed_to_mksquashfs_and_gzip_is_apptainers_own_default():
    assert sif.mksquashfs_args("gzip") == []
    assert sif.mksquashfs_args("zstd") == ["--mksquashfs-args", "-comp zstd -Xcompression-level 3"]
    with pytest.raises(UsageError, match=r"^--compression xz: not one of gzip, zstd "):
        sif.mksquashfs_args("xz")

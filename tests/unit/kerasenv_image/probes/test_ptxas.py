"""ptxas probe: the PTX it writes per target and which ptxas XLA would use (compiling runs
in the images: smoke_tests/test_backend_gpu_libraries.py)."""

from __future__ import annotations

import os
import stat

from kerasenv_image.probes import ptxas


def test_blackwell_targets_get_the_lowest_ptx_isa_that_allows_them():
    assert ptxas.isa_for("sm_100a") == "8.6" and ptxas.isa_for("sm_120a") == "8.7"
    assert ptxas.isa_for("sm_50") == "7.8" and ptxas.isa_for("sm_90") == "7.8"
    k = ptxas.kernel("sm_120a")
    assert k.startswith(".version 8.7\n.target sm_120a\n") and ".entry kerasenv_probe" in k


def test_the_lowest_target_follows_the_ptxas_release():
    assert ptxas.release("Cuda compilation tools, release 12.9, V12.9.86") == (12, 9)
    assert ptxas.lowest_target("Cuda compilation tools, release 12.9, V12.9.86") == "sm_50"
    assert ptxas.lowest_target("Cuda compilation tools, release 13.2, V13.2.51") == "sm_75"


def _exe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_xla_uses_the_cuda_data_dir_then_the_nvcc_wheel_then_path(tmp_path):
    data_dir = _exe(tmp_path / "cuda" / "bin" / "ptxas")
    wheel = _exe(tmp_path / "site" / "nvidia" / "cuda_nvcc" / "bin" / "ptxas")
    env = {"XLA_FLAGS": f"--xla_gpu_cuda_data_dir={tmp_path / 'cuda'} --xla_dump_to=/tmp", "PATH": ""}
    assert ptxas.xla_ptxas(env, str(tmp_path / "site")) == data_dir
    assert ptxas.xla_ptxas({"PATH": ""}, str(tmp_path / "site")) == wheel
    on_path = _exe(tmp_path / "bin" / "ptxas")
    assert ptxas.xla_ptxas({"PATH": str(tmp_path / "bin")}, None) == on_path
    assert ptxas.xla_ptxas({"PATH": ""}, None) is None


def test_a_fake_ptxas_that_rejects_a_target_is_a_failure_in_its_words(tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "Cuda compilation tools, release 12.6, V12.6.85"; '
                    'exit 0; fi\ncase "$1" in -arch=sm_120a) echo "ptxas fatal   : Value \'sm_120a\' is not defined '
                    'for option \'gpu-name\'" >&2; exit 255;; esac\nwhile [ "$1" != -o ]; do shift; done; echo x > "$2"\n')
    fake.chmod(0o755)
    result = ptxas.check(str(fake))
    assert list(result["targets"]) == ["sm_50", "sm_100a", "sm_120a"]
    assert result["targets"]["sm_100a"]["ok"] and not result["targets"]["sm_120a"]["ok"] and not result["ok"]
    failed = ptxas.failures("ptxas", result)
    assert failed == ["ptxas (Cuda compilation tools, release 12.6, V12.6.85) cannot compile for sm_120a: "
                      "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'"]
    assert ptxas.failures("ptxas", ptxas.check(None)) == ["ptxas: no ptxas found"]
    assert os.listdir(tmp_path) == ["ptxas"]

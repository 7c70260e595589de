"""The pure parts of TensorFlow's GPU-library probe (kerasenv_image.probes.gpu_libraries; the
probe itself runs in the images: smoke_tests/test_tf_gpu_libraries.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from kerasenv_image.probes import gpu_libraries as probe


def test_ok_status_is_the_inlined_rep_of_either_abseil_generation():
    assert probe.status_is_ok(1) and probe.status_is_ok(0)
    # an error with a message is a heap pointer (seen: 845263408 in the unfixed TF 2.21 image)
    assert not probe.status_is_ok(845263408)


def test_cuda_12_cudnn_9_expects_engine_libraries_nvrtc_both_names_and_nvjitlink():
    groups = probe.expected_libraries("12", "9", ["libcupti.so.12", "libnvrtc.so.12"])
    assert "libcudnn_engines_runtime_compiled.so.9" in groups["cudnn"]
    assert groups["nvrtc"] == ["libnvrtc.so", "libnvrtc.so.12"]
    assert groups["nvjitlink"] == ["libnvJitLink.so.12"]
    assert groups["nccl"] == ["libnccl.so.2"] and groups["cupti"] == ["libcupti.so.12"]


def test_cuda_11_uses_the_wheels_versioned_sonames_and_has_no_nvjitlink():
    files = ["libcupti.so.11.8", "libnvrtc.so.11.2", "libnvrtc-builtins.so.11.8"]
    groups = probe.expected_libraries("11", "8", files)
    assert groups["cudnn"][:2] == ["libcudnn_ops_infer.so.8", "libcudnn_ops_train.so.8"]
    assert groups["nvrtc"] == ["libnvrtc.so", "libnvrtc.so.11.2"]
    assert groups["cupti"] == ["libcupti.so.11.8"]
    assert "nvjitlink" not in groups


def test_a_missing_nvrtc_wheel_still_expects_nvrtc_so_the_gap_shows():
    assert probe.expected_libraries("11", "8", [])["nvrtc"] == ["libnvrtc.so"]


def test_summary_names_what_tensorflow_could_not_load_in_its_own_words():
    result = {"symbol": probe.SYMBOLS[0], "try_dlopen_ok": False,
              "log": ["I0000 dso_loader.cc:144] Could not load dynamic library 'libcusolver.so.11'; dlerror: x"],
              "later": {"nvrtc": {"libnvrtc.so": {"ok": False, "error": "libnvrtc.so: cannot open shared object file"}},
                        "nccl": {"libnccl.so.2": {"ok": True, "path": "/x/libnccl.so.2"}}}}
    assert probe.summarize(result) == ["TensorFlow cannot dlopen libcusolver.so.11",
                                       "nvrtc: libnvrtc.so (libnvrtc.so: cannot open shared object file)"]


def test_summary_when_the_symbol_is_missing():
    result = {"symbol": None, "try_dlopen_ok": False, "log": [], "later": {}}
    assert probe.summarize(result) == ["TryDlopenCUDALibraries() not found in libtensorflow_framework.so.2"]


def test_the_probe_imports_nothing_of_kerasenv_and_tensorflow_only_when_it_runs():
    tree = ast.parse(Path(probe.__file__).read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(m == "kerasenv" or m.startswith("kerasenv.") for m in modules)
    top_level = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    assert "tensorflow" not in top_level  # imported inside check(), after stderr is captured


def test_inventory_comes_from_the_same_interpreter_after_the_check_and_the_result_stays_last(monkeypatch, capsys):
    from kerasenv_image.probes import inventory

    order = []
    monkeypatch.setattr(probe, "run", lambda backend, argv: order.append(("check", backend)) or {"backend": backend})
    monkeypatch.setattr(inventory, "collect", lambda: order.append(("inventory",)) or {"backend": "jax", "keras": "3"})
    assert probe.main(["--backend", "jax", "--inventory"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert order == [("check", "jax"), ("inventory",)]  # the check read /proc/self/maps first
    assert [json.loads(line) for line in lines] == [{"inventory": {"backend": "jax", "keras": "3"}}, {"backend": "jax"}]
    assert probe.main(["--backend", "jax"]) == 0 and len(capsys.readouterr().out.splitlines()) == 1

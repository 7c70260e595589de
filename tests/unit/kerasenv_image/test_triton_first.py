"""images/common/kerasenv_triton_first.py: Triton's LLVM before TensorFlow's in the PyTorch images
(the image's .pth runs it at every start; the crash it prevents is in its docstring)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from kerasenv.matrix.schema import REPO_ROOT

MODULE = REPO_ROOT / "images" / "common" / "kerasenv_triton_first.py"


@pytest.fixture
def triton_first(monkeypatch):
    """The module loaded fresh, with sys.meta_path restored afterwards."""
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    spec = importlib.util.spec_from_file_location("kerasenv_triton_first_under_test", MODULE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not p.endswith("site-packages")])
    spec.loader.exec_module(module)  # installs nothing: no Triton on this path
    return module


def hooks():
    return [f for f in sys.meta_path if type(f).__name__ == "_TritonFirst"]


def test_without_triton_nothing_is_installed(triton_first):
    assert hooks() == []


def test_with_triton_the_first_tensorflow_import_loads_its_library_once(triton_first, tmp_path, monkeypatch):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "triton" / "_C").mkdir(parents=True)
    (site / "triton" / "_C" / "libtriton.so").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    loaded = []
    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", lambda path: loaded.append(path))
    triton_first.install()
    triton_first.install()  # a second start-up hook (a nested venv, a re-import) adds none
    (hook,) = hooks()
    assert sys.meta_path[0] is hook
    assert hook.find_spec("numpy") is None and loaded == []  # other imports: untouched
    assert hook.find_spec("tensorflow") is None  # it finds nothing: the real import goes on
    assert loaded == [str(site / "triton" / "_C" / "libtriton.so")]
    assert hooks() == []  # gone after the first tensorflow import


def test_a_library_that_does_not_load_leaves_tensorflow_s_import_as_it_was(triton_first, tmp_path, monkeypatch):
    import ctypes

    def fail(path):
        raise OSError("cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", fail)
    hook = triton_first._TritonFirst(str(tmp_path / "libtriton.so"))
    sys.meta_path.insert(0, hook)
    assert hook.find_spec("tensorflow") is None and hook not in sys.meta_path

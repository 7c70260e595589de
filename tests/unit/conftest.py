"""Fixtures shared by the unit tests (no Docker, no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kerasenv.matrix import schema as matrix_mod

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def real_matrix() -> matrix_mod.Matrix:
    """The committed images/matrix.toml."""
    return matrix_mod.load(REPO / "images" / "matrix.toml")


@pytest.fixture(scope="session")
def matrix_text() -> str:
    return (REPO / "images" / "matrix.toml").read_text(encoding="utf-8")


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A scratch root holding a copy of images/ (and README.md when there is one)."""
    shutil.copytree(REPO / "images", tmp_path / "images")
    if (REPO / "README.md").exists():
        shutil.copy2(REPO / "README.md", tmp_path / "README.md")
    return tmp_path


@pytest.fixture
def write_matrix(tmp_path: Path, matrix_text: str):
    """Write the committed matrix with `old` replaced by `new` (once) and return its path.

    Fails the test when `old` is not in the file, so a case never silently tests
    the unmodified matrix.
    """
    def write(old: str = "", new: str = "", *, text: str | None = None) -> Path:
        if text is None:
            assert old in matrix_text, f"{old!r} is not in images/matrix.toml"
            text = matrix_text.replace(old, new, 1)
        path = tmp_path / "matrix.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True)
def classic_builder_by_default(monkeypatch):
    """The unit tests' fake Docker clients answer the classic builder's API calls: no unit test
    runs a docker CLI unless it asks for BuildKit itself (test_buildkit.py, with a recorded CLI)."""
    monkeypatch.setenv("KERASENV_BUILDER", "classic")

"""docs/reference/reliability.md names, for each fault case, the test that proves it: those tests
must exist (a renamed or deleted test would leave the document claiming coverage)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "reference" / "reliability.md"
REFERENCE = re.compile(r"`((?:tests|smoke_tests)/[\w/]+\.py)(?:::(\w+))?`")
REFERENCES = sorted(set(REFERENCE.findall(DOC.read_text())))


def test_the_document_names_tests():
    assert len(REFERENCES) >= 25


@pytest.mark.parametrize("path, name", REFERENCES, ids=[f"{p}::{n}" if n else p for p, n in REFERENCES])
def test_each_named_test_exists(path, name):
    source = REPO / path
    assert source.exists(), f"docs/reference/reliability.md names {path}, which does not exist"
    if name:
        assert re.search(rf"^def {name}\(", source.read_text(), re.M), \
            f"docs/reference/reliability.md names {path}::{name}, which does not exist"


def test_every_reliability_test_is_in_the_document():
    text = DOC.read_text()
    source = (REPO / "tests" / "integration" / "test_reliability.py").read_text()
    missing = [n for n in re.findall(r"^def (test_\w+)\(", source, re.M)
               if n not in text and n != "test_no_container_of_these_tests_is_left"]
    assert missing == []

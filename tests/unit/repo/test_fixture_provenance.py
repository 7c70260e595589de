"""Fixtures say what they are: every nvidia-smi fixture folder is named in SOURCES.md, and
the ones taken from an nvidia-smi simulator are exactly those listed in SIMULATED."""

from __future__ import annotations

import re

from ..conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "nvidia-smi"


def simulated() -> set[str]:
    lines = (FIXTURES / "SIMULATED").read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def source_rows() -> dict[str, str]:
    rows = {}
    for line in (FIXTURES / "SOURCES.md").read_text().splitlines():
        match = re.match(r"\| `([^/`]+)/[^`]+` \|", line)
        if match:
            rows[match.group(1)] = rows.get(match.group(1), "") + line
    return rows


def test_every_fixture_folder_has_a_source():
    folders = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert folders - set(source_rows()) == set()


def test_the_simulated_list_is_exactly_the_folders_whose_source_is_a_simulator():
    rows = source_rows()
    from_simulator = {name for name, row in rows.items() if "simulator" in row.lower()}
    assert simulated() == from_simulator
    assert simulated() <= {p.name for p in FIXTURES.iterdir() if p.is_dir()}


def test_the_docs_do_not_call_simulated_outputs_real():
    for doc in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = doc.read_text()
        for name in simulated():
            for match in re.finditer(re.escape(name), text):
                context = text[max(0, match.start() - 400):match.end() + 400]
                assert "simulator" in context, f"{doc.relative_to(REPO)} mentions {name} without saying it is simulated"

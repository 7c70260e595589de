"""`kerasenv debian-updates`: the archive state of every Debian suite the matrix builds on."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from kerasenv.errors import UsageError
from kerasenv.security import commands, debian

STATES = {"trixie": "trixie@2026-11-21T09:15:44Z trixie-updates@2026-12-03T02:15:27Z "
                    "trixie-security@2026-12-02T23:13:44Z",
          "bookworm": "bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-03T02:15:27Z "
                      "bookworm-security@2026-12-02T23:13:43Z"}


@pytest.fixture
def read(monkeypatch):
    """The suites whose archive state was read (from STATES, not the network)."""
    suites: list[str] = []

    def archive_state(suite):
        suites.append(suite)
        return debian.parse_label(STATES[suite])

    monkeypatch.setattr(debian, "archive_state", archive_state)
    return suites


def on_bases(matrix, *bases):
    """The matrix's default CPU variant once per base (copies under other ids)."""
    v = matrix.get(matrix.default_cpu)
    return dataclasses.replace(matrix, variants=tuple(
        dataclasses.replace(v, id=f"v{i}", base_image=base) for i, base in enumerate(bases)))


def test_it_prints_every_suites_three_entries_in_the_label_form(real_matrix, read, capsys):
    matrix = on_bases(real_matrix, "debian:trixie-slim", "debian:bookworm-slim", "debian:trixie-slim",
                      real_matrix.get(real_matrix.default_rocm).base_image)
    assert commands._cmd_debian_updates(argparse.Namespace(suite=None), matrix) == 0
    out = capsys.readouterr().out
    assert out == f"{STATES['trixie']} {STATES['bookworm']}\n" and read == ["trixie", "bookworm"]
    state = debian.parse_label(out)
    assert state is not None and len(state.dates) == 6 and state.suites == ("trixie", "bookworm")


def test_suite_prints_that_suites_only(real_matrix, read, capsys):
    matrix = on_bases(real_matrix, "debian:trixie-slim", "debian:bookworm-slim")
    assert commands._cmd_debian_updates(argparse.Namespace(suite="bookworm"), matrix) == 0
    assert capsys.readouterr().out == f"{STATES['bookworm']}\n" and read == ["bookworm"]


def test_a_matrix_without_a_debian_base_says_to_name_the_suite(real_matrix, read):
    matrix = on_bases(real_matrix, "rocm/tensorflow:rocm6.3.3-py3.12-tf2.17-dev")
    with pytest.raises(UsageError, match="names no Debian base image .*: pass --suite SUITE$"):
        commands._cmd_debian_updates(argparse.Namespace(suite=None), matrix)
    assert read == []

"""`kerasenv base-offline`: every Debian base the matrix names, or one suite's."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from kerasenv.engine import docker_client
from kerasenv.errors import UsageError
from kerasenv.images import base_offline, commands

MIRROR = "http://deb.debian.org/debian"


@pytest.fixture
def made(monkeypatch):
    """(suite, tag) of each base base_offline.make was asked for (nothing is made)."""
    calls: list[tuple[str, str]] = []

    def make(client, *, suite, tag=None, mirror=MIRROR, force=False, say=print, arch="amd64"):
        calls.append((suite, tag))
        return tag

    monkeypatch.setattr(base_offline, "make", make)
    monkeypatch.setattr(docker_client, "client", lambda: object())
    return calls


def on_bases(matrix, *bases):
    v = matrix.get(matrix.default_cpu)
    return dataclasses.replace(matrix, variants=tuple(
        dataclasses.replace(v, id=f"v{i}", base_image=base) for i, base in enumerate(bases)))


def args(suite=None, tag=None):
    return argparse.Namespace(suite=suite, tag=tag, mirror=MIRROR, force=False)


TWO = ("debian:trixie-slim", "rocm/tensorflow:rocm6.3.3-py3.12-tf2.17-dev", "debian:bookworm-slim",
       "debian:trixie-slim")


def test_without_suite_it_makes_each_debian_base_of_the_matrix_under_its_name(real_matrix, made):
    assert commands._cmd_base_offline(args(), on_bases(real_matrix, *TWO)) == 0
    assert made == [("trixie", "debian:trixie-slim"), ("bookworm", "debian:bookworm-slim")]


def test_suite_makes_that_one_under_the_matrixs_name_for_it_else_the_slim_name(real_matrix, made):
    matrix = on_bases(real_matrix, "debian:trixie", "debian:bookworm-slim")
    commands._cmd_base_offline(args("trixie"), matrix)
    commands._cmd_base_offline(args("forky"), matrix)
    commands._cmd_base_offline(args("bookworm", tag="registry.example/debian:bookworm-slim"), matrix)
    assert made == [("trixie", "debian:trixie"), ("forky", "debian:forky-slim"),
                    ("bookworm", "registry.example/debian:bookworm-slim")]


def test_a_tag_without_a_suite_is_refused_when_the_matrix_has_two_bases(real_matrix, made):
    with pytest.raises(UsageError, match=r"--tag names one image, and the matrix builds on 2 Debian bases "
                                         r"\(debian:trixie-slim, debian:bookworm-slim\): pass --suite SUITE with it"):
        commands._cmd_base_offline(args(tag="mine:base"), on_bases(real_matrix, *TWO))
    commands._cmd_base_offline(args(tag="mine:base"), on_bases(real_matrix, "debian:trixie-slim"))
    assert made == [("trixie", "mine:base")]

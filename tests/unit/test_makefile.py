"""The Makefile: self-documenting, and in step with the tests it drives."""

from __future__ import annotations

import ast
import re
import subprocess

from .conftest import REPO

MAKEFILE = (REPO / "Makefile").read_text()


def test_every_target_is_documented_in_make_help():
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", MAKEFILE, re.M))
    documented = set(re.findall(r"^([a-z][a-z0-9-]*):.*## ", MAKEFILE, re.M))
    assert targets - documented == set()
    help_text = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
    assert all(f"make {t} " in help_text for t in documented)


def test_plain_make_prints_help():
    out = subprocess.run(["make", "--no-print-directory"], cwd=REPO, capture_output=True, text=True).stdout
    assert out.startswith("kerasenv:") and "make run-gpu" in out


def test_acceptance_variants_are_the_ones_the_integration_tests_build():
    conftest = (REPO / "tests" / "integration" / "conftest.py").read_text()
    built = ast.literal_eval(re.search(r"^BUILT_IN_TESTS = (.+)$", conftest, re.M).group(1))
    variants = re.search(r"^ACCEPTANCE_VARIANTS := (.+)$", MAKEFILE, re.M).group(1).split()
    assert tuple(variants) == built

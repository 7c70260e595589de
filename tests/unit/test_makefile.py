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


def test_make_test_builds_and_accepts_every_debian_based_variant():
    """No untested row: `make test` (CI's command) builds `--all` and runs the acceptance
    suite with --all-variants, which is every variant of the matrix but ROCm."""
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    assert re.search(r"kerasenv build --all\b", recipe)
    assert re.search(r"pytest smoke_tests --all-variants\b", recipe)


def test_all_variants_means_every_variant_except_rocm(real_matrix):
    assert [v.id for v in real_matrix.debian_based] == [v.id for v in real_matrix.variants if v.family != "rocm"]
    assert {v.family for v in real_matrix.debian_based} == {"cpu", "cuda"}


def test_the_integration_tests_build_only_variants_ci_accepts(real_matrix):
    conftest = (REPO / "tests" / "integration" / "conftest.py").read_text()
    built = ast.literal_eval(re.search(r"^BUILT_IN_TESTS = (.+)$", conftest, re.M).group(1))
    assert set(built) <= {v.id for v in real_matrix.debian_based}
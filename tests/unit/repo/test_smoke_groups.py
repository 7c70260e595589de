"""smoke_tests/groups.py: which variants' images a once_per_group check cannot tell apart, and
which one runs it under `--once-per-group` (make test), against the committed matrix; and the
markers' claims: every marked check is kerasenv's own code, and the JupyterLab server is pinned
alike within each group."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from types import SimpleNamespace

from ..conftest import REPO

_spec = importlib.util.spec_from_file_location("kerasenv_smoke_groups", REPO / "smoke_tests" / "groups.py")
groups = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = groups
_spec.loader.exec_module(groups)

# The JupyterLab server and its kernel: what the lab's once_per_group checks exercise.
SERVER_PINS = ("jupyterlab", "jupyter-server", "jupyterlab-server", "jupyter-client", "jupyter-core", "ipykernel",
               "tornado", "notebook-shim", "jupyter-server-terminals", "pyzmq", "traitlets")


def variant(vid, backend="tensorflow", keras="3.15.1", python="3.13"):
    return SimpleNamespace(id=vid, backend=backend, keras=keras, python=python)


def test_the_first_variant_of_a_group_in_the_matrix_order_represents_it():
    order = [variant("tf-new"), variant("jax", backend="jax"), variant("tf-older", keras="3.6.0"),
             variant("tf-k2", keras="2.15.0", python="3.11"), variant("tf-k2-older", keras="2.14.0", python="3.11"),
             variant("tf-py311", keras="3.6.0", python="3.11")]
    assert [groups.representative(v, order) for v in order] == ["tf-new", "jax", "tf-new", "tf-k2", "tf-k2", "tf-py311"]
    assert groups.representative(variant("alone", backend="torch"), order) == "alone"  # no one else in its group
    assert groups.describe(groups.group_key(order[3])) == "tensorflow, Keras 2, Python 3.11"


def test_each_group_of_the_matrix_has_one_representative_that_make_test_tests(real_matrix):
    variants = real_matrix.debian_based
    reps = {groups.representative(v, variants) for v in variants}
    by_key = {}
    for v in variants:
        by_key.setdefault(groups.group_key(v), []).append(v.id)
    assert sorted(reps) == sorted(ids[0] for ids in by_key.values())
    # Every other variant's checks are deselected only where a representative's run checks them.
    assert set(reps) < {v.id for v in variants}, "no group has two variants: --once-per-group saves nothing"


def pins(lock_text: str) -> dict[str, str]:
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", lock_text, re.M)}


def test_the_jupyterlab_server_is_pinned_alike_within_each_group(real_matrix):
    variants = real_matrix.debian_based
    for v in variants:
        rep = real_matrix.get(groups.representative(v, variants))
        mine = pins((REPO / "images" / v.id / "requirements-jupyter.lock").read_text())
        theirs = pins((REPO / "images" / rep.id / "requirements-jupyter.lock").read_text())
        assert "jupyterlab" in mine and "jupyter-server" in mine, v.id
        differ = {n: (mine.get(n), theirs.get(n)) for n in SERVER_PINS if mine.get(n) != theirs.get(n)}
        assert differ == {}, f"{v.id}'s lab server differs from {rep.id}'s, which checks it: {differ}"


def marked(path):
    """The test functions of a module marked once_per_group."""
    tree = ast.parse(path.read_text())
    return {f.name for f in tree.body if isinstance(f, ast.FunctionDef)
            and any("once_per_group" in ast.unparse(d) for d in f.decorator_list)}


def test_the_marked_checks_are_the_monitor_lab_server_and_shm_warning_ones():
    """What the marker's claim covers (smoke_tests/groups.py): a check marked elsewhere needs its
    own case for why variants of a group cannot differ on it."""
    found = {p.name: marked(p) for p in sorted((REPO / "smoke_tests").glob("test_*.py")) if marked(p)}
    assert set(found) == {"test_gpu_monitor.py", "test_jupyter_lab.py", "test_behaviour.py"}
    assert found["test_behaviour.py"] == {"test_docker_default_shm_gets_a_warning"}  # not the stop: PID 1's handler
    assert "test_the_smoke_report_on_the_cpu_says_nothing_was_sampled" not in found["test_gpu_monitor.py"]
    for per_image in ("test_jupyter_image_labels", "test_no_token_is_baked_into_the_image",
                      "test_the_jupyter_layer_adds_exactly_the_jupyter_lock", "test_the_variant_pins_still_hold_under_jupyterlab"):
        assert per_image not in found["test_jupyter_lab.py"]


def test_make_test_runs_the_acceptance_suite_once_per_group():
    makefile = (REPO / "Makefile").read_text()
    (line,) = [x for x in makefile.splitlines() if "call timed,acceptance $(1))" in x]
    assert "--once-per-group" in line

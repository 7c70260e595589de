"""The integration tests that signal a process they started must not depend on how the
suite was started (issue 15): a shell starts background jobs with SIGINT ignored, children
inherit that, and a Python child then never raises KeyboardInterrupt. The tests give every
process they start the default dispositions (tests/integration/conftest.py)."""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys

from ..conftest import REPO

INTEGRATION = REPO / "tests" / "integration"

# Run in a parent that ignores SIGINT, as `pytest ... &` from a shell does: the same child
# started plainly (the control: it inherits SIG_IGN) and with the conftest's preexec_fn.
PARENT = r"""
import importlib.util, json, signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
spec = importlib.util.spec_from_file_location("integration_conftest", sys.argv[1])
conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conftest)
CHILD = ("import signal, sys, time\n"
         "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)\n"
         "time.sleep(60)\n")
out = {}
for name, preexec in (("plain", None), ("reset", conftest.default_signal_dispositions)):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True,
                             preexec_fn=preexec)
    handles_sigint = child.stdout.readline().strip() == "True"
    child.send_signal(signal.SIGINT)
    try:
        code = child.wait(timeout=10 if preexec else 0.5)  # the plain one ignores it: no long wait
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        code = "still running after SIGINT"
    out[name] = [handles_sigint, code]
print(json.dumps(out))
"""


def test_a_child_given_the_default_dispositions_obeys_sigint_under_a_parent_that_ignores_it():
    proc = subprocess.run([sys.executable, "-c", PARENT, str(INTEGRATION / "conftest.py")], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["plain"] == [False, "still running after SIGINT"]  # the premise: SIGINT arrives ignored
    # KeyboardInterrupt, then Python ends itself with SIGINT (returncode -2)
    assert got["reset"] == [True, -signal.SIGINT]


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            yield node, func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _preexec(call: ast.Call) -> str | None:
    value = next((k.value for k in call.keywords if k.arg == "preexec_fn"), None)
    return value.id if isinstance(value, ast.Name) else None


def test_every_process_an_integration_test_signals_gets_the_default_dispositions():
    """Each top-level function or class of the integration tests that sends a signal
    (send_signal, os.kill, os.killpg) starts its process with start_cli or with
    preexec_fn=default_signal_dispositions, and start_cli itself passes it. (SIGKILL via
    kill() and SIGTERM via terminate() are left out: a shell ignores neither.)"""
    conftest = ast.parse((INTEGRATION / "conftest.py").read_text())
    start_cli = next(n for n in conftest.body if isinstance(n, ast.FunctionDef) and n.name == "start_cli")
    assert [_preexec(c) for c, name in _calls(start_cli) if name == "Popen"] == ["default_signal_dispositions"]
    signalling = 0
    for path in sorted(INTEGRATION.glob("test_*.py")):
        for scope in ast.parse(path.read_text()).body:
            if not isinstance(scope, (ast.FunctionDef, ast.ClassDef)):
                continue
            calls = list(_calls(scope))
            if not any(name in ("send_signal", "kill", "killpg") and not (name == "kill" and not c.args)
                       for c, name in calls):
                continue
            signalling += 1
            popens = [c for c, name in calls if name == "Popen"]
            assert all(_preexec(c) == "default_signal_dispositions" for c in popens), \
                f"{path.name}:{scope.name}: Popen without preexec_fn=default_signal_dispositions"
            assert popens or any(name == "start_cli" for _, name in calls), \
                f"{path.name}:{scope.name} signals a process not started by start_cli"
    assert signalling >= 3  # test_smoke's SIGINT and test_reliability's two: the check is looking

"""`kerasenv smoke/run` map their options onto one runner.run call, and its result onto the
exit code and the lines on stderr (Docker stood in for: the container is not started)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kerasenv import cli, docker_client, runner
from kerasenv.errors import EXIT_OOM


@pytest.fixture
def ran(monkeypatch):
    """The runner.run calls of one CLI invocation; set `result` to change what they return."""
    calls = []
    state = SimpleNamespace(result=runner.RunResult(exit_code=0, oom_killed=False, container_name="x"))

    def fake_run(client, v, command, **kwargs):
        calls.append(SimpleNamespace(variant=v.id, command=command, **kwargs))
        return state.result

    monkeypatch.setattr(docker_client, "client", lambda: SimpleNamespace(images=SimpleNamespace(list=lambda name: [name])))
    monkeypatch.setattr(runner, "run", fake_run)
    return SimpleNamespace(calls=calls, state=state)


def test_smoke_passes_its_flags_then_the_extra_flags_to_smoke_train(ran, tmp_path, capsys):
    code = cli.main(["smoke", "tf2.21-cpu", "--runs-dir", str(tmp_path), "--run-id", "r1", "--epochs", "2",
                     "--require-gpu", "-e", "A=1", "--", "--steps", "3"])
    assert code == 0
    (call,) = ran.calls
    assert call.command == ["python", "/opt/kerasenv/smoke_train.py", "--run-id", "r1", "--epochs", "2",
                            "--require-gpu", "--steps", "3"]
    assert (call.gpus, call.kind, call.network, call.env, call.stdout) == ("none", "smoke", "none", {"A": "1"}, None)
    assert f"no report was written ({tmp_path / 'r1' / 'report.json'})" in capsys.readouterr().err


def test_run_hands_its_command_and_stdout_to_the_container(ran, tmp_path, capsys):
    import sys

    assert cli.main(["run", "tf2.21-cpu", "--runs-dir", str(tmp_path), "--", "echo", "hi"]) == 0
    (call,) = ran.calls
    assert (call.command, call.kind, call.network, call.stdout) == (["echo", "hi"], "run", None, sys.stdout)
    assert capsys.readouterr().err == ""  # no smoke training: no report line


def test_an_oom_killed_container_exits_5_naming_the_limit(ran, tmp_path, capsys):
    ran.state.result = runner.RunResult(exit_code=137, oom_killed=True, container_name="x", memory_limit=2**31)
    assert cli.main(["smoke", "tf2.21-cpu", "--runs-dir", str(tmp_path), "--memory", "2g"]) == EXIT_OOM
    assert "OOM-killed (limit 2 GiB)" in capsys.readouterr().err

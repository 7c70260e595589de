"""`kerasenv smoke/run/shell/lab` (run/commands.py, through the CLI's entry point) map their
options onto one runner.run call, and its result onto the exit code and the lines on stderr
(Docker stood in for: the container is not started)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kerasenv import cli
from kerasenv.engine import docker_client
from kerasenv.run import runner
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
    assert (call.gpus.route, call.kind, call.network, call.env, call.stdout) == ("none", "smoke", "none", {"A": "1"}, None)
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


def test_run_mounts_the_current_folder_and_passes_the_volumes(ran, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    assert cli.main(["run", "tf2.21-cpu", "-v", "./data:/data:ro", "--", "python", "train.py"]) == 0
    (call,) = ran.calls
    assert call.project == Path(".") and call.volumes == ["./data:/data:ro"] and call.interactive is False


def test_run_without_a_project_mounts_none(ran, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "tf2.21-cpu", "--no-project", "--", "true"]) == 0
    assert ran.calls[0].project is None


def test_a_missing_volume_is_refused_before_docker_is_asked(ran, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "tf2.21-cpu", "-v", "./nope:/data", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist on this host" in err
    assert ran.calls == []


def test_shell_is_an_interactive_bash_with_the_project_and_passes_its_status(ran, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ran.state.result = runner.RunResult(exit_code=3, oom_killed=False, container_name="x")
    assert cli.main(["shell", "tf2.21-cpu"]) == 3
    (call,) = ran.calls
    assert (call.command, call.interactive, call.kind, call.project) == (["bash"], True, "run", Path("."))


def test_shell_runs_the_command_after_the_double_dash(ran, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["shell", "tf2.21-cpu", "--", "python"]) == 0
    assert ran.calls[0].command == ["python"]


def test_smoke_mounts_no_project(ran, tmp_path):
    assert cli.main(["smoke", "tf2.21-cpu", "--runs-dir", str(tmp_path)]) == 0
    assert ran.calls[0].project is None


def test_lab_runs_the_jupyter_flavour_with_a_fresh_token_on_loopback(ran, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lab", "tf2.21-cpu", "--port", "18765"]) == 0
    assert cli.main(["lab", "tf2.21-cpu", "--port", "18765"]) == 0
    first, second = ran.calls
    assert first.image == "kerasenv:tf2.21-cpu-jupyter" and first.kind == "lab" and first.command is None
    assert first.ports == {"8888/tcp": ("127.0.0.1", 18765)}
    assert len(first.env["JUPYTER_TOKEN"]) == 48 and first.env["JUPYTER_TOKEN"] != second.env["JUPYTER_TOKEN"]
    assert first.project == Path(".") and first.detach is False


def test_lab_refuses_a_variant_without_a_jupyter_flavour(ran, capsys):
    assert cli.main(["lab", "tf2.17-rocm6.3"]) == 2
    assert "has no JupyterLab flavour" in capsys.readouterr().err and ran.calls == []

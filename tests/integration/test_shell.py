"""`kerasenv shell ID`: an interactive bash in the variant, driven through a real terminal
(tmux): it starts in /workspace with the project's files, has a TTY, imports TensorFlow,
passes the shell's exit status through, and leaves no container behind. Without a
terminal (stdin a pipe) it reads the commands from stdin and still passes the status."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kerasenv.engine import docker_client


VARIANT = "tf2.21-cpu"
IMAGE = f"kerasenv:{VARIANT}"
PROMPT = re.compile(r"/workspace[#$] *$", re.MULTILINE)




@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text("print('training')\n")
    os.chmod(tmp_path, 0o755)
    return folder


def kerasenv_cli() -> str:
    """The console script a user types (the venv's), else `python -m kerasenv`."""
    script = Path(sys.executable).parent / "kerasenv"
    return shlex.quote(str(script)) if script.exists() else f"{shlex.quote(sys.executable)} -m kerasenv"


class Terminal:
    """A detached tmux session on its own server (own socket: this test's environment,
    nothing shared with another tmux user); read with capture-pane, typed into with send-keys."""

    def __init__(self, command: str) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is not installed; the shell tests drive a real terminal with it: "
                        "run `make test-prereqs`")
        self.socket = f"kerasenv-test-{uuid.uuid4().hex[:8]}"
        self.session = "shell"
        self._tmux("new-session", "-d", "-s", self.session, "-x", "200", "-y", "50", command)
        self.socket_path = self._tmux("display-message", "-p", "-t", self.session, "#{socket_path}").strip()

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.socket, *args], check=False, capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0, f"tmux {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.session)

    def type(self, line: str) -> None:
        self._tmux("send-keys", "-t", self.session, "-l", line)
        self._tmux("send-keys", "-t", self.session, "Enter")

    def wait_for(self, pattern: str | re.Pattern, *, timeout: float = 60, after: int = 0) -> re.Match:
        """Poll the pane until `pattern` matches (in the text past offset `after`)."""
        regex = re.compile(pattern, re.MULTILINE) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            match = regex.search(text, after)
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"no {regex.pattern!r} on the terminal within {timeout:.0f} s; it shows:\n"
                                     f"{text[-4000:]}")
            time.sleep(0.2)

    def run(self, line: str, pattern: str, *, timeout: float = 60) -> re.Match:
        """Type a line and wait for `pattern` in what follows it."""
        start = len(self.screen().rstrip())
        self.type(line)
        return self.wait_for(pattern, timeout=timeout, after=start)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], check=False, capture_output=True, timeout=30)
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)


@pytest.fixture
def terminal(cpu_image, project):
    """`kerasenv shell tf2.21-cpu` from the project folder in a 200x50 terminal, then the exit
    status it returned; the tmux server is always killed."""
    command = (f"cd {shlex.quote(str(project))} && {kerasenv_cli()} shell {VARIANT}; "
               "echo KERASENV_EXIT=$?; sleep 60")
    term = Terminal(command)
    try:
        term.wait_for(PROMPT, timeout=90)
        yield term
    finally:
        term.close()


def container_id(term: Terminal) -> str:
    """The shell's container (Docker makes its hostname the short container id)."""
    return term.run('echo "CONTAINER=$(hostname)"', r"^CONTAINER=([0-9a-f]{12})$").group(1)


def test_shell_imports_tensorflow_and_passes_the_exit_status_and_removes_its_container(terminal, docker):
    cid = container_id(terminal)
    container = docker.containers.get(cid)
    assert container.labels[docker_client.PROJECT_LABEL] == "kerasenv"
    assert container.labels["io.kerasenv.variant"] == VARIANT
    terminal.run("python -c 'import tensorflow as tf; print(\"TF-IMPORTED\", tf.__version__)'",
                 r"^TF-IMPORTED 2\.21\.0$", timeout=120)
    terminal.run("exit 3", r"^KERASENV_EXIT=3$", timeout=60)
    assert docker.containers.list(all=True, filters={"id": cid}) == []
    assert docker.containers.list(all=True, filters={"label": f"{docker_client.PROJECT_LABEL}=kerasenv",
                                                     "name": container.name}) == []


def test_shell_starts_in_workspace_with_the_project_files_on_a_real_tty(terminal):
    terminal.run('echo "PWD=$(pwd)"', r"^PWD=/workspace$")
    terminal.run("ls -1", r"^train\.py$")
    terminal.run('echo "TTY=$(tty)"', r"^TTY=/dev/pts/\d+$")
    terminal.run("exit", r"^KERASENV_EXIT=0$")


def piped(docker, project: Path, args: list[str], stdin: str, *, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI with a pipe for stdin, no terminal (`echo ... | kerasenv shell ID`). A CLI still
    running after `timeout` is sent SIGTERM and its containers are removed; that fails the test."""
    proc = subprocess.Popen([sys.executable, "-m", "kerasenv", *args], cwd=project, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        for container in docker.containers.list(all=True, filters={"label": f"io.kerasenv.cli-pid={proc.pid}"}):
            container.remove(force=True)
        raise AssertionError(f"kerasenv {' '.join(args)} was still running {timeout:.0f} s after its stdin "
                             f"closed (output: {out!r}; stderr: {err[-2000:]!r})") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_shell_without_a_terminal_runs_stdin_and_shows_its_output(cpu_image, docker, project):
    proc = piped(docker, project, ["shell", VARIANT], 'echo "TTY=$(tty)"; ls; echo oops >&2; exit 4\n')
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "TTY=not a tty" in proc.stdout and "train.py" in proc.stdout.split()
    assert "oops" in proc.stderr


def test_run_interactive_hands_the_end_of_stdin_to_the_command(cpu_image, docker, project):
    proc = piped(docker, project, ["run", "-i", VARIANT, "--", "python", "-c",
                                   "import sys; print(sys.stdin.read().upper())"], "piped in\n", timeout=30)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "PIPED IN"

"""`kerasenv run ID -- CMD` from a user's project folder, through the real CLI: the folder is
/workspace, files written there belong to the user (or to `--user`), `-v` adds mounts
(read-only ones included), `--no-project` mounts none, a bad `-v` is refused before Docker
is asked, exit codes pass through; and a derived image `pip install`s on top of ours."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from kerasenv.engine import docker_client

from .conftest import TrackedContainer, local_wheels

VARIANT = "tf2.21-cpu"
IMAGE = f"kerasenv:{VARIANT}"
OTHER_UID = 4242

TRAIN_PY = textwrap.dedent("""\
    import json, os
    import numpy as np
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=2, batch_size=64, verbose=0)
    model.save("model.keras")
    print(json.dumps({"cwd": os.getcwd(), "uid": os.getuid(), "gid": os.getgid(),
                      "reloaded": keras.saving.load_model("model.keras").count_params()}))
    """)

READ_DATA_PY = textwrap.dedent("""\
    import json
    text = open("/data/numbers.csv").read()
    try:
        open("/data/written-by-the-container", "w")
        write = "allowed"
    except OSError as exc:
        write = exc.strerror
    print(json.dumps({"sum": sum(int(v) for v in text.split(",")), "write": write}))
    """)






@pytest.fixture
def project(tmp_path):
    """A user's project folder holding train.py (world-readable, like a checkout)."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN_PY)
    (folder / "read_data.py").write_text(READ_DATA_PY)
    os.chmod(tmp_path, 0o755)
    return folder


def run_cli(cwd: Path, *args: str, timeout: int = 300) -> tuple[subprocess.CompletedProcess, int]:
    """`kerasenv run ...` with `cwd` as the current directory, as a user types it; the
    result and the CLI's pid (its containers carry it as the io.kerasenv.cli-pid label)."""
    proc = subprocess.Popen([sys.executable, "-m", "kerasenv", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"kerasenv {' '.join(args)} ran past {timeout} s:\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def containers_of(docker, pid: int) -> list:
    """Containers one CLI process started (other sessions' containers are not counted)."""
    return docker.containers.list(all=True, filters={
        "label": [f"{docker_client.PROJECT_LABEL}=kerasenv", f"io.kerasenv.cli-pid={pid}"]})


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_user_script_trains_in_the_project_and_the_model_belongs_to_the_user(cpu_image, docker, project):
    proc, pid = run_cli(project, "run", VARIANT, "--", "python", "train.py")
    result = last_json(proc)
    assert result["cwd"] == "/workspace" and result["reloaded"] > 0
    assert (result["uid"], result["gid"]) == (os.getuid(), os.getgid())
    model = project / "model.keras"
    assert model.is_file() and model.stat().st_size > 0
    assert model.stat().st_uid == os.getuid()
    assert containers_of(docker, pid) == []


def test_run_as_another_user_writes_the_model_as_that_user(cpu_image, docker, project):
    # As root (CI) the project is handed to uid 4242, as a shared machine's user would own it;
    # otherwise the test runs with this user's own UID, which needs no chown.
    uid = OTHER_UID if os.geteuid() == 0 else os.getuid()
    if os.geteuid() == 0:
        for path in [project, *project.iterdir()]:
            os.chown(path, uid, uid)
    proc, pid = run_cli(project, "run", VARIANT, "--user", f"{uid}:{uid}", "--", "python", "train.py")
    result = last_json(proc)
    assert (result["uid"], result["gid"]) == (uid, uid)
    assert (project / "model.keras").stat().st_uid == uid
    assert containers_of(docker, pid) == []


def test_a_read_only_data_mount_is_readable_and_refuses_writes(cpu_image, project, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "numbers.csv").write_text("1,2,3,4")
    os.chmod(data, 0o777)  # writable on the host: only the :ro mount may refuse the write
    proc, _ = run_cli(project, "run", VARIANT, "-v", f"{data}:/data:ro", "--", "python", "read_data.py")
    result = last_json(proc)
    assert result == {"sum": 10, "write": "Read-only file system"}
    assert sorted(p.name for p in data.iterdir()) == ["numbers.csv"]


def test_a_relative_data_mount_from_the_project_directory(cpu_image, project):
    (project / "data").mkdir()
    (project / "data" / "numbers.csv").write_text("5,6")
    proc, _ = run_cli(project, "run", VARIANT, "-v", "./data:/data:ro", "--", "python", "read_data.py")
    assert last_json(proc) == {"sum": 11, "write": "Read-only file system"}


def test_no_project_mounts_nothing_at_workspace_and_pythons_exit_2_passes_through(cpu_image, docker, project):
    proc, pid = run_cli(project, "run", VARIANT, "--no-project", "--", "python", "train.py")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "can't open file '/workspace/train.py'" in proc.stderr
    assert not (project / "model.keras").exists()
    assert containers_of(docker, pid) == []


def test_a_missing_host_path_is_refused_in_one_line_before_any_container(cpu_image, docker, project):
    proc, pid = run_cli(project, "run", VARIANT, "-v", "./no-such-data:/data", "--", "python", "train.py")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kerasenv: error: -v './no-such-data:/data': "), proc.stderr
    assert "does not exist on this host" in lines[0]
    assert not (project / "no-such-data").exists()  # not created as Docker would
    assert containers_of(docker, pid) == []


@pytest.mark.parametrize("code", [7, 0])
def test_the_commands_exit_code_passes_through(cpu_image, docker, project, code):
    proc, pid = run_cli(project, "run", VARIANT, "--", "python", "-c", f"raise SystemExit({code})")
    assert proc.returncode == code, proc.stderr[-3000:]
    assert containers_of(docker, pid) == []


@pytest.fixture
def derived_image(cpu_image, docker, tmp_path):
    """`FROM kerasenv:tf2.21-cpu` + `pip install` of a local wheel as the image's user,
    built offline; the image is always removed."""
    context = tmp_path / "derived"
    local_wheels.wheel(context / "wheels", local_wheels.DEMO, "1.0")
    (context / "Dockerfile").write_text(
        f"FROM {cpu_image}\nCOPY wheels /tmp/wheels\n"
        f"RUN pip install --no-index --find-links /tmp/wheels {local_wheels.DEMO}\n")
    tag = f"kerasenv-test-derived:{uuid.uuid4().hex[:10]}"
    try:
        docker.images.build(path=str(context), tag=tag, rm=True, forcerm=True, network_mode="none",
                            labels={"io.kerasenv.test": "derived"})
        yield tag
    finally:
        from docker.errors import ImageNotFound

        try:
            docker.images.remove(tag, force=True)
        except ImageNotFound:
            pass
        shutil.rmtree(context, ignore_errors=True)


def test_a_derived_image_pip_installs_on_top_as_the_image_user(derived_image, docker):
    image = docker.images.get(derived_image)
    assert image.attrs["Config"]["User"] == "1000:1000"  # inherited: the RUN ran as uid 1000
    code, out, err = TrackedContainer(docker, derived_image).run(
        ["python", "-c", ("import kerasenv_demo, os, json; "
                          "print(json.dumps([kerasenv_demo.VERSION, kerasenv_demo.__file__, "
                          "os.stat(kerasenv_demo.__file__).st_uid]))")], timeout=120)
    assert code == 0, err[-3000:]
    version, path, owner = json.loads(out.strip().splitlines()[-1])
    assert version == "1.0" and path.startswith("/opt/venv/lib/") and owner == 1000

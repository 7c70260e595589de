"""What `kerasenv run` / `shell` mount (mounts.py): the project at /workspace, the runs
directory, `-v HOST:CONTAINER[:ro]`, and each refusal as one line naming the cause and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerasenv.run import mounts
from kerasenv.errors import EXIT_USAGE, UsageError
from kerasenv.run.mounts import Mount


def refusal(call, *args, **kwargs) -> str:
    """The message of the UsageError `call` raises; it must be one line (the CLI prints it so)."""
    with pytest.raises(UsageError) as info:
        call(*args, **kwargs)
    message = info.value.message
    assert "\n" not in message, message
    assert info.value.exit_code == EXIT_USAGE
    return message


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A project folder with a data folder and a file in it."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("1,2\n")
    return tmp_path


# --- Mount ----------------------------------------------------------------------------------

def test_mount_sdk_gives_the_volumes_mapping_with_its_mode():
    assert Mount("/h", "/c").sdk() == ("/h", {"bind": "/c", "mode": "rw"})
    assert Mount("/h", "/c", read_only=True).sdk() == ("/h", {"bind": "/c", "mode": "ro"})


# --- parse_volume: what is accepted ---------------------------------------------------------

def test_absolute_host_path_is_mounted_read_write_by_default(cwd):
    assert mounts.parse_volume(f"{cwd / 'data'}:/data", cwd) == Mount(str(cwd / "data"), "/data", False)


@pytest.mark.parametrize("mode, read_only", [("ro", True), ("rw", False)])
def test_the_mode_ro_or_rw_is_kept(cwd, mode, read_only):
    assert mounts.parse_volume(f"./data:/data:{mode}", cwd).read_only is read_only


@pytest.mark.parametrize("host", ["./data", "data/", "./data/../data", "."])
def test_relative_host_paths_resolve_against_the_current_directory(cwd, host):
    mount = mounts.parse_volume(f"{host}:/data", cwd)
    expected = cwd if host == "." else cwd / "data"
    assert mount.source == str(expected.resolve())


def test_a_tilde_host_path_is_the_home_directory(cwd, monkeypatch, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    (home / "datasets").mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert mounts.parse_volume("~/datasets:/data:ro", cwd) == Mount(str((home / "datasets").resolve()), "/data", True)
    assert mounts.parse_volume("~:/h", cwd).source == str(home.resolve())


def test_a_symlinked_host_path_is_resolved_to_its_target(cwd):
    (cwd / "link").symlink_to(cwd / "data")
    assert mounts.parse_volume("./link:/data", cwd).source == str((cwd / "data").resolve())


def test_a_host_file_may_be_mounted_too(cwd):
    assert mounts.parse_volume("./data/x.csv:/x.csv:ro", cwd).source == str((cwd / "data" / "x.csv").resolve())


@pytest.mark.parametrize("name", ["pipcache", "my-data_1.v2", "data"])
def test_a_bare_name_is_a_named_volume_and_need_not_exist(cwd, name):
    # `data` exists as a folder in cwd, but a bare name is a volume, as for `docker run -v`.
    assert mounts.parse_volume(f"{name}:/cache", cwd) == Mount(name, "/cache", False)


@pytest.mark.parametrize("target, normalised", [
    ("/data/", "/data"), ("/data/./sub", "/data/sub"), ("//data", "/data"), ("/a/../data", "/data"),
])
def test_the_container_path_is_normalised(cwd, target, normalised):
    assert mounts.parse_volume(f"vol1:{target}", cwd).target == normalised


def test_a_path_next_to_a_reserved_one_is_not_reserved(cwd):
    assert mounts.parse_volume("vol1:/opt/venv2", cwd).target == "/opt/venv2"
    assert mounts.parse_volume("vol1:/opt/data", cwd).target == "/opt/data"


# --- parse_volume: refusals -----------------------------------------------------------------

@pytest.mark.parametrize("spec", ["data", "./data:", ":/data", "a:b:c:d", "::", "./data:/data:ro:x"])
def test_a_malformed_spec_names_the_expected_form(cwd, spec):
    message = refusal(mounts.parse_volume, spec, cwd)
    assert message.startswith(f"-v {spec!r}:")
    assert "expected HOST:CONTAINER or HOST:CONTAINER:ro" in message and "e.g. -v ./data:/data:ro" in message


@pytest.mark.parametrize("mode", ["z", "RO", "rw,z", ""])
def test_an_unknown_mode_is_refused(cwd, mode):
    spec = f"./data:/data:{mode}"
    message = refusal(mounts.parse_volume, spec, cwd)
    assert f"the mode {mode!r} is not ro or rw" in message and spec in message


@pytest.mark.parametrize("target", ["data", "./data", "~/data"])
def test_a_relative_container_path_is_refused(cwd, target):
    message = refusal(mounts.parse_volume, f"./data:{target}", cwd)
    assert f"the container path {target!r} must be absolute" in message and "e.g. /data" in message


@pytest.mark.parametrize("target, reserved", [
    ("/opt/venv", "/opt/venv"), ("/opt/venv/lib/python3.11/site-packages", "/opt/venv"),
    ("/opt/kerasenv", "/opt/kerasenv"), ("/etc/kerasenv/constraints.txt", "/etc/kerasenv"),
    ("/var/cache/kerasenv/nv", "/var/cache/kerasenv"), ("/opt/venv/", "/opt/venv"),
    ("/opt/../opt/venv", "/opt/venv"), ("//opt/venv", "/opt/venv"),
])
def test_a_mount_inside_the_images_software_is_refused(cwd, target, reserved):
    message = refusal(mounts.parse_volume, f"./data:{target}", cwd)
    assert f"is inside {reserved}" in message and "the image's own software" in message
    assert "mount your files elsewhere, e.g. /data" in message


@pytest.mark.parametrize("target, hidden", [
    ("/", "/opt/venv"), ("/opt", "/opt/venv"), ("/etc", "/etc/kerasenv"), ("/var/cache", "/var/cache/kerasenv"),
    ("/var", "/var/cache/kerasenv"), ("/opt/venv/..", "/opt/venv"),
])
def test_a_mount_that_would_hide_the_images_software_is_refused(cwd, target, hidden):
    message = refusal(mounts.parse_volume, f"vol1:{target}", cwd)
    assert f"would hide {hidden}" in message and "mount your files elsewhere, e.g. /data" in message


def test_the_reserved_check_comes_before_the_host_path_check(cwd):
    # Both are wrong; the container path is what the user has to change in any case.
    assert "is inside /opt/venv" in refusal(mounts.parse_volume, "./missing:/opt/venv", cwd)


@pytest.mark.parametrize("host", ["./missing", "missing/", "/nonexistent/kerasenv-test", "~/kerasenv-no-such-dir"])
def test_a_missing_host_path_is_refused_not_created(cwd, host, monkeypatch):
    monkeypatch.setenv("HOME", str(cwd))
    message = refusal(mounts.parse_volume, f"{host}:/data", cwd)
    missing = (cwd / Path(host).expanduser()).resolve()
    assert f"{missing} does not exist on this host" in message
    assert "create it or fix the path" in message and "empty root-owned directory" in message
    assert not missing.exists()


@pytest.mark.parametrize("host", ["a", "my data", "vol@1", "_vol", "-vol"])
def test_an_invalid_volume_name_is_refused_with_the_path_spelling(cwd, host):
    message = refusal(mounts.parse_volume, f"{host}:/data", cwd)
    assert f"{host!r} is neither a path nor a valid volume name" in message
    assert f"for a folder here write ./{host}" in message


# --- project_mount --------------------------------------------------------------------------

def test_the_project_is_mounted_read_write_at_workspace(cwd):
    assert mounts.project_mount(cwd) == Mount(str(cwd.resolve()), "/workspace", False)
    assert mounts.WORKSPACE == "/workspace"


def test_a_relative_or_tilde_project_is_resolved(cwd, monkeypatch):
    monkeypatch.chdir(cwd)
    assert mounts.project_mount(Path(".")).source == str(cwd.resolve())
    assert mounts.project_mount(Path("data/..")).source == str(cwd.resolve())
    monkeypatch.setenv("HOME", str(cwd))
    assert mounts.project_mount(Path("~/data")).source == str((cwd / "data").resolve())


@pytest.mark.parametrize("name", ["missing", "data/x.csv"])
def test_a_project_that_is_not_a_directory_is_refused(cwd, name):
    message = refusal(mounts.project_mount, cwd / name)
    assert f"--project {cwd / name}: not a directory" in message
    assert "pass your project folder, or --no-project" in message


def test_the_root_directory_as_project_is_refused(cwd):
    message = refusal(mounts.project_mount, Path("/"))
    assert "the whole file system" in message and "cd into your project folder first, or pass --no-project" in message


# --- plan -----------------------------------------------------------------------------------

def test_no_project_no_runs_no_volumes_is_no_mount(cwd):
    assert mounts.plan(project=None, runs_dir=None, volumes=[], cwd=cwd) == []


def test_the_project_runs_dir_is_not_mounted_a_second_time(cwd):
    # ./runs inside the project is already /workspace/runs through the project mount.
    assert mounts.plan(project=cwd, runs_dir=Path("runs"), volumes=[], cwd=cwd) == [
        Mount(str(cwd.resolve()), "/workspace")]
    assert mounts.plan(project=cwd, runs_dir=cwd / "runs", volumes=[], cwd=cwd / "data") == [
        Mount(str(cwd.resolve()), "/workspace")]


def test_a_runs_dir_outside_the_project_gets_its_own_mount(cwd, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    assert mounts.plan(project=cwd / "data", runs_dir=Path("runs"), volumes=[], cwd=cwd) == [
        Mount(str((cwd / "data").resolve()), "/workspace"), Mount(str((cwd / "runs").resolve()), "/workspace/runs")]
    assert mounts.plan(project=cwd, runs_dir=elsewhere, volumes=[], cwd=cwd)[1] == Mount(
        str(elsewhere.resolve()), mounts.RUNS)


def test_a_runs_dir_deeper_in_the_project_is_mounted_at_workspace_runs(cwd):
    plan = mounts.plan(project=cwd, runs_dir=Path("data/runs"), volumes=[], cwd=cwd)
    assert plan[1] == Mount(str((cwd / "data" / "runs").resolve()), "/workspace/runs")


def test_without_a_project_the_runs_dir_is_still_mounted(cwd):
    assert mounts.plan(project=None, runs_dir=Path("runs"), volumes=[], cwd=cwd) == [
        Mount(str((cwd / "runs").resolve()), "/workspace/runs")]


def test_the_order_is_project_runs_then_each_volume(cwd, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    plan = mounts.plan(project=cwd, runs_dir=runs, volumes=["./data:/data:ro", "pipcache:/cache"], cwd=cwd)
    assert [m.target for m in plan] == ["/workspace", "/workspace/runs", "/data", "/cache"]
    assert plan[2].read_only and not plan[3].read_only and plan[3].source == "pipcache"


def test_a_volume_inside_the_project_mount_is_allowed(cwd):
    plan = mounts.plan(project=cwd, runs_dir=None, volumes=["./data:/workspace/data:ro"], cwd=cwd)
    assert [m.target for m in plan] == ["/workspace", "/workspace/data"]


@pytest.mark.parametrize("volumes, target", [
    (["./data:/data", "vol1:/data"], "/data"),
    (["./data:/data", "vol1:/data/"], "/data"),
    (["./data:/workspace"], "/workspace"),
])
def test_two_mounts_on_one_target_are_refused(cwd, volumes, target):
    message = refusal(mounts.plan, project=cwd, runs_dir=None, volumes=volumes, cwd=cwd)
    assert f"two mounts on {target}" in message and "give each -v its own container path" in message


def test_a_volume_on_the_separate_runs_mount_is_refused(cwd, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    message = refusal(mounts.plan, project=None, runs_dir=runs, volumes=["./data:/workspace/runs"], cwd=cwd)
    assert f"two mounts on /workspace/runs ({runs.resolve()} and {(cwd / 'data').resolve()})" in message


def test_without_a_project_a_volume_may_take_workspace(cwd):
    plan = mounts.plan(project=None, runs_dir=None, volumes=["./data:/workspace"], cwd=cwd)
    assert plan == [Mount(str((cwd / "data").resolve()), "/workspace")]


def test_a_bad_volume_fails_the_whole_plan(cwd):
    assert "does not exist" in refusal(mounts.plan, project=cwd, runs_dir=None, volumes=["./nope:/data"], cwd=cwd)


def test_a_project_with_a_colon_in_its_path_is_refused_with_the_way_out(tmp_path):
    project = tmp_path / "a:b"
    project.mkdir()
    message = refusal(mounts.plan, project=project, runs_dir=None, volumes=[], cwd=tmp_path)
    assert f"{project.resolve()} has a ':' in its path" in message
    assert "rename or move that folder" in message and "--project DIR / --no-project" in message


def test_a_volume_resolved_under_a_colon_directory_is_refused(tmp_path):
    cwd = tmp_path / "x:y"
    (cwd / "data").mkdir(parents=True)
    message = refusal(mounts.plan, project=None, runs_dir=None, volumes=["./data:/data"], cwd=cwd)
    assert "has a ':' in its path" in message and "--no-project" not in message

"""What `kerasenv run/smoke/multiworker` put in the container, decided before Docker runs it:
run ids, the smoke training's command line, -e, the pre-Docker checks, the OOM limit text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kerasenv.engine import gpu_request
from kerasenv.run import runner
from kerasenv.errors import UsageError

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")


def test_a_new_run_id_is_utc_time_to_the_second_and_six_hex_digits():
    run_id = runner.new_run_id()
    assert RUN_ID.match(run_id), run_id
    assert runner.new_run_id("mw-").startswith("mw-") and RUN_ID.match(runner.new_run_id("mw-")[3:])
    assert len({runner.new_run_id() for _ in range(50)}) == 50  # same second, still distinct


def test_the_report_is_runs_dir_run_id_report_json():
    assert runner.report_path(Path("runs"), "abc") == Path("runs/abc/report.json")
    assert runner.report_path("out", "abc") == Path("out/abc/report.json")


def test_env_options_are_key_value_and_the_value_may_hold_equals_signs():
    assert runner.parse_env(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    assert runner.parse_env([]) == {}
    with pytest.raises(UsageError, match=r"-e 'NOVALUE': expected KEY=VALUE"):
        runner.parse_env(["A=1", "NOVALUE"])


def test_smoke_flags_keep_smoke_train_order_and_omit_what_was_not_given():
    assert runner.smoke_flags() == []
    assert runner.smoke_flags(mixed_precision="off", epochs=2, learning_rate=0.001, batch_size=64,
                              require_gpu=True) == [
        "--epochs", "2", "--batch-size", "64", "--learning-rate", "0.001", "--mixed-precision", "off",
        "--require-gpu"]
    assert runner.smoke_flags(epochs=0) == ["--epochs", "0"]  # 0 is given, not missing


def test_the_smoke_training_runs_with_the_images_own_python(real_matrix):
    cpu, rocm = real_matrix.get(real_matrix.default_cpu), real_matrix.get(real_matrix.default_rocm)
    assert runner.smoke_command(cpu, "r1") == ["python", "/opt/kerasenv/smoke_train.py", "--run-id", "r1"]
    assert runner.smoke_command(rocm, "r1", ["--epochs", "1"]) == [
        "python3", "/opt/kerasenv/smoke_train.py", "--run-id", "r1", "--epochs", "1"]


def test_smoke_runs_the_training_with_its_flags_then_the_extra_flags(real_matrix):
    v = real_matrix.get(real_matrix.default_cpu)
    cmd, run_id = runner.workload(v, ["--steps", "3"], smoke=True, run_id="keep", flags=["--epochs", "1"])
    assert run_id == "keep"
    assert cmd == ["python", "/opt/kerasenv/smoke_train.py", "--run-id", "keep", "--epochs", "1", "--steps", "3"]
    cmd, run_id = runner.workload(v, [], smoke=True)
    assert RUN_ID.match(run_id) and cmd[-2:] == ["--run-id", run_id]


def test_run_with_a_command_runs_it_as_given_and_has_no_run_id(real_matrix):
    v = real_matrix.get(real_matrix.default_cpu)
    command = ["python", "-c", "print(1)"]
    cmd, run_id = runner.workload(v, command, smoke=False, flags=["--epochs", "1"])
    assert (cmd, run_id) == (command, None)
    assert cmd is not command  # the caller's list is not handed on


def test_run_without_a_command_runs_the_smoke_training_without_flags(real_matrix):
    v = real_matrix.get(real_matrix.default_cpu)
    cmd, run_id = runner.workload(v, [], smoke=False, flags=["--epochs", "1"])
    assert RUN_ID.match(run_id)
    assert cmd == ["python", "/opt/kerasenv/smoke_train.py", "--run-id", run_id]


@pytest.mark.parametrize("options, text", [
    (dict(gpus="device=x"), "--gpus 'device=x'"),
    (dict(shm_size="lots"), "--shm-size 'lots'"),
    (dict(memory="1k"), "Docker's minimum is 6m"),
    (dict(user="me"), "--user 'me' must be numeric UID:GID"),
])
def test_options_docker_would_reject_are_usage_errors(options, text, tmp_path):
    given = {**dict(gpus="auto", shm_size="2g", memory=None, runs_dir=tmp_path / "runs", user=None), **options}
    with pytest.raises(UsageError) as exc:
        runner.check_options(**given)
    assert text in exc.value.message


def test_a_bad_gpu_request_fails_before_the_runs_directory_is_made(tmp_path):
    with pytest.raises(UsageError):
        runner.check_options(gpus="0", shm_size="2g", memory=None, runs_dir=tmp_path / "runs", user=None)
    assert not (tmp_path / "runs").exists()


def test_good_options_make_the_runs_directory(tmp_path):
    runner.check_options(gpus="auto", shm_size="2g", memory="4g", runs_dir=tmp_path / "runs", user=None)
    assert (tmp_path / "runs").is_dir()


@pytest.mark.parametrize("nbytes, text", [
    (4 * 2**30, "4 GiB"), (int(1.5 * 2**30), "1.5 GiB"), (512 * 2**20, "512 MiB"), (6 * 2**20, "6 MiB"),
    (1000, "1000 bytes"),
])
def test_a_memory_limit_reads_as_gib_or_mib(nbytes, text):
    assert runner.format_limit(nbytes) == text


def test_every_container_gets_group_0_and_the_mounts_in_order(real_matrix, tmp_path, monkeypatch):
    """runner.run's container arguments, with a client that records create() and fails start."""
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    created = {}

    class Stop(Exception):
        pass

    def create(**kwargs):
        created.update(kwargs)
        raise Stop()

    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: ref),
                             containers=SimpleNamespace(create=create),
                             volumes=SimpleNamespace(create=lambda **kw: None))
    v = real_matrix.get("tf2.21-cpu")
    with pytest.raises(Stop):
        runner.run(client, v, ["true"], gpus=None, runs_dir=Path("runs"), user="1234:1234",
                   project=Path("."), volumes=["./data:/data:ro", "cache:/cache"])
    assert created["group_add"] == ["0"] and created["user"] == "1234:1234"
    # ./runs is inside the project, so the project mount already carries it
    assert created["volumes"] == [f"{tmp_path}:/workspace:rw", f"{tmp_path / 'data'}:/data:ro", "cache:/cache:rw"]
    assert "tty" not in created


def test_an_interactive_container_gets_stdin_and_a_tty_only_on_a_terminal(real_matrix, tmp_path, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    created = {}

    def create(**kwargs):
        created.update(kwargs)
        raise KeyboardInterrupt()

    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: ref), containers=SimpleNamespace(create=create))
    monkeypatch.setattr("sys.stdin", SimpleNamespace(isatty=lambda: False))
    with pytest.raises(KeyboardInterrupt):
        runner.run(client, real_matrix.get("tf2.21-cpu"), ["bash"], gpus=None, runs_dir=None, user=None,
                   interactive=True)
    assert created["stdin_open"] is True and created["tty"] is False


# --- ROCm: every container runner.run starts on an AMD host ----------------------------
AMD_HOSTS = Path(__file__).resolve().parents[3] / "fixtures" / "amd-hosts"


class _Created(Exception):
    """Raised by the recording client's create(): the arguments are all a test needs."""


def recording_client(created: dict):
    from types import SimpleNamespace

    def create(**kwargs):
        created.update(kwargs)
        raise _Created()

    return SimpleNamespace(images=SimpleNamespace(get=lambda ref: ref, list=lambda name: [name]),
                           containers=SimpleNamespace(create=create),
                           volumes=SimpleNamespace(create=lambda **kw: None))


@pytest.fixture
def amd_host(monkeypatch):
    """This host replaced by a recorded AMD shape (simulated: tests/fixtures/amd-hosts/)."""
    from kerasenv.engine import amd_devices

    def use(name: str):
        recorded = amd_devices.load_record(AMD_HOSTS / name / "host.json")
        monkeypatch.setattr(amd_devices, "scan", lambda root="/": recorded)
        return recorded
    return use


@pytest.mark.parametrize("fixture, gpus, devices, groups", [
    ("ubuntu-render-993", "all", ["/dev/kfd", "/dev/dri/card0", "/dev/dri/renderD128"], ["44", "993", "0"]),
    ("ubuntu-render-993", "device=0", ["/dev/kfd", "/dev/dri/renderD128"], ["993", "0"]),
    ("igpu-first-two-amd", "device=0,1", ["/dev/kfd", "/dev/dri/renderD129", "/dev/dri/renderD130"], ["110", "0"]),
])
def test_a_rocm_container_gets_the_hosts_gids_by_number_and_seccomp_unconfined(
        real_matrix, tmp_path, monkeypatch, amd_host, fixture, gpus, devices, groups):
    """run, smoke, shell and bench all create their container here (runner.run)."""
    amd_host(fixture)
    monkeypatch.chdir(tmp_path)
    created = {}
    with pytest.raises(_Created):
        runner.run(recording_client(created), real_matrix.get("tf2.17-rocm6.3"), ["true"],
                   gpus=gpu_request.resolve(gpus, "rocm"), runs_dir=None, user="1000:1000")
    assert [d.split(":")[1] for d in created["devices"]] == devices
    assert created["group_add"] == groups and created["user"] == "1000:1000"
    assert created["security_opt"] == ["seccomp=unconfined"]
    # the one place these come from: gpu_request.resolve, then runner.gpu_and_groups adds group 0
    assert created == {**created, **runner.gpu_and_groups(gpu_request.resolve(gpus, "rocm"))}


def test_no_gpu_means_no_amd_groups_and_cuda_gets_none_of_them(amd_host):
    amd_host("ubuntu-render-993")
    assert runner.gpu_and_groups(gpu_request.resolve("none", "rocm")) == {"group_add": ["0"]}
    assert runner.gpu_and_groups(None) == {"group_add": ["0"]}
    cuda = runner.gpu_and_groups(gpu_request.resolve("all", "cuda"))
    assert cuda["group_add"] == ["0"] and "security_opt" not in cuda


@pytest.mark.parametrize("smoke, interactive, command", [
    (True, False, []),  # kerasenv smoke
    (False, False, ["python", "-c", "pass"]),  # kerasenv run
    (False, True, ["bash"]),  # kerasenv shell
])
def test_smoke_run_and_shell_sessions_on_a_rocm_host_reach_docker_with_the_render_gid(
        real_matrix, tmp_path, monkeypatch, amd_host, smoke, interactive, command):
    """The whole path: `auto` GPUs for ROCm are all (host/gpu_choice, docker_gpus.request_for),
    then runner.run."""
    from types import SimpleNamespace

    from kerasenv.engine import docker_client
    from kerasenv.host import container_env, gpu_choice, variant_choice
    from kerasenv.run import session

    amd_host("ubuntu-render-993")
    monkeypatch.chdir(tmp_path)
    created = {}
    monkeypatch.setattr(docker_client, "client", lambda: recording_client(created))
    upstream = session.Upstream(chooser=SimpleNamespace(AUTO=variant_choice.AUTO, named=variant_choice.named),
                                builder=None, gpus=gpu_choice, host_env=container_env)
    request = session.Request(variant_id="tf2.17-rocm6.3", command=command, gpus="auto", shm_size="2g",
                              runs_dir=tmp_path / "runs", smoke=smoke, interactive=interactive, user="1000:1000")
    with pytest.raises(_Created):
        session.run_workload(real_matrix, upstream, request)
    assert created["group_add"] == ["44", "993", "0"] and created["security_opt"] == ["seccomp=unconfined"]
    assert "/dev/kfd:/dev/kfd:rwm" in created["devices"]


def test_lab_never_runs_the_rocm_image(real_matrix, tmp_path):
    """AMD's image has no JupyterLab flavour: `kerasenv lab` refuses it before Docker is asked
    (and `lab auto` on an AMD host takes the CPU image: test_session)."""
    from types import SimpleNamespace

    from kerasenv.host import variant_choice
    from kerasenv.run import session

    upstream = session.Upstream(chooser=SimpleNamespace(AUTO=variant_choice.AUTO, named=variant_choice.named),
                                builder=None, gpus=None, host_env=None)
    with pytest.raises(UsageError, match="tf2.17-rocm6.3 has no JupyterLab flavour"):
        session.run_lab(real_matrix, upstream, session.LabRequest(variant_id="tf2.17-rocm6.3", port=8888,
                                                                  gpus="all", shm_size="2g"))

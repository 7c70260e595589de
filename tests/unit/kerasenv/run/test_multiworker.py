"""Which worker a multi-worker run blames: the one that failed first, by Docker's clock."""

from __future__ import annotations

import re

import pytest

from kerasenv.run import multiworker


class FakeContainer:
    def __init__(self, code: int, finished: str, logs: bytes = b"") -> None:
        self.attrs = {"State": {"Status": "exited", "ExitCode": code, "FinishedAt": finished, "OOMKilled": False}}
        self._logs = logs

    def reload(self) -> None:
        pass

    def logs(self, **_) -> bytes:
        return self._logs


def test_the_killed_worker_is_blamed_even_when_the_chief_is_seen_first():
    chief = FakeContainer(8, "2026-12-01T13:40:01.9Z", b"collective failed")
    killed = FakeContainer(137, "2026-12-01T13:40:01.25Z", b"last lines")
    failure = multiworker._watch([chief, killed], timeout=5)
    assert (failure.index, failure.exit_code) == (1, 137)
    assert multiworker.describe(failure).startswith("worker 1 killed (SIGKILL)")


class LaggingContainer(FakeContainer):
    """Reads "running" for its first `lag` reloads, then exited: the engine showing a killed
    worker's exit after its peer's (the cold CI run of 2a3dcb5)."""

    def __init__(self, code: int, finished: str, lag: int, logs: bytes = b"") -> None:
        super().__init__(code, finished, logs)
        self._exited, self._lag = dict(self.attrs["State"]), lag
        self.attrs = {"State": {"Status": "running", "ExitCode": 0, "FinishedAt": "0001-01-01T00:00:00Z"}}

    def reload(self) -> None:
        self._lag -= 1
        if self._lag < 0:
            self.attrs = {"State": self._exited}


def test_the_killed_worker_is_blamed_when_the_engine_shows_its_exit_after_the_chiefs():
    chief = FakeContainer(8, "2026-12-01T13:40:01.9Z", b"collective failed")
    killed = LaggingContainer(137, "2026-12-01T13:40:01.25Z", lag=2, logs=b"last lines")
    failure = multiworker._watch([chief, killed], timeout=5, settle=1.0, poll=0.01)
    assert (failure.index, failure.exit_code, failure.tail) == (1, 137, "last lines")


def test_a_failure_is_named_after_the_settle_time_while_a_peer_still_runs():
    chief = FakeContainer(8, "2026-12-01T13:40:01.9Z", b"collective failed")
    hung = LaggingContainer(0, "", lag=10**6)
    failure = multiworker._watch([chief, hung], timeout=5, settle=0.05, poll=0.01)
    assert (failure.index, failure.exit_code) == (0, 8)


def test_fractions_of_different_length_sort_in_time_order():
    assert multiworker.finished_at("2026-12-01T13:40:01.25Z") < multiworker.finished_at("2026-12-01T13:40:01.3Z")
    assert multiworker.finished_at("2026-12-01T13:40:01Z") < multiworker.finished_at("2026-12-01T13:40:01.000000001Z")
    assert multiworker.finished_at("2026-12-01T13:40:02Z") > multiworker.finished_at("2026-12-01T13:40:01.999Z")


def test_all_workers_done_without_failure_is_no_failure():
    assert multiworker._watch([FakeContainer(0, "2026-12-01T13:40:01Z")] * 2, timeout=5) is None


def test_pytorch_workers_run_a_python_script_under_torchrun_with_a_static_rendezvous():
    hosts = ["kerasenv-mw-ab-0", "kerasenv-mw-ab-1"]
    assert multiworker.torchrun_command(hosts, 1, ["train.py", "--epochs", "2"]) == [
        "torchrun", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1",
        "--master-addr", "kerasenv-mw-ab-0", "--master-port", "29500", "train.py", "--epochs", "2"]
    assert multiworker.torch_script(["python", "train.py", "x"]) == ["train.py", "x"]
    assert multiworker.torch_script(["python", "-m", "pkg.mod"]) == ["-m", "pkg.mod"]
    assert multiworker.torch_script(["bash", "run.sh"]) is None
    assert multiworker.TORCH_EXAMPLE == ["-m", "kerasenv_image.examples.keras_torch_ddp"]


@pytest.mark.parametrize("variant_id, options, message", [
    ("jax0.12-cpu", dict(workers=0), "--workers 0: at least 2"),
    ("jax0.12-cpu", dict(workers=1), "--workers 1: at least 2"),
    ("tf2.15-cuda12.2", dict(cpu_devices=2), "--cpu-devices is JAX's"),
    ("tf2.21-cpu", dict(command=["python", "train.py"]), "runs on the JAX and PyTorch images"),
    ("jax0.12-cpu", dict(cpu_devices=0), "--cpu-devices 0: give 1 to 64"),
    ("jax0.12-cuda12.9", dict(cpu_devices=2, gpus=True), "--cpu-devices is for the CPU"),
    ("jax0.12-cpu", dict(port=80), "--port 80: pick a port from 1024"),
    ("jax0.12-cpu", dict(port=70000), "--port 70000"),
    ("torch2.15-cuda13.2", dict(command=["bash", "run.sh"]), "each worker runs a Python script under torchrun"),
    ("torch2.15-cuda13.2", dict(cpu_devices=2), "--cpu-devices is JAX's"),
])
def test_bad_flags_are_refused_before_anything_starts(real_matrix, variant_id, options, message):
    from kerasenv.errors import UsageError

    kwargs = dict(workers=2, command=None, cpu_devices=None, port=None, gpus=None) | options
    with pytest.raises(UsageError, match=re.escape(message)):
        multiworker.check_options(real_matrix.get(variant_id), **kwargs)
    # and run() refuses it the same way with no Docker client at all
    with pytest.raises(UsageError, match=re.escape(message)):
        multiworker.run(None, real_matrix.get(variant_id), workers=kwargs["workers"], runs_dir=None, run_id="x",
                        smoke_args=[], command=kwargs["command"], cpu_devices=kwargs["cpu_devices"],
                        port=kwargs["port"], gpus=[object()] if kwargs["gpus"] else None)


def test_each_jax_worker_gets_kerass_variables_with_the_coordinator_first():
    hosts = ["kerasenv-mw-ab-0", "kerasenv-mw-ab-1", "kerasenv-mw-ab-2"]
    env = [multiworker.keras_distribution_env(hosts, i, cpu_devices=2, init_timeout=30) for i in range(3)]
    assert {e["KERAS_DISTRIBUTION_JOB_ADDRESSES"] for e in env} == {
        "kerasenv-mw-ab-0:1234,kerasenv-mw-ab-1:1234,kerasenv-mw-ab-2:1234"}
    assert [e["KERAS_DISTRIBUTION_PROCESS_ID"] for e in env] == ["0", "1", "2"]
    assert all(e["KERAS_DISTRIBUTION_NUM_PROCESSES"] == "3" and e["JAX_NUM_CPU_DEVICES"] == "2" for e in env)
    assert all(e["NO_PROXY"] == e["no_proxy"] == ",".join(hosts) for e in env)
    assert env[0]["KERASENV_INIT_TIMEOUT"] == "30"
    assert "JAX_NUM_CPU_DEVICES" not in multiworker.keras_distribution_env(hosts, 0)


def test_a_command_after_the_double_dash_is_told_from_smoke_flags():
    assert multiworker.is_command(["python", "train.py"])
    assert not multiworker.is_command(["--epochs", "2"])
    assert not multiworker.is_command([])


def test_the_chief_report_gets_every_workers_figures_and_the_replicas_verdict(tmp_path):
    import io
    import json

    def write(path, pid, digest):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"status": "ok", "training": {"final_loss": 0.1 + pid},
                                    "distributed": {"process_id": pid, "weights_sha256": digest}}))

    write(tmp_path / "report.json", 0, "a" * 64)
    write(tmp_path / "worker-1" / "report.json", 1, "a" * 64)
    assert multiworker.agree(tmp_path, 2, io.StringIO()) == 0
    chief = json.loads((tmp_path / "report.json").read_text())
    assert [w["process_id"] for w in chief["workers"]] == [0, 1] and chief["distributed"]["replicas_agree"]

    write(tmp_path / "worker-1" / "report.json", 1, "b" * 64)
    from kerasenv.errors import KerasenvError

    with pytest.raises(KerasenvError, match="different weights"):
        multiworker.agree(tmp_path, 2, io.StringIO())
    assert json.loads((tmp_path / "report.json").read_text())["distributed"]["replicas_agree"] is False


def test_rocm_workers_get_no_device_node_so_no_amd_group(real_matrix, tmp_path):
    """Multi-worker training runs its workers on the CPU for every family (no --gpus): a ROCm
    worker gets no /dev/kfd, so it needs no render group. A GPU for workers must come through
    runner.gpu_and_groups, which adds the groups with the devices."""
    from types import SimpleNamespace

    created = []

    class Stop(Exception):
        pass

    def create(image, command, **kwargs):
        created.append(kwargs)
        raise Stop()

    network = SimpleNamespace(name="net", remove=lambda: None)
    client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: ref),
                             networks=SimpleNamespace(create=lambda name, labels: network),
                             containers=SimpleNamespace(create=create))
    import pytest

    with pytest.raises(Stop):
        multiworker.run(client, real_matrix.get("tf2.17-rocm6.3"), workers=2, runs_dir=tmp_path / "runs",
                        run_id="r", smoke_args=[], user="1000:1000")
    assert not {"devices", "group_add", "device_requests"} & created[0].keys()

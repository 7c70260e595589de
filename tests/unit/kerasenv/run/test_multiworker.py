"""Which worker a multi-worker run blames: the one that failed first, by Docker's clock."""

from __future__ import annotations

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


def test_fractions_of_different_length_sort_in_time_order():
    assert multiworker.finished_at("2026-12-01T13:40:01.25Z") < multiworker.finished_at("2026-12-01T13:40:01.3Z")
    assert multiworker.finished_at("2026-12-01T13:40:01Z") < multiworker.finished_at("2026-12-01T13:40:01.000000001Z")
    assert multiworker.finished_at("2026-12-01T13:40:02Z") > multiworker.finished_at("2026-12-01T13:40:01.999Z")


def test_all_workers_done_without_failure_is_no_failure():
    assert multiworker._watch([FakeContainer(0, "2026-12-01T13:40:01Z")] * 2, timeout=5) is None


def test_a_jax_or_torch_variant_is_refused_with_the_reason(real_matrix):
    import pytest

    from kerasenv.errors import UsageError

    for variant_id in ("jax0.12-cuda12.9", "torch2.15-cuda13.2"):
        with pytest.raises(UsageError, match="TensorFlow's TF_CONFIG scheme"):
            multiworker.run(None, real_matrix.get(variant_id), workers=2, runs_dir=None, run_id="x", smoke_args=[])


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

"""Keras on JAX across processes, the parts that run without JAX: where the job comes from, what
is refused before the start, the bounded wait for the coordinator, and Keras's own call with
JAX's timeouts set."""

from __future__ import annotations

import socket
import types

import pytest

from kerasenv_image.backends import jax_processes as jp
from kerasenv_image.smoke.errors import EXIT_USAGE, SmokeFailure

KERAS = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "w0:1234,w1:1234", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
         "KERAS_DISTRIBUTION_PROCESS_ID": "1"}


def failure(environ) -> SmokeFailure:
    with pytest.raises(SmokeFailure) as caught:
        job = jp.job_from_env(environ)
        jp.check(job, environ)
    return caught.value


def test_one_process_without_any_launcher_variables():
    assert jp.job_from_env({}) is None
    assert jp.job_from_env({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) is None


def test_kerass_variables_give_the_job_with_process_0s_address_as_coordinator():
    job = jp.job_from_env(KERAS)
    assert (job.launcher, job.num_processes, job.process_id, job.coordinator) == ("keras", 2, 1, "w0:1234")
    # only the coordinator's address: Keras allows it on JAX
    job = jp.job_from_env({**KERAS, "KERAS_DISTRIBUTION_JOB_ADDRESSES": "w0:1234"})
    assert job.coordinator == "w0:1234" and job.addresses == ["w0:1234"]


def test_kubeflow_trainers_jax_variables_are_accepted():
    job = jp.job_from_env({"JAX_COORDINATOR_ADDRESS": "trainjob-node-0-0.trainjob:1234", "JAX_NUM_PROCESSES": "4",
                           "JAX_PROCESS_ID": "3"})
    assert (job.launcher, job.num_processes, job.process_id) == ("kubeflow", 4, 3)
    assert job.coordinator == "trainjob-node-0-0.trainjob:1234"


def test_slurm_leaves_the_coordinator_to_jaxs_own_detection():
    job = jp.job_from_env({"SLURM_JOB_ID": "12", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
                           "SLURM_STEP_NODELIST": "node1"})
    assert (job.launcher, job.num_processes, job.process_id, job.coordinator) == ("slurm", 2, 1, None)
    assert jp.check(job, {}) == []


@pytest.mark.parametrize("change, words", [
    ({"KERAS_DISTRIBUTION_NUM_PROCESSES": "3"}, "lists 2 addresses but KERAS_DISTRIBUTION_NUM_PROCESSES is 3"),
    ({"KERAS_DISTRIBUTION_PROCESS_ID": "2"}, "KERAS_DISTRIBUTION_PROCESS_ID=2 is outside 0..1"),
    ({"KERAS_DISTRIBUTION_PROCESS_ID": "one"}, "KERAS_DISTRIBUTION_PROCESS_ID='one' is not a whole number"),
    ({"KERAS_DISTRIBUTION_PROCESS_ID": ""}, "KERAS_DISTRIBUTION_PROCESS_ID not set"),
    ({"KERAS_DISTRIBUTION_JOB_ADDRESSES": "w0,w1"}, "'w0' is not host:port"),
    ({"KERAS_DISTRIBUTION_JOB_ADDRESSES": "localhost:1234,w1:1234"},
     "the coordinator is localhost:1234 but process(es) run on w1:1234"),
    ({"https_proxy": "http://proxy:3128"}, "https_proxy set and NO_PROXY does not cover the coordinator w0"),
])
def test_what_would_hang_or_fail_late_is_refused_in_one_line_with_its_fix(change, words):
    caught = failure({**KERAS, **change})
    assert caught.exit_code == EXIT_USAGE and caught.kind == "distributed-config"
    assert words in caught.message and caught.fix and "\n" not in caught.message


def test_no_proxy_covering_the_coordinator_lets_proxies_be():
    environ = {**KERAS, "HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.org,w0"}
    assert jp.check(jp.job_from_env(environ), environ) == []
    assert jp.no_proxy_covers("w0.svc.cluster.local", ".cluster.local")
    assert jp.no_proxy_covers("10.1.2.3", "10.0.0.0/8")
    assert jp.no_proxy_covers("anything", "*")
    assert not jp.no_proxy_covers("w10", "w1")


def test_a_local_coordinator_for_processes_of_one_host_is_only_a_warning():
    environ = {**KERAS, "KERAS_DISTRIBUTION_JOB_ADDRESSES": "127.0.0.1:1234"}
    warnings = jp.check(jp.job_from_env(environ), environ)
    assert len(warnings) == 1 and "every process must run on this host" in warnings[0]


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_an_unreachable_coordinator_ends_within_the_timeout_naming_address_and_cause():
    clock = Clock()

    def connect(address, timeout):
        raise socket.gaierror("Name or service not known")

    job = jp.job_from_env(KERAS)
    with pytest.raises(SmokeFailure) as caught:
        jp.wait_for_coordinator(job, deadline=10, clock=clock, sleep=clock.sleep, connect=connect)
    assert caught.value.exit_code == jp.EXIT_DISTRIBUTED and caught.value.kind == "coordinator-unreachable"
    assert "process 1 could not reach the coordinator w0:1234" in caught.value.message
    assert "the name w0 does not resolve" in caught.value.message
    assert 10 <= clock.now <= 11


def test_the_coordinator_answering_late_is_waited_for():
    clock, tries = Clock(), []

    def connect(address, timeout):
        tries.append(address)
        if len(tries) < 3:
            raise ConnectionRefusedError(111, "Connection refused")
        return types.SimpleNamespace(close=lambda: None)

    jp.wait_for_coordinator(jp.job_from_env(KERAS), deadline=60, clock=clock, sleep=clock.sleep, connect=connect)
    assert tries == [("w0", 1234)] * 3


def test_process_0_does_not_wait_for_itself():
    environ = {**KERAS, "KERAS_DISTRIBUTION_PROCESS_ID": "0"}
    jp.wait_for_coordinator(jp.job_from_env(environ), deadline=0, connect=pytest.fail)


def test_keras_initializes_with_jaxs_timeouts_bounded_and_the_report_says_so():
    calls = []

    def jax_initialize(**kwargs):
        calls.append(kwargs)

    jax = types.SimpleNamespace(process_count=lambda: 2, process_index=lambda: 0, local_devices=lambda: [1, 2],
                                devices=lambda: [1, 2, 3, 4])
    jax.distributed = types.SimpleNamespace(initialize=jax_initialize)

    def keras_initialize(job_addresses=None, num_processes=None, process_id=None):
        # what Keras 3.15's JAX backend does: the first address is the coordinator
        jax.distributed.initialize(coordinator_address=job_addresses.split(",")[0], num_processes=num_processes,
                                   process_id=process_id)

    keras = types.SimpleNamespace(distribution=types.SimpleNamespace(initialize=keras_initialize))
    environ = {**KERAS, "KERAS_DISTRIBUTION_PROCESS_ID": "0", "KERASENV_INIT_TIMEOUT": "30"}
    report: dict = {}
    jp.initialize(jax, keras, jp.job_from_env(environ), report, environ=environ, log=lambda line: None)
    assert calls == [{"coordinator_address": "w0:1234", "num_processes": 2, "process_id": 0,
                      "initialization_timeout": 30, "heartbeat_timeout_seconds": jp.DEFAULT_HEARTBEAT_TIMEOUT_S}]
    assert jax.distributed.initialize is jax_initialize  # put back
    dist = report["distributed"]
    assert (dist["processes"], dist["chief"], dist["local_devices"], dist["global_devices"]) == (2, True, 2, 4)


def test_a_failed_join_is_one_line_with_the_coordinator():
    def jax_initialize(**kwargs):
        raise RuntimeError("DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect\\nmore")

    jax = types.SimpleNamespace(distributed=types.SimpleNamespace(initialize=jax_initialize))
    keras = types.SimpleNamespace(distribution=types.SimpleNamespace(
        initialize=lambda a, n, p: jax.distributed.initialize(coordinator_address=a)))
    environ = {**KERAS, "KERAS_DISTRIBUTION_PROCESS_ID": "0"}
    with pytest.raises(SmokeFailure) as caught:
        jp.initialize(jax, keras, jp.job_from_env(environ), {}, environ=environ, log=lambda line: None)
    assert caught.value.kind == "distributed-init" and caught.value.exit_code == jp.EXIT_DISTRIBUTED
    assert "coordinator w0:1234" in caught.value.message and "DEADLINE_EXCEEDED" in caught.value.message


SLURM_TASK_1 = {"SLURM_JOB_ID": "12", "SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "3",
                "SLURM_STEP_NODELIST": "node1"}


def test_more_slurm_tasks_on_a_node_than_its_gpus_are_refused_naming_both_counts():
    job = jp.job_from_env(SLURM_TASK_1)
    with pytest.raises(SmokeFailure) as caught:
        jp.check(job, SLURM_TASK_1, gpus=2)
    assert caught.value.exit_code == EXIT_USAGE
    assert "would use GPU 3 (SLURM_LOCALID=3) but sees 2 GPU(s)" in caught.value.message
    assert "--ntasks-per-node=2" in caught.value.fix


def test_a_slurm_task_given_its_own_gpu_uses_index_0_and_passes():
    env = {**SLURM_TASK_1, "JAX_LOCAL_DEVICE_IDS": "0"}  # slurm/kerasenv-jax.sbatch with KERASENV_GPUS=1
    assert jp.check(jp.job_from_env(env), env, gpus=1) == []
    assert jp.check(jp.job_from_env(SLURM_TASK_1), SLURM_TASK_1, gpus=0) == []  # the CPU: nothing to count


def test_visible_gpus_counts_the_device_nodes_and_cuda_visible_devices(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert jp.visible_gpus({}, dev=str(tmp_path)) == 2
    assert jp.visible_gpus({"CUDA_VISIBLE_DEVICES": "1"}, dev=str(tmp_path)) == 1
    assert jp.visible_gpus({}, dev=str(tmp_path / "none")) == 0


def test_process_0_refuses_a_coordinator_port_another_program_listens_on():
    import socket as sk

    with sk.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {**KERAS, "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"w0:{port},w1:{port}", "KERAS_DISTRIBUTION_PROCESS_ID": "0"}
        with pytest.raises(SmokeFailure) as caught:
            jp.check_port_free(jp.job_from_env(env), env)
    assert caught.value.exit_code == EXIT_USAGE
    assert f"cannot serve the coordinator on port {port}" in caught.value.message
    jp.check_port_free(jp.job_from_env(env), env)  # free again once the holder is gone


def test_only_process_0_checks_its_port_and_slurm_uses_jaxs_derived_port():
    seen = []
    jp.check_port_free(jp.job_from_env(KERAS), KERAS, bind=seen.append)  # process 1: nothing to serve
    assert seen == []
    slurm0 = {**SLURM_TASK_1, "SLURM_JOB_ID": "4100", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    jp.check_port_free(jp.job_from_env(slurm0), slurm0, bind=seen.append)
    jp.check_port_free(jp.job_from_env(slurm0), {**slurm0, "JAX_COORDINATOR_PORT": "5555"}, bind=seen.append)
    assert seen == [4100 % 4096 + 61440, 5555]

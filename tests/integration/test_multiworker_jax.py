"""Keras on JAX across containers (issue 37): `kerasenv multiworker` on the JAX CPU image, two
processes of one job (keras.distribution.initialize() from Keras's variables, a DataParallel mesh
over both processes' CPU devices, plain fit() on tf.data input), a user's own script the same way,
a worker killed mid-run, and the start-up failures that would otherwise hang."""

from __future__ import annotations

import json
import time

from .conftest import kerasenv, multiworker_left, start_cli

JAX_CPU = "jax0.12-cpu"
SHORT = ("--epochs", "2", "--steps-per-epoch", "16")


def test_two_jax_processes_train_one_model_and_end_with_the_same_weights(built_images, docker, tmp_path):
    runs = tmp_path / "runs"
    proc = kerasenv("multiworker", JAX_CPU, "--workers", "2", "--runs-dir", str(runs), "--run-id", "j2", "--json",
                    "--", *SHORT, timeout=900)
    chief = json.loads(proc.stdout)
    assert chief["status"] == "ok", proc.stderr[-3000:]
    dist = chief["distributed"]
    assert (dist["launcher"], dist["processes"], dist["process_id"], dist["chief"]) == ("keras", 2, 0, True)
    # two CPU devices per process (JAX_NUM_CPU_DEVICES=2): one mesh of four
    assert (dist["local_devices"], dist["global_devices"]) == (2, 4)
    assert chief["training"]["strategy"] == "DataParallel" and chief["training"]["replicas"] == 4
    assert dist["replicas_agree"] is True
    assert [w["process_id"] for w in chief["workers"]] == [0, 1]
    assert chief["workers"][0]["weights_sha256"] == chief["workers"][1]["weights_sha256"]
    worker = json.loads((runs / "j2" / "worker-1" / "report.json").read_text())
    assert worker["status"] == "ok" and worker["distributed"]["process_id"] == 1
    assert worker["training"]["loss_per_epoch"] == chief["training"]["loss_per_epoch"]
    assert "the 2 replicas agree" in proc.stderr
    assert multiworker_left(docker, JAX_CPU) == []


TRAIN = '''
import os
os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
import tensorflow as tf

keras.distribution.initialize()  # from KERAS_DISTRIBUTION_*: what `kerasenv multiworker` sets
import jax
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=keras.distribution.list_devices("cpu")))
keras.utils.set_random_seed(7)
x = np.random.default_rng(0).normal(size=(512, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64, drop_remainder=True)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(data, epochs=2, steps_per_epoch=8, verbose=0)
total = float(sum(np.asarray(w.value.addressable_data(0)).sum() for w in model.weights))
print(f"process {jax.process_index()} of {jax.process_count()}: {len(jax.devices())} devices, "
      f"loss {history.history['loss'][-1]:.4f}, weights {total:.6f}", flush=True)
'''


def test_a_users_own_script_gets_the_same_variables(built_images, docker, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    proc = kerasenv("multiworker", JAX_CPU, "--workers", "2", "--project", str(project),
                    "--runs-dir", str(tmp_path / "runs"), "--", "python", "train.py", timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the chief's output: process 0 of the 2, a mesh of both processes' devices
    assert "process 0 of 2: 4 devices" in proc.stderr, proc.stderr[-3000:]
    assert multiworker_left(docker, JAX_CPU) == []


def test_a_killed_jax_worker_ends_the_run_quickly_and_leaves_nothing(built_images, docker, tmp_path):
    proc = start_cli("multiworker", JAX_CPU, "--workers", "2", "--runs-dir", str(tmp_path / "runs"),
                     "--", "--epochs", "500")
    selector = {"label": ["io.kerasenv.kind=multiworker"], "name": r"^/?kerasenv-mw-.*-1$"}
    deadline = time.monotonic() + 240
    victim = None
    while victim is None:
        assert time.monotonic() < deadline and proc.poll() is None, "workers never started training"
        for container in docker.containers.list(filters=selector):
            if b"[smoke] training:" in container.logs():
                victim = container
        time.sleep(0.5)
    time.sleep(2)
    killed_at = time.monotonic()
    victim.kill()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "kerasenv: error: multi-worker training failed: worker 1 killed (SIGKILL)" in stderr
    assert time.monotonic() - killed_at < 30
    assert multiworker_left(docker, JAX_CPU) == []


def test_an_unreachable_coordinator_ends_within_the_bound_naming_it(built_images, container, tmp_path):
    env = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "nowhere-0:1234,me-1:1234", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
           "KERAS_DISTRIBUTION_PROCESS_ID": "1", "KERASENV_INIT_TIMEOUT": "8"}
    started = time.monotonic()
    code, out, err = container(f"kerasenv:{JAX_CPU}").run(
        ["sh", "-c", "python /opt/kerasenv/smoke_train.py --run-id u --output-dir /tmp/u >/dev/null; code=$?; "
                     "cat /tmp/u/worker-1/report.json; exit $code"], environment=env, timeout=120)
    assert code == 9, err[-2000:]
    assert time.monotonic() - started < 60
    report = json.loads(out)
    assert report["error"]["kind"] == "coordinator-unreachable"
    assert "could not reach the coordinator nowhere-0:1234" in report["error"]["message"]
    assert "does not resolve" in report["error"]["message"]


def test_localhost_as_coordinator_of_processes_elsewhere_is_refused_at_once(built_images, container):
    env = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "localhost:1234,worker-1:1234", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
           "KERAS_DISTRIBUTION_PROCESS_ID": "0", "https_proxy": "http://proxy.invalid:3128"}
    code, out, err = container(f"kerasenv:{JAX_CPU}").run(
        ["python", "/opt/kerasenv/smoke_train.py", "--run-id", "l", "--output-dir", "/tmp/l", "--json"],
        environment=env, timeout=120)
    assert code == 2, err[-2000:]
    report = json.loads(out[out.index("{"):])
    assert report["error"]["kind"] == "distributed-config"
    assert "the coordinator is localhost:1234 but process(es) run on worker-1:1234" in report["error"]["message"]
    assert "importing JAX" not in err  # refused before the framework was imported


def test_a_coordinator_port_in_use_is_refused_by_process_0_naming_it(built_images, container):
    """As with --network host (Slurm, by hand): something else on the host holds the port."""
    env = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "me-0:1234,me-1:1234", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
           "KERAS_DISTRIBUTION_PROCESS_ID": "0"}
    hold = ("import socket, time; s = socket.socket(); s.bind(('0.0.0.0', 1234)); s.listen(); "
            "open('/tmp/held', 'w').close(); time.sleep(120)")
    code, out, err = container(f"kerasenv:{JAX_CPU}").run(
        ["sh", "-c", f"python -c \"{hold}\" & while [ ! -e /tmp/held ]; do sleep 0.1; done; "
                     "python /opt/kerasenv/smoke_train.py --run-id p --output-dir /tmp/p --json"],
        environment=env, timeout=120)
    assert code == 2, err[-2000:]
    report = json.loads(out[out.index("{"):])
    assert report["error"]["kind"] == "distributed-config"
    assert "cannot serve the coordinator on port 1234" in report["error"]["message"]

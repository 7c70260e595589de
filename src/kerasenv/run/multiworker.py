"""`kerasenv multiworker`: N containers on one Docker network training together with
tf.distribute.MultiWorkerMirroredStrategy, one TF_CONFIG per worker.

The same TF_CONFIG scheme spans hosts: list every worker's host:port in the cluster,
give each its own task index (see the README and k8s/multiworker-job.yaml).
A worker that dies fails the whole run at once, with its name and exit status, instead
of leaving its peers waiting on a collective.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..engine import docker_client
from ..errors import KerasenvError, UsageError
from ..matrix.schema import Variant
from .runner import DEFAULT_SHM, RUNS_IN_CONTAINER, default_user, prepare_runs_dir, smoke_command

PORT = 12345


def tf_config(hosts: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": [f"{h}:{PORT}" for h in hosts]},
                       "task": {"type": "worker", "index": index}})


@dataclass
class WorkerFailure:
    index: int
    exit_code: int
    oom_killed: bool
    tail: str


def describe(failure: WorkerFailure) -> str:
    how = {137: "killed (SIGKILL)", 143: "stopped (SIGTERM)"}.get(failure.exit_code, f"exit {failure.exit_code}")
    if failure.oom_killed:
        how = "OOM-killed"
    return f"worker {failure.index} {how}"


def run(client, v: Variant, *, workers: int, runs_dir: Path, run_id: str, smoke_args: list[str],
        user: str | None = None, shm_size: str = DEFAULT_SHM, timeout: float = 3600.0,
        gpus: list | None = None, stream=sys.stderr) -> int:
    """`gpus`: one resolved GPU access per worker (gpu_request.per_worker, then the host's
    resolver: a GPU or MIG slice each), or None for the CPU."""
    from docker.errors import APIError, ImageNotFound

    if workers < 2:
        raise UsageError("--workers must be at least 2 (one worker is `kerasenv smoke`)")
    if v.backend != "tensorflow":
        # TF_CONFIG drives tf.distribute's MultiWorkerMirroredStrategy; Keras on JAX spans
        # processes with keras.distribution.initialize() instead, and Keras 3.15's PyTorch
        # backend has no multi-process fit() at all.
        raise UsageError(f"{v.id} trains on {v.framework_name}: `kerasenv multiworker` is TensorFlow's "
                         "TF_CONFIG scheme; use a tf2.* variant (JAX: keras.distribution.initialize())")
    try:
        client.images.get(v.image_ref)
    except ImageNotFound:
        raise UsageError(f"{v.image_ref} is not built here: run `make build VARIANT={v.id}`") from None
    user = user or default_user()
    runs = prepare_runs_dir(runs_dir, user)
    tag = uuid.uuid4().hex[:8]
    labels = docker_client.container_labels("multiworker", **{"io.kerasenv.run": tag})
    hosts = [f"kerasenv-mw-{tag}-{i}" for i in range(workers)]
    network = client.networks.create(f"kerasenv-mw-{tag}", labels=labels)
    containers = []
    try:
        for index, host in enumerate(hosts):
            container = client.containers.create(
                v.image_ref, smoke_command(v, run_id, smoke_args),
                name=host, hostname=host, network=network.name, init=True, shm_size=shm_size, user=user,
                environment={"TF_CONFIG": tf_config(hosts, index), "TF_CPP_MIN_LOG_LEVEL": "2"},
                volumes={str(runs): {"bind": RUNS_IN_CONTAINER, "mode": "rw"}}, labels=labels,
                **(dict(gpus[index].kwargs) if gpus else {}))
            containers.append(container)
        for container in containers:
            container.start()
        print(f"kerasenv: {workers} workers on network {network.name}: {', '.join(hosts)}", file=stream)
        failure = _watch(containers, timeout)
        if failure is not None:
            for container in containers:
                _stop(container)
            print(failure.tail, file=stream)
            raise KerasenvError(f"multi-worker training failed: {describe(failure)}; the other workers "
                                "were stopped (see its last lines above)")
        print(containers[0].logs(stdout=False, stderr=True).decode(errors="replace")[-1500:], file=stream)
        return 0
    except APIError as exc:
        raise KerasenvError(f"Docker could not run the workers: {str(exc.explanation or exc)[:300]}") from None
    finally:
        for container in containers:
            try:
                container.remove(force=True)
            except APIError:
                pass
        network.remove()


def finished_at(stamp: str) -> tuple[str, int]:
    """Docker's State.FinishedAt ("2026-12-01T13:40:01.12345Z", RFC 3339 with up to 9
    fraction digits, trailing zeros dropped) as a key that sorts in time order."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return whole, int((fraction + "000000000")[:9] or 0)


def _watch(containers, timeout: float) -> WorkerFailure | None:
    """Poll until every worker exited; the failure is the worker that failed first.

    "First" by Docker's FinishedAt, not by the order of the poll: a killed worker makes
    its peers fail within a second, and the poll may see them in the same round."""
    deadline = time.monotonic() + timeout
    done: set[int] = set()
    while len(done) < len(containers):
        if time.monotonic() > deadline:
            return WorkerFailure(-1, 124, False, f"no result within {timeout:.0f} s")
        failed = []
        for index, container in enumerate(containers):
            if index in done:
                continue
            container.reload()
            state = container.attrs["State"]
            if state["Status"] in ("exited", "dead"):
                done.add(index)
                if state["ExitCode"] != 0:
                    failed.append((state.get("FinishedAt") or "", index, container, state))
        if failed:
            _, index, container, state = min(failed, key=lambda f: (finished_at(f[0]), f[1]))
            tail = container.logs(stdout=False, stderr=True).decode(errors="replace")[-1500:]
            return WorkerFailure(index, state["ExitCode"], bool(state.get("OOMKilled")), tail)
        time.sleep(0.5)
    return None


def _stop(container) -> None:
    try:
        container.kill()
    except Exception:  # already gone
        pass

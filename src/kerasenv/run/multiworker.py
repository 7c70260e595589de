"""`kerasenv multiworker`: N containers on one Docker network training together, each its own
process of one job, the way the backend spans hosts:

  TensorFlow  tf.distribute.MultiWorkerMirroredStrategy, one TF_CONFIG per worker
              (k8s/multiworker-job.yaml spans hosts the same way);
  JAX         keras.distribution.initialize() from Keras's variables, KERAS_DISTRIBUTION_JOB_ADDRESSES
              (every worker's host:port, process 0's first: the coordinator),
              KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID, then a DataParallel
              mesh over every process's devices and plain fit() (issue 37; k8s/jax-multihost-*.yaml).

The smoke training by default, or the user's own command (`-- python train.py`, the current
directory at /workspace) with the same variables, so the same script runs by hand across hosts.
A worker that dies fails the whole run at once, with its name and exit status, instead
of leaving its peers waiting on a collective; after a smoke run on JAX the replicas must hold
the same weights (each process's digest in its report), or the run fails.
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

PORT = 12345  # TensorFlow's workers
JAX_PORT = 1234  # JAX's coordinator (process 0)
TORCH_PORT = 29500  # torchrun's rendezvous on worker 0 (its own default)
# What the PyTorch workers run by default: Keras's DDP guide for torchrun (a Keras model, torch DDP,
# a custom loop), shipped in the image.
TORCH_EXAMPLE = ["-m", "kerasenv_image.examples.keras_torch_ddp"]


def tf_config(hosts: list[str], index: int, port: int = PORT) -> str:
    return json.dumps({"cluster": {"worker": [f"{h}:{port}" for h in hosts]},
                       "task": {"type": "worker", "index": index}})


def keras_distribution_env(hosts: list[str], index: int, port: int = JAX_PORT, cpu_devices: int | None = None,
                           init_timeout: int | None = None) -> dict[str, str]:
    """What each JAX worker gets: Keras's three variables, NO_PROXY over the workers (a proxy
    variable that reaches the container would otherwise carry the coordinator's gRPC), and
    JAX_NUM_CPU_DEVICES for several CPU devices per process on the CPU."""
    env = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(f"{h}:{port}" for h in hosts),
           "KERAS_DISTRIBUTION_NUM_PROCESSES": str(len(hosts)),
           "KERAS_DISTRIBUTION_PROCESS_ID": str(index),
           "NO_PROXY": ",".join(hosts), "no_proxy": ",".join(hosts)}
    if cpu_devices:
        env["JAX_NUM_CPU_DEVICES"] = str(cpu_devices)
    if init_timeout:
        env["KERASENV_INIT_TIMEOUT"] = str(init_timeout)
    return env


def check_options(v: Variant, *, workers: int, command: list[str] | None, cpu_devices: int | None,
                  port: int | None, gpus) -> None:
    """Bad flags are refused before anything starts (one line each)."""
    if workers < 2:
        raise UsageError(f"--workers {workers}: at least 2 (one worker is `kerasenv smoke`)")
    if v.backend == "torch" and command and torch_script(command) is None:
        raise UsageError(f"on PyTorch each worker runs a Python script under torchrun: give `-- python train.py ...` "
                         f"or `-- python -m module ...`, not {' '.join(command[:2])}")
    if v.backend != "jax" and cpu_devices:
        raise UsageError(f"--cpu-devices is JAX's (JAX_NUM_CPU_DEVICES); {v.id} trains on {v.framework_name}: "
                         "drop it (TensorFlow: --logical-cpus of the smoke, after --)")
    if v.backend == "tensorflow" and command:
        raise UsageError(f"a command after -- runs on the JAX and PyTorch images ({v.id} trains on TensorFlow, "
                         "whose workers run the smoke training): pass its flags after --")
    if cpu_devices is not None and not 1 <= cpu_devices <= 64:
        raise UsageError(f"--cpu-devices {cpu_devices}: give 1 to 64 CPU devices per worker")
    if cpu_devices and gpus:
        raise UsageError("--cpu-devices is for the CPU; with --gpus each worker trains on its GPU")
    if port is not None and not 1024 <= port <= 65535:
        raise UsageError(f"--port {port}: pick a port from 1024 to 65535")


def torch_script(command: list[str]) -> list[str] | None:
    """`python train.py a b` -> ["train.py", "a", "b"]; `python -m m` -> ["-m", "m"]: what torchrun
    takes after its own options. None for anything else."""
    if len(command) >= 2 and command[0] in ("python", "python3") and (command[1] != "-m" or len(command) >= 3):
        return command[1:]
    return None


def torchrun_command(hosts: list[str], index: int, script: list[str], port: int = TORCH_PORT) -> list[str]:
    """One process per container, the static rendezvous on worker 0 (torchrun's --master-addr)."""
    return ["torchrun", "--nnodes", str(len(hosts)), "--node-rank", str(index), "--nproc-per-node", "1",
            "--master-addr", hosts[0], "--master-port", str(port), *script]


def is_command(extra: list[str]) -> bool:
    """`-- python train.py` is a command; `-- --epochs 2` are smoke flags."""
    return bool(extra) and not extra[0].startswith("-")


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
        gpus: list | None = None, stream=sys.stderr, command: list[str] | None = None,
        cpu_devices: int | None = None, port: int | None = None, init_timeout: int | None = None,
        project: Path | None = None) -> int:
    """`gpus`: one resolved GPU access per worker (gpu_request.per_worker, then the host's
    resolver: a GPU or MIG slice each), or None for the CPU. `command`: the user's own (JAX),
    run in `project` mounted at /workspace, instead of the smoke training."""
    from docker.errors import APIError, ImageNotFound

    check_options(v, workers=workers, command=command, cpu_devices=cpu_devices, port=port, gpus=gpus)
    jax, torch = v.backend == "jax", v.backend == "torch"
    if jax and not gpus and cpu_devices is None:
        cpu_devices = 2  # a mesh of several devices per process, as on a GPU host with several GPUs
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
    volumes = {str(runs): {"bind": RUNS_IN_CONTAINER, "mode": "rw"}}
    if command and project is not None:
        volumes = {str(project.resolve()): {"bind": "/workspace", "mode": "rw"}, **volumes}
    try:
        for index, host in enumerate(hosts):
            worker_command = command or smoke_command(v, run_id, smoke_args)
            if jax:
                environment = keras_distribution_env(hosts, index, port or JAX_PORT, cpu_devices, init_timeout)
            elif torch:
                environment = {"NO_PROXY": ",".join(hosts), "no_proxy": ",".join(hosts),
                               **({"KERASENV_INIT_TIMEOUT": str(init_timeout)} if init_timeout else {})}
                worker_command = torchrun_command(hosts, index, torch_script(command) if command else
                                                  [*TORCH_EXAMPLE, *smoke_args], port or TORCH_PORT)
            else:
                environment = {"TF_CONFIG": tf_config(hosts, index, port or PORT), "TF_CPP_MIN_LOG_LEVEL": "2"}
            container = client.containers.create(
                v.image_ref, worker_command,
                name=host, hostname=host, network=network.name, init=True, shm_size=shm_size, user=user,
                environment=environment, working_dir="/workspace" if command else None,
                volumes=volumes, labels=labels,
                **(dict(gpus[index].kwargs) if gpus else {}))
            containers.append(container)
        for container in containers:
            container.start()
        how = ("keras.distribution over JAX processes" if jax else "torch DDP under torchrun" if torch
               else "MultiWorkerMirroredStrategy")
        print(f"kerasenv: {workers} workers ({how}) on network {network.name}: {', '.join(hosts)}", file=stream)
        failure = _watch(containers, timeout)
        if failure is not None:
            for container in containers:
                _stop(container)
            print(failure.tail, file=stream)
            raise KerasenvError(f"multi-worker training failed: {describe(failure)}; the other workers "
                                "were stopped (see its last lines above)")
        if command or torch:
            print(containers[0].logs(stdout=True, stderr=True).decode(errors="replace")[-1500:], file=stream)
            return 0
        print(containers[0].logs(stdout=False, stderr=True).decode(errors="replace")[-1500:], file=stream)
        if jax:
            return agree(runs / run_id, workers, stream)
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


def agree(run_dir: Path, workers: int, stream) -> int:
    """The chief's report gets every worker's figures ("workers") and whether their replicas hold
    the same weights ("replicas_agree"); a disagreement fails the run."""
    paths = [run_dir / "report.json"] + [run_dir / f"worker-{i}" / "report.json" for i in range(1, workers)]
    reports = []
    for path in paths:
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise KerasenvError(f"multi-worker training: {path} could not be read ({exc}); every worker "
                                "exited 0, so its runs directory is not the one mounted") from None
    rows = []
    for i, report in enumerate(reports):
        dist, training = report.get("distributed") or {}, report.get("training") or {}
        rows.append({"process_id": dist.get("process_id", i), "status": report.get("status"),
                     "local_devices": dist.get("local_devices"), "init_seconds": dist.get("init_seconds"),
                     "final_loss": training.get("final_loss"), "samples_per_second": training.get("samples_per_second"),
                     "weights_sha256": dist.get("weights_sha256")})
        print(f"kerasenv: worker {i}: {report.get('status')}, final loss {training.get('final_loss')}, "
              f"{dist.get('local_devices')} local device(s), weights {str(dist.get('weights_sha256'))[:12]}",
              file=stream)
    digests = {r["weights_sha256"] for r in rows}
    same = len(digests) == 1 and None not in digests
    chief = reports[0]
    chief["workers"] = rows
    chief.setdefault("distributed", {})["replicas_agree"] = same
    tmp = paths[0].with_suffix(".json.tmp")
    tmp.write_text(json.dumps(chief, indent=2, sort_keys=True))
    tmp.replace(paths[0])
    if not same:
        raise KerasenvError(f"multi-worker training: the {workers} replicas ended with different weights "
                            f"({', '.join(sorted(str(d)[:12] for d in digests))}): the processes did not train as one "
                            "job; see each worker's report.json")
    print(f"kerasenv: the {workers} replicas agree (same final weights)", file=stream)
    return 0


def finished_at(stamp: str) -> tuple[str, int]:
    """Docker's State.FinishedAt ("2026-12-01T13:40:01.12345Z", RFC 3339 with up to 9
    fraction digits, trailing zeros dropped) as a key that sorts in time order."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return whole, int((fraction + "000000000")[:9] or 0)


SETTLE_S = 3.0


def _watch(containers, timeout: float, settle: float = SETTLE_S, poll: float = 0.5) -> WorkerFailure | None:
    """Poll until every worker exited; the failure is the worker that failed first.

    "First" by Docker's FinishedAt (the exit time containerd recorded), not by the order of the
    poll: a killed worker makes its peers fail within a second. Once a failure is seen, the
    others get `settle` seconds to be seen exited too: on a loaded machine the engine showed a
    peer's exit 8 while the worker killed before it still read "running" (CI, the cold run of
    2a3dcb5: "worker 0 exit 8" named instead of "worker 1 killed")."""
    deadline = time.monotonic() + timeout
    done: set[int] = set()
    failed = []
    settled_at = None
    while len(done) < len(containers):
        now = time.monotonic()
        if now > deadline:
            return WorkerFailure(-1, 124, False, f"no result within {timeout:.0f} s")
        if settled_at is not None and now >= settled_at:
            break
        for index, container in enumerate(containers):
            if index in done:
                continue
            container.reload()
            state = container.attrs["State"]
            if state["Status"] in ("exited", "dead"):
                done.add(index)
                if state["ExitCode"] != 0:
                    failed.append((state.get("FinishedAt") or "", index, container, state))
        if failed and settled_at is None:
            settled_at = time.monotonic() + settle
        if len(done) < len(containers):
            time.sleep(poll)
    if not failed:
        return None
    _, index, container, state = min(failed, key=lambda f: (finished_at(f[0]), f[1]))
    tail = container.logs(stdout=False, stderr=True).decode(errors="replace")[-1500:]
    return WorkerFailure(index, state["ExitCode"], bool(state.get("OOMKilled")), tail)


def _stop(container) -> None:
    try:
        container.kill()
    except Exception:  # already gone
        pass

"""Keras on JAX across processes (issue 37): keras.distribution.initialize() from what a launcher
set, checked first, with JAX's own timeouts bounded, so that every way it goes wrong ends in one
line naming the cause instead of a hang.

Where the job comes from (the first that is set wins):
  keras     KERAS_DISTRIBUTION_JOB_ADDRESSES (all "host:port", or only the coordinator's: process
            0's), KERAS_DISTRIBUTION_NUM_PROCESSES, KERAS_DISTRIBUTION_PROCESS_ID: Keras's own
            variables (keras/src/distribution/distribution_lib.py); `kerasenv multiworker` and
            the manifests in k8s/ set them.
  kubeflow  JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID: what Kubeflow Trainer's
            jax-distributed runtime sets (docs/using/multi-worker.md cites it).
  slurm     SLURM_JOB_ID with more than one task (SLURM_NTASKS): JAX's own Slurm detection derives
            the coordinator (the step's first node, a port from the job id), the count and the id
            (jax/_src/clusters/slurm_cluster.py); slurm/kerasenv-jax.sbatch passes SLURM_* in.

What users hit, and what this does about it (jax-ml/jax issues):
  a coordinator named localhost while the other processes are elsewhere (DEADLINE_EXCEEDED after
  5 minutes): refused; proxy variables that send the coordinator's gRPC through a proxy and hang
  the start: refused unless NO_PROXY covers the coordinator; a count that does not match the
  addresses: refused; an unreachable coordinator: a bounded wait (KERASENV_INIT_TIMEOUT, default
  120 s, JAX's is 300) that names the address; a process that dies mid-run: JAX's heartbeat
  (KERASENV_HEARTBEAT_TIMEOUT, default 60 s, JAX's is 100) ends the others (#38503: without a
  bound they wait on the collective for ever), and `kerasenv multiworker` stops them at once.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import time
from dataclasses import dataclass, field

from ..smoke.errors import EXIT_DISTRIBUTED, EXIT_USAGE, SmokeFailure

KERAS_VARS = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")
KUBEFLOW_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
PROXY_VARS = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy",
              "HTTP_PROXY", "HTTPS_PROXY", "GRPC_PROXY", "ALL_PROXY")
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
DEFAULT_INIT_TIMEOUT_S = 120
DEFAULT_HEARTBEAT_TIMEOUT_S = 60


@dataclass
class Job:
    launcher: str  # keras | kubeflow | slurm
    num_processes: int
    process_id: int
    coordinator: str | None  # host:port; None where JAX derives it (Slurm)
    addresses: list[str] = field(default_factory=list)
    names: tuple[str, str, str] = KERAS_VARS  # the variables it came from, for the messages


def _usage(message: str, fix: str) -> SmokeFailure:
    return SmokeFailure(EXIT_USAGE, "distributed-config", message, fix)


def _int(environ, name: str) -> int:
    raw = environ.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise _usage(f"{name}={raw!r} is not a whole number", f"set {name} to a number (process count or id)") \
            from None


def split_address(address: str, name: str) -> tuple[str, int]:
    """"host:port" or "[v6]:port" -> (host, port), or a one-line error naming the variable."""
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _usage(f"{name}: {address!r} is not host:port", f"write it as host:port, e.g. worker-0:1234 in {name}")
    return host, int(port)


def job_from_env(environ=os.environ) -> Job | None:
    """The multi-process job the environment describes, or None for a single process."""
    if any(environ.get(n) for n in KERAS_VARS):
        names = KERAS_VARS
        launcher = "keras"
    elif any(environ.get(n) for n in KUBEFLOW_VARS):
        names = KUBEFLOW_VARS
        launcher = "kubeflow"
    elif environ.get("SLURM_JOB_ID") and (environ.get("SLURM_NTASKS") or environ.get("SLURM_STEP_NUM_TASKS")):
        tasks = _int(environ, "SLURM_NTASKS" if environ.get("SLURM_NTASKS") else "SLURM_STEP_NUM_TASKS")
        if tasks < 2:
            return None
        return Job("slurm", tasks, _int(environ, "SLURM_PROCID"), None,
                   names=("SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID"))
    else:
        return None
    addresses_var, count_var, id_var = names
    missing = [n for n in names if not environ.get(n)]
    if missing:
        raise _usage(f"{', '.join(missing)} not set (the others of {', '.join(names)} are)",
                     "set all three: the coordinator's host:port (process 0), the process count and this process's id")
    addresses = [a.strip() for a in environ[addresses_var].split(",") if a.strip()]
    count, pid = _int(environ, count_var), _int(environ, id_var)
    if count < 1:
        raise _usage(f"{count_var}={count}: at least 1 process", f"set {count_var} to the number of processes")
    if not 0 <= pid < count:
        raise _usage(f"{id_var}={pid} is outside 0..{count - 1} ({count_var}={count})",
                     f"give each process a distinct id from 0 to {count - 1}; 0 runs the coordinator")
    if len(addresses) > 1 and len(addresses) != count:
        raise _usage(f"{addresses_var} lists {len(addresses)} addresses but {count_var} is {count}",
                     f"list one host:port per process (process 0's first), or only the coordinator's")
    for address in addresses:
        split_address(address, addresses_var)
    return Job(launcher, count, pid, addresses[0], addresses, names)


def is_local(host: str) -> bool:
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def no_proxy_covers(host: str, no_proxy: str) -> bool:
    """curl's and gRPC's reading of NO_PROXY: "*", a host, a domain suffix (".example.org" or
    "example.org"), an IP or a CIDR range."""
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name = entry.lstrip(".")
        if host.lower() == name or host.lower().endswith("." + name):
            return True
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False):
                return True
    return False


def visible_gpus(environ=os.environ, dev: str = "/dev") -> int:
    """How many NVIDIA GPUs this process can use: the container's /dev/nvidia<N> devices (what
    --gpus gave it), fewer where CUDA_VISIBLE_DEVICES lists fewer. 0 on the CPU."""
    import re

    try:
        devices = [n for n in os.listdir(dev) if re.fullmatch(r"nvidia\d+", n)]
    except OSError:
        devices = []
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and devices:
        return min(len(devices), len([d for d in listed.split(",") if d.strip()]))
    return len(devices)


def check_gpus(job: Job, environ=os.environ, gpus: int | None = None) -> None:
    """More processes on a node than GPUs: JAX's Slurm detection gives each task the device of
    its local rank (local_device_ids = [SLURM_LOCALID], or JAX_LOCAL_DEVICE_IDS), and a rank
    past the last GPU fails deep in the backend's start-up. Refused here, naming the counts."""
    gpus = visible_gpus(environ) if gpus is None else gpus
    if job.launcher != "slurm" or gpus == 0:
        return
    chosen = environ.get("JAX_LOCAL_DEVICE_IDS") or environ.get("SLURM_LOCALID") or "0"
    name = "JAX_LOCAL_DEVICE_IDS" if environ.get("JAX_LOCAL_DEVICE_IDS") else "SLURM_LOCALID"
    ids = [int(i) for i in chosen.split(",") if i.strip().isdigit()]
    past = [i for i in ids if i >= gpus]
    if past:
        raise _usage(f"Slurm task {job.process_id} would use GPU {past[0]} ({name}={chosen}) but sees {gpus} GPU(s): "
                     "more processes on its node than GPUs",
                     f"run at most {gpus} task(s) per node (--ntasks-per-node={gpus}), or give each task its own GPU "
                     "(slurm/kerasenv-jax.sbatch: KERASENV_GPUS=1)")


def check(job: Job, environ=os.environ, gpus: int | None = None) -> list[str]:
    """Refuse what is known to hang or fail late; return warnings (one line each)."""
    warnings: list[str] = []
    check_gpus(job, environ, gpus)
    if job.coordinator is None:
        return warnings
    addresses_var = job.names[0]
    host, port = split_address(job.coordinator, addresses_var)
    if job.num_processes > 1 and is_local(host):
        elsewhere = [a for a in job.addresses[1:] if not is_local(split_address(a, addresses_var)[0])]
        if elsewhere:
            raise _usage(f"{addresses_var}: the coordinator is {job.coordinator} but process(es) run on "
                         f"{', '.join(elsewhere)}: they would dial their own localhost",
                         "name process 0's host as the other processes reach it (its DNS name or IP), not localhost")
        warnings.append(f"the coordinator {job.coordinator} is local: every process must run on this host "
                        "(for several hosts give process 0's DNS name or IP)")
    proxies = [n for n in PROXY_VARS if environ.get(n)]
    no_proxy = ",".join(environ.get(n, "") for n in ("no_proxy", "NO_PROXY"))
    if proxies and not is_local(host) and not no_proxy_covers(host, no_proxy):
        raise _usage(f"{', '.join(proxies)} set and NO_PROXY does not cover the coordinator {host}: gRPC would send "
                     "the processes' start-up through the proxy and hang",
                     f"unset {' '.join(proxies)} for the run, or add {host} to NO_PROXY and no_proxy")
    return warnings


def coordinator_port(job: Job, environ=os.environ) -> int | None:
    """The port process 0 serves the coordinator on: its address's, or under Slurm what JAX
    derives (JAX_COORDINATOR_PORT, else SLURM_JOB_ID % 4096 + 61440: slurm_cluster.py)."""
    if job.coordinator is not None:
        return split_address(job.coordinator, job.names[0])[1]
    if environ.get("JAX_COORDINATOR_PORT"):
        return _int(environ, "JAX_COORDINATOR_PORT")
    if environ.get("SLURM_JOB_ID", "").isdigit():
        return int(environ["SLURM_JOB_ID"]) % 4096 + 61440
    return None


def check_port_free(job: Job, environ=os.environ, bind=None) -> None:
    """Process 0: the coordinator's port must be free where it listens (all interfaces). With
    --network host (Slurm, by hand) another program may hold it, and JAX's gRPC server then fails
    deep in its start-up; say which port instead."""
    port = coordinator_port(job, environ) if job.process_id == 0 else None
    if port is None:
        return

    def default_bind(port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free
            sock.bind(("0.0.0.0", port))

    try:
        (bind or default_bind)(port)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return  # not ours to judge (e.g. no IPv4): JAX reports it
        where = "JAX_COORDINATOR_PORT" if job.launcher == "slurm" else job.names[0]
        raise _usage(f"process 0 cannot serve the coordinator on port {port}: another program on this host "
                     "listens there", f"pick a free port ({where}; `kerasenv multiworker --port`)") from None


def wait_for_coordinator(job: Job, deadline: float, clock=time.monotonic, sleep=time.sleep,
                         connect=socket.create_connection) -> None:
    """A process other than 0: retry until the coordinator answers or the deadline passes, then
    say which address could not be reached and why (JAX's own error comes only after its timeout,
    as DEADLINE_EXCEEDED without the address)."""
    if job.coordinator is None or job.process_id == 0:
        return
    host, port = split_address(job.coordinator, job.names[0])
    reason = "no answer"
    while True:
        try:
            connect((host, port), timeout=2).close()
            return
        except socket.gaierror:
            reason = f"the name {host} does not resolve"
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
        if clock() >= deadline:
            raise SmokeFailure(EXIT_DISTRIBUTED, "coordinator-unreachable",
                               f"process {job.process_id} could not reach the coordinator {job.coordinator} within "
                               f"the start-up timeout ({reason})",
                               "start process 0 (it serves the coordinator), and check the address, the port and "
                               "any firewall between the hosts; KERASENV_INIT_TIMEOUT sets the wait")
        sleep(1.0)


@contextlib.contextmanager
def _bounded(jax, init_timeout: int, heartbeat: int):
    """keras.distribution.initialize() calls jax.distributed.initialize() with JAX's defaults (300 s
    to start, 100 s of missed heartbeats); Keras 3.15 offers no way to pass others. Its own path
    (address checks, the process-wide random seed) is what we want, so the call is left to Keras
    and only the timeouts are set, for its duration."""
    original = jax.distributed.initialize

    def initialize(*args, **kwargs):
        kwargs.setdefault("initialization_timeout", init_timeout)
        kwargs.setdefault("heartbeat_timeout_seconds", heartbeat)
        return original(*args, **kwargs)

    jax.distributed.initialize = initialize
    try:
        yield
    finally:
        jax.distributed.initialize = original


def initialize(jax, keras, job: Job, report: dict, environ=os.environ, log=print) -> None:
    """Form the job; fills report["distributed"]. Must run before any JAX computation."""
    init_timeout = _int(environ, "KERASENV_INIT_TIMEOUT") if environ.get("KERASENV_INIT_TIMEOUT") \
        else DEFAULT_INIT_TIMEOUT_S
    heartbeat = _int(environ, "KERASENV_HEARTBEAT_TIMEOUT") if environ.get("KERASENV_HEARTBEAT_TIMEOUT") \
        else DEFAULT_HEARTBEAT_TIMEOUT_S
    for line in check(job, environ):
        log(f"WARNING: {line}")
    check_port_free(job, environ)
    started = time.monotonic()
    wait_for_coordinator(job, started + init_timeout)
    remaining = max(5, round(init_timeout - (time.monotonic() - started)))
    log(f"joining {job.num_processes} processes as process {job.process_id} "
        f"({job.launcher}; coordinator {job.coordinator or 'derived by JAX from SLURM_*'})")
    # JAX warns about any variable with "_proxy" in its name, NO_PROXY included (which is what
    # `kerasenv multiworker` and k8s/ set to keep the coordinator off a proxy): check() above has
    # already refused the proxies that would reach it, so that warning only misleads.
    with contextlib.suppress(Exception):
        jax.config.update("jax_check_proxy_envs", False)
    try:
        with _bounded(jax, remaining, heartbeat):
            if job.launcher == "slurm":
                keras.distribution.initialize()
            else:
                keras.distribution.initialize(",".join(job.addresses), job.num_processes, job.process_id)
    except Exception as exc:  # noqa: BLE001 - JAX raises its runtime errors, Keras ValueError
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise SmokeFailure(EXIT_DISTRIBUTED, "distributed-init",
                           f"process {job.process_id} could not join the {job.num_processes}-process job "
                           f"(coordinator {job.coordinator or 'from SLURM_*'}): {first}",
                           "start every process within KERASENV_INIT_TIMEOUT of the first, with the same "
                           "coordinator address and count and distinct ids") from None
    report["distributed"] = {
        "strategy": "DataParallel", "launcher": job.launcher, "processes": jax.process_count(),
        "process_id": jax.process_index(), "task_index": jax.process_index(), "chief": jax.process_index() == 0,
        "coordinator": job.coordinator, "local_devices": len(jax.local_devices()),
        "global_devices": len(jax.devices()), "init_seconds": round(time.monotonic() - started, 2),
        "init_timeout_s": init_timeout, "heartbeat_timeout_s": heartbeat,
    }


def weights_digest(model) -> str:
    """A digest of every weight's bytes as this process holds it: equal in every process when
    the replicas agree (DataParallel keeps them replicated)."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for weight in model.weights:
        value = weight.value
        shard = value.addressable_data(0) if hasattr(value, "addressable_data") else value
        digest.update(np.ascontiguousarray(np.asarray(shard)).tobytes())
    return digest.hexdigest()

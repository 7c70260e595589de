"""Run a variant's container through the docker SDK, and always remove it.

Every container gets: the project label (so `make clean` finds leftovers of a killed
CLI), an init process (signals reach the workload; zombies reaped), a shared-memory
size of at least 2 GB, the invoking user's UID:GID so files in the mounted project and
./runs belong to the user, group 0 on top (the images' venv is group-0 writable, so
`pip install` works under any UID), and removal on every exit path, Ctrl-C included.
`interactive=True` gives the container a TTY and attaches this terminal to it.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kerasenv_image.smoke.errors import EXIT_NO_GPU  # the smoke's "no GPU" code: one meaning, one number

from ..engine import gpu_request
from . import mounts as mounts_mod
from ..engine import docker_client
from ..engine.docker_client import PROJECT_LABEL
from ..errors import KerasenvError, UsageError
from ..matrix.schema import Variant

DEFAULT_SHM = "2g"
RUNS_IN_CONTAINER = "/workspace/runs"
SMOKE_SCRIPT = "/opt/kerasenv/smoke_train.py"  # in every image
# The driver's PTX JIT cache (CUDA_CACHE_PATH in the CUDA images): a named volume per image,
# so kernels JIT-compiled for Hopper/Blackwell survive --rm and --user (HOME=/).
CUDA_CACHE_IN_CONTAINER = "/var/cache/kerasenv/cuda"


class RunTimeout(KerasenvError):
    """The container ran longer than the caller's timeout."""


class NoGpuRuntime(KerasenvError):
    """Docker cannot hand GPUs to containers on this host."""

    exit_code = EXIT_NO_GPU


@dataclass
class RunResult:
    exit_code: int
    oom_killed: bool
    container_name: str
    memory_limit: int | None = None


def parse_shm(value: str) -> str:
    if not re.fullmatch(r"[0-9]+[bkmgBKMG]?", value or ""):
        raise UsageError(f"--shm-size {value!r} is not a size like 2g or 512m")
    return value


def parse_memory(value: str) -> str:
    if not re.fullmatch(r"[0-9]+[bkmgBKMG]?", value or ""):
        raise UsageError(f"--memory {value!r} is not a size like 4g or 512m")
    number, unit = re.fullmatch(r"([0-9]+)([bkmgBKMG]?)", value).groups()
    if int(number) * {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit.lower()] < 6 * 2**20:
        raise UsageError(f"--memory {value}: Docker's minimum is 6m")
    return value


def check_options(*, gpus: str, shm_size: str, memory: str | None, runs_dir: Path | None,
                  user: str | None) -> gpu_request.GpuSpec | str:
    """Reject what Docker would, and make the runs directory, before Docker is asked
    anything. The `--gpus` value parsed (the one parse: it is resolved for this engine later,
    by the host's GPU resolver), or "auto", which is decided then too."""
    spec = "auto" if gpus == "auto" else gpu_request.parse(gpus)
    parse_shm(shm_size)
    if memory:
        parse_memory(memory)
    if runs_dir is not None:
        prepare_runs_dir(runs_dir, user or default_user())
    return spec


def parse_env(items: list[str]) -> dict[str, str]:
    """`-e KEY=VALUE` options as the container's environment."""
    env = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"-e {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        env[key] = value
    return env


def new_run_id(prefix: str = "") -> str:
    """A fresh name for runs/<run-id>: UTC time to the second, then 6 random hex digits."""
    return prefix + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def report_path(runs_dir: Path, run_id: str) -> Path:
    """Where the smoke training writes its report on the host."""
    return Path(runs_dir) / run_id / "report.json"


def smoke_command(v: Variant, run_id: str, flags: list[str] | tuple[str, ...] = ()) -> list[str]:
    return [v.interpreter, SMOKE_SCRIPT, "--run-id", run_id, *flags]


def smoke_flags(*, epochs: int | None = None, batch_size: int | None = None, learning_rate: float | None = None,
                mixed_precision: str | None = None, require_gpu: bool = False, verbose: bool = False,
                profile: bool = False) -> list[str]:
    """smoke_train.py's flags for the options given (None: the script's default)."""
    flags: list[str] = []
    for name, value in (("--epochs", epochs), ("--batch-size", batch_size), ("--learning-rate", learning_rate),
                        ("--mixed-precision", mixed_precision)):
        if value is not None:
            flags += [name, str(value)]
    if require_gpu:
        flags.append("--require-gpu")
    if verbose:  # TensorFlow's start-up noise too (the in-image log filter off)
        flags.append("--verbose")
    if profile:  # the profiler over a few steady steps, and the input pipeline's wait
        flags.append("--profile")
    return flags


def workload(v: Variant, command: list[str], *, smoke: bool, run_id: str | None = None,
             flags: list[str] | tuple[str, ...] = ()) -> tuple[list[str], str | None]:
    """The container's command and its run id (None when the smoke training does not run).

    `kerasenv smoke`: the smoke training with `flags`, then `command` (extra smoke_train.py
    flags). `kerasenv run`: `command`, or the smoke training without one (`flags` unused).
    The run id is `run_id`, else a new one."""
    if not smoke and command:
        return list(command), None
    run_id = run_id or new_run_id()
    return smoke_command(v, run_id, [*flags, *command] if smoke else []), run_id


def format_limit(nbytes: int) -> str:
    """A memory limit as Docker's -m would take it back: 4 GiB, 1.5 GiB, 512 MiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} bytes"


def cuda_cache_volume(v: Variant) -> str:
    return f"kerasenv-cuda-cache-{v.id}"


def ensure_cuda_cache(client, v: Variant) -> str:
    """Create the image's JIT-cache volume with our labels (idempotent); its name.

    Created empty, Docker fills it from the image's /var/cache/kerasenv/cuda on first mount,
    mode 1777 included, so any UID can write it."""
    name = cuda_cache_volume(v)
    client.volumes.create(name=name, labels={PROJECT_LABEL: "kerasenv", docker_client.KIND_LABEL: "cuda-cache",
                                             "io.kerasenv.variant": v.id})
    return name


def default_user() -> str:
    return f"{os.getuid()}:{os.getgid()}"


def prepare_runs_dir(runs_dir: Path, user: str) -> Path:
    """Create ./runs before Docker would (as root) and make it the user's."""
    runs_dir = runs_dir.resolve()
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        uid, gid = (int(x) for x in user.split(":"))
        if os.geteuid() == 0 and (runs_dir.stat().st_uid, runs_dir.stat().st_gid) != (uid, gid):
            os.chown(runs_dir, uid, gid)
    except OSError as exc:  # permission denied, a file in the way, a read-only file system, ...
        raise UsageError(f"cannot create the runs directory {runs_dir} ({exc.strerror}): "
                         "pass --runs-dir with a directory you own") from None
    except ValueError:
        raise UsageError(f"--user {user!r} must be numeric UID:GID") from None
    if not os.access(runs_dir, os.W_OK):
        raise UsageError(f"the runs directory {runs_dir} is not writable: pass --runs-dir with a directory you own")
    return runs_dir


def container_volumes(client, v: Variant, *, runs_dir: Path | None, user: str, project: Path | None = None,
                      volumes: list[str] | tuple[str, ...] = (), extra_volumes: dict | None = None) -> list[str]:
    """The container's mounts as `SOURCE:TARGET:MODE` strings (a list, since one host path
    may be mounted twice): the JIT-cache volume, the project, ./runs and the `-v` mounts."""
    binds = [f"{src}:{spec['bind']}:{spec.get('mode', 'rw')}" for src, spec in (extra_volumes or {}).items()]
    if v.family == "cuda":
        binds.append(f"{ensure_cuda_cache(client, v)}:{CUDA_CACHE_IN_CONTAINER}:rw")
    if runs_dir is not None:
        runs_dir = prepare_runs_dir(runs_dir, user)
    for mount in mounts_mod.plan(project=project, runs_dir=runs_dir, volumes=list(volumes), cwd=Path.cwd()):
        binds.append(f"{mount.source}:{mount.target}:{'ro' if mount.read_only else 'rw'}")
    return binds


def gpu_and_groups(gpus: gpu_request.GpuAccess | None) -> dict:
    """The container's GPU arguments, as resolved for this engine (gpu_request.resolve: a
    DeviceRequest for the runtime hook or for CDI; for ROCm the device nodes, the host's GIDs
    that own them and seccomp unconfined) and its supplementary groups: those, then group 0,
    which may write the venv (see the Dockerfile's builder stage), so `pip install` works
    for any UID, as OpenShift runs images. Every container runner.run starts gets exactly
    these (run, smoke, shell, lab, bench, doctor --container)."""
    gpu_kwargs = dict(gpus.kwargs) if gpus is not None else {}
    return {**gpu_kwargs, "group_add": [*gpu_kwargs.get("group_add", []), "0"]}


def run(client, v: Variant, command: list[str] | None, *, gpus: gpu_request.GpuAccess | None,
        shm_size: str = DEFAULT_SHM,
        runs_dir: Path | None, user: str | None, env: dict[str, str] | None = None,
        network: str | None = None, memory: str | None = None, kind: str = "run",
        extra_volumes: dict | None = None, timeout: float | None = None, missing_hint: str = "",
        project: Path | None = None, volumes: list[str] | tuple[str, ...] = (), interactive: bool = False,
        ports: dict | None = None, image: str | None = None, detach: bool = False, on_started=None,
        stream=sys.stderr, stdout=None) -> RunResult:
    """`gpus`: the GPU access resolved for this engine (None: no GPU).
    `timeout`: seconds to wait for the container before RunTimeout (it is then removed).
    `project`: mounted at /workspace; `volumes`: `-v` specs; `interactive`: TTY attached;
    `image`: another image of the variant (its JupyterLab flavour); `on_started(container)`
    is called once it runs; `detach`: return then, leaving it running (`make clean` removes it)."""
    from docker.errors import APIError, ImageNotFound

    image = image or v.image_ref
    try:
        client.images.get(image)
    except ImageNotFound:
        raise UsageError(f"{image} is not built here: run `make build VARIANT={v.id}`{missing_hint}") from None
    user = user or default_user()
    binds = container_volumes(client, v, runs_dir=runs_dir, user=user, project=project, volumes=volumes,
                              extra_volumes=extra_volumes)
    name = f"kerasenv-{kind}-{v.id.replace('.', '-')}-{uuid.uuid4().hex[:8]}"
    kwargs = dict(
        image=image, command=command, name=name, detach=True, init=True,
        shm_size=parse_shm(shm_size), user=user, environment=env or {}, volumes=binds,
        labels=docker_client.container_labels(kind, **{"io.kerasenv.variant": v.id}),
        **gpu_and_groups(gpus),
    )
    if interactive:
        # No TTY to give when stdin is a pipe. detach=False is what makes the SDK set the
        # attach flags and StdinOnce: without them `docker start -ai` forwards no output and
        # never passes end-of-input (`echo ls | kerasenv shell ID` printed nothing, hung).
        kwargs.update(tty=sys.stdin.isatty(), stdin_open=True, detach=False)
    if ports:
        kwargs["ports"] = ports
    if network:
        kwargs["network_mode"] = network
    if memory:
        # Swap equal to the limit means no swap: the container is OOM-killed at the limit
        # instead of crawling on swap (Docker's default allows as much swap again).
        kwargs["mem_limit"] = kwargs["memswap_limit"] = parse_memory(memory)
    container, keep = None, False
    try:
        try:
            container = client.containers.create(**kwargs)
            if not interactive:
                container.start()
        except APIError as exc:
            raise _explain_start_error(exc, gpus) from None
        if on_started is not None and not interactive:
            on_started(container)
        if detach:
            keep = True
            return RunResult(exit_code=0, oom_killed=False, container_name=name)
        if interactive:
            status = {"StatusCode": _attach_terminal(container)}
        else:
            followers = _follow_logs(container, stream, stdout)
            try:
                status = container.wait(timeout=timeout)
            except Exception as exc:  # requests' ReadTimeout/ConnectionError, by docker SDK version
                if timeout is None:
                    raise
                raise RunTimeout(f"{name} did not finish within {timeout:.0f} s ({type(exc).__name__})") from None
            for follower in followers:
                follower.join()
        container.reload()
        state = container.attrs.get("State", {})
        return RunResult(exit_code=int(status.get("StatusCode", 1)), oom_killed=bool(state.get("OOMKilled")),
                         container_name=name,
                         memory_limit=container.attrs.get("HostConfig", {}).get("Memory") or None)
    finally:
        if container is not None and not keep:
            _remove(container)


def _attach_terminal(container) -> int:
    """Start the created container attached to this terminal; its exit status.

    The docker SDK has no interactive attach (raw TTY, resize, stdin), so the container is
    created through the SDK with the same settings as any other and started by the docker
    CLI, which does the terminal handling and returns the container's exit code."""
    import shutil
    import subprocess

    docker = shutil.which("docker")
    if docker is None:
        raise KerasenvError("the docker CLI is not on PATH; an interactive shell needs it (install docker.io)")
    start = subprocess.run([docker, "start", "--attach", "--interactive", container.id])
    container.reload()
    state = container.attrs.get("State", {})
    if state.get("Status") == "exited":
        return int(state.get("ExitCode", start.returncode))
    return start.returncode


def _follow_logs(container, stream, stdout) -> list[threading.Thread]:
    """Copy the container's stderr to `stream` and its stdout to `stdout` (or `stream`),
    in threads that end with the container's output."""
    def pump(source, target):
        for chunk in source:
            target.write(chunk.decode(errors="replace"))
            target.flush()

    threads = [
        threading.Thread(target=pump, daemon=True, args=(
            container.logs(stream=True, follow=True, stdout=False, stderr=True), stream)),
        threading.Thread(target=pump, daemon=True, args=(
            container.logs(stream=True, follow=True, stdout=True, stderr=False), stdout or stream)),
    ]
    for thread in threads:
        thread.start()
    return threads


def _remove(container) -> None:
    from docker.errors import APIError, NotFound

    try:
        container.remove(force=True)  # stops (SIGKILL) a container still running, e.g. after Ctrl-C
    except NotFound:
        pass
    except APIError as exc:  # pragma: no cover - daemon trouble while cleaning up
        print(f"kerasenv: warning: could not remove container {container.name}: {exc}; "
              "`make clean` removes it", file=sys.stderr)


def _explain_start_error(exc, gpus: gpu_request.GpuAccess | None) -> KerasenvError:
    text = str(getattr(exc, "explanation", None) or exc)
    gpu_failure = gpu_request.explain_start_error(text, gpus) if gpus is not None and gpus.wants_gpu else None
    if gpu_failure:
        return NoGpuRuntime(gpu_failure)
    if "container-init binary not found" in text:  # Podman: every kerasenv container runs with --init
        return KerasenvError("Podman has no init binary (catatonit) for the container's init process: install it "
                             "(`sudo apt-get install catatonit`, `sudo dnf install catatonit`)")
    if "error gathering device information" in text or "no such file or directory" in text and "/dev/" in text:
        return NoGpuRuntime(f"the GPU device nodes are missing on this host ({text.splitlines()[0][:160]}): "
                            "check the host driver with `kerasenv doctor`")
    return KerasenvError(f"Docker could not start the container: {text.splitlines()[0][:300]}")

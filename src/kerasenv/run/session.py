"""One container session of `kerasenv smoke`, `run`, `shell` or `lab`: from the options to
the exit code.

The order is what docs/reliability.md promises: everything that can be checked is (the
variant id, --gpus, --shm-size, --memory, the runs directory, the mounts, the lab's port)
before Docker is asked anything; then the variant (`auto`: this host's pick), the image
(built when missing and --build-missing says so), the GPU request, the run; last, what the
container's end means: OOM-killed is exit 5 naming the limit, SIGKILL (137) says how to
resume, and the smoke training's report is named.

run/ sits below host/ and images/ in the layering, yet `auto` is doctor's pick
(host/variant_choice), --build-missing builds (images/build), --gpus is resolved for this
host and engine with what the doctor knows (host/gpu_choice) and the host's shape may need a
setting in the container (host/container_env: JAX >= 0.11 on WSL2): the caller, cli.py, hands
all four in as an `Upstream`, so nothing here imports upwards and tests can hand in fakes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from . import lab
from . import mounts
from . import runner
from ..engine import docker_client
from ..engine import gpu_request
from ..errors import EXIT_OOM, UsageError
from ..matrix.schema import Matrix, Variant


class VariantChooser(Protocol):
    """Which variant runs (host/variant_choice)."""

    AUTO: str  # the id that asks for this host's pick

    def named(self, matrix: Matrix, variant_id: str | None) -> Variant | None: ...

    def recommended(self, matrix: Matrix, client) -> tuple[Variant, str]: ...


class ImageBuilder(Protocol):
    """Builds a missing image (images/build)."""

    def build(self, client, matrix: Matrix, v: Variant, *, ca_cert: str | None = None,
              jupyter: bool = False): ...

    def default_ca_cert(self, explicit: str | None) -> str | None: ...


class GpuResolver(Protocol):
    """Turns --gpus (a parsed spec, or auto) into what this engine takes (host/gpu_choice)."""

    def resolve(self, client, v: Variant, spec, say=...) -> gpu_request.GpuAccess: ...


class HostEnv(Protocol):
    """The container environment this host's shape needs for a variant (host/container_env)."""

    def apply(self, v: Variant, env: dict[str, str], say=...) -> dict[str, str]: ...


@dataclass(frozen=True)
class Upstream:
    """What a session needs from the layers above run/, handed in by cli.py."""

    chooser: VariantChooser
    builder: ImageBuilder
    gpus: GpuResolver
    host_env: HostEnv


@dataclass(frozen=True)
class Request:
    """`kerasenv smoke`, `run` or `shell`: the variant, what runs in it, and how."""

    variant_id: str  # a variant id, or the chooser's AUTO
    command: list[str]  # run/shell: the command (none: the smoke training); smoke: extra smoke_train.py flags
    gpus: str  # all | N | device=0,1 | none | auto
    shm_size: str
    runs_dir: Path
    smoke: bool = False  # the smoke training, without network, its output on stderr
    flags: list[str] = field(default_factory=list)  # smoke_train.py's flags from the smoke's options
    user: str | None = None
    memory: str | None = None
    env: list[str] = field(default_factory=list)  # KEY=VALUE
    build_missing: bool = False
    project: Path | None = None  # mounted at /workspace
    volumes: list[str] = field(default_factory=list)  # -v specs
    interactive: bool = False
    run_id: str | None = None
    json: bool = False  # the smoke report on stdout


@dataclass(frozen=True)
class LabRequest:
    """`kerasenv lab`: JupyterLab of a variant on 127.0.0.1:port."""

    variant_id: str  # a variant id, or the chooser's AUTO
    port: int
    gpus: str
    shm_size: str
    user: str | None = None
    project: Path | None = None
    volumes: list[str] = field(default_factory=list)
    build_missing: bool = False
    detach: bool = False


def say(message: str) -> None:
    """Progress and notes go to stderr; stdout is the command's output."""
    print(message, file=sys.stderr)


def run_workload(matrix: Matrix, upstream: Upstream, request: Request) -> int:
    """Run `request` in its variant's container; the container's exit code, or EXIT_OOM."""
    r = request
    v = _named(matrix, upstream.chooser, r.variant_id)
    spec = runner.check_options(gpus=r.gpus, shm_size=r.shm_size, memory=r.memory, runs_dir=r.runs_dir,
                                user=r.user)
    mounts.plan(project=r.project, runs_dir=None, volumes=r.volumes, cwd=Path.cwd())
    client = docker_client.client()
    if v is None:
        v, reason = upstream.chooser.recommended(matrix, client)
        say(f"kerasenv: using {v.id} ({reason})")
    # Resolved before the image is built or looked for: a request this engine would drop is
    # refused at once.
    gpus = upstream.gpus.resolve(client, v, spec, say=say)
    if r.build_missing and not docker_client.has_image(client, v.image_ref):
        upstream.builder.build(client, matrix, v, ca_cert=upstream.builder.default_ca_cert(None))
    env = upstream.host_env.apply(v, runner.parse_env(r.env), say=say)
    cmd, run_id = runner.workload(v, r.command, smoke=r.smoke, run_id=r.run_id, flags=r.flags)
    result = runner.run(client, v, cmd, gpus=gpus, shm_size=r.shm_size, runs_dir=r.runs_dir, user=r.user, env=env,
                        memory=r.memory, kind="smoke" if r.smoke else "run",
                        missing_hint=" (or pass --build-missing)", network="none" if r.smoke else None,
                        project=r.project, volumes=r.volumes, interactive=r.interactive,
                        stdout=None if r.smoke else sys.stdout)  # `run`: the command's stdout is ours
    if result.oom_killed:
        say(oom_killed_line(result))
        return EXIT_OOM
    if result.exit_code == 137:
        say(sigkilled_line(run_id))
    if run_id:
        name_report(r.runs_dir, run_id, print_it=r.json)
    return result.exit_code


def oom_killed_line(result: runner.RunResult) -> str:
    """The kernel killed the container at its memory limit (exit 5)."""
    limit = runner.format_limit(result.memory_limit) if result.memory_limit else "host memory"
    return f"kerasenv: error: the container was OOM-killed (limit {limit}): lower BATCH_SIZE or raise --memory"


def sigkilled_line(run_id: str | None) -> str:
    """Exit 137 without the OOM killer: someone sent SIGKILL; the smoke training resumes
    from its last epoch backup under the same run id."""
    resume = f" --run-id {run_id}" if run_id else ""
    return ("kerasenv: error: the container was killed (SIGKILL, e.g. `docker kill`), not by the OOM killer: "
            f"rerun the same command{resume} to resume from the last epoch backup")


def name_report(runs_dir: Path, run_id: str, *, print_it: bool) -> None:
    """Say where the smoke training's report is (or that none was written); `print_it`:
    also the report itself, on stdout."""
    report = runner.report_path(runs_dir, run_id)
    if print_it and report.exists():
        sys.stdout.write(report.read_text())
    say(f"kerasenv: report {report}" if report.exists() else f"kerasenv: no report was written ({report})")


def run_lab(matrix: Matrix, upstream: Upstream, request: LabRequest) -> int:
    """JupyterLab in the variant's -jupyter flavour; its exit code (0 at once with `detach`)."""
    r = request
    v = _named(matrix, upstream.chooser, r.variant_id)
    if v is not None and v not in matrix.with_jupyter():
        raise UsageError(f"{v.id} has no JupyterLab flavour; those that do: "
                         f"{', '.join(x.id for x in matrix.with_jupyter())}")
    spec = runner.check_options(gpus=r.gpus, shm_size=r.shm_size, memory=None, runs_dir=None, user=r.user)
    mounts.plan(project=r.project, runs_dir=None, volumes=r.volumes, cwd=Path.cwd())
    lab.check_port(r.port)
    client = docker_client.client()
    if v is None:
        v, reason = upstream.chooser.recommended(matrix, client)
        if v not in matrix.with_jupyter():  # ROCm: AMD's image, no flavour built on it
            v, reason = matrix.get(matrix.default_cpu), f"{v.id} has no JupyterLab flavour; the CPU image's instead"
        say(f"kerasenv: using {v.id} ({reason})")
    gpus = upstream.gpus.resolve(client, v, spec, say=say)
    if r.build_missing and not docker_client.has_image(client, v.jupyter_ref):
        ca_cert = upstream.builder.default_ca_cert(None)
        if not docker_client.has_image(client, v.image_ref):
            upstream.builder.build(client, matrix, v, ca_cert=ca_cert)
        upstream.builder.build(client, matrix, v, jupyter=True, ca_cert=ca_cert)
    token = lab.new_token()
    result = runner.run(client, v, None, image=v.jupyter_ref, gpus=gpus, shm_size=r.shm_size, runs_dir=None,
                        user=r.user, env=upstream.host_env.apply(v, {"JUPYTER_TOKEN": token}, say=say),
                        kind="lab", project=r.project,
                        volumes=r.volumes, ports=lab.ports(r.port), detach=r.detach,
                        missing_hint=" --jupyter (or pass --build-missing)",
                        on_started=lab.announce(r.port, token, say, wait=r.detach))
    if r.detach:
        say(f"kerasenv: {result.container_name} runs in the background; stop it with "
            f"`docker rm -f {result.container_name}` (or `make clean`)")
    return result.exit_code


def _named(matrix: Matrix, chooser: VariantChooser, variant_id: str) -> Variant | None:
    """The variant named (an unknown id fails here, before Docker); None for AUTO."""
    return chooser.named(matrix, None if variant_id == chooser.AUTO else variant_id)

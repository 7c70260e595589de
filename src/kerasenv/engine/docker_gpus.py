"""Can Docker give this host's NVIDIA GPUs to a container? One answer, asked of Docker.

Looking for an `nvidia` runtime in `docker info` or a CDI spec is not the answer: Docker's
`--gpus` works whenever `nvidia-container-runtime-hook` is on dockerd's PATH, with no
runtime entry at all (moby daemon/nvidia_linux.go registers the `nvidia` device driver
then), and a CDI spec alone does not make `--gpus` work. So this starts a short-lived
container with the GPU request `kerasenv run --gpus all` would send on this engine
(gpu_request.resolve: the runtime hook's DeviceRequest, or the CDI one where the engine
applies CDI and the host has an NVIDIA spec) and reads the daemon's reply: it refuses at once
("could not select device driver "" with capabilities: [[gpu]]") when it cannot. Podman's
Docker API before 5.4 is not asked: it says yes to any request and gives no GPU
(containers/podman#22645). The answer is cached for the rest of the process (one CLI run).
The static hints (runtime entry, CDI spec) only explain a "no".
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from . import cdi as cdi_mod
from . import docker_client

KIND = "gpu-probe"
_answers: dict[str, "Answer"] = {}


@dataclass(frozen=True)
class Answer:
    available: bool | None  # None: Docker could not be asked (no local image to start)
    detail: str  # the daemon's words, or what was done
    hints: tuple[str, ...] = field(default=())

    def explain(self) -> str:
        return self.detail + (f" ({'; '.join(self.hints)})" if self.hints else "")


def static_hints(client) -> tuple[str, ...]:
    """What the host's Docker set-up says, to explain an answer (never to decide it)."""
    try:
        runtimes = sorted((client.info().get("Runtimes") or {}).keys())
    except Exception:  # noqa: BLE001 - a hint is best effort
        runtimes = []
    found = cdi_mod.from_specs(dirs=cdi_mod.spec_dirs())
    cdi = list(found.specs)
    hints = ["an `nvidia` runtime is registered in Docker" if "nvidia" in runtimes
             else "no `nvidia` runtime in `docker info`"]
    hints.append(f"CDI spec {', '.join(cdi)} (used by CDI requests, `--device nvidia.com/gpu=...`, not by "
                 "`--gpus`)" if cdi else f"no NVIDIA CDI spec in {found.where()}")
    return tuple(hints)


def _probe_image(client, preferred: str | None) -> str | None:
    """A local image to start the probe container from (its `true` is all that runs): the
    one about to run, else any kerasenv image, else a Debian base (any debian:* here: the
    matrix's bases are, and engine/ reads no matrix), else any tagged image."""
    from docker.errors import ImageNotFound

    candidates = [preferred] if preferred else []
    try:
        tagged = sorted(docker_client.local_tags(client))
    except Exception:  # noqa: BLE001
        tagged = []
    candidates += [t for t in tagged if t.startswith("kerasenv:")] + [t for t in tagged if t.startswith("debian:")] \
        + tagged
    for ref in candidates:
        try:
            client.images.get(ref)
            return ref
        except ImageNotFound:
            continue
        except Exception:  # noqa: BLE001
            return None
    return None


def ask(client, image: str | None = None, *, engine=None, cdi=None) -> Answer:
    """Start `true` with this engine's `--gpus all` in a throw-away container; cached per
    process. `engine`/`cdi`: the engine and the host's CDI devices (asked/read when None)."""
    key = str(getattr(getattr(client, "api", None), "base_url", id(client)))
    if key in _answers:
        return _answers[key]
    answer = _ask(client, image, engine, cdi)
    _answers[key] = answer
    return answer


def can_give(client) -> bool:
    """`ask`'s yes as a bool; Docker trouble counts as no (`kerasenv bench`: starting the
    bench reports it)."""
    try:
        return bool(ask(client).available)
    except Exception:  # noqa: BLE001
        return False


def request_for(client, v, spec: str, say=lambda m: None, *, engine=None, cdi=None) -> str:
    """The `--gpus` request for variant `v`: `spec` as given, except auto: all for ROCm,
    none for the CPU image, and for CUDA all when Docker can hand GPUs out (asked of
    Docker), else none, which `say` explains."""
    if spec != "auto":
        return spec
    if v.family == "rocm":
        return "all"
    if v.family != "cuda":
        return "none"
    answer = ask(client, v.image_ref, engine=engine, cdi=cdi)
    if answer.available:
        return "all"
    say(f"kerasenv: running without a GPU: {answer.explain()} (--gpus all to insist)")
    return "none"


def forget() -> None:
    """Drop the cached answers (tests; a long-lived process after the host changed)."""
    _answers.clear()


def _ask(client, image: str | None, engine=None, cdi=None) -> Answer:
    from docker.errors import APIError

    from . import engine_facts, gpu_request
    from ..errors import UsageError

    try:
        engine = engine or engine_facts.ask(client)
    except Exception:  # noqa: BLE001 - an old or odd daemon: assume Docker with the hook
        engine = engine_facts.Engine("docker")
    cdi = cdi if cdi is not None else cdi_mod.scan(dirs=cdi_mod.spec_dirs(engine))
    try:
        access = gpu_request.resolve("all", "cuda", engine=engine, host=gpu_request.HostGpus(cdi=cdi))
    except UsageError as exc:  # Podman that would drop the request: a no, without a container
        return Answer(False, exc.message.removeprefix("--gpus refused: "))
    ref = _probe_image(client, image)
    if ref is None:
        return Answer(None, "Docker was not asked: no local image to start a probe container from",
                      static_hints(client))
    container = None
    try:
        container = client.containers.create(
            ref, ["true"], entrypoint=[], name=f"kerasenv-{KIND}-{uuid.uuid4().hex[:8]}",
            # network_mode none as well: Podman's compat API (5.8.6, seen here) ignores
            # NetworkDisabled and puts the container on its default bridge, which sets up
            # netavark's firewall rules for a container that needs no network.
            network_disabled=True, network_mode="none", labels=docker_client.container_labels(KIND),
            **access.kwargs)  # exactly what `kerasenv run --gpus all` sends on this engine
        container.start()
        status = container.wait(timeout=120)
        code = status.get("StatusCode")
        if code == 0:
            return Answer(True, f"Docker started a container with {access.describe()} ({ref})")
        return Answer(False, f"a container with {access.describe()} exited {code}", static_hints(client))
    except APIError as exc:
        text = str(getattr(exc, "explanation", None) or exc).strip().splitlines()[0][:300]
        return Answer(False, f"Docker refused {access.describe()}: {text}", static_hints(client))
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except APIError:
                pass

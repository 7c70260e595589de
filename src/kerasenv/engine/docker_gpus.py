"""Can Docker give this host's NVIDIA GPUs to a container? One answer, asked of Docker.

Looking for an `nvidia` runtime in `docker info` or a CDI spec is not the answer: Docker's
`--gpus` works whenever `nvidia-container-runtime-hook` is on dockerd's PATH, with no
runtime entry at all (moby daemon/nvidia_linux.go registers the `nvidia` device driver
then), and a CDI spec alone does not make `--gpus` work. So this starts a short-lived
container with the same GPU request `docker run --gpus all` sends and reads the daemon's
reply: it refuses at once ("could not select device driver "" with capabilities: [[gpu]]")
when it cannot. The answer is cached for the rest of the process (one CLI run). The static
hints (runtime entry, CDI spec) only explain a "no".
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from . import docker_client

CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
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
    cdi = [os.path.join(d, f) for d in CDI_SPEC_DIRS if os.path.isdir(d)
           for f in sorted(os.listdir(d)) if f.startswith("nvidia")]
    hints = ["an `nvidia` runtime is registered in Docker" if "nvidia" in runtimes
             else "no `nvidia` runtime in `docker info`"]
    hints.append(f"CDI spec {', '.join(cdi)} (used by `--device nvidia.com/gpu=...`, not by `--gpus`)" if cdi
                 else "no NVIDIA CDI spec in /etc/cdi or /var/run/cdi")
    return tuple(hints)


def _probe_image(client, preferred: str | None) -> str | None:
    """A local image to start the probe container from (its `true` is all that runs): the
    one about to run, else any kerasenv image, else the Debian base, else any tagged image."""
    from docker.errors import ImageNotFound

    candidates = [preferred] if preferred else []
    try:
        local = client.images.list()
    except Exception:  # noqa: BLE001
        local = []
    tagged = [t for image in local for t in (image.tags or [])]
    candidates += sorted(t for t in tagged if t.startswith("kerasenv:")) + ["debian:bookworm-slim"] + tagged
    for ref in candidates:
        try:
            client.images.get(ref)
            return ref
        except ImageNotFound:
            continue
        except Exception:  # noqa: BLE001
            return None
    return None


def ask(client, image: str | None = None) -> Answer:
    """Start `true` with `--gpus all` in a throw-away container; cached per process."""
    key = str(getattr(getattr(client, "api", None), "base_url", id(client)))
    if key in _answers:
        return _answers[key]
    answer = _ask(client, image)
    _answers[key] = answer
    return answer


def can_give(client) -> bool:
    """`ask`'s yes as a bool; Docker trouble counts as no (`kerasenv bench`: starting the
    bench reports it)."""
    try:
        return bool(ask(client).available)
    except Exception:  # noqa: BLE001
        return False


def request_for(client, v, spec: str, say=lambda m: None) -> str:
    """The `--gpus` request for variant `v`: `spec` as given, except auto: all for ROCm,
    none for the CPU image, and for CUDA all when Docker can hand GPUs out (asked of
    Docker), else none, which `say` explains."""
    if spec != "auto":
        return spec
    if v.family == "rocm":
        return "all"
    if v.family != "cuda":
        return "none"
    answer = ask(client, v.image_ref)
    if answer.available:
        return "all"
    say(f"kerasenv: running without a GPU: {answer.explain()} (--gpus all to insist)")
    return "none"


def forget() -> None:
    """Drop the cached answers (tests; a long-lived process after the host changed)."""
    _answers.clear()


def _ask(client, image: str | None) -> Answer:
    from docker.errors import APIError

    from . import gpu_request

    ref = _probe_image(client, image)
    if ref is None:
        return Answer(None, "Docker was not asked: no local image to start a probe container from",
                      static_hints(client))
    container = None
    try:
        container = client.containers.create(
            ref, ["true"], entrypoint=[], name=f"kerasenv-{KIND}-{uuid.uuid4().hex[:8]}",
            network_disabled=True, labels=docker_client.container_labels(KIND),
            **gpu_request.run_kwargs("all", "cuda"))  # exactly what `kerasenv run --gpus all` sends
        container.start()
        status = container.wait(timeout=120)
        code = status.get("StatusCode")
        if code == 0:
            return Answer(True, f"Docker started a container with --gpus all ({ref})")
        return Answer(False, f"a container with --gpus all exited {code}", static_hints(client))
    except APIError as exc:
        text = str(getattr(exc, "explanation", None) or exc).strip().splitlines()[0][:300]
        return Answer(False, f"Docker refused --gpus all: {text}", static_hints(client))
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except APIError:
                pass

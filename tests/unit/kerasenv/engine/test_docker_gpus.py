"""docker_gpus.ask: the one answer to "can Docker give this host's GPUs to a container?".

The "yes" path needs a GPU host, so the docker SDK is pointed at a fake Docker Engine API
on 127.0.0.1 (the transport: real HTTP requests from the real SDK, nothing of ours
patched). The real "no" is tested against this machine's daemon in
tests/integration/test_doctor_cli.py.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest

from kerasenv.engine import docker_gpus
from kerasenv.host import doctor
from kerasenv.host import nvidia_smi

REFUSAL = 'could not select device driver "" with capabilities: [[gpu]]'


class FakeEngine:
    """Just enough of the Engine API (v1.41) for create / start / wait / remove."""

    def __init__(self, start_error: str | None = None, exit_code: int = 0, runtimes=("runc",), removed_image=False):
        self.start_error, self.exit_code, self.runtimes = start_error, exit_code, runtimes
        # The listed image is gone by the time it is inspected (removed in between by another
        # process: make test's other lane, seen in CI).
        self.removed_image = removed_image
        self.requests: list[tuple[str, str, dict | None]] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _reply(self, status: int, body=None):
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = re.sub(r"^/v[0-9.]+", "", self.path.split("?")[0])
                engine.requests.append((method, path, body))
                if (method, path) == ("GET", "/info"):
                    return self._reply(200, {"Runtimes": {r: {} for r in engine.runtimes}})
                if (method, path) == ("GET", "/version"):
                    return self._reply(200, {"Version": "20.10.24", "ApiVersion": "1.41",
                                             "Components": [{"Name": "Engine", "Version": "20.10.24"}]})
                if (method, path) == ("GET", "/volumes"):
                    return self._reply(200, {"Volumes": [], "Warnings": None})
                if (method, path) == ("GET", "/images/json"):
                    return self._reply(200, [{"Id": "sha256:" + "1" * 64, "RepoTags": ["kerasenv:tf2.21-cuda12.9"]}])
                if method == "GET" and path.startswith("/images/") and path.endswith("/json"):
                    if engine.removed_image:
                        return self._reply(404, {"message": "no such image: " + path.split("/")[2]})
                    return self._reply(200, {"Id": "sha256:" + "1" * 64, "RepoTags": ["kerasenv:tf2.21-cuda12.9"]})
                if (method, path) == ("POST", "/containers/create"):
                    return self._reply(201, {"Id": "c0ffee", "Warnings": []})
                if (method, path) == ("GET", "/containers/c0ffee/json"):
                    return self._reply(200, {"Id": "c0ffee", "Name": "/probe", "Config": {}, "State": {}})
                if (method, path) == ("POST", "/containers/c0ffee/start"):
                    if engine.start_error:
                        return self._reply(500, {"message": engine.start_error})
                    return self._reply(204)
                if (method, path) == ("POST", "/containers/c0ffee/wait"):
                    return self._reply(200, {"StatusCode": engine.exit_code})
                if (method, path) == ("DELETE", "/containers/c0ffee"):
                    return self._reply(204)
                return self._reply(404, {"message": f"fake engine: no route {method} {path}"})

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_DELETE(self):
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        host, port = self.server.server_address
        return docker.DockerClient(base_url=f"tcp://{host}:{port}", version="1.41", timeout=10)

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def created(self) -> list[dict]:
        return [body for method, path, body in self.requests if (method, path) == ("POST", "/containers/create")]

    def removed(self) -> bool:
        return ("DELETE", "/containers/c0ffee", None) in self.requests


@pytest.fixture(autouse=True)
def fresh_cache():
    docker_gpus.forget()
    yield
    docker_gpus.forget()


def test_yes_when_docker_starts_a_gpu_container_even_without_an_nvidia_runtime_entry():
    """The moby case: nvidia-container-runtime-hook on dockerd's PATH, no `nvidia` runtime."""
    engine = FakeEngine(runtimes=("runc",))
    with engine as client:
        answer = docker_gpus.ask(client, "kerasenv:tf2.21-cuda12.9")
    assert answer.available is True and "--gpus all" in answer.detail
    (create,) = engine.created()
    assert create["HostConfig"]["DeviceRequests"] == [
        {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}]
    assert create["Image"] == "kerasenv:tf2.21-cuda12.9" and create["Cmd"] == ["true"]
    # Both: Podman's compat API (5.8.6) ignores NetworkDisabled and would use its bridge.
    assert create["NetworkDisabled"] is True and create["HostConfig"]["NetworkMode"] == "none"
    assert create["Labels"]["io.kerasenv.kind"] == "gpu-probe"
    assert engine.removed()


def test_no_with_the_daemons_own_words_and_the_static_hints():
    engine = FakeEngine(start_error=REFUSAL, runtimes=("runc",))
    with engine as client:
        answer = docker_gpus.ask(client, "kerasenv:tf2.21-cuda12.9")
    assert answer.available is False
    assert answer.detail == f"Docker refused --gpus all through NVIDIA's runtime hook: {REFUSAL}"
    assert "no `nvidia` runtime in `docker info`" in answer.hints
    assert engine.removed(), "the probe container must be removed when start fails"


def test_no_when_the_gpu_container_starts_but_fails():
    engine = FakeEngine(exit_code=1)
    with engine as client:
        answer = docker_gpus.ask(client, "kerasenv:tf2.21-cuda12.9")
    assert answer.available is False and "exited 1" in answer.detail
    assert engine.removed()


def test_the_answer_is_cached_for_the_rest_of_the_run():
    engine = FakeEngine()
    with engine as client:
        first = docker_gpus.ask(client, "kerasenv:tf2.21-cuda12.9")
        second = docker_gpus.ask(client, "kerasenv:tf2.21-cpu")
    assert first is second and len(engine.created()) == 1


def test_an_nvidia_runtime_entry_does_not_make_a_refusal_a_yes():
    engine = FakeEngine(start_error="nvidia-container-cli: initialization error: nvml error: driver not loaded",
                        runtimes=("runc", "nvidia"))
    with engine as client:
        answer = docker_gpus.ask(client, "kerasenv:tf2.21-cuda12.9")
    assert answer.available is False and "driver not loaded" in answer.detail
    assert "an `nvidia` runtime is registered in Docker" in answer.hints


def _gpu_host() -> nvidia_smi.HostGpus:
    gpu = nvidia_smi.Gpu(index=0, name="NVIDIA A100-SXM4-40GB", compute_capability="8.0",
                         compute_capability_source="nvidia-smi", memory_mib=40960)
    return nvidia_smi.HostGpus(present=True, driver_version="535.104.05", cuda_version="12.2", gpus=[gpu])


def test_doctor_passes_the_toolkit_on_dockers_yes_without_a_runtime_entry():
    facts = doctor.HostFacts(nvidia=_gpu_host(), docker_runtimes=["runc"],
                             docker_gpus=docker_gpus.Answer(True, "Docker started a container with --gpus all (x)"))
    check = next(c for c in doctor.host_checks(facts) if c.name == "container-toolkit")
    assert check.status == doctor.PASS


def test_doctor_fails_the_toolkit_on_dockers_no_even_with_a_runtime_entry():
    facts = doctor.HostFacts(nvidia=_gpu_host(), docker_runtimes=["nvidia", "runc"],
                             docker_gpus=docker_gpus.Answer(False, f"Docker refused --gpus all: {REFUSAL}",
                                                            ("an `nvidia` runtime is registered in Docker",)))
    check = next(c for c in doctor.host_checks(facts) if c.name == "container-toolkit")
    assert check.status == doctor.FAIL and REFUSAL in check.message and check.fix == doctor.TOOLKIT_FIX


# --- request_for: what `--gpus auto` becomes for `kerasenv run/smoke` ------------------------

def test_an_explicit_gpu_request_is_passed_on_without_asking_docker(real_matrix):
    cuda = real_matrix.get(real_matrix.default_gpu)
    for spec in ("all", "none", "2", "device=0,1"):
        assert docker_gpus.request_for(None, cuda, spec) == spec  # None: Docker must not be touched


def test_auto_is_all_gpus_for_rocm_and_none_for_the_cpu_image_without_asking_docker(real_matrix):
    assert docker_gpus.request_for(None, real_matrix.get(real_matrix.default_rocm), "auto") == "all"
    assert docker_gpus.request_for(None, real_matrix.get(real_matrix.default_cpu), "auto") == "none"


def test_auto_is_all_gpus_for_cuda_when_docker_starts_a_gpu_container(real_matrix):
    said = []
    with FakeEngine() as client:
        assert docker_gpus.request_for(client, real_matrix.get(real_matrix.default_gpu), "auto",
                                       say=said.append) == "all"
    assert said == []


def test_auto_is_no_gpu_for_cuda_when_docker_refuses_and_says_why(real_matrix):
    said = []
    with FakeEngine(start_error=REFUSAL) as client:
        assert docker_gpus.request_for(client, real_matrix.get(real_matrix.default_gpu), "auto",
                                       say=said.append) == "none"
    (line,) = said
    assert line.startswith("kerasenv: running without a GPU: Docker refused --gpus all through NVIDIA's runtime hook: ")
    assert REFUSAL in line and line.endswith("(--gpus all to insist)")


def test_can_give_is_dockers_yes_and_docker_trouble_counts_as_no(monkeypatch):
    with FakeEngine() as client:
        assert docker_gpus.can_give(client) is True
    docker_gpus.forget()
    with FakeEngine(start_error=REFUSAL) as client:
        assert docker_gpus.can_give(client) is False

    def broken(client, image=None):
        raise ConnectionError("the daemon went away")

    monkeypatch.setattr(docker_gpus, "ask", broken)
    assert docker_gpus.can_give(object()) is False


def test_listing_local_images_survives_an_image_removed_between_list_and_inspect(tmp_path):
    """docker-py's images.list() inspects each image it lists: one removed in between fails the
    whole listing with 404 (what made CI's doctor call the daemon unreachable).
    docker_client.local_tags asks GET /images/json alone, and the doctor's facts and the GPU
    probe's image choice go through it."""
    from kerasenv.engine import docker_client

    engine = FakeEngine(removed_image=True)
    with engine as client:
        with pytest.raises(docker.errors.NotFound):
            client.images.list()
        assert docker_client.local_tags(client) == {"kerasenv:tf2.21-cuda12.9"}
        assert docker_client.has_image(client, "kerasenv:tf2.21-cuda12.9")
        facts = doctor.gather(lambda: client, root=str(tmp_path))
    assert facts.docker_error is None and facts.local_images == {"kerasenv:tf2.21-cuda12.9"}


class LocalImages:
    """A client whose engine holds `tags` (GET /images/json and inspect, nothing else)."""

    def __init__(self, *tags: str) -> None:
        self.tags = tags
        self.api = type("Api", (), {"images": lambda api, name=None: [{"RepoTags": list(tags)}]})()
        self.images = self

    def get(self, ref):
        if ref not in self.tags:
            raise docker.errors.ImageNotFound(ref)
        return ref


def test_the_probe_starts_from_a_kerasenv_image_else_any_debian_base_here_else_any_image():
    """Without a kerasenv image, a Debian base the matrix builds on (trixie or bookworm, whichever
    is here) before an unrelated image: it starts `true` at once and is there after test-prereqs."""
    assert docker_gpus._probe_image(LocalImages("alpine:3", "debian:trixie-slim", "kerasenv:tf2.21-cpu"), None) \
        == "kerasenv:tf2.21-cpu"
    assert docker_gpus._probe_image(LocalImages("alpine:3", "debian:trixie-slim"), None) == "debian:trixie-slim"
    assert docker_gpus._probe_image(LocalImages("alpine:3", "debian:bookworm-slim"), None) == "debian:bookworm-slim"
    assert docker_gpus._probe_image(LocalImages("alpine:3"), "kerasenv:gone") == "alpine:3"
    assert docker_gpus._probe_image(LocalImages(), None) is None

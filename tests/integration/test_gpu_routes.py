"""The GPU requests kerasenv sends, as a real Docker daemon takes them, and the one line each
refusal becomes (engine/gpu_request.explain_start_error).

This daemon is Debian's Docker 20.10 without the NVIDIA Container Toolkit and without CDI (it
predates it): it refuses both routes at start, with its own words. The CDI request is what
`kerasenv run --gpus all` sends on a host whose engine applies CDI and has an NVIDIA spec (a
constructed one: tests/fixtures/host-shapes/cdi-nvidia); the runtime hook's request is what it
sends everywhere else. What no engine here can show: CDI applying the spec (Docker >= 28.2),
and the rootless errors (their words are matched in the unit tests, from the issues cited there).
Seconds: debian:bookworm-slim (`make test-prereqs` provides it), no build.
"""

from __future__ import annotations

import pytest
from docker.errors import APIError

from kerasenv.engine import cdi, engine_facts, gpu_request

from .conftest import REPO, SESSION, TEST_LABEL

IMAGE = "debian:bookworm-slim"
SPEC = cdi.from_specs(REPO / "tests" / "fixtures" / "host-shapes" / "cdi-nvidia")


def start_refusal(docker, access: gpu_request.GpuAccess) -> str:
    container = docker.containers.create(IMAGE, ["true"], labels={TEST_LABEL: SESSION}, **access.kwargs)
    try:
        with pytest.raises(APIError) as refused:
            container.start()
        return str(refused.value.explanation or refused.value)
    finally:
        container.remove(force=True)


def test_a_cdi_request_on_a_docker_without_cdi_is_explained_in_one_line(docker):
    this = engine_facts.ask(docker)
    assert this.product == "docker" and not this.cdi_enabled  # Debian's 20.10: no CDI
    # What kerasenv sends where the engine applies CDI: an engine of 28.2 or later with the spec.
    access = gpu_request.resolve("all", "cuda", engine=engine_facts.Engine("docker", "28.3.3"),
                                 host=gpu_request.HostGpus(cdi=SPEC))
    assert access.route == "cdi"
    text = start_refusal(docker, access)
    assert 'could not select device driver "cdi"' in text, text
    line = gpu_request.explain_start_error(text, access)
    assert '"features": {"cdi": true}' in line and "\n" not in line


def test_the_runtime_hooks_request_without_the_toolkit_is_explained_in_one_line(docker):
    access = gpu_request.resolve("all", "cuda", engine=engine_facts.ask(docker), host=gpu_request.HostGpus(cdi=SPEC))
    assert access.route == "nvidia-hook"  # CDI off on this daemon: the spec is not used
    text = start_refusal(docker, access)
    assert "could not select device driver" in text, text
    assert "NVIDIA Container Toolkit is not installed" in gpu_request.explain_start_error(text, access)

"""A CUDA image whose cuDNN is gone fails its backend's own GPU-library check, in one line
naming the library (kerasenv_image.probes.gpu_libraries; no GPU needed).

Each test builds a throwaway image `FROM kerasenv:<variant>` that deletes libcudnn.so.9
from the wheels and reruns ldconfig, runs this checkout's probe in it (mounted over the
image's kerasenv_image, so an image built before the probe learnt its backend still
tests today's probe), and removes the image. Both carry this session's io.kerasenv.test
label only.
"""

from __future__ import annotations

import io
import uuid

import pytest

from .conftest import REPO, SESSION, TEST_LABEL

PACKAGE = REPO / "images" / "common" / "kerasenv_image"
BROKEN = """FROM {base}
USER 0
RUN find / -xdev -path '*/site-packages/nvidia/*' -name 'libcudnn.so.9' -delete && ldconfig \\
    && ! ldconfig -p | grep -q 'libcudnn.so.9 '
"""
# No io.kerasenv.kind: `make clean` (in the build lane of make test, beside these) would remove them.
LABELS = {TEST_LABEL: SESSION}


@pytest.fixture
def broken_image(docker, request):
    variant = request.param
    base = f"kerasenv:{variant}"
    from docker.errors import ImageNotFound

    try:
        docker.images.get(base)
    except ImageNotFound:
        pytest.fail(f"{base} is not built here: `make build VARIANT={variant}` (the image to break)")
    tag = f"kerasenv-test-broken:{variant}-{uuid.uuid4().hex[:8]}"
    docker.images.build(fileobj=io.BytesIO(BROKEN.format(base=base).encode()), tag=tag, labels=LABELS,
                        rm=True, forcerm=True, network_mode="none")
    try:
        yield variant, tag
    finally:
        docker.images.remove(tag, force=True)


def run_probe(docker, tag: str, *args: str) -> tuple[int, str, str]:
    container = docker.containers.create(
        tag, ["python", "-m", "kerasenv_image.probes.gpu_libraries", *args], labels=LABELS, network_mode="none",
        volumes={str(PACKAGE): {"bind": "/opt/kerasenv/kerasenv_image", "mode": "ro"}})
    try:
        container.start()
        code = container.wait(timeout=120)["StatusCode"]
        return (code, container.logs(stdout=True, stderr=False).decode(errors="replace"),
                container.logs(stdout=False, stderr=True).decode(errors="replace"))
    finally:
        container.remove(force=True)


# Each image's case runs in its own test lane, right after its acceptance run (lane_image).
@pytest.mark.parametrize("broken_image", [
    pytest.param("jax0.12-cuda12.9", marks=pytest.mark.lane_image("jax0.12-cuda12.9")),
    pytest.param("torch2.15-cuda13.2", marks=pytest.mark.lane_image("torch2.15-cuda13.2"))], indirect=True)
def test_an_image_without_cudnn_fails_its_backends_check_naming_libcudnn(docker, matrix, broken_image):
    variant, tag = broken_image
    code, out, err = run_probe(docker, tag)
    assert code == 1, (code, out[-2000:], err[-2000:])
    backend = matrix.get(variant).backend
    reason = [line for line in err.splitlines() if line.startswith(f"gpu_libraries ({backend}): FAIL: ")]
    assert len(reason) == 1 and "libcudnn.so.9" in reason[0], err[-2000:]
    assert '"failed": [' in out and "libcudnn.so.9" in out  # the JSON line says it too
    assert docker.containers.list(all=True, filters={"label": f"{TEST_LABEL}={SESSION}",
                                                     "ancestor": tag}) == []

"""The driver's PTX JIT cache outlives `--rm` containers: `kerasenv run` mounts the image's
named volume at CUDA_CACHE_PATH (no GPU needed to see the mount and its persistence)."""

from __future__ import annotations

import json

import pytest

from .conftest import kerasenv


@pytest.fixture
def fresh_cache_volume(docker, matrix):
    v = matrix.get(matrix.default_gpu)
    name = f"kerasenv-cuda-cache-{v.id}"
    for volume in docker.volumes.list(filters={"name": name}):
        if volume.name == name:
            volume.remove(force=True)
    yield v, name
    for volume in docker.volumes.list(filters={"name": name}):
        if volume.name == name:
            volume.remove(force=True)


def test_run_mounts_the_images_jit_cache_volume_and_it_outlives_the_container(built_images, docker, tmp_path,
                                                                                fresh_cache_volume):
    v, name = fresh_cache_volume
    runs = str(tmp_path / "runs")
    write = kerasenv("run", v.id, "--gpus", "none", "--runs-dir", runs, "--", "bash", "-c",
                     'echo compiled-kernels > "$CUDA_CACHE_PATH/kerasenv-test" && stat -c %a "$CUDA_CACHE_PATH"')
    assert write.stdout.strip().splitlines()[-1] == "1777"
    read = kerasenv("run", v.id, "--gpus", "none", "--runs-dir", runs, "--", "cat",
                    "/var/cache/kerasenv/cuda/kerasenv-test")
    assert read.stdout.strip() == "compiled-kernels"
    volume = docker.volumes.get(name)
    assert volume.attrs["Labels"]["io.kerasenv.kind"] == "cuda-cache"
    assert volume.attrs["Labels"]["io.kerasenv.variant"] == v.id
    checks = {c["name"]: c for c in json.loads(kerasenv("doctor", "--json").stdout)["host"]}
    assert name in checks["cuda-jit-cache"]["message"]


def test_the_cpu_image_gets_no_cuda_cache(built_images, docker, matrix, tmp_path):
    proc = kerasenv("run", matrix.default_cpu, "--runs-dir", str(tmp_path / "runs"), "--", "bash", "-c",
                    'echo "[${CUDA_CACHE_PATH:-unset}]"; test -e /var/cache/kerasenv/cuda && echo mounted || true')
    assert proc.stdout.strip() == "[unset]"

"""host/container_env.py: what `kerasenv run`, `smoke` and `lab` add to a container's environment
on this host's shape, read from the constructed host trees (tests/fixtures/host-shapes/)."""

from __future__ import annotations

from dataclasses import replace

from kerasenv.host import container_env

from ...conftest import REPO

SHAPES = REPO / "tests" / "fixtures" / "host-shapes"


def test_on_wsl2_a_jax_0_12_cuda_image_gets_cuda_async_in_one_line(real_matrix):
    said = []
    env = {"A": "1"}
    got = container_env.apply(real_matrix.get("jax0.12-cuda12.9"), env, said.append, root=SHAPES / "wsl2")
    assert got == {"A": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async"} and env == {"A": "1"}
    assert said == ["kerasenv: WSL2: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async for JAX 0.12.0.1 (openxla/xla#48979)"]


def test_the_users_value_wins_and_nothing_is_said(real_matrix):
    said = []
    env = {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
    assert container_env.apply(real_matrix.get("jax0.12-cuda12.9"), env, said.append, root=SHAPES / "wsl2") == env
    assert said == []


def test_nothing_is_added_off_wsl2_nor_to_other_images(real_matrix):
    jax = real_matrix.get("jax0.12-cuda12.9")
    assert container_env.apply(jax, {}, root=SHAPES / "linux") == {}
    for other in (real_matrix.get("tf2.21-cuda12.9"), real_matrix.get("jax0.12-cpu"), replace(jax, jax="0.10.2")):
        assert container_env.apply(other, {}, root=SHAPES / "wsl2") == {}

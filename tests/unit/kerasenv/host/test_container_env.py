"""host/container_env.py: what `kerasenv run`, `smoke` and `lab` add to a container's environment
on this host's shape, read from the constructed host trees (tests/fixtures/host-shapes/) and the
recorded nvidia-smi outputs (tests/fixtures/nvidia-smi/: gb10-580 a capture, gh200-550 a
simulator's)."""

from __future__ import annotations

from dataclasses import replace

from kerasenv.host import container_env, facts, nvidia_smi

from ...conftest import REPO

SHAPES = REPO / "tests" / "fixtures" / "host-shapes"
FAKE_SMI = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")
NO_GPU = nvidia_smi.HostGpus(present=False)


def gpus(monkeypatch, scenario: str) -> nvidia_smi.HostGpus:
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", scenario)
    return facts.probe_nvidia(FAKE_SMI)


def test_on_wsl2_a_jax_0_12_cuda_image_gets_cuda_async_in_one_line(real_matrix):
    said = []
    env = {"A": "1"}
    got = container_env.apply(real_matrix.get("jax0.12-cuda12.9"), env, said.append, root=SHAPES / "wsl2",
                              nvidia=NO_GPU)
    assert got == {"A": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async"} and env == {"A": "1"}
    assert said == ["kerasenv: WSL2: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async for JAX 0.12.0.1 (openxla/xla#48979)"]


def test_the_users_value_wins_and_nothing_is_said(real_matrix):
    said = []
    env = {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
    assert container_env.apply(real_matrix.get("jax0.12-cuda12.9"), env, said.append, root=SHAPES / "wsl2",
                               nvidia=NO_GPU) == env
    assert said == []


def test_nothing_is_added_off_wsl2_nor_to_other_images(real_matrix):
    jax = real_matrix.get("jax0.12-cuda12.9")
    assert container_env.apply(jax, {}, root=SHAPES / "linux", nvidia=NO_GPU) == {}
    for other in (real_matrix.get("tf2.21-cuda12.9"), real_matrix.get("jax0.12-cpu"), replace(jax, jax="0.10.2")):
        assert container_env.apply(other, {}, root=SHAPES / "wsl2", nvidia=NO_GPU) == {}


MEM_FRACTION = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}


def test_on_a_gb10_the_jax_image_gets_half_the_memory_in_one_line(real_matrix, monkeypatch):
    said = []
    got = container_env.apply(real_matrix.get("jax0.12-cuda12.9"), {"A": "1"}, said.append, root=SHAPES / "linux",
                              nvidia=gpus(monkeypatch, "gb10-580"))
    assert got == {"A": "1", **MEM_FRACTION}
    assert said == ["kerasenv: unified memory (NVIDIA GB10 shares the system's RAM: JAX would preallocate 75 % of "
                    "it): XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 for JAX 0.12.0.1 (marin-community/marin#2142)"]


def test_on_a_gb10_the_users_fraction_wins_and_other_images_get_nothing(real_matrix, monkeypatch):
    gb10 = gpus(monkeypatch, "gb10-580")
    said = []
    mine = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.8"}
    assert container_env.apply(real_matrix.get("jax0.12-cuda12.9"), mine, said.append, nvidia=gb10) == mine
    assert said == []
    for other in ("torch2.15-cuda13.2", "tf2.21-cuda12.9", "jax0.12-cpu"):
        assert container_env.apply(real_matrix.get(other), {}, root=SHAPES / "linux", nvidia=gb10) == {}


def test_gh200s_hbm_needs_no_memory_setting(real_matrix, monkeypatch):
    assert container_env.apply(real_matrix.get("jax0.12-cuda12.9"), {}, root=SHAPES / "linux",
                               nvidia=gpus(monkeypatch, "gh200-550")) == {}


def test_nvidia_smi_is_asked_only_for_an_image_a_gpu_setting_can_apply_to(real_matrix, monkeypatch):
    asked = []

    def probe(exe=None):
        asked.append(exe)
        return gpus(monkeypatch, "gb10-580")

    monkeypatch.setattr(container_env, "probe_nvidia", probe)
    assert container_env.apply(real_matrix.get("torch2.15-cuda13.2"), {}, root=SHAPES / "linux") == {}
    assert asked == []
    assert container_env.apply(real_matrix.get("jax0.12-cuda12.9"), {}, root=SHAPES / "linux") == MEM_FRACTION
    assert asked == [None]


def test_wsl2_and_unified_memory_settings_add_up(real_matrix, monkeypatch):
    """No GB10 runs WSL2; the two shapes are independent, and each setting is said once."""
    said = []
    got = container_env.apply(real_matrix.get("jax0.12-cuda12.9"), {}, said.append, root=SHAPES / "wsl2",
                              nvidia=gpus(monkeypatch, "gb10-580"))
    assert got == {"XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async", **MEM_FRACTION} and len(said) == 2

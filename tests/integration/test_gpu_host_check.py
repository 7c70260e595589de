"""`kerasenv gpu-host-check`: the packed folder runs with only Python + jax/torch, no network.

The JAX and PyTorch images stand in for "a host with jax/torch installed": their own Python
runs the pack's run.py (`--no-require-gpu`: this machine has no GPU, so CPU results), with
the network off. The pack is made once per session (pip through the configured index).
"""

from __future__ import annotations

import json
import os

import pytest

from .conftest import SESSION, TEST_LABEL, kerasenv

# No io.kerasenv.kind: `make clean` (in the build lane of make test, beside these) would remove it.
LABELS = {TEST_LABEL: SESSION}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("gpu-host-check") / "pack"
    proc = kerasenv("gpu-host-check", "--pack", str(dest), timeout=600)
    assert "MiB, Keras" in proc.stderr
    (dest / "site").chmod(0o777)
    return dest


def test_the_pack_fits_a_lent_machine_and_holds_what_the_runner_needs(packed):
    size = sum(f.stat().st_size for f in packed.rglob("*") if f.is_file())
    assert size < 64 * 2**20
    assert (packed / "run.py").is_file() and (packed / "run.sh").is_file()
    assert (packed / "kerasenv_image" / "host_check.py").is_file()
    assert any(w.name.startswith("keras-3.") for w in (packed / "wheels").iterdir())


@pytest.mark.parametrize("variant, backend", [("jax0.10-cuda12.9", "jax"), ("torch2.15-cuda13.2", "torch")])
def test_the_packed_check_runs_in_a_jax_or_torch_environment_without_a_gpu(docker, packed, tmp_path, variant,
                                                                          backend):
    from docker.errors import ImageNotFound

    try:
        docker.images.get(f"kerasenv:{variant}")
    except ImageNotFound:
        pytest.fail(f"kerasenv:{variant} is not built here: `make build VARIANT={variant}` (it plays the {backend} host)")
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    container = docker.containers.create(
        f"kerasenv:{variant}", ["python", "/check/run.py", "--no-require-gpu", "--out", "/out", "--archive"],
        labels=LABELS, network_mode="none",
        volumes={str(packed): {"bind": "/check", "mode": "rw"}, str(out): {"bind": "/out", "mode": "rw"}})
    try:
        container.start()
        code = container.wait(timeout=900)["StatusCode"]
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    reports = [p for p in out.iterdir() if p.is_dir()]
    assert len(reports) == 1, logs[-3000:]
    report = reports[0]
    summary = json.loads((report / "summary.json").read_text())
    assert list(summary["backends"]) == [backend] and summary["require_gpu"] is False
    result = summary["backends"][backend]
    assert result["probe"]["exit"] == 0 and result["probe"]["failed"] == [], result
    assert (report / f"probe-{backend}.json").is_file() and (report / f"smoke-{backend}" / "report.json").is_file()
    # no nvidia-smi in these images: recorded, not faked
    assert all(c["exit"] is None for c in summary["nvidia_smi"].values())
    assert (out / f"{report.name}.tar.gz").is_file()
    assert code == summary["exit"]
    assert result["smoke"]["exit"] == 0 and result["verdict"] == "PASS" and code == 0, (result, logs[-3000:])

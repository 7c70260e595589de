"""`kerasenv doctor` on this real host (no GPU) and with a replayed GPU host."""

from __future__ import annotations

import json
import os

from .conftest import REPO, kerasenv

FAKE_SMI = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")


def test_doctor_on_this_host_passes_docker_and_recommends_the_cpu_image(docker, matrix):
    proc = kerasenv("doctor", "--json")
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["host"]}
    assert checks["docker"]["status"] == "PASS"
    assert report["recommended"] == matrix.default_cpu and report["gpu_usable"] is False


def test_doctor_asks_docker_itself_and_reports_its_real_refusal_here(docker):
    """No NVIDIA Container Toolkit here: Docker's own answer to --gpus all is the "no"."""
    from kerasenv.engine import docker_client
    from kerasenv.engine import docker_gpus

    docker_gpus.forget()
    answer = docker_gpus.ask(docker_client.client())
    assert answer.available is False
    assert "could not select device driver" in answer.detail
    checks = {c["name"]: c for c in json.loads(kerasenv("doctor", "--json").stdout)["host"]}
    toolkit = checks["container-toolkit"]
    assert toolkit["status"] == "INFO" and "could not select device driver" in toolkit["message"]
    left = docker.containers.list(all=True, filters={"label": "io.kerasenv.kind=gpu-probe"})
    assert left == [], "the probe container must be removed"


def test_run_with_gpus_auto_falls_back_to_the_cpu_on_dockers_answer(built_images, docker, matrix, tmp_path):
    proc = kerasenv("run", matrix.default_gpu, "--runs-dir", str(tmp_path / "runs"), "--",
                    "python", "-c", "print('ran')", check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ("running without a GPU: Docker refused --gpus all through NVIDIA's runtime hook: could not select "
            "device driver") in proc.stderr


def test_doctor_require_gpu_exits_3_without_a_gpu(docker):
    proc = kerasenv("doctor", "--require-gpu", check=False)
    assert proc.returncode == 3
    assert proc.stderr.startswith("kerasenv: error: no GPU variant can run on this host")


def test_doctor_container_probe_reports_that_docker_cannot_give_the_gpu(built_images, docker, matrix):
    proc = kerasenv("doctor", "--container", matrix.default_gpu, "--json", check=False)
    assert proc.returncode == 3, proc.stderr
    container = json.loads(proc.stdout)["container"]
    assert container["status"] == {"nvidia_smi_l": "FAIL", "tf_gpus": "FAIL", "tf_gpu_libraries": "PASS"}
    assert "NVIDIA Container Toolkit" in container["nvidia_smi_l"]
    # TensorFlow's own library check needs no GPU: it ran in a container without one
    assert container["tf_gpu_libraries"].startswith("TryDlopenCUDALibraries() OK")


def test_doctor_container_text_has_one_line_for_the_library_check(built_images, docker, matrix):
    proc = kerasenv("doctor", "--container", matrix.default_gpu, check=False)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "container tf_gpu_libraries" in line]
    assert len(lines) == 1 and lines[0].startswith("PASS  container tf_gpu_libraries TryDlopenCUDALibraries() OK")


def test_doctor_with_a_replayed_h100_host_names_the_driver_fix(docker):
    env = {**os.environ, "KERASENV_NVIDIA_SMI": FAKE_SMI, "KERASENV_FIXTURE_HOST": "h100-550"}
    proc = kerasenv("doctor", env=env)
    # TF 2.21's binaries carry sm_90 SASS (kernel-targets.json): the H100 needs no PTX JIT there,
    # so driver 550 runs it; the CUDA 13 image is the one this driver cannot load.
    assert "PASS  variant tf2.21-cuda12.9" in proc.stdout
    assert "FAIL  variant torch2.15-cuda13.2 driver 550.54.14 is older than 580.65.06" in proc.stdout
    assert "fix: upgrade the NVIDIA driver to >= 580.65.06" in proc.stdout

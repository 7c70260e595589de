"""The smoke training's verdict on every host shape, in the real images, on this GPU-less
machine: 1 and 8 replicas (MirroredStrategy over logical CPU devices), large batches,
tf.keras 2, and TensorFlow runtime errors injected where the GPU stack would raise them."""

from __future__ import annotations

import json

import pytest

from .conftest import kerasenv, multiworker_left

KERAS2 = "tf2.15-cuda12.2"


@pytest.fixture(scope="module")
def keras2_image(docker):
    """Built only when missing: `make test` built it already, and dropped its builder stages
    (only the variants in BUILT_IN_TESTS keep them), so a rebuild here would start cold. The tests
    on it run in its test lane, right after its acceptance run (lane_image), and need nothing else."""
    from docker.errors import ImageNotFound

    try:
        docker.images.get(f"kerasenv:{KERAS2}")
    except ImageNotFound:
        kerasenv("build", KERAS2, timeout=3600)
    return f"kerasenv:{KERAS2}"


def report_of(container, image: str, *args: str, run_id: str = "r"):
    out = f"/tmp/{run_id}"
    status, stdout, err = container(image).run(
        ["sh", "-c", f"python /opt/kerasenv/smoke_train.py --run-id {run_id} --output-dir {out} "
                     f"{' '.join(args)} >/dev/null; code=$?; cat {out}/report.json; exit $code"], timeout=900)
    return status, json.loads(stdout), err


# 1: the default strategy; 8: MirroredStrategy at the largest common node (8 GPUs). Two replicas
# run in test_tf_keras_2_trains_two_replicas below and in the multi-worker tests; 4 added
# nothing those do not cover, for 17 s of CI.
@pytest.mark.parametrize("replicas", [1, 8])
def test_the_verdict_does_not_depend_on_the_replica_count(built_images, container, matrix, replicas):
    status, report, err = report_of(container, matrix.get(matrix.default_cpu).image_ref,
                                    "--logical-cpus", str(replicas), run_id=f"rep{replicas}")
    assert status == 0, err[-3000:]
    t = report["training"]
    assert t["replicas"] == replicas and t["global_batch_size"] == 64 * replicas
    assert t["steps_per_epoch"] == 32  # the same schedule for every replica count
    assert t["strategy"] == ("MirroredStrategy" if replicas > 1 else "_DefaultDistributionStrategy")
    assert report["verdict"]["learned"] and t["final_accuracy"] >= 0.8


# 512: eight times the default (64), the large-batch end where a fixed learning rate stops
# learning; 256 sat between the two and ran for 8 s of CI.
@pytest.mark.parametrize("batch_size", [512])
def test_the_verdict_does_not_depend_on_the_batch_size(built_images, container, matrix, batch_size):
    status, report, err = report_of(container, matrix.get(matrix.default_cpu).image_ref,
                                    "--batch-size", str(batch_size), run_id=f"b{batch_size}")
    assert status == 0, err[-3000:]
    assert report["training"]["steps_per_epoch"] == 32 and report["verdict"]["learned"]


@pytest.mark.lane_image("tf2.15-cuda12.2")  # KERAS2
def test_tf_keras_2_trains_two_replicas(keras2_image, container):
    status, report, err = report_of(container, keras2_image, "--logical-cpus", "2", run_id="k2")
    assert status == 0, err[-3000:]
    assert report["versions"]["keras"].startswith("2.") and report["training"]["replicas"] == 2


@pytest.mark.lane_image("tf2.15-cuda12.2")  # KERAS2
def test_tf_keras_2_multi_worker_trains_in_lockstep(keras2_image, docker, tmp_path):
    """Keras 2 spells the per-example reduction "none" and keeps LossScaleOptimizer under
    keras.mixed_precision: the custom loop handles both."""
    runs = tmp_path / "runs"
    proc = kerasenv("multiworker", KERAS2, "--workers", "2", "--runs-dir", str(runs),
                    "--run-id", "mw2", "--json", timeout=900)
    chief = json.loads(proc.stdout)
    worker = json.loads((runs / "mw2" / "worker-1" / "report.json").read_text())
    assert chief["status"] == worker["status"] == "ok", proc.stderr[-3000:]
    assert chief["versions"]["keras"].startswith("2.")
    assert chief["training"]["loss_per_epoch"] == worker["training"]["loss_per_epoch"]
    assert multiworker_left(docker, KERAS2) == []


# --- TensorFlow runtime errors, injected where the GPU stack raises them ---------------------

INJECT = (
    "import sys\n"
    "from kerasenv_image.smoke import main as s\n"
    "from kerasenv_image.backends import tensorflow as backend\n"
    "def placement_check(tf, gpus):\n"
    "    import os; os.write(2, ({log!r} + '\\n').encode())\n"
    "    raise tf.errors.{cls}(None, None, {message!r})\n"
    "backend.placement_check = placement_check\n"
    "code = s.main(['--run-id', 'inj', '--output-dir', '/tmp/inj'])\n"
    "print(open('/tmp/inj/report.json').read())\n"
    "sys.exit(code)\n")


@pytest.mark.parametrize("cls, message, log, kind, code", [
    ("InternalError", "Autotuner could not find any supported configs for HLO: custom_call_target="
     '"__cudnn$convBiasActivationForward"',
     "E0000 00:00:1.0 1 gemm_fusion_autotuner.cc:9] Autotuner could not find any supported configs",
     "cudnn-autotune", 7),
    ("InternalError", "Failed to load in-memory CUBIN: CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "E0000 00:00:1.0 1 gpu_executor.cc:9] the provided PTX was compiled with an unsupported toolchain",
     "ptx-jit", 7),
    ("UnknownError", "ncclUnhandledCudaError: Call to CUDA function failed.",
     "W0000 00:00:1.0 1 nccl_manager.cc:9] NCCL WARN Cuda failure 'out of memory'", "nccl", 7),
    ("NotFoundError", "No registered 'Foo' OpKernel for 'GPU' devices",
     "E0000 00:00:1.0 1 op_kernel.cc:9] OP_REQUIRES failed at foo.cc:1 : NOT_FOUND: no kernel",
     "tensorflow-runtime", 8),
])
def test_each_tensorflow_error_class_gets_its_kind_exit_code_and_a_report(
        built_images, container, matrix, cls, message, log, kind, code):
    status, stdout, err = container(matrix.get(matrix.default_cpu).image_ref).run(
        ["python", "-c", INJECT.format(cls=cls, message=message, log=log)])
    assert status == code, err[-3000:]
    report = json.loads(stdout)
    assert report["status"] == "failed" and report["exit_code"] == code
    assert report["error"]["kind"] == kind and report["error"]["fix"]
    assert report["error"]["tf_log"] == log  # the first relevant TF log line, kept while shown
    assert log in err  # and still shown
    assert f"[smoke] FAILED (exit {code})" in err and "Traceback" not in err


def test_a_placement_off_the_requested_device_fails_the_run(built_images, container, matrix):
    code = (
        "import sys\n"
        "from kerasenv_image.smoke import main as s\n"
        "from kerasenv_image.backends import tensorflow as backend\n"
        "real = backend.placement_check\n"
        "def placement_check(tf, gpus):\n"
        "    r = real(tf, gpus); r.update(requested='/GPU:0', ok=False); return r\n"
        "backend.placement_check = placement_check\n"
        "sys.exit(s.main(['--run-id', 'pl', '--output-dir', '/tmp/pl', '--epochs', '1']))\n")
    status, _, err = container(matrix.get(matrix.default_cpu).image_ref).run(["python", "-c", code])
    assert status == 4, err[-3000:]
    assert "asked for /GPU:0 but the result lives on" in err

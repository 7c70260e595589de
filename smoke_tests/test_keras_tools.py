"""Keras's everyday tools beyond fit() (issue 30), in one container per image, as an arbitrary UID
on a read-only root, offline: the tf.data utilities, the TensorBoard callback, grain, plot_model,
SavedModel and ONNX export (keras_tools_script/tools.py), and TensorFlow beside JAX/PyTorch taking
no GPU. Which rows each image offers comes from the matrix (kerasenv.matrix.keras_tools); a row it
does not offer must fail the documented way, so a doc that says "not here" cannot go stale."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kerasenv.host import gpu_choice

from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, not built here
SCRIPT = Path(__file__).parent / "keras_tools_script"

# How a row an image does not offer fails (keras_tools.KerasTools.offers gives the reason).
NOT_OFFERED = {
    "grain": r"unexpected keyword argument 'format'|Unknown keywords argument\(s\): \('format',\)",
    # Keras < 3.8: no format="onnx" (a TypeError, or a SavedModel directory at the path)
    "onnx": r"unexpected keyword argument 'format'|is a directory, not an ONNX file",
    # Keras 3.15.1 on PyTorch: torch.export refuses Keras' dynamic_shapes before torch_xla is needed;
    # JAX >= 0.12: TF 2.21 cannot deserialize the StableHLO JAX wrote into the SavedModel
    "saved_model": r"torch_xla|mismatch between the structure of `inputs` and `dynamic_shapes`"
                   r"|Cannot deserialize computation: .*unregistered operation 'vhlo\.",
}


def run_tools(docker, target, out_dir: Path, **extra) -> dict:
    code, out, err = run_once(
        docker, target.ref, ["python", "/user/tools.py"], network_mode="none", user="23456:0",
        read_only=True, tmpfs={"/tmp": "rw,size=512m"}, environment={"OUT_DIR": "/out"},
        volumes={str(SCRIPT): {"bind": "/user", "mode": "ro"}, str(out_dir): {"bind": "/out", "mode": "rw"}},
        **extra)
    assert code == 0, (out[-2000:], err[-3000:])
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tools_out(tmp_path_factory, target):
    # Per image: a folder shared by several images' runs would hold several event files.
    out = tmp_path_factory.mktemp(f"keras-tools-{target.variant.id}")
    out.chmod(0o777)
    return out


@pytest.fixture(scope="module")
def tools_run(docker, target, tools_out) -> dict:
    return run_tools(docker, target, tools_out)


@pytest.fixture(scope="module")
def offers(target) -> dict:
    tools = target.variant.keras_tools
    assert tools is not None, f"{target.variant.id}: the matrix has no [keras_tools] for it"
    return tools.offers(target.variant)


def test_every_tool_the_image_offers_works(tools_run, offers, target):
    failed = {name: tools_run["rows"][name]["error"] for name, why_not in offers.items()
              if why_not is None and not tools_run["rows"][name]["ok"]}
    assert failed == {}, json.dumps({n: tools_run["rows"][n] for n in failed}, indent=1)[-4000:]
    assert (tools_run["uid"], tools_run["gid"]) == (23456, 0)
    assert tools_run["facts"]["keras"].startswith(target.variant.keras)


def test_what_the_image_does_not_offer_fails_the_documented_way(tools_run, offers):
    not_offered = {name: why for name, why in offers.items() if why is not None}
    for name, why in not_offered.items():
        result = tools_run["rows"][name]
        assert not result["ok"], f"{name} works here, but the matrix says it does not ({why}): update keras_tools.py"
        assert re.search(NOT_OFFERED[name], result["error"]), (name, why, result["error"])


def test_tensorboard_callback_scalars_and_plot_model_png(tools_run, tools_out):
    assert len(tools_run["rows"]["tensorboard"]["epoch_loss"]) == 2
    assert list((tools_out / "tensorboard" / "train").glob("events.out.tfevents.*"))
    png = tools_run["rows"]["plot_model"]
    assert png["width"] > 50 and png["height"] > 100, png  # the layers stacked, with their shapes
    assert {p.stat().st_uid for p in tools_out.iterdir()} == {23456}


def test_tensorflow_beside_jax_or_torch_is_the_cpu_build_and_maps_no_cuda(tools_run, target):
    """TensorFlow in a JAX or PyTorch image is tensorflow-cpu at the TF images' release (on arm64
    `tensorflow` at that release, whose aarch64 wheel is the CPU build: tensorflow-cpu has none;
    which distribution it is, test_packages checks): not a CUDA
    build, no GPU device, and after a tf.data pipeline ran no CUDA library is mapped, so it holds
    no CUDA context and no GPU memory; the backend keeps its own devices (and on a CUDA image its
    CUDA build: torch.version.cuda, JAX's CUDA plugin). On a GPU host test_..._on_a_gpu below
    shows the backend owning the GPU with TensorFlow beside it."""
    v, facts = target.variant, tools_run["facts"]
    if v.backend == "tensorflow":
        pytest.skip("a TensorFlow image: TensorFlow is the backend, GPU build on CUDA images (test_cuda_libraries)")
    assert facts["tensorflow"] == v.keras_tools.tensorflow_cpu
    assert facts["tf_is_cuda_build"] is False and facts["tf_gpus"] == []
    assert facts["tf_data_sum"] == 2 * sum(range(64))
    assert facts["cuda_libraries_mapped_by_tf"] == []
    assert facts["backend_devices"], facts
    if v.family == "cuda":
        if v.backend == "torch":
            assert facts["torch_cuda"] == v.cuda, facts
        else:
            assert facts["jax_cuda_plugin"] is True, facts


def test_onnx_export_runs_in_onnxruntime(tools_run, tools_out, offers):
    """The exported file, run by onnxruntime on the host (the dev venv's: it serves the file, not
    the image, and would add 78 MB to each image), gives model.predict's output."""
    if offers["onnx"] is not None:
        pytest.skip(f"no ONNX export here: {offers['onnx']} (the failure itself is checked above)")
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(str(tools_out / "model.onnx"), providers=["CPUExecutionProvider"])
    (model_input,) = session.get_inputs()
    probe = np.load(tools_out / "onnx_probe.npz")
    batch = model_input.shape[0] if isinstance(model_input.shape[0], int) else len(probe["probe"])
    (got,) = session.run(None, {model_input.name: probe["probe"][:batch]})
    assert np.allclose(got, probe["expected"][:batch], atol=1e-4), (got, probe["expected"][:batch])


@pytest.mark.gpu
def test_tensorflow_beside_jax_or_torch_leaves_the_gpu_to_the_backend_on_a_gpu(docker, target, tmp_path):
    """On a GPU host: the backend lists the GPU, TensorFlow beside it lists none and maps no CUDA
    library after its tf.data pipeline, and every tool still works (a missing GPU fails)."""
    if target.variant.backend == "tensorflow" or target.variant.family != "cuda":
        pytest.skip("TensorFlow beside JAX/PyTorch on a CUDA image only")
    tmp_path.chmod(0o777)
    # --gpus all as kerasenv sends it on this host's engine (the runtime hook or CDI)
    result = run_tools(docker, target, tmp_path, **dict(gpu_choice.Resolver(docker)(target.variant, "all").kwargs))
    facts = result["facts"]
    assert facts["backend_gpus"] >= 1, facts
    assert facts["tf_gpus"] == [] and facts["cuda_libraries_mapped_by_tf"] == [], facts
    offered = target.variant.keras_tools.offers(target.variant)
    assert [n for n, why in offered.items() if why is None and not result["rows"][n]["ok"]] == []

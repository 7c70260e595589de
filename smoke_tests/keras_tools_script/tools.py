"""Keras's everyday tools beyond fit(), as a tutorial calls them (issue 30), in one process:

- TensorFlow beside JAX/PyTorch (tensorflow-cpu): no CUDA build, no GPU, and no CUDA library
  mapped by its import and a tf.data pipeline on top of what the backend mapped itself;
- keras.utils.image_dataset_from_directory (format="tf", and format="grain"), text_..., audio_...
  and timeseries_dataset_from_array on files this script writes;
- model.fit() on the image folder with keras.callbacks.TensorBoard, its scalars read back with
  TensorBoard's EventAccumulator;
- keras.utils.plot_model to a PNG;
- model.export() as a SavedModel, reloaded with TensorFlow and run against model.predict;
- model.export(format="onnx"), with a probe input and the expected output beside it, which the
  acceptance test runs in onnxruntime on the host.

Every row is tried and reported, never assumed: {"rows": {name: {"ok": bool, "error": str,
...}}} as the last line of stdout. Which rows must pass in which image is the test's business
(smoke_tests/test_keras_tools.py, from the matrix). Exits 0 unless the script itself broke.
"""

import json
import os
import sys
import time
import traceback
import wave

import numpy as np

OUT = os.environ.get("OUT_DIR", "/out")
DATA = os.path.join(os.environ.get("TMPDIR", "/tmp"), "keras-tools-data")
BACKEND = os.environ.get("KERAS_BACKEND", "tensorflow")
rows: dict = {}
facts: dict = {}


def row(name):
    """Run one row; record ok, the error's last line and its seconds."""
    def wrap(fn):
        started = time.perf_counter()
        try:
            rows[name] = {"ok": True, **(fn() or {})}
        except BaseException as exc:  # noqa: BLE001 - every failure is the row's result
            rows[name] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip()[:600]}",
                          "traceback": traceback.format_exc()[-1500:]}
        rows[name]["seconds"] = round(time.perf_counter() - started, 2)
        return fn
    return wrap


CUDA_LIBS = ("libcuda.so", "libcudart.so", "libcudnn", "libcublas", "libnccl")


def mapped_cuda_libraries() -> list:
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line}
    return sorted(p for p in paths if any(os.path.basename(p).startswith(lib) for lib in CUDA_LIBS))


# --- the backend first, as a Keras script starts; then TensorFlow beside it ------------------
# On JAX and PyTorch the backend's devices are listed before TensorFlow is imported, and what
# TensorFlow's import and a tf.data pipeline map on top is TensorFlow's own. (TensorFlow 2.21's
# own import imports Keras and so the backend: imported first, TensorFlow's CUDA-library
# count would include PyTorch's. The TensorFlow-first order is the `tensorboard` command's,
# checked in smoke_tests/test_profile.py.)
from importlib.metadata import version  # noqa: E402

if BACKEND == "tensorflow":
    import tensorflow as tf

    keras = tf.keras if version("keras").startswith("2.") else __import__("keras")  # tf.keras 2: TF 2.14/2.15
    facts["backend_devices"] = [d.name for d in tf.config.list_physical_devices()]
    facts["backend_gpus"] = len(tf.config.list_physical_devices("GPU"))
else:
    import keras

    if BACKEND == "jax":
        import importlib.util

        import jax

        facts["backend_devices"] = [f"{d.platform}:{d.id}" for d in jax.devices()]
        facts["backend_gpus"] = sum(d.platform == "gpu" for d in jax.devices())
        facts["jax_cuda_plugin"] = importlib.util.find_spec("jax_cuda12_plugin") is not None
    else:
        import torch

        facts["backend_devices"] = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        facts["backend_gpus"] = torch.cuda.device_count()
        facts["torch_cuda"] = torch.version.cuda
    facts["cuda_libraries_mapped_by_backend"] = mapped_cuda_libraries()
    import tensorflow as tf

facts["keras"] = version("keras")  # tf.keras 2 has no keras.__version__
facts["tensorflow"] = tf.__version__
facts["tf_is_cuda_build"] = bool(tf.test.is_built_with_cuda())
facts["tf_gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
total = tf.data.Dataset.range(64).map(lambda x: x * 2).batch(16).reduce(np.int64(0), lambda a, b: a + tf.reduce_sum(b))
facts["tf_data_sum"] = int(total)
if BACKEND != "tensorflow":
    facts["cuda_libraries_mapped_by_tf"] = sorted(set(mapped_cuda_libraries()) - set(facts["cuda_libraries_mapped_by_backend"]))


# --- files a user's data folder would hold ----------------------------------------------------
rng = np.random.default_rng(3)
IMAGES, TEXT, AUDIO = (os.path.join(DATA, k) for k in ("images", "text", "audio"))
for label, level in (("bright", 200), ("dark", 40)):
    os.makedirs(os.path.join(IMAGES, label), exist_ok=True)
    for i in range(12):
        pixels = np.clip(rng.normal(level, 20, size=(16, 16, 3)), 0, 255).astype("uint8")
        # TensorFlow's encoder: tf.keras 2 images have no PIL (keras.utils.save_img needs it)
        tf.io.write_file(os.path.join(IMAGES, label, f"{i}.png"), tf.io.encode_png(pixels))
for label, words in (("pos", "good great fine"), ("neg", "bad awful poor")):
    os.makedirs(os.path.join(TEXT, label), exist_ok=True)
    for i in range(4):
        with open(os.path.join(TEXT, label, f"{i}.txt"), "w") as f:
            f.write(" ".join(rng.choice(words.split(), size=6)))
for label, hz in (("low", 220), ("high", 880)):
    os.makedirs(os.path.join(AUDIO, label), exist_ok=True)
    for i in range(3):
        samples = (np.sin(2 * np.pi * hz * np.arange(1600) / 16000) * 12000).astype("<i2")
        with wave.open(os.path.join(AUDIO, label, f"{i}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(samples.tobytes())


def make_model():
    inputs = keras.Input(shape=(16, 16, 3), name="image")
    x = keras.layers.Rescaling(1 / 255.0)(inputs)
    x = keras.layers.Conv2D(4, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(2, activation="softmax", name="class")(x)
    model = keras.Model(inputs, outputs, name="tools_model")
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


model = make_model()
TB_DIR = os.path.join(OUT, "tensorboard")


@row("image_dataset")
def _():
    ds = keras.utils.image_dataset_from_directory(IMAGES, image_size=(16, 16), batch_size=8, seed=1)
    images, labels = next(iter(ds))
    return {"class_names": ds.class_names, "batch": list(np.asarray(images).shape), "type": type(ds).__name__}


@row("tensorboard")
def _():
    ds = keras.utils.image_dataset_from_directory(IMAGES, image_size=(16, 16), batch_size=8, seed=1)
    history = model.fit(ds, epochs=2, verbose=0, callbacks=[keras.callbacks.TensorBoard(TB_DIR)])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    acc = EventAccumulator(os.path.join(TB_DIR, "train"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    # tf.summary.scalar in TF 2 writes tensor events; the callback also writes the model's config
    # as a text summary ("keras"), which is not a scalar.
    scalars = {tag: [float(make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
               for tag in acc.Tags()["tensors"] if tag.startswith("epoch_")}
    scalars.update({tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]})
    loss = scalars.get("epoch_loss")
    assert loss and len(loss) == 2, f"no epoch_loss for 2 epochs in {TB_DIR}/train: {sorted(scalars)}"
    assert np.allclose(loss, history.history["loss"], rtol=1e-4), (loss, history.history["loss"])
    return {"epoch_loss": loss}


@row("grain")
def _():
    ds = keras.utils.image_dataset_from_directory(IMAGES, image_size=(16, 16), batch_size=8, seed=1,
                                                  format="grain")
    history = make_model().fit(ds, epochs=1, verbose=0)
    return {"type": type(ds).__module__ + "." + type(ds).__name__, "loss": history.history["loss"][-1]}


@row("text_dataset")
def _():
    ds = keras.utils.text_dataset_from_directory(TEXT, batch_size=8, seed=1)
    texts, labels = next(iter(ds))
    return {"class_names": ds.class_names, "batch": len(np.asarray(labels))}


@row("audio_dataset")
def _():
    ds = keras.utils.audio_dataset_from_directory(AUDIO, batch_size=6, output_sequence_length=1600, seed=1)
    audio, labels = next(iter(ds))
    return {"class_names": ds.class_names, "batch": list(np.asarray(audio).shape)}


@row("timeseries")
def _():
    ds = keras.utils.timeseries_dataset_from_array(np.arange(100, dtype="float32"), None, sequence_length=10,
                                                   batch_size=8)
    first = np.asarray(next(iter(ds)))
    assert first[1, 0] == 1.0 and first[0, 9] == 9.0, first[:2]
    return {"batch": list(first.shape)}


@row("plot_model")
def _():
    path = os.path.join(OUT, "model.png")
    keras.utils.plot_model(model, to_file=path, show_shapes=True)
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    return {"png": path, "width": width, "height": height}


probe = np.clip(rng.normal(120, 60, size=(4, 16, 16, 3)), 0, 255).astype("float32")
expected = np.asarray(model.predict(probe, verbose=0))


@row("saved_model")
def _():
    path = os.path.join(OUT, "saved_model")
    model.export(path)
    reloaded = tf.saved_model.load(path)  # as TF Serving loads it: no Keras, no backend
    got = np.asarray(reloaded.serve(tf.constant(probe)))
    diff = float(np.max(np.abs(got - expected)))
    assert diff < 1e-4, diff
    return {"max_diff": diff, "signatures": sorted(reloaded.signatures)}


@row("onnx")
def _():
    path = os.path.join(OUT, "model.onnx")
    model.export(path, format="onnx")
    # Keras 3.6's export() takes format= and ignores it: it writes a SavedModel directory there.
    assert os.path.isfile(path), f"{path} is a directory, not an ONNX file: this Keras ignored format=\"onnx\""
    import onnx  # the exporters' own dependency: the file is a valid ONNX model

    onnx.checker.check_model(path)
    np.savez(os.path.join(OUT, "onnx_probe.npz"), probe=probe, expected=expected)
    return {"onnx": path, "bytes": os.path.getsize(path)}


print(json.dumps({"backend": BACKEND, "facts": facts, "rows": rows, "uid": os.getuid(), "gid": os.getgid()}))

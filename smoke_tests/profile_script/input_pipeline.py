"""A user's own fit() profiled the README's way (kerasenv_image.profiling), twice: with a
fast tf.data pipeline and with a deliberately slow one (a `tf.py_function` map sleeping
20 ms per batch). Prints one JSON line per pipeline: {"pipeline", "result"} where result
is profiling.input_wait(...)."""

import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from kerasenv_image import gpu_monitor, profiling  # noqa: E402

keras = gpu_monitor.keras_for_tf()  # Keras 3 from TF 2.16, tf.keras 2 before
SLEEP_S = 0.02
STEPS, EPOCHS = 16, 2


def dataset(slow: bool):
    x = np.random.default_rng(0).random((1024, 32), dtype=np.float32)
    y = (x.sum(axis=1) > 16).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    if slow:
        def sleepy(features):
            time.sleep(SLEEP_S)
            return features

        def slow_map(features, labels):
            features = tf.py_function(sleepy, [features], tf.float32)
            features.set_shape([None, 32])
            return features, labels

        ds = ds.map(slow_map)
    return ds.repeat().prefetch(2)


for name in ("fast", "slow"):
    log_dir = f"/out/{name}"
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy")
    first, last = profiling.steady_steps(STEPS, EPOCHS)
    window = profiling.step_window_class(keras)(first, last)
    model.fit(dataset(name == "slow"), epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(log_dir, profile_batch=(first, last)), window])
    print(json.dumps({"pipeline": name, "result": profiling.input_wait(log_dir, window)}), flush=True)

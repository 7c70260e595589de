"""A user's own Keras script with kerasenv's GpuMonitor (what the README shows), on the image's
Keras backend (tf.keras 2, or Keras 3 on TensorFlow, JAX or PyTorch), run by
smoke_tests/test_gpu_monitor.py: `python fit.py LOG_DIR`. Prints one JSON line: the
monitor's per-epoch numbers, what it reported, and the processes still running under
this one after fit() (nvidia-smi must not be among them)."""

import json
import os
import sys
import time

import numpy as np
from kerasenv_image import GpuMonitor  # no path set-up: the image's .pth file has it

if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    import tensorflow as tf

    keras = tf.keras if tuple(int(p) for p in tf.__version__.split(".")[:2]) < (2, 16) else __import__("keras")
else:
    import keras  # Keras 3 on JAX or PyTorch (TensorFlow there is CPU-only, for tf.data)
log_dir = sys.argv[1]


class SlowSteps(keras.callbacks.Callback):
    """Makes each epoch last long enough for several nvidia-smi samples (200 ms apart)."""

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.05)


rng = np.random.default_rng(0)
x = rng.random((640, 8), dtype=np.float32)
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
monitor = GpuMonitor(log_dir)
model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[monitor, SlowSteps()])

me = str(os.getpid())
children = []
for stat in os.listdir("/proc"):
    if stat.isdigit():
        try:
            with open(f"/proc/{stat}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:  # ppid
            with open(f"/proc/{stat}/cmdline", "rb") as handle:
                children.append(handle.read().replace(b"\0", b" ").decode())
print(json.dumps({"epochs": monitor.epochs, "report": monitor.report(), "children": children,
                  "base": [c.__module__ + "." + c.__name__ for c in type(monitor).__mro__]}))

"""A user's own Keras script, as people write them: functional API, an input pipeline,
callbacks, save and reload. The acceptance suite runs it in every image (Keras 3 on TensorFlow,
JAX and PyTorch, and tf.keras 2) as an arbitrary UID on a read-only root file system, with only
OUT_DIR writable. The input pipeline is what a user of that backend writes: tf.data on
TensorFlow, Keras 3's backend-neutral keras.utils.PyDataset on JAX and PyTorch (their
tensorflow-cpu serves tf.data too: keras_tools_script/tools.py checks that).

Prints one JSON line with what it measured; exits non-zero when anything is off.
"""

import json
import os
import sys

import numpy as np

BACKEND = os.environ.get("KERAS_BACKEND", "tensorflow")
if BACKEND == "tensorflow":
    import tensorflow as tf

    if tuple(int(p) for p in tf.__version__.split(".")[:2]) >= (2, 16):
        import keras
    else:
        keras = tf.keras  # tf.keras 2 on TF 2.14/2.15
else:
    import keras

out_dir = os.environ.get("OUT_DIR", "/out")
keras.utils.set_random_seed(7)

# Two Gaussian blobs per class in 16 dimensions: learnable in a few epochs on a CPU.
rng = np.random.default_rng(7)
centres = rng.normal(0, 3, size=(4, 16)).astype("float32")
labels = rng.integers(0, 4, size=2048)
features = centres[labels] + rng.normal(0, 1, size=(2048, 16)).astype("float32")


def dataset(x, y, shuffle):
    if BACKEND != "tensorflow":
        return Batches(x, y, shuffle)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if shuffle:
        ds = ds.shuffle(len(x), seed=7)
    return ds.map(lambda a, b: (a * 0.5, b), num_parallel_calls=tf.data.AUTOTUNE).batch(64).prefetch(2)


if BACKEND != "tensorflow":
    class Batches(keras.utils.PyDataset):
        """The same pipeline as the tf.data one: scaled features in batches of 64, reshuffled
        each epoch when asked."""

        def __init__(self, x, y, shuffle):
            super().__init__()
            self.x, self.y, self.shuffle = x, y, shuffle
            self.order = np.arange(len(x))
            self.shuffler = np.random.default_rng(7)
            self.on_epoch_end()

        def __len__(self):
            return -(-len(self.x) // 64)

        def __getitem__(self, index):
            rows = self.order[index * 64:(index + 1) * 64]
            return self.x[rows] * 0.5, self.y[rows]

        def on_epoch_end(self):
            if self.shuffle:
                self.shuffler.shuffle(self.order)


train_ds = dataset(features[:1536], labels[:1536], True)
val_ds = dataset(features[1536:], labels[1536:], False)

inputs = keras.Input(shape=(16,), name="features")
hidden = keras.layers.Dense(32, activation="relu")(inputs)
hidden = keras.layers.Dropout(0.1)(hidden)
outputs = keras.layers.Dense(4, activation="softmax", name="class")(hidden)
model = keras.Model(inputs, outputs, name="user_model")
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])

# Weights-only checkpoints: a whole-model `.keras` ModelCheckpoint fails on tf.keras 2.14
# ("The following argument(s) are not supported with the native Keras format: ['options']"),
# while `*.weights.h5` works on tf.keras 2 and Keras 3 alike.
checkpoint = os.path.join(out_dir, "best.weights.h5")
history = model.fit(
    train_ds, validation_data=val_ds, epochs=6, verbose=0,
    callbacks=[keras.callbacks.ModelCheckpoint(checkpoint, monitor="val_loss", save_best_only=True,
                                               save_weights_only=True),
               keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True),
               keras.callbacks.CSVLogger(os.path.join(out_dir, "history.csv"))])

final = os.path.join(out_dir, "model.keras")
model.save(final)
reloaded = keras.models.load_model(final)
probe = features[1536:1600] * 0.5
diff = float(np.max(np.abs(model.predict(probe, verbose=0) - reloaded.predict(probe, verbose=0))))
reloaded.load_weights(checkpoint)  # the best epoch's weights load into the reloaded model
val_accuracy = float(history.history["val_accuracy"][-1])

# keras.backend.backend() is what Keras trained on (tf.keras 2 has it too: "tensorflow").
result = {"backend": keras.backend.backend(), "epochs": len(history.history["loss"]), "val_accuracy": val_accuracy, "reload_max_diff": diff,
          "files": sorted(os.listdir(out_dir)), "uid": os.getuid(), "gid": os.getgid()}
print(json.dumps(result))
sys.exit(0 if val_accuracy >= 0.9 and diff < 1e-5 and os.path.exists(checkpoint) else 1)

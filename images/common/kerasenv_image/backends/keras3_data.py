"""What the JAX and PyTorch backends share: their input is numpy batches in a
`keras.utils.PyDataset`: the smoke's batches stay on the backend's own path, though the images'
tensorflow-cpu would serve tf.data too (smoke_tests/test_keras_tools.py)."""

from __future__ import annotations


def synthetic_batches(keras, images, labels, global_batch: int, seed: int, steps_per_epoch: int):
    """The smoke's data as `steps_per_epoch` batches per epoch, like the tf.data pipeline
    (smoke.data.make_dataset): scaled to [0, 1], reshuffled each epoch with `seed`, and
    endless in effect: an epoch draws from as many passes over the data as it needs, so a
    global batch larger than the data set is fine."""
    import numpy as np

    class SyntheticBatches(keras.utils.PyDataset):
        def __init__(self) -> None:
            # workers=1, no multiprocessing: the batches are slices of arrays in memory.
            super().__init__()
            self.rng = np.random.default_rng(seed)
            self.images = images.astype(np.float32) / 255.0
            self.labels = labels
            self.order = self._epoch_order()

        def _epoch_order(self):
            needed = steps_per_epoch * global_batch
            passes = -(-needed // len(self.labels))
            return np.concatenate([self.rng.permutation(len(self.labels)) for _ in range(passes)])[:needed]

        def __len__(self) -> int:
            return steps_per_epoch

        def __getitem__(self, index: int):
            picked = self.order[index * global_batch:(index + 1) * global_batch]
            return self.images[picked], self.labels[picked]

        def on_epoch_end(self) -> None:
            self.order = self._epoch_order()

    return SyntheticBatches()


def repeated_batch(keras, x, y, steps: int):
    """The bench's input: one in-memory batch, `steps` times (no input pipeline in the figure)."""

    class RepeatedBatch(keras.utils.PyDataset):
        def __len__(self) -> int:
            return steps

        def __getitem__(self, index: int):
            return x, y

    return RepeatedBatch()


def step_hooks_class(keras):
    """A callback calling `start()` before global step `first` and `stop()` after step `last`
    (1-based over the whole fit(), as Keras' TensorBoard counts profile_batch), and `stop()`
    on train end if still running: the profiler window of the JAX and PyTorch backends."""

    class StepHooks(keras.callbacks.Callback):
        def __init__(self, first: int, last: int, start, stop) -> None:
            super().__init__()
            self.first, self.last, self._start, self._stop = first, last, start, stop
            self.step, self.running, self.error = 0, False, None

        def on_train_batch_begin(self, batch, logs=None):
            self.step += 1
            if self.step == self.first and not self.running:
                try:
                    self._start()
                    self.running = True
                except Exception as exc:  # noqa: BLE001 - no profile is a finding, not a failed run
                    self.error = f"the profiler did not start: {type(exc).__name__}: {str(exc)[:200]}"

        def on_train_batch_end(self, batch, logs=None):
            if self.step == self.last:
                self._finish(logs)

        def on_train_end(self, logs=None):
            self._finish(logs)

        def _finish(self, logs) -> None:
            if not self.running:
                return
            self.running = False
            try:
                if logs and logs.get("loss") is not None:
                    float(logs["loss"])  # the profiled steps have run on the device
                self._stop()
            except Exception as exc:  # noqa: BLE001
                self.error = f"the profiler did not write its trace: {type(exc).__name__}: {str(exc)[:200]}"

    return StepHooks

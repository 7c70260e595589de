"""TensorBoard scalars with or without TensorFlow: one writer for the smoke and GpuMonitor.

On TensorFlow, `tf.summary` writes them. Keras 3.15.1's `keras.callbacks.TensorBoard` writes
through `tf.summary` on every backend (it imports TensorFlow on first use), so the JAX and
PyTorch images carry `tensorflow-cpu` ([keras_tools] in images/matrix.toml, issue 30) and the
smoke uses the standard callback there too (`epoch_scalars_callbacks`). Where TensorFlow is
absent (a JAX/PyTorch venv of your own, e.g. the GPU-host check outside the images) the scalars
go through tensorboard's own TF-free writer (`tensorboard.summary.Writer` over a
`DirectoryOutput`, tensorboard >= 2.12), whose event files TensorBoard reads the same way;
GpuMonitor keeps that writer on JAX and PyTorch (`scalar_writer`), which needs no TensorFlow
import for a few scalars.
"""

from __future__ import annotations


def tensorflow_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


class TfSummaryWriter:
    """tf.summary scalars into their own event file under `path` (created on first use)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer = None

    def scalar(self, name: str, value: float, step: int) -> None:
        import tensorflow as tf

        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.path)
        with self._writer.as_default():
            tf.summary.scalar(name, value, step=step)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class TensorboardWriter:
    """The same scalars through `tensorboard.summary.Writer` (no TensorFlow needed)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer = None

    def scalar(self, name: str, value: float, step: int) -> None:
        if self._writer is None:
            from tensorboard.summary import Writer

            self._writer = Writer(self.path)  # a path: a DirectoryOutput under it
        self._writer.add_scalar(name, float(value), int(step))

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def scalar_writer(path: str, backend_name: str | None = None):
    """tf.summary on the TensorFlow backend, tensorboard's own writer elsewhere (or when
    TensorFlow is not installed)."""
    if backend_name is None:
        from . import backends

        backend_name = backends.name()
    if backend_name == "tensorflow" and tensorflow_available():
        return TfSummaryWriter(path)
    return TensorboardWriter(path)


def epoch_scalars_class(keras):
    """A Keras callback writing each epoch's logs (loss, accuracy, ...) as `epoch_<name>`
    scalars under `<log_dir>/train`, as keras.callbacks.TensorBoard names them, so the
    Scalars tab looks the same on every backend."""

    class EpochScalars(keras.callbacks.Callback):
        def __init__(self, log_dir: str) -> None:
            super().__init__()
            import os

            self.writer = TensorboardWriter(os.path.join(log_dir, "train"))

        def on_epoch_end(self, epoch, logs=None):
            for name, value in (logs or {}).items():
                try:
                    self.writer.scalar(f"epoch_{name}", float(value), epoch)
                except (TypeError, ValueError):
                    continue
            self.writer.flush()

        def on_train_end(self, logs=None):
            self.writer.close()

    return EpochScalars


def tensorboard_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def epoch_scalars_callbacks(keras, log_dir: str) -> list:
    """The epoch scalars under `<log_dir>/train`: Keras' own TensorBoard callback where TensorFlow
    is installed (every kerasenv image), else the TF-free EpochScalars with the same tags; none
    where neither TensorFlow nor tensorboard is (a bare JAX/PyTorch venv, as the GPU-host check
    meets: its pack carries Keras's dependencies, not tensorboard's), said once on stderr."""
    if tensorflow_available():
        return [keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch")]
    if not tensorboard_available():
        import sys

        print("[kerasenv] neither tensorflow nor tensorboard is installed: no TensorBoard epoch scalars "
              "(the figures are in report.json; pip install tensorboard for them)", file=sys.stderr, flush=True)
        return []
    return [epoch_scalars_class(keras)(log_dir)]

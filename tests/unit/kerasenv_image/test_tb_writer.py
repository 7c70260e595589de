"""TensorBoard scalars without TensorFlow (kerasenv_image.tb_writer)."""

from __future__ import annotations

from kerasenv_image import tb_writer


def test_the_writer_follows_the_backend(monkeypatch):
    monkeypatch.setattr(tb_writer, "tensorflow_available", lambda: True)
    assert isinstance(tb_writer.scalar_writer("/x", "tensorflow"), tb_writer.TfSummaryWriter)
    assert isinstance(tb_writer.scalar_writer("/x", "jax"), tb_writer.TensorboardWriter)
    monkeypatch.setattr(tb_writer, "tensorflow_available", lambda: False)
    assert isinstance(tb_writer.scalar_writer("/x", "tensorflow"), tb_writer.TensorboardWriter)

# That TensorBoard reads what the TF-free writer writes is checked where tensorboard is
# installed: in the images (smoke_tests/test_gpu_monitor.py, on every backend).


def test_epoch_scalars_use_keras_tensorboard_callback_where_tensorflow_is(monkeypatch):
    """The smoke's epoch scalars on JAX/PyTorch: Keras' own TensorBoard callback once TensorFlow is
    installed (tensorflow-cpu in those images), the TF-free EpochScalars without it."""
    import types

    class TensorBoard:
        def __init__(self, log_dir, update_freq):
            self.log_dir, self.update_freq = log_dir, update_freq

    class Callback:
        def __init__(self):
            pass

    keras = types.SimpleNamespace(callbacks=types.SimpleNamespace(TensorBoard=TensorBoard, Callback=Callback))
    monkeypatch.setattr(tb_writer, "tensorflow_available", lambda: True)
    (board,) = tb_writer.epoch_scalars_callbacks(keras, "/runs/x/tensorboard")
    assert isinstance(board, TensorBoard) and (board.log_dir, board.update_freq) == ("/runs/x/tensorboard", "epoch")
    monkeypatch.setattr(tb_writer, "tensorflow_available", lambda: False)
    monkeypatch.setattr(tb_writer, "tensorboard_available", lambda: True)
    (fallback,) = tb_writer.epoch_scalars_callbacks(keras, "/runs/x/tensorboard")
    assert isinstance(fallback, Callback) and not isinstance(fallback, TensorBoard)
    assert fallback.writer.path == "/runs/x/tensorboard/train"
    monkeypatch.setattr(tb_writer, "tensorboard_available", lambda: False)  # a bare venv: none, said once
    assert tb_writer.epoch_scalars_callbacks(keras, "/runs/x/tensorboard") == []

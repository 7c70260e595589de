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
# installed: in the images (acceptance/test_gpu_monitor.py, on every backend).

"""TensorBoard scalars without TensorFlow (kerasenv_image.tb_writer)."""

from __future__ import annotations

import pytest

from kerasenv_image import tb_writer


def test_the_writer_follows_the_backend(monkeypatch):
    monkeypatch.setattr(tb_writer, "tensorflow_available", lambda: True)
    assert isinstance(tb_writer.scalar_writer("/x", "tensorflow"), tb_writer.TfSummaryWriter)
    assert isinstance(tb_writer.scalar_writer("/x", "jax"), tb_writer.TensorboardWriter)
    monkeypatch.setattr(tb_writer, "tensorflow_available", lambda: False)
    assert isinstance(tb_writer.scalar_writer("/x", "tensorflow"), tb_writer.TensorboardWriter)


def test_tensorboards_own_writer_writes_an_event_file_tensorboard_reads(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    writer = tb_writer.TensorboardWriter(str(tmp_path / "gpu"))
    writer.scalar("gpu/0/utilization_percent", 93.5, step=0)
    writer.scalar("gpu/0/utilization_percent", 95.0, step=1)
    writer.close()
    events = EventAccumulator(str(tmp_path / "gpu"))
    events.Reload()
    tags = events.Tags()
    # tensorboard's writer stores scalars as tensors (the v2 summary format TensorBoard reads).
    values = [(e.step, e.tensor_proto.float_val[0] if e.tensor_proto.float_val else None)
              for e in events.Tensors("gpu/0/utilization_percent")] if "gpu/0/utilization_percent" in tags.get(
        "tensors", []) else [(e.step, e.value) for e in events.Scalars("gpu/0/utilization_percent")]
    assert [step for step, _ in values] == [0, 1]

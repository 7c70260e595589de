"""The bench's timing and models (kerasenv_image.bench.measure): the pure parts, without TensorFlow."""

from __future__ import annotations

import pytest

from kerasenv_image.bench import measure


def test_steady_rate_times_only_the_steps_after_the_warm_up():
    # step 0 (first step) ends at 10.0, warm-up steps 1-3, then 4 timed steps of 0.25 s
    ends = [10.0, 10.5, 10.6, 11.0, 11.25, 11.5, 11.75, 12.0]
    rate = measure.steady_rate(batch_size=64, step_end_times=ends, warmup_steps=3)
    assert rate["timed_steps"] == 4 and rate["timed_seconds"] == pytest.approx(1.0)
    assert rate["samples_per_second"] == pytest.approx(256.0)
    with pytest.raises(ValueError):
        measure.steady_rate(64, ends[:4], warmup_steps=3)  # no timed step at all


def test_model_descriptions_state_the_parameter_counts_of_the_keras_examples():
    # conv: 320 + 18,496 + 16,010; mlp: 401,920 + 262,656 + 5,130
    assert "34,826" in measure.MODEL_INFO["conv"] and "669,706" in measure.MODEL_INFO["mlp"]

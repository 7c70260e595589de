"""The smoke's verdict (kerasenv_image.smoke.verdict): did the model learn, on the requested device."""

from __future__ import annotations

import pytest

from kerasenv_image.smoke import verdict


def training(**over):
    base = {"first_loss": 1.4, "final_loss": 0.3, "final_accuracy": 0.95, "loss_per_epoch": [1.0, 0.5, 0.3],
            "epochs_run": 3}
    return {**base, **over}


def test_a_run_that_learned_on_the_requested_device_passes():
    v = verdict.verdict(training(), {"requested": "/GPU:0", "result_device": "/job:localhost/device:GPU:0", "ok": True})
    assert v["learned"] and v["placement_ok"]


def test_a_result_off_the_requested_device_fails_the_verdict_even_when_the_model_learned():
    v = verdict.verdict(training(), {"requested": "/GPU:0", "result_device": "/job:localhost/device:CPU:0", "ok": False})
    assert v["learned"] is False and v["placement_ok"] is False


@pytest.mark.parametrize("over, why", [
    ({"final_accuracy": 0.79}, "accuracy below 0.8"),
    ({"final_loss": 1.3}, "loss ratio 0.93"),
    ({"final_loss": float("nan"), "loss_per_epoch": [1.0, float("nan")]}, "not finite"),
    ({"epochs_run": 0}, "no epoch completed"),
])
def test_each_rule_of_the_verdict_can_fail_it(over, why):
    assert verdict.verdict(training(**over), {"ok": True})["learned"] is False, why

"""Did the model learn, on the device it was meant to? The one rule every run is judged by."""

from __future__ import annotations

import math

LOSS_RATIO_MAX = 0.9  # final loss must end below 0.9x the first
ACCURACY_MIN = 0.8  # final training accuracy (chance is 0.25)


def verdict(training: dict, placement: dict | None = None) -> dict:
    """`learned` needs a finite loss that fell enough, the accuracy, a completed epoch, and
    the placement check's result on the device it asked for (a GPU image whose matmul
    lands on the CPU has not proven the GPU)."""
    first, final, accuracy = training["first_loss"], training["final_loss"], training["final_accuracy"]
    finite = all(v is not None and math.isfinite(v) for v in [first, final, *training["loss_per_epoch"]])
    ratio = (final / first) if finite and first else None
    learned = bool(finite and ratio is not None and ratio < LOSS_RATIO_MAX
                   and accuracy is not None and accuracy >= ACCURACY_MIN)
    complete = training["epochs_run"] > 0
    placement_ok = bool(placement.get("ok")) if placement is not None else True
    return {"finite": finite, "loss_ratio": ratio, "loss_ratio_max": LOSS_RATIO_MAX,
            "accuracy": accuracy, "accuracy_min": ACCURACY_MIN, "placement_ok": placement_ok,
            "learned": learned and complete and placement_ok}

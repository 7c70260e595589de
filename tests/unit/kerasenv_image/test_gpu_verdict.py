"""The GPU verdict (images/common/kerasenv_image/gpu_verdict.py): from GpuMonitor's
per-epoch records of recorded real nvidia-smi loops (tests/fixtures/nvidia-smi-query/,
SOURCES.md there) to the line the user reads; the thresholds' edges with constructed
records (marked as such: no recording reaches them)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from kerasenv_image import gpu_monitor, gpu_sampler, gpu_verdict

from ..conftest import REPO

QUERY = REPO / "tests" / "fixtures" / "nvidia-smi-query"


def at(stamp: str) -> float:
    return time.mktime(datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S").timetuple())


class NoTf:
    def peak_mib(self, index):
        return None

    def reset(self, index):
        pass


def epochs_of(name: str, windows: list[tuple[str, str]]) -> list[dict]:
    """GpuMonitor's records of the recording `name` for epochs [(start, end), ...]."""
    text = (QUERY / name / "output.csv").read_text(encoding="utf-8")
    fields = gpu_sampler.parse_fields((QUERY / name / "query.txt").read_text().split()[1])
    samples = gpu_sampler.parse_output(text, fields).samples
    monitor = gpu_monitor.GpuMonitorLogic("/unused", tf_memory=NoTf())
    return [monitor.epoch_record(samples, n, at(a), at(b)) for n, (a, b) in enumerate(windows)]


def test_steady_recording_is_gpu_bound():
    epochs = epochs_of("a5000-train-steady", [("2025/05/25 00:07:59", "2025/05/25 00:08:11"),
                                              ("2025/05/25 00:08:11", "2025/05/25 00:08:21")])
    v = gpu_verdict.verdict(epochs, memory_total_mib=None)
    # epoch 1 (idle, then the ramp) is left out: the plateau's 97.3 % decides
    assert v["epochs_used"] == [2] and v["busy_percent"] == pytest.approx(876 / 9)
    assert (v["status"], v["memory_status"]) == ("gpu-bound", "ok")
    assert v["line"] == "GPU busy 97 %: the GPU is the bottleneck, as it should be"
    assert v["lines"] == [v["line"]]
    assert v["peak_memory_mib"] == 13067 and v["memory_source"] == "nvidia-smi"
    assert v["memory_total_mib"] == 24564 and v["memory_fraction"] == pytest.approx(13067 / 24564)


def test_low_util_recording_is_underused():
    epochs = epochs_of("a5000-train-low-util", [("2025/05/20 22:24:27", "2025/05/20 22:24:33"),
                                                ("2025/05/20 22:24:33", "2025/05/20 22:25:12")])
    v = gpu_verdict.verdict(epochs, memory_total_mib=None)
    assert v["status"] == "underused" and v["busy_percent"] < gpu_verdict.UNDERUSED_BUSY_PERCENT
    assert v["line"] == ("GPU busy 30 %: the GPU is underused (under 50 %) and something else paces the steps: "
                         "the input pipeline, host-side work or too small a batch; profile it to see which "
                         "(see Profile → Input pipeline)")


def test_bursty_recording_is_underused_and_says_it_swings():
    epochs = epochs_of("a5000-train-bursty", [("2025/05/25 00:13:19", "2025/05/25 00:13:20"),
                                              ("2025/05/25 00:13:20", "2025/05/25 00:13:40")])
    v = gpu_verdict.verdict(epochs, memory_total_mib=None)
    assert v["status"] == "underused" and v["busy_percent"] == pytest.approx(35.0)
    assert v["line"].startswith("GPU busy 35 %, swinging 1-72 % between samples: the GPU is underused")


def test_nothing_sampled_says_so():
    assert gpu_verdict.verdict([], memory_total_mib=None)["line"] == "no GPU sampled"
    # a window shorter than the sampling interval: a record, but no sample in it
    epochs = epochs_of("a5000-train-steady", [("2025/05/25 00:08:12", "2025/05/25 00:08:12")])
    v = gpu_verdict.verdict(epochs, memory_total_mib=None, interval_ms=200)
    assert (v["status"], v["busy_percent"]) == ("epochs-too-short", None)
    assert v["line"].startswith("no GPU utilisation figure: the epochs were too short (the longest lasted 0.00 s) "
                                "for nvidia-smi's samples (every 200 ms,")
    assert "--steps-per-epoch" in v["line"]


def test_utilisation_reported_as_na_says_so_and_keeps_memory():
    gpu = {"index": 0, "samples": 6, "utilization_percent": None, "memory_used_mib": 70000.0,
           "memory_total_mib": 81920.0, "tf_peak_memory_mib": None}
    v = gpu_verdict.verdict([{"epoch": 1, "seconds": 3.0, "gpus": [gpu]}], memory_total_mib=None)
    assert v["status"] == "not-sampled" and "utilization.gpu as N/A" in v["lines"][-1]
    assert v["memory_status"] == "ok" and v["peak_memory_mib"] == 70000.0


def constructed(busy, *, used=None, total=81920.0, tf_peak=None, epochs=2):
    """A constructed record (no recording has these numbers): for the thresholds' edges."""
    gpu = {"index": 0, "samples": 10, "utilization_percent": busy, "utilization_min_percent": busy,
           "utilization_max_percent": busy, "memory_used_mib": used, "memory_total_mib": total,
           "tf_peak_memory_mib": tf_peak}
    return [{"epoch": n + 1, "gpus": [dict(gpu)]} for n in range(epochs)]


def test_the_issue_examples_from_constructed_numbers():
    v = gpu_verdict.verdict(constructed(38.0), memory_total_mib=81920, input_wait_fraction=0.55)
    assert v["status"] == "input-bound"
    assert v["line"] == ("GPU busy 38 % while the input pipeline waited 55 % of step time: the data pipeline "
                         "is the bottleneck (see Profile → Input pipeline)")
    v = gpu_verdict.verdict(constructed(91.0, used=80000, tf_peak=75366), memory_total_mib=81920)
    assert (v["status"], v["memory_status"], v["memory_source"]) == ("gpu-bound", "near-oom", "tensorflow-peak")
    assert v["line"] == "peak GPU memory 92 % of 80 GiB: lower the batch size or use mixed precision"
    assert v["lines"][1] == "GPU busy 91 %: the GPU is the bottleneck, as it should be"


def test_memory_from_nvidia_smi_alone_says_it_includes_tensorflows_reserve():
    v = gpu_verdict.verdict(constructed(91.0, used=78000), memory_total_mib=None)
    assert v["memory_source"] == "nvidia-smi" and v["memory_status"] == "near-oom"
    assert v["line"].startswith("peak GPU memory 95 % of 80 GiB (nvidia-smi memory.used, which includes")


@pytest.mark.parametrize("busy, status", [(49.9, "underused"), (50.0, "partly-idle"), (79.9, "partly-idle"),
                                          (80.0, "gpu-bound")])
def test_busy_thresholds(busy, status):
    assert gpu_verdict.verdict(constructed(busy), memory_total_mib=None)["status"] == status


def test_memory_and_input_thresholds():
    total = 10000.0
    assert gpu_verdict.verdict(constructed(90, tf_peak=8999, total=total), memory_total_mib=total)["memory_status"] == "ok"
    assert gpu_verdict.verdict(constructed(90, tf_peak=9000, total=total), memory_total_mib=total)["memory_status"] == "near-oom"
    assert gpu_verdict.verdict(constructed(40), memory_total_mib=None, input_wait_fraction=0.3)["status"] == "input-bound"
    low_wait = gpu_verdict.verdict(constructed(40), memory_total_mib=None, input_wait_fraction=0.1)
    assert low_wait["status"] == "underused" and "waited only 10 %" in low_wait["line"]
    assert gpu_verdict.verdict(constructed(40), memory_total_mib=None)["thresholds"] == {
        "underused_busy_percent": 50.0, "gpu_bound_busy_percent": 80.0, "near_oom_memory_fraction": 0.9,
        "input_bound_wait_fraction": 0.3, "few_samples": 5}


def test_one_epoch_is_its_own_steady_state():
    v = gpu_verdict.verdict(constructed(60.0, epochs=1), memory_total_mib=None)
    assert v["epochs_used"] == [1] and v["status"] == "partly-idle"


def test_a_mean_of_few_samples_says_so():
    epochs = constructed(60.0)
    for e in epochs:
        e["gpus"][0]["samples"] = 1
    v = gpu_verdict.verdict(epochs, memory_total_mib=None)
    assert v["samples"] == 1
    assert v["line"].startswith("GPU busy 60 % (from only 1 sample: longer epochs give a firmer figure): the GPU idles")


def test_the_framework_peak_of_jax_or_torch_is_the_memory_figure():
    epochs = constructed(90, used=80000, total=81920.0)
    for epoch in epochs:
        for gpu in epoch["gpus"]:
            del gpu["tf_peak_memory_mib"]
            gpu["jax_peak_memory_mib"] = 40960.0
    v = gpu_verdict.verdict(epochs, memory_total_mib=81920)
    assert (v["peak_memory_mib"], v["memory_source"], v["memory_status"]) == (40960.0, "jax-peak", "ok")


def gb10(busy: float, *, peak: float | None = 30720.0, epochs: int = 2) -> list[dict]:
    """CONSTRUCTED records as GpuMonitor makes them on a GB10 (test_gpu_monitor's constructed
    loop): memory.used/total N/A, the note, JAX's own peak."""
    note = "unified memory: not reported by the driver (nvidia-smi's memory.total was N/A: ...)"
    gpu = {"index": 0, "samples": 10, "memory_samples": 12, "utilization_percent": busy,
           "utilization_min_percent": busy, "utilization_max_percent": busy, "memory_used_mib": None,
           "memory_total_mib": None, "jax_peak_memory_mib": peak, "memory_note": note}
    return [{"epoch": n + 1, "gpus": [dict(gpu)]} for n in range(epochs)]


def test_unified_memory_says_not_reported_and_gives_no_out_of_memory_advice():
    v = gpu_verdict.verdict(gb10(92.0), memory_total_mib=None)
    assert v["status"] == "gpu-bound" and v["line"].startswith("GPU busy 92 %")  # utilisation stays first
    assert v["memory_status"] == "not-reported" and v["memory_total_mib"] is None
    assert v["memory_note"].startswith("unified memory: not reported by the driver")
    assert v["lines"][-1] == ("GPU memory: unified memory: not reported by the driver (the GPU shares the system's "
                              "RAM); JAX's own peak 30 GiB; no out-of-memory margin to judge: the host's free memory "
                              "(`free -h`) is the GPU's")
    assert not any("lower the batch size" in line for line in v["lines"])
    without_peak = gpu_verdict.verdict(gb10(92.0, peak=None), memory_total_mib=None)
    assert without_peak["memory_status"] == "not-reported" and "own peak" not in without_peak["lines"][-1]


def test_a_total_given_by_the_caller_is_judged_as_before():
    v = gpu_verdict.verdict(gb10(92.0, peak=30000.0), memory_total_mib=32000)
    assert v["memory_status"] == "near-oom"

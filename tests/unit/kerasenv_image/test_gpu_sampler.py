"""GPU sampling (kerasenv_image.gpu_sampler; `kerasenv bench` on the host and GpuMonitor in
the images): parsing recorded real `nvidia-smi --query-gpu` loops
(tests/fixtures/nvidia-smi-query/, SOURCES.md there) and attributing samples to a
steady-state window. Expected values were read off the recordings by hand (and with awk),
not computed by the code under test."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from kerasenv_image import gpu_sampler

from ..conftest import REPO

QUERY = REPO / "tests" / "fixtures" / "nvidia-smi-query"
FAKE_LOOP = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi-loop")


def recorded(name: str) -> tuple[str, tuple[str, ...]]:
    text = (QUERY / name / "output.csv").read_text(encoding="utf-8")
    query = next(a for a in (QUERY / name / "query.txt").read_text().split() if a.startswith("--query-gpu="))
    return text, gpu_sampler.parse_fields(query)


def at(stamp: str) -> float:
    """Epoch seconds of a local time like the recordings', computed without the code under test."""
    return time.mktime(datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S").timetuple())


def test_every_recording_has_its_source_documented():
    sources = (QUERY / "SOURCES.md").read_text()
    folders = [p.name for p in QUERY.iterdir() if p.is_dir()]
    assert len(folders) >= 5
    for name in folders:
        assert f"`{name}/`" in sources, f"{name} is not in SOURCES.md"
        assert (QUERY / name / "output.csv").stat().st_size > 100
        assert (QUERY / name / "query.txt").read_text().startswith("nvidia-smi --query-gpu=")


def test_parses_a_recorded_noheader_nounits_loop_and_skips_the_scripts_header():
    text, fields = recorded("a5000-train-steady")
    assert fields[:4] == ("timestamp", "index", "name", "utilization.gpu")
    parsed = gpu_sampler.parse_output(text, fields)
    assert len(parsed.samples) == 23
    assert parsed.skipped_lines == [text.splitlines()[0]]  # the `echo` header of the recording script
    first, peak = parsed.samples[0], parsed.samples[14]  # 00:08:14.343
    assert (first.index, first.utilization_gpu, first.memory_used_mib, first.memory_total_mib) == (0, 1.0, 11323.0, 24564.0)
    assert peak.utilization_gpu == 100.0 and peak.memory_used_mib == 13067.0
    assert first.time == pytest.approx(at("2025/05/25 00:08:00") + 0.098, abs=1e-6)
    assert all(b.time > a.time for a, b in zip(parsed.samples, parsed.samples[1:]))


def test_steady_state_mean_uses_only_the_window_after_the_settle_time():
    text, fields = recorded("a5000-train-steady")
    samples = gpu_sampler.parse_output(text, fields).samples
    start, end = at("2025/05/25 00:08:11"), at("2025/05/25 00:08:21")
    s = gpu_sampler.steady_state(samples, start, end)
    # settle = min(1 s, a quarter of 10 s): samples 00:08:12.298 .. 00:08:20.443
    assert s["settle_s"] == 1.0 and s["samples"] == 9
    assert s["utilization_gpu_mean"] == pytest.approx((96 + 99 + 100 * 5 + 88 + 93) / 9)  # 97.33
    assert (s["utilization_gpu_min"], s["utilization_gpu_max"]) == (88, 100)
    assert s["memory_used_mib_max"] == 13067 and s["memory_total_mib"] == 24564
    # the same recording averaged over the whole run (warm-up and idle included) is far lower
    whole = gpu_sampler.steady_state(samples, at("2025/05/25 00:07:59"), at("2025/05/25 00:08:23"), settle_s=0)
    assert whole["samples"] == 23
    assert whole["utilization_gpu_mean"] == pytest.approx(1191 / 23)  # 51.8


def test_settle_time_drops_the_sample_that_still_averages_pre_window_time():
    text, fields = recorded("a5000-train-steady")
    samples = gpu_sampler.parse_output(text, fields).samples
    start, end = at("2025/05/25 00:08:10"), at("2025/05/25 00:08:14")
    with_settle = gpu_sampler.steady_state(samples, start, end)  # settle 1 s: 11.282 out
    without = gpu_sampler.steady_state(samples, start, end, settle_s=0)
    assert with_settle["samples"] == 3 and with_settle["utilization_gpu_mean"] == pytest.approx((95 + 96 + 99) / 3)
    assert without["samples"] == 4 and without["utilization_gpu_mean"] == pytest.approx((42 + 95 + 96 + 99) / 4)


def test_low_utilisation_plateau_and_bursty_run():
    text, fields = recorded("a5000-train-low-util")
    samples = gpu_sampler.parse_output(text, fields).samples
    assert len(samples) == 77  # 78 lines, the first is the header
    s = gpu_sampler.steady_state(samples, at("2025/05/20 22:24:33"), at("2025/05/20 22:25:12") + 0.5)
    assert s["samples"] == 38 and s["utilization_gpu_mean"] == pytest.approx(1155 / 38)  # 30.4
    assert (s["utilization_gpu_min"], s["utilization_gpu_max"], s["memory_used_mib_max"]) == (28, 33, 2324)

    text, fields = recorded("a5000-train-bursty")
    samples = gpu_sampler.parse_output(text, fields).samples
    s = gpu_sampler.steady_state(samples, at("2025/05/25 00:13:20"), at("2025/05/25 00:13:40"))
    assert s["samples"] == 19 and s["utilization_gpu_mean"] == pytest.approx(35.0)
    assert (s["utilization_gpu_min"], s["utilization_gpu_max"]) == (1, 72)


def test_another_gpu_index_gets_no_samples_and_says_why():
    text, fields = recorded("a5000-train-steady")
    samples = gpu_sampler.parse_output(text, fields).samples
    s = gpu_sampler.steady_state(samples, at("2025/05/25 00:08:11"), at("2025/05/25 00:08:21"), index=1)
    assert s["samples"] == 0 and s["utilization_gpu_mean"] is None and "no sample" in s["note"]
    window_too_short = gpu_sampler.steady_state(samples, at("2025/05/25 00:08:12") + 0.4,
                                                at("2025/05/25 00:08:12") + 0.9)
    assert window_too_short["samples"] == 0 and "no sample" in window_too_short["note"]


def test_csv_with_units_and_header_uses_arrival_times_without_a_timestamp_field():
    text, fields = recorded("driver-520-loop-units")
    assert "timestamp" not in fields
    with pytest.raises(ValueError, match="timestamp"):
        gpu_sampler.parse_output(text, fields)
    lines = text.splitlines()
    parsed = gpu_sampler.parse_output(text, fields, arrival_times=[float(i) for i in range(len(lines))])
    util = [s.utilization_gpu for s in parsed.samples]
    assert util == [26, 25, 24, 26, 27, 28, 29, 30, 28, 32, 28, 23, 25]
    assert parsed.skipped_lines == [lines[0]]  # nvidia-smi's own header, printed once
    assert [s.time for s in parsed.samples][:2] == [1.0, 2.0]
    assert gpu_sampler.steady_state(parsed.samples, 0, 100, settle_s=0)["utilization_gpu_mean"] == pytest.approx(27.0)
    assert parsed.samples[0].memory_used_mib is None  # not in that query

    text, fields = recorded("gtx1650-loop-units")
    parsed = gpu_sampler.parse_output(text, fields, arrival_times=[float(i) for i in range(10)])
    assert [s.utilization_gpu for s in parsed.samples] == [24, 18, 42, 17, 21]


def test_one_shot_recorded_query_with_na_values():
    """tests/fixtures/nvidia-smi/noheader-nounits: `temperature.memory` is N/A on that GPU."""
    text = (REPO / "tests" / "fixtures" / "nvidia-smi" / "noheader-nounits" / "query-gpu.csv").read_text()
    fields = gpu_sampler.parse_fields(
        "power.limit,power.min_limit,power.max_limit,memory.total,vbios_version,driver_version,name,gpu_uuid,"
        "power.draw,temperature.gpu,temperature.memory,clocks.current.graphics,clocks.sm,clocks.mem,"
        "utilization.gpu,utilization.memory,fan.speed,pcie.link.width.current,pstate")
    parsed = gpu_sampler.parse_output(text, fields, arrival_times=[0.0, 0.0])
    assert len(parsed.samples) == 1
    assert parsed.samples[0].utilization_gpu == 86 and parsed.samples[0].memory_total_mib == 7979


@pytest.mark.parametrize("text, value", [("97 %", 97.0), ("13066 MiB", 13066.0), ("13066", 13066.0),
                                         ("[N/A]", None), ("N/A", None), ("[Not Supported]", None)])
def test_parse_value(text, value):
    assert gpu_sampler.parse_value(text) == value


def test_parse_value_rejects_garbage_and_errors_are_skipped_lines():
    with pytest.raises(ValueError):
        gpu_sampler.parse_value("Failed")
    nvml = (REPO / "tests" / "fixtures" / "nvidia-smi" / "nvml-mismatch" / "error.txt").read_text()
    parsed = gpu_sampler.parse_output(nvml, gpu_sampler.QUERY_FIELDS)
    assert parsed.samples == [] and parsed.skipped_lines  # the recorded NVML error is not a sample
    with pytest.raises(ValueError, match="utilization.gpu"):
        gpu_sampler.parse_output("x", ("timestamp", "index"))


def test_sampler_command_is_the_documented_query():
    s = gpu_sampler.NvidiaSmiSampler("/usr/bin/nvidia-smi", indexes=[1], interval_ms=200)
    assert s.command() == ["/usr/bin/nvidia-smi", "--query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total",
                           "--format=csv,noheader,nounits", "-lms", "200", "-i", "1"]


def test_sampler_runs_and_stops_a_background_nvidia_smi(monkeypatch):
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", "a5000-train-steady")
    _, fields = recorded("a5000-train-steady")
    sampler = gpu_sampler.NvidiaSmiSampler(FAKE_LOOP, indexes=[0], interval_ms=50, fields=fields).start()
    deadline = time.time() + 10
    while len(sampler._lines) < 24 and time.time() < deadline:
        time.sleep(0.05)
    parsed = sampler.stop()  # the replay keeps running, like the real loop, until stopped
    assert len(parsed.samples) == 23 and len(parsed.skipped_lines) == 1
    assert max(s.utilization_gpu for s in parsed.samples) == 100
    assert sampler._proc is None


def test_sampler_reports_what_nvidia_smi_said_when_it_fails(monkeypatch):
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", "a5000-train-steady")
    sampler = gpu_sampler.NvidiaSmiSampler(FAKE_LOOP, interval_ms=50).start()  # not the recorded query
    # Let it fail on its own (a fixed sleep lost the race on a loaded machine: stop() killed the
    # fake before it had said anything).
    deadline = time.monotonic() + 30
    while sampler._proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    parsed = sampler.stop()
    assert parsed.samples == [] and "recorded" in sampler.stderr


def test_no_nvidia_smi_on_the_host(monkeypatch):
    monkeypatch.delenv("KERASENV_NVIDIA_SMI", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    sampler = gpu_sampler.NvidiaSmiSampler()
    assert not sampler.available
    with pytest.raises(FileNotFoundError):
        sampler.start()


MIG_TABLE = REPO / "tests" / "fixtures" / "nvidia-smi" / "mig-a100x2-535" / "nvidia-smi.txt"


def mig_loop() -> str:
    """A `--query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total
    --format=csv,noheader,nounits -lms 200` loop on the MIG host of a recorded table
    (tests/fixtures/nvidia-smi/mig-a100x2-535: GPU 0 MIG-enabled, `N/A` under GPU-Util, 50 MiB
    used; GPU 1 MIG off, 0 %, 4 MiB). Not a capture: the rows are that table's values in the
    csv form nvidia-smi prints, one per physical GPU with `[N/A]` for the MIG GPU's utilisation
    (NVIDIA's MIG user guide; the bracketed csv spelling as in Syllo/nvtop#470's recorded
    `mig.mode.current` query)."""
    table = MIG_TABLE.read_text()
    assert "|     50MiB / 40960MiB |     N/A      Default |" in table  # the values below are this table's
    assert "|      4MiB / 40960MiB |      0%      Default |" in table
    return "".join(f"2024/10/11 12:04:{56 + i // 2:02d}.{(i % 2) * 500:03d}, {i % 2}, "
                   f"{'[N/A]' if i % 2 == 0 else '0'}, {50 if i % 2 == 0 else 4}, 40960\n" for i in range(8))


def test_a_mig_gpus_na_utilisation_is_missing_not_zero_and_a_real_zero_stays_zero():
    parsed = gpu_sampler.parse_output(mig_loop(), gpu_sampler.QUERY_FIELDS)
    assert len(parsed.samples) == 8 and parsed.skipped_lines == []  # memory is kept on the N/A rows
    mig = [s for s in parsed.samples if s.index == 0]
    assert all(s.utilization_gpu is None and s.memory_used_mib == 50 for s in mig)
    start, end = at("2024/10/11 12:04:55"), at("2024/10/11 12:05:00")
    whole_mig = gpu_sampler.steady_state(parsed.samples, start, end, index=0, settle_s=0)
    assert whole_mig["utilization_gpu_mean"] is None and whole_mig["utilization_gpu_max"] is None
    assert whole_mig["memory_used_mib_max"] == 50 and "N/A in every sample" in whole_mig["note"]
    other = gpu_sampler.steady_state(parsed.samples, start, end, index=1, settle_s=0)
    assert other["utilization_gpu_mean"] == 0.0 and "note" not in other


@pytest.mark.parametrize("text", ["[Unknown Error]", "[GPU requires reset]", "[Not Found]",
                                  "[Insufficient Permissions]"])
def test_every_bracketed_placeholder_is_missing(text):
    assert gpu_sampler.parse_value(text) is None

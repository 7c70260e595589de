"""The in-image GpuMonitor callback (images/common/kerasenv_image/gpu_monitor.py), without
TensorFlow and without a GPU: recorded real `nvidia-smi --query-gpu` loops
(tests/fixtures/nvidia-smi-query/, SOURCES.md there) replayed by fake-nvidia-smi-loop as
the callback's nvidia-smi, Keras' epoch hooks called with controlled epoch boundaries on
the recording's clock, and a recording writer in place of tf.summary."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from kerasenv_image import gpu_monitor, gpu_sampler

from ..conftest import REPO

QUERY = REPO / "tests" / "fixtures" / "nvidia-smi-query"
FAKE_LOOP = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi-loop")
IN_IMAGE = REPO / "images" / "common" / "kerasenv_image"


def at(stamp: str) -> float:
    """Epoch seconds of a local time like the recordings', computed without the code under test."""
    return time.mktime(datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S").timetuple())


def recorded(name: str) -> tuple[list, tuple[str, ...], int]:
    text = (QUERY / name / "output.csv").read_text(encoding="utf-8")
    query = next(a for a in (QUERY / name / "query.txt").read_text().split() if a.startswith("--query-gpu="))
    fields = gpu_sampler.parse_fields(query)
    return gpu_sampler.parse_output(text, fields).samples, fields, len(text.splitlines())


class Writer:
    """Stands in for tf.summary: what was written, as {(name, step): value}."""

    def __init__(self) -> None:
        self.scalars: dict = {}
        self.flushes = self.closed = 0

    def scalar(self, name, value, step):
        assert (name, step) not in self.scalars
        self.scalars[(name, step)] = value

    def flush(self):
        self.flushes += 1

    def close(self):
        self.closed += 1


class TfMemory:
    """Stands in for tf.config.experimental.get_memory_info / reset_memory_stats."""

    def __init__(self, peaks: list[float | None]) -> None:
        self.peaks, self.resets = list(peaks), []

    def peak_mib(self, index):
        return self.peaks.pop(0)

    def reset(self, index):
        self.resets.append(index)


def replay(monkeypatch, tmp_path, name, windows, *, tf_peaks=None, settle_s=None, gpus=None):
    """GpuMonitor over the recording `name`, with epochs [(start, end), ...] on its clock."""
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", name)
    samples, fields, lines = recorded(name)
    now = [0.0]
    writer, memory = Writer(), TfMemory(tf_peaks or [None] * len(windows) * 2)
    monitor = gpu_monitor.monitor_class(None)(
        str(tmp_path), settle_s=settle_s, gpus=gpus, writer=writer, clock=lambda: now[0], fields=fields,
        tf_memory=memory, sampler_factory=lambda **kw: gpu_sampler.NvidiaSmiSampler(FAKE_LOOP, **kw))
    monitor.on_train_begin()
    assert monitor.sampled, monitor.reason
    proc = monitor._sampler._proc
    deadline = time.time() + 10
    while len(monitor._sampler._lines) < lines and time.time() < deadline:
        time.sleep(0.02)  # the replay prints the whole recording, then keeps running like the real loop
    for epoch, (start, end) in enumerate(windows):
        now[0] = start
        monitor.on_epoch_begin(epoch)
        now[0] = end
        monitor.on_epoch_end(epoch, {"loss": 1.0})
    monitor.on_train_end()
    assert proc.poll() is not None, "nvidia-smi outlived training"
    return monitor, writer, memory, samples


def test_steady_recording_gives_per_epoch_scalars_equal_to_the_steady_state_window(monkeypatch, tmp_path):
    windows = [(at("2025/05/25 00:07:59"), at("2025/05/25 00:08:11")),
               (at("2025/05/25 00:08:11"), at("2025/05/25 00:08:21"))]
    monitor, writer, memory, samples = replay(monkeypatch, tmp_path, "a5000-train-steady", windows,
                                              tf_peaks=[812.5, 1024.0])
    for step, (start, end) in enumerate(windows):
        util = gpu_sampler.steady_state(samples, start, end, index=0)
        whole = gpu_sampler.steady_state(samples, start, end, index=0, settle_s=0)
        assert writer.scalars[("gpu/0/utilization_percent", step)] == pytest.approx(util["utilization_gpu_mean"])
        assert writer.scalars[("gpu/0/memory_used_mib", step)] == whole["memory_used_mib_max"]
        assert writer.scalars[("gpu/0/memory_used_percent", step)] == pytest.approx(
            100 * whole["memory_used_mib_max"] / whole["memory_total_mib"])
    # The plateau epoch, by hand from the recording (as test_bench_sampler does): samples
    # 00:08:12.298 .. 00:08:20.443 after the 1 s settle; memory.used peaks at 13067 of 24564 MiB.
    assert writer.scalars[("gpu/0/utilization_percent", 1)] == pytest.approx((96 + 99 + 100 * 5 + 88 + 93) / 9)
    assert writer.scalars[("gpu/0/memory_used_mib", 1)] == 13067
    assert writer.scalars[("gpu/0/memory_used_percent", 1)] == pytest.approx(100 * 13067 / 24564)
    assert writer.scalars[("gpu/0/tf_peak_memory_mib", 0)] == 812.5
    assert writer.scalars[("gpu/0/tf_peak_memory_mib", 1)] == 1024.0
    assert len(writer.scalars) == 8 and writer.flushes == 2 and writer.closed == 1
    assert memory.resets == [0, 0]  # TF's peak is reset at each epoch begin
    # The same numbers are kept for a report.
    e = monitor.epochs[1]
    assert e["epoch"] == 2 and e["seconds"] == 10
    (gpu,) = e["gpus"]
    assert (gpu["index"], gpu["samples"], gpu["utilization_min_percent"], gpu["utilization_max_percent"]) == (0, 9, 88, 100)
    assert gpu["memory_total_mib"] == 24564 and gpu["tf_peak_memory_mib"] == 1024.0
    report = monitor.report()
    assert report["sampled"] is True and report["epochs"] == monitor.epochs
    assert report["log_dir"] == str(tmp_path / "gpu")


def test_settle_time_and_gpu_selection_are_passed_through(monkeypatch, tmp_path):
    windows = [(at("2025/05/25 00:08:10"), at("2025/05/25 00:08:14"))]
    monitor, writer, _, _ = replay(monkeypatch, tmp_path, "a5000-train-steady", windows, settle_s=0)
    # without settling, 00:08:11.282 (42 %, still averaging the ramp) counts
    assert writer.scalars[("gpu/0/utilization_percent", 0)] == pytest.approx((42 + 95 + 96 + 99) / 4)

    monitor, writer, _, _ = replay(monkeypatch, tmp_path, "a5000-train-steady", windows, gpus=[1])
    assert monitor.epochs[0]["gpus"][0]["index"] == 1 and "no sample" in monitor.epochs[0]["gpus"][0]["note"]
    assert writer.scalars == {}  # GPU 1 is not in the recording: nothing is made up


def test_low_util_and_bursty_recordings(monkeypatch, tmp_path):
    windows = [(at("2025/05/20 22:24:27"), at("2025/05/20 22:24:33")),
               (at("2025/05/20 22:24:33"), at("2025/05/20 22:25:12") + 0.5)]
    _, writer, _, _ = replay(monkeypatch, tmp_path, "a5000-train-low-util", windows)
    assert writer.scalars[("gpu/0/utilization_percent", 1)] == pytest.approx(1155 / 38)  # 30.4, by hand
    assert writer.scalars[("gpu/0/memory_used_mib", 1)] == 2324

    windows = [(at("2025/05/25 00:13:19"), at("2025/05/25 00:13:20")),
               (at("2025/05/25 00:13:20"), at("2025/05/25 00:13:40"))]
    monitor, writer, _, _ = replay(monkeypatch, tmp_path, "a5000-train-bursty", windows)
    assert writer.scalars[("gpu/0/utilization_percent", 1)] == pytest.approx(35.0)
    assert writer.scalars[("gpu/0/memory_used_mib", 1)] == 13002
    gpu = monitor.epochs[1]["gpus"][0]
    assert (gpu["utilization_min_percent"], gpu["utilization_max_percent"]) == (1, 72)


def test_no_nvidia_smi_logs_one_line_and_does_nothing_else(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("KERASENV_NVIDIA_SMI", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monitor = gpu_monitor.monitor_class(None)(str(tmp_path))
    monitor.on_train_begin()
    for epoch in range(2):
        monitor.on_epoch_begin(epoch)
        monitor.on_epoch_end(epoch, {})
    monitor.on_train_end()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and gpu_monitor.NO_GPU_LINE in err[0]
    assert monitor.epochs == [] and monitor.report() == {"sampled": False, "reason": "no nvidia-smi on PATH"}
    assert list(tmp_path.iterdir()) == []  # no event file


def test_an_nvidia_smi_that_exits_without_a_sample_is_no_gpu(monkeypatch, tmp_path, capsys):
    """The replay refuses a query it did not record and exits, as nvidia-smi does without a GPU."""
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", "a5000-train-steady")
    monkeypatch.setenv("KERASENV_NVIDIA_SMI", FAKE_LOOP)
    monitor = gpu_monitor.monitor_class(None)(str(tmp_path), writer=Writer())  # the default query
    monitor.on_train_begin()
    monitor.on_epoch_begin(0)
    monitor.on_epoch_end(0, {})
    assert not monitor.sampled and monitor._sampler is None
    assert monitor.reason.startswith("nvidia-smi exited without a GPU sample: fixture a5000-train-steady recorded")
    assert capsys.readouterr().err.count(gpu_monitor.NO_GPU_LINE) == 1


def test_nvidia_smi_never_outlives_a_fit_that_raised(monkeypatch, tmp_path):
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", "a5000-train-steady")
    _, fields, _ = recorded("a5000-train-steady")
    make = gpu_monitor.monitor_class(None)
    kw = {"writer": Writer(), "fields": fields,
          "sampler_factory": lambda **k: gpu_sampler.NvidiaSmiSampler(FAKE_LOOP, **k)}
    with pytest.raises(RuntimeError), make(str(tmp_path), **kw) as monitor:
        monitor.on_train_begin()
        proc = monitor._sampler._proc
        raise RuntimeError("ResourceExhausted inside fit(): Keras calls no on_train_end")
    assert proc.poll() is not None
    # and at interpreter exit (atexit) or before the smoke's os._exit(): stop_all()
    monitor = make(str(tmp_path), **kw)
    monitor.on_train_begin()
    proc = monitor._sampler._proc
    assert monitor._sampler in gpu_sampler._RUNNING
    gpu_sampler.stop_all()
    assert proc.poll() is not None and not gpu_sampler._RUNNING


def test_restamped_replay_feeds_a_real_time_run(monkeypatch, tmp_path):
    """What the in-container test relies on: the recorded rows, clocked now, at the asked
    interval and for the default query, so epochs of a real fit() contain samples."""
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", "a5000-train-steady")
    monkeypatch.setenv("KERASENV_FIXTURE_RESTAMP", "1")
    monkeypatch.setenv("KERASENV_NVIDIA_SMI", FAKE_LOOP)
    writer = Writer()
    monitor = gpu_monitor.monitor_class(None)(str(tmp_path), interval_ms=50, writer=writer,
                                              tf_memory=TfMemory([None, None]))
    monitor.on_train_begin()
    for epoch in range(2):
        monitor.on_epoch_begin(epoch)
        time.sleep(0.8)
        monitor.on_epoch_end(epoch, {})
    monitor.on_train_end()
    recorded_util = {s.utilization_gpu for s in recorded("a5000-train-steady")[0]}
    for epoch in range(2):
        assert 1 <= writer.scalars[("gpu/0/utilization_percent", epoch)] <= 100
        assert 11323 <= writer.scalars[("gpu/0/memory_used_mib", epoch)] <= 13067
        assert monitor.epochs[epoch]["gpus"][0]["utilization_max_percent"] in recorded_util


def test_cuda_visible_devices_maps_nvidia_smi_indexes_to_cuda_ordinals():
    assert gpu_monitor.cuda_ordinal(3, {}) == 3
    assert gpu_monitor.cuda_ordinal(3, {"CUDA_VISIBLE_DEVICES": "3,1"}) == 0
    assert gpu_monitor.cuda_ordinal(1, {"CUDA_VISIBLE_DEVICES": "3,1"}) == 1
    assert gpu_monitor.cuda_ordinal(0, {"CUDA_VISIBLE_DEVICES": "3,1"}) is None
    assert gpu_monitor.cuda_ordinal(0, {"CUDA_VISIBLE_DEVICES": "GPU-5a8c"}) is None
    assert gpu_monitor.TfMemory().peak_mib(0) is None  # no TensorFlow here: no figure, no crash


def test_the_callback_subclasses_the_given_keras_callback():
    class Callback:
        def __init__(self):
            self.inited = True

    keras = SimpleNamespace(callbacks=SimpleNamespace(Callback=Callback))
    cls = gpu_monitor.monitor_class(keras)
    monitor = cls("/tmp/x")
    assert isinstance(monitor, Callback) and monitor.inited and cls.__name__ == "GpuMonitor"
    assert gpu_monitor.monitor_class(keras) is cls


def test_importing_the_package_and_the_smoke_is_cheap_and_host_free():
    code = ("import sys; import kerasenv_image, kerasenv_image.smoke.main, kerasenv_image.gpu_monitor, "
            "kerasenv_image.gpu_verdict, kerasenv_image.profiling, kerasenv_image.bench.main, "
            "kerasenv_image.probes.gpu_libraries, kerasenv_image.probes.inventory, kerasenv_image.probes.cuda_audit; "
            "from kerasenv_image.gpu_monitor import monitor_class; "
            "bad = [m for m in sys.modules if m == 'tensorflow' or m == 'kerasenv' or m.startswith('kerasenv.')]; "
            "assert not bad, bad; from kerasenv_image import GpuMonitor; print(GpuMonitor.__name__)")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "GpuMonitor"
    for path in IN_IMAGE.rglob("*.py"):  # every module, the sub-packages' too
        text = path.read_text()
        assert "from kerasenv " not in text and "import kerasenv\n" not in text and "from kerasenv." not in text


def test_the_host_sampler_is_the_in_image_file():
    from kerasenv.bench import throughput

    assert throughput.gpu_sampler is gpu_sampler  # `kerasenv bench` imports the in-image module
    assert Path(gpu_sampler.__file__) == IN_IMAGE / "gpu_sampler.py"  # the checkout's, one copy
    assert gpu_sampler.steady_state.__code__.co_filename == str(IN_IMAGE / "gpu_sampler.py")


def test_the_smoke_monitors_only_the_gpus_it_trains_on():
    def gpu(n):
        return SimpleNamespace(name=f"/physical_device:GPU:{n}")

    assert gpu_monitor.smi_indexes([gpu(0), gpu(1)], {}) == [0, 1]
    assert gpu_monitor.smi_indexes([gpu(1)], {}) == [1]  # --visible-gpus 1
    assert gpu_monitor.smi_indexes([gpu(0)], {"CUDA_VISIBLE_DEVICES": "2,3"}) == [2]
    assert gpu_monitor.smi_indexes([gpu(0)], {"CUDA_VISIBLE_DEVICES": "GPU-5a8c"}) is None  # all of them
    assert gpu_monitor.smi_indexes([], {}) is None


def smoke_report(gpu_monitor_section):
    return {"status": "ok", "exit_code": 0, "versions": {"tensorflow": "2.21.0", "keras": "3.12.0", "python": "3.11"},
            "image": {"variant": "tf2.21-cuda12.9"}, "placement": {"result_device": "/GPU:0"}, "gpus": [{}],
            "training": {"first_loss": 1.4, "final_loss": 0.3, "final_accuracy": 0.95, "samples_per_second": 900.0,
                         "time_to_first_step_s": 2.0},
            "output_dir": "/workspace/runs/x", "gpu_monitor": gpu_monitor_section}


def test_the_smoke_report_and_summary_carry_the_gpu_verdict(monkeypatch, tmp_path, capsys):
    from kerasenv_image.smoke import report as smoke_report_mod
    from kerasenv_image.smoke import training

    windows = [(at("2025/05/20 22:24:27"), at("2025/05/20 22:24:33")),
               (at("2025/05/20 22:24:33"), at("2025/05/20 22:25:12") + 0.5)]
    monitor, _, _, _ = replay(monkeypatch, tmp_path, "a5000-train-low-util", windows)
    section = training.gpu_monitor_report(monitor)
    assert section["sampled"] is True and [e["epoch"] for e in section["epochs"]] == [1, 2]
    assert section["verdict"]["status"] == "underused"
    smoke_report_mod.write_report(section, str(tmp_path))  # JSON-clean
    capsys.readouterr()
    smoke_report_mod.summary(smoke_report(section))
    err = capsys.readouterr().err
    assert "[smoke]   GPU busy 30 %: the GPU is underused (under 50 %)" in err

    cpu = training.gpu_monitor_report(None)
    assert cpu == {"sampled": False, "reason": "training on the CPU: no GPU to sample"}
    smoke_report_mod.summary(smoke_report(cpu))
    assert "GPU busy" not in capsys.readouterr().err and "sampled" not in err


def test_the_peak_memory_reader_and_its_scalar_follow_the_backend(monkeypatch):
    assert gpu_monitor.framework_memory("tensorflow").scalar_name == "tf_peak_memory_mib"
    assert gpu_monitor.framework_memory("jax").scalar_name == "jax_peak_memory_mib"
    assert gpu_monitor.framework_memory("torch").scalar_name == "torch_peak_memory_mib"
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    assert isinstance(gpu_monitor.framework_memory(), gpu_monitor.TorchMemory)
    assert gpu_monitor.TorchMemory().peak_mib(0) is None  # no torch here: no figure, no crash


def test_jax_and_torch_gpu_ids_map_to_nvidia_smi_indexes():
    assert gpu_monitor.smi_indexes_of_ordinals([0, 1], {"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert gpu_monitor.smi_indexes_of_ordinals([0], {}) == [0]
    assert gpu_monitor.smi_indexes_of_ordinals([], {}) is None


MIG_LIST = REPO / "tests" / "fixtures" / "nvidia-smi" / "mig-a100-80gb-list" / "list.txt"


def mig_uuids() -> list[str]:
    """The MIG devices' UUIDs of a recorded `nvidia-smi -L` (SOURCES.md there)."""
    return [line.split("(UUID: ")[1].rstrip(")") for line in MIG_LIST.read_text().splitlines()
            if line.strip().startswith("MIG ")]


def test_indexes_are_not_mapped_through_uuids_or_mig_slices():
    gpu_uuid = MIG_LIST.read_text().splitlines()[0].split("(UUID: ")[1].rstrip(")")
    mig = mig_uuids()
    assert len(mig) == 4 and gpu_uuid.startswith("GPU-")
    for env in ({"CUDA_VISIBLE_DEVICES": mig[0]}, {"CUDA_VISIBLE_DEVICES": f"{mig[1]},{mig[2]}"},
                {"CUDA_VISIBLE_DEVICES": gpu_uuid}, {"CUDA_VISIBLE_DEVICES": gpu_uuid[:12]},  # CUDA takes a prefix
                {"CUDA_VISIBLE_DEVICES": f"MIG-{gpu_uuid}/3/0"},  # the pre-R470 MIG form
                {"NVIDIA_VISIBLE_DEVICES": mig[3]}, {"NVIDIA_VISIBLE_DEVICES": "0:1"},
                {"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": mig[0]}):
        assert gpu_monitor.unmappable(env), env
        assert gpu_monitor.cuda_ordinal(0, env) is None and gpu_monitor.smi_index(0, env) is None, env
        assert gpu_monitor.smi_indexes_of_ordinals([0], env) is None, env  # every GPU
        assert gpu_monitor.smi_indexes([SimpleNamespace(name="/physical_device:GPU:0")], env) is None, env
    assert "MIG slice" in gpu_monitor.unmappable({"CUDA_VISIBLE_DEVICES": mig[0]})
    assert "container a MIG slice" in gpu_monitor.unmappable({"NVIDIA_VISIBLE_DEVICES": mig[0]})
    # whole GPUs, by index or UUID in NVIDIA_VISIBLE_DEVICES: the container renumbers both from 0
    for env in ({}, {"NVIDIA_VISIBLE_DEVICES": "all"}, {"NVIDIA_VISIBLE_DEVICES": gpu_uuid},
                {"NVIDIA_VISIBLE_DEVICES": "2,3"}):
        assert gpu_monitor.unmappable(env) is None and gpu_monitor.smi_index(1, env) == 1, env


def test_cuda_stops_at_an_invalid_entry_and_so_does_the_mapping():
    env = {"CUDA_VISIBLE_DEVICES": "1,-1,0"}  # CUDA: only device 1 is visible
    assert gpu_monitor.smi_index(0, env) == 1 and gpu_monitor.smi_index(1, env) is None
    assert gpu_monitor.cuda_ordinal(0, env) is None and gpu_monitor.cuda_ordinal(1, env) == 0
    assert gpu_monitor.smi_index(0, {"CUDA_VISIBLE_DEVICES": ""}) is None  # no GPU at all
    assert gpu_monitor.smi_index(-1, {"CUDA_VISIBLE_DEVICES": "0"}) is None


class ListSampler:
    """Stands in for NvidiaSmiSampler with the rows of a loop already printed."""

    def __init__(self, text, **kwargs):
        self.text, self.kwargs, self.available, self.running, self.stderr = text, kwargs, True, True, ""
        self.fields = kwargs.get("fields", gpu_sampler.QUERY_FIELDS)

    def start(self):
        return self

    def wait_first_line(self, timeout):
        return True

    def snapshot(self):
        return gpu_sampler.parse_output(self.text, self.fields)

    def stop(self):
        self.running = False
        return self.snapshot()


def test_na_utilisation_on_a_mig_gpu_is_recorded_as_missing_on_every_path(monkeypatch, tmp_path, capsys):
    """Sampler -> epoch record -> TensorBoard scalars -> report.json -> the smoke's verdict and
    summary: the MIG GPU's `[N/A]` never becomes a 0 anywhere; GPU 1's real 0 % stays 0."""
    from kerasenv_image.smoke import report as smoke_report_mod
    from kerasenv_image.smoke import training

    from .test_gpu_sampler import mig_loop

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mig_uuids()[0])
    writer, now = Writer(), [at("2024/10/11 12:04:55")]
    monitor = gpu_monitor.monitor_class(None)(
        str(tmp_path), writer=writer, clock=lambda: now[0], settle_s=0, tf_memory=TfMemory([None] * 8),
        sampler_factory=lambda **kw: ListSampler(mig_loop(), **kw))
    monitor.on_train_begin()
    assert monitor.sampled and monitor.mapping_note.startswith("CUDA_VISIBLE_DEVICES names a MIG slice")
    for epoch in range(2):
        monitor.on_epoch_begin(epoch)
        now[0] += 2.5
        monitor.on_epoch_end(epoch, {})
    monitor.on_train_end()
    assert "sampling every GPU nvidia-smi lists" in capsys.readouterr().err
    gpus = {g["index"]: g for g in monitor.epochs[0]["gpus"]}
    assert gpus[0]["utilization_percent"] is None and gpus[0]["memory_used_mib"] == 50
    assert gpus[1]["utilization_percent"] == 0.0
    assert ("gpu/0/utilization_percent", 0) not in writer.scalars and writer.scalars[("gpu/0/memory_used_mib", 0)] == 50
    assert writer.scalars[("gpu/1/utilization_percent", 0)] == 0.0
    section = training.gpu_monitor_report(monitor)
    assert section["mapping_note"] == monitor.mapping_note
    smoke_report_mod.write_report({"gpu_monitor": section}, str(tmp_path))
    written = json.loads((tmp_path / "report.json").read_text())["gpu_monitor"]
    assert written["epochs"][1]["gpus"][0]["utilization_percent"] is None  # null in the JSON, not 0
    only_mig = gpu_monitor.monitor_class(None)(
        str(tmp_path / "mig"), writer=Writer(), clock=lambda: now[0], settle_s=0, gpus=[0],
        tf_memory=TfMemory([None] * 8), sampler_factory=lambda **kw: ListSampler(mig_loop(), **kw))
    now[0] = at("2024/10/11 12:04:55")
    only_mig.on_train_begin()
    for epoch in range(2):
        only_mig.on_epoch_begin(epoch)
        now[0] += 2.5
        only_mig.on_epoch_end(epoch, {})
    verdict = training.gpu_monitor_report(only_mig)["verdict"]
    assert verdict["status"] == "not-sampled" and verdict["busy_percent"] is None
    assert "nvidia-smi reported utilization.gpu as N/A (a MIG instance or a vGPU does that)" in verdict["line"]


def test_no_tensorboard_writer_keeps_the_figures_and_says_why(monkeypatch, tmp_path, capsys):
    class NoTensorboard:
        def scalar(self, name, value, step):
            raise ModuleNotFoundError("No module named 'tensorboard'")

    now = [at("2024/10/11 12:04:55")]
    from .test_gpu_sampler import mig_loop

    monitor = gpu_monitor.monitor_class(None)(
        str(tmp_path), writer=NoTensorboard(), clock=lambda: now[0], settle_s=0, gpus=[1],
        tf_memory=TfMemory([None] * 8), sampler_factory=lambda **kw: ListSampler(mig_loop(), **kw))
    monitor.on_train_begin()
    for epoch in range(2):
        monitor.on_epoch_begin(epoch)
        now[0] += 2.5
        monitor.on_epoch_end(epoch, {})
    monitor.on_train_end()
    report = monitor.report()
    assert report["scalars"] == [] and "No module named 'tensorboard'" in report["scalars_error"]
    assert [e["gpus"][0]["memory_used_mib"] for e in report["epochs"]] == [4, 4]
    assert capsys.readouterr().err.count("no TensorBoard writer in this Python") == 1


# --- unified memory (GB10) -------------------------------------------------------------------
# CONSTRUCTED loop output: no `nvidia-smi --query-gpu` loop of a GB10 was found. Its table reads
# Memory-Usage "Not Supported" (tests/fixtures/nvidia-smi/gb10-580, a capture) and NVML's memory
# queries return NOT_SUPPORTED (leptonai/gpud#1170); which placeholder the CSV prints was not
# seen, so both the driver's bracketed forms are used.
GB10_LOOP = """2026/01/28 10:00:00.000, 0, 91, [N/A], [N/A]
2026/01/28 10:00:00.200, 0, 95, [Not Supported], [Not Supported]
2026/01/28 10:00:00.400, 0, 96, [N/A], [N/A]
2026/01/28 10:00:00.600, 0, 94, [N/A], [N/A]
"""


def test_on_a_gb10_the_memory_reads_not_reported_not_a_figure():
    samples = gpu_sampler.parse_output(GB10_LOOP).samples
    assert len(samples) == 4 and all(s.memory_total_mib is None and s.memory_used_mib is None for s in samples)
    jax_memory = TfMemory([30720.0])
    jax_memory.scalar_name = "jax_peak_memory_mib"  # as gpu_monitor.JaxMemory names its figure
    monitor = gpu_monitor.GpuMonitorLogic("/unused", tf_memory=jax_memory)
    start = at("2026/01/28 10:00:00") - 0.5
    (gpu,) = monitor.epoch_record(samples, 0, start, start + 1.5)["gpus"]
    assert gpu["memory_used_mib"] is None and gpu["memory_total_mib"] is None and gpu["memory_used_percent"] is None
    assert gpu["memory_note"].startswith("unified memory: not reported by the driver (")
    assert gpu["jax_peak_memory_mib"] == 30720.0 and gpu["utilization_percent"] is not None


def test_a_discrete_gpus_record_has_no_memory_note(monkeypatch, tmp_path):
    windows = [(at("2025/05/25 00:07:59"), at("2025/05/25 00:08:11"))]
    monitor, _, _, _ = replay(monkeypatch, tmp_path, "a5000-train-steady", windows)
    assert monitor.epochs[0]["gpus"][0]["memory_note"] is None

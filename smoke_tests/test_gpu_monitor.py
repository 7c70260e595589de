"""GpuMonitor in the image, with no GPU: a user's own fit() with `from kerasenv_image
import GpuMonitor`, nvidia-smi played by the recorded RTX A5000 loop
(tests/fixtures/nvidia-smi-query/a5000-train-steady, SOURCES.md there) through
tests/fixtures/fake-nvidia-smi-loop in its re-clocked mode, and the event files read back
with TensorBoard's EventAccumulator in the same image; and the smoke training's report on
the CPU.

The monitor is kerasenv's code: the checks that run it are marked once_per_group (with
`--once-per-group`, as `make test` runs them, on the first variant of each backend, Keras
major and Python: smoke_tests/groups.py); the smoke report's own check runs on every image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, not built here
REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SCRIPT = Path(__file__).parent / "gpu_monitor_script"
# utilization.gpu (4th column) and memory.used (6th) of that recording; memory.total is 24564 MiB
_ROWS = [line.split(", ") for line in
         (FIXTURES / "nvidia-smi-query" / "a5000-train-steady" / "output.csv").read_text().splitlines()[1:]]
RECORDED_UTIL = {float(row[3]) for row in _ROWS}
RECORDED_MEMORY = (min(float(row[5]) for row in _ROWS), max(float(row[5]) for row in _ROWS))


@pytest.mark.once_per_group
def test_gpu_monitor_in_a_users_fit_writes_per_epoch_scalars(docker, target, writable_dir):
    code, out, err = run_once(
        docker, target.ref, ["bash", "-c", "python /script/fit.py /out/tb && python /script/read_events.py /out/tb/gpu"],
        network_mode="none",
        environment={"KERASENV_NVIDIA_SMI": "/fixtures/fake-nvidia-smi-loop",
                     "KERASENV_FIXTURE_QUERY": "a5000-train-steady", "KERASENV_FIXTURE_RESTAMP": "1",
                     "TF_CPP_MIN_LOG_LEVEL": "2"},
        volumes={str(SCRIPT): {"bind": "/script", "mode": "ro"}, str(FIXTURES): {"bind": "/fixtures", "mode": "ro"},
                 str(writable_dir): {"bind": "/out", "mode": "rw"}})
    assert code == 0, (out[-2000:], err[-3000:])
    fit, events = (json.loads(line) for line in out.strip().splitlines()[-2:])
    assert fit["report"]["sampled"] is True and len(fit["epochs"]) == 3
    assert fit["children"] == []  # nvidia-smi stopped with training
    assert any(name.startswith("keras.") and name.endswith(".Callback") for name in fit["base"])  # Keras' own
    util = events["gpu/0/utilization_percent"]
    assert [step for step, _ in util] == [0, 1, 2]
    for (step, value), epoch in zip(util, fit["epochs"]):
        gpu = epoch["gpus"][0]
        assert gpu["samples"] >= 2 and 1 <= value <= 100
        assert value == pytest.approx(gpu["utilization_percent"], rel=1e-6)
        assert {gpu["utilization_min_percent"], gpu["utilization_max_percent"]} <= RECORDED_UTIL
    memory = dict(events["gpu/0/memory_used_mib"])
    percent = dict(events["gpu/0/memory_used_percent"])
    for step in range(3):
        assert RECORDED_MEMORY[0] <= memory[step] <= RECORDED_MEMORY[1]
        assert percent[step] == pytest.approx(100 * memory[step] / 24564, rel=1e-5)
    # The framework has no GPU here: no peak-memory figure is made up (tf_, jax_ or torch_).
    assert [tag for tag in events if tag.endswith("_peak_memory_mib")] == [], events.keys()


@pytest.mark.once_per_group
def test_gpu_monitor_without_nvidia_smi_says_so_once_and_training_goes_on(docker, target, writable_dir):
    code, out, err = run_once(
        docker, target.ref, ["python", "/script/fit.py", "/out/tb"], network_mode="none",
        environment={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/opt/venv/bin:/usr/bin:/bin"},
        volumes={str(SCRIPT): {"bind": "/script", "mode": "ro"}, str(writable_dir): {"bind": "/out", "mode": "rw"}})
    assert code == 0, err[-3000:]
    fit = json.loads(out.strip().splitlines()[-1])
    assert fit["report"] == {"sampled": False, "reason": "no nvidia-smi on PATH"} and fit["epochs"] == []
    assert err.count("GpuMonitor: no nvidia-smi / no GPU: nothing to sample") == 1
    assert not (writable_dir / "tb").exists()


def test_the_smoke_report_on_the_cpu_says_nothing_was_sampled(default_command_run):
    """The default command (the smoke training on the CPU; its one run, shared: conftest.py)."""
    code, err = default_command_run.code, default_command_run.err
    assert code == 0, err[-3000:]
    report = default_command_run.report()
    assert report["gpu_monitor"] == {"sampled": False, "reason": "training on the CPU: no GPU to sample"}
    assert "GpuMonitor" not in err and "GPU busy" not in err


@pytest.mark.once_per_group
def test_the_smoke_with_a_sampled_gpu_reports_the_epochs_and_prints_the_verdict(docker, target, writable_dir):
    """smoke_monitored.py: the real smoke, its training step told it trains on GPU 0 (TF
    still uses the CPU), nvidia-smi played by the recorded low-utilisation A5000 loop."""
    code, out, err = run_once(
        docker, target.ref, ["python", "/script/smoke_monitored.py", "--run-id", "monitored"],
        network_mode="none", shm_size="1g",
        environment={"KERASENV_NVIDIA_SMI": "/fixtures/fake-nvidia-smi-loop",
                     "KERASENV_FIXTURE_QUERY": "a5000-train-low-util", "KERASENV_FIXTURE_RESTAMP": "1"},
        volumes={str(SCRIPT): {"bind": "/script", "mode": "ro"}, str(FIXTURES): {"bind": "/fixtures", "mode": "ro"},
                 str(writable_dir): {"bind": "/workspace/runs", "mode": "rw"}})
    assert code == 0, err[-3000:]
    report = json.loads((writable_dir / "monitored" / "report.json").read_text())
    monitor = report["gpu_monitor"]
    assert monitor["sampled"] is True and [e["epoch"] for e in monitor["epochs"]] == [1, 2, 3]
    assert monitor["log_dir"] == "/workspace/runs/monitored/tensorboard/gpu"
    assert list((writable_dir / "monitored" / "tensorboard" / "gpu").glob("events.out.tfevents.*"))
    rows = [line.split(", ") for line in
            (FIXTURES / "nvidia-smi-query" / "a5000-train-low-util" / "output.csv").read_text().splitlines()[1:]]
    recorded = [float(row[3]) for row in rows]
    v = monitor["verdict"]
    assert min(recorded) <= v["busy_percent"] <= max(recorded) and v["epochs_used"] == [2, 3]
    assert v["samples"] >= 5 and "from only" not in v["line"]  # the step floor of smoke_monitored.py
    assert v["memory_status"] == "ok" and v["memory_total_mib"] == 24564  # at most 2324 MiB used
    for line in v["lines"]:
        assert f"[smoke]   {line}" in err


@pytest.mark.once_per_group
def test_gpu_monitor_imports_without_any_path_setup_for_an_arbitrary_uid_with_an_empty_environment(docker, target):
    """The image's kerasenv-image.pth puts /opt/kerasenv on every venv Python's path: here for
    a UID the image does not know, with no environment at all (no PATH, no HOME). The image's
    own user imports it the same way in test_gpu_monitor_in_a_users_fit_writes_per_epoch_scalars
    (fit.py lives in /script, so nothing but the .pth file finds kerasenv_image there). One
    process for both conditions: each import of GpuMonitor imports the framework (4-5 s)."""
    command = ["env", "-i", "/opt/venv/bin/python", "-c",
               "import os; from kerasenv_image import GpuMonitor; "
               "print('IMPORTED', GpuMonitor.__name__, os.getuid(), os.environ.get('HOME'), os.environ.get('PYTHONPATH'))"]
    code, out, err = run_once(docker, target.ref, command, network_mode="none", user="4242:4242")
    assert code == 0, err[-2000:]
    assert "IMPORTED GpuMonitor 4242 None None" in out, out[-2000:]

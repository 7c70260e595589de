"""kerasenv_image.profiling: which steps --profile captures, the window it times, and the
input wait read from recorded real input-pipeline analyses (tests/fixtures/
xprof-input-pipeline/, SOURCES.md there). The real profiler and plugin run in the images:
smoke_tests/test_profile.py."""

from __future__ import annotations

import json
import os

import pytest
from kerasenv_image import gpu_verdict, profiling

from ..conftest import REPO

ANALYSES = REPO / "tests" / "fixtures" / "xprof-input-pipeline"


def recorded(name: str) -> list:
    return json.loads((ANALYSES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("steps, epochs, expected", [
    (32, 3, (35, 40)),   # the smoke's default: steps 3-8 of epoch 2
    (6, 2, (7, 12)),     # an epoch of exactly 6 steps: all of epoch 2
    (100, 1, (95, 100)),  # one epoch: its last 6
    (8, 1, (3, 8)),
])
def test_steady_steps_pick_six_steps_after_the_first_epoch(steps, epochs, expected):
    assert profiling.steady_steps(steps, epochs) == expected


@pytest.mark.parametrize("steps, epochs", [(5, 3), (7, 1), (1, 10)])
def test_too_short_a_run_is_refused_with_what_it_needs(steps, epochs):
    with pytest.raises(ValueError, match=f"this run has {epochs} x {steps}"):
        profiling.steady_steps(steps, epochs)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def run_steps(window, clock, durations):
    """Keras' order of hooks for steps of the given durations (seconds), one fit()."""
    window.on_train_begin()
    for index, seconds in enumerate(durations):
        window.on_train_batch_begin(index)
        clock.now += seconds
        window.on_train_batch_end(index)


def test_the_window_times_the_steps_strictly_inside_the_profiled_range():
    clock = Clock()
    window = profiling.StepWindowLogic(3, 8, clock=clock)
    # steps 1-8; the profiler's start (step 3's begin) and stop (step 8's end) are slow
    run_steps(window, clock, [1.0, 1.0, 9.0, 0.1, 0.2, 0.3, 0.4, 9.0])
    assert window.timed_steps == 4 and window.seconds == pytest.approx(1.0)


def test_the_window_stays_empty_when_fit_stopped_before_the_last_step():
    clock = Clock()
    window = profiling.StepWindowLogic(3, 8, clock=clock)
    run_steps(window, clock, [0.1] * 7)
    assert window.seconds is None
    run_steps(window, clock, [0.1] * 8)  # a second fit() starts counting afresh
    assert window.seconds == pytest.approx(0.4)


@pytest.mark.parametrize("name, calls, total_ms", [
    ("tf2.21-cpu-fast-map", 5, 0.126208), ("tf2.21-cpu-slow-map", 5, 94.602099),
    ("tf2.14-cuda11.8-fast-map", 5, 0.127259), ("tf2.14-cuda11.8-slow-map", 5, 95.829474)])
def test_root_iterator_row_of_recorded_analyses(name, calls, total_ms):
    assert profiling.root_iterator(recorded(name)) == {"calls": calls, "total_ms": pytest.approx(total_ms)}


def test_an_analysis_without_a_tf_data_iterator_has_no_root_row():
    analysis = recorded("tf2.21-cpu-fast-map")
    for table in analysis:
        if isinstance(table, dict) and any(c.get("id") == "opName" for c in table.get("cols", [])):
            table["rows"] = []
    assert profiling.root_iterator(analysis) is None


class Window:
    def __init__(self, seconds, timed_steps=4):
        self.seconds, self.timed_steps = seconds, timed_steps


def from_recording(name):
    return lambda xplane: {"root": profiling.root_iterator(recorded(name))}


def test_slow_map_is_input_bound_and_fast_map_keeps_up():
    # 4 timed steps of 21 ms each (a 20 ms sleep per batch): the step's wait is most of it
    slow = profiling.input_wait("/unused", Window(0.084), xplane="x.pb", analyser=from_recording("tf2.21-cpu-slow-map"))
    assert slow["wait_ms_per_step"] == pytest.approx(94.602099 / 5)
    assert slow["input_wait_fraction"] == pytest.approx(94.602099 / 5 / 21)
    assert slow["line"] == ("the input pipeline waited 90 % of step time: the data pipeline is the bottleneck "
                            "(see Profile → Input pipeline)")
    fast = profiling.input_wait("/unused", Window(0.004), xplane="x.pb", analyser=from_recording("tf2.21-cpu-fast-map"))
    assert fast["input_wait_fraction"] == pytest.approx(0.126208 / 5 / 1.0)
    assert fast["line"] == "the input pipeline waited 3 % of step time: it keeps up (under 30 %)"
    assert gpu_verdict.input_status(slow["input_wait_fraction"]) == "input-bound"
    assert gpu_verdict.input_status(fast["input_wait_fraction"]) == "input-ok"


def test_the_fraction_never_exceeds_one():
    found = profiling.input_wait("/unused", Window(0.004), xplane="x.pb", analyser=from_recording("tf2.21-cpu-slow-map"))
    assert found["input_wait_fraction"] == 1.0


def test_what_is_missing_is_said_and_no_fraction_made_up(tmp_path):
    never = lambda xplane: pytest.fail("no analysis without a profile")  # noqa: E731
    nothing = profiling.input_wait(str(tmp_path), Window(0.1), analyser=never)
    assert nothing["input_wait_fraction"] is None and "no profile under" in nothing["line"]
    short = profiling.input_wait(str(tmp_path), Window(None), xplane="x.pb", analyser=never)
    assert short["input_wait_fraction"] is None and "not all run" in short["line"]
    failed = profiling.input_wait(str(tmp_path), Window(0.1), xplane="x.pb",
                                  analyser=lambda xplane: {"error": "the profile analysis failed: boom"})
    assert failed["input_wait_fraction"] is None and failed["line"] == "the profile analysis failed: boom"
    no_iterator = profiling.input_wait(str(tmp_path), Window(0.1), xplane="x.pb", analyser=lambda xplane: {"root": None})
    assert no_iterator["input_wait_fraction"] is None and "no tf.data iterator" in no_iterator["line"]


def test_the_newest_profile_is_found_under_either_keras_layout(tmp_path):
    keras3 = tmp_path / "train" / "plugins" / "profile" / "2026_12_01_10_00_00" / "host.xplane.pb"
    keras2 = tmp_path / "plugins" / "profile" / "2026_12_01_11_00_00" / "host.xplane.pb"
    for path, when in ((keras3, 1000), (keras2, 2000)):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
        os.utime(path, (when, when))
    assert profiling.newest_xplane(str(tmp_path)) == str(keras2)
    assert profiling.newest_xplane(str(tmp_path / "none")) is None


def test_the_analysis_child_reports_a_missing_plugin_in_one_line(tmp_path):
    """On the host (no xprof installed here): the child fails, and says why in one line."""
    found = profiling.analyse(str(tmp_path / "missing.xplane.pb"), timeout=60)
    assert list(found) == ["error"] and found["error"].startswith("the profile analysis failed: ")
    assert "\n" not in found["error"]


def test_the_gpu_verdict_uses_the_profiles_wait():
    gpu = {"index": 0, "samples": 10, "utilization_percent": 38.0, "utilization_min_percent": 30.0,
           "utilization_max_percent": 45.0, "memory_used_mib": None, "memory_total_mib": 81920.0,
           "tf_peak_memory_mib": None}
    epochs = [{"epoch": n, "gpus": [dict(gpu)]} for n in (1, 2)]
    v = gpu_verdict.verdict(epochs, memory_total_mib=None, input_wait_fraction=0.55)
    assert v["status"] == "input-bound" and v["line"].startswith("GPU busy 38 % while the input pipeline waited 55 %")


def test_smoke_train_takes_profile_as_a_flag_or_from_the_environment(monkeypatch):
    from kerasenv_image.smoke import args as smoke_args

    monkeypatch.delenv("KERASENV_PROFILE", raising=False)
    assert smoke_args.parse_args([]).profile_steps is None
    assert smoke_args.parse_args(["--profile"]).profile_steps == (35, 40)
    assert smoke_args.parse_args(["--profile", "--steps-per-epoch", "10"]).profile_steps == (13, 18)
    monkeypatch.setenv("KERASENV_PROFILE", "1")
    assert smoke_args.parse_args([]).profile_steps == (35, 40)


def test_smoke_train_refuses_a_run_too_short_to_profile(capsys):
    from kerasenv_image.smoke import args as smoke_args

    with pytest.raises(SystemExit) as exc:
        smoke_args.parse_args(["--profile", "--epochs", "1", "--steps-per-epoch", "4"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("smoke_train.py: error: --profile: a profile needs 6 steady steps: train at least 2 epochs")


def test_kerasenv_smoke_passes_profile_on_and_make_takes_profile_1():
    import subprocess

    from kerasenv import cli
    from kerasenv.run import runner

    assert runner.smoke_flags(profile=True) == ["--profile"]
    assert cli._parser().parse_args(["smoke", "tf2.21-cpu", "--profile"]).profile is True
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["run", "tf2.21-cpu", "--profile"])
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "smoke", "VARIANT=tf2.21-cpu", "PROFILE=1"],
                            cwd=REPO, capture_output=True, text=True, check=False).stdout
    assert "smoke tf2.21-cpu" in recipe and "--profile" in recipe

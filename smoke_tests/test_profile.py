"""The profiler in the image, with no GPU: the smoke's --profile writes a real profile
that TensorBoard's profile plugin (XProf, locked into every image) lists over its HTTP API
with its tools; a user's own fit() profiled the README's way tells a slow tf.data map
from a fast one; a run too short to profile is refused before anything is written.

On a GPU host the same profile also carries kernel stats and the GPU memory profile;
that part cannot run here (no GPU), and nothing below pretends it did."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, no plugin of ours
SCRIPT = Path(__file__).parent / "profile_script"
# the slow pipeline's sleep per batch, read from the script it runs (one value, not two)
SLEEP_S = float(re.search(r"^SLEEP_S = ([0-9.]+)$", (SCRIPT / "input_pipeline.py").read_text(encoding="utf-8"),
                          re.M).group(1))


def test_the_tensorboard_command_starts(docker, target):
    """TensorBoard < 2.21 imports pkg_resources at start-up: the lock keeps setuptools < 82
    there (tensorflow/tensorboard#7003); without it `tensorboard` died on every image but TF 2.21's.
    Where the smoke's profile is served (TensorFlow and JAX images), the `tensorboard` command
    serving it in the next test is this check too: one start of TensorBoard (5 s) less."""
    if target.variant.backend != "torch":
        pytest.skip("the `tensorboard` command serves the smoke's profile in "
                    "test_the_smoke_profile_is_listed_by_tensorboards_profile_plugin_with_its_tools")
    code, out, err = run_once(docker, target.ref, ["tensorboard", "--version"], network_mode="none")
    assert code == 0, err[-2000:]
    assert out.strip().split(".")[0] == "2"


def test_pytorch_s_profile_is_a_chrome_trace_with_the_profiled_steps(docker, target, writable_dir):
    """PyTorch has no XSpace writer: its smoke --profile writes torch.profiler's Chrome trace
    (for Perfetto or chrome://tracing), and says that TensorBoard's Profile tab cannot show it."""
    if target.variant.backend != "torch":
        pytest.skip(f"torch.profiler's Chrome trace: PyTorch images only (this one trains on {target.variant.backend})")
    code, out, err = run_once(
        docker, target.ref, ["python", "/opt/kerasenv/smoke_train.py", "--profile", "--run-id", "prof"],
        network_mode="none", shm_size="1g", volumes={str(writable_dir): {"bind": "/workspace/runs", "mode": "rw"}})
    assert code == 0, (out[-2000:], err[-3000:])
    profile = json.loads((writable_dir / "prof" / "report.json").read_text())["profile"]
    assert profile["steps"] == [35, 40] and profile["xplane"] is None
    assert profile["trace"].startswith("/workspace/runs/prof/tensorboard/") and profile["trace"].endswith(".json")
    trace = json.loads((writable_dir / Path(profile["trace"]).relative_to("/workspace/runs")).read_text())
    assert len(trace["traceEvents"]) > 100, len(trace["traceEvents"])
    assert profile["input_status"] == "not-measured"
    assert f"[smoke]   profile: {profile['line']}" in err


def test_the_smoke_profile_is_listed_by_tensorboards_profile_plugin_with_its_tools(docker, target, writable_dir):
    if target.variant.backend == "torch":
        pytest.skip("TensorBoard's Profile tab (XProf) reads XSpace, which PyTorch does not write: "
                    "see test_pytorch_s_profile_is_a_chrome_trace_with_the_profiled_steps")
    code, out, err = run_once(
        docker, target.ref,
        ["bash", "-c", "python /opt/kerasenv/smoke_train.py --profile --run-id prof && python /script/query_tensorboard.py"],
        network_mode="none", shm_size="1g",
        volumes={str(SCRIPT): {"bind": "/script", "mode": "ro"},
                 str(writable_dir): {"bind": "/workspace/runs", "mode": "rw"}})
    assert code == 0, (out[-2000:], err[-3000:])
    report = json.loads((writable_dir / "prof" / "report.json").read_text())
    profile = report["profile"]
    assert profile["steps"] == [35, 40] and profile["timed_steps"] == 4
    assert profile["xplane"].startswith("/workspace/runs/prof/tensorboard/") and profile["xplane"].endswith(".xplane.pb")
    host_xplane = writable_dir / Path(profile["xplane"]).relative_to("/workspace/runs")
    assert host_xplane.stat().st_size > 10_000
    assert profile["step_ms"] > 0
    if target.variant.backend == "tensorflow":
        # tf.data's Iterator::Root events time the input wait: 6 calls in steps 35-40.
        assert profile["get_next_calls"] == 6
        assert 0 <= profile["input_wait_fraction"] <= 1
        assert profile["input_status"] in ("input-ok", "input-bound")
    else:
        # JAX and PyTorch feed a PyDataset, which the trace has no iterator events for: the
        # report must say the input wait was not measured, not make a figure up.
        assert (profile["get_next_calls"], profile["input_wait_fraction"], profile["input_status"]) == \
            (None, None, "not-measured"), profile
    assert f"[smoke]   profile: {profile['line']}" in err
    assert "Profiler session" not in err  # the profiler's own lines are start-up noise to the terminal

    served = json.loads(out.strip().splitlines()[-1])
    assert "profile" in served["plugins"]
    (run,) = [r for r in served["runs"] if r.startswith("prof/tensorboard/")]
    tools = served["tools"][run]
    assert "input_pipeline_analyzer" in tools and "overview_page" in tools
    assert any(t.startswith("trace_viewer") for t in tools)


def test_a_slow_tf_data_map_is_input_bound_and_a_fast_one_is_not(docker, target, writable_dir):
    if target.variant.backend != "tensorflow":
        pytest.skip("a tf.data pipeline and its Iterator::Root events in the profile: TF images only "
                    f"(this image trains on {target.variant.backend}: its tensorflow-cpu serves tf.data and "
                    "TensorBoard, but Keras' profile_batch is TensorFlow's, and JAX's on Python >= 3.12 only)")
    code, out, err = run_once(
        docker, target.ref, ["python", "/script/input_pipeline.py"], network_mode="none", shm_size="1g",
        volumes={str(SCRIPT): {"bind": "/script", "mode": "ro"}, str(writable_dir): {"bind": "/out", "mode": "rw"}})
    assert code == 0, err[-3000:]
    results = {r["pipeline"]: r["result"] for r in map(json.loads, out.strip().splitlines()[-2:])}
    fast, slow = results["fast"], results["slow"]
    assert slow["input_wait_fraction"] >= 0.30, slow
    # One batch per 20 ms sleep at most (the map runs one call at a time): the producer bounds the
    # step, whatever the machine. The wait itself is the sleep less what the step computes beside
    # it, so it has no floor of its own: 18-20 ms on an idle machine, 7.6 ms on a loaded one (the
    # cold run of e35b9bd, where `>= 10` failed and the fraction still passed).
    assert slow["step_ms"] >= 0.9 * 1000 * SLEEP_S, slow
    assert slow["line"].endswith("the data pipeline is the bottleneck (see Profile → Input pipeline)")
    assert fast["input_wait_fraction"] < 0.30, fast
    assert fast["line"].endswith("it keeps up (under 30 %)")
    assert slow["input_wait_fraction"] > 3 * fast["input_wait_fraction"]


def test_a_run_too_short_to_profile_is_refused_before_anything_is_written(docker, target, writable_dir):
    code, out, err = run_once(
        docker, target.ref, ["python", "/opt/kerasenv/smoke_train.py", "--profile", "--epochs", "1",
                             "--steps-per-epoch", "4", "--run-id", "short"],
        network_mode="none", volumes={str(writable_dir): {"bind": "/workspace/runs", "mode": "rw"}})
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(
        "smoke_train.py: error: --profile: a profile needs 6 steady steps: train at least 2 epochs of 6 steps")
    assert list(writable_dir.iterdir()) == []

"""The profiler in a training run: which steps to capture, how long they took, and how much
of that time the training step waited for its input (the tf.data pipeline).

For your own fit() (the smoke's --profile does the same):

    from kerasenv_image import profiling
    first, last = profiling.steady_steps(steps_per_epoch, epochs)   # 6 steps early in epoch 2
    window = profiling.step_window_class(keras)(first, last)        # times the inner 4
    model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, callbacks=[
        keras.callbacks.TensorBoard(log_dir, profile_batch=(first, last)), window])
    print(profiling.input_wait(log_dir, window)["line"])

Keras' TensorBoard callback counts `profile_batch` in training steps from 1 over the whole
fit() (not per epoch) and writes an XSpace file (`*.xplane.pb`, under `<log_dir>/train/
plugins/profile/<time>/` on Keras 3, `<log_dir>/plugins/profile/<time>/` on tf.keras 2):
TensorBoard's Profile tab (the XProf plugin in every image) shows it.

The input wait comes from the plugin's own input-pipeline analysis of that file
(`xprof.convert.raw_to_tool_data`, tool `input_pipeline_analyzer`, run in a child Python so
that its 40 MB native library never shares the training process): the total time of the
`Iterator::Root` op, the root of the tf.data iterator, whose GetNext is the time the
training step spent getting its next batch: waiting for it when the pipeline is behind,
microseconds when a prefetched batch is ready. Its analyser's own step-time breakdown
needs device step markers (on a CPU-only host it reports "No step time measured"), so the
step time is measured here instead: `StepWindow` times the profiled steps but the first
and the last (whose hooks start and stop the profiler, writing the trace), and the wait
fraction is the mean wait per GetNext over the mean step time.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

from . import gpu_verdict

PROFILED_STEPS = 6  # the first and the last start and stop the profiler: 4 are timed
CONVERT_TIMEOUT_S = 120.0
ROOT_ITERATOR = "Iterator::Root"


def steady_steps(steps_per_epoch: int, epochs: int, count: int = PROFILED_STEPS) -> tuple[int, int]:
    """(first, last) for `profile_batch=`, 1-based global step numbers: `count` steps from the
    third step of epoch 2 (epoch 1 traces and compiles the step and warms the pipeline up);
    with one epoch, the last `count` steps of it. ValueError when the run is too short."""
    if count < 3:
        raise ValueError("profile at least 3 steps: the first and the last are not timed")
    if epochs >= 2 and steps_per_epoch >= count:
        first = steps_per_epoch + 1 + min(2, steps_per_epoch - count)
    elif epochs == 1 and steps_per_epoch >= count + 2:
        first = steps_per_epoch - count + 1
    else:
        raise ValueError(f"a profile needs {count} steady steps: train at least 2 epochs of {count} steps "
                         f"(or 1 epoch of {count + 2}); this run has {epochs} x {steps_per_epoch}")
    return first, first + count - 1


class StepWindowLogic:
    """Wall time from the end of step `first` to the beginning of step `last` (global,
    1-based, counted as Keras' TensorBoard counts them), i.e. the steps strictly inside the
    profiled range, none of the profiler's start or stop. Keras-free; step_window_class()
    mixes it into a Callback."""

    def __init__(self, first: int, last: int, clock=time.perf_counter) -> None:
        super().__init__()
        if last - first < 2:
            raise ValueError("the window needs first + 2 <= last")
        self.first, self.last = first, last
        self._clock = clock
        self.step = 0
        self._began: float | None = None
        self.seconds: float | None = None

    @property
    def timed_steps(self) -> int:
        return self.last - self.first - 1

    def on_train_begin(self, logs=None):
        self.step, self._began, self.seconds = 0, None, None

    def on_train_batch_begin(self, batch, logs=None):
        self.step += 1
        if self.step == self.last and self._began is not None:
            self.seconds = self._clock() - self._began

    def on_train_batch_end(self, batch, logs=None):
        if self.step == self.first:
            self._began = self._clock()


_CLASSES: dict = {}


def step_window_class(keras):
    """StepWindow on `keras.callbacks.Callback`."""
    base = keras.callbacks.Callback
    if base not in _CLASSES:
        _CLASSES[base] = type("StepWindow", (StepWindowLogic, base), {"__module__": __name__})
    return _CLASSES[base]


def newest_xplane(log_dir: str) -> str | None:
    found = glob.glob(os.path.join(glob.escape(log_dir), "**", "*.xplane.pb"), recursive=True)
    return max(found, key=os.path.getmtime) if found else None


def root_iterator(tool_output: list) -> dict | None:
    """`Iterator::Root`'s row of the input-pipeline analyser's input-op table (the table
    whose columns include `opName`): {calls, total_ms}; None when the profile has no
    tf.data iterator."""
    for table in tool_output:
        if not isinstance(table, dict):
            continue
        ids = [c.get("id") for c in table.get("cols", [])]
        if "opName" not in ids or "count" not in ids or "timeInMs" not in ids:
            continue
        for row in table.get("rows", []):
            values = [cell.get("v") for cell in row.get("c", [])]
            if values[ids.index("opName")] == ROOT_ITERATOR:
                return {"calls": int(values[ids.index("count")]), "total_ms": float(values[ids.index("timeInMs")])}
    return None


def analyse(xplane: str, timeout: float = CONVERT_TIMEOUT_S) -> dict:
    """Run the plugin's input-pipeline analysis of `xplane` in a child Python:
    {"root": root_iterator(...)} or {"error": one line}."""
    # The path is read before xprof is imported: absl, which it loads, rewrites sys.argv.
    code = ("import sys\n"
            "path = sys.argv[1]\n"
            "from xprof.convert import raw_to_tool_data\n"
            "data, _ = raw_to_tool_data.xspace_to_tool_data([path], 'input_pipeline_analyzer', {})\n"
            "sys.stdout.write(data if isinstance(data, str) else (data or b'null').decode())\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run([sys.executable, "-c", code, xplane], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"the profile analysis took over {timeout:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"the profile analysis failed: {last[:200]}"}
    try:
        output = json.loads(proc.stdout)
    except ValueError:
        return {"error": "the profile analysis printed no JSON"}
    if not isinstance(output, list):
        return {"error": "the profiler plugin could not analyse this profile"}
    return {"root": root_iterator(output)}


def input_wait(log_dir: str, window, *, xplane: str | None = None, analyser=analyse) -> dict:
    """What the profile in `log_dir` (its newest XSpace, or `xplane`) says of the input
    pipeline, over `window`'s timed steps (a StepWindow after fit()).

    Returns {xplane, timed_steps, step_ms, wait_ms_per_step, get_next_calls,
    input_wait_fraction, analysis_s (the analysis' wall time), line}; input_wait_fraction is None, and `line` says why, when
    something is missing (no profile written, steps not reached, no tf.data iterator)."""
    result = {"xplane": xplane or newest_xplane(log_dir), "timed_steps": window.timed_steps,
              "step_ms": None, "wait_ms_per_step": None, "get_next_calls": None, "input_wait_fraction": None}
    if result["xplane"] is None:
        return dict(result, line=f"no profile under {log_dir}: the profiled steps were not reached")
    if window.seconds is None:
        return dict(result, line="the profiled steps were not all run: no step time to compare the input wait with")
    result["step_ms"] = 1000.0 * window.seconds / window.timed_steps
    began = time.perf_counter()
    found = analyser(result["xplane"])
    result["analysis_s"] = time.perf_counter() - began
    if "error" in found:
        return dict(result, line=found["error"])
    root = found["root"]
    if not root or not root["calls"]:
        return dict(result, line="no tf.data iterator in the profile: the input wait is not measured")
    result["get_next_calls"] = root["calls"]
    result["wait_ms_per_step"] = root["total_ms"] / root["calls"]
    result["input_wait_fraction"] = min(1.0, result["wait_ms_per_step"] / result["step_ms"])
    return dict(result, line=gpu_verdict.input_line(result["input_wait_fraction"]))


def xspace_profile_report(window, steps, tensorboard_dir: str) -> dict | None:
    """report.json's profile (--profile) on TensorFlow and JAX, both XSpace (`*.xplane.pb`):
    where the profile is, and the input wait it shows."""
    if window is None:
        return None
    found = input_wait(tensorboard_dir, window)
    fraction = found["input_wait_fraction"]
    return {"steps": list(steps), "log_dir": tensorboard_dir, **found,
            "input_status": gpu_verdict.input_status(fraction) if fraction is not None else "not-measured",
            "view": "TensorBoard over this run's tensorboard/ folder: Profile tab (trace viewer, input pipeline)"}

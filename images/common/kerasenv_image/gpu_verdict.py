"""What the GPU numbers of a training run mean, in one line the user can act on.

Pure (no TensorFlow, no nvidia-smi): it reads GpuMonitor's per-epoch records and,
optionally, the fraction of step time the input pipeline made the device wait (from the
profiler's input-pipeline analysis, when one ran). It derives only from measured numbers:
no sample, no utilisation line; no input-wait measurement, no claim about the input
pipeline.
"""

from __future__ import annotations

# Under half the time a kernel ran: the GPU idles more than it works, so the step is paced
# by something else (input pipeline, host-side Python, too small a batch or model).
UNDERUSED_BUSY_PERCENT = 50.0
# At or above this the GPU's kernels set the pace: it is idle less than a fifth of the
# time, which is what a well-fed training step looks like (the bench's target is 90 % at
# the largest batch; per-step launch gaps keep real runs a little below 100 %).
GPU_BOUND_BUSY_PERCENT = 80.0
# Peak memory at 90 % of the GPU's total or more leaves little room for a larger batch, a
# longer sequence or fragmentation: the next change is likely to end in ResourceExhausted.
NEAR_OOM_MEMORY_FRACTION = 0.90
# The device waited for input 30 % of the step time or more: a faster pipeline (parallel
# map, cache, prefetch) would shorten the step by about that much: input-bound.
INPUT_BOUND_WAIT_FRACTION = 0.30

# Fewer utilisation samples than this in the epochs judged (epochs shorter than a few
# sampling intervals) make the mean a rough figure: the line says how many there were.
FEW_SAMPLES = 5

THRESHOLDS = {"underused_busy_percent": UNDERUSED_BUSY_PERCENT, "gpu_bound_busy_percent": GPU_BOUND_BUSY_PERCENT,
              "near_oom_memory_fraction": NEAR_OOM_MEMORY_FRACTION,
              "input_bound_wait_fraction": INPUT_BOUND_WAIT_FRACTION, "few_samples": FEW_SAMPLES}

PROFILE_HINT = "see Profile → Input pipeline"


def _percent(fraction: float) -> str:
    return "under 1 %" if 0 < fraction < 0.005 else f"{100 * fraction:.0f} %"


def input_status(fraction: float) -> str:
    return "input-bound" if fraction >= INPUT_BOUND_WAIT_FRACTION else "input-ok"


def input_line(fraction: float) -> str:
    """The profile's input-wait finding on its own (a CPU run, or beside the GPU's line)."""
    if input_status(fraction) == "input-bound":
        return (f"the input pipeline waited {_percent(fraction)} of step time: the data pipeline is the "
                f"bottleneck ({PROFILE_HINT})")
    return (f"the input pipeline waited {_percent(fraction)} of step time: it keeps up (under "
            f"{100 * INPUT_BOUND_WAIT_FRACTION:.0f} %)")


def _gib(mib: float) -> str:
    gib = mib / 1024
    return f"{gib:.0f} GiB" if gib >= 10 else f"{gib:.1f} GiB"


def steady_epochs(epochs: list[dict]) -> list[dict]:
    """The epochs after the first when there are several: the first includes tracing,
    compilation and the pipeline's warm-up (the smoke's samples_per_second does the same)."""
    return epochs[1:] if len(epochs) > 1 else list(epochs)


def _no_utilisation_line(steady: list[dict], interval_ms: int | None) -> tuple[str, str]:
    """Why there is no utilisation figure, as (status, line): no record at all; epochs so
    short that no sample fell after their settling time; or samples whose utilization.gpu
    was N/A."""
    gpus = [g for e in steady for g in e.get("gpus", [])]
    if not gpus:
        return "not-sampled", "no GPU sampled"
    if any(g.get("samples") for g in gpus):
        return "not-sampled", ("no GPU utilisation figure: nvidia-smi reported utilization.gpu as N/A "
                               "(a MIG instance or a vGPU does that); memory is still measured")
    seconds = [e["seconds"] for e in steady if e.get("seconds") is not None]
    longest = f" (the longest lasted {max(seconds):.2f} s)" if seconds else ""
    every = f"every {interval_ms} ms" if interval_ms else "at nvidia-smi's interval"
    return "epochs-too-short", (f"no GPU utilisation figure: the epochs were too short{longest} for nvidia-smi's "
                                f"samples ({every}, the first quarter of an epoch, at most 1 s, dropped); train "
                                "more steps per epoch (smoke: --steps-per-epoch) so that an epoch lasts a few "
                                "seconds")


FRAMEWORKS = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}
PEAK_SUFFIX = "_peak_memory_mib"
PEAK_SOURCES = {"tf_peak_memory_mib": "tensorflow-peak"}


def verdict(epochs: list[dict], *, memory_total_mib: float | None, input_wait_fraction: float | None = None,
            interval_ms: int | None = None) -> dict:
    """`epochs`: GpuMonitor.epochs ([{epoch, seconds, gpus: [{index, samples,
    utilization_percent, memory_used_mib, memory_total_mib, tf_peak_memory_mib, ...}]}]).
    `memory_total_mib`: the GPU's memory (None: nvidia-smi's memory.total from the
    samples). `interval_ms`: the sampling interval, named when epochs were too short.

    Returns status (not-sampled | epochs-too-short | input-bound | underused | partly-idle
    | gpu-bound),
    memory_status (ok | near-oom | not-reported | unknown), `line` (the first of `lines`, the
    most important finding), `lines`, the measured values and the thresholds. not-reported: the
    samples came without the GPU's memory (GpuMonitor's `memory_note`: a GPU that shares the
    system's RAM, GB10), so there is no total to judge a peak against, and no out-of-memory
    advice is given."""
    steady = steady_epochs(epochs)
    utilisation = [g["utilization_percent"] for e in steady for g in e.get("gpus", [])
                   if g.get("utilization_percent") is not None]
    low = [g["utilization_min_percent"] for e in steady for g in e.get("gpus", [])
           if g.get("utilization_min_percent") is not None]
    high = [g["utilization_max_percent"] for e in steady for g in e.get("gpus", [])
            if g.get("utilization_max_percent") is not None]
    busy = sum(utilisation) / len(utilisation) if utilisation else None
    samples = sum(g.get("samples") or 0 for e in steady for g in e.get("gpus", [])
                  if g.get("utilization_percent") is not None)

    # Memory: TensorFlow's own peak where TF could say (what the model needed); otherwise
    # nvidia-smi's memory.used, which also counts what TF's allocator reserved unused.
    everything = [g for e in epochs for g in e.get("gpus", [])]
    # The framework's own peak: tf_peak_memory_mib on TensorFlow, jax_/torch_peak_memory_mib
    # on the other backends (GpuMonitor's memory reader names it).
    framework_peaks = {}
    for g in everything:
        for key, value in g.items():
            if key.endswith(PEAK_SUFFIX) and value is not None:
                framework_peaks.setdefault(key, []).append(value)
    peak_key = "tf_peak_memory_mib" if "tf_peak_memory_mib" in framework_peaks else next(iter(framework_peaks), None)
    tf_peaks = framework_peaks.get(peak_key, [])
    peak_source = PEAK_SOURCES.get(peak_key, f"{(peak_key or '').split('_')[0]}-peak")
    used = [g["memory_used_mib"] for g in everything if g.get("memory_used_mib") is not None]
    totals = [g["memory_total_mib"] for g in everything if g.get("memory_total_mib")]
    total = memory_total_mib if memory_total_mib else (max(totals) if totals else None)
    peak, source = (max(tf_peaks), peak_source) if tf_peaks else (max(used), "nvidia-smi") if used else (None, None)
    fraction = peak / total if peak is not None and total else None

    result = {"busy_percent": busy, "samples": samples, "busy_min_percent": min(low) if low else None,
              "busy_max_percent": max(high) if high else None, "epochs_used": [e.get("epoch") for e in steady],
              "peak_memory_mib": peak, "memory_source": source, "memory_total_mib": total,
              "memory_fraction": fraction, "input_wait_fraction": input_wait_fraction,
              "thresholds": dict(THRESHOLDS)}
    lines: list[str] = []
    if busy is None:
        status, line = _no_utilisation_line(steady, interval_ms)
        lines.append(line)
    else:
        swing = (f" (from only {samples} sample{'' if samples == 1 else 's'}: longer epochs give a firmer figure)"
                 if samples < FEW_SAMPLES else "")
        if result["busy_min_percent"] is not None and result["busy_max_percent"] - result["busy_min_percent"] >= 30:
            swing += f", swinging {result['busy_min_percent']:.0f}-{result['busy_max_percent']:.0f} % between samples"
        if input_wait_fraction is not None and input_wait_fraction >= INPUT_BOUND_WAIT_FRACTION:
            status = "input-bound"
            lines.append(f"GPU busy {busy:.0f} %{swing} while the input pipeline waited {_percent(input_wait_fraction)} "
                         f"of step time: the data pipeline is the bottleneck ({PROFILE_HINT})")
        elif busy < UNDERUSED_BUSY_PERCENT:
            status = "underused"
            if input_wait_fraction is not None:
                lines.append(f"GPU busy {busy:.0f} %{swing} while the input pipeline waited only "
                             f"{_percent(input_wait_fraction)} of step time: the GPU is underused but not by the "
                             "input; raise the batch size, or look for host-side work between steps (Profile → "
                             "Trace viewer)")
            else:
                lines.append(f"GPU busy {busy:.0f} %{swing}: the GPU is underused (under "
                             f"{UNDERUSED_BUSY_PERCENT:.0f} %) and something else paces the steps: the input "
                             "pipeline, host-side work or too small a batch; profile it to see which "
                             f"({PROFILE_HINT})")
        elif busy < GPU_BOUND_BUSY_PERCENT:
            status = "partly-idle"
            lines.append(f"GPU busy {busy:.0f} %{swing}: the GPU idles part of each step; a larger batch or a "
                         f"faster input pipeline may still help ({PROFILE_HINT})")
        else:
            status = "gpu-bound"
            lines.append(f"GPU busy {busy:.0f} %{swing}: the GPU is the bottleneck, as it should be")
    unreported = next((g["memory_note"] for g in everything if g.get("memory_note")), None)
    if fraction is None and unreported and total is None:
        memory_status = "not-reported"
        result["memory_note"] = unreported
        framework = FRAMEWORKS.get(peak_source.removesuffix("-peak"), peak_source)
        measured = f"; {framework}'s own peak {_gib(peak)}" if tf_peaks else ""
        lines.append(f"GPU memory: {unreported.split(' (')[0]} (the GPU shares the system's RAM){measured}; "
                     "no out-of-memory margin to judge: the host's free memory (`free -h`) is the GPU's")
    elif fraction is None:
        memory_status = "unknown"
    elif fraction >= NEAR_OOM_MEMORY_FRACTION:
        memory_status = "near-oom"
        caveat = ("" if source != "nvidia-smi" else
                  " (nvidia-smi memory.used, which includes what TensorFlow reserved: turn memory growth on "
                  "to see what the model needs)")
        lines.insert(0 if status != "input-bound" else 1,
                     f"peak GPU memory {100 * fraction:.0f} % of {_gib(total)}{caveat}: "
                     "lower the batch size or use mixed precision")
    else:
        memory_status = "ok"
    result.update(status=status, memory_status=memory_status, line=lines[0], lines=lines)
    return result

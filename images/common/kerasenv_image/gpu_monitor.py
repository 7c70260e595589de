"""GpuMonitor: GPU utilisation and memory as TensorBoard scalars, per epoch, for any fit().

    from kerasenv_image import GpuMonitor               # /opt/kerasenv is on every image's Python path

    monitor = GpuMonitor("runs/my-run/tensorboard")     # scalars go to .../tensorboard/gpu
    model.fit(dataset, epochs=5, callbacks=[monitor, keras.callbacks.TensorBoard("runs/my-run/tensorboard")])
    print(monitor.epochs[-1])                           # the same numbers, as dicts

On train begin it starts `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,
memory.total --format=csv,noheader,nounits -lms <interval_ms>` (gpu_sampler.NvidiaSmiSampler,
the sampler `kerasenv bench` uses), and at each epoch end it writes, per nvidia-smi GPU
index i, with the epoch (0-based, as Keras' TensorBoard callback) as the step:

- `gpu/{i}/utilization_percent`: mean utilization.gpu over the epoch's steady-state window
  (gpu_sampler.steady_state: the samples of the first `settle_s` seconds are dropped, by
  default a quarter of the epoch and at most 1 s, because a sample averages the preceding
  1/6-1 s);
- `gpu/{i}/memory_used_mib` and `gpu/{i}/memory_used_percent`: the **maximum** memory.used
  over the whole epoch (memory.used is an instantaneous reading, so nothing is dropped);
  it includes what TensorFlow's allocator reserved, which without memory growth is most of
  the GPU from the start;
- `gpu/{i}/tf_peak_memory_mib`: `tf.config.experimental.get_memory_info('GPU:j')['peak']`,
  the peak TensorFlow itself allocated during the epoch (reset at each epoch begin with
  `reset_memory_stats` where the TF version has it; left out where TF cannot say). j is
  the TensorFlow GPU of nvidia-smi's GPU i, through CUDA_VISIBLE_DEVICES (the CUDA images
  set CUDA_DEVICE_ORDER=PCI_BUS_ID, so both count in PCI order). On the other Keras
  backends (KERAS_BACKEND) the same figure is `gpu/{i}/jax_peak_memory_mib` (JAX's
  `Device.memory_stats()["peak_bytes_in_use"]`, the run's peak: JAX cannot reset it) or
  `gpu/{i}/torch_peak_memory_mib` (`torch.cuda.max_memory_allocated`, reset per epoch); the
  scalars are written with tensorboard's own writer there (tb_writer: a few scalars need no
  TensorFlow import, though the JAX and PyTorch images carry a CPU-only one for tf.data).

A reading nvidia-smi cannot give is missing, never 0: on a MIG-enabled GPU and on vGPUs
`utilization.gpu` reads `[N/A]`, so utilization_percent is None in `epochs` and report.json
and no utilisation scalar is written (memory still is). On a GPU that shares the system's RAM
(GB10) the memory is what reads N/A: memory_used/total stay None, no memory scalar is written,
and the record's `memory_note` says "unified memory: not reported by the driver"
(gpu_sampler.MEMORY_NOT_REPORTED); the framework's own peak is still written. Where CUDA_VISIBLE_DEVICES names GPUs
by UUID or MIG slice, or NVIDIA_VISIBLE_DEVICES gives the container a MIG slice, nvidia-smi's
per-GPU indexes cannot be matched to CUDA's devices (`unmappable`): every GPU is sampled, the
report says why (`mapping_note`), and the framework's peak, which needs the match, is left out.

Without nvidia-smi, or when it lists no GPU, it logs "GpuMonitor: no nvidia-smi / no GPU:
nothing to sample" once and does nothing else. nvidia-smi is stopped on train end, when
the monitor is used as a context manager and left (`with GpuMonitor(d) as m: fit(...)`,
which also covers an exception out of fit(), where Keras calls no on_train_end), and at
interpreter exit (gpu_sampler.stop_all).

Importing this module does not import TensorFlow: the Keras base class is looked up the
first time `GpuMonitor` is used (Keras 3 for TF >= 2.16, tf.keras 2 for TF 2.14/2.15, as
the smoke training does), and `monitor_class(keras)` builds it on a given Keras.
"""

from __future__ import annotations

import os
import re
import sys
import time

from . import gpu_sampler, tb_writer

NO_GPU_LINE = "GpuMonitor: no nvidia-smi / no GPU: nothing to sample"
STARTUP_TIMEOUT_S = 10.0  # nvidia-smi without persistence mode can take seconds to print its first sample
MIB = 1024 * 1024


def log(message: str) -> None:
    print(f"[kerasenv] {message}", file=sys.stderr, flush=True)


# The writer lives in tb_writer (tf.summary on TensorFlow, tensorboard's own writer on JAX
# and PyTorch, which need no TensorFlow import for it); the name stays importable from here.
TfSummaryWriter = tb_writer.TfSummaryWriter


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def unmappable(environ=os.environ) -> str | None:
    """Why nvidia-smi's GPU indexes cannot be matched to CUDA's device numbers here (None
    when they can). CUDA_VISIBLE_DEVICES may name devices by UUID instead of index: a GPU
    (`GPU-<uuid>`, or a prefix of one) or a MIG slice (`MIG-<uuid>`; `MIG-GPU-<uuid>/<gi>/<ci>`
    before driver R470); NVIDIA_VISIBLE_DEVICES, which the container runtime reads, may give a
    container MIG slices (`MIG-<uuid>` or `<gpu>:<mig>`). nvidia-smi's --query-gpu rows stay
    one per physical GPU (NVIDIA's MIG user guide), so an index taken from such a list would
    name the wrong device or the whole card: the callers then sample every GPU instead."""
    for item in _items(environ.get("CUDA_VISIBLE_DEVICES") or ""):
        if item.isdigit():
            continue
        if item.upper().startswith(("GPU-", "MIG-")):
            return (f"CUDA_VISIBLE_DEVICES names {'a MIG slice' if item.upper().startswith('MIG-') else 'a GPU'} "
                    f"by UUID ({item[:12]}...), which nvidia-smi's per-GPU indexes cannot be matched to")
        break  # CUDA stops at an invalid entry (-1, a typo): the devices before it are the visible ones
    for item in _items(environ.get("NVIDIA_VISIBLE_DEVICES") or ""):
        if item.upper().startswith("MIG-") or re.fullmatch(r"\d+:\d+", item):
            return (f"NVIDIA_VISIBLE_DEVICES gives this container a MIG slice ({item[:12]}...), and nvidia-smi's rows "
                    "are per physical GPU")
    return None


def visible_indexes(environ=os.environ) -> list[int] | None:
    """The nvidia-smi indexes CUDA numbers 0, 1, ... when CUDA_VISIBLE_DEVICES lists indexes
    (up to its first invalid entry, as CUDA reads it); None when it is unset (CUDA's numbers
    are nvidia-smi's; the images set CUDA_DEVICE_ORDER=PCI_BUS_ID so both count in PCI order).
    Call unmappable() first: UUIDs are not indexes."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    found = []
    for item in _items(visible):
        if not item.isdigit():
            break
        found.append(int(item))
    return found


def cuda_ordinal(smi_index: int, environ=os.environ) -> int | None:
    """The CUDA device number of nvidia-smi's GPU `smi_index`: the same number unless
    CUDA_VISIBLE_DEVICES renumbers (position in its list); None when it hides the GPU or when
    the two cannot be matched here (unmappable: UUIDs, MIG slices)."""
    if unmappable(environ):
        return None
    numbers = visible_indexes(environ)
    if numbers is None:
        return smi_index
    return numbers.index(smi_index) if smi_index in numbers else None


def smi_index(ordinal: int, environ=os.environ) -> int | None:
    """nvidia-smi's index of CUDA device `ordinal` (the inverse of cuda_ordinal); None when
    there is no such device or the two cannot be matched here."""
    if unmappable(environ):
        return None
    numbers = visible_indexes(environ)
    if numbers is None:
        return ordinal
    return numbers[ordinal] if 0 <= ordinal < len(numbers) else None


def smi_indexes_of_ordinals(ordinals, environ=os.environ) -> list[int] | None:
    """nvidia-smi's indexes of CUDA device numbers (JAX's and PyTorch's GPU ids), for
    `gpus=`; None (every GPU) when one cannot be matched."""
    found = []
    for ordinal in ordinals:
        index = smi_index(int(ordinal), environ)
        if index is None:
            return None
        found.append(index)
    return found or None


def smi_indexes(physical_gpus, environ=os.environ) -> list[int] | None:
    """nvidia-smi's indexes of TensorFlow's physical GPUs (`/physical_device:GPU:N`, N the
    CUDA device number), for `gpus=`: only the GPUs the run trains on. None (every GPU)
    when one cannot be matched."""
    found = []
    for device in physical_gpus:
        try:
            index = smi_index(int(device.name.rsplit(":", 1)[1]), environ)
        except (AttributeError, ValueError):
            return None
        if index is None:
            return None
        found.append(index)
    return found or None


class TfMemory:
    """TensorFlow's own allocator statistics per nvidia-smi GPU index; every call guarded
    (TF versions without reset_memory_stats, devices that do not support it)."""

    scalar_name = "tf_peak_memory_mib"

    def __init__(self) -> None:
        self._tf = None

    def _import(self):
        if self._tf is None:
            try:
                import tensorflow as tf
            except ImportError:
                self._tf = False
            else:
                self._tf = tf
        return self._tf or None

    def device(self, smi_index: int) -> str | None:
        tf = self._import()
        ordinal = cuda_ordinal(smi_index)
        if tf is None or ordinal is None:
            return None
        try:
            physical = [int(d.name.rsplit(":", 1)[1]) for d in tf.config.get_visible_devices("GPU")]
            logical = tf.config.list_logical_devices("GPU")
        except Exception:  # noqa: BLE001 - any TF failure: no TF figure, not a crash
            return None
        if ordinal not in physical or len(logical) != len(physical):  # virtual GPUs: no 1:1 mapping
            return None
        return f"GPU:{physical.index(ordinal)}"

    def peak_mib(self, smi_index: int) -> float | None:
        tf, device = self._import(), self.device(smi_index)
        if tf is None or device is None:
            return None
        try:
            return tf.config.experimental.get_memory_info(device)["peak"] / MIB
        except Exception:  # noqa: BLE001 - ValueError on devices without statistics, old TF
            return None

    def reset(self, smi_index: int) -> None:
        tf, device = self._import(), self.device(smi_index)
        reset = getattr(getattr(tf, "config", None), "experimental", None) if tf is not None else None
        if device is None or not hasattr(reset, "reset_memory_stats"):
            return
        try:
            reset.reset_memory_stats(device)
        except Exception:  # noqa: BLE001, S110 - unsupported on this device or version
            pass


class JaxMemory:
    """JAX's allocator statistics (`Device.memory_stats()`: peak_bytes_in_use). JAX has no
    reset of the peak, so each epoch reports the peak so far in the run."""

    scalar_name = "jax_peak_memory_mib"

    def _device(self, smi_index: int):
        ordinal = cuda_ordinal(smi_index)
        if ordinal is None:
            return None
        try:
            import jax

            return next((d for d in jax.devices("gpu") if d.id == ordinal), None)
        except Exception:  # noqa: BLE001 - no JAX, or no GPU backend: no figure
            return None

    def peak_mib(self, smi_index: int) -> float | None:
        device = self._device(smi_index)
        try:
            stats = device.memory_stats() if device is not None else None
            return stats["peak_bytes_in_use"] / MIB if stats and "peak_bytes_in_use" in stats else None
        except Exception:  # noqa: BLE001 - a device without statistics
            return None

    def reset(self, smi_index: int) -> None:
        return None


class TorchMemory:
    """PyTorch's caching allocator: `torch.cuda.max_memory_allocated(i)`, reset per epoch."""

    scalar_name = "torch_peak_memory_mib"

    def _ordinal(self, smi_index: int):
        ordinal = cuda_ordinal(smi_index)
        try:
            import torch

            if ordinal is None or not torch.cuda.is_available() or ordinal >= torch.cuda.device_count():
                return None, None
        except Exception:  # noqa: BLE001 - no torch: no figure
            return None, None
        return torch, ordinal

    def peak_mib(self, smi_index: int) -> float | None:
        torch, ordinal = self._ordinal(smi_index)
        if torch is None:
            return None
        try:
            return torch.cuda.max_memory_allocated(ordinal) / MIB
        except Exception:  # noqa: BLE001
            return None

    def reset(self, smi_index: int) -> None:
        torch, ordinal = self._ordinal(smi_index)
        if torch is not None:
            try:
                torch.cuda.reset_peak_memory_stats(ordinal)
            except Exception:  # noqa: BLE001, S110 - unsupported: the peak since the start
                pass


def framework_memory(backend_name: str | None = None):
    """The allocator-peak reader of the Keras backend (KERAS_BACKEND) this process trains on."""
    if backend_name is None:
        from . import backends

        backend_name = backends.name()
    return {"jax": JaxMemory, "torch": TorchMemory}.get(backend_name, TfMemory)()


class GpuMonitorLogic:
    """The callback's behaviour, Keras-free; GpuMonitor mixes it into keras' Callback.

    Injectable for tests: `writer` (an object with scalar(name, value, step), optional
    flush()/close()), `clock` (epoch seconds, the sampler's timestamps' clock),
    `sampler_factory` (like gpu_sampler.NvidiaSmiSampler), `tf_memory` (peak_mib(i),
    reset(i)), `fields` (the --query-gpu list; must include timestamp and utilization.gpu)."""

    def __init__(self, log_dir: str, interval_ms: int = gpu_sampler.DEFAULT_INTERVAL_MS,
                 settle_s: float | None = None, gpus: list[int] | None = None, *,
                 writer=None, clock=time.time, sampler_factory=gpu_sampler.NvidiaSmiSampler,
                 tf_memory=None, fields: tuple[str, ...] = gpu_sampler.QUERY_FIELDS) -> None:
        super().__init__()
        self.log_dir = log_dir
        self.interval_ms, self.settle_s = interval_ms, settle_s
        self.gpus = list(gpus) if gpus is not None else None
        self.fields = tuple(fields)
        self._writer = writer
        self._clock = clock
        self._sampler_factory = sampler_factory
        self._tf_memory = tf_memory if tf_memory is not None else framework_memory()
        self._sampler = None
        self._epoch_start: float | None = None
        self.epochs: list[dict] = []
        self.sampled = False
        self.reason: str | None = None
        self.mapping_note: str | None = None  # why every GPU is sampled (unmappable)
        self.scalars_error: str | None = None  # why no TensorBoard scalar could be written
        self.stderr = ""

    # -- Keras hooks ---------------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self.stop()  # a second fit() with the same monitor starts afresh
        self.epochs, self.sampled, self.reason, self.scalars_error = [], False, None, None
        self.mapping_note = unmappable() if self.gpus is None else None
        if self.mapping_note:
            log(f"GpuMonitor: {self.mapping_note}: sampling every GPU nvidia-smi lists")
        sampler = self._sampler_factory(indexes=self.gpus, interval_ms=self.interval_ms, fields=self.fields)
        if not sampler.available:
            return self._nothing_to_sample("no nvidia-smi on PATH")
        try:
            sampler.start()
        except OSError as exc:
            return self._nothing_to_sample(f"nvidia-smi did not start: {exc}")
        self._sampler = sampler
        sampler.wait_first_line(STARTUP_TIMEOUT_S)
        if not sampler.running and not sampler.snapshot().samples:
            sampler.stop()
            said = (sampler.stderr.strip() or "\n".join(sampler._lines).strip()).splitlines()
            self._sampler = None
            return self._nothing_to_sample("nvidia-smi exited without a GPU sample"
                                           + (f": {said[0][:200]}" if said else ""))
        self.sampled = True
        if self._writer is None:
            self._writer = tb_writer.scalar_writer(os.path.join(self.log_dir, "gpu"))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self._clock()
        if self.sampled:
            for index in self._indexes():
                self._tf_memory.reset(index)

    def on_epoch_end(self, epoch, logs=None):
        if not self.sampled or self._sampler is None:
            return
        end = self._clock()
        start = self._epoch_start if self._epoch_start is not None else end
        record = self.epoch_record(self._sampler.snapshot().samples, epoch, start, end)
        self.epochs.append(record)
        if self.scalars_error is not None:
            return
        try:
            for gpu in record["gpus"]:
                # A reading nvidia-smi could not give (utilization.gpu `[N/A]` on a MIG slice or
                # a vGPU) is None here and gets no scalar: TensorBoard shows a gap, not a 0.
                for name in ("utilization_percent", "memory_used_percent", "memory_used_mib", self._peak_name):
                    if gpu[name] is not None:
                        self._writer.scalar(f"gpu/{gpu['index']}/{name}", float(gpu[name]), step=epoch)
            if hasattr(self._writer, "flush"):
                self._writer.flush()
        except ImportError as exc:  # neither TensorFlow nor tensorboard in this Python (a bare venv)
            self.scalars_error = (f"no TensorBoard writer in this Python ({exc}): the figures are in the "
                                  "report only (pip install tensorboard for the scalars)")
            log(f"GpuMonitor: {self.scalars_error}")

    def on_train_end(self, logs=None):
        self.stop()

    # -- context manager: nvidia-smi never outlives the block, exceptions included --------
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()
        return False

    # -- the numbers ----------------------------------------------------------------------
    def epoch_record(self, samples: list, epoch: int, start: float, end: float) -> dict:
        """Per GPU: steady-state utilisation, peak memory.used over the whole epoch, TF's peak."""
        gpus = []
        for index in self._indexes(samples):
            util = gpu_sampler.steady_state(samples, start, end, index=index, settle_s=self.settle_s)
            memory = gpu_sampler.steady_state(samples, start, end, index=index, settle_s=0)
            used, total = memory["memory_used_mib_max"], memory["memory_total_mib"]
            # Samples came, but none with the GPU's memory: the driver has none to report (GB10).
            unreported = "memory.total" in self.fields and memory["samples"] and total is None
            gpus.append({
                "index": index, "samples": util["samples"], "memory_samples": memory["samples"],
                "utilization_percent": util["utilization_gpu_mean"],
                "utilization_min_percent": util["utilization_gpu_min"],
                "utilization_max_percent": util["utilization_gpu_max"],
                "memory_used_mib": used, "memory_total_mib": total,
                "memory_used_percent": 100.0 * used / total if used is not None and total else None,
                self._peak_name: self._tf_memory.peak_mib(index),
                "settle_s": util["settle_s"], "note": util.get("note"),
                "memory_note": f"{gpu_sampler.MEMORY_NOT_REPORTED} ({gpu_sampler.MEMORY_NOT_REPORTED_WHY})"
                if unreported else None})
        return {"epoch": epoch + 1, "start": start, "end": end, "seconds": end - start, "gpus": gpus}

    @property
    def _peak_name(self) -> str:
        """The framework's peak scalar: tf_/jax_/torch_peak_memory_mib."""
        return getattr(self._tf_memory, "scalar_name", "tf_peak_memory_mib")

    def _indexes(self, samples: list | None = None) -> list[int]:
        if self.gpus is not None:
            return list(self.gpus)
        if samples is None:
            samples = self._sampler.snapshot().samples if self._sampler is not None else []
        found = sorted({s.index for s in samples if s.index is not None})
        return found or [0]  # a sampler without samples in this epoch still reports GPU 0's absence

    def report(self) -> dict:
        """For report.json: what was sampled per epoch, or why nothing was."""
        if not self.sampled:
            return {"sampled": False, "reason": self.reason or "the monitor did not run"}
        report = {"sampled": True, "interval_ms": self.interval_ms, "settle_s": self.settle_s,
                  "query": ",".join(self.fields), "epochs": self.epochs,
                  "scalars": [f"gpu/{{i}}/{n}" for n in ("utilization_percent", "memory_used_percent",
                                                         "memory_used_mib", self._peak_name)],
                  "log_dir": os.path.join(self.log_dir, "gpu")}
        if self.mapping_note:
            report["mapping_note"] = self.mapping_note
        if self.scalars_error:
            report["scalars"], report["scalars_error"] = [], self.scalars_error
        return report

    def stop(self) -> None:
        """End nvidia-smi (idempotent) and close the event file."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
            self.stderr = sampler.stderr
        if self._writer is not None and hasattr(self._writer, "close") and self.sampled and not self.scalars_error:
            self._writer.close()

    def _nothing_to_sample(self, reason: str) -> None:
        self.reason = reason
        log(f"{NO_GPU_LINE} ({reason})")


def keras_for_tf():
    """The Keras the installed TensorFlow trains with: Keras 3 from TF 2.16, else tf.keras;
    Keras 3 itself on the JAX and PyTorch backends (their TensorFlow, a CPU-only one for tf.data,
    does not train)."""
    import os as _os

    if _os.environ.get("KERAS_BACKEND", "tensorflow") in ("jax", "torch"):
        try:
            import keras
        except ImportError:
            return None
        return keras
    try:
        import tensorflow as tf
    except ImportError:
        try:
            import keras
        except ImportError:
            return None
        return keras
    major_minor = tuple(int(p) for p in tf.__version__.split(".")[:2])
    if major_minor >= (2, 16):
        import keras

        return keras
    return tf.keras


class _NoKeras:
    """The base when neither TensorFlow nor Keras is importable (the unit tests' host)."""

    def __init__(self) -> None:
        self.model = None
        self.params = {}

    def set_model(self, model) -> None:
        self.model = model

    def set_params(self, params) -> None:
        self.params = params


_CLASSES: dict = {}


def monitor_class(keras=None):
    """GpuMonitor on `keras.callbacks.Callback` (default: keras_for_tf())."""
    keras = keras if keras is not None else keras_for_tf()
    base = keras.callbacks.Callback if keras is not None else _NoKeras
    if base not in _CLASSES:
        _CLASSES[base] = type("GpuMonitor", (GpuMonitorLogic, base), {
            "__doc__": GpuMonitorLogic.__doc__, "__module__": __name__})
    return _CLASSES[base]


def __getattr__(name: str):
    if name == "GpuMonitor":
        return monitor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

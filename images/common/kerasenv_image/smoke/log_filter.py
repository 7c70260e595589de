"""What of TensorFlow's C++ log reaches the terminal: its known start-up noise is hidden.

TF prints a dozen lines on every healthy start (some at E level), and users take them for
the failure. NOISE lists them, one entry each, with why it is noise and the upstream issue
where there is one. Only the terminal copy is filtered: StderrTee still keeps every line for
the error classification (report.json's error.tf_log), and `--verbose` shows them all.

A line is hidden only if an entry matches it; everything else is shown, and KEEP wins over
NOISE, so a warning that matters (a GPU library that does not load, PTX/ptxas/JIT, out of
memory) is never hidden, whatever a too-broad entry would say. F (fatal) lines always show.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

# absl's two formats, "E0000 00:00:1748720218.610720  27 cuda_dnn.cc:529] ..." (TF >= 2.16)
# and "2026-12-01 12:00:00.123456: E tensorflow/.../x.cc:12] ..." (TF <= 2.15).
TF_PREFIX = re.compile(r"^(?:([IWEF])\d{4} \d\d:\d\d:[\d.]+\s+\d+ |\d{4}-\d\d-\d\d [\d:.]+: ([IWEF]) )\S+\] ")


@dataclass(frozen=True)
class Noise:
    name: str
    pattern: re.Pattern
    why: str
    tf_line: bool = True  # the pattern must follow a TF log prefix (never a Python/[smoke] line)
    continuation: re.Pattern | None = None  # an unprefixed next line that belongs to it
    only_without_gpu_device: bool = False  # noise only in a container given no GPU at all


NOISE: tuple[Noise, ...] = (
    Noise("absl-preinit", re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called "
                                     r"are written to STDERR$"),
          "absl says where its early lines go (stderr, where they go anyway); TF >= 2.16 prints "
          "it once per shared library that logs before absl is set up", tf_line=False),
    Noise("onednn-opts", re.compile(r"oneDNN custom operations are on\."),
          "informational (I): oneDNN is TF's default on x86 CPUs since 2.9; it only says that "
          "results may differ by round-off (TF_ENABLE_ONEDNN_OPTS=0 turns oneDNN off)"),
    Noise("cpu-feature-guard", re.compile(r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized"),
          "informational (I): the pip wheel is built for a baseline CPU and names the extra "
          "instructions this CPU has; nothing to do short of building TF from source",
          continuation=re.compile(r"^To enable (?:the following instructions|them)\b.*"
                                  r"rebuild TensorFlow with the appropriate compiler flags\.?$")),
    Noise("factory-registration", re.compile(r"Unable to register cu(?:DNN|FFT|BLAS) factory: Attempting to "
                                             r"register factory for plugin cu(?:DNN|FFT|BLAS) when one has "
                                             r"already been registered"),
          "E level but harmless: XLA's CUDA plugins register twice because TF links them into two "
          "shared libraries; the GPU works (tensorflow/tensorflow#62075, openxla/xla#20803)"),
    Noise("computation-placer", re.compile(r"computation placer already registered\. Please check linkage"),
          "the same double linkage as the factory lines, for XLA's computation placer "
          "(tensorflow/tensorflow#62075)"),
    Noise("tf-trt", re.compile(r"TF-TRT Warning: Could not find TensorRT"),
          "the images carry no TensorRT on purpose (README: 'No TensorRT'); TF-TRT is optional"),
    Noise("numa-node", re.compile(r"(?:successful NUMA node read from SysFS had negative value|"
                                  r"could not open file to read NUMA node)"),
          "informational (I), once per GPU: the PCI device reports no NUMA node (-1, common in "
          "VMs and WSL) and TF uses node 0 (tensorflow/tensorflow#42738, #58428)"),
    Noise("profiler-session", re.compile(r"(?:profiler_session\.cc:\d+\] Profiler session (?:initializing|started|"
                                         r"collecting data|tear down)\.|save_profile\.cc:\d+\] Collecting XSpace "
                                         r"to repository: )"),
          "informational (I), --profile only: the profiler starting, stopping and saving; the "
          "smoke's summary names the file it wrote (profile: steps ... in <path>)"),
    Noise("cuinit-no-device", re.compile(r"failed call to cuInit: .*(?:UNKNOWN ERROR \(303\)|"
                                         r"CUDA_ERROR_NO_DEVICE|no CUDA-capable device)"),
          "only in a container started without any GPU: the smoke run's own WARNING already says "
          "'no GPU visible (the container was started without a GPU)'. With /dev/nvidia* present "
          "the same line explains why TF cannot use the GPU, so it is shown there",
          only_without_gpu_device=True),
)

# Shown even when an entry above matches: what explains a GPU that is not used, a slow or
# failing JIT, or an out of memory.
KEEP = re.compile(
    r"Could not load dynamic library|Cannot dlopen some GPU libraries|Skipping registering GPU devices|"
    r"\bPTX\b|ptxas|\bJIT\b|jit.compil|CUDA_ERROR_UNSUPPORTED_PTX_VERSION|"
    r"out of memory|\bOOM\b|ResourceExhausted|RESOURCE_EXHAUSTED|ran out of memory", re.IGNORECASE)


def container_has_gpu_device() -> bool:
    """What environment.no_gpu_reason() calls 'started without a GPU' is the opposite of this."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


class LogFilter:
    """Decides line by line what is echoed; counts what it hid (`hidden`)."""

    def __init__(self, gpu_device: bool | None = None) -> None:
        self.gpu_device = container_has_gpu_device() if gpu_device is None else gpu_device
        self.hidden = 0
        self.hidden_by: dict[str, int] = {}
        self._continues: re.Pattern | None = None  # the hidden line before may go on here

    def noise(self, line: str) -> Noise | None:
        """The entry that makes `line` noise, else None."""
        continues, self._continues = self._continues, None
        text = line.rstrip("\r\n")
        if continues is not None and continues.match(text):
            return _CONTINUATION
        prefix = TF_PREFIX.match(text)
        level = (prefix.group(1) or prefix.group(2)) if prefix else None
        if level == "F" or KEEP.search(text):
            return None
        for entry in NOISE:
            if entry.tf_line and prefix is None:
                continue
            if entry.only_without_gpu_device and self.gpu_device:
                continue
            if entry.pattern.search(text):
                self._continues = entry.continuation
                return entry
        return None

    def show(self, line: str) -> bool:
        entry = self.noise(line)
        if entry is None:
            return True
        self.hidden += 1
        self.hidden_by[entry.name] = self.hidden_by.get(entry.name, 0) + 1
        return False


_CONTINUATION = Noise("continuation", re.compile(""), "the second line of a hidden multi-line message")


def hidden_note(hidden: int) -> str | None:
    """The one line that says the filter was at work (None when it hid nothing)."""
    if not hidden:
        return None
    return f"{hidden} TensorFlow start-up log line{'s' if hidden != 1 else ''} hidden; --verbose shows them"

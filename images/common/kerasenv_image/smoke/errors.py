"""Exit codes, the failures a run reports, and how TensorFlow's errors map onto them.

Every failure becomes a SmokeFailure with a documented `kind` and exit code, so the
report is always written and says what went wrong and how to fix it.
"""

from __future__ import annotations

import errno
import re

EXIT_UNEXPECTED = 1  # a bug of the smoke training itself (the report says so)
EXIT_OK, EXIT_USAGE, EXIT_NO_GPU, EXIT_TRAINING, EXIT_OOM, EXIT_OUTPUT = 0, 2, 3, 4, 5, 6
EXIT_GPU_RUNTIME = 7  # TensorFlow failed on the GPU stack: driver, PTX JIT, cuDNN, NCCL, XLA
EXIT_TF_RUNTIME = 8  # any other runtime error of the framework (TensorFlow, JAX, PyTorch)
EXIT_DISTRIBUTED = 9  # the processes of a multi-process run could not form the job, or lost one
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


class SmokeFailure(Exception):
    def __init__(self, exit_code: int, kind: str, message: str, fix: str = "",
                 tf_log: str | None = None) -> None:
        super().__init__(message)
        self.exit_code, self.kind, self.message, self.fix = exit_code, kind, message, fix
        self.tf_log = tf_log  # the first relevant TensorFlow log line, when one was seen


class Interrupted(BaseException):
    """SIGTERM/SIGINT. A BaseException, like KeyboardInterrupt: the handler raises it in
    whatever Python frame runs when the signal lands, and as an Exception it could be
    caught and re-raised as another error by an `except Exception` in TF or Keras (a
    `docker stop` once ended with exit 1 instead of 143)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(f"interrupted (exit {exit_code})")
        self.exit_code = exit_code


def is_disk_full(exc: BaseException) -> bool:
    text = str(exc)
    return getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or \
        "No space left on device" in text or "Disk quota exceeded" in text


def disk_full(exc: BaseException, output_dir: str) -> SmokeFailure:
    first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
    return SmokeFailure(EXIT_OUTPUT, "disk-full", f"no space left in {output_dir} while writing results ({first})",
                        "free space on the disk behind the runs directory, or pass --runs-dir on a larger disk")


# Known TensorFlow GPU-stack failures: (kind, pattern in the error or the TF log, fix).
# First match wins; each fix names its source.
GPU_RUNTIME_CLASSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("cudnn-autotune", re.compile(r"Autotuner could not find any supported configs|"
                                  r"__cudnn\$conv|DNN library initialization failed|CUDNN_STATUS_", re.I),
     "cuDNN could not run a convolution this build asks for: TF 2.21 with cuDNN 9.3/9.5 fails so under XLA "
     "(aws/deep-learning-containers#6418); use kerasenv:tf2.21-cuda12.9 (cuDNN 9.24), or pass --jit-compile off"),
    ("ptx-jit", re.compile(r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|unsupported toolchain|"
                           r"PTX (?:JIT|was compiled with an unsupported)", re.I),
     "the driver is too old to JIT-compile this TensorFlow's PTX: upgrade it to the image's "
     "io.kerasenv.min-driver-ptx-jit label (`kerasenv doctor` names it)"),
    ("no-kernel-image", re.compile(r"no kernel image is available|device kernel image is invalid|"
                                   r"CUDA_ERROR_NO_BINARY_FOR_GPU", re.I),
     "this TensorFlow build has no kernels for this GPU: `kerasenv doctor` names a variant that has"),
    ("xla-toolchain", re.compile(r"libdevice not found|Can't find libdevice|Couldn't invoke ptxas|"
                                 r"ptxas (?:not found|fatal)|No PTX compilation provider", re.I),
     "XLA cannot find ptxas/libdevice: keep the image's XLA_FLAGS (--xla_gpu_cuda_data_dir), "
     "or pass --jit-compile off"),
    ("nccl", re.compile(r"\bNCCL\b|nccl[A-Z]\w*Error", re.I),
     "NCCL failed between GPUs: run with --shm-size=2g (kerasenv does), and NCCL_DEBUG=INFO to see why; "
     "NCCL_P2P_DISABLE=1 works around broken peer-to-peer links"),
    ("cuda-driver", re.compile(r"CUDA_ERROR_\w+|cuInit|CUDA driver version is insufficient|"
                               r"failed call to cu\w+", re.I),
     "the CUDA driver refused: run `kerasenv doctor` on the host (driver version against the image's minimum)"),
)


def classify_tf_error(exc: BaseException, tf_log: str | None = None) -> SmokeFailure:
    """A TensorFlow runtime error (tf.errors.OpError) as a SmokeFailure with its kind."""
    return classify_runtime_error(exc, tf_log)


# The runtime-error kind of each framework (exit 8, EXIT_TF_RUNTIME, on every backend).
RUNTIME_KINDS = {"TensorFlow": "tensorflow-runtime", "JAX": "jax-runtime", "PyTorch": "torch-runtime"}


def classify_runtime_error(exc: BaseException, tf_log: str | None = None,
                           framework: str = "TensorFlow") -> SmokeFailure:
    """A framework's runtime error as a SmokeFailure: a known GPU-stack failure (exit 7,
    the patterns above: CUDA, cuDNN, PTX, NCCL and XLA say the same on every backend), else
    `<framework>-runtime` (exit 8)."""
    name = type(exc).__name__
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), name)[:300]
    haystack = f"{text}\n{tf_log or ''}"
    for kind, pattern, fix in GPU_RUNTIME_CLASSES:
        if pattern.search(haystack):
            return SmokeFailure(EXIT_GPU_RUNTIME, kind, f"{framework} {name} on the GPU stack ({kind}): {first}",
                                fix, tf_log=tf_log)
    log_name = "the TensorFlow log" if framework == "TensorFlow" else f"the {framework} log"
    return SmokeFailure(EXIT_TF_RUNTIME, RUNTIME_KINDS.get(framework, "runtime"), f"{framework} {name}: {first}",
                        f"see {log_name} above and `tf_log` in report.json; `kerasenv doctor` checks the host",
                        tf_log=tf_log)

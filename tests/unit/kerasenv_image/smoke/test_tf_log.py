"""TensorFlow's log, kept for the smoke's report (kerasenv_image.smoke.tf_log)."""

from __future__ import annotations

import subprocess
import sys

from kerasenv_image.smoke import tf_log


def test_the_first_error_line_that_is_not_noise_is_the_relevant_one():
    lines = [
        "2026-12-01 12:00:00.1: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:477] "
        "Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT",
        "E0000 00:00:1.0 27 cuda_executor.cc:1] failed call to cuInit: UNKNOWN ERROR (303)",
        "W0000 00:00:1.0 27 gpu_device.cc:2] Cannot dlopen some GPU libraries.",
        "E0000 00:00:1.0 27 cuda_dnn.cc:3] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
        "plain text",
    ]
    assert "CUDNN_STATUS_INTERNAL_ERROR" in tf_log.relevant_line(lines)
    assert "Cannot dlopen" in tf_log.relevant_line(lines[:3])
    assert tf_log.relevant_line(lines[:2] + ["plain text"]) is None


def test_the_tee_shows_and_keeps_what_is_written_to_fd_2():
    code = (
        "import os, sys\n"
        "from kerasenv_image.smoke.tf_log import StderrTee\n"
        "t = StderrTee().start()\n"
        "os.write(2, b'E0000 00:00:1.0 1 x.cc:1] boom from C++\\n')\n"
        "print('python line', file=sys.stderr)\n"
        "during = t.relevant()  # while the tee runs: it waits for the copy to catch up\n"
        "t.stop()\n"
        "print(repr(during), repr(t.relevant()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "boom from C++" in proc.stderr and "python line" in proc.stderr  # still shown
    assert proc.stdout.count("boom from C++") == 2  # and kept, during the run and after
    assert "kerasenv-stderr-tee-sync" not in proc.stderr

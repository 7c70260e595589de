"""The default command's terminal output is ours on every backend: TensorFlow's known start-up
noise is hidden (images/common/kerasenv_image/smoke/log_filter.py) and Keras warns about nothing;
`--verbose` shows TensorFlow's whole log. JAX and PyTorch images carry tensorflow-cpu for Keras'
TensorBoard callback (the smoke's epoch scalars), so its start-up lines are hidden there too."""

from __future__ import annotations

import re

import pytest

from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, not built here

# One phrase per noise entry of log_filter.NOISE (and the continuation line).
NOISE = ("All log messages before absl::InitializeLog", "oneDNN custom operations are on",
         "cpu_feature_guard", "To enable the following instructions", "Unable to register cu",
         "computation placer already registered", "TF-TRT Warning", "NUMA node")


def host_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return f" {flag}" in f.read()
    except OSError:
        return False


@pytest.fixture(scope="module")
def default_run(default_command_run):
    """The image's default command, offline (its one run, shared: conftest.py)."""
    return default_command_run.code, default_command_run.out, default_command_run.err


def test_the_default_command_shows_the_summary_and_no_tensorflow_noise(default_run, target):
    code, _, err = default_run
    assert code == 0, err[-3000:]
    assert "[smoke] OK (exit 0)" in err and "[smoke]   report: " in err
    assert f"({target.variant.id})" in err
    shown = [phrase for phrase in NOISE if phrase in err]
    assert shown == [], err[-3000:]
    if target.variant.family == "cuda":  # no GPU given: our own line says so, not cuInit's
        assert "failed call to cuInit" not in err
        assert "[smoke] WARNING: no GPU visible (the container was started without a GPU" in err


def test_the_default_command_has_no_python_warning(default_run):
    _, out, err = default_run
    # Python's warnings format, "path.py:74: UserWarning: ..." (fit(shuffle=True) on a Dataset was one)
    assert "UserWarning" not in err + out, err[-3000:]
    assert not re.search(r"^\S+\.py:\d+: \w*Warning: ", err, re.MULTILINE), err[-3000:]


def tensorflow_only(target) -> None:
    """--verbose runs the smoke a second time: on TF images only, to keep CI short. The filter is
    the same code on every backend, and JAX and PyTorch images hide TensorFlow's start-up lines
    too (the hidden-line count below runs on them)."""
    if target.variant.backend != "tensorflow":
        pytest.skip(f"--verbose: checked on TF images (this image trains on {target.variant.backend}; "
                    "its hidden-line count is checked)")


def test_a_hidden_line_count_says_how_to_see_them(default_run, target):
    """Every cpu/cuda image has TensorFlow: the framework, or tensorflow-cpu beside JAX/PyTorch,
    which the smoke's Keras TensorBoard callback imports."""
    assert target.variant.keras_tools.has_tensorflow(target.variant)
    _, _, err = default_run
    assert "TensorFlow start-up log lines hidden; --verbose shows them" in err


def test_verbose_shows_tensorflow_s_start_up_lines(docker, target, default_run):
    """--verbose shows at least the lines the default run hid. Which lines TensorFlow prints
    depends on the CPU, so none is required by name: oneDNN's notice comes only where TF turns
    oneDNN on by default (seen on Intel CPUs with AVX-512, not on an AMD EPYC without it), and
    cpu_feature_guard's only where the CPU has instructions beyond the wheel's baseline."""
    tensorflow_only(target)
    hidden = re.search(r"(\d+) TensorFlow start-up log lines? hidden", default_run[2])
    assert hidden, default_run[2][-3000:]
    code, _, err = run_once(docker, target.ref, ["python", "/opt/kerasenv/smoke_train.py", "--verbose"],
                            network_mode="none", shm_size="1g")
    assert code == 0, err[-3000:]
    shown = [line for line in err.splitlines() if line.strip() and not line.startswith("[smoke]")]
    assert len(shown) >= int(hidden.group(1)), err[-3000:]
    if host_has("avx2"):  # cpu_feature_guard names the instructions beyond the wheel's baseline
        assert ("cpu_feature_guard" in err and "To enable the following instructions" in err) or \
            "oneDNN custom operations are on" in err, err[-3000:]
    assert "lines hidden" not in err
    assert "UserWarning" not in err

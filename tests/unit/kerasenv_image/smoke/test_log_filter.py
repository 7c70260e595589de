"""The in-image log filter (kerasenv_image.smoke.log_filter): real TensorFlow stderr in,
what the terminal shows out. Fixtures: tests/fixtures/tf-logs/ (SOURCES.md says where each
one comes from)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kerasenv_image.smoke import log_filter, tf_log

from ...conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "tf-logs"


def lines_of(name: str) -> list[str]:
    return [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("# ")]


def shown(lines: list[str], gpu_device: bool = False) -> tuple[list[str], log_filter.LogFilter]:
    f = log_filter.LogFilter(gpu_device=gpu_device)
    return [line for line in lines if f.show(line)], f


@pytest.mark.parametrize("name, hidden", [
    ("tf2.21-cpu.default-command.stderr", 6),
    ("tf2.15-cuda12.2.no-gpu.default-command.stderr", 7),
    ("tf2.21-cuda12.9.no-gpu.default-command.stderr", 7),
])
def test_a_default_run_shows_our_lines_and_python_s_but_no_tensorflow_start_up_noise(name, hidden):
    lines = lines_of(name)
    out, f = shown(lines)
    # What is left is ours ([smoke]) and Python's (the fixtures predate the shuffle=False fix,
    # so Keras 3's UserWarning is in them: the filter does not hide Python warnings).
    assert [line for line in out if not line.startswith("[smoke]")] == [
        line for line in lines if "UserWarning" in line or line.startswith("  self.data_adapter")]
    assert [line for line in lines if line.startswith("[smoke]")] == [
        line for line in out if line.startswith("[smoke]")]
    assert f.hidden == hidden == len(lines) - len(out)


def test_the_counts_say_which_entry_hid_what():
    _, f = shown(lines_of("tf2.15-cuda12.2.no-gpu.default-command.stderr"))
    assert f.hidden_by == {"onednn-opts": 1, "factory-registration": 3, "cpu-feature-guard": 1,
                           "continuation": 1, "tf-trt": 1}


def test_cuinit_is_hidden_only_in_a_container_without_any_gpu_device():
    cuinit = [line for line in lines_of("tf2.21-cuda12.9.no-gpu.default-command.stderr") if "cuInit" in line]
    assert len(cuinit) == 1
    assert shown(cuinit, gpu_device=False)[0] == []
    # With /dev/nvidia* there, the same line says why TF cannot use the GPU: shown.
    assert shown(cuinit, gpu_device=True)[0] == cuinit


def test_gpu_host_start_up_noise_is_hidden():
    lines = lines_of("gpu-host.noise.upstream.log")
    assert shown(lines)[0] == [] and shown(lines, gpu_device=True)[0] == []


@pytest.mark.parametrize("gpu_device", [False, True])
def test_warnings_that_matter_are_always_shown(gpu_device):
    for name in ("gpu-host.keep.upstream.log", "tf2.21-cuda12.9.missing-cusolver.dlopen.log"):
        lines = lines_of(name)
        assert shown(lines, gpu_device)[0] == lines, name


def test_keep_wins_over_a_noise_entry_and_f_lines_always_show():
    f = log_filter.LogFilter(gpu_device=False)
    # Made-up lines that a noise entry matches too: what KEEP names is never hidden.
    assert f.show("W0000 00:00:1.0 1 x.cc:1] TF-TRT Warning: Could not find TensorRT; ptxas too old")
    assert f.show("F0000 00:00:1.0 1 x.cc:1] computation placer already registered. Please check linkage")
    assert f.hidden == 0


def test_a_continuation_line_is_hidden_only_right_after_its_hidden_line():
    lines = lines_of("tf2.21-cpu.default-command.stderr")
    follow = next(line for line in lines if line.startswith("To enable the following instructions"))
    f = log_filter.LogFilter(gpu_device=False)
    assert f.show(follow)  # on its own it is not TensorFlow's: shown
    assert not f.show(next(line for line in lines if "cpu_feature_guard" in line))
    assert not f.show(follow)
    assert f.show(follow)


def test_noise_needs_tensorflow_s_log_prefix_except_absl_s_own_line():
    f = log_filter.LogFilter(gpu_device=False)
    assert f.show("print('oneDNN custom operations are on.')")  # e.g. a user's own output
    assert f.show("[smoke] Unable to register cuDNN factory: Attempting to register factory for plugin "
                  "cuDNN when one has already been registered")
    assert not f.show("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")


def test_every_noise_entry_says_why_and_links_upstream_where_it_is_a_tf_bug():
    for entry in log_filter.NOISE:
        assert len(entry.why) > 30, entry.name
    by_name = {e.name: e for e in log_filter.NOISE}
    assert "tensorflow/tensorflow#62075" in by_name["factory-registration"].why
    assert "tensorflow/tensorflow#62075" in by_name["computation-placer"].why


def test_the_note_counts_what_was_hidden():
    assert log_filter.hidden_note(0) is None
    assert log_filter.hidden_note(1) == "1 TensorFlow start-up log line hidden; --verbose shows them"
    assert log_filter.hidden_note(7) == "7 TensorFlow start-up log lines hidden; --verbose shows them"


TEE = (
    "import os, sys\n"
    "from kerasenv_image.smoke.log_filter import LogFilter\n"
    "from kerasenv_image.smoke.tf_log import StderrTee\n"
    "t = StderrTee(echo_filter=LogFilter(gpu_device=False) if sys.argv[1] == 'filter' else None).start()\n"
    "os.write(2, open(sys.argv[2], 'rb').read())\n"
    "os.write(2, b'E0000 00:00:1.0 1 x.cc:1] boom from C++')  # no newline: shown at the end\n"
    "during = t.relevant()\n"
    "t.stop()\n"
    "print(len(t.lines), t.hidden, repr(during))\n")


@pytest.mark.parametrize("mode", ["filter", "verbose"])
def test_the_tee_echoes_filtered_but_keeps_every_line_for_the_report(mode):
    fixture = FIXTURES / "tf2.15-cuda12.2.no-gpu.default-command.stderr"
    proc = subprocess.run([sys.executable, "-c", TEE, mode, str(fixture)], capture_output=True, text=True, check=False,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    kept, hidden, during = proc.stdout.split(" ", 2)
    total = len(fixture.read_text().splitlines())
    assert int(kept) == total  # the partial last line is not a complete one yet
    assert "boom from C++" in during and "boom from C++" in proc.stderr
    assert "[smoke] OK (exit 0)" in proc.stderr
    if mode == "filter":
        assert int(hidden) == 7
        assert "Unable to register" not in proc.stderr and "cpu_feature_guard" not in proc.stderr
        assert "To enable the following instructions" not in proc.stderr
    else:
        assert int(hidden) == 0
        assert proc.stderr.count("Unable to register") == 3 and "To enable the following" in proc.stderr


@pytest.mark.parametrize("name", ["tf2.21-cpu.default-command.stderr", "tf2.15-cuda12.2.no-gpu.default-command.stderr",
                                  "tf2.21-cuda12.9.no-gpu.default-command.stderr", "gpu-host.noise.upstream.log"])
def test_what_the_terminal_hides_is_noise_to_the_report_too(name):
    # report.json's error.tf_log quotes tf_log.relevant_line() of every kept line: it must
    # never quote, as a failure's explanation, a line the terminal hid as noise.
    lines = lines_of(name)
    f = log_filter.LogFilter(gpu_device=False)
    hidden = [line for line in lines if not f.show(line)]
    assert tf_log.relevant_line(hidden) is None


# --- --verbose, from the host to the image ----------------------------------------------------

def test_smoke_train_takes_verbose_as_a_flag_or_from_the_environment(monkeypatch):
    from kerasenv_image.smoke import args as smoke_args

    monkeypatch.delenv("KERASENV_VERBOSE", raising=False)
    assert smoke_args.parse_args([]).verbose is False
    assert smoke_args.parse_args(["--verbose"]).verbose is True
    monkeypatch.setenv("KERASENV_VERBOSE", "1")
    assert smoke_args.parse_args([]).verbose is True


def test_kerasenv_smoke_passes_verbose_on_and_run_does_not_take_it():
    from kerasenv import cli
    from kerasenv.run import runner

    assert runner.smoke_flags() == [] and runner.smoke_flags(verbose=True) == ["--verbose"]
    assert cli._parser().parse_args(["smoke", "tf2.21-cpu", "--verbose"]).verbose is True
    assert cli._parser().parse_args(["smoke", "tf2.21-cpu"]).verbose is False
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["run", "tf2.21-cpu", "--verbose"])


@pytest.mark.parametrize("value, flag", [("1", True), ("0", False), ("", False)])
def test_make_smoke_verbose_1_passes_verbose(value, flag):
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "smoke", "VARIANT=tf2.21-cpu", f"VERBOSE={value}"],
                            cwd=REPO, capture_output=True, text=True, check=False).stdout
    assert "smoke tf2.21-cpu" in recipe
    assert ("--verbose" in recipe) is flag


def test_the_profilers_start_stop_and_save_lines_are_hidden_and_our_summary_kept():
    lines = lines_of("tf2.21-cpu.profile.verbose.stderr")
    kept, f = shown(lines)
    assert kept == [line for line in lines if line.startswith("[smoke]")]
    assert f.hidden_by["profiler-session"] == 8  # 3 when Keras warms the profiler up, 5 around the steps
    assert any(line.startswith("[smoke]   profile: steps 35-40 in ") for line in kept)

"""The smoke's command line (kerasenv_image.smoke.args), on the host without TensorFlow."""

from __future__ import annotations

import pytest

from kerasenv_image.smoke import args as smoke_args


def test_defaults_give_a_fixed_step_count_independent_of_batch_and_replicas(monkeypatch):
    for name in ("KERASENV_STEPS_PER_EPOCH", "KERASENV_LOGICAL_CPUS", "KERASENV_BATCH_SIZE"):
        monkeypatch.delenv(name, raising=False)
    a = smoke_args.parse_args(["--batch-size", "512", "--run-id", "x"])
    assert (a.steps_per_epoch, a.logical_cpus, a.batch_size) == (32, 0, 512)
    assert a.output_dir == "/workspace/runs/x"


@pytest.mark.parametrize("argv, message", [
    (["--steps-per-epoch", "0"], "--steps-per-epoch must be at least 1"),
    (["--logical-cpus", "-1"], "--logical-cpus must be >= 0"),
    (["--batch-size", "4096", "--samples", "2048"], "--samples must be at least --batch-size"),
    (["--learning-rate", "nan"], "--learning-rate must be a positive number"),
])
def test_bad_arguments_are_one_line_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        smoke_args.parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_environment_variables_set_the_defaults(monkeypatch):
    monkeypatch.setenv("KERASENV_STEPS_PER_EPOCH", "8")
    monkeypatch.setenv("KERASENV_LOGICAL_CPUS", "4")
    a = smoke_args.parse_args([])
    assert (a.steps_per_epoch, a.logical_cpus) == (8, 4)

"""smoke.main.process_job: the multi-process job is read and checked before any framework is
imported, and a process other than 0 writes everything under worker-<id>/."""

from __future__ import annotations

import types

import pytest

from kerasenv_image.smoke import main
from kerasenv_image.smoke.errors import EXIT_USAGE, SmokeFailure

KERAS = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "w0:1234,w1:1234", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
         "KERAS_DISTRIBUTION_PROCESS_ID": "1"}


@pytest.fixture
def env(monkeypatch):
    for name in ("KERAS_BACKEND", "SLURM_JOB_ID", "JAX_COORDINATOR_ADDRESS", *KERAS):
        monkeypatch.delenv(name, raising=False)

    def set_env(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, value)
    return set_env


def test_one_process_changes_nothing(env, tmp_path):
    env(KERAS_BACKEND="jax")
    args, report = types.SimpleNamespace(output_dir=str(tmp_path)), {}
    assert main.process_job(args, report) is None
    assert report == {} and args.output_dir == str(tmp_path)


def test_process_1_of_a_jax_job_writes_under_worker_1(env, tmp_path):
    env(KERAS_BACKEND="jax", **KERAS)
    args, report = types.SimpleNamespace(output_dir=str(tmp_path)), {}
    job = main.process_job(args, report)
    assert job.process_id == 1 and args.output_dir == str(tmp_path / "worker-1") and (tmp_path / "worker-1").is_dir()
    assert report["distributed"]["chief"] is False and report["distributed"]["processes"] == 2
    from kerasenv_image.smoke.multiworker import worker_dir

    assert worker_dir(args, report) == str(tmp_path / "worker-1")  # not worker-1/worker-1


@pytest.mark.parametrize("backend, words", [("tensorflow", "TF_CONFIG"), ("torch", "torchrun")])
def test_kerass_variables_on_another_backend_are_refused_with_its_way(env, tmp_path, backend, words):
    env(KERAS_BACKEND=backend, **KERAS)
    with pytest.raises(SmokeFailure) as caught:
        main.process_job(types.SimpleNamespace(output_dir=str(tmp_path)), {})
    assert caught.value.exit_code == EXIT_USAGE and words in caught.value.message

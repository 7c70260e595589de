"""The smoke's report.json (kerasenv_image.smoke.report)."""

from __future__ import annotations

import json

from kerasenv_image.smoke import report


def test_the_report_is_written_whole_with_nan_as_null(tmp_path):
    assert report.write_report({"loss": float("nan"), "ok": True}, str(tmp_path))
    assert json.loads((tmp_path / "report.json").read_text()) == {"loss": None, "ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_no_report_without_an_output_directory_is_not_an_error(tmp_path):
    assert report.write_report({"a": 1}, str(tmp_path / "missing")) is True
    assert not (tmp_path / "missing").exists()


def test_the_summary_names_the_backends_framework_and_its_version(capsys):
    report.summary({"status": "ok", "exit_code": 0, "backend": "jax",
                    "versions": {"jax": "0.10.2", "keras": "3.15.1", "python": "3.11.2", "backend": "jax"}})
    assert "[smoke]   JAX 0.10.2 / Keras 3.15.1 / Python 3.11.2" in capsys.readouterr().err
    report.summary({"status": "ok", "exit_code": 0, "versions": {"tensorflow": "2.21.0", "keras": "3.13.2"}})
    assert "[smoke]   TensorFlow 2.21.0 / Keras 3.13.2" in capsys.readouterr().err


def test_the_summary_of_a_jax_process_counts_processes_and_names_its_own_directory(capsys):
    # main.process_job already points a JAX process's output_dir at its own worker-<i>/ (issue 37)
    dist = {"strategy": "DataParallel", "launcher": "keras", "processes": 2, "process_id": 1,
            "task_index": 1, "chief": False}
    report.summary({"status": "ok", "exit_code": 0, "backend": "jax", "output_dir": "/runs/r/worker-1",
                    "distributed": dist}, report_written=True)
    err = capsys.readouterr().err
    assert "multi-worker: process 1 of 2\n" in err
    assert "report: /runs/r/worker-1/report.json" in err


def test_the_summary_of_a_tf_worker_counts_workers_and_appends_its_directory(capsys):
    dist = {"strategy": "MultiWorkerMirroredStrategy", "workers": 3, "task_index": 2, "chief": False}
    report.summary({"status": "ok", "exit_code": 0, "output_dir": "/runs/r", "distributed": dist},
                   report_written=True)
    err = capsys.readouterr().err
    assert "multi-worker: worker 2 of 3\n" in err
    assert "report: /runs/r/worker-2/report.json" in err


def test_a_failure_before_the_import_still_names_the_stack(capsys, monkeypatch):
    """Issue 45: the stack comes from the image's ENV and the installed metadata, not the import.
    Here: this test venv's keras and Python, and a backend whose framework is not installed."""
    from importlib import metadata
    import platform

    env = {"KERAS_BACKEND": "jax", "KERASENV_VARIANT": "jax0.12-cpu", "KERASENV_FAMILY": "cpu"}
    versions = {"jax": "0.12.0.1", "keras": "3.15.1"}

    def version(name):
        if name in versions:
            return versions[name]
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(report.metadata, "version", version)
    declared = report.declared_stack(env)
    assert declared["backend"] == "jax"
    assert declared["versions"] == {"jax": "0.12.0.1", "keras": "3.15.1", "python": platform.python_version(),
                                    "backend": "jax"}
    assert declared["image"] == {"variant": "jax0.12-cpu", "family": "cpu"}
    report.summary({"status": "failed", "exit_code": 2, **declared,
                    "error": {"message": "output directory /workspace/runs/x is not writable", "fix": "mount one"}})
    err = capsys.readouterr().err
    assert f"[smoke]   JAX 0.12.0.1 / Keras 3.15.1 / Python {platform.python_version()} (jax0.12-cpu)" in err


def test_the_tensorflow_cpu_wheel_counts_as_tensorflow_and_an_unset_backend_is_kerass_default(monkeypatch):
    from importlib import metadata

    def version(name):
        if name == "tensorflow-cpu":
            return "2.21.0"
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(report.metadata, "version", version)
    declared = report.declared_stack({})
    assert declared["backend"] == "tensorflow"
    assert declared["versions"]["tensorflow"] == "2.21.0" and declared["versions"]["keras"] is None
    assert declared["image"] == {"variant": None, "family": None}


# Issue 44: Apptainer keeps /workspace/runs read-only (a SIF is squashfs) and runs as the caller.
APPTAINER = {"APPTAINER_CONTAINER": "/tmp/rootfs-1/root", "APPTAINER_NAME": "kerasenv.sif"}


def test_apptainer_is_told_apart_by_the_variables_it_sets():
    assert report.container_runtime(APPTAINER) == "apptainer"
    assert report.container_runtime({"SINGULARITY_CONTAINER": "/x"}) == "apptainer"
    assert report.container_runtime({"HOSTNAME": "abc"}) == "docker"


def test_under_apptainer_a_read_only_runs_folder_moves_the_run_to_the_working_directory(tmp_path, monkeypatch):
    # A path under a regular file takes no file, even for root (the tests run as root here).
    (tmp_path / "squashfs").write_text("")
    default = str(tmp_path / "squashfs" / "runs" / "r1")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path, line = report.default_output_dir(default, "r1", APPTAINER)
    assert path == str(work / "runs" / "r1")
    assert f"this run writes to {work / 'runs' / 'r1'}" in line and "--bind DIR:/workspace/runs" in line
    # ./runs unusable too: $TMPDIR/kerasenv-runs
    (work / "runs" / "r1").rmdir() if (work / "runs" / "r1").exists() else None
    (work / "runs").rmdir()
    (work / "runs").write_text("")
    path, _ = report.default_output_dir(default, "r1", {**APPTAINER, "TMPDIR": str(tmp_path / "t")})
    assert path == str(tmp_path / "t" / "kerasenv-runs" / "r1")
    # outside Apptainer nothing moves (Docker's read-only mount is the user's to fix)
    assert report.default_output_dir(default, "r1", {}) == (default, None)


def test_a_writable_runs_folder_stays_under_apptainer(tmp_path):
    default = str(tmp_path / "runs" / "r1")
    assert report.default_output_dir(default, "r1", APPTAINER) == (default, None)


def test_the_fix_for_an_unwritable_output_directory_speaks_the_runtime(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = str(blocker / "runs")  # under a file: unwritable even for root
    try:
        report.prepare_output_dir(target, APPTAINER)
    except report.SmokeFailure as exc:
        assert "--bind $PWD/runs:/workspace/runs" in exc.fix and "-v " not in exc.fix
        assert exc.message.startswith(f"output directory {target} is not writable")
    else:
        raise AssertionError("no failure")
    try:
        report.prepare_output_dir(target, {})
    except report.SmokeFailure as exc:
        assert "-v $PWD/runs:/workspace/runs" in exc.fix
    else:
        raise AssertionError("no failure")

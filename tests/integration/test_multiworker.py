"""Multi-worker training across containers (MultiWorkerMirroredStrategy on the CPU) when a
worker dies. The successful run (two workers in lockstep, the chief's report) is
tests/integration/test_make_targets.py::test_multiworker_trains_two_workers_in_lockstep,
through `make multiworker`: one real two-worker training serves both (28 s of CI each)."""

from __future__ import annotations

import time

from .conftest import multiworker_left, start_cli


def test_killing_a_worker_fails_the_run_quickly_with_a_clear_message(built_images, docker, matrix, tmp_path):
    proc = start_cli("multiworker", matrix.default_cpu, "--workers", "2",
                     "--runs-dir", str(tmp_path / "runs"), "--", "--epochs", "500")
    # Docker's name filter is a regular expression searched in the name: "-1" alone also
    # matched worker 0 whenever the run's tag held "-1" (a flake seen in CI).
    selector = {"label": ["io.kerasenv.kind=multiworker"], "name": r"^/?kerasenv-mw-.*-1$"}
    deadline = time.monotonic() + 180
    victim = None
    while victim is None:
        assert time.monotonic() < deadline and proc.poll() is None, "workers never started training"
        for container in docker.containers.list(filters=selector):
            if b"[smoke] training:" in container.logs():
                victim = container
        time.sleep(0.5)
    time.sleep(2)
    killed_at = time.monotonic()
    victim.kill()
    _, stderr = proc.communicate(timeout=120)
    elapsed = time.monotonic() - killed_at
    assert proc.returncode == 1
    error = [line for line in stderr.splitlines() if line.startswith("kerasenv: error:")]
    assert error == ["kerasenv: error: multi-worker training failed: worker 1 killed (SIGKILL); the other "
                     "workers were stopped (see its last lines above)"]
    assert elapsed < 30, f"took {elapsed:.0f} s to notice"
    assert multiworker_left(docker, matrix.default_cpu) == []

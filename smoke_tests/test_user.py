"""Non-root by default, with a writable HOME; also works as an arbitrary UID."""

from __future__ import annotations

import uuid

from .conftest import run_once


def test_default_user_is_keras_uid_1000(image, host, inventory):
    assert image.attrs["Config"]["User"] in ("1000:1000", "1000", "keras")
    assert (inventory["uid"], inventory["gid"]) == (1000, 1000)
    assert host.user().name == "keras"


def test_home_is_writable(inventory):
    assert inventory["home"] == "/home/keras" and inventory["home_writable"]


def test_workspace_is_the_working_directory(image, host):
    assert image.attrs["Config"]["WorkingDir"] == "/workspace"
    assert host.file("/workspace").user == "keras"


def test_arbitrary_uid_imports_the_framework_and_writes_the_smoke_output(docker, target):
    """The smoke imports the image's framework (TensorFlow, JAX or PyTorch) and trains."""
    run_id = f"uid-{uuid.uuid4().hex[:6]}"
    python = "python3" if target.variant.family == "rocm" else "python"
    script = (f"{python} /opt/kerasenv/smoke_train.py --run-id {run_id} "
              f"&& test -s /workspace/runs/{run_id}/report.json && echo written")
    code, out, err = run_once(docker, target.ref, ["bash", "-c", script], user="12345:12345",
                              network_mode="none", shm_size="1g")
    assert code == 0, err[-3000:]
    assert out.strip().endswith("written")

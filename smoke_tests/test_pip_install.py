"""`pip install` on top of the image works for its user and for any UID in group 0, and
cannot replace what the image pins (/etc/pip.conf -> /etc/kerasenv/constraints.txt).

The wheels are written here (smoke_tests/local_wheels.py) and installed with --no-index
from a read-only mount, in containers without a network. Each install gets a fresh
container, so nothing installed by one test is seen by another.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from kerasenv.images import locks
from kerasenv.matrix.schema import REPO_ROOT

from . import local_wheels, platforms
from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image, its pip is not ours
WHEELS = "/wheels"
PIP = f"pip install --no-index --find-links {WHEELS}"
NUMPY_FLOOR = "99"


def other_version(version: str) -> str:
    """A version of the same package that is not the pinned one (2.21.0 -> 2.20.0)."""
    major, minor, *_ = version.split(".")
    return f"{major}.{int(minor) - 1}.0" if int(minor) > 0 else f"{int(major) - 1}.99.0"


@pytest.fixture(scope="module")
def wheels(target):
    """A folder, readable by any UID, holding the demo wheel, a stand-in for the variant's
    framework package (tensorflow-cpu, tensorflow, jax or torch) at another version, and a
    wheel that needs numpy>=99."""
    with tempfile.TemporaryDirectory(prefix="kerasenv-wheels-") as folder:
        path = Path(folder)
        local_wheels.wheel(path, local_wheels.DEMO, "1.0")
        local_wheels.wheel(path, target.variant.framework_package, other_version(target.variant.framework_version),
                           module="framework_standin")
        local_wheels.wheel(path, "wants-new-numpy", "1.0", requires=[f"numpy>={NUMPY_FLOOR}"])
        os.chmod(path, 0o755)
        yield path


def in_fresh_container(docker, target, wheels, script: str, **kwargs) -> tuple[int, str]:
    """Run a bash script with the wheels mounted read-only, offline; exit code and output."""
    code, out, err = run_once(docker, target.ref, ["bash", "-c", script + " 2>&1"], network_mode="none",
                              volumes={str(wheels): {"bind": WHEELS, "mode": "ro"}}, **kwargs)
    return code, out + err


def pinned(target) -> dict[str, str]:
    """name -> version of every pin in the locks the image was installed from (main and CUDA;
    the arm64 image's main lock is requirements-arm64.lock; not the JupyterLab lock, which only
    a derived image installs)."""
    return platforms.image_pins(target.variant, target.arch, REPO_ROOT / "images")


INSTALL_AND_IMPORT = (
    f"{PIP} {local_wheels.DEMO} && python -c 'import json, os, kerasenv_demo as m; "
    "d = os.path.dirname(m.__file__); "
    "print(json.dumps({\"version\": m.VERSION, \"file\": m.__file__, \"gid\": os.stat(d).st_gid, "
    "\"ids\": [os.getuid(), os.getgid()]}))'")

USERS = {
    "as-the-image-user-1000": ({}, [1000, 1000]),
    "as-uid-4242-gid-0": ({"user": "4242:0"}, [4242, 0]),
    "as-uid-4242-with-group-add-0": ({"user": "4242:4242", "group_add": ["0"]}, [4242, 4242]),
}


@pytest.mark.parametrize("who", list(USERS), ids=list(USERS))
def test_pip_install_of_a_local_wheel_then_import_works(docker, target, wheels, who):
    kwargs, ids = USERS[who]
    code, out = in_fresh_container(docker, target, wheels, INSTALL_AND_IMPORT, **kwargs)
    assert code == 0, out[-3000:]
    assert "Successfully installed kerasenv-demo-1.0" in out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ids"] == ids and result["version"] == "1.0"
    # Into the image's venv (not a user site), and group 0 through the setgid directories.
    site = f"/opt/venv/lib/python{target.variant.python}/site-packages/"
    assert result["file"] == site + "kerasenv_demo/__init__.py"
    assert result["gid"] == 0


def test_replacing_the_pinned_framework_is_refused_and_the_framework_stays(docker, target, wheels):
    """TensorFlow, JAX or PyTorch: the package the backend trains on (its module has the
    backend's name: tensorflow, jax, torch)."""
    v = target.variant
    standin = f"{v.framework_package}=={other_version(v.framework_version)}"
    script = (f"{PIP} {shlex.quote(standin)}; echo PIP_EXIT=$?; "
              f"python -c 'import {v.backend} as framework; print(\"FRAMEWORK_VERSION\", framework.__version__)'")
    code, out = in_fresh_container(docker, target, wheels, script, environment={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert code == 0, out[-3000:]
    pip_exit = int(re.search(r"PIP_EXIT=(\d+)", out).group(1))
    assert pip_exit != 0, out[-3000:]
    assert f"The user requested (constraint) {v.framework_package}=={v.framework_version}" in out, out[-3000:]
    # PyTorch's __version__ may carry its CUDA build as a local part (2.15.0+cu132).
    seen = re.search(r"FRAMEWORK_VERSION (\S+)", out)
    assert seen and seen.group(1).split("+")[0] == v.framework_version, out[-3000:]


def test_a_wheel_needing_a_newer_numpy_is_refused(docker, target, wheels):
    numpy = pinned(target)["numpy"]
    script = f"{PIP} wants-new-numpy; echo PIP_EXIT=$?; python -c 'import numpy; print(\"NUMPY\", numpy.__version__)'"
    code, out = in_fresh_container(docker, target, wheels, script)
    assert code == 0, out[-3000:]
    assert int(re.search(r"PIP_EXIT=(\d+)", out).group(1)) != 0, out[-3000:]
    assert f"depends on numpy>={NUMPY_FLOOR}" in out and f"(constraint) numpy=={numpy}" in out, out[-3000:]
    assert f"NUMPY {numpy}" in out


def test_the_documented_bypass_pip_config_file_dev_null_lifts_the_pins(docker, target, wheels):
    """What /etc/pip.conf tells a user who means it: PIP_CONFIG_FILE=/dev/null."""
    v = target.variant
    script = (f"PIP_CONFIG_FILE=/dev/null {PIP} --no-deps {v.framework_package}=={other_version(v.framework_version)} "
              f"&& pip show {v.framework_package}")
    code, out = in_fresh_container(docker, target, wheels, script)
    assert code == 0, out[-3000:]
    assert f"Version: {other_version(v.framework_version)}" in out


def test_pip_conf_points_every_pip_at_the_constraints(box):
    code, out = box.exec(["pip", "config", "list"])
    assert code == 0, out
    assert "install.constraint='/etc/kerasenv/constraints.txt'" in out
    assert "global.no-cache-dir='true'" in out


def test_constraints_pin_the_variants_framework_and_every_line_is_name_eq_version(box, target):
    code, text = box.exec(["cat", "/etc/kerasenv/constraints.txt"])
    assert code == 0, text
    lines = text.splitlines()
    v = target.variant
    assert f"{v.framework_package}=={v.framework_version}" in lines
    bad = [line for line in lines if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+", line)]
    assert bad == [], "not name==version"
    in_image = {locks.normalize(line.split("==")[0]): line.split("==")[1] for line in lines}
    assert len(in_image) == len(lines), "a name is pinned twice"
    locked = pinned(target)
    extra = sorted(f"{n}=={in_image[n]}" for n in set(in_image) - set(locked))
    assert extra == [], (f"{len(extra)} constraints pin what the image does not install "
                         "(another lock, e.g. requirements-jupyter.lock, copied into the build?)")
    assert in_image == locked, "the constraints are not the locks' pins"


def test_the_venv_is_owned_by_the_image_user_and_group_0_writable(box, target):
    site = f"/opt/venv/lib/python{target.variant.python}/site-packages"
    code, out = box.exec(["stat", "-c", "%u:%g %A", "/opt/venv", "/opt/venv/bin", site])
    assert code == 0, out
    for line in out.splitlines():
        owner, mode = line.split()
        assert owner == "1000:0" and mode[5] == "w" and mode[6] == "s", line  # g+w, setgid


def test_cuda_wheel_directories_are_root_owned_and_not_writable_by_the_image_user(box, target):
    """The CUDA wheels cannot be rewritten in place by anything a user installs (CUDA
    images); the CPU image has no nvidia/ directory at all."""
    probe = (
        "import json, os\n"
        f"root = '/opt/venv/lib/python{target.variant.python}/site-packages/nvidia'\n"
        "dirs = [d for d, _, _ in os.walk(root)]\n"
        "writable = [d for d in dirs if os.access(d, os.W_OK)]\n"
        "owners = sorted({os.stat(d).st_uid for d in dirs})\n"
        "try:\n"
        "    open(os.path.join(root, 'cudnn', 'lib', 'kerasenv-probe'), 'w'); created = True\n"
        "except OSError:\n"
        "    created = False\n"
        "print(json.dumps({'uid': os.getuid(), 'dirs': len(dirs), 'writable': writable, 'owners': owners, "
        "'created': created}))\n")
    code, out = box.exec(["python", "-c", probe])
    assert code == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["uid"] == 1000
    if target.variant.family != "cuda":
        assert result["dirs"] == 0, "a CPU image with nvidia/ wheels"
        return
    assert result["dirs"] > 10
    assert result["writable"] == [] and result["owners"] == [0] and not result["created"]

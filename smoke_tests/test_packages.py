"""Every locked package is installed at exactly its locked version; pip check is clean.

The locks are the image's architecture's: requirements.lock on amd64, requirements-arm64.lock on
arm64 (`tensorflow` where amd64 has `tensorflow-cpu`, which has no aarch64 wheel), each with
the shared CUDA lock."""

from __future__ import annotations

import pytest

from kerasenv.images import locks
from kerasenv.matrix.schema import REPO_ROOT

from . import platforms

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image brings TensorFlow, nothing of ours is locked


def locked(target) -> dict[str, str]:
    """name -> version of every pin the image of this architecture was installed from."""
    return platforms.image_pins(target.variant, target.arch, REPO_ROOT / "images")


def test_every_locked_package_is_installed_at_its_locked_version(inventory, target):
    installed = {locks.normalize(name): version for name, version in inventory["dists"].items()}
    wrong = {name: (version, installed.get(name)) for name, version in locked(target).items()
             if installed.get(name) != version}
    assert wrong == {}, "package: (locked, installed)"


def test_tensorflow_is_the_architectures_distribution(inventory, target):
    """TensorFlow in the image is the distribution its architecture's lock names: beside JAX or
    PyTorch tensorflow-cpu on amd64, `tensorflow` on arm64 (the aarch64 CPU build), never both."""
    installed = {locks.normalize(name) for name in inventory["dists"]}
    tensorflows = sorted(installed & {"tensorflow", "tensorflow-cpu", "tensorflow-rocm"})
    assert tensorflows == [platforms.tensorflow_distribution(target.variant, target.arch)], tensorflows


def test_nothing_unlocked_besides_the_venv_tooling(inventory, target):
    pins = locked(target)
    extra = {locks.normalize(n) for n in inventory["dists"]} - set(pins) - {"pip"}
    assert extra == set(), "installed but not in the lock"


def test_vendored_distributions_are_setuptools_own_and_setuptools_is_locked(inventory, target):
    """setuptools (a locked dependency: TensorFlow's, TensorBoard's) vendors its own dependencies under
    setuptools/_vendor; the inventory lists them apart. Only setuptools may do that, and
    only a setuptools the lock names."""
    site = f"/opt/venv/lib/python{target.variant.python}/site-packages/"
    places = {info["in"] for info in inventory["vendored"].values()}
    assert places <= {site + "setuptools/_vendor", site + "pkg_resources/_vendor"}, places
    if inventory["vendored"]:
        assert "setuptools" in locked(target)


def test_the_framework_and_keras_are_the_matrix_versions(inventory, target):
    """The backend's framework as the image imports it (TensorFlow, JAX or PyTorch per
    KERAS_BACKEND) is the matrix release, KERAS_BACKEND is the matrix backend, and the
    distribution carrying the framework is installed at that release."""
    v = target.variant
    assert inventory["backend"] == v.backend
    framework = inventory["framework"]
    assert framework["name"] == v.backend
    # PyTorch's __version__ carries a local part naming its CUDA build (2.15.0+cu132).
    assert framework["version"].split("+")[0] == v.framework_version
    installed = {locks.normalize(name): version for name, version in inventory["dists"].items()}
    assert installed.get(locks.normalize(v.framework_package)) == v.framework_version
    if v.backend == "tensorflow":
        assert inventory["tensorflow"] == v.tensorflow
    assert (inventory["tf_keras"] if v.keras_is_tf_keras else inventory["keras"]) == v.keras


def test_keras_backend_is_set_to_the_matrix_backend(inventory, target):
    """Every image sets KERAS_BACKEND, TensorFlow ones too: Keras 3 would otherwise read
    ~/.keras/keras.json, which a user's mounted HOME may set to another backend."""
    assert inventory["env"].get("KERAS_BACKEND") == target.variant.backend


@pytest.mark.arm64_ci
def test_pip_check_is_clean(box, target, capsys):
    """On arm64 one kind of line is NVIDIA's and not a broken requirement: a wheel whose WHEEL file
    tags it `..._sbsa` only (Arm servers; the file name says aarch64) is "not supported on this
    platform" for pip on every arm64 machine. Exactly those are let through, as the image's build
    does (images/build/cuda-loader-config.sh); that their files are aarch64 is test_architecture's
    check. Anything else pip reports fails, on either architecture."""
    code, out = box.exec(["python", "-m", "pip", "check"])
    if target.arch == platforms.AMD64 or code == 0:
        assert code == 0 and "No broken requirements found" in out, out
        return
    site = f"/opt/venv/lib/python{target.variant.python}/site-packages"
    accepted, problems = [], []
    for line in filter(None, (line.strip() for line in out.splitlines())):
        unsupported = platforms.unsupported_platform(line)
        if unsupported is not None:
            name, version = unsupported
            found, wheel = box.exec(["cat", f"{site}/{name.replace('-', '_')}-{version}.dist-info/WHEEL"])
            if found == 0 and platforms.sbsa_only(wheel):
                accepted.append(f"{name} {version}")
                continue
        problems.append(line)
    with capsys.disabled():
        print(f"\n[pip check] {target.id}: 'not supported on this platform' for sbsa-tagged wheels, "
              f"accepted: {', '.join(accepted)}")
    assert problems == [], out

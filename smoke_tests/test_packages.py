"""Every locked package is installed at exactly its locked version; pip check is clean."""

from __future__ import annotations

from kerasenv.images import locks
from kerasenv.matrix.schema import REPO_ROOT

FAMILIES = {"cpu", "cuda"}  # ROCm: AMD's image brings TensorFlow, nothing of ours is locked


def locked(variant) -> dict[str, str]:
    pins = {}
    for name in (locks.MAIN_LOCK, locks.CUDA_LOCK):
        path = REPO_ROOT / "images" / variant.id / name
        if path.exists():
            pins.update({k: p.version for k, p in locks.parse(path.read_text()).items()})
    return pins


def test_every_locked_package_is_installed_at_its_locked_version(inventory, target):
    installed = {locks.normalize(name): version for name, version in inventory["dists"].items()}
    wrong = {name: (version, installed.get(name)) for name, version in locked(target.variant).items()
             if installed.get(name) != version}
    assert wrong == {}, "package: (locked, installed)"


def test_nothing_unlocked_besides_the_venv_tooling(inventory, target):
    pins = locked(target.variant)
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
        assert "setuptools" in locked(target.variant)


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


def test_pip_check_is_clean(box):
    code, out = box.exec(["python", "-m", "pip", "check"])
    assert code == 0 and "No broken requirements found" in out, out

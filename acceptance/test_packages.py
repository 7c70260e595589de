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
    """setuptools (a locked TensorFlow dependency) vendors its own dependencies under
    setuptools/_vendor; the inventory lists them apart. Only setuptools may do that, and
    only a setuptools the lock names."""
    site = f"/opt/venv/lib/python{target.variant.python}/site-packages/"
    places = {info["in"] for info in inventory["vendored"].values()}
    assert places <= {site + "setuptools/_vendor", site + "pkg_resources/_vendor"}, places
    if inventory["vendored"]:
        assert "setuptools" in locked(target.variant)


def test_tensorflow_and_keras_are_the_matrix_versions(inventory, target):
    v = target.variant
    assert inventory["tensorflow"] == v.tensorflow
    assert (inventory["tf_keras"] if v.keras_is_tf_keras else inventory["keras"]) == v.keras


def test_pip_check_is_clean(box):
    code, out = box.exec(["python", "-m", "pip", "check"])
    assert code == 0 and "No broken requirements found" in out, out

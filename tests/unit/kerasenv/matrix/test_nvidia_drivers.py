"""Driver floors: NVIDIA's table, minor-version compatibility and the PTX-JIT floor."""

from __future__ import annotations

import pytest

from kerasenv.matrix import nvidia_drivers
from kerasenv.matrix import tested_builds
from kerasenv.matrix.nvidia_drivers import driver_tuple


@pytest.mark.parametrize("cuda, floor", [
    ("12.9", "525.60.13"), ("12.5", "525.60.13"), ("12.3", "525.60.13"), ("12.2", "525.60.13"), ("11.8", "450.80.02"),
])
def test_load_floor_is_the_minor_version_compatibility_floor(cuda, floor):
    assert nvidia_drivers.load_floor(cuda) == floor


def test_load_floor_of_unknown_major_raises():
    with pytest.raises(ValueError, match="10.2"):
        nvidia_drivers.load_floor("10.2")


@pytest.mark.parametrize("variant_id, load, ptx, wheels", [
    # TF 2.21 was built with CUDA 12.5.1, so its PTX (and XLA's) JITs on 555.42.06; the image's
    # CUDA 12.9.1 wheels want 575.57.08, below which they run under minor-version compatibility.
    ("tf2.21-cuda12.9", "525.60.13", "555.42.06", "575.57.08"),
    ("tf2.20-cuda12.5", "525.60.13", "555.42.06", "555.42.06"),
    ("tf2.17-cuda12.3", "525.60.13", "545.23.06", "545.23.06"),
    ("tf2.15-cuda12.2", "525.60.13", "535.104.05", "535.104.05"),
    ("tf2.14-cuda11.8", "450.80.02", "520.61.05", "520.61.05"),
])
def test_variant_driver_floors(real_matrix, variant_id, load, ptx, wheels):
    v = real_matrix.get(variant_id)
    assert (v.min_driver, v.min_driver_ptx, v.min_driver_toolkit) == (load, ptx, wheels)


def test_non_cuda_variants_have_no_driver_floor(real_matrix):
    others = [v for v in real_matrix.variants if v.family != "cuda"]
    assert others
    assert all(v.min_driver is None and v.min_driver_ptx is None for v in others)


def test_every_cuda_variant_ptx_floor_is_at_least_its_load_floor(real_matrix):
    cuda = [v for v in real_matrix.variants if v.family == "cuda"]
    assert cuda
    for v in cuda:
        assert driver_tuple(v.min_driver_ptx) >= driver_tuple(v.min_driver), v.id


@pytest.mark.parametrize("lower, higher", [
    ("555.42.02", "555.42.06"),
    ("555.42.06", "570.26"),
    ("99.1", "100.0"),  # numeric, not lexicographic
    ("535.54.03", "535.104.05"),
])
def test_driver_tuple_orders_numerically(lower, higher):
    assert driver_tuple(lower) < driver_tuple(higher)


def test_driver_tuple_parses_and_rejects_garbage():
    assert driver_tuple(" 555.42.06\n") == (555, 42, 6)
    with pytest.raises(ValueError, match="not an NVIDIA driver version"):
        driver_tuple("555.x")


def test_unknown_toolkit_release_raises():
    with pytest.raises(ValueError, match="12.7 GA"):
        nvidia_drivers.ptx_jit_floor("12.7 GA")


def test_every_tested_stack_has_a_driver_in_nvidias_table():
    for release in tested_builds.TENSORFLOW_RELEASES.values():
        if release.stack is not None:
            assert release.stack.toolkit_release in nvidia_drivers.TOOLKIT_DRIVER, release.version


def test_toolkit_table_never_goes_down():
    drivers = [driver_tuple(d) for d in nvidia_drivers.TOOLKIT_DRIVER.values()]
    assert drivers == sorted(drivers)

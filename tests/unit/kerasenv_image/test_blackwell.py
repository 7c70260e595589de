"""Which GPUs are Blackwell (kerasenv_image.blackwell), the one definition the smoke, the bench
and the host's doctor share."""

from __future__ import annotations

import pytest

from kerasenv_image import blackwell


@pytest.mark.parametrize("cc, expected", [
    ("12.0", True), ("12.1", True), ("10.0", True), ("10.3", True), ("11.0", True),
    ("9.0", False), ("8.9", False), ("7.0", False), ("8.6", False),
])
def test_compute_capabilities_10_to_12_are_blackwell(cc, expected):
    assert blackwell.is_blackwell(cc) is expected

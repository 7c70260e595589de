"""OS release and Python equal the matrix entry; the venv's Python comes first."""

from __future__ import annotations

import re


def test_os_release_is_the_matrix_base(inventory, target):
    suite = re.match(r"^(?:[^/]*/)*debian:(\w+)", target.variant.base_image)
    if suite:  # Debian-based families
        assert inventory["os_release"]["ID"] == "debian"
        assert inventory["os_release"]["VERSION_CODENAME"] == suite.group(1).split("-")[0]
    else:  # AMD's image: Ubuntu
        assert inventory["os_release"]["ID"] == "ubuntu"


def test_python_version_is_the_matrix_python(inventory, target):
    assert inventory["python"].rsplit(".", 1)[0] == target.variant.python


def test_venv_python_is_first_on_path(inventory, target):
    if target.variant.family == "rocm":
        assert inventory["which_python"] is not None
        return
    assert inventory["which_python"] == "/opt/venv/bin/python"
    assert inventory["executable"] == "/opt/venv/bin/python"
    assert inventory["env"]["PATH"].split(":")[0] == "/opt/venv/bin"

"""`kerasenv sbom`: a CycloneDX SBOM listing exactly what `pip list` shows in the image."""

from __future__ import annotations

import json

from kerasenv.images import locks

from .conftest import kerasenv


def test_sbom_lists_every_installed_package_at_its_version(built_images, container, matrix, tmp_path):
    v = matrix.get(matrix.default_cpu)
    out = tmp_path / "sbom.json"
    kerasenv("sbom", v.id, "-o", str(out), timeout=900)
    bom = json.loads(out.read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"].startswith("1.")
    assert bom["metadata"]["component"]["name"] == v.image_ref
    in_sbom = {locks.normalize(c["name"]): c["version"] for c in bom["components"]}
    code, listed, err = container(v.image_ref).run(["python", "-m", "pip", "list", "--format", "json"])
    assert code == 0, err
    in_image = {locks.normalize(p["name"]): p["version"] for p in json.loads(listed)}
    assert in_sbom == in_image
    assert all(c.get("purl", "").startswith("pkg:pypi/") for c in bom["components"])

"""Every "newest release" claim in the docs, the matrix and the code agrees with what the package
index served when the locks were made (issue 45): `kerasenv lock` records it in
images/index-newest.json (locks.record_newest). The JAX images went without ONNX export because a
doc said "flax 0.12.8 (the newest on PyPI)": that was what a Python 3.11 pip saw, while flax 0.12.12
was served for the images' Python 3.13."""

from __future__ import annotations

import json
import re

from kerasenv.images import locks

from ..conftest import REPO

RECORD = json.loads((REPO / "images" / locks.INDEX_RECORD).read_text(encoding="utf-8"))
# The forms a claim takes in this tree: "torch_xla, whose newest PyPI release (2.9.0)",
# "flax 0.12.12 (the newest on PyPI", "TensorFlow 2.21, the newest", "(2.21 is the newest".
CLAIMS = [
    re.compile(r"(?P<name>[A-Za-z][\w-]*), whose newest (?:PyPI )?release \((?P<version>[0-9][0-9.]*)\)"),
    re.compile(r"(?P<name>[A-Za-z][\w-]*) (?P<version>[0-9][0-9.]*[0-9]),? \(?the newest"),
    re.compile(r"\((?P<version>[0-9][0-9.]*[0-9]) is the newest (?P<name>)"),
]
ALIASES = {"torch_xla": "torch-xla", "tensorflow": "tensorflow", "": "tensorflow"}  # blackwell.py's "(2.21 is the newest" is TF's
FILES = [*REPO.glob("docs/**/*.md"), REPO / "README.md", REPO / "images" / "matrix.toml", *REPO.glob("src/**/*.py"),
         *REPO.glob("images/common/**/*.py")]


def _claims():
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        for pattern in CLAIMS:
            for m in pattern.finditer(text):
                name = ALIASES.get(m.group("name").lower(), m.group("name").lower())
                yield path.relative_to(REPO), name, m.group("version")


def _recorded(name: str) -> set[str]:
    return {entry["newest"][name] for entry in RECORD["python"].values() if name in entry["newest"]}


def test_the_record_names_each_watched_package_for_the_images_python():
    pythons = RECORD["python"]
    assert "3.13" in pythons, "run `kerasenv lock` for a Python 3.13 variant"
    assert set(pythons["3.13"]["newest"]) == set(locks.WATCHED_ON_INDEX)


def test_every_newest_claim_matches_what_the_index_served():
    claims = list(_claims())
    assert {name for _, name, _ in claims} >= {"torch-xla", "tensorflow"}, claims  # the claims known today
    wrong = [(str(path), name, version, sorted(_recorded(name))) for path, name, version in claims
             if not any(r == version or r.startswith(version + ".") for r in _recorded(name))]
    assert wrong == [], ("a claim of a newest release that the index did not serve when the locks were made "
                         "(images/index-newest.json); say what `kerasenv lock` recorded", wrong)

"""kerasenv_image.jsonfile: the one atomic JSON writer of the image's smoke and the host's bench."""

from __future__ import annotations

import json
import os

import pytest

from kerasenv_image import jsonfile


def test_the_file_is_replaced_whole_and_readable_by_everyone(tmp_path):
    target = tmp_path / "r.json"
    jsonfile.write_atomically({"b": 1, "a": 2}, str(target))
    jsonfile.write_atomically({"b": 3, "a": 4}, str(target), sort_keys=False)
    assert target.read_text() == '{\n  "b": 3,\n  "a": 4\n}\n'
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert os.listdir(tmp_path) == ["r.json"]


def test_what_is_not_json_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "r.json"
    jsonfile.write_atomically({"a": 1}, str(target))
    with pytest.raises(ValueError):
        jsonfile.write_atomically({"a": float("nan")}, str(target))
    assert json.loads(target.read_text()) == {"a": 1} and os.listdir(tmp_path) == ["r.json"]

"""The smoke's report.json (kerasenv_image.smoke.report)."""

from __future__ import annotations

import json

from kerasenv_image.smoke import report


def test_the_report_is_written_whole_with_nan_as_null(tmp_path):
    assert report.write_report({"loss": float("nan"), "ok": True}, str(tmp_path))
    assert json.loads((tmp_path / "report.json").read_text()) == {"loss": None, "ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_no_report_without_an_output_directory_is_not_an_error(tmp_path):
    assert report.write_report({"a": 1}, str(tmp_path / "missing")) is True
    assert not (tmp_path / "missing").exists()

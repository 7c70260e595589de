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


def test_the_summary_names_the_backends_framework_and_its_version(capsys):
    report.summary({"status": "ok", "exit_code": 0, "backend": "jax",
                    "versions": {"jax": "0.10.2", "keras": "3.15.1", "python": "3.11.2", "backend": "jax"}})
    assert "[smoke]   JAX 0.10.2 / Keras 3.15.1 / Python 3.11.2" in capsys.readouterr().err
    report.summary({"status": "ok", "exit_code": 0, "versions": {"tensorflow": "2.21.0", "keras": "3.13.2"}})
    assert "[smoke]   TensorFlow 2.21.0 / Keras 3.13.2" in capsys.readouterr().err

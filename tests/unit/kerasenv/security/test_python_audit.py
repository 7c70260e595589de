"""Python vulnerability scanning: only where a database answers, and never "nothing found"
where nothing could be asked (this machine: PyPI's per-release JSON 404, OSV unreachable)."""

from __future__ import annotations

import io
import json
import urllib.error
from pathlib import Path
from types import SimpleNamespace

from kerasenv.security import python_audit


def opener(answers):
    """A urlopen that answers per URL: a dict (JSON body) or an exception."""
    def open_(request, timeout=None):
        url = getattr(request, "full_url", request)
        answer = answers[url]
        if isinstance(answer, Exception):
            raise answer
        return io.BytesIO(json.dumps(answer).encode())
    return open_


def test_nothing_reachable_is_said_plainly_and_nothing_is_scanned():
    db = python_audit.reachable(opener({
        python_audit.PYPI_PROBE: urllib.error.HTTPError(python_audit.PYPI_PROBE, 404, "Not Found", {}, None),
        python_audit.OSV_PROBE: urllib.error.URLError("unreachable")}))
    assert db.service is None and "HTTP 404" in db.why and "api.osv.dev: unreachable" in db.why
    ran = []
    result = python_audit.pip_audit([Path("requirements.lock")], db, runner=lambda *a, **k: ran.append(a))
    assert result.status == "NOT-CHECKED" and ran == [] and "the GitHub workflow audits" in result.line


def test_pypi_or_osv_answering_with_vulnerability_data_is_used():
    vulnerable = {"info": {}, "vulnerabilities": [{"id": "PYSEC-2018-32"}]}
    assert python_audit.reachable(opener({python_audit.PYPI_PROBE: vulnerable})).service == "pypi"
    assert python_audit.reachable(opener({
        python_audit.PYPI_PROBE: {"info": {}}, python_audit.OSV_PROBE: {"vulns": []}})).service == "osv"


def test_pip_audit_findings_fail_naming_the_package_and_advisory(tmp_path):
    report = {"dependencies": [{"name": "requests", "version": "2.19.0", "vulns": [
        {"id": "PYSEC-2018-32", "fix_versions": ["2.20.0"]}]}, {"name": "numpy", "version": "2.5.5", "vulns": []}]}
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        return SimpleNamespace(stdout=json.dumps(report), stderr="", returncode=1)

    result = python_audit.pip_audit([tmp_path / "requirements.lock"], python_audit.Database("pypi", "ok"),
                                    runner=runner)
    assert result.status == "FAIL" and "requests 2.19.0 (PYSEC-2018-32)" in result.line
    assert "--require-hashes" in calls[0] and "--no-deps" in calls[0] and calls[0][calls[0].index("-s") + 1] == "pypi"

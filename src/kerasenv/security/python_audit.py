"""The Python packages of a lock against a vulnerability database, where one is reachable.

pip-audit (PyPA) looks each pinned release up in PyPI's per-release JSON (`/pypi/<name>/
<version>/json`, whose `vulnerabilities` come from the PyPA advisory database) or in OSV
(`api.osv.dev`). Some networks serve neither: this project's build machine reaches PyPI's simple
index and files, its project JSON, but answers 404 for per-release JSON, and OSV not at all.
`reachable()` asks both with a known case (requests 2.19.0, which has published advisories)
before anything is scanned, so "nothing found" is never reported where nothing could be
asked; the GitHub workflow, which reaches both, runs the scan on every lock.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

PYPI_PROBE = "https://pypi.org/pypi/requests/2.19.0/json"
OSV_PROBE = "https://api.osv.dev/v1/query"


@dataclass(frozen=True)
class Database:
    service: str | None  # "pypi" | "osv" | None: none reachable
    why: str  # what was asked and answered


def _pypi(opener) -> str | None:
    """None when PyPI's per-release JSON answers with vulnerability data; else what it said."""
    try:
        with opener(PYPI_PROBE, timeout=20) as response:
            body = json.loads(response.read(2_000_000))
        return None if "vulnerabilities" in body else "per-release JSON without vulnerability data"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"unreachable ({type(exc).__name__})"


def _osv(opener) -> str | None:
    request = urllib.request.Request(OSV_PROBE, method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"package": {"name": "requests", "ecosystem": "PyPI"},
                                                      "version": "2.19.0"}).encode())
    try:
        with opener(request, timeout=20) as response:
            return None if "vulns" in json.loads(response.read(5_000_000)) else "an answer without vulns"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"unreachable ({type(exc).__name__})"


def reachable(opener=urllib.request.urlopen) -> Database:
    pypi = _pypi(opener)
    if pypi is None:
        return Database("pypi", "PyPI's per-release JSON answers with vulnerability data")
    osv = _osv(opener)
    if osv is None:
        return Database("osv", "OSV answers")
    return Database(None, f"no vulnerability database is reachable from here (pypi.org per-release JSON: {pypi}; "
                          f"api.osv.dev: {osv})")


@dataclass
class PythonAudit:
    status: str  # PASS | FAIL | NOT-CHECKED
    line: str
    findings: list[dict] = field(default_factory=list)  # {name, version, id, fix_versions}

    def as_dict(self) -> dict:
        return {"status": self.status, "line": self.line, "findings": self.findings}


def pip_audit(locks: list[Path], database: Database | None = None, runner=subprocess.run) -> PythonAudit:
    """pip-audit over the hash-locked requirements (no resolution: the locks are complete)."""
    database = database or reachable()
    if database.service is None:
        return PythonAudit("NOT-CHECKED", f"Python packages not audited: {database.why}; the GitHub workflow "
                                          "audits every lock with pip-audit")
    exe = shutil.which("pip-audit") or str(Path(sys.executable).with_name("pip-audit"))
    findings = []
    for lock in locks:
        proc = runner([exe, "-r", str(lock), "--no-deps", "--disable-pip", "--require-hashes", "-s", database.service,
                       "-f", "json", "--progress-spinner", "off"], capture_output=True, text=True, timeout=1800)
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return PythonAudit("NOT-CHECKED", f"pip-audit failed on {lock.name}: {tail[0][:200]}")
        for dep in report.get("dependencies", []):
            for vuln in dep.get("vulns", []):
                findings.append({"name": dep["name"], "version": dep.get("version"), "id": vuln.get("id"),
                                 "fix_versions": vuln.get("fix_versions", []), "lock": lock.name})
    if findings:
        named = ", ".join(sorted({f"{f['name']} {f['version']} ({f['id']})" for f in findings}))
        return PythonAudit("FAIL", f"{len(findings)} known vulnerabilit{'y' if len(findings) == 1 else 'ies'} in the "
                                   f"locked Python packages ({database.service}): {named}", findings)
    return PythonAudit("PASS", f"no known vulnerability in {sum(1 for _ in locks)} lock(s) ({database.service})")

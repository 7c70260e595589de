"""One line of the doctor's report: its status, what it checked, what it found, and the fix.

Every module that judges the host (doctor, rocm_checks, shape_checks) returns these; none of
them imports another's judging to get the type.
"""

from __future__ import annotations

from dataclasses import dataclass

PASS, WARN, FAIL, INFO = "PASS", "WARN", "FAIL", "INFO"


@dataclass
class Check:
    status: str
    name: str
    message: str
    fix: str = ""

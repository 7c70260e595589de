"""`kerasenv audit`: pending Debian security fixes and known Python vulnerabilities of an image."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UsageError
from ..matrix.schema import Matrix


def register(subparsers) -> None:
    s = subparsers.add_parser("audit", help="pending Debian security fixes (asked of Debian's archive) and known "
                                            "Python vulnerabilities (where a database is reachable) of an image")
    s.add_argument("id", metavar="ID|IMAGE", help="a variant id (kerasenv:<id>, its locks audited too) or any image")
    s.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    s.add_argument("--no-python", action="store_true", help="Debian only")
    s.set_defaults(handler=_cmd_audit)
    s = subparsers.add_parser("debian-updates", help="Debian's archive state now (each dist's InRelease date) for "
                                                     "every suite the matrix builds on: what a build applies "
                                                     "(its suite's part) and labels")
    s.add_argument("--suite", help="only this suite's (default: each suite of the matrix's Debian bases)")
    s.set_defaults(handler=_cmd_debian_updates)


def _cmd_debian_updates(args, matrix: Matrix) -> int:
    from . import debian

    # One line for all suites: `make test` passes it to every build, and each build takes its
    # own suite's three entries (images/build.py debian_updates).
    suites = [args.suite] if args.suite else list(dict.fromkeys(matrix.debian_bases.values()))
    if not suites:
        raise UsageError(f"{matrix.path} names no Debian base image (debian:<suite>-slim): pass --suite SUITE")
    print(" ".join(debian.archive_state(suite).label() for suite in suites))
    return 0


def _cmd_audit(args, matrix: Matrix) -> int:
    from ..engine import docker_client
    from . import audit

    variant = next((v for v in matrix.variants if v.id == args.id), None)
    image = variant.image_ref if variant else args.id
    locks = []
    if variant is not None:
        folder = Path(__file__).resolve().parents[3] / "images" / variant.id
        locks = sorted(p for p in folder.glob("requirements*.lock"))
    report = audit.audit(docker_client.client(), image, locks=locks, python=not args.no_python)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for line in report.lines():
            print(line)
    if report.status == "FAIL":
        print(f"kerasenv: error: {image} has known security fixes it does not carry: "
              f"{report.debian.line() if report.debian.status == 'FAIL' else report.python.line}", file=sys.stderr)
        return 1
    return 0

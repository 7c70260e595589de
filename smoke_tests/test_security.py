"""Security currency: the image carries Debian's fixes as of its build, and says which.

- Its label io.kerasenv.debian-updates (the archive state `kerasenv build` read) is the state
  apt saw while building (/etc/kerasenv/debian-updates, written by images/build/debian-updates.sh).
- No installed Debian package has a pending fix in its suite's -security (trixie-security, or
  bookworm-security on the older TensorFlow images): asked of Debian's archive now (`kerasenv
  audit`'s own check: a root container of the image with the network runs `apt-get update &&
  apt list --upgradable`).

The archive is asked once per Debian package set and archive state (of the image's suite): the
variants of one suite are built on the same base stage and install the same Debian packages, so
their `dpkg-query` lists are identical (this module computes it in each image) and one answer
holds for all of them; an image whose list differs is asked on its own. The answers are kept in
~/.cache/kerasenv/debian-audit/ (KERASENV_AUDIT_CACHE), keyed by both.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kerasenv.security import audit, debian

FAMILIES = {"cpu", "cuda"}
CACHE = Path(os.environ.get("KERASENV_AUDIT_CACHE") or Path.home() / ".cache" / "kerasenv" / "debian-audit")


def test_the_debian_updates_label_is_the_state_apt_saw_while_building(image, box):
    label = (image.labels or {}).get(debian.LABEL, "")
    state = debian.parse_label(label)
    assert state is not None, f"{debian.LABEL}={label!r}: not an archive state (built outside `kerasenv build`?)"
    code, seen = box.exec(["cat", debian.IN_IMAGE])
    assert code == 0, seen
    assert debian.parse_label(seen).as_dict() == state.as_dict()


def test_every_layer_below_the_last_was_built_at_the_point_release_the_label_names(image, box):
    """Issue 52: python-base and every step below the runtime's last are built at the suite's point
    release only (/etc/kerasenv/debian-point-release, written by debian-updates.sh --point-release),
    the first entry of the label; the -updates and -security fixes are the last step's."""
    state = debian.parse_label((image.labels or {}).get(debian.LABEL, ""))
    assert state is not None
    code, seen = box.exec(["cat", debian.POINT_RELEASE_IN_IMAGE])
    assert code == 0, seen
    suite = state.suites[0]
    assert seen.strip() == f"{suite}@{state.as_dict()[suite]}", (seen, state.label())


def test_no_installed_debian_package_has_a_pending_security_fix(docker, box, target):
    code, listing = box.exec(["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"])
    assert code == 0 and listing.strip(), listing
    packages = hashlib.sha256("\n".join(sorted(listing.split())).encode()).hexdigest()[:16]
    now = debian.archive_state(target.variant.debian_suite).label()  # the suite apt in the image reads
    key = f"{packages}-{hashlib.sha256(now.encode()).hexdigest()[:12]}"
    cached = CACHE / f"{key}.json"
    if cached.exists():
        pending = [debian.Pending(**p) for p in json.loads(cached.read_text())["pending"]]
        print(f"\n[security] Debian package set {packages} already audited at {now} ({cached})")
    else:
        pending = audit.debian_pending(docker, target.ref)
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"archive": now, "image": target.ref,
                                      "pending": [p.__dict__ for p in pending]}, indent=1))
    security = sorted(f"{p.name} {p.installed} -> {p.version} ({p.suite})" for p in pending if p.security)
    assert security == [], f"pending Debian security fixes: {', '.join(security)}"

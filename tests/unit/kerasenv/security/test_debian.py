"""Debian's archive state and `apt list --upgradable`, from recorded outputs (tests/fixtures/debian/)."""

from __future__ import annotations

import pytest

from kerasenv.errors import KerasenvError
from kerasenv.security import debian

from ...conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "debian"


def test_the_pending_fixes_of_an_image_built_before_updates_were_applied():
    pending = debian.parse_upgradable((FIXTURES / "apt-list-upgradable-bookworm.txt").read_text())
    assert len(pending) == 12 and all(p.security for p in pending)
    zlib = next(p for p in pending if p.name == "zlib1g")
    assert (zlib.suite, zlib.version, zlib.installed) == ("oldstable-security", "1:1.2.13.dfsg-1+deb12u1",
                                                          "1:1.2.13.dfsg-1")
    assert {"apt", "libpam0g", "perl-base", "tzdata", "liblzma5", "libzstd1"} <= {p.name for p in pending}


def test_a_point_release_update_is_pending_but_not_a_security_fix():
    (p,) = debian.parse_upgradable("Listing...\nbase-files/oldstable 12.4+deb12u13 amd64 [upgradable from: 12.4+deb12u12]\n")
    assert not p.security
    (both,) = debian.parse_upgradable("libc6/oldstable-updates,oldstable-security 2.36-9+deb12u14 amd64 "
                                      "[upgradable from: 2.36-9+deb12u13]\n")
    assert both.security and both.suite == "oldstable-security"


def test_the_archive_state_is_each_suites_inrelease_date():
    head = (FIXTURES / "bookworm-security-InRelease.head").read_text()
    assert debian.release_date(head).strftime("%Y-%m-%dT%H:%M:%SZ") == "2026-12-01T19:40:00Z"
    pages = {debian.inrelease_url(d): f"Codename: {d}\nDate: Sat, 11 Jul 2026 10:16:37 UTC\n"
             for d in debian.dists("bookworm")}
    state = debian.archive_state("bookworm", fetch=pages.__getitem__)
    assert state.label() == ("bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-07-11T10:16:37Z "
                             "bookworm-security@2026-07-11T10:16:37Z")
    assert debian.parse_label(state.label()) == state
    assert debian.inrelease_url("bookworm-security") == \
        "http://deb.debian.org/debian-security/dists/bookworm-security/InRelease"


def test_an_unreachable_archive_is_one_line_naming_the_way_around():
    def offline(url):
        raise OSError("Network is unreachable")

    with pytest.raises(KerasenvError, match="cannot read http://deb.debian.org/debian/dists/bookworm/InRelease .*"
                                            "--debian-updates STATE"):
        debian.archive_state("bookworm", fetch=offline)


def test_a_suites_state_is_read_from_its_own_three_archives():
    asked = []

    def fetch(url):
        asked.append(url)
        return "Date: Sat, 21 Nov 2026 09:15:44 UTC\n"

    state = debian.archive_state("trixie", fetch=fetch)
    assert asked == ["http://deb.debian.org/debian/dists/trixie/InRelease",
                     "http://deb.debian.org/debian/dists/trixie-updates/InRelease",
                     "http://deb.debian.org/debian-security/dists/trixie-security/InRelease"]
    assert state.label() == ("trixie@2026-11-21T09:15:44Z trixie-updates@2026-11-21T09:15:44Z "
                             "trixie-security@2026-11-21T09:15:44Z")


# What `kerasenv debian-updates` prints for a matrix on trixie and bookworm.
BOTH = ("trixie@2026-11-21T09:15:44Z trixie-updates@2026-12-03T02:15:27Z trixie-security@2026-12-02T23:13:44Z "
        "bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-03T02:15:27Z bookworm-security@2026-12-02T23:13:43Z")


def test_a_state_of_two_suites_gives_each_suite_its_own_three_entries():
    state = debian.parse_label(BOTH)
    assert state is not None and state.suites == ("trixie", "bookworm")
    assert state.of_suite("bookworm").label() == ("bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-03T02:15:27Z "
                                                  "bookworm-security@2026-12-02T23:13:43Z")
    assert state.of_suite("trixie").as_dict() == {"trixie": "2026-11-21T09:15:44Z",
                                                  "trixie-updates": "2026-12-03T02:15:27Z",
                                                  "trixie-security": "2026-12-02T23:13:44Z"}
    assert state.missing("trixie") == [] and state.missing("forky") == ["forky", "forky-updates", "forky-security"]
    assert state.of_suite("forky").dates == ()


def test_an_old_one_suite_label_still_parses_as_that_suite():
    old = "bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-02T02:09:57Z bookworm-security@2026-12-01T19:40:00Z"
    state = debian.parse_label(old)
    assert state is not None and state.suites == ("bookworm",)
    assert state.of_suite("bookworm").label() == old and state.missing("trixie") == ["trixie", "trixie-updates",
                                                                                    "trixie-security"]

"""Debian's archive state, and which installed packages it has a newer version of.

Each image applies its own suite's point-release, -updates and -security packages when its base
stage is built (images/build/debian-updates.sh): the suite of its base image (Variant.debian_suite:
bookworm for the older TensorFlow images, trixie for the rest). What it gets is fixed by the
archive's state that day: each dist's signed `InRelease` carries a `Date:`. `kerasenv
debian-updates` reads the dates of every suite the matrix builds on (`make test` once per run);
`kerasenv build` passes a variant only its own suite's three (build arg DEBIAN_UPDATES), since apt
in the image sees only those; the build step checks that apt saw exactly them, then upgrades;
the image keeps them in its label `io.kerasenv.debian-updates` and in /etc/kerasenv/debian-updates.
Two builds under the same archive state get the same packages; a later state is a newer label
(and a new base layer: the build arg keys the step).

`apt list --upgradable` run in a container after `apt-get update` says what the archive has
now that the image lacks: `zlib1g/oldstable-security 1:1.2.13.dfsg-1+deb12u2 amd64 [upgradable
from: 1:1.2.13.dfsg-1]` (the suite is the archive's Suite name: oldstable-security for bookworm
and stable-security for trixie while trixie is stable, or the codename).
"""
from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from ..errors import KerasenvError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
LABEL = "io.kerasenv.debian-updates"
IN_IMAGE = "/etc/kerasenv/debian-updates"
# The point release every layer below the runtime's last step was built at (issue 52).
POINT_RELEASE_IN_IMAGE = "/etc/kerasenv/debian-point-release"


def dists(suite: str) -> tuple[str, str, str]:
    """The point release, its -updates and its -security archives."""
    return suite, f"{suite}-updates", f"{suite}-security"


def suite_of(dist: str) -> str:
    """bookworm-security -> bookworm (the suite a dist of a label belongs to)."""
    return dist.split("-", 1)[0]


def inrelease_url(dist: str, mirror: str = DEFAULT_MIRROR) -> str:
    base = mirror.replace("/debian", "/debian-security") if dist.endswith("-security") else mirror
    return f"{base.rstrip('/')}/dists/{dist}/InRelease"


def release_date(text: str) -> datetime:
    """The `Date:` of an (In)Release file, in UTC."""
    m = re.search(r"^Date:\s*(.+)$", text, re.M)
    if not m:
        raise ValueError("no Date: field")
    return parsedate_to_datetime(m.group(1).strip()).astimezone(timezone.utc)


@dataclass(frozen=True)
class ArchiveState:
    """The Date of each archive (dist -> UTC ISO time, second precision)."""

    dates: tuple[tuple[str, str], ...]

    def label(self) -> str:
        return " ".join(f"{dist}@{when}" for dist, when in self.dates)

    @property
    def newest(self) -> str:
        return max(when for _, when in self.dates)

    def as_dict(self) -> dict[str, str]:
        return dict(self.dates)

    @property
    def suites(self) -> tuple[str, ...]:
        """The suites the state names, in its order."""
        return tuple(dict.fromkeys(suite_of(dist) for dist, _ in self.dates))

    def of_suite(self, suite: str) -> "ArchiveState":
        """Only `suite`'s entries (its three dists, where the state has them), in the state's order:
        what apt in an image of that suite sees."""
        wanted = dists(suite)
        return ArchiveState(tuple((dist, when) for dist, when in self.dates if dist in wanted))

    def missing(self, suite: str) -> list[str]:
        """The dists of `suite` the state has no date for."""
        have = {dist for dist, _ in self.dates}
        return [dist for dist in dists(suite) if dist not in have]


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_label(text: str) -> ArchiveState | None:
    """The state an image's label (or /etc/kerasenv/debian-updates) records; None if absent."""
    pairs = re.findall(r"(\S+?)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", text or "")
    return ArchiveState(tuple(pairs)) if pairs else None


def archive_state(suite: str, mirror: str = DEFAULT_MIRROR, fetch=None) -> ArchiveState:
    """Read `suite`'s three archives' InRelease dates now (over http, as apt does: the files
    are signed, the date is only used to key and label the build)."""
    def default_fetch(url: str) -> str:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - Debian's archive
            return response.read(200_000).decode("utf-8", "replace")

    fetch = fetch or default_fetch
    dates = []
    for dist in dists(suite):
        url = inrelease_url(dist, mirror)
        try:
            dates.append((dist, _iso(release_date(fetch(url)))))
        except (OSError, ValueError) as exc:
            raise KerasenvError(f"cannot read {url} ({exc}): the build applies Debian's updates of that day and "
                                "needs the archive; check the network/proxy, or pass --debian-updates STATE "
                                "(the io.kerasenv.debian-updates label of an earlier build) to reuse it") from None
    return ArchiveState(tuple(dates))


@dataclass(frozen=True)
class Pending:
    """An installed package the archive has a newer version of."""

    name: str
    suite: str  # the archive suite apt names: oldstable-security, stable-security, bookworm-updates, ...
    version: str
    installed: str

    @property
    def security(self) -> bool:
        return self.suite.endswith("-security")


_UPGRADABLE = re.compile(r"^(\S+?)/(\S+)\s+(\S+)\s+\S+\s+\[upgradable from:\s*([^\]]+)\]")


def parse_upgradable(text: str) -> list[Pending]:
    """`apt list --upgradable` lines (its "Listing..." line and warnings dropped). A package
    offered by several suites is listed as `name/suite1,suite2`: security if any is."""
    found = []
    for line in text.splitlines():
        m = _UPGRADABLE.match(line.strip())
        if m:
            suites = m.group(2).split(",")
            suite = next((s for s in suites if s.endswith("-security")), suites[0])
            found.append(Pending(m.group(1), suite, m.group(3), m.group(4).strip()))
    return found


# Run in a throwaway container of the image as root: what the archive has that it lacks.
PENDING_SCRIPT = ("apt-get update -qq -o Acquire::Retries=3 >/dev/null 2>&1 || { echo 'apt-get update failed' >&2; "
                  "exit 3; }; apt list --upgradable 2>/dev/null")

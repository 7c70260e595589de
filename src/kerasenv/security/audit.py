"""`kerasenv audit ID|IMAGE`: does an image carry today's security fixes?

Debian: a throwaway container of the image (as root, with the network, removed after) runs
`apt-get update && apt list --upgradable` against the archive the image's sources name, and
every installed package with a newer version in `-security` is a finding (FAIL); point-release
and -updates ones are listed (WARN). Python: the variant's locks through pip-audit where a
vulnerability database is reachable (python_audit), else it says so. And how fresh the image is:
its io.kerasenv.debian-updates label against the archive now, of the image's own suite (the
label's dists, else the image's /etc/os-release): bookworm's for the older TensorFlow images,
trixie's for the rest; apt in the container reads its own suite's archive either way.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field

from ..engine import docker_client
from ..errors import KerasenvError
from . import debian
from .python_audit import PythonAudit


@dataclass
class DebianAudit:
    pending: list[debian.Pending] = field(default_factory=list)
    built_with: str | None = None  # the image's label
    archive_now: str | None = None  # the archive state now (label form) of the image's suite, if read
    suite: str | None = None  # the image's Debian suite (None: not Debian, or unknown)

    @property
    def security(self) -> list[debian.Pending]:
        return [p for p in self.pending if p.security]

    @property
    def status(self) -> str:
        return "FAIL" if self.security else "WARN" if self.pending else "PASS"

    def line(self) -> str:
        fresh = f"built on Debian's updates of {self.built_with}" if self.built_with else \
            "no io.kerasenv.debian-updates label (built before kerasenv applied Debian's updates)"
        if self.security:
            names = ", ".join(sorted({p.name for p in self.security}))
            return (f"{len(self.security)} installed Debian package(s) have a pending security fix: {names} "
                    f"({fresh}); rebuild the image (`make build VARIANT=<id>`) or pull a newer tag")
        if self.pending:
            names = ", ".join(sorted({p.name for p in self.pending}))
            return f"no pending security fix; {len(self.pending)} point-release update(s): {names} ({fresh})"
        return f"no pending Debian update ({fresh})"

    def as_dict(self) -> dict:
        return {"status": self.status, "line": self.line(), "built_with": self.built_with, "suite": self.suite,
                "archive_now": self.archive_now, "pending": [asdict(p) | {"security": p.security}
                                                             for p in self.pending]}


def _run_as_root(client, image: str, script: str, what: str) -> tuple[int, str, str]:
    """`sh -c script` in a throwaway container of `image` as root (network on, removed after):
    its exit code, stdout and stderr."""
    from docker.errors import APIError, ImageNotFound

    try:
        client.images.get(image)
    except ImageNotFound:
        raise KerasenvError(f"{image} is not here: build it (`make build VARIANT=<id>`) or pull it") from None
    container = client.containers.create(
        image, ["sh", "-c", script], entrypoint=[], user="0:0",
        name=f"kerasenv-audit-{uuid.uuid4().hex[:8]}", labels=docker_client.container_labels("audit"))
    try:
        container.start()
        code = container.wait(timeout=600).get("StatusCode", 1)
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        err = container.logs(stdout=False, stderr=True).decode(errors="replace")
    except APIError as exc:
        raise KerasenvError(f"could not run {what} in {image}: {str(exc.explanation or exc)[:200]}") from None
    finally:
        container.remove(force=True)
    return code, out, err


def debian_pending(client, image: str) -> list[debian.Pending]:
    """What the archive has now that `image` lacks (a container as root, network on, removed)."""
    code, out, err = _run_as_root(client, image, debian.PENDING_SCRIPT, "apt")
    if code != 0:
        raise KerasenvError(f"apt-get update failed in {image} (exit {code}: {err.strip()[-200:]}): Debian's archive "
                            "must be reachable from containers (http://deb.debian.org); check the network/proxy")
    return debian.parse_upgradable(out)


# The image's distribution and codename (`debian trixie`); an image without /etc/os-release says nothing.
_OS_RELEASE_SCRIPT = '. /etc/os-release 2>/dev/null && echo "$ID $VERSION_CODENAME"'


def image_suite(client, image: str, label: str | None) -> str | None:
    """The Debian suite of `image`: the one its io.kerasenv.debian-updates label's dists name,
    else VERSION_CODENAME of its /etc/os-release (an image built before the label, or not by
    kerasenv); None when it is not Debian (AMD's Ubuntu-based ROCm image)."""
    state = debian.parse_label(label or "")
    if state is not None and len(state.suites) == 1:
        return state.suites[0]
    code, out, _ = _run_as_root(client, image, _OS_RELEASE_SCRIPT, "sh (reading /etc/os-release)")
    words = out.split()
    return words[1] if code == 0 and len(words) == 2 and words[0] == "debian" else None


@dataclass
class Report:
    image: str
    debian: DebianAudit
    python: PythonAudit | None

    @property
    def status(self) -> str:
        statuses = [self.debian.status] + ([self.python.status] if self.python else [])
        return "FAIL" if "FAIL" in statuses else "WARN" if "WARN" in statuses else "PASS"

    def as_dict(self) -> dict:
        return {"image": self.image, "status": self.status, "debian": self.debian.as_dict(),
                "python": self.python.as_dict() if self.python else None}

    def lines(self) -> list[str]:
        out = [f"{self.debian.status:<11} debian  {self.debian.line()}"]
        if self.python is not None:
            out.append(f"{self.python.status:<11} python  {self.python.line}")
        out.append(f"audit {self.image}: {self.status}")
        return out


def audit(client, image: str, *, locks=None, python: bool = True, archive=None, database=None) -> Report:
    """The whole audit of `image`; `locks`: the Python locks to scan (a variant's); `archive`:
    reads a suite's archive state (debian.archive_state)."""
    from . import python_audit

    if not _exists(client, image):
        raise KerasenvError(f"{image} is not here: build it (`make build VARIANT=<id>`) or pull it")
    built = (client.images.get(image).labels or {}).get(debian.LABEL)
    suite = image_suite(client, image, built)
    state = None
    try:
        state = (archive or debian.archive_state)(suite) if suite else None
    except KerasenvError:
        pass  # the apt run below says whether the archive is reachable
    deb = DebianAudit(debian_pending(client, image), built, state.label() if state else None, suite)
    py = python_audit.pip_audit(list(locks or []), database) if python and locks else None
    return Report(image, deb, py)


def _exists(client, image: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(image)
        return True
    except ImageNotFound:
        return False

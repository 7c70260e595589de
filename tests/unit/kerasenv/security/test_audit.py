"""`kerasenv audit`'s Debian half: the archive state it compares with is the image's own suite's."""

from __future__ import annotations

from kerasenv.security import audit, debian

BOOKWORM = ("bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-02T02:09:57Z "
            "bookworm-security@2026-12-01T19:40:00Z")
TRIXIE = "trixie@2026-11-21T09:15:44Z trixie-updates@2026-12-03T02:15:27Z trixie-security@2026-12-02T23:13:44Z"
UPGRADABLE = "Listing...\nzlib1g/oldstable-security 1:1.2.13.dfsg-1+deb12u2 amd64 [upgradable from: 1:1.2.13.dfsg-1]\n"


class FakeContainer:
    def __init__(self, out: str) -> None:
        self.out, self.removed = out, False

    def start(self):
        pass

    def wait(self, timeout=None):
        return {"StatusCode": 0}

    def logs(self, stdout=True, stderr=True):
        return self.out.encode() if stdout else b""

    def remove(self, force=False):
        self.removed = True


class FakeClient:
    """One local image with `labels`; its containers answer the audit's two scripts as an
    image whose /etc/os-release says `os_release` ("ID CODENAME")."""

    def __init__(self, labels: dict[str, str], os_release: str) -> None:
        self.labels, self.os_release, self.scripts = labels, os_release, []
        self.images, self.containers = self, self

    def get(self, ref):
        return type("Image", (), {"labels": self.labels})()

    def create(self, image, command, **kwargs):
        script = command[-1]
        self.scripts.append(script)
        return FakeContainer(UPGRADABLE if script == debian.PENDING_SCRIPT else f"{self.os_release}\n")


def archive_of(read: list[str]):
    def archive_state(suite):
        read.append(suite)
        return debian.parse_label({"bookworm": BOOKWORM, "trixie": TRIXIE}[suite])
    return archive_state


def test_the_archive_state_is_read_for_the_suite_the_images_label_names():
    read: list[str] = []
    client = FakeClient({debian.LABEL: BOOKWORM}, os_release="debian trixie")  # the label wins
    report = audit.audit(client, "kerasenv:tf2.17-cuda12.3", python=False, archive=archive_of(read))
    assert read == ["bookworm"]
    assert (report.debian.suite, report.debian.archive_now, report.debian.built_with) == \
        ("bookworm", BOOKWORM, BOOKWORM)
    assert client.scripts == [debian.PENDING_SCRIPT]  # no container to ask the image its suite
    assert [p.name for p in report.debian.security] == ["zlib1g"] and report.status == "FAIL"


def test_an_image_without_the_label_is_asked_its_codename():
    read: list[str] = []
    client = FakeClient({}, os_release="debian trixie")
    report = audit.audit(client, "debian:trixie-slim", python=False, archive=archive_of(read))
    assert read == ["trixie"] and report.debian.as_dict()["suite"] == "trixie"
    assert report.debian.archive_now == TRIXIE and report.debian.built_with is None
    assert len(client.scripts) == 2


def test_a_label_of_two_suites_falls_back_to_the_images_codename():
    read: list[str] = []
    client = FakeClient({debian.LABEL: f"{TRIXIE} {BOOKWORM}"}, os_release="debian bookworm")
    audit.audit(client, "kerasenv:x", python=False, archive=archive_of(read))
    assert read == ["bookworm"]


def test_an_image_that_is_not_debian_reads_no_debian_archive_state():
    read: list[str] = []
    client = FakeClient({}, os_release="ubuntu jammy")  # AMD's ROCm image
    report = audit.audit(client, "rocm/tensorflow:rocm6.3.3-py3.12-tf2.17-dev", python=False,
                         archive=archive_of(read))
    assert read == [] and report.debian.suite is None and report.debian.archive_now is None

"""Pure helpers of build.py: CA discovery and reading, build context, dates, base image."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import shutil
import tarfile
from datetime import datetime, timedelta, timezone

import pytest

from kerasenv.images import build


@pytest.fixture(autouse=True)
def build_notes_in_tmp(tmp_path, monkeypatch):
    """build() notes its stage images under XDG_CACHE_HOME: not in the real ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


# `kerasenv debian-updates` for a matrix on trixie and bookworm (as `make test` passes it).
TRIXIE = "trixie@2026-11-21T09:15:44Z trixie-updates@2026-12-03T02:15:27Z trixie-security@2026-12-02T23:13:44Z"
BOOKWORM = ("bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-03T02:15:27Z "
            "bookworm-security@2026-12-02T23:13:43Z")
BOTH = f"{TRIXIE} {BOOKWORM}"


@pytest.fixture(autouse=True)
def debian_state_of_both_suites(monkeypatch):
    """build() reads Debian's archive unless told its state: these tests tell it (no network),
    and no archive read of another test is remembered."""
    monkeypatch.setenv("KERASENV_DEBIAN_UPDATES", BOTH)
    monkeypatch.setattr(build, "_debian_states", {})


from kerasenv.errors import BuildFailed, UsageError

CA_ORDER = ("KERASENV_CA_CERT", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
def no_ca_env(monkeypatch):
    for name in CA_ORDER:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def variant_folder(tmp_path, repo_root):
    """A copy of a real variant folder with a stale build-ca.pem lying in it."""
    images = tmp_path / "images"
    folder = images / "tf2.21-cuda12.9"
    shutil.copytree(repo_root / "images" / "tf2.21-cuda12.9", folder)
    shutil.copytree(repo_root / "images" / "common", images / "common")
    shutil.copytree(repo_root / "images" / "build", images / "build")
    shutil.copytree(repo_root / "images" / "templates", images / "templates")
    shutil.copytree(repo_root / "images" / "tf2.21-cpu", images / "tf2.21-cpu")  # another variant
    (folder / "build-ca.pem").write_bytes(b"stale CA left in the folder")
    (images / "common" / "kerasenv_image" / "__pycache__").mkdir(exist_ok=True)
    (images / "common" / "kerasenv_image" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return folder


def tar_members(folder, ca_pem) -> dict[str, bytes]:
    with tarfile.open(fileobj=build.context_tar(folder, ca_pem)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


# --- default_ca_cert ---------------------------------------------------------------------

def test_no_ca_setting_gives_none(no_ca_env):
    assert build.default_ca_cert(None) is None


def test_explicit_ca_wins_over_environment(no_ca_env):
    for name in CA_ORDER:
        no_ca_env.setenv(name, f"/env/{name}.pem")
    assert build.default_ca_cert("/explicit.pem") == "/explicit.pem"


@pytest.mark.parametrize("index", range(len(CA_ORDER)), ids=CA_ORDER)
def test_environment_cas_are_tried_in_order(no_ca_env, index):
    for name in CA_ORDER[index:]:
        no_ca_env.setenv(name, f"/env/{name}.pem")
    assert build.default_ca_cert(None) == f"/env/{CA_ORDER[index]}.pem"


def test_empty_environment_value_is_skipped(no_ca_env):
    no_ca_env.setenv("KERASENV_CA_CERT", "")
    no_ca_env.setenv("SSL_CERT_FILE", "/etc/ssl/certs/ca.pem")
    assert build.default_ca_cert(None) == "/etc/ssl/certs/ca.pem"


# --- read_ca_cert ------------------------------------------------------------------------

def test_pem_ca_is_read(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(PEM)
    assert build.read_ca_cert(str(ca)) == PEM


@pytest.mark.parametrize("make, reason", [
    (lambda p: None, "does not exist"),
    (lambda p: p.write_bytes(b"MIIB base64 without armour"), "not a PEM certificate"),
    (lambda p: p.mkdir(), "cannot be read"),
])
def test_unusable_ca_is_a_usage_error_naming_the_file(tmp_path, make, reason):
    ca = tmp_path / "ca.pem"
    make(ca)
    with pytest.raises(UsageError, match=reason) as info:
        build.read_ca_cert(str(ca))
    assert str(ca) in info.value.message and "\n" not in info.value.message


# --- context_tar -------------------------------------------------------------------------

V = "tf2.21-cuda12.9"


def test_context_holds_the_variant_files_but_not_a_stray_ca(variant_folder):
    members = tar_members(variant_folder, None)
    assert {f"{V}/Dockerfile", f"{V}/requirements.lock", f"{V}/requirements-cuda.lock", "build/build-ca.md"} \
        <= set(members)
    assert f"{V}/build-ca.pem" not in members
    assert members[f"{V}/Dockerfile"] == (variant_folder / "Dockerfile").read_bytes()


def test_context_is_images_with_this_variant_and_the_one_copy_of_the_in_image_code(variant_folder):
    members = tar_members(variant_folder, None)
    assert "common/smoke_train.py" in members and "common/kerasenv_image/smoke/main.py" in members
    assert not [m for m in members if m.startswith("tf2.21-cpu/")]  # other variants stay out
    assert not [m for m in members if "__pycache__" in m]
    assert {m.split("/")[0] for m in members} == {V, "common", "build"}  # no templates/


def copied_from_build(text: str) -> set[str]:
    """Every build/ source of the Dockerfile's COPY lines from the context, a multi-source
    `COPY build/a.sh build/b.sh /in/` (the build-scripts stage) included; the last word is the
    destination."""
    sources = set()
    for line in re.findall(r"^COPY (?!--from=)(.+)$", text, re.M):
        *from_context, _destination = line.split()
        sources |= {s for s in from_context if s.startswith("build/")}
    return sources


def test_context_holds_every_file_the_dockerfiles_copy_from_build(variant_folder):
    members = tar_members(variant_folder, None)
    copied, run = set(), set()
    for dockerfile in ("Dockerfile", "jupyter.Dockerfile"):
        text = (variant_folder / dockerfile).read_text()
        copied |= copied_from_build(text)
        run |= {f"build/{name}" for name in re.findall(r"\bbash /tmp/build/(\S+\.sh) ", text)}
    assert {"build/build-ca.md", "build/install-locked-venv.sh", "build/cuda-loader-config.sh",
            "build/debian-updates.sh", "build/point-release-sources.sh", "build/clamp-mtimes.sh",
            "build/image-tree.sh"} <= copied
    assert run <= copied  # every script a step runs came from the context (some through build-scripts)
    assert copied <= set(members)
    for name in copied:
        assert members[name] == (variant_folder.parent / name).read_bytes(), name


def test_context_takes_the_build_scripts_but_not_other_files_of_build(variant_folder):
    build_dir = variant_folder.parent / "build"
    (build_dir / "notes.txt").write_text("scratch")
    (build_dir / "build-ca.pem").write_bytes(PEM)
    members = tar_members(variant_folder, None)
    assert not [m for m in members if m in ("build/notes.txt", "build/build-ca.pem")]


def test_context_carries_only_the_ca_passed_in(variant_folder):
    members = tar_members(variant_folder, PEM)
    assert members[f"{V}/build-ca.pem"] == PEM
    assert [m for m in members if m.endswith("build-ca.pem")] == [f"{V}/build-ca.pem"]


def test_context_skips_subfolders(variant_folder):
    (variant_folder / "cache").mkdir()
    (variant_folder / "cache" / "big.bin").write_bytes(b"x")
    assert not [name for name in tar_members(variant_folder, None) if "cache/" in name]


# --- build_date --------------------------------------------------------------------------

@pytest.mark.parametrize("epoch, expected", [
    ("0", "1970-01-01T00:00:00Z"), ("1700000000", "2023-11-14T22:13:20Z"),
])
def test_build_date_honours_source_date_epoch(monkeypatch, epoch, expected):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    assert build.build_date() == expected


def test_build_date_defaults_to_now_in_utc(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    stamp = build.build_date()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs(datetime.now(timezone.utc) - when) < timedelta(minutes=5)


def test_build_of_a_clean_commit_is_dated_by_the_commit(monkeypatch, tmp_path):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    env = {"GIT_AUTHOR_DATE": "2024-02-03T04:05:06Z", "GIT_COMMITTER_DATE": "2024-02-03T04:05:06Z",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": os.environ["PATH"]}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=env)
    revision = build.git_revision(tmp_path)
    assert build.build_date(revision, tmp_path) == "2024-02-03T04:05:06Z"
    (tmp_path / "new-file").write_text("dirty")
    assert build.git_revision(tmp_path).endswith("-dirty")
    assert build.build_date(build.git_revision(tmp_path), tmp_path) != "2024-02-03T04:05:06Z"


# --- effective_base ----------------------------------------------------------------------

def test_base_override_applies_to_the_variants_on_the_default_base_only(real_matrix):
    """Only the variants on the default CPU image's base take it: an override of one Debian
    suite does not move the variants on another suite (nor AMD's image) onto it."""
    default_base = real_matrix.get(real_matrix.default_cpu).base_image
    override = f"registry.example/{default_base}"
    for v in real_matrix.variants:
        expected = override if v.base_image == default_base else v.base_image
        assert build.effective_base(v, override, real_matrix) == expected, v.id
    rocm = next(v for v in real_matrix.variants if v.family == "rocm")
    assert build.effective_base(rocm, override, real_matrix) == rocm.base_image


@pytest.mark.parametrize("override, suite", [
    ("registry.example/debian:bookworm-slim", "bookworm"),
    ("debian:trixie-slim@sha256:" + "0" * 64, "trixie"),
    ("debian:bookworm", "bookworm"),
])
def test_a_base_override_naming_a_suite_replaces_that_suites_base_only(real_matrix, override, suite):
    moved = [v.id for v in real_matrix.variants if build.effective_base(v, override, real_matrix) == override]
    assert moved and moved == [v.id for v in real_matrix.variants if v.debian_suite == suite]


def test_a_base_override_naming_no_suite_replaces_the_default_base(real_matrix):
    default = real_matrix.get(real_matrix.default_cpu)
    moved = [v.id for v in real_matrix.variants if build.effective_base(v, "my/base:1", real_matrix) == "my/base:1"]
    assert moved == [v.id for v in real_matrix.variants if v.debian_suite == default.debian_suite]
    assert "tf2.14-cuda11.8" not in moved and "tf2.21-cpu" in moved


def test_no_override_keeps_the_matrix_base(real_matrix):
    for v in real_matrix.variants:
        assert build.effective_base(v, None, real_matrix) == v.base_image


# --- debian_updates: each build its own suite's archive state ---------------------------

def test_a_build_takes_only_its_own_suites_entries_of_a_state_of_two_suites(monkeypatch):
    assert build.debian_updates("trixie", BOTH) == TRIXIE
    assert build.debian_updates("bookworm", BOTH) == BOOKWORM
    assert build.debian_updates("bookworm") == BOOKWORM  # from KERASENV_DEBIAN_UPDATES
    assert build.debian_updates("bookworm", BOOKWORM) == BOOKWORM  # an old one-suite label, as it was


def test_a_state_without_the_builds_suite_is_one_line_naming_the_fix(monkeypatch):
    with pytest.raises(UsageError) as caught:
        build.debian_updates("trixie", BOOKWORM)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("--debian-updates names no date for trixie, trixie-updates, trixie-security, which a "
                              "build on Debian trixie applies")
    assert "`kerasenv debian-updates`" in message
    monkeypatch.setenv("KERASENV_DEBIAN_UPDATES", f"{BOOKWORM} trixie@2026-11-21T09:15:44Z")
    with pytest.raises(UsageError, match=r"^KERASENV_DEBIAN_UPDATES names no date for trixie-updates, "
                                         r"trixie-security, "):
        build.debian_updates("trixie")


def test_without_a_state_each_suite_is_read_from_the_archive_once(monkeypatch):
    from kerasenv.security import debian

    monkeypatch.delenv("KERASENV_DEBIAN_UPDATES")
    read = []

    def archive_state(suite):
        read.append(suite)
        return debian.parse_label({"trixie": TRIXIE, "bookworm": BOOKWORM}[suite])

    monkeypatch.setattr(debian, "archive_state", archive_state)
    assert [build.debian_updates(s) for s in ("trixie", "bookworm", "trixie", "bookworm")] == \
        [TRIXIE, BOOKWORM, TRIXIE, BOOKWORM]
    assert read == ["trixie", "bookworm"]


# --- point_release: the state of every layer below the runtime's last step (issue 52) ------

def test_the_point_release_is_the_suites_own_entry_of_a_state_of_three_dists():
    assert build.point_release(TRIXIE, "trixie") == "trixie@2026-11-21T09:15:44Z"
    assert build.point_release(BOTH, "bookworm") == "bookworm@2026-07-11T10:16:37Z"  # never another suite's


def test_a_state_without_the_suites_own_entry_is_a_usage_error_naming_the_suite():
    with pytest.raises(UsageError) as caught:
        build.point_release(BOOKWORM, "trixie")
    message = str(caught.value)
    assert "names no date for trixie," in message and "\n" not in message
    assert "`kerasenv debian-updates`" in message
    # -updates and -security alone name no point release either.
    with pytest.raises(UsageError, match="names no date for trixie,"):
        build.point_release("trixie-updates@2026-12-03T02:15:27Z trixie-security@2026-12-02T23:13:44Z", "trixie")


def test_debian_updates_point_release_is_the_suites_point_release_alone():
    # `--debian-updates point-release`: the state of KERASENV_DEBIAN_UPDATES (both suites here),
    # cut to the suite's own dist: the last step then applies no -updates or -security fix.
    assert build.debian_updates("trixie", build.POINT_RELEASE_ONLY) == "trixie@2026-11-21T09:15:44Z"
    assert build.debian_updates("bookworm", "point-release") == "bookworm@2026-07-11T10:16:37Z"


class ArgsOfBuild:
    """The build args build() sends; the build itself stops there."""

    def __init__(self) -> None:
        self.api, self.images, self.buildargs = self, self, None

    def get(self, ref):
        return FakeImage(ref, [ref])

    def build(self, **kwargs):
        self.buildargs = kwargs["buildargs"]
        yield {"error": "stop here"}


@pytest.mark.parametrize("base, suite_state", [("debian:trixie-slim", TRIXIE), ("debian:bookworm-slim", BOOKWORM)])
def test_a_build_passes_its_own_suites_state_as_debian_updates(real_matrix, base, suite_state):
    v = dataclasses.replace(real_matrix.get(real_matrix.default_cpu), base_image=base)
    client = ArgsOfBuild()
    with pytest.raises(BuildFailed):
        build.build(client, real_matrix, v, progress=build.Progress(io.StringIO(), live=False))
    assert client.buildargs["DEBIAN_UPDATES"] == suite_state
    # and its point release, the state of every layer below the last step
    assert client.buildargs["DEBIAN_POINT_RELEASE"] == suite_state.split()[0]


def test_a_point_release_build_passes_the_point_release_as_both_states(real_matrix):
    v = real_matrix.get(real_matrix.default_cpu)
    client = ArgsOfBuild()
    with pytest.raises(BuildFailed):
        build.build(client, real_matrix, v, progress=build.Progress(io.StringIO(), live=False),
                    debian_state=build.POINT_RELEASE_ONLY)
    point = f"{v.debian_suite}@" + dict(e.split("@") for e in BOTH.split())[v.debian_suite]
    assert client.buildargs["DEBIAN_UPDATES"] == client.buildargs["DEBIAN_POINT_RELEASE"] == point


def test_amds_image_gets_no_debian_updates(real_matrix):
    rocm = next(v for v in real_matrix.variants if v.family == "rocm")
    client = ArgsOfBuild()
    with pytest.raises(BuildFailed):
        build.build(client, real_matrix, rocm, progress=build.Progress(io.StringIO(), live=False))
    assert rocm.debian_suite is None
    assert "DEBIAN_UPDATES" not in client.buildargs and "DEBIAN_POINT_RELEASE" not in client.buildargs


# --- the builder stages of a build, and dropping them ------------------------------------

# What the classic builder streams for a two-stage build (the shape of Docker 20.10's output:
# each finished step's image as " ---> <12 hex>", a cached step with " ---> Using cache" first).
STAGED_BUILD = [
    "Step 1/8 : ARG BASE_IMAGE=debian:bookworm-slim", "Step 2/8 : FROM ${BASE_IMAGE} AS python-base",
    " ---> 5110738b35b4", "Step 3/8 : RUN apt-get update", " ---> Using cache", " ---> 2d20af6c2828",
    "Step 4/8 : FROM python-base AS builder", " ---> 2d20af6c2828", "Step 5/8 : RUN pip install -r x",
    " ---> Running in 8f11923bbe72", "Removing intermediate container 8f11923bbe72", " ---> 89eee980990c",
    "Step 6/8 : FROM python-base AS runtime", " ---> 2d20af6c2828",
    "Step 7/8 : COPY --from=builder /opt/venv /opt/venv", " ---> a72a28c6535b",
    "Step 8/8 : USER 1000:1000", " ---> d136583c0883", "Successfully built d136583c0883",
]


class FakeImage:
    def __init__(self, image_id: str, tags=(), size: int = 10**9) -> None:
        self.id, self.tags, self.attrs = image_id, list(tags), {"Size": size, "RootFS": {"Layers": ["sha256:l"]}}
        self._size = size

    def history(self):
        return [{"CreatedBy": "RUN true", "Size": self._size}]


class FakeBuildClient:
    """The docker SDK calls build() and drop_build_cache() make, answered from memory:
    `children` says which images another image builds on (Docker refuses to remove those)."""

    def __init__(self, stream_lines, children=()) -> None:
        from docker.errors import ImageNotFound

        self._lines, self._not_found, self.removed = stream_lines, ImageNotFound, []
        self._children = set(children)
        self._images = {"debian:bookworm-slim": FakeImage("5110738b35b4", ["debian:bookworm-slim"])}
        self.api, self.images = self, self

    def build(self, **kwargs):
        yield from ({"stream": line + "\n"} for line in self._lines)
        yield {"aux": {"ID": "sha256:d136583c0883"}}

    def get(self, ref):
        if ref in self.removed:
            raise self._not_found(ref)
        return self._images.get(ref) or FakeImage(ref, ["kerasenv:tf2.21-cpu"] if "d136583c0883" in ref else [])

    def list(self, name=None):
        return [self.get(name)]

    def remove(self, image_id, force=False, noprune=False):
        from docker.errors import APIError

        if image_id in self._children:
            raise APIError("conflict", explanation="conflict: image has dependent child images",
                           response=type("R", (), {"status_code": 409, "reason": "Conflict", "url": "/images"})())
        self.removed.append(image_id)


class PublishedDuringTheRun(FakeBuildClient):
    """The first build is refused by debian-updates.sh (Debian published after the run read its
    state, as in the CI run of 82ccf55), the next one passes; `states` the DEBIAN_UPDATES of each."""

    def __init__(self, moved_line: str) -> None:
        super().__init__(STAGED_BUILD)
        self.states, self._moved_line = [], moved_line

    def build(self, **kwargs):
        self.states.append(kwargs["buildargs"]["DEBIAN_UPDATES"])
        if len(self.states) == 1:
            yield {"stream": "Step 3/8 : RUN debian-updates.sh \"$DEBIAN_UPDATES\" ca-certificates\n"}
            yield {"stream": self._moved_line + "\n"}
            yield {"error": "The command '/bin/sh -c debian-updates.sh' returned a non-zero code: 1"}
            return
        yield from super().build(**kwargs)


NOW = TRIXIE.replace("trixie-security@2026-12-02T23:13:44Z", "trixie-security@2026-12-04T11:02:09Z")
MOVED = (f"debian-updates.sh: Debian's archive is at \"{NOW}\", the build was asked for \"{TRIXIE}\" "
         "(it published in between): build again")


@pytest.fixture
def archive_now(monkeypatch):
    from kerasenv.security import debian

    reads = []

    def archive_state(suite, *args, **kwargs):
        reads.append(suite)
        return debian.parse_label(NOW).of_suite(suite)

    monkeypatch.setattr(debian, "archive_state", archive_state)
    return reads


def test_a_build_refused_because_debian_published_during_the_run_is_built_again_on_the_state_now(
        real_matrix, archive_now):
    v = dataclasses.replace(real_matrix.get(real_matrix.default_cpu), base_image="debian:trixie-slim")
    client, out = PublishedDuringTheRun(MOVED), io.StringIO()
    result = build.build(client, real_matrix, v, progress=build.Progress(out, live=False))
    assert client.states == [TRIXIE, NOW] and archive_now == ["trixie"]
    assert result.image_id == "sha256:d136583c0883"
    assert "Debian's archive published since its state was read" in out.getvalue()
    assert build._debian_states == {"trixie": NOW}  # what this process read, as debian_updates() keeps it


def test_an_explicit_debian_state_is_never_replaced(real_matrix, archive_now):
    v = dataclasses.replace(real_matrix.get(real_matrix.default_cpu), base_image="debian:trixie-slim")
    client = PublishedDuringTheRun(MOVED)
    with pytest.raises(BuildFailed):
        build.build(client, real_matrix, v, progress=build.Progress(io.StringIO(), live=False),
                    debian_state=TRIXIE)
    assert client.states == [TRIXIE] and archive_now == []


def test_another_build_failure_is_not_built_again(real_matrix, archive_now):
    v = dataclasses.replace(real_matrix.get(real_matrix.default_cpu), base_image="debian:trixie-slim")
    client = PublishedDuringTheRun("E: Unable to locate package nosuchpackage")
    with pytest.raises(BuildFailed):
        build.build(client, real_matrix, v, progress=build.Progress(io.StringIO(), live=False))
    assert client.states == [TRIXIE] and archive_now == []


def test_a_build_records_the_last_image_of_each_stage_before_the_final_one(real_matrix):
    client = FakeBuildClient(STAGED_BUILD)
    result = build.build(client, real_matrix, real_matrix.get("tf2.21-cpu"),
                         progress=build.Progress(io.StringIO(), live=False))
    # python-base ends at 2d20af6c2828 (its image again under the next FROM), builder at 89eee980990c
    assert result.stage_images == ("2d20af6c2828", "89eee980990c")
    assert result.image_id == "sha256:d136583c0883"


def test_dropping_the_cache_removes_the_builder_stages_and_keeps_what_the_image_builds_on(real_matrix):
    client = FakeBuildClient(STAGED_BUILD, children={"2d20af6c2828"})  # python-base: the runtime's parent
    said = []
    result = build.build(client, real_matrix, real_matrix.get("tf2.21-cpu"),
                         progress=build.Progress(io.StringIO(), live=False))
    assert build.drop_build_cache(client, result, said.append) == 1
    assert client.removed == ["89eee980990c"]
    assert said == ["dropped the build cache of tf2.21-cpu: 1 builder-stage image(s) removed"]


def test_a_cache_that_cannot_be_dropped_is_said_and_does_not_fail_the_build(real_matrix):
    from docker.errors import APIError

    client = FakeBuildClient(STAGED_BUILD, children={"2d20af6c2828"})

    def refuse(image_id, **kwargs):
        raise APIError("driver failed", explanation="driver failed",
                       response=type("R", (), {"status_code": 500, "reason": "Server Error", "url": "/images"})())

    client.remove = refuse
    said = []
    result = build.BuildResult(real_matrix.get("tf2.21-cpu"), "x", 1, 1.0, ("89eee980990c",))
    assert build.drop_build_cache(client, result, said.append) == 0
    assert said[0].startswith("could not drop builder-stage image 89eee980990c")


def test_a_build_notes_its_stage_images_and_drop_build_cache_removes_them_later(real_matrix, tmp_path, monkeypatch):
    """The handover in `make test` drops a giver's cache after the taker is built, from the note
    its build left (no cached rebuild, which reads every copied file to check the cache)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    client = FakeBuildClient(STAGED_BUILD, children={"2d20af6c2828"})
    v = real_matrix.get("tf2.21-cpu")
    build.build(client, real_matrix, v, progress=build.Progress(io.StringIO(), live=False))
    note = tmp_path / "kerasenv" / "build-stages" / "tf2.21-cpu.json"
    assert json.loads(note.read_text()) == {"image_id": "sha256:d136583c0883",
                                            "stage_images": ["2d20af6c2828", "89eee980990c"],
                                            "cache_records": []}
    client._images["kerasenv:tf2.21-cpu"] = FakeImage("sha256:d136583c0883", ["kerasenv:tf2.21-cpu"])
    said = []
    assert build.drop_recorded_build_cache(client, v, said.append) == 1
    assert client.removed == ["89eee980990c"] and not note.exists()
    assert said == ["dropped the build cache of tf2.21-cpu: 1 builder-stage image(s) removed"]


def test_drop_build_cache_leaves_the_stages_of_a_note_about_another_image(real_matrix, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    client = FakeBuildClient(STAGED_BUILD)
    v = real_matrix.get("tf2.21-cpu")
    said = []
    assert build.drop_recorded_build_cache(client, v, said.append) == 0  # no note at all
    assert said[-1].startswith("kerasenv:tf2.21-cpu: no build of it noted here")
    build.build(client, real_matrix, v, progress=build.Progress(io.StringIO(), live=False))
    client._images["kerasenv:tf2.21-cpu"] = FakeImage("sha256:0ther", ["kerasenv:tf2.21-cpu"])  # rebuilt or pulled
    assert build.drop_recorded_build_cache(client, v, said.append) == 0
    assert client.removed == [] and "made another image" in said[-1]


def test_each_engine_notes_its_own_build_stages(monkeypatch, tmp_path):
    # Issue 43: CI's floor daemon (Docker 20.10) builds kerasenv:tf2.21-cpu beside the main engine;
    # one note per tag for both made the main engine's `drop-build-cache` find "another image".
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    main = build.stage_record_path("kerasenv:tf2.21-cpu")
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert build.stage_record_path("kerasenv:tf2.21-cpu") == main == tmp_path / "kerasenv/build-stages/tf2.21-cpu.json"
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/kerasenv-docker20.sock")
    floor = build.stage_record_path("kerasenv:tf2.21-cpu")
    assert floor == tmp_path / "kerasenv/build-stages/unix_run_kerasenv-docker20.sock/tf2.21-cpu.json"

"""BuildKit builds through the docker CLI (engine/buildkit.py, images/build.py's _buildkit_build).

No docker runs here: the docker CLI is a fake written into tmp_path that replays the CLI output
recorded on this machine (tests/fixtures/buildkit/README.md) and answers `version` and
`buildx version`; the Engine API calls build() and drop_build_cache() make are answered from
memory, the daemon's /version and /info with Docker 20.10's recorded answers
(tests/fixtures/engines/). The /system/df build cache records are constructed from the Engine
API's BuildCache schema (ID, Parent, Type, Description, InUse, Shared, Size, LastUsedAt).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kerasenv.engine import buildkit, engine_facts
from kerasenv.engine.docker_client import PROJECT_LABEL
from kerasenv.errors import BuildFailed, UsageError
from kerasenv.images import build

from ...conftest import REPO
from ..images.test_build import BOTH, TRIXIE

RECORDINGS = REPO / "tests" / "fixtures" / "buildkit"
ENGINES = REPO / "tests" / "fixtures" / "engines"
FAILED_20_10 = "failed-step-docker-20.10.24-cli.txt"
FAILED_BUILDX = "failed-step-buildx-docker-28.5.2-cli.txt"
COLD_20_10 = "tf2.21-cpu-cold-docker-20.10.24-cli.txt"
# What the recorded cold build wrote (its "writing image" line), so what its --iidfile held.
IID = "sha256:585de0ba0d4d75b3b2b215e44e73c4daa1c0f8ec867a1a280a18001def034d33"
# `docker version --format {{.Client.Version}}` of the two CLIs the recordings were made with.
CLI_20_10, CLI_28 = "20.10.24+dfsg1", "28.5.2+dfsg4"

FAILED_STEP = 'building tf2.21-cpu failed at step [3/3] RUN echo "kerasenv-test: about to fail" && exit 7: exit code 7'

FAKE_DOCKER = """\
#!{python}
# A docker CLI that answers `version` and `buildx version` as config.json says, and replays a
# recorded BuildKit build: the recording on stderr (where the CLI prints its progress), the image
# id of a recording that wrote one into --iidfile, exit 0; a recording that wrote none, exit 1.
import json, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "config.json")) as f:
    config = json.load(f)
args = sys.argv[1:]
call = {{"argv": sys.argv, "env": {{k: os.environ.get(k) for k in ("DOCKER_BUILDKIT", "BUILDKIT_PROGRESS",
                                                              "BUILDX_BUILDER", "HOME")}}}}
if "-f" in args:
    call["dockerfile_there"] = os.path.isfile(args[args.index("-f") + 1])
    call["context_there"] = os.path.isdir(args[-1])
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps(call) + "\\n")
if args[:1] == ["version"]:
    print(config["version"])  # printed even when the daemon cannot be reached (then exit 1)
    sys.exit(0 if config["daemon"] else 1)
if args[:2] == ["buildx", "version"]:
    if config["buildx"]:
        print("github.com/docker/buildx 0.29.1+ds1 0.29.1+ds1-4")
        sys.exit(0)
    print("docker: 'buildx' is not a docker command.\\nSee 'docker --help'", file=sys.stderr)
    sys.exit(1)
if "build" not in args[:2] or not config["recording"]:
    print("fake docker: unexpected call " + " ".join(args), file=sys.stderr)
    sys.exit(125)
with open(config["recording"], "rb") as f:
    recording = f.read()
sys.stderr.buffer.write(recording)
sys.stderr.flush()
written = re.search(rb"writing image (sha256:[0-9a-f]{{64}})", recording)
if written is None:
    sys.exit(1)
with open(args[args.index("--iidfile") + 1], "w") as f:
    f.write(written.group(1).decode())
sys.exit(0)
"""


def fake_docker(folder: Path, version: str | None, *, buildx: bool = False, recording: str | None = None,
                daemon: bool = True) -> Path:
    """An executable `docker` in `folder` (see FAKE_DOCKER); its calls land in folder/calls.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "version": version or "", "buildx": buildx, "daemon": daemon,
        "recording": str(RECORDINGS / recording) if recording else None}))
    path = folder / "docker"
    path.write_text(FAKE_DOCKER.format(python=sys.executable))
    path.chmod(0o755)
    return path


def calls(cli: Path) -> list[dict]:
    log = cli.parent / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def build_calls(cli: Path) -> list[dict]:
    return [c for c in calls(cli) if "build" in c["argv"][1:3]]


def recorded_engine(name: str) -> engine_facts.Engine:
    load = lambda what: json.loads((ENGINES / name / f"{what}.json").read_text())  # noqa: E731
    return engine_facts.parse(load("version"), load("info"))


class FakeImage:
    def __init__(self, image_id: str) -> None:
        self.id = image_id
        self.attrs = {"Architecture": "amd64", "Size": 574_551_101, "RootFS": {"Layers": ["sha256:l1", "sha256:l2"]}}

    def history(self):  # newest first, as the Engine API answers it
        return [{"CreatedBy": "RUN /bin/sh -c pip install # buildkit", "Size": 1_780_000_000},
                {"CreatedBy": "/bin/sh -c #(nop) ADD file:0123 in / ", "Size": 78_822_455}]


class FakeEngineClient:
    """What build() and drop_build_cache() ask the docker SDK on the BuildKit path, answered from
    memory: the Docker 20.10 daemon's recorded /version and /info, images, /system/df's build
    cache records (`cache`), and POST /build/prune (`pruned`: the answer for each record id, an
    exception raised like docker-py's _result raises an HTTP error)."""

    def __init__(self, cache=(), pruned=None, tags=None) -> None:
        self.api, self.images = self, self
        self.cache, self.pruned, self.tags = list(cache), dict(pruned or {}), dict(tags or {})
        self.df_calls, self.prune_calls = 0, []

    def version(self):
        return json.loads((ENGINES / "docker-20.10-debian" / "version.json").read_text())

    def info(self):
        return json.loads((ENGINES / "docker-20.10-debian" / "info.json").read_text())

    def get(self, ref):
        return FakeImage(self.tags.get(ref, ref))

    def df(self):
        self.df_calls += 1
        return {"LayersSize": 0, "Images": [], "Containers": [], "Volumes": [],
                "BuildCache": [dict(r) for r in self.cache]}

    def _url(self, path, *args, **kwargs):
        return "http+docker://localhost/v1.41" + path

    def _post(self, url, **kwargs):
        self.prune_calls.append((url, kwargs))
        return json.loads(kwargs["params"]["filters"])["id"][0]  # the "response"

    def _result(self, response, json=False):
        assert json is True
        answer = self.pruned.get(response, {"CachesDeleted": None, "SpaceReclaimed": 0})
        if isinstance(answer, Exception):
            raise answer
        return answer

    def pruned_ids(self) -> list[str]:
        return [json.loads(kwargs["params"]["filters"])["id"][0] for _, kwargs in self.prune_calls]


def record(record_id: str, last_used: str | None = "2026-12-06T10:02:26.951182683Z", *, parent: str = "",
           description: str = "mount / from exec /bin/sh -c true", in_use: bool = False, size: int = 1000) -> dict:
    """A /system/df BuildCache entry as Docker 20.10 (API 1.41) writes it."""
    return {"ID": record_id, "Parent": parent, "Type": "regular", "Description": description, "InUse": in_use,
            "Shared": False, "Size": size, "CreatedAt": "2026-12-06T09:40:12.112233445Z", "LastUsedAt": last_used,
            "UsageCount": 1}


# python-base's step, which every variant on the suite starts from (kept through a drop), and the
# runtime's last step, which holds the security fixes and is the image's own (dropped: kept, it kept
# every record under it, the venv and CUDA layers, after the image was gone; issue 52).
DEBIAN_STEP = ('mount / from exec /bin/bash -o pipefail -c bash /tmp/build/debian-updates.sh --point-release '
               '"trixie@2026-11-21T09:15:44Z" ca-certificates python3 graphviz')
LAST_STEP = ('mount / from exec /bin/bash -o pipefail -c bash /tmp/build/debian-updates.sh "trixie@2026-11-21T09:15:44Z '
             'trixie-updates@2026-12-05T02:11:04Z trixie-security@2026-12-05T03:33:30Z"  && ldconfig')
SINCE = datetime(2026, 12, 6, 10, 2, 0, tzinfo=timezone.utc)  # when the build below starts


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The folder tempfile.mkdtemp writes into, so a test sees what a build leaves there."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def buildkit_build(tmp_path, monkeypatch, private_tmp):
    """build() on the BuildKit path with a fake CLI: no Debian archive read, notes in tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("KERASENV_DEBIAN_UPDATES", BOTH)
    monkeypatch.setattr(build, "_debian_states", {})
    monkeypatch.setattr(buildkit, "_found", {})
    monkeypatch.setattr(buildkit, "now", lambda: SINCE)
    monkeypatch.setenv("KERASENV_BUILDER", "buildkit")
    monkeypatch.setenv("BUILDKIT_PROGRESS", "tty")  # the user's: the build must print plain lines all the same

    def run(cli: Path, client: FakeEngineClient, real_matrix):
        monkeypatch.setenv("KERASENV_DOCKER_CLI", str(cli))
        out = io.StringIO()
        try:
            return build.build(client, real_matrix, real_matrix.get("tf2.21-cpu"), builder="buildkit",
                               progress=build.Progress(out, live=False)), out.getvalue()
        except BuildFailed as exc:
            exc.progress = out.getvalue()
            raise

    return run


def note_path(tmp_path: Path) -> Path:
    return tmp_path / "xdg-cache" / "kerasenv" / "build-stages" / "tf2.21-cpu.json"


# --- a build through the recorded CLIs ----------------------------------------------------------

@pytest.mark.parametrize("recording, version, buildx, argv_head", [
    (FAILED_20_10, CLI_20_10, False, ["build"]),
    (FAILED_BUILDX, CLI_28, True, ["buildx", "build", "--builder", "default", "--load"]),
], ids=["docker-20.10", "buildx-28.5.2"])
def test_a_failed_step_names_the_step_its_exit_code_and_its_last_lines(
        tmp_path, real_matrix, buildkit_build, private_tmp, recording, version, buildx, argv_head):
    cli = fake_docker(tmp_path / "cli", version, buildx=buildx, recording=recording)
    client = FakeEngineClient(cache=[record("x")])
    with pytest.raises(BuildFailed) as caught:
        buildkit_build(cli, client, real_matrix)
    assert caught.value.message == FAILED_STEP
    assert "kerasenv-test: about to fail" in caught.value.details
    assert "preparing the broken step" in caught.value.details  # the lines before it too
    progress = caught.value.progress
    assert "[tf2.21-cpu] step [3/3] RUN echo \"kerasenv-test: about to fail\" && exit 7" in progress
    assert "[tf2.21-cpu]   kerasenv-test: about to fail" in progress
    assert ("CACHED [1/3] FROM docker.io/library/debian:bookworm-slim" in progress) == ("#4 CACHED" in (
        RECORDINGS / recording).read_text())  # buildx's recording had the base cached, 20.10's not
    (ran,) = build_calls(cli)
    assert ran["argv"][1:1 + len(argv_head)] == argv_head
    assert client.df_calls == 0 and not note_path(tmp_path).exists()  # a failed build notes no cache
    assert list(private_tmp.iterdir()) == []  # the context folder went with the failure


def test_a_build_returns_the_iid_and_the_cache_records_it_used(tmp_path, real_matrix, buildkit_build, private_tmp):
    cli = fake_docker(tmp_path / "cli", CLI_20_10, recording=COLD_20_10)
    client = FakeEngineClient(cache=[
        record("older", "2026-12-06T09:40:12.5Z"),  # an earlier build's: not this one's
        record("fresh-venv", "2026-12-06T10:02:26.951182683Z", size=1_780_000_000),
        record("never-used", "0001-01-01T00:00:00Z"),
        record("fresh-debian", "2026-12-06T10:03:01.000000001Z", description=DEBIAN_STEP),
        record("exactly-at-the-start", "2026-12-06T10:02:00Z"),
    ])
    result, progress = buildkit_build(cli, client, real_matrix)

    assert result.image_id == IID and result.builder == "buildkit" and result.stage_images == ()
    assert result.cache_records == ("fresh-venv", "fresh-debian", "exactly-at-the-start")
    assert result.size_bytes == 1_780_000_000 + 78_822_455  # the history's layers, never attrs["Size"]
    assert json.loads(note_path(tmp_path).read_text()) == {
        "image_id": IID, "stage_images": [], "cache_records": ["fresh-venv", "fresh-debian", "exactly-at-the-start"]}

    lines = progress.splitlines()
    assert lines[0] == "building tf2.21-cpu"
    for expected in (
        "[tf2.21-cpu] step [python-base 1/3] FROM docker.io/library/debian:trixie-slim",
        "[tf2.21-cpu]   CACHED [build-ca 1/1] COPY build/build-ca.md tf2.21-cpu/build-ca.pe[m] /",
        "[tf2.21-cpu]   CACHED [python-base 2/3] COPY build/debian-updates.sh /tmp/build/",
        "[tf2.21-cpu] step [builder 3/5] RUN bash /tmp/build/install-locked-venv.sh /opt/venv 3.13 "
        "/tmp/build/requirements.lock",
        "[tf2.21-cpu]   Setting up python3-minimal (3.13.5-1) ...",
        "[tf2.21-cpu] step [runtime 7/7] WORKDIR /workspace",
    ):
        assert expected in lines
    assert len([line for line in lines if "   CACHED " in line]) == 2  # the recording's two cache hits
    assert not [line for line in lines if "[internal]" in line or "sha256:" in line]
    # Every step the recording opens is shown (#9 twice: BuildKit reopens it after "#9 ...").
    opened = re.findall(r"^#\d+ \[(?!internal)([^\]]+)\] ", (RECORDINGS / COLD_20_10).read_text(), re.M)
    shown = [re.match(r"\[tf2.21-cpu\] step \[([^\]]+)\] ", line).group(1) for line in lines
             if line.startswith("[tf2.21-cpu] step [")]
    assert shown == opened and len(opened) == 20 and opened.count("build-trust 1/3") == 2
    assert lines[-1].startswith("built kerasenv:tf2.21-cpu: 1.86 GB uncompressed, ")
    assert lines[-1].endswith(f"s (BuildKit (DOCKER_BUILDKIT=1 docker build, CLI {CLI_20_10} at {cli}))")

    (ran,) = build_calls(cli)
    argv = ran["argv"]
    assert argv[:3] == [str(cli), "build", "--progress=plain"]
    assert argv[argv.index("-t") + 1] == "kerasenv:tf2.21-cpu"
    assert argv[argv.index("--label") + 1] == f"{PROJECT_LABEL}=kerasenv"
    build_args = [argv[i + 1] for i, word in enumerate(argv) if word == "--build-arg"]
    assert f"DEBIAN_UPDATES={TRIXIE}" in build_args
    assert "BASE_IMAGE=" + real_matrix.get("tf2.21-cpu").base_image in build_args
    assert "--no-cache" not in argv and "--network" not in argv
    context = Path(argv[-1])
    assert argv[argv.index("-f") + 1] == str(context / "tf2.21-cpu" / "Dockerfile")
    assert context.parent.parent == private_tmp and context.parent.name.startswith("kerasenv-build-")
    assert ran["dockerfile_there"] and ran["context_there"]  # while the CLI ran
    assert ran["env"]["DOCKER_BUILDKIT"] == "1" and ran["env"]["BUILDKIT_PROGRESS"] is None
    assert list(private_tmp.iterdir()) == []  # the context (and the iid file) went afterwards


def test_a_buildkit_build_noted_here_is_dropped_later_but_its_debian_step(tmp_path, real_matrix, buildkit_build):
    """`kerasenv drop-build-cache` after `kerasenv build`: the note the build left names the records."""
    cli = fake_docker(tmp_path / "cli", CLI_20_10, recording=COLD_20_10)
    client = FakeEngineClient(
        cache=[record("older", "2026-12-06T09:40:12.5Z"), record("fresh-venv"),
               record("fresh-debian", description=DEBIAN_STEP), record("fresh-fixes", description=LAST_STEP)],
        pruned={"fresh-venv": {"CachesDeleted": ["fresh-venv"], "SpaceReclaimed": 1_780_000_000},
                "fresh-fixes": {"CachesDeleted": ["fresh-fixes"], "SpaceReclaimed": 14_000_000}},
        tags={"kerasenv:tf2.21-cpu": IID})
    buildkit_build(cli, client, real_matrix)
    said = []
    assert build.drop_recorded_build_cache(client, real_matrix.get("tf2.21-cpu"), said.append) == 2
    assert sorted(client.pruned_ids()) == ["fresh-fixes", "fresh-venv"]
    assert said == ["dropped the build cache of tf2.21-cpu: 2 BuildKit cache record(s), 1.79 GB"]
    assert not note_path(tmp_path).exists()



def test_a_cache_list_the_engine_keeps_failing_costs_the_drop_and_not_the_built_image(
        tmp_path, real_matrix, buildkit_build, monkeypatch):
    """The cache drop after a build reads /system/df; a lasting 500 there (an image removed
    beside it, moby/moby#21215) leaves the cache and says so, and the build still succeeds."""
    from docker.errors import APIError

    monkeypatch.setattr("time.sleep", lambda seconds: None)  # records() asks again after a pause
    cli = fake_docker(tmp_path / "cli", CLI_20_10, recording=COLD_20_10)
    client = FakeEngineClient(cache=[record("fresh-venv")], tags={"kerasenv:tf2.21-cpu": IID})
    buildkit_build(cli, client, real_matrix)

    class Response:
        status_code = 500
        reason = "Internal Server Error"

    def broken():
        raise APIError("layer does not exist", response=Response(), explanation="layer does not exist")

    client.df = broken
    said = []
    assert build.drop_recorded_build_cache(client, real_matrix.get("tf2.21-cpu"), said.append) == 0
    assert client.pruned_ids() == []
    assert said == ["could not read the build cache to drop that of tf2.21-cpu (layer does not exist): "
                    "it stays until `docker builder prune`"]


# --- choose --------------------------------------------------------------------------------------

@pytest.fixture
def no_cli_run(monkeypatch):
    """Fails a test that looks for a docker CLI."""
    def look(*args, **kwargs):
        raise AssertionError("a docker CLI was looked for")

    monkeypatch.setattr(buildkit, "find_cli", look)
    monkeypatch.setattr(buildkit.subprocess, "run", look)


DOCKER = recorded_engine("docker-20.10-debian")
PODMAN = engine_facts.parse({"Components": [{"Name": "Podman Engine", "Version": "5.8.6"}], "Version": "5.8.6"}, {})


def test_classic_is_never_buildkit_and_looks_for_no_cli(monkeypatch, no_cli_run):
    assert buildkit.choose(DOCKER, "classic") is None
    assert buildkit.choose(PODMAN, "classic") is None
    monkeypatch.setenv("KERASENV_BUILDER", "classic")
    assert buildkit.choose(DOCKER) is None


def test_podman_builds_with_the_classic_builder_and_refuses_buildkit_in_one_line(monkeypatch, no_cli_run):
    assert PODMAN.is_podman and recorded_engine("podman-5.8.6-sid").is_podman
    assert buildkit.choose(PODMAN, "auto") is None
    monkeypatch.delenv("KERASENV_BUILDER")
    assert buildkit.choose(PODMAN) is None  # auto by default
    with pytest.raises(UsageError) as caught:
        buildkit.choose(PODMAN, "buildkit")
    assert "--builder classic" in caught.value.message and "Podman" in caught.value.message
    assert "\n" not in caught.value.message


def test_buildkit_without_a_usable_cli_names_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.setattr(buildkit, "_found", {})
    missing = tmp_path / "no-such" / "docker"
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(missing))
    assert buildkit.choose(DOCKER, "auto") is None  # auto: the classic builder
    with pytest.raises(UsageError) as caught:
        buildkit.choose(DOCKER, "buildkit")
    message = caught.value.message
    assert f"(tried: {missing})" in message and "--builder classic" in message and "KERASENV_DOCKER_CLI" in message
    monkeypatch.setattr(buildkit, "candidates", lambda: [])
    with pytest.raises(UsageError, match=r"tried: no docker CLI on PATH"):
        buildkit.choose(DOCKER, "buildkit")


def test_a_usable_cli_is_chosen_by_auto_and_by_buildkit(tmp_path, monkeypatch):
    monkeypatch.setattr(buildkit, "_found", {})
    cli = fake_docker(tmp_path / "cli", CLI_20_10)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(cli))
    chosen = buildkit.choose(DOCKER, "buildkit")
    assert chosen == buildkit.BuildkitCli(str(cli), CLI_20_10, buildx=False)
    assert buildkit.choose(DOCKER, "auto") is chosen
    monkeypatch.delenv("KERASENV_BUILDER")
    assert buildkit.choose(DOCKER) is chosen


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_an_unknown_builder_is_a_usage_error_naming_the_choices(monkeypatch, no_cli_run, how):
    if how == "environment":
        monkeypatch.setenv("KERASENV_BUILDER", "fast")
    with pytest.raises(UsageError) as caught:
        buildkit.choose(DOCKER, "fast" if how == "argument" else None)
    assert "'fast'" in caught.value.message and "auto, buildkit, classic" in caught.value.message


# --- find_cli: which docker CLI -------------------------------------------------------------------

@pytest.fixture
def fresh_search(monkeypatch):
    monkeypatch.setattr(buildkit, "_found", {})
    monkeypatch.delenv("KERASENV_DOCKER_CLI", raising=False)


def test_a_cli_of_23_or_later_without_buildx_is_passed_over_for_a_20_10_one(tmp_path, monkeypatch, fresh_search):
    docker28 = fake_docker(tmp_path / "docker-28", CLI_28, buildx=False)
    docker20 = fake_docker(tmp_path / "docker-20.10", CLI_20_10)
    monkeypatch.setattr(buildkit, "candidates", lambda: [str(docker28), str(docker20)])
    found = buildkit.find_cli()
    assert found == buildkit.BuildkitCli(str(docker20), CLI_20_10, buildx=False)
    assert [c["argv"][1:] for c in calls(docker28)] == [["version", "--format", "{{.Client.Version}}"],
                                                        ["buildx", "version"]]
    assert buildkit.find_cli() is found  # once per process: nothing runs again
    assert len(calls(docker28)) == 2 and len(calls(docker20)) == 2


def test_a_cli_on_path_without_buildx_and_nothing_else_is_no_buildkit(tmp_path, monkeypatch, fresh_search):
    docker28 = fake_docker(tmp_path / "docker-28", CLI_28, buildx=False)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(docker28))
    assert buildkit.find_cli() is None


def test_a_cli_whose_buildx_works_builds_with_buildx(tmp_path, monkeypatch, fresh_search):
    docker28 = fake_docker(tmp_path / "docker-28", CLI_28, buildx=True)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(docker28))
    found = buildkit.find_cli()
    assert found == buildkit.BuildkitCli(str(docker28), CLI_28, buildx=True)
    assert found.argv() == [str(docker28), "buildx", "build", "--builder", "default", "--load"]
    assert found.describe() == f"BuildKit (docker buildx build, CLI {CLI_28} at {docker28})"


def test_a_20_10_cli_with_the_buildx_plugin_takes_buildx(tmp_path, monkeypatch, fresh_search):
    docker20 = fake_docker(tmp_path / "docker-20.10", CLI_20_10, buildx=True)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(docker20))
    assert buildkit.find_cli().buildx is True


def test_a_20_10_cli_builds_with_docker_buildkit_1_and_plain_progress(tmp_path, monkeypatch, fresh_search):
    # The daemon not reachable: `docker version` prints the client's version and exits 1.
    docker20 = fake_docker(tmp_path / "docker-20.10", CLI_20_10, daemon=False)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(docker20))
    monkeypatch.setenv("BUILDKIT_PROGRESS", "tty")
    monkeypatch.setenv("BUILDX_BUILDER", "my-container-builder")
    found = buildkit.find_cli()
    assert found == buildkit.BuildkitCli(str(docker20), CLI_20_10, buildx=False)
    assert found.argv() == [str(docker20), "build"]
    env = found.env()
    assert env["DOCKER_BUILDKIT"] == "1" and "BUILDKIT_PROGRESS" not in env and "BUILDX_BUILDER" not in env
    assert env["PATH"] == os.environ["PATH"]  # the rest of the environment kept
    assert os.environ["BUILDKIT_PROGRESS"] == "tty"  # the process's own environment untouched
    assert found.describe() == f"BuildKit (DOCKER_BUILDKIT=1 docker build, CLI {CLI_20_10} at {docker20})"


def test_a_cli_that_names_no_version_or_does_not_run_is_skipped(tmp_path, monkeypatch, fresh_search):
    silent = fake_docker(tmp_path / "silent", None, buildx=True)
    docker20 = fake_docker(tmp_path / "docker-20.10", CLI_20_10)
    monkeypatch.setattr(buildkit, "candidates", lambda: [str(tmp_path / "missing" / "docker"), str(silent),
                                                         str(docker20)])
    assert buildkit.find_cli().path == str(docker20)
    assert [c["argv"][1] for c in calls(silent)] == ["version"]


def test_candidates_are_the_explicit_cli_alone_else_docker_on_path_then_debians(tmp_path, monkeypatch):
    real = fake_docker(tmp_path / "opt" / "docker-28", CLI_28)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").symlink_to(real)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("KERASENV_DOCKER_CLI", raising=False)
    debians = {"here": True}
    access = os.access

    def fake_access(path, mode, **kwargs):
        if os.fspath(path) == "/usr/bin/docker":
            return debians["here"]
        return access(path, mode, **kwargs)

    monkeypatch.setattr(buildkit.os, "access", fake_access)
    assert buildkit.candidates() == [os.path.realpath(real), "/usr/bin/docker"]  # by its real path
    debians["here"] = False
    assert buildkit.candidates() == [os.path.realpath(real)]
    monkeypatch.setenv("KERASENV_DOCKER_CLI", "/somewhere/docker")
    assert buildkit.candidates() == ["/somewhere/docker"]  # alone, as given


# --- the build cache records -----------------------------------------------------------------------

def test_records_are_read_with_nanosecond_times_and_a_zero_time_is_none():
    df = {"BuildCache": [
        record("child", "2026-12-06T10:02:26.951182683Z", parent="parent", in_use=True, size=1234),
        record("parent", "0001-01-01T00:00:00Z", description=DEBIAN_STEP),
        record("never", None),
        record("offset", "2026-12-06T11:02:26+01:00"),
        {"ID": "", "Description": "no id: not a record"},
    ]}
    child, parent, never, offset = buildkit.parse_records(df)
    assert child == buildkit.CacheRecord(id="child", description="mount / from exec /bin/sh -c true", size=1234,
                                         in_use=True, shared=False,
                                         last_used=datetime(2026, 12, 6, 10, 2, 26, 951182, tzinfo=timezone.utc),
                                         parent="parent", kind="regular",
                                         created=datetime(2026, 12, 6, 9, 40, 12, 112233, tzinfo=timezone.utc))
    assert parent.last_used is None and parent.parent is None and parent.description == DEBIAN_STEP
    assert never.last_used is None
    assert offset.last_used == datetime(2026, 12, 6, 10, 2, 26, tzinfo=timezone.utc)
    assert buildkit.parse_records({"BuildCache": None}) == [] == buildkit.parse_records({})


def test_used_since_lists_the_records_stamped_at_or_after_the_start():
    records = buildkit.parse_records({"BuildCache": [
        record("before", "2026-12-06T10:01:59.999999999Z"), record("at", "2026-12-06T10:02:00Z"),
        record("after", "2026-12-06T10:02:00.000001Z"), record("zero", "0001-01-01T00:00:00Z"),
        record("null", None)]})
    assert buildkit.used_since(records, SINCE) == ["at", "after"]


def test_a_record_made_since_the_start_is_the_builds_even_before_it_is_released():
    made = record("made", None)
    made["CreatedAt"] = "2026-12-06T10:02:30Z"
    assert buildkit.used_since(buildkit.parse_records({"BuildCache": [made, record("old", None)]}), SINCE) == ["made"]


def test_the_records_are_read_once_the_build_has_released_them():
    """The CLI ends at the export; the daemon releases the final stage's records a moment later
    (read at once, the first cold CI run with BuildKit kept 36 GB of them past their images)."""
    answers = []
    for busy in (True, True, False):
        answers.append({"BuildCache": [record("mine", in_use=busy), record("other-build", in_use=True)]})

    class Daemon:
        def __init__(self):
            self.api = self

        def df(self):
            return answers.pop(0) if len(answers) > 1 else answers[0]

    (mine, other) = buildkit.released(Daemon(), {"mine"}, timeout=5, poll=0.01)
    assert not mine.in_use and other.in_use  # another build's record in use is not waited for
    assert len(answers) == 1
    stuck = {"BuildCache": [record("mine", in_use=True)]}
    daemon = Daemon()
    answers[:] = [stuck]
    (still,) = buildkit.released(daemon, {"mine"}, timeout=0.05, poll=0.01)  # gives up: a drop skips it
    assert still.in_use


def test_children_come_before_their_parents():
    records = buildkit.parse_records({"BuildCache": [
        record("base"), record("middle", parent="base"), record("leaf", parent="middle"), record("alone"),
        record("loop-a", parent="loop-b"), record("loop-b", parent="loop-a")]})
    assert buildkit.children_first(records, ["base", "alone", "middle", "leaf"]) == ["leaf", "middle", "base", "alone"]
    assert buildkit.children_first(records, ["middle"]) == ["middle"]
    assert sorted(buildkit.children_first(records, ["loop-a", "loop-b"])) == ["loop-a", "loop-b"]  # ends


def test_children_come_before_their_parents_on_api_1_42_and_later():
    # API >= 1.42 (Docker 23+) leaves Parent empty and lists Parents (moby api/server/router/system).
    records = buildkit.parse_records({"BuildCache": [
        {"ID": "base", "Parents": []}, {"ID": "leaf", "Parents": ["base"]}]})
    assert buildkit.children_first(records, ["base", "leaf"]) == ["leaf", "base"]


def test_prune_posts_once_per_record_sums_what_went_and_says_what_did_not():
    from docker.errors import APIError

    refused = APIError("500 Server Error", explanation="failed to prune: in use",
                       response=type("R", (), {"status_code": 500, "reason": "Server Error", "url": "/build/prune"})())
    client = FakeEngineClient(pruned={
        "a": {"CachesDeleted": ["a"], "SpaceReclaimed": 1_000_000_000},
        "b": refused,
        "c": {"CachesDeleted": ["c", "c-mount"], "SpaceReclaimed": 250_000_000},
        "d": ConnectionError("daemon went away"),
    })
    result = buildkit.prune(client, ["a", "b", "c", "d", "e"])
    assert result.removed == 3 and result.bytes == 1_250_000_000
    assert result.errors == ["b: failed to prune: in use", "d: daemon went away"]
    assert [url for url, _ in client.prune_calls] == ["http+docker://localhost/v1.41/build/prune"] * 5
    assert [json.loads(kwargs["params"]["filters"]) for _, kwargs in client.prune_calls] == \
        [{"id": [i]} for i in "abcde"]
    # all: else a record under an image's layer (Shared) is left, and outlives the image
    assert {kwargs["params"]["all"] for _, kwargs in client.prune_calls} == {"1"}
    assert buildkit.prune(client, []) == buildkit.PruneResult()


# --- drop_build_cache of a BuildKit build ------------------------------------------------------------

@pytest.fixture
def notes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    folder = build._notes_folder()
    folder.mkdir(parents=True)
    return folder


def test_dropping_keeps_what_another_note_names_what_is_in_use_and_the_debian_step(real_matrix, notes):
    (notes / "tf2.21-cpu.json").write_text(json.dumps({"image_id": "sha256:me", "stage_images": [],
                                                       "cache_records": ["a", "b", "c", "d"]}))
    (notes / "jax0.12-cpu.json").write_text(json.dumps({"image_id": "sha256:other", "stage_images": [],
                                                        "cache_records": ["b"]}))
    (notes / "broken.json").write_text("{not json")
    client = FakeEngineClient(
        cache=[record("a", size=1_234_000_000), record("b"), record("c", in_use=True),
               record("d", description=DEBIAN_STEP), record("unrelated")],
        pruned={"a": {"CachesDeleted": ["a"], "SpaceReclaimed": 1_234_000_000}})
    said = []
    result = build.BuildResult(real_matrix.get("tf2.21-cpu"), "sha256:me", 0, 0.0, (),
                               ("a", "b", "c", "d", "gone-already"), "buildkit")
    assert build.drop_build_cache(client, result, said.append) == 1
    assert client.pruned_ids() == ["a"]
    assert said == ["dropped the build cache of tf2.21-cpu: 1 BuildKit cache record(s), 1.23 GB"]
    assert sorted(p.name for p in notes.iterdir()) == ["broken.json", "jax0.12-cpu.json"]  # its own note went


def test_dropping_prunes_children_first_and_says_what_could_not_go(real_matrix, notes):
    from docker.errors import APIError

    client = FakeEngineClient(
        cache=[record("parent"), record("child", parent="parent")],
        pruned={"child": APIError("500", explanation="record busy"),
                "parent": {"CachesDeleted": ["parent"], "SpaceReclaimed": 5_000_000}})
    said = []
    result = build.BuildResult(real_matrix.get("tf2.21-cpu"), "sha256:me", 0, 0.0, (), ("parent", "child"),
                               "buildkit")
    assert build.drop_build_cache(client, result, said.append) == 1
    assert client.pruned_ids() == ["child", "parent"]
    assert said == ["could not drop build cache record child: record busy",
                    "dropped the build cache of tf2.21-cpu: 1 BuildKit cache record(s), 0.01 GB"]


def test_a_buildkit_build_that_used_no_record_drops_nothing(real_matrix, notes):
    client = FakeEngineClient(cache=[record("a")])
    said = []
    result = build.BuildResult(real_matrix.get("tf2.21-cpu"), "sha256:me", 0, 0.0, (), (), "buildkit")
    assert build.drop_build_cache(client, result, said.append) == 0
    assert client.prune_calls == []
    assert said == ["dropped the build cache of tf2.21-cpu: 0 BuildKit cache record(s), 0.00 GB"]


# --- what the doctor says about the builder ------------------------------------------------------

def test_the_doctor_line_names_the_cli_that_builds(tmp_path, monkeypatch, fresh_search):
    monkeypatch.setenv("KERASENV_BUILDER", "auto")
    docker28 = fake_docker(tmp_path / "docker-28", CLI_28, buildx=True)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(docker28))
    kind, said, fix = buildkit.what_builds(recorded_engine("docker-20.10-debian"))
    assert (kind, fix) == ("buildkit", "")
    assert said == f"builds use BuildKit (docker buildx build, CLI {CLI_28} at {docker28})"


def test_the_doctor_line_says_why_builds_are_classic_and_how_to_get_buildkit(tmp_path, monkeypatch, fresh_search):
    monkeypatch.setenv("KERASENV_BUILDER", "auto")
    docker28 = fake_docker(tmp_path / "docker-28", CLI_28, buildx=False)
    monkeypatch.setenv("KERASENV_DOCKER_CLI", str(docker28))
    kind, said, fix = buildkit.what_builds(recorded_engine("docker-20.10-debian"))
    assert kind == "classic"
    assert said.startswith(f"no docker CLI here runs BuildKit (tried: {docker28} {CLI_28})")
    assert "docker-buildx" in fix and "KERASENV_DOCKER_CLI" in fix


def test_the_doctor_line_for_podman_and_for_classic_runs_no_cli(monkeypatch, no_cli_run):
    podman = engine_facts.parse({"Components": [{"Name": "Podman Engine", "Version": "5.8.6"}],
                                 "Version": "5.8.6"}, {})
    monkeypatch.setenv("KERASENV_BUILDER", "auto")
    assert buildkit.what_builds(podman)[:2] == ("classic", "Podman builds through its Docker API (Buildah), "
                                                           "not BuildKit")
    monkeypatch.setenv("KERASENV_BUILDER", "classic")
    assert buildkit.what_builds(recorded_engine("docker-20.10-debian"))[0] == "classic"


def test_the_doctor_reports_the_builder_line(monkeypatch):
    from kerasenv.host import doctor
    from kerasenv.host.facts import HostFacts

    facts = HostFacts(nvidia=doctor.probe_nvidia("/nonexistent/nvidia-smi"),
                      engine=recorded_engine("docker-20.10-debian"), docker_version="20.10.24",
                      builder=("classic", "no docker CLI here runs BuildKit (tried: x)", "install buildx"))
    (line,) = [c for c in doctor.host_checks(facts) if c.name == "builder"]
    assert (line.message, line.fix) == ("no docker CLI here runs BuildKit (tried: x)", "install buildx")


def test_a_flavours_drop_is_named_by_its_tag(real_matrix, notes):
    client = FakeEngineClient(cache=[record("a")], pruned={"a": {"CachesDeleted": ["a"], "SpaceReclaimed": 0}})
    said = []
    result = build.BuildResult(real_matrix.get("tf2.21-cpu"), "sha256:lab", 0, 0.0, (), ("a",), "buildkit",
                               "kerasenv:tf2.21-cpu-jupyter")
    build.drop_build_cache(client, result, said.append)
    assert said == ["dropped the build cache of tf2.21-cpu-jupyter: 1 BuildKit cache record(s), 0.00 GB"]


def test_a_500_from_the_cache_list_is_asked_again_and_a_lasting_one_is_raised():
    """Docker 20.10 answers /system/df with a 500 ("layer does not exist") while another lane
    removes an image (moby/moby#21215): CI's run of d56adce failed a built image on it."""
    from docker.errors import APIError

    class Response:
        status_code = 500
        reason = "Internal Server Error"

    class Daemon:
        def __init__(self, failures):
            self.api, self.failures, self.calls = self, failures, 0

        def df(self):
            self.calls += 1
            if self.calls <= self.failures:
                raise APIError("layer does not exist", response=Response(), explanation="layer does not exist")
            return {"BuildCache": [record("mine")]}

    flaky = Daemon(failures=2)
    assert [r.id for r in buildkit.records(flaky, pause=0)] == ["mine"] and flaky.calls == 3
    lasting = Daemon(failures=99)
    with pytest.raises(APIError):
        buildkit.records(lasting, attempts=3, pause=0)
    assert lasting.calls == 3


def test_from_api_1_42_only_the_build_cache_is_asked_for():
    """Docker 23+ computes only the build cache with type=build-cache: no image is walked."""
    asked = []

    class Daemon:
        _version = "1.51"

        def __init__(self):
            self.api = self

        def _url(self, path):
            return "http+docker://localhost/v1.51" + path

        def _get(self, url, params=None):
            asked.append((url, params))
            return "response"

        def _result(self, response, json=False):
            return {"BuildCache": [record("mine")]}

        def df(self):
            raise AssertionError("the whole df is not asked for from API 1.42")

    assert [r.id for r in buildkit.records(Daemon())] == ["mine"]
    assert asked == [("http+docker://localhost/v1.51/system/df", {"type": "build-cache"})]

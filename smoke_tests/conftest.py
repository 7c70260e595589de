"""Acceptance suite for built kerasenv images: pytest + pytest-testinfra + docker SDK.

    pytest smoke_tests --variant tf2.21-cpu          # kerasenv:<id> built here
    pytest smoke_tests --image REGISTRY/kerasenv:TAG # any image; its io.kerasenv.variant
                                                     # label names the matrix entry
    pytest smoke_tests --variant ID --gpu            # GPU tests too; a missing GPU FAILS
    pytest smoke_tests --all-variants                # every Debian-based variant of the matrix
                                                     # (what `make test` and CI run); an image
                                                     # that is not built is an error
    pytest smoke_tests --image kerasenv:ID-arm64 -m arm64_ci   # a variant's arm64 image (issue 36),
                                                     # under qemu on amd64: the cheap, decisive checks

Each test module declares the image families it applies to (FAMILIES) and, where not both,
the architectures (ARCHES); test ids carry the variant id (and `@arm64` for an arm64 image).
One tracked container per test module and image, always removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kerasenv.engine import docker_client
from kerasenv.matrix import schema as matrix_mod

from . import groups, platforms

TEST_LABEL = "io.kerasenv.acceptance"
# This session's value of TEST_LABEL: the leftover check at the end looks at this session's
# containers only, so two acceptance runs at once (two checkouts, two images) cannot fail
# each other's check.
SESSION = uuid.uuid4().hex
ALL_FAMILIES = frozenset({"cpu", "cuda", "rocm"})
ALL_ARCHES = frozenset({platforms.AMD64, platforms.ARM64})


def pytest_addoption(parser):
    group = parser.getgroup("kerasenv acceptance")
    group.addoption("--variant", action="append", default=[], metavar="ID",
                    help="test kerasenv:<ID> (repeatable)")
    group.addoption("--image", action="append", default=[], metavar="REF",
                    help="test any image reference (repeatable)")
    group.addoption("--all-variants", action="store_true",
                    help="test kerasenv:<id> for every variant `kerasenv build --all` builds (all but ROCm)")
    group.addoption("--gpu", action="store_true",
                    default=os.environ.get("KERASENV_REQUIRE_GPU", "") in ("1", "true", "yes"),
                    help="run the GPU tests (also KERASENV_REQUIRE_GPU=1); a missing GPU is a failure")
    group.addoption("--once-per-group", action="store_true",
                    default=os.environ.get("KERASENV_ONCE_PER_GROUP", "") in ("1", "true", "yes"),
                    help="run the checks marked once_per_group only on the first variant of their group in the "
                         "matrix (same backend, Keras major, Python: smoke_tests/groups.py) and deselect them, "
                         "naming that variant, on the others: what `make test` runs (also KERASENV_ONCE_PER_GROUP=1)")
    group.addoption("--checkout-probes", action="store_true",
                    default=os.environ.get("KERASENV_CHECKOUT_PROBES", "") in ("1", "true", "yes"),
                    help="mount this checkout's images/common/kerasenv_image over the image's own (read-only) "
                         "in every container: test probes changed since the image was built, without a rebuild "
                         "(also KERASENV_CHECKOUT_PROBES=1)")


CHECKOUT_PACKAGE = Path(__file__).resolve().parent.parent / "images" / "common" / "kerasenv_image"
_CHECKOUT_MOUNT: dict = {}


def pytest_configure(config):
    if config.getoption("checkout_probes", default=False):
        _CHECKOUT_MOUNT[str(CHECKOUT_PACKAGE)] = {"bind": "/opt/kerasenv/kerasenv_image", "mode": "ro"}
    config.addinivalue_line("markers", "gpu: needs a GPU; runs with --gpu, where a missing GPU fails")
    config.addinivalue_line("markers", "arm64_ci: a cheap, decisive check that CI runs on each arm64 image under "
                                       "emulation (`pytest smoke_tests --image kerasenv:ID-arm64 -m arm64_ci`): "
                                       "labels, the venv's ELF machine, pip check, the backend's GPU-library "
                                       "check and ptxas, the kernel-target record, a small smoke training as an "
                                       "arbitrary UID on a read-only root")
    config.addinivalue_line("markers", "once_per_group: a check of kerasenv's own code in the image that variants of "
                                       "the same backend, Keras major and Python cannot differ on (smoke_tests/groups.py); "
                                       "with --once-per-group it runs on the group's first variant only")
    config._kerasenv_gpu = {"deselected": 0, "ran": 0, "passed": 0}
    config._kerasenv_grouped = {}  # "<variant> -> <representative> (<group>)" -> checks deselected
    config._kerasenv_timing = {}  # target id -> [seconds, tests, failed]
    config._kerasenv_module_seconds = {}  # test module -> seconds (set-up, call, tear-down), all targets


@dataclass(frozen=True)
class Target:
    """An image under test, the matrix entry it claims to be, and which image of the variant's
    tag it is: its architecture as the image says (`Architecture`: amd64 | arm64), and whether
    this engine runs it under emulation (an arm64 image on an amd64 machine: qemu-user)."""

    ref: str
    variant: matrix_mod.Variant
    arch: str = platforms.AMD64
    emulated: bool = False

    @property
    def id(self) -> str:
        return platforms.target_id(self.variant, self.ref, self.arch)


# The refs of the images this engine runs under emulation (Target.emulated): every container
# `start` makes of one gets the arm64 hosts' CPU model (platforms.emulated_environment).
_EMULATED_REFS: set[str] = set()


def _targets(config) -> list[Target]:
    cached = getattr(config, "_kerasenv_targets", None)
    if cached is not None:
        return cached
    matrix = matrix_mod.load()
    ids = list(config.getoption("variant"))
    if config.getoption("all_variants"):
        ids += [v.id for v in matrix.debian_based if v.id not in ids]
    refs = [matrix.get(i).image_ref for i in ids] + config.getoption("image")
    if not refs:
        raise pytest.UsageError("name the image(s) to test: --variant ID, --image REF or --all-variants")
    client = docker_client.client()
    host_arch = platforms.normalize_arch(client.info().get("Architecture"))
    targets = []
    for ref in refs:
        from docker.errors import ImageNotFound

        try:
            image = client.images.get(ref)
        except ImageNotFound:
            raise pytest.UsageError(f"image {ref} is not here: build it (`make build VARIANT=...`, an arm64 image "
                                    "with PLATFORM=linux/arm64) or pull it")
        labels = image.labels or {}
        variant_id = labels.get("io.kerasenv.variant")
        if not variant_id:
            raise pytest.UsageError(f"image {ref} has no io.kerasenv.variant label: not a kerasenv image")
        # Whether the variant has an image for this architecture is a check (test_labels), not a
        # usage error: an arm64 image of an amd64-only variant must fail there.
        arch = platforms.normalize_arch(image.attrs.get("Architecture"))
        targets.append(Target(ref, matrix.get(variant_id), arch, emulated=arch != host_arch))
    _EMULATED_REFS.update(t.ref for t in targets if t.emulated)
    config._kerasenv_targets = targets
    return targets


def pytest_generate_tests(metafunc):
    if "target" not in metafunc.fixturenames:
        return
    families = getattr(metafunc.module, "FAMILIES", ALL_FAMILIES)
    arches = getattr(metafunc.module, "ARCHES", ALL_ARCHES)
    targets = [t for t in _targets(metafunc.config) if t.variant.family in families and t.arch in arches]
    metafunc.parametrize("target", targets, ids=[t.id for t in targets], scope="module")


def pytest_collection_modifyitems(config, items):
    # A module for a family none of the images under test belongs to (e.g. ROCm checks
    # when testing the CPU image), or for another architecture (the JupyterLab flavour, which
    # the arm64 images do not have), is not applicable: deselect it, and say so in the summary.
    skipped_empty = [i for i in items if any(m.name == "skip" and str(m.kwargs.get("reason", "")).startswith(
        "got empty parameter set") for m in i.iter_markers())]
    if skipped_empty:
        config.hook.pytest_deselected(items=skipped_empty)
        items[:] = [i for i in items if i not in skipped_empty]
        config._kerasenv_not_applicable = len(skipped_empty)
    if config.getoption("once_per_group"):
        _deselect_checked_on_the_group_representative(config, items)
    if config.getoption("gpu"):
        return
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if gpu_items:
        config.hook.pytest_deselected(items=gpu_items)
        items[:] = [i for i in items if not i.get_closest_marker("gpu")]
        config._kerasenv_gpu["deselected"] = len(gpu_items)


def _deselect_checked_on_the_group_representative(config, items):
    """--once-per-group: a once_per_group check of an amd64 image whose variant is not its
    group's first in the matrix (smoke_tests/groups.py) is deselected; the summary names the
    variant whose run checks it. The representative is among `kerasenv build --all`'s variants,
    every one of which `make test` tests."""
    variants = matrix_mod.load().debian_based
    dropped = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("target") if callspec else None
        if target is None or target.arch != platforms.AMD64 or not item.get_closest_marker("once_per_group"):
            continue
        rep = groups.representative(target.variant, variants)
        if rep != target.variant.id:
            dropped.append(item)
            why = f"{target.variant.id}: checked on {rep} ({groups.describe(groups.group_key(target.variant))})"
            config._kerasenv_grouped[why] = config._kerasenv_grouped.get(why, 0) + 1
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("target") if callspec else None
    module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    modules = item.config._kerasenv_module_seconds
    modules[module] = modules.get(module, 0.0) + report.duration
    if target is not None:
        row = item.config._kerasenv_timing.setdefault(target.id, [0.0, 0, 0])
        row[0] += report.duration
        if report.when == "call":
            row[1] += 1
        row[2] += int(report.failed)
    if report.when == "call" and item.get_closest_marker("gpu"):
        stats = item.config._kerasenv_gpu
        stats["ran"] += 1
        stats["passed"] += int(report.passed)


def pytest_terminal_summary(terminalreporter, config):
    families = sorted({t.variant.family if t.arch == platforms.AMD64 else f"{t.variant.family} on {t.arch}"
                       for t in getattr(config, "_kerasenv_targets", [])})
    if config._kerasenv_timing:
        terminalreporter.write_line("kerasenv acceptance time per variant (set-up, tests and tear-down):")
        for target_id, (seconds, tests, failed) in config._kerasenv_timing.items():
            terminalreporter.write_line(f"  {target_id:<20} {seconds:7.1f} s  {tests:3d} tests  "
                                        f"{'all passed' if not failed else f'{failed} failed'}")
        # where the time went, by module: what the CI budget's next cut reads (docs/contributing/ci.md)
        by_module = sorted(config._kerasenv_module_seconds.items(), key=lambda kv: -kv[1])
        terminalreporter.write_line("  by module: " + ", ".join(f"{m} {s:.0f} s" for m, s in by_module if s >= 0.5))
    if getattr(config, "_kerasenv_not_applicable", 0):
        terminalreporter.write_line(f"kerasenv: {config._kerasenv_not_applicable} checks deselected as not "
                                    f"applicable to the image families under test ({', '.join(families)})")
    for why, count in config._kerasenv_grouped.items():
        terminalreporter.write_line(f"kerasenv: {count} once_per_group checks deselected (--once-per-group), {why}")
    stats = config._kerasenv_gpu
    if config.getoption("gpu"):
        terminalreporter.write_line(f"kerasenv GPU tests: {stats['ran']} ran, {stats['passed']} passed "
                                    "(--gpu: a missing GPU is a failure)")
    elif stats["deselected"]:
        terminalreporter.write_line(f"kerasenv GPU tests: {stats['deselected']} deselected, none ran "
                                    "(pass --gpu or KERASENV_REQUIRE_GPU=1 on a GPU host)")


# --- fixtures -------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def docker():
    return docker_client.client()


@pytest.fixture(scope="session")
def matrix():
    return matrix_mod.load()


@pytest.fixture(scope="module")
def image(docker, target):
    return docker.images.get(target.ref)


class TrackedContainer:
    """A long-lived container (sleep) for one test module; commands run in it by exec."""

    def __init__(self, docker, ref: str) -> None:
        self.container = start(docker, ref, ["sleep", "infinity"], init=True, network_mode="none")

    def exec(self, cmd, *, user: str = "", env: dict | None = None) -> tuple[int, str]:
        """Exit code and output: what the command wrote to stderr, then what it wrote to stdout.
        Not the two streams as they interleaved: the daemon frames each in chunks of up to
        4096 bytes, so a long stdout line (a probe's JSON) could be cut by a stderr warning in
        its middle (TensorFlow's dlopen warnings did: JSONDecodeError at char 4096, CI of
        stop 48). Stdout last keeps the convention that a probe's JSON is the last line."""
        code, (out, err) = self.container.exec_run(cmd, user=user, environment=env, demux=True)
        err_text = (err or b"").decode(errors="replace")
        if err_text and not err_text.endswith("\n"):
            err_text += "\n"
        return code, err_text + (out or b"").decode(errors="replace")

    def probe_json(self, probe, *, user: str = "") -> dict:
        """Run one of the image's own probes (a kerasenv_image.probes module, `python -m`);
        the JSON line it prints."""
        exit_code, out = self.exec(["python", "-m", probe.__name__], user=user, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
        assert exit_code == 0, f"probe {probe.__name__} exited {exit_code}:\n{out[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])

    def remove(self) -> None:
        self.container.remove(force=True)


@pytest.fixture(scope="module")
def box(docker, target):
    """The module's container, started from the image under test; always removed."""
    tracked = TrackedContainer(docker, target.ref)
    try:
        yield tracked
    finally:
        tracked.remove()


@pytest.fixture(scope="session")
def inventories() -> dict:
    """Image reference -> its inventory, for the whole session (see `inventory`)."""
    return {}


@pytest.fixture(scope="module")
def inventory(inventories, target, request):
    """What the image holds, as its default user sees it: read once per image and shared by
    every module. The probe imports TensorFlow (5-10 s in a CUDA image), and what it reads
    (files, versions, environment of a fresh container's default user) is the image's: no
    check writes into the image, and each module still runs its own checks in its own box.
    On a JAX or PyTorch CUDA image test_backend_gpu_libraries' probe has read it already, in
    its own interpreter (`--inventory`): one framework import fewer, 25-50 s under qemu."""
    from kerasenv_image.probes import inventory as probe

    if target.ref not in inventories:
        inventories[target.ref] = request.getfixturevalue("box").probe_json(probe)
    return inventories[target.ref]


@pytest.fixture(scope="module")
def host(box):
    """testinfra's view of the running container (docker backend), as the image's user."""
    import testinfra

    return testinfra.get_host(f"docker://{box.container.id}")


@pytest.fixture(scope="module")
def root_host(box):
    import testinfra

    return testinfra.get_host(f"docker://root@{box.container.id}")


def start(docker, ref: str, command, **kwargs):
    """Create and start a labelled container; one that fails to start is removed too.

    Labelled as this session's (TEST_LABEL), and not as the tool's (io.kerasenv.kind): `make
    clean`, which the integration tests run while `make test` may still be accepting an image,
    removes what the tool started and leaves these alone. The suite removes each container it
    starts; after a killed run: `docker rm -f $(docker ps -aq --filter label=io.kerasenv.acceptance)`."""
    if _CHECKOUT_MOUNT:  # --checkout-probes
        kwargs["volumes"] = {**_CHECKOUT_MOUNT, **(kwargs.get("volumes") or {})}
    if ref in _EMULATED_REFS:  # qemu emulates the CPU of the arm64 hosts (platforms.EMULATED_ARM64_CPU)
        kwargs["environment"] = platforms.emulated_environment(kwargs.get("environment"))
    container = docker.containers.create(ref, command, labels={TEST_LABEL: SESSION}, **kwargs)
    try:
        container.start()
    except Exception:
        container.remove(force=True)
        raise
    return container


@contextlib.contextmanager
def created(docker, ref: str):
    """A labelled container that is created and never started (what the engine's archive API
    reads files from without running anything of the image); always removed."""
    container = docker.containers.create(ref, ["true"], labels={TEST_LABEL: SESSION}, network_mode="none")
    try:
        yield container
    finally:
        container.remove(force=True)


@pytest.fixture(scope="session")
def default_command_runs(tmp_path_factory) -> dict:
    """Image reference -> its default command's run (see `default_command_run`)."""
    return {"root": tmp_path_factory.mktemp("default-command-runs")}


@dataclass(frozen=True)
class DefaultCommandRun:
    code: int
    out: str
    err: str
    runs_dir: Path  # what the container wrote to /workspace/runs

    def report(self) -> dict:
        (path,) = self.runs_dir.glob("*/report.json")
        return json.loads(path.read_text())


@pytest.fixture(scope="module")
def default_command_run(default_command_runs, docker, target) -> DefaultCommandRun:
    """The image's default command (the smoke training) as a user runs it offline: no
    network, a 1 GiB /dev/shm, a host folder at /workspace/runs. One run per image, read by
    every check about that run (its terminal output, its report, the GPU monitor's part of
    it): a smoke training takes 10-20 s, and the checks only read what it printed and wrote."""
    if target.ref not in default_command_runs:
        runs_dir = default_command_runs["root"] / re.sub(r"[^A-Za-z0-9_.-]", "_", target.ref)
        runs_dir.mkdir()
        os.chmod(runs_dir, 0o777)
        code, out, err = run_once(docker, target.ref, None, network_mode="none", shm_size="1g",
                                  volumes={str(runs_dir): {"bind": "/workspace/runs", "mode": "rw"}})
        default_command_runs[target.ref] = DefaultCommandRun(code, out, err, runs_dir)
    return default_command_runs[target.ref]


@pytest.fixture
def writable_dir():
    """A host directory any container UID can write (what a user mounts for results)."""
    with tempfile.TemporaryDirectory(prefix="kerasenv-accept-") as path:
        os.chmod(path, 0o777)
        yield Path(path)


def run_once(docker, ref: str, command, **kwargs) -> tuple[int, str, str]:
    """A fresh container for one command (for what a sleeping container cannot show)."""
    container = start(docker, ref, command, **kwargs)
    try:
        status = container.wait(timeout=600)
        return (status["StatusCode"], container.logs(stdout=True, stderr=False).decode(errors="replace"),
                container.logs(stdout=False, stderr=True).decode(errors="replace"))
    finally:
        container.remove(force=True)


@pytest.fixture(scope="session", autouse=True)
def no_leftover_containers(docker):
    yield
    left = docker.containers.list(all=True, filters={"label": f"{TEST_LABEL}={SESSION}"})
    assert not left, f"acceptance containers left behind: {[c.name for c in left]}"

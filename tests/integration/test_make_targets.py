"""Every target `make help` lists, run through make itself (issue 21 item 4).

`make bench-container` ran a script that had moved and no test ran it, so it was broken for
weeks. Here each target runs its whole recipe as cheaply as it can: a real run where that costs
seconds, else the refusal it gives on this host (no GPU, no TTY, no registry) or before the work
that needs root, the network or a long time, and `make -n` for `make test` itself (CI's own
command) and the old names. Every test checks make's exit status and a line only that recipe
prints, so a moved file or a wrong path fails it, and leaves nothing behind (no container, no
compose service, no file in the repository: the `nothing_left_behind` fixture).

TARGETS says how each target is covered; tests/unit/repo/test_makefile.py fails when a target
of `make help` is missing from it, or has no test here (`covers(...)`), or is still a TODO.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from kerasenv.engine.docker_client import PROJECT_LABEL
from kerasenv.matrix import schema as matrix_mod

from .conftest import REPO, free_port, multiworker_left

TODO = "TODO: not covered yet"

# target -> how its test exercises it (a TODO entry fails the completeness unit test).
TARGETS = {
    "help": "real: lists every documented target and the variants",
    "venv": "real: nothing to do when .venv is up to date",
    "base-offline": "real: every Debian base of the matrix exists, so it says so of each and exits 0 (no debootstrap)",
    "generate": "real: rewrites nothing when the files match the matrix",
    "check-generated": "real: the drift check passes",
    "lock": "refusal: an unknown VARIANT= exits 2 before uv or PyPI",
    "build": "real: VARIANT=tf2.21-cpu from Docker's cache (make test keeps it)",
    "build-all": "refusal: CA_CERT=/nonexistent exits 2 naming the CA, before Docker",
    "build-jupyter": "refusal: CA_CERT=/nonexistent exits 2 naming the CA, before Docker",
    "doctor": "real: the host preflight and its recommendation",
    "smoke": "real: VARIANT=tf2.21-cpu EPOCHS=2",
    "smoke-gpu": "refusal without a GPU: doctor --require-gpu exits 3 with its one line (real run on a GPU host)",
    "smoke-cpu": "real: EPOCHS=2",
    "shell": "real, without a TTY: the variant doctor picks runs the commands piped to it",
    "lab": "refusal: VARIANT=tf2.17-rocm6.3 has no JupyterLab flavour (exit 2)",
    "lab-up": "real: the compose lab service comes up (own project name, free port), then make down",
    "verify-gpu": "refusal without a GPU: VARIANT=tf2.21-cpu's container probe finds none, exit 3 "
                  "(real run on a GPU host)",
    "gpu-host-check": "real, PACK= a temporary folder: the pack is written (pip download) and its size printed",
    "bench-container": "real, BENCH_ARGS=--dry-run: the lock, the image and the host's smoke launcher are "
                       "checked, the commands of a round printed (no host TensorFlow install)",
    "push": "refusal: no REGISTRY= exits 2 with the hint",
    "pull": "refusal: no REGISTRY= exits 2 with the hint",
    "sbom": "real: VARIANT=tf2.21-cpu (the file it writes is removed)",
    "compose-plugin": "real, with HOME= a temporary folder: installs the plugin there",
    "up": "real: train + tensorboard come up (own project name, runs dir and port), then make down",
    "tensorboard": "real: tensorboard comes up (own project name, runs dir and port), then make down",
    "down": "real: after tensorboard, up and lab-up, no container of their project is left",
    "multiworker": "real: 2 workers, VARIANT=tf2.21-cpu EPOCHS=2 (about 20 s)",
    "sif": "refusal: an unknown VARIANT= (exit 2; the real SIF build: tests/integration/test_apptainer.py)",
    "bench-multiworker": "real, BENCH_ARGS=--rounds 1: TF's single-container and 2-worker smoke runs, JAX's "
                         "1, 2 and 4 processes and their all-reduce probe; the result files restored afterwards",
    "bench-profile": "real, BENCH_ARGS=--rounds 1: the smoke with and without --profile, the result file "
                     "restored afterwards",
    "lint": "real: hadolint, the compose and workflow schemas, the k8s manifests",
    "test-unit": "real: PYTEST_ARGS= one unit test (-k)",
    "test-prereqs": "real: silent when everything is there",
    "arm64-emulation": "real: qemu >= 10 is registered for aarch64 (the arm64 images' builds ran under it), so it only looks",
    "slurm-local": "real: munged, slurmctld and slurmd run and the node is idle (test-prereqs started them), so it "
                   "only looks; then a 2-task srun runs on it",
    "test": "make -n: test-prereqs, then the drift check, lint and make -j3 test-lanes",
    "test-lanes": "make -n: builds, unit tests, acceptance per variant, integration tests (and scripts/timed-step exists)",
    "test-floor": "real, FLOOR_SOCKET= a missing socket: one line naming how to start the floor daemon; make -n: "
                  "the CPU image built, its default command and the doctor, all on FLOOR_SOCKET",
    "test-acceptance": "real: VARIANT=tf2.21-cpu PYTEST_ARGS='-k test_label_urls_are_https'",
    "test-acceptance-all": "real: PYTEST_ARGS='-k test_label_urls_are_https' on every built variant",
    "clean": "real, against a fake Docker daemon (DOCKER_HOST=): removes its project container, prunes",
    "clean-images": "real, against a fake Docker daemon (DOCKER_HOST=): also removes the images",
    "size": "real: the size table",
    "size-check": "real: the budgets hold",
    "bench": "real: sizes.json, then a one-configuration bench of tf2.21-cpu into a temporary folder",
    "bench-report": "real: redraws benchmarks/ (the files are restored afterwards)",
    "bench-pull": "real, BENCH_ARGS=--dry-run: root, skopeo, containerd and the image checked, the throwaway "
                  "registry and containerd started and removed (the push and pull it measures: test_registry.py)",
    "run": "make -n: exactly make smoke's recipe",
    "run-gpu": "make -n: exactly make smoke-gpu's recipe",
    "run-cpu": "make -n: exactly make smoke-cpu's recipe",
    "train-multiworker": "make -n: exactly make multiworker's recipe",
    "test-image": "make -n: exactly make test-acceptance's recipe",
    "test-images": "make -n: exactly make test-acceptance-all's recipe",
}

COVERED: set[str] = set()


class Targets(list):
    """Target names; used as a decorator it leaves the test as it is."""

    def __call__(self, test):
        return test


def covers(*targets: str) -> Targets:
    """Name the targets a test exercises (for the completeness check): `@covers("a", "b")` on
    a test, or `parametrize("target", covers("a", "b"))`."""
    unknown = set(targets) - set(TARGETS)
    assert not unknown, f"not in TARGETS: {sorted(unknown)}"
    COVERED.update(targets)
    return Targets(targets)


# --- running make -------------------------------------------------------------------------

MAKEFILE = (REPO / "Makefile").read_text()
# The Makefile's own variables (VARIANT ?= ...): left out of make's environment, so a value
# exported by whoever runs the suite cannot change which recipe a test sees.
MAKE_VARIABLES = set(re.findall(r"^([A-Z_]+)\s*\?=", MAKEFILE, re.M))
# The outer make's flags (`make test` runs this suite): its jobserver, -j3 and its PYTEST_ARGS
# would reach the inner make through them.
OUTER_MAKE = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}
# What compose/compose.yaml reads from the environment (as conftest.compose(clean_env=True)).
COMPOSE_VARIABLES = ("JUPYTER_", "KERASENV_IMAGE", "KERASENV_JUPYTER_IMAGE", "KERASENV_UID", "KERASENV_GID",
                     "TENSORBOARD_", "PROJECT_DIR", "RUNS_DIR", "RUN_ID", "COMPOSE_", "SHM_SIZE")


def make(*args: str, env: dict | None = None, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """`make --no-print-directory ARGS` from the repo root; stdout and stderr in `.out` too."""
    base = {k: v for k, v in os.environ.items()
            if k not in MAKE_VARIABLES | OUTER_MAKE and not k.startswith(COMPOSE_VARIABLES)}
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=timeout, **kwargs)
    proc.out = proc.stdout + proc.stderr
    return proc


def ran(proc: subprocess.CompletedProcess) -> str:
    """What a failed assertion shows: the command's last output."""
    return f"exit {proc.returncode}:\n{proc.out[-3000:]}"


def make_error(target: str, code: int) -> re.Pattern:
    """make's line for a recipe that failed with `code` (make itself then exits 2)."""
    return re.compile(rf"^make: \*\*\* \[Makefile:\d+: {re.escape(target)}\] Error {code}$", re.M)


def files_named_in(recipe: str) -> list[str]:
    """Repository files a (dry-run) recipe names, each of which must exist."""
    return sorted(set(re.findall(r"(?<![\w/.])((?:scripts|images|compose|k8s|smoke_tests|tests|benchmarks|"
                                 r"\.github|\.venv)/[\w.*/-]+)", recipe)))


def assert_files_exist(recipe: str) -> None:
    missing = [p for p in files_named_in(recipe) if not glob.glob(str(REPO / p))]
    assert not missing, f"the recipe names files that do not exist: {missing}\n{recipe}"


# --- nothing left behind --------------------------------------------------------------------

# Ignored files that are not a target's leftovers: the SBOM tool (installed on first use and
# kept on purpose), and the list of failed
# steps that `make test` keeps while these tests run beside its acceptance runs.
KEPT = {"!! .sbom-tool/", "!! .test-failures"}
RUNS = REPO / "runs"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def repo_files() -> set[str]:
    """git's status lines (ignored files included), and the diff of the tracked files: a test
    that rewrites a file already changed in this checkout shows up too."""
    lines = git("status", "--porcelain", "--ignored").splitlines()
    diff = hashlib.sha256(git("diff", "--binary").encode()).hexdigest()
    return {line for line in lines if "__pycache__" not in line} - KEPT | {f"git diff {diff}"}


def our_containers(docker) -> dict[str, str]:
    """Project containers of this checkout (a mount under the repo, or a compose project of
    ours): other checkouts' tests may run beside these."""
    found = {}
    for c in docker.containers.list(all=True, filters={"label": PROJECT_LABEL}):
        if "io.kerasenv.acceptance" in c.labels:
            continue  # an acceptance run's box (`make test` runs one beside these tests): its own to remove
        mounts = [m.get("Source", "") for m in c.attrs.get("Mounts", [])]
        compose_project = c.labels.get("com.docker.compose.project", "")
        if any(m == str(REPO) or m.startswith(f"{REPO}{os.sep}") for m in mounts) or compose_project.startswith("kerasenv-mt-"):
            found[c.id] = c.name
    return found


@pytest.fixture(autouse=True)
def nothing_left_behind(docker):
    files, containers = repo_files(), our_containers(docker)
    runs = set(os.listdir(RUNS)) if RUNS.exists() else None
    yield
    # What the targets write into ./runs (smoke reports, multiworker's) is theirs: removed here.
    if runs is None:
        shutil.rmtree(RUNS, ignore_errors=True)
    else:
        for name in set(os.listdir(RUNS)) - runs:
            shutil.rmtree(RUNS / name, ignore_errors=True)
    left_files = repo_files() - files
    left = {cid: name for cid, name in our_containers(docker).items() if cid not in containers}
    for cid in left:
        docker.containers.get(cid).remove(force=True)
    assert not left_files, f"files left in the repository: {sorted(left_files)}"
    assert not left, f"containers left behind: {sorted(left.values())}"


@pytest.fixture
def restored():
    """Put back (or remove) the repository files a target rewrites, whatever the test does."""
    saved: dict[Path, bytes | None] = {}

    def keep(*patterns: str) -> None:
        for pattern in patterns:
            for path in glob.glob(str(REPO / pattern)) or [str(REPO / pattern)]:
                path = Path(path)
                saved[path] = path.read_bytes() if path.exists() else None

    yield keep
    for path, data in saved.items():
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)


def has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


# --- quick real runs ------------------------------------------------------------------------

@covers("help")
def test_help_lists_every_target_and_the_variants(matrix):
    proc = make("help")
    assert proc.returncode == 0, ran(proc)
    assert proc.stdout.startswith("kerasenv: ")
    documented = re.findall(r"^([a-z][a-z0-9-]*):.*## ", MAKEFILE, re.M)
    assert all(re.search(rf"^  make {re.escape(t)} ", proc.stdout, re.M) for t in documented), ran(proc)
    # Issue 45: the variants that can be built, exactly; the retired ids on their own line with
    # their replacement; the title names every backend the matrix has, not "TensorFlow + Keras".
    assert re.search(r"^Variants: " + re.escape(" ".join(matrix.ids)) + "$", proc.stdout, re.M), ran(proc)
    for old in matrix.retired:
        assert re.search(rf"^Retired .*\b{re.escape(old.id)} \(now {re.escape(old.replaced_by)}\)", proc.stdout,
                         re.M), ran(proc)
    title = proc.stdout.splitlines()[0]
    assert all(name in title for name in ("TensorFlow", "JAX", "PyTorch", "CPU", "CUDA", "ROCm")), title


@covers("venv")
def test_venv_is_up_to_date():
    proc = make("venv")
    assert proc.returncode == 0, ran(proc)
    assert "Nothing to be done for 'venv'" in proc.out, ran(proc)
    assert (REPO / ".venv" / "bin" / "kerasenv").exists()


@covers("check-generated")
def test_check_generated_finds_no_drift():
    proc = make("check-generated")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^generated files match .*images/matrix\.toml$", proc.stdout, re.M), ran(proc)


@covers("generate")
def test_generate_rewrites_nothing_when_in_step_with_the_matrix():
    proc = make("generate")
    assert proc.returncode == 0, ran(proc)
    # No "wrote ...": nothing rewritten (and nothing_left_behind compares git's view of the files).
    assert proc.stdout.splitlines() == [".venv/bin/kerasenv generate"], ran(proc)


@covers("doctor")
def test_doctor_checks_the_host_and_recommends_a_variant(docker):
    proc = make("doctor")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^PASS  docker ", proc.out, re.M), ran(proc)
    assert re.search(r"^recommended: kerasenv:\S+", proc.out, re.M), ran(proc)


@covers("size", "size-check")
@pytest.mark.parametrize("target", ["size", "size-check"])
def test_size_tables_the_built_images(cpu_image, target):
    proc = make(target)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^image\s+total\s+budget\s", proc.stdout, re.M), ran(proc)
    assert re.search(rf"^{re.escape(cpu_image)}\s+\d+\.\d\dG\s", proc.stdout, re.M), ran(proc)


@covers("gpu-host-check")
def test_gpu_host_check_packs_into_the_folder_given(tmp_path):
    proc = make("gpu-host-check", f"PACK={tmp_path / 'pack'}")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"packed .*pack \(\d+\.\d MiB, Keras 3\.", proc.stderr), ran(proc)
    assert (tmp_path / "pack" / "run.py").is_file()


@covers("base-offline")
def test_base_offline_keeps_the_base_images_that_exist(docker):
    bases = matrix_mod.load(REPO / "images" / "matrix.toml").debian_bases
    assert len(bases) >= 1
    for base in bases:
        docker.images.get(base)  # `make test-prereqs` made sure of each
    proc = make("base-offline")
    assert proc.returncode == 0, ran(proc)
    for base in bases:
        assert f"{base} already exists locally; `--force` rebuilds it" in proc.out, ran(proc)


@covers("arm64-emulation")
def test_arm64_emulation_only_looks_when_qemu_is_registered(docker):
    proc = make("arm64-emulation")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"qemu (1\d|[2-9]\d)\.x runs linux/arm64 \([A-Z]*F[A-Z]*\)", proc.out), ran(proc)
    assert "apt-get" not in proc.out and "registering" not in proc.out, ran(proc)
    # and arm64 code runs: the arm64 base's own shell, in a container
    arm = next(v for v in matrix_mod.load(REPO / "images" / "matrix.toml").variants if v.arm64)
    out = docker.containers.run(f"{arm.base_image}-arm64", ["uname", "-m"], remove=True, network_mode="none")
    assert out.decode().strip() == "aarch64"


@covers("slurm-local")
def test_slurm_local_only_looks_when_the_cluster_runs():
    proc = make("slurm-local")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"Slurm \d+\.\d+\.\d+ on node \S+ \(\d+ CPUs\), partition debug: (idle|mixed|allocated)$",
                     proc.out, re.M), ran(proc)
    assert not re.search(r"apt-get|starting|writing|creating|restarting", proc.out), ran(proc)
    # and it schedules: one job's 2 tasks side by side on this node, each with its own SLURM_PROCID
    srun = subprocess.run(["srun", "--ntasks=2", "--cpus-per-task=1", "--time=1", "bash", "-c",
                           "echo $SLURM_PROCID/$SLURM_NTASKS"], capture_output=True, text=True, timeout=120)
    assert srun.returncode == 0, srun.stderr
    assert sorted(srun.stdout.split()) == ["0/2", "1/2"], srun.stdout


@covers("test-prereqs")
def test_test_prereqs_only_looks_when_everything_is_there():
    # The engine test-prereqs wants (issue 43): Docker 28.5.2 with the containerd store
    # (KERASENV_MAIN_ENGINE=docker28, the default), or Debian's 20.10 (debian), as runs here.
    engine = subprocess.run(["bash", "scripts/docker-current.sh", "which"], cwd=REPO, capture_output=True,
                            text=True, timeout=30).stdout.strip()
    main = "docker28" if engine.startswith("28.5.2") and engine.endswith(" containerd") else "debian"
    started = time.monotonic()
    proc = make("test-prereqs", env={"KERASENV_MAIN_ENGINE": main})
    assert proc.returncode == 0, ran(proc)
    assert proc.out == "", ran(proc)  # nothing to install or start: no "test-prereqs: ..." line
    assert time.monotonic() - started < 30
    if main == "debian" and os.geteuid() == 0 and not os.environ.get("DOCKER_HOST"):
        # The default where another engine already answers: it is left running, and one line says
        # which it is and how to switch (nothing is stopped or started).
        other = make("test-prereqs", env={"KERASENV_MAIN_ENGINE": "docker28"})
        assert other.returncode == 0, ran(other)
        assert other.out.splitlines() == [
            f"test-prereqs: the engine on /var/run/docker.sock is Docker {engine}, not Docker 28.5.2 with the "
            "containerd image store (KERASENV_MAIN_ENGINE=docker28): testing on it as it is, no floor lane; to "
            "switch, stop that dockerd and rerun `sudo make test-prereqs`, or set KERASENV_MAIN_ENGINE=debian to say so"]


@covers("compose-plugin")
def test_compose_plugin_installs_the_plugin_where_docker_lacks_it(tmp_path):
    home = {"HOME": str(tmp_path)}
    elsewhere = subprocess.run(["docker", "compose", "version"], capture_output=True, env={**os.environ, **home})
    proc = make("compose-plugin", env=home)
    assert proc.returncode == 0, ran(proc)
    if elsewhere.returncode == 0:  # a system-wide plugin: the recipe has nothing to do
        assert proc.out == "", ran(proc)
    else:
        assert re.search(r"^installed Docker Compose version v\d", proc.out, re.M), ran(proc)
        assert (tmp_path / ".docker" / "cli-plugins" / "docker-compose").exists()


@covers("lint")
def test_lint_passes():
    proc = make("lint", timeout=300)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^hadolint: \d+ Dockerfiles clean$", proc.stdout, re.M), ran(proc)
    # compose files, the JobSet (its vendored CRD schema), workflows
    assert proc.stdout.count("ok -- validation done") == 3, ran(proc)
    assert re.search(r"^\S*kubernetes-validate --strict --quiet .*k8s/jax-multihost-job\.yaml", proc.stdout, re.M), ran(proc)


@covers("test-unit")
def test_test_unit_runs_the_tests_pytest_args_selects():
    proc = make("test-unit", "PYTEST_ARGS=tests/unit/repo/test_makefile.py -k test_plain_make_prints_help "
                "-p no:cacheprovider -q")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^1 passed, \d+ deselected", proc.stdout, re.M), ran(proc)


@covers("test-floor")
def test_the_floor_lane_runs_on_its_own_socket_and_says_how_to_start_it(tmp_path):
    # Issue 43: Debian 12's Docker 20.10, the declared floor, beside Docker 28 as the main engine.
    missing = make("test-floor", f"FLOOR_SOCKET={tmp_path}/none.sock")
    assert missing.returncode != 0, ran(missing)
    assert f"make test-floor: no floor daemon on {tmp_path}/none.sock: run `sudo make test-prereqs`" in missing.stderr
    dry = make("-n", "test-floor", "FLOOR_SOCKET=/run/floor.sock")
    assert dry.returncode == 0, ran(dry)
    for line in ("DOCKER_HOST=unix:///run/floor.sock .venv/bin/kerasenv build tf2.21-cpu",
                 "DOCKER_HOST=unix:///run/floor.sock docker run --rm --init kerasenv:tf2.21-cpu",
                 "DOCKER_HOST=unix:///run/floor.sock .venv/bin/kerasenv doctor"):
        assert line in dry.stdout, ran(dry)


@covers("test-acceptance")
def test_test_acceptance_runs_one_check_on_one_image(cpu_image):
    proc = make("test-acceptance", "VARIANT=tf2.21-cpu",
                "PYTEST_ARGS=-k test_label_urls_are_https -p no:cacheprovider -v")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"test_label_urls_are_https\[tf2\.21-cpu\] PASSED", proc.stdout), ran(proc)
    assert re.search(r"^=+ 1 passed", proc.stdout, re.M), ran(proc)


@covers("test-acceptance-all")
def test_test_acceptance_all_runs_one_check_on_every_built_image(cpu_image, docker, matrix):
    proc = make("test-acceptance-all", "PYTEST_ARGS=-k test_label_urls_are_https -p no:cacheprovider -v")
    assert proc.returncode == 0, ran(proc)
    tested = set(re.findall(r"test_label_urls_are_https\[([^\]]+)\] PASSED", proc.stdout))
    assert "tf2.21-cpu" in tested, ran(proc)
    assert tested <= set(matrix.ids), ran(proc)


@covers("bench-pull")
def test_bench_pull_dry_run_starts_and_removes_its_throwaway_engines(jax_cpu_image):
    def throwaway() -> set[str]:
        return {n for n in os.listdir("/tmp") if n.startswith(("kerasenv-registry-", "kerasenv-containerd-"))}

    before = throwaway()
    proc = make("bench-pull", "VARIANT=jax0.12-cpu", "BENCH_ARGS=--dry-run")
    assert proc.returncode == 0, ran(proc)
    plan = re.findall(r"^would push kerasenv:jax0\.12-cpu \(\d+\.\d\d GB\) to 127\.0\.0\.1:\d+ with (.+?), then pull "
                      r"it into an empty containerd \S+ and run its default command$", proc.stdout, re.M)
    assert plan == ["docker push, gzip", "skopeo, zstd level 3"], ran(proc)
    assert throwaway() - before == set()  # the registry's and containerd's directories are gone
    assert subprocess.run(["pgrep", "-f", "containerd --config /tmp/kerasenv-containerd-"]).returncode == 1


@covers("bench-report")
def test_bench_report_redraws_the_report_and_its_charts(restored):
    restored("benchmarks/report.md", "benchmarks/charts/*.png", "benchmarks/pull.md")
    proc = make("bench-report")
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^wrote \S+/benchmarks/report\.md$", proc.stdout, re.M), ran(proc)
    assert re.search(r"^wrote \S+/benchmarks/charts/\S+\.png$", proc.stdout, re.M), ran(proc)


@covers("bench-container")
def test_bench_container_dry_run_checks_what_it_runs(cpu_image):
    """The target that broke silently: its host side ran a launcher that had moved."""
    proc = make("bench-container", "BENCH_ARGS=--dry-run")
    assert proc.returncode == 0, ran(proc)
    assert "dry run: each round runs" in proc.stdout, ran(proc)
    assert re.search(r"^  docker run .* kerasenv:tf2\.21-cpu python /opt/kerasenv/smoke_train\.py ", proc.stdout, re.M)
    assert re.search(rf"^  \S+/\.bench/venv-tf2\.21-cpu/bin/python {re.escape(str(REPO))}/images/common/smoke_train\.py ",
                     proc.stdout, re.M), ran(proc)


@covers("bench-multiworker")
def test_bench_multiworker_one_round(cpu_image, restored):
    restored("benchmarks/results/multiworker-tf2.21-cpu.json", "benchmarks/results/multiworker-jax0.12-cpu.json")
    # --quick: 2 epochs of 1536 samples per configuration, what shows the bench runs (TF 4 x 8192
    # and JAX 3 x 4096 made this the integration step's slowest test, 166 s cold)
    proc = make("bench-multiworker", "BENCH_ARGS=--rounds 1 --quick", timeout=900)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^\| tf2\.21-cpu \| \d+ \| \d+ \| \d+\.\d\d \|$", proc.stdout, re.M), ran(proc)
    result = json.loads((REPO / "benchmarks" / "results" / "multiworker-tf2.21-cpu.json").read_text())
    assert result["rounds"] == 1 and result["quick"] is True and result["two_workers_samples_per_second"] > 0
    # JAX (issue 37): 1 and 2 processes with --quick (4 too without it), the gloo all-reduce across 2
    for n in (1, 2):
        assert re.search(rf"^\| jax0\.12-cpu \| {n} \| \d+ \| \d+\.\d\d \| [\d.]+ \| [+-][\d.]+ \| ([\d.]+|-) \|$",
                         proc.stdout, re.M), ran(proc)
    jax = json.loads((REPO / "benchmarks" / "results" / "multiworker-jax0.12-cpu.json").read_text())
    assert jax["rounds"] == 1 and jax["quick"] is True and jax["allreduce_bytes"] > 0
    assert set(jax["allreduce_ms"]) == {"2"} and all(ms > 0 for ms in jax["allreduce_ms"].values())
    assert not re.search(r"^\| jax0\.12-cpu \| 4 \|", proc.stdout, re.M), ran(proc)


@covers("bench-profile")
def test_bench_profile_one_round(cpu_image, restored):
    restored("benchmarks/results/profile-overhead-tf2.21-cpu.json")
    proc = make("bench-profile", "BENCH_ARGS=--rounds 1", timeout=900)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^\| tf2\.21-cpu \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ s ", proc.stdout, re.M), ran(proc)
    result = json.loads((REPO / "benchmarks" / "results" / "profile-overhead-tf2.21-cpu.json").read_text())
    assert result["rounds"] == 1 and len(result["profiled"]) == 1


@covers("bench")
def test_bench_one_configuration_into_a_temporary_folder(cpu_image, restored, tmp_path):
    restored("benchmarks/results/sizes.json")
    out = tmp_path / "bench"
    proc = make("bench", f"BENCH_ARGS=tf2.21-cpu --quick --models mlp --batch-sizes 32 --jit off --precision off "
                         f"-o {out}", timeout=900)
    assert proc.returncode == 0, ran(proc)
    sizes = json.loads((REPO / "benchmarks" / "results" / "sizes.json").read_text())
    assert any(image["ref"] == "kerasenv:tf2.21-cpu" for image in sizes["images"]), ran(proc)
    assert list((out / "results").glob("*.json")) and (out / "report.md").exists(), ran(proc)


# --- refusals: a GPU, a registry, root, the network or a long time --------------------------

@covers("smoke-gpu")
def test_smoke_gpu_stops_at_the_doctor_on_a_host_without_gpu():
    if has_gpu():
        proc = make("smoke-gpu", "EPOCHS=2", timeout=1800)
        assert proc.returncode == 0 and "[smoke] OK (exit 0)" in proc.out, ran(proc)
        return
    proc = make("smoke-gpu")
    assert proc.returncode == 2, ran(proc)
    assert make_error("smoke-gpu", 3).search(proc.out), ran(proc)
    errors = [line for line in proc.out.splitlines() if line.startswith("kerasenv: error:")]
    assert len(errors) == 1 and "no GPU variant can run on this host" in errors[0], ran(proc)
    assert "kerasenv smoke" not in proc.out  # make stopped before the training


@covers("verify-gpu")
def test_verify_gpu_fails_the_container_probe_on_a_host_without_gpu(cpu_image):
    if has_gpu():
        proc = make("verify-gpu", timeout=900)
        assert proc.returncode == 0 and re.search(r"^PASS  container tf_gpus", proc.out, re.M), ran(proc)
        return
    proc = make("verify-gpu", "VARIANT=tf2.21-cpu")
    assert proc.returncode == 2, ran(proc)
    assert make_error("verify-gpu", 3).search(proc.out), ran(proc)
    assert re.search(r"^FAIL  container tf_gpus\s+\[\]$", proc.out, re.M), ran(proc)


@covers("lab")
def test_lab_refuses_a_variant_without_a_jupyterlab_flavour():
    proc = make("lab", "VARIANT=tf2.17-rocm6.3")
    assert proc.returncode == 2, ran(proc)
    assert make_error("lab", 2).search(proc.out), ran(proc)
    assert "kerasenv: error: tf2.17-rocm6.3 has no JupyterLab flavour" in proc.out, ran(proc)


@covers("sif")
def test_sif_refuses_an_unknown_variant_in_one_line():
    proc = make("sif", "VARIANT=tf9.99-cpu")
    assert proc.returncode == 2, ran(proc)
    assert make_error("sif", 2).search(proc.out), ran(proc)
    assert "kerasenv: error: unknown variant 'tf9.99-cpu': `kerasenv list` names them" in proc.out, ran(proc)


@covers("push", "pull")
@pytest.mark.parametrize("target", ["push", "pull"])
def test_push_and_pull_need_a_registry(target):
    proc = make(target)
    assert proc.returncode == 2, ran(proc)
    assert f"make {target}: set REGISTRY=, e.g. REGISTRY=ghcr.io/you" in proc.stderr, ran(proc)
    assert make_error(target, 2).search(proc.out), ran(proc)
    # What runs once REGISTRY= is given:
    # gzip unless COMPRESSION= says otherwise (Docker before 23 cannot unpack zstd).
    dry = make("-n", target, "VARIANT=tf2.21-cpu", "REGISTRY=registry.invalid/you")
    assert re.search(rf"kerasenv {target} tf2\.21-cpu --registry registry\.invalid/you --compression gzip$",
                     dry.stdout, re.M), ran(dry)
    dry = make("-n", target, "VARIANT=tf2.21-cpu", "REGISTRY=registry.invalid/you", "COMPRESSION=both")
    assert re.search(rf"kerasenv {target} tf2\.21-cpu --registry registry\.invalid/you --compression both$",
                     dry.stdout, re.M), ran(dry)
    assert_files_exist(dry.stdout)


@covers("lock")
def test_lock_refuses_an_unknown_variant():
    proc = make("lock", "VARIANT=tf9.9-x")
    assert proc.returncode == 2, ran(proc)
    assert make_error("lock", 2).search(proc.out), ran(proc)
    assert "kerasenv: error: unknown variant 'tf9.9-x'; valid ids: tf2.21-cpu" in proc.out, ran(proc)


@covers("build-all", "build-jupyter")
@pytest.mark.parametrize("target", ["build-all", "build-jupyter"])
def test_builds_refuse_a_missing_ca_before_docker(target):
    proc = make(target, "VARIANT=tf2.21-cpu", "CA_CERT=/nonexistent")
    assert proc.returncode == 2, ran(proc)
    assert make_error(target, 2).search(proc.out), ran(proc)
    assert "kerasenv: error: CA certificate /nonexistent does not exist" in proc.out, ran(proc)


# --- `make -n`: CI's own command, and the old names ----------------------------------------

@covers("test")
def test_test_runs_prereqs_drift_check_lint_and_the_lanes():
    proc = make("-n", "test")
    assert proc.returncode == 0, ran(proc)
    lines = proc.stdout.splitlines()
    assert "bash scripts/test-prereqs.sh" in lines[0], ran(proc)
    assert re.search(r"kerasenv generate --check$", proc.stdout, re.M), ran(proc)
    assert re.search(r"make --no-print-directory lint$", proc.stdout, re.M), ran(proc)
    assert re.search(r"make --no-print-directory -j4 --output-sync=line test-lanes$", proc.stdout, re.M), ran(proc)
    assert_files_exist(proc.stdout)


@covers("test-lanes")
def test_test_lanes_build_accept_and_test(matrix):
    proc = make("-n", "test-lanes")
    assert proc.returncode == 0, ran(proc)
    for v in matrix.debian_based:
        assert re.search(rf"^scripts/timed-step 'build {re.escape(v.id)}' ", proc.stdout, re.M), ran(proc)
    assert re.search(r"^scripts/timed-step 'unit tests' \.venv/bin/pytest tests -m 'not docker'", proc.stdout, re.M), ran(proc)
    assert re.search(r"^scripts/timed-step 'integration tests' \.venv/bin/pytest tests -m 'docker and not lane_image'",
                     proc.stdout, re.M), ran(proc)
    # (issue 44: the test lane's integration tests, test_apptainer's among them, are told where the
    # run's one SIF is, made beside the builds, zstd: 6 s of mksquashfs where gzip took 112 s)
    assert re.search(r"^scripts/timed-step 'integration tests \(test lane\)' env KERASENV_APPTAINER_TEST_SIF=\S+\.sif "
                     r"\.venv/bin/pytest .*tests/integration/test_apptainer\.py", proc.stdout, re.M), ran(proc)
    assert re.search(r"^rm -f (\S+\.sif) && .*scripts/timed-step 'sif jax0\.12-cpu' \.venv/bin/kerasenv sif jax0\.12-cpu "
                     r"--output \1 --compression zstd", proc.stdout, re.M), ran(proc)
    # the tests that need one more variant's image run in that variant's lane, before it is dropped
    lane_images = set(re.findall(r"pytest tests/integration -m docker --lane-image (\S+)", proc.stdout))
    assert lane_images and lane_images <= {v.id for v in matrix.debian_based}, ran(proc)
    steps = proc.stdout.splitlines()
    for v in matrix.debian_based:
        if v.arm64:  # the arm64 images after every amd64 step: a build, then its arm64_ci checks
            build = next(i for i, line in enumerate(steps) if f"'build {v.id}-arm64'" in line)
            checks = next(i for i, line in enumerate(steps) if f"smoke_tests --image kerasenv:{v.id}-arm64 -m arm64_ci" in line)
            last_amd64 = max(i for i, line in enumerate(steps) if "'integration tests" in line)
            assert last_amd64 < build < checks, ran(proc)
    assert_files_exist(proc.stdout)


# old name -> (the target it names, a line of that target's recipe)
ALIASES = {"run": ("smoke", "kerasenv smoke auto --build-missing"),
           "run-gpu": ("smoke-gpu", "kerasenv doctor --require-gpu"),
           "run-cpu": ("smoke-cpu", "kerasenv smoke tf2.21-cpu --build-missing"),
           "train-multiworker": ("multiworker", "kerasenv multiworker "),
           "test-image": ("test-acceptance", "pytest smoke_tests --variant "),
           "test-images": ("test-acceptance-all", "pytest smoke_tests $(for id in")}


@pytest.mark.parametrize("alias", covers(*ALIASES))
def test_an_old_name_runs_exactly_the_recipe_of_the_target_it_names(alias):
    target, line = ALIASES[alias]
    old, new = make("-n", alias), make("-n", target)
    assert old.returncode == 0 and new.returncode == 0, ran(old) + ran(new)
    assert line in new.stdout, ran(new)
    assert old.stdout == new.stdout
    assert_files_exist(new.stdout)


# --- clean and clean-images, against a fake Docker daemon -----------------------------------

class FakeDocker(BaseHTTPRequestHandler):
    """The few Engine API calls `kerasenv clean` makes: one leftover project container, one
    kerasenv image, nothing else. `calls` records (method, path, query) for the assertions."""

    protocol_version = "HTTP/1.1"
    calls: list = []
    CONTAINER = {"Id": "c0ffee" * 10 + "abcd", "Name": "/kerasenv-fake-leftover", "Names": ["/kerasenv-fake-leftover"],
                 "Labels": {PROJECT_LABEL: "kerasenv", "io.kerasenv.kind": "run"},
                 "Config": {"Labels": {PROJECT_LABEL: "kerasenv", "io.kerasenv.kind": "run"}}}
    IMAGE_REF = "kerasenv:tf2.21-cpu"
    IMAGE = {"Id": "sha256:" + "f" * 64, "RepoTags": [IMAGE_REF]}

    def _reply(self, body, status: int = 200) -> None:
        data = b"OK" if body == "OK" else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if body == "OK" else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(self) -> None:
        url = urlsplit(self.path)
        path = re.sub(r"^/v[\d.]+", "", url.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.calls.append((self.command, path, query))
        if self.headers.get("Content-Length"):
            self.rfile.read(int(self.headers["Content-Length"]))
        c, i = self.CONTAINER["Id"], self.IMAGE["Id"]
        answers = {
            ("GET", "/_ping"): "OK",
            ("GET", "/version"): {"ApiVersion": "1.41", "Version": "20.10.0", "MinAPIVersion": "1.12"},
            ("GET", "/containers/json"): [self.CONTAINER],
            ("GET", f"/containers/{c}/json"): self.CONTAINER,
            ("DELETE", f"/containers/{c}"): None,
            ("GET", "/networks"): [],
            ("POST", "/images/prune"): {"ImagesDeleted": None, "SpaceReclaimed": 0},
            ("GET", "/images/json"): [self.IMAGE] if self.IMAGE_REF in query.get("filters", "") else [],
            ("GET", f"/images/{i}/json"): self.IMAGE,
            ("DELETE", f"/images/{self.IMAGE_REF}"): [{"Untagged": self.IMAGE_REF}],
            ("GET", "/volumes"): {"Volumes": [], "Warnings": None},
        }
        key = (self.command, path)
        if key not in answers:
            self._reply({"message": f"the fake daemon has no {self.command} {path}"}, 404)
        elif answers[key] is None:
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._reply(answers[key])

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_docker():
    FakeDocker.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeDocker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}", FakeDocker.calls
    finally:
        server.shutdown()
        server.server_close()


@covers("clean", "clean-images")
@pytest.mark.parametrize("target", ["clean", "clean-images"])
def test_clean_removes_the_project_containers_by_label(fake_docker, target):
    """For real, but against a fake daemon: the real one holds other runs' containers and every
    image `make test` built."""
    host, calls = fake_docker
    proc = make(target, env={"DOCKER_HOST": host, "DOCKER_TLS_VERIFY": "", "DOCKER_CONTEXT": ""})
    assert proc.returncode == 0, ran(proc)
    assert "removed container kerasenv-fake-leftover" in proc.stdout, ran(proc)
    assert re.search(r"^clean: 1 container\(s\), 0 MB reclaimed$", proc.stdout, re.M), ran(proc)
    listed = [q for m, p, q in calls if (m, p) == ("GET", "/containers/json")]
    # by label, nothing else: the one on every container the tool or compose starts
    assert listed and all("io.kerasenv.kind" in q["filters"] for q in listed)
    assert any((m, p) == ("DELETE", f"/containers/{FakeDocker.CONTAINER['Id']}") for m, p, q in calls)
    removed_image = ("DELETE", f"/images/{FakeDocker.IMAGE_REF}") in [(m, p) for m, p, q in calls]
    assert removed_image is (target == "clean-images"), calls
    assert (f"removed image {FakeDocker.IMAGE_REF}" in proc.stdout) is (target == "clean-images"), ran(proc)


# --- real runs of images: build, sbom, smoke, shell, multiworker ----------------------------

@covers("build")
def test_build_of_the_cpu_image_comes_from_the_cache(cpu_image, docker):
    """Every RUN step a cache hit: the Debian archive state the image was built with (its label;
    a later day's archive would rebuild from the Debian step on, rightly), and nothing else of the
    suite's may have spoiled the cache (a `--no-cache` build on the same base did: this build then
    took 96 and 190 s of two cold CI runs; test_build_failures builds on a base of its own now)."""
    state = docker.images.get("kerasenv:tf2.21-cpu").labels.get("io.kerasenv.debian-updates")
    proc = make("build", "VARIANT=tf2.21-cpu", env={"KERASENV_DEBIAN_UPDATES": state} if state else None,
                timeout=1800)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^kerasenv:tf2\.21-cpu\t\d+\.\d\d GB\t\d+ s$", proc.stdout, re.M), ran(proc)
    lines = [line.strip() for line in proc.stderr.splitlines()]
    # BuildKit's steps ("step [builder 3/5] RUN ...", then "CACHED [builder 3/5] RUN ..." for a hit,
    # not always next: its steps run side by side); the classic builder's ("step 9/30 (RUN ...)",
    # "---> Using cache" next).
    runs = [i for i, line in enumerate(lines) if re.search(r"\] step (\d+/\d+ \(|\[[^\]]+\] )RUN ", line)]
    assert runs, ran(proc)
    cached = {line.split("CACHED ", 1)[1] for line in lines if re.search(r"\]\s+CACHED \[", line)}
    rebuilt = [lines[i] for i in runs
               if not lines[i + 1].endswith("---> Using cache") and lines[i].split("] step ", 1)[1] not in cached]
    assert not rebuilt, ran(proc)


@covers("sbom")
def test_sbom_writes_the_cyclonedx_file(cpu_image, restored):
    restored("sbom-tf2.21-cpu.cdx.json")
    proc = make("sbom", "VARIANT=tf2.21-cpu", timeout=600)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"^wrote sbom-tf2\.21-cpu\.cdx\.json: \d+ components$", proc.out, re.M), ran(proc)
    bom = json.loads((REPO / "sbom-tf2.21-cpu.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["metadata"]["component"]["name"] == "kerasenv:tf2.21-cpu"


SMOKE_OK = "[smoke] OK (exit 0)"


@covers("smoke", "smoke-cpu")
@pytest.mark.parametrize("args", [("smoke", "VARIANT=tf2.21-cpu"), ("smoke-cpu",)], ids=["smoke", "smoke-cpu"])
def test_smoke_trains_in_the_cpu_image(cpu_image, args):
    proc = make(*args, "EPOCHS=2", timeout=900)
    assert proc.returncode == 0, ran(proc)
    assert re.search(r"kerasenv smoke tf2\.21-cpu --build-missing --shm-size 2g +--epochs 2", proc.stdout), ran(proc)
    assert SMOKE_OK in proc.out, ran(proc)
    assert re.search(r"^kerasenv: report runs/\S+/report\.json$", proc.out, re.M), ran(proc)


@covers("shell")
def test_shell_without_a_terminal_runs_what_is_piped_to_it(cpu_image):
    proc = make("shell", input='echo "in $KERASENV_VARIANT at $PWD"; exit 7\n', stdin=None, timeout=300)
    assert proc.returncode == 2, ran(proc)  # make's status for a failed recipe
    assert make_error("shell", 7).search(proc.out), ran(proc)  # the shell's own status
    chosen = re.search(r"^kerasenv: using (\S+) ", proc.stderr, re.M)
    assert chosen, ran(proc)
    assert f"in {chosen.group(1)} at /workspace" in proc.stdout, ran(proc)


@covers("multiworker")
def test_multiworker_trains_two_workers_in_lockstep(cpu_image, docker):
    """The one real multi-worker training of the suite (tests/integration/test_multiworker.py
    kills a worker of another): through `make multiworker`, as a user starts it."""
    proc = make("multiworker", "VARIANT=tf2.21-cpu", "EPOCHS=2", timeout=900)
    assert proc.returncode == 0, ran(proc)
    network = re.search(r"^kerasenv: 2 workers \(MultiWorkerMirroredStrategy\) on network (\S+):", proc.out, re.M)
    assert network, ran(proc)
    assert "multi-worker: worker 0 of 2 (chief)" in proc.out, ran(proc)
    report = re.search(r"^kerasenv: chief's report (runs/mw-\S+)/report\.json$", proc.out, re.M)
    assert report, ran(proc)
    run_dir = REPO / report.group(1)
    chief = json.loads((run_dir / "report.json").read_text())
    worker = json.loads((run_dir / "worker-1" / "report.json").read_text())
    assert chief["status"] == worker["status"] == "ok"
    assert chief["distributed"]["workers"] == 2 and chief["distributed"]["chief"] is True
    assert worker["distributed"]["task_index"] == 1 and worker["distributed"]["chief"] is False
    assert chief["training"]["replicas"] == 2
    # Synchronous all-reduce: both workers saw the same global losses.
    assert chief["training"]["loss_per_epoch"] == worker["training"]["loss_per_epoch"]
    assert (run_dir / "model.keras").exists()
    assert list((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert multiworker_left(docker, "tf2.21-cpu") == []
    assert docker.networks.list(names=[network.group(1)]) == []


# --- compose: tensorboard, up, lab-up, down (own project name, runs dir and ports) ----------

@pytest.fixture
def compose_env(compose_plugin, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    project = f"kerasenv-mt-{uuid.uuid4().hex[:8]}"
    env = {"COMPOSE_PROJECT_NAME": project, "RUNS_DIR": str(runs), "PROJECT_DIR": str(tmp_path),
           "TENSORBOARD_PORT": str(free_port()), "JUPYTER_PORT": str(free_port()), "RUN_ID": "make-targets",
           "EPOCHS": "1"}
    yield env  # (the recipes `mkdir -p runs` whatever RUNS_DIR says: nothing_left_behind removes it)
    make("down", env=env, timeout=300)


def services(docker, project: str) -> dict[str, str]:
    """service -> container status, for a compose project."""
    return {c.labels["com.docker.compose.service"]: c.status
            for c in docker.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})}


def bring_up_then_down(docker, env: dict, target: str, expected: set[str]) -> subprocess.CompletedProcess:
    proc = make(target, env=env, timeout=300)
    assert proc.returncode == 0, ran(proc)
    assert set(services(docker, env["COMPOSE_PROJECT_NAME"])) == expected, ran(proc)
    down = make("down", env=env, timeout=300)
    assert down.returncode == 0, ran(down)
    assert re.search(r"docker compose -f compose/compose\.yaml +--profile lab down --remove-orphans", down.stdout)
    assert services(docker, env["COMPOSE_PROJECT_NAME"]) == {}, ran(down)
    return proc


@covers("tensorboard", "down")
def test_tensorboard_comes_up_and_down_removes_it(cpu_image, docker, compose_env):
    proc = bring_up_then_down(docker, compose_env, "tensorboard", {"tensorboard"})
    assert f"TensorBoard: http://127.0.0.1:{compose_env['TENSORBOARD_PORT']}" in proc.stdout, ran(proc)


@covers("up", "down")
def test_up_starts_training_and_tensorboard(cpu_image, docker, compose_env):
    proc = bring_up_then_down(docker, compose_env, "up", {"train", "tensorboard"})
    assert re.search(rf"^TensorBoard: http://127\.0\.0\.1:{compose_env['TENSORBOARD_PORT']} +\(logs: docker compose "
                     r"-f compose/compose\.yaml +logs -f train\)$", proc.stdout, re.M), ran(proc)


@covers("lab-up", "down")
def test_lab_up_starts_jupyterlab_and_prints_its_url(cpu_image, docker, compose_env):
    docker.images.get("kerasenv:tf2.21-cpu-jupyter")  # make test builds it; a missing one would be pulled
    proc = bring_up_then_down(docker, compose_env, "lab-up", {"lab"})
    assert re.search(rf"^JupyterLab: http://127\.0\.0\.1:{compose_env['JUPYTER_PORT']}/lab\?token=[0-9a-f]{{48}} ",
                     proc.stdout, re.M), ran(proc)


def test_every_target_in_the_table_has_a_test():
    """The table and the tests agree (tests/unit/repo/test_makefile.py checks the table against
    `make help` and fails on its TODOs)."""
    assert COVERED == {t for t, how in TARGETS.items() if how != TODO}

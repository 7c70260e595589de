"""Podman 5 behind DOCKER_HOST, for real: Debian sid's podman (5.8.6 when written) serving the
Docker API on a unix socket, driven by our CLI as in test_podman.py (Podman 4.3.1), and the one
thing Podman 5 adds: a GPU request sent as CDI reaches the container.

- Podman 5 needs sid's glibc: it runs in the sid root `make test-prereqs` makes
  (scripts/sid-root.sh: debootstrap once, entered with unshare + pivot_root), its storage, its
  CDI spec folder and its API socket in this module's tmp folder, bind-mounted at the same path,
  so the host's kerasenv reaches the socket and reads the spec Podman reads.
- Only the GPU is simulated: a FAKE CDI device, kind nvidia.com/gpu, devices "0" and "all",
  whose edits are an environment variable, a device node (/dev/null under another name) and a
  bind mount of a marker file. nvidia-smi is the fixture replay of an H100 host (as in
  test_doctor_cli.py), so kerasenv takes the host for a GPU host. Podman applies the spec as it
  would NVIDIA's (containers/podman#25171, 5.4.0: CDI DeviceRequests through the compat API);
  a real GPU through it is not tested here (no GPU).
- runc, not Podman's default crun: crun refuses this host's hybrid cgroups ("cgroups in hybrid
  mode not supported, drop all controllers from cgroupv2"); cgroup v1 is deprecated in Podman 5
  (its warning is silenced). No netavark network: every container here is --network none
  (containers.conf netns = "none" as well), and no firewall rule is made.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kerasenv.engine import docker_gpus, engine_facts, gpu_request
from kerasenv.engine.cdi import DIRS_ENV
from kerasenv.host import gpu_choice
from kerasenv.run import runner

from .conftest import REPO, kerasenv
from .test_podman import ROOTLESS_USER, _wait_for

SID = REPO / "scripts" / "sid-root.sh"
SID_ROOT = Path(os.environ.get("SID_ROOT", "/var/lib/kerasenv/sid-root"))
SMALL_IMAGE = "debian:bookworm-slim"  # `make test-prereqs` provides it; the CDI containers run `sh`
GPU_VARIANT = "tf2.21-cuda12.9"  # its GPU request is resolved; the container runs SMALL_IMAGE
FAKE_SMI = {"KERASENV_NVIDIA_SMI": str(REPO / "tests" / "fixtures" / "fake-nvidia-smi"),
            "KERASENV_FIXTURE_HOST": "h100-550"}
MARKER = "FAKE CDI device of kerasenv's tests (not a GPU)\n"
# What the container prints: the fake device's edits, each a word (or "missing").
SHOW_EDITS = ["sh", "-c", 'echo "env=${KERASENV_FAKE_CDI_GPU:-missing} device=${KERASENV_FAKE_CDI_GPU_DEVICE:-missing}";'
              ' test -c /dev/kerasenv-fake-gpu0 && echo node=yes || echo node=missing;'
              ' cat /run/kerasenv-fake-gpu 2>/dev/null || echo mount=missing']


def fake_spec(marker: Path, device_nodes: bool = True) -> dict:
    """The FAKE NVIDIA CDI spec (CDI 0.6.0, as `nvidia-ctk cdi generate` writes them: per-device
    edits and common ones): "0" and "all" give a device node (the host's /dev/null under another
    name) and say which they are, the common edits an environment variable and a read-only bind
    mount. `device_nodes` False for rootless Podman: rootless runc bind-mounts a device from the
    host at the node's container path (the OCI devices list has no host path), and there is no
    /dev/kerasenv-fake-gpu0 on the host ("error creating device nodes: mount
    src=/dev/kerasenv-fake-gpu0 ...: no such file or directory", seen here). NVIDIA's specs name
    /dev/nvidia* at the same path on both sides, so a real spec does not meet this."""
    node = {"path": "/dev/kerasenv-fake-gpu0", "hostPath": "/dev/null"}
    return {
        "cdiVersion": "0.6.0", "kind": "nvidia.com/gpu",
        "devices": [{"name": name, "containerEdits": {"env": [f"KERASENV_FAKE_CDI_GPU_DEVICE={name}"],
                                                      **({"deviceNodes": [node]} if device_nodes else {})}}
                    for name in ("0", "all")],
        "containerEdits": {"env": ["KERASENV_FAKE_CDI_GPU=1"],
                           "mounts": [{"hostPath": str(marker), "containerPath": "/run/kerasenv-fake-gpu",
                                       "options": ["ro", "bind"]}]},
    }


def sid_podman_version() -> str:
    """The sid root's podman version ("5.8.6"); the sid root missing fails (never a skip)."""
    proc = subprocess.run(["bash", str(SID), "--check"], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(proc.stderr.strip() or proc.stdout.strip())
    versions = dict(line.split(" ", 1) for line in (SID_ROOT / ".kerasenv-sid-root.versions").read_text().splitlines())
    return versions["podman"].split("+")[0].split("-")[0]


def containers_conf(path: Path, top: Path, cdi_dir: Path) -> None:
    # Podman's default ulimits for root containers (nofile 1048576) are above this machine's hard
    # limits (as in test_podman.py). lock_type file: Podman 4 on the host keeps SHM locks in
    # /dev/shm (the sid root has its own /dev/shm anyway). cgroupfs: no systemd here.
    # netns none: a container that asks for no network mode gets none either, so no netavark bridge
    # (podman0) or firewall rule is ever made on this shared machine (the sid root has no nft: a
    # bridge fails, but leaves podman0 behind, seen here).
    nofile = min(16384, resource.getrlimit(resource.RLIMIT_NOFILE)[1] // 2)
    nproc = min(16384, resource.getrlimit(resource.RLIMIT_NPROC)[1] // 2)
    path.write_text(f'[containers]\nnetns = "none"\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
                    f'[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
                    f'lock_type = "file"\ntmp_dir = "{top}/tmp"\ncdi_spec_dirs = ["{cdi_dir}"]\n')


class Podman5:
    """One Podman 5 API service in the sid root, and how to reach it."""

    def __init__(self, top: Path, user: str | None = None) -> None:
        self.top, self.user = top, user
        self.cdi_dir = top / "cdi"
        self.conf = top / "containers.conf"
        self.sock = top / "podman.sock"
        self.docker_host = f"unix://{self.sock}"
        self.storage = [] if user else ["--root", str(top / "root"), "--runroot", str(top / "run"),
                                         "--storage-driver", "overlay"]

    def argv(self, *podman: str) -> list[str]:
        env = [f"CONTAINERS_CONF={self.conf}", "PODMAN_IGNORE_CGROUPSV1_WARNING=1"]
        cmd = ["podman", *self.storage, *podman]
        if self.user:  # the user's own storage under its HOME (this folder), as rootless Podman keeps it
            cmd = ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups",
                   "env", f"HOME={self.top}", f"XDG_RUNTIME_DIR={self.top}/xdg", *cmd]
            (self.top / "xdg").mkdir(exist_ok=True, mode=0o700)
            shutil.chown(self.top / "xdg", self.user, self.user)
        return ["bash", str(SID), "run", "--bind", str(self.top), *sum((["--env", e] for e in env), []), "--", *cmd]

    def load(self, image: str) -> None:
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(self.argv("load", "-q"), stdin=save.stdout, capture_output=True, text=True,
                              timeout=600)
        save.stdout.close()
        assert save.wait() == 0 and load.returncode == 0, load.stderr

    def client(self):
        import docker

        return docker.DockerClient(base_url=self.docker_host)


def start(podman: Podman5, images: list[str]):
    from kerasenv.engine import server_process

    podman.cdi_dir.mkdir()
    marker = podman.top / "fake-gpu-marker"
    marker.write_text(MARKER)
    (podman.cdi_dir / "nvidia.json").write_text(json.dumps(fake_spec(marker, device_nodes=not podman.user)))
    containers_conf(podman.conf, podman.top, podman.cdi_dir)
    if podman.user:
        for path in (podman.top, *podman.top.iterdir()):
            shutil.chown(path, podman.user, podman.user)
    started = time.monotonic()
    for image in images:
        podman.load(image)
    print(f"\n[podman5] {', '.join(images)} loaded in {time.monotonic() - started:.0f} s")
    log = open(podman.top / "service.log", "w")
    # Each program of the chain execs the next (sid-root.sh, unshare, env, setpriv): this is podman.
    proc = subprocess.Popen(podman.argv("system", "service", "--time=0", podman.docker_host), stdout=log,
                            stderr=log, preexec_fn=server_process._default_signals)
    try:
        try:
            _wait_for(podman.sock, proc, "podman 5 system service")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {(podman.top / 'service.log').read_text()[-1500:]}") from None
        yield podman
    finally:
        server_process.stop(proc)
        log.close()


@pytest.fixture(scope="module")
def podman5(tmp_path_factory):
    """Rootful Podman 5 with SMALL_IMAGE in its own storage (the smoke test loads the CPU image);
    the fake spec."""
    version = sid_podman_version()
    top = tmp_path_factory.mktemp("podman5")
    podman = Podman5(top)
    podman.version = version
    yield from start(podman, [SMALL_IMAGE])
    subprocess.run(podman.argv("rm", "-a", "-f"), capture_output=True)
    subprocess.run(podman.argv("system", "reset", "-f"), capture_output=True)
    shutil.rmtree(top, ignore_errors=True)


def cli(podman: Podman5, *args: str, spec_dirs: str | None = None, **env) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": podman.docker_host, DIRS_ENV: spec_dirs or str(podman.cdi_dir), **env}
    return kerasenv(*args, check=False, env=env, timeout=900)


def engine_line(proc: subprocess.CompletedProcess, name: str = "engine") -> dict:
    assert proc.returncode == 0, proc.stderr
    return next(c for c in json.loads(proc.stdout)["host"] if c["name"] == name)


def test_the_sid_roots_podman_is_5_4_or_later():
    """CDI DeviceRequests need 5.4 (the others are not worth running on an older one)."""
    version = sid_podman_version()
    assert tuple(int(p) for p in version.split(".")[:2]) >= engine_facts.PODMAN_CDI_REQUESTS, version


def test_the_doctor_names_podman_5_and_its_cdi_route_on_a_gpu_host(podman5):
    proc = cli(podman5, "doctor", "--json", **FAKE_SMI)
    engine = engine_line(proc)
    assert engine["status"] == "PASS", engine
    assert engine["message"].startswith(f"Podman {podman5.version}, behind the Docker API, rootful, cgroup v")
    assert ", CDI on at unix://" in engine["message"]  # Podman names no spec folders: "CDI on", none listed
    assert "GPU requests go through CDI" in engine["message"]
    cdi = engine_line(proc, "cdi")
    assert cdi["status"] == "PASS" and "nvidia.com/gpu={0, all}" in cdi["message"], cdi
    # Docker's own answer, asked of Podman with the CDI request: it started the probe container.
    toolkit = engine_line(proc, "container-toolkit")
    assert toolkit["status"] == "PASS", toolkit
    assert "started a container with --gpus all through CDI (nvidia.com/gpu=all)" in toolkit["message"]
    assert podman5.client().containers.list(all=True) == []  # the probe is removed


def test_the_cpu_smoke_training_passes_through_podman_5(podman5, cpu_image):
    started = time.monotonic()
    podman5.load(cpu_image)  # `docker save | podman load`, as test_podman.py
    print(f"\n[podman5] {cpu_image} loaded in {time.monotonic() - started:.0f} s")
    # The runs folder in one Podman 5 sees too: it runs in the sid root's mount namespace, whose /tmp
    # is its own (scripts/sid-root.sh), and binds only podman5.top there. A runs-dir under pytest's
    # tmp_path was made in that private /tmp, and the report was gone with it (the cold CI of bcc56a0).
    runs = podman5.top / "smoke-runs"
    runs.mkdir(exist_ok=True)
    proc = cli(podman5, "smoke", "tf2.21-cpu", "--runs-dir", str(runs), "--run-id", "podman5", "--json",
               "--", "--epochs", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((runs / "podman5" / "report.json").read_text())
    assert report["verdict"]["learned"] and report["exit_code"] == 0
    assert podman5.client().containers.list(all=True) == []


@pytest.fixture
def gpu_host(podman5, monkeypatch, matrix):
    """This process as `kerasenv run` on a GPU host (the replayed nvidia-smi) against Podman 5."""
    from kerasenv.engine import docker_client

    monkeypatch.setenv("DOCKER_HOST", podman5.docker_host)
    monkeypatch.setenv(DIRS_ENV, str(podman5.cdi_dir))
    for key, value in FAKE_SMI.items():
        monkeypatch.setenv(key, value)
    docker_gpus.forget()
    return docker_client.client(), matrix.get(GPU_VARIANT)


def run_showing_edits(client, v, access) -> str:
    """`kerasenv run`'s container (runner.run: the same create() arguments) with SMALL_IMAGE."""
    out = io.StringIO()
    result = runner.run(client, v, SHOW_EDITS, gpus=access, image=SMALL_IMAGE, runs_dir=None, user=None,
                        network="none", stdout=out, stream=io.StringIO())
    assert result.exit_code == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("spec, device", [("all", "all"), ("1", "0")])  # a count of 1 is device 0
def test_a_gpu_request_is_sent_as_cdi_and_the_fake_devices_edits_are_in_the_container(gpu_host, spec, device):
    client, v = gpu_host
    access = gpu_choice.Resolver(client)(v, spec)  # what `kerasenv run --gpus all` resolves
    assert access.route == "cdi"
    (request,) = access.kwargs["device_requests"]
    assert (request["Driver"], request["DeviceIDs"]) == ("cdi", [f"nvidia.com/gpu={device}"])
    seen = run_showing_edits(client, v, access)
    assert seen.splitlines()[0] == f"env=1 device={device}", seen
    assert "node=yes" in seen and MARKER.strip() in seen
    assert client.containers.list(all=True) == []


def test_the_runtime_hooks_request_is_still_dropped_by_podman_5(gpu_host):
    """containers/podman#22645 (open): `--gpus`' own request starts, with none of the device's
    edits, on the same engine with the same spec: why kerasenv never sends it to Podman. If this
    fails, Podman honours it now and the refusal can go."""
    client, v = gpu_host
    access = gpu_request.GpuAccess(gpu_request.GpuSpec("all"), gpu_request.ROUTE_HOOK,
                                   gpu_request.hook_kwargs(gpu_request.GpuSpec("all")))
    seen = run_showing_edits(client, v, access)
    assert seen.splitlines()[0] == "env=missing device=missing" and "node=missing" in seen, seen


def test_a_device_podman_cannot_resolve_is_explained_in_one_line(gpu_host, tmp_path, monkeypatch):
    """kerasenv reads a spec naming GPU 1 (its folder is not the one Podman reads): Podman's own
    words, and the one line they become."""
    client, v = gpu_host
    spec = fake_spec(tmp_path / "marker")
    spec["devices"][0]["name"] = "1"
    (tmp_path / "nvidia.json").write_text(json.dumps(spec))
    monkeypatch.setenv(DIRS_ENV, str(tmp_path))
    access = gpu_choice.Resolver(client)(v, "device=1")
    assert access.kwargs["device_requests"][0]["DeviceIDs"] == ["nvidia.com/gpu=1"]
    with pytest.raises(runner.NoGpuRuntime) as refused:
        run_showing_edits(client, v, access)
    line = str(refused.value)  # from Podman's "setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=1"
    assert "the engine cannot resolve the CDI devices of --gpus device=1 through CDI (nvidia.com/gpu=1)" in line
    assert "regenerate it with" in line and "\n" not in line
    assert client.containers.list(all=True) == []


def test_the_cli_resolves_the_cdi_request_and_then_wants_the_image(podman5):
    """`kerasenv run --gpus all` with the CUDA variant: not refused (the CDI request is sent); its
    image is not in Podman's storage here (the CDI tests above run SMALL_IMAGE), which it says."""
    proc = cli(podman5, "run", GPU_VARIANT, "--gpus", "all", "--", "true", **FAKE_SMI)
    assert proc.returncode == 2 and "refused" not in proc.stderr
    assert f"kerasenv:{GPU_VARIANT} is not built here" in proc.stderr, proc.stderr


def test_without_a_spec_a_gpu_request_is_refused_in_one_line_and_nothing_starts(podman5, tmp_path):
    proc = cli(podman5, "run", GPU_VARIANT, "--gpus", "all", "--", "true", spec_dirs=str(tmp_path), **FAKE_SMI)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"kerasenv: error: --gpus refused: Podman {podman5.version} takes GPUs through its "
                           "Docker API only as CDI devices, and this host has no NVIDIA CDI spec naming them")
    assert f"(in {tmp_path}; KERASENV_CDI_SPEC_DIRS" in line
    assert "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in line
    assert podman5.client().containers.list(all=True) == []


@pytest.fixture(scope="module")
def rootless_podman5():
    """Podman 5's API service run by the unprivileged user kerasenv-rootless in the sid root."""
    version = sid_podman_version()
    try:
        pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        pytest.fail(f"no user {ROOTLESS_USER}: run `sudo make test-prereqs` (it creates it, with a subuid range)")
    top = Path(tempfile.mkdtemp(prefix="kerasenv-rootless5-"))  # the user's (pytest's tmp is root's, 0700)
    podman = Podman5(top, user=ROOTLESS_USER)
    podman.version = version
    try:
        yield from start(podman, [SMALL_IMAGE])
    finally:
        # The user is the tests' own: its rootless Podman leaves a pause process (catatonit -P).
        subprocess.run(["pkill", "-KILL", "-u", ROOTLESS_USER], capture_output=True)
        subprocess.run(["rm", "-rf", str(top)], capture_output=True)  # its storage holds subuid-owned files


def test_rootless_podman_5_is_named_rootless_and_applies_the_cdi_request(rootless_podman5, monkeypatch, matrix):
    proc = cli(rootless_podman5, "doctor", "--json", **FAKE_SMI)
    engine = engine_line(proc)
    assert engine["message"].startswith(f"Podman {rootless_podman5.version}, behind the Docker API, rootless"), engine
    monkeypatch.setenv("DOCKER_HOST", rootless_podman5.docker_host)
    monkeypatch.setenv(DIRS_ENV, str(rootless_podman5.cdi_dir))
    for key, value in FAKE_SMI.items():
        monkeypatch.setenv(key, value)
    client, v = rootless_podman5.client(), matrix.get(GPU_VARIANT)
    access = gpu_choice.Resolver(client)(v, "all")
    assert access.route == "cdi"
    seen = run_showing_edits(client, v, access)
    assert seen.splitlines()[0] == "env=1 device=all" and MARKER.strip() in seen, seen  # no node: fake_spec

"""Push and pull through a flaky registry: real faults, injected by a proxy (fault_proxy.py)
between the Docker daemon and a real registry (Debian's docker-registry), or by stopping
the registry mid-way. The CLI (`kerasenv --matrix M push|pull`) retries transient errors
with backoff, says so on one line per retry, and gives up after the bounded number of
attempts with a one-line error and exit status 1; a missing tag is not retried.

The image is small: `debian:bookworm-slim` (75 MB) tagged as a throwaway variant
`kerasenv:flaky-<hex>` declared in a copy of the matrix; every tag, proxy and registry
process the tests create is removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from kerasenv.engine import docker_client
from kerasenv.publish import registry as registry_mod

from .conftest import REPO, default_signal_dispositions, free_port, kerasenv
from .fault_proxy import FaultProxy, Rule

SMALL_IMAGE = "debian:bookworm-slim"
MANIFEST_ACCEPT = ("application/vnd.docker.distribution.manifest.v2+json, "
                   "application/vnd.oci.image.manifest.v1+json")
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an HTTP proxy


class Registry:
    """A real registry process on 127.0.0.1 that can be stopped and started again (same port,
    same storage)."""

    def __init__(self, root: Path) -> None:
        self.exe = shutil.which("docker-registry")
        if self.exe is None:
            pytest.fail("Debian's docker-registry is missing: `sudo make test-prereqs` installs it "
                        "(or `sudo apt-get install -y docker-registry`); `make test` does it as root")
        self.root, self.port, self.proc = root, free_port(), None
        (root / "config.yml").write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{self.port}\n")

    def start(self) -> None:
        # Stopped by terminate(): SIGTERM must not be inherited as ignored.
        self.proc = subprocess.Popen([self.exe, "serve", str(self.root / "config.yml")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=default_signal_dispositions)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                _opener.open(f"http://127.0.0.1:{self.port}/v2/", timeout=2)
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"docker-registry did not answer on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)

    def manifest_digest(self, tag: str) -> str | None:
        """The digest the registry serves for kerasenv:<tag> (asked directly, not via the proxy)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v2/kerasenv/manifests/{tag}",
                                         method="HEAD", headers={"Accept": MANIFEST_ACCEPT})
        try:
            return _opener.open(request, timeout=10).headers.get("Docker-Content-Digest")
        except OSError:
            return None


def _untag(docker, prefixes: list[str]) -> None:
    """Remove the local tags starting with one of `prefixes` (tags only: the image stays)."""
    for tag in docker_client.local_tags(docker):
        if any(tag.startswith(p) for p in prefixes):
            docker.images.remove(tag)


@pytest.fixture(scope="module")
def throwaway(docker, tmp_path_factory):
    """Two throwaway variants in a copy of the matrix; the first is `debian:bookworm-slim`
    tagged `kerasenv:<id>`, the second is never built or pushed."""
    if not docker_client.has_image(docker, SMALL_IMAGE):
        pytest.fail(f"{SMALL_IMAGE} is missing here: `docker pull {SMALL_IMAGE}` (it is the images' base)")
    vid = f"flaky-{uuid.uuid4().hex[:8]}"
    missing = f"{vid}-missing"
    block = ('\n[[variant]]\nid = "{}"\nfamily = "cpu"\nbackend = "tensorflow"\ntensorflow = "2.21.0"\nkeras = "3.15.1"\n'
             'python = "3.11"\nbase_image = "debian:bookworm-slim"\nnotes = "test only"\n')
    path = tmp_path_factory.mktemp("matrix") / "matrix.toml"
    path.write_text((REPO / "images" / "matrix.toml").read_text(encoding="utf-8")
                    + block.format(vid) + block.format(missing), encoding="utf-8")
    docker.images.get(SMALL_IMAGE).tag("kerasenv", vid)
    made: list[str] = [f"kerasenv:{vid}", f"kerasenv:{missing}"]  # prefixes of every tag made here
    try:
        yield SimpleNamespace(id=vid, missing=missing, matrix=path, made=made)
    finally:
        _untag(docker, made)


def _serve(root, throwaway):
    reg = Registry(root)
    throwaway.made.append(f"127.0.0.1:{reg.port}/")
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory, throwaway):
    yield from _serve(tmp_path_factory.mktemp("registry"), throwaway)


@pytest.fixture
def fresh_registry(tmp_path, throwaway):
    yield from _serve(tmp_path, throwaway)


@pytest.fixture
def make_proxy(throwaway):
    proxies: list[FaultProxy] = []

    def make(reg: Registry) -> FaultProxy:
        proxy = FaultProxy(reg.port)
        proxies.append(proxy)
        throwaway.made.append(f"{proxy.address}/")
        return proxy

    yield make
    for proxy in proxies:
        proxy.close()


def cli(throwaway, *args: str, attempts: int = 4, backoff_s: float = 0.5) -> subprocess.CompletedProcess:
    env = {**os.environ, registry_mod.ATTEMPTS_ENV: str(attempts), registry_mod.BACKOFF_ENV: str(backoff_s)}
    return kerasenv("--matrix", str(throwaway.matrix), *args, check=False, env=env, timeout=180)


def retry_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if "; retrying in " in line]


def succeeded(proc) -> dict:
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def test_push_retries_a_503_on_the_manifest_put_and_succeeds(throwaway, shared_registry, make_proxy):
    proxy = make_proxy(shared_registry)
    manifest = rf"/v2/kerasenv/manifests/{throwaway.id}$"
    proxy.rules.append(Rule(("PUT",), manifest, 503))
    proc = cli(throwaway, "push", throwaway.id, "--registry", proxy.address, "--json")
    pushed = succeeded(proc)
    assert retry_lines(proc) == [
        f"kerasenv: push {proxy.address}/kerasenv:{throwaway.id} failed (503 Service Unavailable); "
        f"retrying in 0.5 s (attempt 2 of 4)"]
    assert [s.action for s in proxy.requests("PUT", manifest)] == ["503", "relayed"]
    # The retry re-sent no layer: the registry already had them (HEAD), only the manifest.
    failed_at = next(i for i, s in enumerate(proxy.log) if s.action == "503")
    assert not [s for s in proxy.log[failed_at:] if s.method in ("POST", "PATCH")], proxy.log[failed_at:]
    assert pushed["digest"] and shared_registry.manifest_digest(throwaway.id) == pushed["digest"]


def test_pull_retries_a_reset_connection_and_succeeds(docker, throwaway, shared_registry, make_proxy):
    proxy = make_proxy(shared_registry)
    pushed = succeeded(cli(throwaway, "push", throwaway.id, "--registry", proxy.address, "--json"))
    docker.images.remove(f"{proxy.address}/kerasenv:{throwaway.id}")  # the pull must create it again
    manifest = rf"/v2/kerasenv/manifests/{throwaway.id}$"
    proxy.rules.append(Rule(("HEAD", "GET"), manifest, "reset"))
    before = len(proxy.log)
    proc = cli(throwaway, "pull", throwaway.id, "--registry", proxy.address, "--json")
    pulled = succeeded(proc)
    assert retry_lines(proc) == [
        f"kerasenv: pull {proxy.address}/kerasenv:{throwaway.id} failed (connection reset); "
        f"retrying in 0.5 s (attempt 2 of 4)"]
    asked = [s.action for s in proxy.log[before:] if s.method in ("HEAD", "GET") and "/manifests/" in s.path]
    assert asked[:2] == ["reset", "relayed"], asked
    assert pulled["digest"] == pushed["digest"]
    assert f"{proxy.address}/kerasenv@{pushed['digest']}" in \
        docker.images.get(f"{proxy.address}/kerasenv:{throwaway.id}").attrs["RepoDigests"]


def test_push_survives_the_registry_stopping_mid_way(throwaway, fresh_registry, make_proxy):
    """The registry dies when the manifest is about to be stored (after the layers were sent)
    and comes back during the second wait: the retries wait 1.5 s, then 3 s, so the second
    attempt finds it down and the third finds it up. The restart is timed from the second
    attempt's first request (1 s after it, well inside the 3 s wait), not from the stop: under
    load the daemon took over 0.5 s to reach the registry again, and a restart 2 s after the stop
    had it up for the second attempt already (seen in CI)."""
    proxy = make_proxy(fresh_registry)
    events: list[tuple[str, float]] = []

    def restart_later() -> None:
        time.sleep(1)
        fresh_registry.start()
        events.append(("started", time.monotonic()))

    restart = threading.Thread(target=restart_later, daemon=True)

    def hook(method: str, path: str) -> None:
        if method == "PUT" and "/manifests/" in path and not events:
            fresh_registry.stop()
            events.append(("stopped", time.monotonic()))
        elif len(events) == 1 and restart.ident is None and time.monotonic() - events[0][1] >= 1.0:
            # The second attempt's first request (its wait is 1.5 s; the daemon's own quick
            # retries inside the first attempt come sooner): it fails, the third will not.
            restart.start()

    proxy.hook = hook
    started = time.monotonic()
    try:
        proc = cli(throwaway, "push", throwaway.id, "--registry", proxy.address, "--json", backoff_s=1.5)
    finally:
        if restart.ident is not None:  # the hook started it
            restart.join(30)  # so the fixture's stop() sees the restarted process
    pushed = succeeded(proc)
    what = f"kerasenv: push {proxy.address}/kerasenv:{throwaway.id} failed (connection reset); retrying in"
    assert retry_lines(proc) == [f"{what} 1.5 s (attempt 2 of 4)", f"{what} 3 s (attempt 3 of 4)"], proc.stderr
    assert [name for name, _ in events] == ["stopped", "started"]
    down = [s for s in proxy.log if s.action == "upstream down"]
    assert down and down[0].method == "PUT" and "/manifests/" in down[0].path  # it died mid-way
    uploads = [i for i, s in enumerate(proxy.log) if s.method == "POST"]
    assert uploads and max(uploads) < proxy.log.index(down[0])  # layers sent once, before it died
    assert fresh_registry.manifest_digest(throwaway.id) == pushed["digest"]
    print({"push_with_registry_restart_s": round(time.monotonic() - started, 1)})


def test_push_gives_up_after_the_bounded_attempts_with_one_line_error(throwaway, shared_registry, make_proxy):
    proxy = make_proxy(shared_registry)
    manifest = rf"/v2/kerasenv/manifests/{throwaway.id}$"
    proxy.rules.append(Rule(("PUT",), manifest, 502, times=float("inf")))
    started = time.monotonic()
    proc = cli(throwaway, "push", throwaway.id, "--registry", proxy.address, attempts=3, backoff_s=0.2)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    ref = f"{proxy.address}/kerasenv:{throwaway.id}"
    assert retry_lines(proc) == [
        f"kerasenv: push {ref} failed (502 Bad Gateway); retrying in 0.2 s (attempt 2 of 3)",
        f"kerasenv: push {ref} failed (502 Bad Gateway); retrying in 0.4 s (attempt 3 of 3)"]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kerasenv: error:")]
    assert len(errors) == 1 and proc.stderr.rstrip("\n").splitlines()[-1] == errors[0]
    error = errors[0]
    assert error.startswith(f"kerasenv: error: push {ref} failed 3 times, last with 502 Bad Gateway: "
                            f"received unexpected HTTP status: 502 Bad Gateway; "
                            f"the registry {proxy.address} is down, failing or unreachable"), error
    assert f"`kerasenv push {throwaway.id} --registry {proxy.address}` again" in error
    assert len(proxy.requests("PUT", manifest)) == 3  # bounded: exactly the attempts
    assert elapsed < 60, elapsed
    print({"give_up_after_3_attempts_s": round(elapsed, 1)})


def test_pull_of_a_missing_tag_fails_at_once_with_the_fix(throwaway, shared_registry, make_proxy):
    proxy = make_proxy(shared_registry)
    proc = cli(throwaway, "pull", throwaway.missing, "--registry", proxy.address)
    assert proc.returncode == 1, proc.stderr
    assert retry_lines(proc) == []
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith(f"kerasenv: error: pull {proxy.address}/kerasenv:{throwaway.missing} failed: "), error
    assert "not found" in error or "manifest unknown" in error, error
    assert (f"the tag is not in the registry: push it first (`kerasenv push {throwaway.missing} "
            f"--registry {proxy.address}`)") in error
    # One attempt: the daemon pings /v2/ once per pull, then asks for the manifest (HEAD, GET).
    assert len(proxy.requests("GET", r"^/v2/$")) == 1, proxy.log
    print({"missing_tag_error": error})

"""Retries of registry pushes and pulls (no Docker): which daemon error texts are transient,
the backoff schedule, the bounded number of attempts, and that permanent errors fail at once
with the fix. A fake client stands in for the docker SDK; its push/pull streams yield the
daemon's progress and error events (or raise its API error)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from docker.errors import APIError

from kerasenv.matrix import labels as labels_mod
from kerasenv.publish import registry
from kerasenv.errors import EXIT_FAILURE, EXIT_USAGE, KerasenvError, UsageError

REG = "127.0.0.1:5000"
REPO = f"{REG}/kerasenv"

# (message, kind, cause) -- each message as the daemon reported it, and where it was seen.
TEXTS = [
    # distribution registry/client/errors.go UnexpectedHTTPStatusError; goharbor/harbor#16653 (push)
    ("received unexpected HTTP status: 502 Bad Gateway", "transient", "502 Bad Gateway"),
    # dockerd 20.10.24 here, manifest PUT answered 503 by tests/integration/fault_proxy.py
    ("received unexpected HTTP status: 503 Service Unavailable", "transient", "503 Service Unavailable"),
    # moby/moby#17506, docker/hub-feedback#1761 (older daemons capitalise "Received")
    ("Received unexpected HTTP status: 500 Internal Server Error", "transient", "500 Internal Server Error"),
    # nginx's reason phrase for 504 in front of a registry
    ("received unexpected HTTP status: 504 Gateway Time-out", "transient", "504 Gateway Time-out"),
    # distribution errcode/register.go UNAVAILABLE (a 503 with a JSON body)
    ("unavailable: service unavailable", "transient", "503 service unavailable"),
    # ocurrent/ocluster#246
    ('Get "https://docker.tunbury.org.uk/v2/": dial tcp 5.102.169.187:443: connect: connection refused',
     "transient", "connection refused"),
    # docker/hub-feedback#1059
    ("error pulling image configuration: Get https://dseasb33srnrn.cloudfront.net/registry-v2/docker/"
     "registry/v2/blobs/sha256/fc/fc4e/data: dial tcp 52.84.33.187:443: getsockopt: connection refused",
     "transient", "connection refused"),
    # Azure/iotedgedev#359
    ("Get http://localhost:5000/v2/: read tcp [::1]:57170->[::1]:5000: read: connection reset by peer",
     "transient", "connection reset"),
    # dockerd 20.10.24 here: pull, manifest HEAD reset by tests/integration/fault_proxy.py
    ('Head "http://127.0.0.1:34037/v2/kerasenv/manifests/exp1": read tcp 127.0.0.1:59922->127.0.0.1:34037: '
     "read: connection reset by peer", "transient", "connection reset"),
    # moby/moby#28596, distribution/distribution#1568
    ("unexpected EOF", "transient", "unexpected EOF"),
    # docker-archive/docker-registry#753
    ("Failed to upload metadata: Put https://docker-registry.example/v1/images/1739feaf13d7/checksum: EOF",
     "transient", "EOF"),
    # docker/hub-feedback#1195
    ("Get https://registry-1.docker.io/v2/library/ubuntu/manifests/latest: net/http: TLS handshake timeout",
     "transient", "TLS handshake timeout"),
    # docker/for-win#5983, exadel-inc/CompreFace#1277
    ('Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection '
     "(Client.Timeout exceeded while awaiting headers)", "transient", "request canceled (timeout)"),
    # docker-archive-public/docker.kitematic#2194
    ("error pulling image configuration: Get https://dseasb33srnrn.cloudfront.net/registry-v2/x/data: "
     "dial tcp 52.85.151.90:443: i/o timeout", "transient", "i/o timeout"),
    # docker/for-linux#3: a DNS lookup that timed out is a timeout, not a wrong name
    ("Get https://d.cloudfront.net/x: dial tcp: lookup d.cloudfront.net on 127.0.1.1:53: read udp "
     "127.0.0.1:40048->127.0.1.1:53: i/o timeout", "transient", "i/o timeout"),
    # a port that looks like a status code is still a refused connection
    ('Get "http://127.0.0.1:429/v2/": dial tcp 127.0.0.1:429: connect: connection refused',
     "transient", "connection refused"),
    # moby distribution/errors.go TranslatePullError (ErrorCodeDenied); Docker Hub's errcode text
    ("pull access denied for novakjudi/af_nomad_test, repository does not exist or may require "
     "'docker login': denied: requested access to the resource is denied", "auth", "auth"),
    # distribution errcode/register.go DENIED, UNAUTHORIZED
    ("denied: requested access to the resource is denied", "auth", "auth"),
    ("unauthorized: authentication required", "auth", "auth"),
    # moby TranslatePullError (ErrorCodeManifestUnknown); seen here for a tag never pushed
    ("manifest for 127.0.0.1:39247/kerasenv:flaky-missing not found: manifest unknown: manifest unknown",
     "not_found", "not found"),
    # moby TranslatePullError (ErrorCodeNameUnknown) + registry/api/v2 NAME_UNKNOWN
    ("repository 127.0.0.1:5000/kerasenv not found: name unknown: repository name not known to registry",
     "not_found", "not found"),
    # docker/hub-feedback#2429 (errcode TOOMANYREQUESTS; dockerd does not retry it either)
    ("toomanyrequests: You have reached your pull rate limit. You may increase the limit by "
     "authenticating and upgrading: https://www.docker.com/increase-rate-limit", "rate_limit", "rate limit"),
    # Go net/http, a plain-HTTP registry asked over TLS
    ('Get "https://10.0.0.5:5000/v2/": http: server gave HTTP response to HTTPS client', "plain_http",
     "plain http"),
    ('Get "https://r.example/v2/": x509: certificate signed by unknown authority', "tls", "tls"),
    ('Get "https://nosuch.example/v2/": dial tcp: lookup nosuch.example on 127.0.0.53:53: no such host',
     "dns", "dns"),
    ("something nobody has seen before", "other", "error"),
]


@pytest.mark.parametrize("message,kind,cause", TEXTS, ids=[t[0][:60] for t in TEXTS])
def test_classify_real_daemon_texts(message, kind, cause):
    assert registry.classify(message) == registry.Failure(kind, cause)


def test_backoff_doubles_from_the_base_and_is_capped():
    policy = registry.RetryPolicy()
    assert (policy.attempts, policy.backoff_s) == (4, 2.0)
    assert [policy.delay(n) for n in (1, 2, 3)] == [2, 4, 8]
    assert registry.RetryPolicy(20, 10).delay(10) == registry.MAX_DELAY_S
    assert [registry.RetryPolicy(3, 0).delay(n) for n in (1, 2)] == [0, 0]


def test_policy_from_environment():
    assert registry.RetryPolicy.from_env({}) == registry.RetryPolicy(4, 2.0)
    env = {registry.ATTEMPTS_ENV: "2", registry.BACKOFF_ENV: "0.25"}
    assert registry.RetryPolicy.from_env(env) == registry.RetryPolicy(2, 0.25)


@pytest.mark.parametrize("name,value", [(registry.ATTEMPTS_ENV, "0"), (registry.ATTEMPTS_ENV, "many"),
                                        (registry.ATTEMPTS_ENV, "21"), (registry.BACKOFF_ENV, "-1"),
                                        (registry.BACKOFF_ENV, "soon"), (registry.BACKOFF_ENV, "nan")])
def test_policy_rejects_bad_values_naming_the_variable(name, value):
    with pytest.raises(UsageError) as info:
        registry.RetryPolicy.from_env({name: value})
    assert info.value.exit_code == EXIT_USAGE
    assert info.value.message.startswith(f"{name}={value!r} is not ")
    assert "\n" not in info.value.message


# --- a fake docker client ---------------------------------------------------------------------

def ok_push(tag):
    return [{"status": "The push refers to repository [x]"},
            {"status": "Layer already exists", "id": "aaa"},
            {"status": f"{tag}: digest: sha256:d size: 529"},
            {"aux": {"Tag": tag, "Digest": "sha256:d", "Size": 529}}]


def ok_pull():
    return [{"status": "Pulling from kerasenv"}, {"status": "Already exists", "id": "aaa"},
            {"status": "Digest: sha256:d"}]


def error_event(message):
    return [{"status": "The push refers to repository [x]"},
            {"errorDetail": {"message": message}, "error": message}]


class FakeImage:
    def __init__(self, labels=None, arch="amd64"):
        self.labels, self.tags = labels or {}, []
        self.attrs = {"Architecture": arch}

    def tag(self, repo, tag):
        self.tags.append(f"{repo}:{tag}")


class FakeClient:
    """outcomes: one per daemon call, in order: a list of events, or an exception to raise."""

    def __init__(self, outcomes, labels=None, engine_version="20.10.24+dfsg1"):
        self.outcomes, self.calls = list(outcomes), []
        self.image = FakeImage(labels)
        self.engine_version = engine_version
        client = self

        class Images:
            def get(self, ref):
                return client.image

            def push(self, repo, tag, stream, decode):
                return client._next(("push", f"{repo}:{tag}"))

        class Api:
            def pull(self, repo, tag, stream, decode, **platform):
                return client._next(("pull", f"{repo}:{tag}"))

        self.images, self.api = Images(), Api()

    def version(self):
        return {"Version": self.engine_version}

    def _next(self, call):
        self.calls.append(call)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome

        def events():
            yield from outcome
        return events()


@pytest.fixture(autouse=True)
def no_previous_release(monkeypatch):
    """No release in the (made-up) registry to keep blobs of: publish/continuity.py asks skopeo, which
    must not go looking for these registries (test_continuity.py tests that part)."""
    monkeypatch.setattr(registry.continuity, "read", lambda ref, **kw: None)
    monkeypatch.setattr(registry.continuity, "can_check", lambda: True)


@pytest.fixture
def slept(monkeypatch):
    delays: list[float] = []
    monkeypatch.setattr(registry, "_sleep", delays.append)
    monkeypatch.delenv(registry.ATTEMPTS_ENV, raising=False)
    monkeypatch.delenv(registry.BACKOFF_ENV, raising=False)
    return delays


@pytest.fixture
def cpu(real_matrix):
    return real_matrix.get("tf2.21-cpu")


def test_push_retries_a_502_then_pushes_every_tag(real_matrix, cpu, slept):
    tags = registry.tags_mod.tags(real_matrix, cpu)  # the id, the full tag, latest-cpu
    client = FakeClient([error_event("received unexpected HTTP status: 502 Bad Gateway")]
                        + [ok_push(t) for t in tags])
    said: list[str] = []
    [t] = registry.push(client, real_matrix, cpu, REG, say=said.append)
    assert [c[1] for c in client.calls] == [f"{REPO}:{tags[0]}"] * 2 + [f"{REPO}:{x}" for x in tags[1:]]
    assert slept == [2]
    assert [line for line in said if "retrying" in line] == [
        f"kerasenv: push {REPO}:tf2.21-cpu failed (502 Bad Gateway); retrying in 2 s (attempt 2 of 4)"]
    assert t.digest == "sha256:d" and t.ref == f"{REPO}:tf2.21-cpu"


def test_push_gives_up_after_four_attempts_with_one_line(real_matrix, cpu, slept):
    message = 'Get "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused'
    client = FakeClient([error_event(message)] * 10)
    said: list[str] = []
    with pytest.raises(KerasenvError) as info:
        registry.push(client, real_matrix, cpu, REG, say=said.append)
    assert len(client.calls) == 4  # bounded
    assert slept == [2, 4, 8]
    assert [line.split("retrying in ")[1] for line in said if "retrying" in line] == [
        "2 s (attempt 2 of 4)", "4 s (attempt 3 of 4)", "8 s (attempt 4 of 4)"]
    error = info.value
    assert error.exit_code == EXIT_FAILURE and "\n" not in error.message and not error.details
    assert error.message.startswith(f"push {REPO}:tf2.21-cpu failed 4 times, last with connection refused: "
                                    f"{message}; the registry {REG} is down")
    assert f"`kerasenv push tf2.21-cpu --registry {REG}` again" in error.message
    assert registry.ATTEMPTS_ENV in error.message


def test_attempts_and_backoff_come_from_the_environment(real_matrix, cpu, slept, monkeypatch):
    monkeypatch.setenv(registry.ATTEMPTS_ENV, "2")
    monkeypatch.setenv(registry.BACKOFF_ENV, "0.5")
    client = FakeClient([error_event("received unexpected HTTP status: 503 Service Unavailable")] * 5)
    with pytest.raises(KerasenvError, match=r"failed 2 times, last with 503 Service Unavailable"):
        registry.push(client, real_matrix, cpu, REG, say=lambda m: None)
    assert len(client.calls) == 2 and slept == [0.5]


def test_one_attempt_means_no_retry(real_matrix, cpu, slept, monkeypatch):
    monkeypatch.setenv(registry.ATTEMPTS_ENV, "1")
    client = FakeClient([error_event("unexpected EOF")] * 2)
    with pytest.raises(KerasenvError, match=r"failed 1 time, last with unexpected EOF"):
        registry.push(client, real_matrix, cpu, REG, say=lambda m: None)
    assert len(client.calls) == 1 and slept == []


@pytest.mark.parametrize("message,fix", [
    ("denied: requested access to the resource is denied", f"log in with `docker login {REG}`"),
    ("unauthorized: authentication required", f"log in with `docker login {REG}`"),
    ("toomanyrequests: too many requests", "is rate-limiting you"),
    ("something nobody has seen before", "not a known transient error, so not retried"),
])
def test_push_does_not_retry_permanent_errors(real_matrix, cpu, slept, message, fix):
    client = FakeClient([error_event(message)] * 4)
    said: list[str] = []
    with pytest.raises(KerasenvError) as info:
        registry.push(client, real_matrix, cpu, REG, say=said.append)
    assert len(client.calls) == 1 and slept == [] and not [s for s in said if "retrying" in s]
    assert info.value.message.startswith(f"push {REPO}:tf2.21-cpu failed: {message}; ")
    assert fix in info.value.message and "\n" not in info.value.message


def test_pull_retries_an_api_error_before_progress(real_matrix, cpu, slept):
    """A pull that fails before any progress comes back as the daemon's API error."""
    reset = APIError("500 Server Error", explanation=(
        'Head "http://127.0.0.1:5000/v2/kerasenv/manifests/tf2.21-cpu": read tcp 127.0.0.1:1->127.0.0.1:5000: '
        "read: connection reset by peer"))
    labels = labels_mod.static_labels(real_matrix, cpu)
    client = FakeClient([reset, ok_pull()], labels=labels)
    said: list[str] = []
    t = registry.pull(client, real_matrix, cpu, REG, say=said.append)
    assert len(client.calls) == 2 and slept == [2]
    assert [line for line in said if "retrying" in line] == [
        f"kerasenv: pull {REPO}:tf2.21-cpu failed (connection reset); retrying in 2 s (attempt 2 of 4)"]
    assert t.digest == "sha256:d" and t.stale == {}
    assert "kerasenv:tf2.21-cpu" in client.image.tags  # retagged for the rest of the tooling


def test_pull_of_a_missing_tag_fails_at_once_with_the_fix(real_matrix, cpu, slept):
    missing = APIError("404 Client Error", explanation=(
        f"manifest for {REPO}:tf2.21-cpu not found: manifest unknown: manifest unknown"))
    client = FakeClient([missing] * 4)
    with pytest.raises(KerasenvError) as info:
        registry.pull(client, real_matrix, cpu, REG, say=lambda m: None)
    assert len(client.calls) == 1 and slept == []
    assert info.value.message == (
        f"pull {REPO}:tf2.21-cpu failed: manifest for {REPO}:tf2.21-cpu not found: manifest unknown: "
        f"manifest unknown; the tag is not in the registry: push it first (`kerasenv push tf2.21-cpu "
        f"--registry {REG}`) or check the registry and the variant id (`kerasenv list`)")


def test_a_multi_line_daemon_error_becomes_one_line(real_matrix, cpu, slept):
    client = FakeClient([error_event("denied: requested access to the resource is denied\n\nmore detail")])
    with pytest.raises(KerasenvError) as info:
        registry.push(client, real_matrix, cpu, REG, say=lambda m: None)
    assert "\n" not in info.value.message and "more detail" not in info.value.message


def test_a_bad_environment_value_fails_before_anything_is_pushed(real_matrix, cpu, slept, monkeypatch):
    monkeypatch.setenv(registry.ATTEMPTS_ENV, "lots")
    client = FakeClient([])
    with pytest.raises(UsageError, match=registry.ATTEMPTS_ENV):
        registry.push(client, real_matrix, cpu, REG, say=lambda m: None)
    assert client.calls == []


# --- compression: zstd tags through skopeo, and Docker < 23 refusing them ------------------

ZSTD_ON_DOCKER_20 = "failed to register layer: Error processing tar file(exit status 1): archive/tar: invalid tar header"


@pytest.fixture
def skopeo_calls(monkeypatch):
    """What the push asks skopeo to do, recorded instead of run."""
    from kerasenv.publish import compression

    calls: list[tuple] = []
    monkeypatch.setattr(compression, "_skopeo", lambda: "/usr/bin/skopeo")
    monkeypatch.setattr(compression, "push_zstd", lambda image, dest, **kw: calls.append(("push_zstd", image, dest)) or 1.0)
    monkeypatch.setattr(compression, "copy_tag", lambda src, dest, **kw: calls.append(("copy_tag", src, dest)))
    monkeypatch.setattr(compression, "manifest_digest", lambda ref, **kw: "sha256:z")
    return calls


def test_push_both_sends_gzip_through_the_daemon_and_zstd_tags_through_skopeo(real_matrix, cpu, slept, skopeo_calls):
    tags = registry.tags_mod.tags(real_matrix, cpu)
    client = FakeClient([ok_push(t) for t in tags])
    gzip, zstd = registry.push(client, real_matrix, cpu, REG, "both", say=lambda m: None)
    assert [c[1] for c in client.calls] == [f"{REPO}:{t}" for t in tags]  # plain tags: gzip, by the daemon
    # one recompression from the engine, then the other -zstd tags copied in the registry
    assert skopeo_calls == [("push_zstd", "kerasenv:tf2.21-cpu", f"{REPO}:tf2.21-cpu-zstd")] + [
        ("copy_tag", f"{REPO}:tf2.21-cpu-zstd", f"{REPO}:{t}-zstd") for t in tags[1:]]
    assert (gzip.compression, gzip.ref, gzip.digest) == ("gzip", f"{REPO}:tf2.21-cpu", "sha256:d")
    assert (zstd.compression, zstd.ref, zstd.digest) == ("zstd", f"{REPO}:tf2.21-cpu-zstd", "sha256:z")


def test_push_zstd_alone_touches_no_plain_tag(real_matrix, cpu, slept, skopeo_calls):
    client = FakeClient([])
    [t] = registry.push(client, real_matrix, cpu, REG, "zstd", say=lambda m: None)
    assert client.calls == [] and t.compression == "zstd"
    assert all(call[2].endswith("-zstd") for call in skopeo_calls)


def test_push_zstd_without_skopeo_fails_before_anything_is_sent(real_matrix, cpu, slept, monkeypatch):
    from kerasenv.publish import compression

    monkeypatch.setattr(compression.shutil, "which", lambda name: None)
    client = FakeClient([ok_push("x")] * 3)
    with pytest.raises(UsageError) as info:
        registry.push(client, real_matrix, cpu, REG, "both", say=lambda m: None)
    assert client.calls == [] and info.value.exit_code == EXIT_USAGE
    assert "skopeo is missing" in info.value.message and "apt-get install -y skopeo" in info.value.message


def test_pull_zstd_on_docker_20_is_refused_before_the_pull_with_the_gzip_tag(real_matrix, cpu, slept):
    client = FakeClient([ok_pull()])
    with pytest.raises(UsageError) as info:
        registry.pull(client, real_matrix, cpu, REG, "zstd", say=lambda m: None)
    assert client.calls == []
    assert info.value.message == (
        f"{REPO}:tf2.21-cpu-zstd has zstd layers, which Docker 20.10.24+dfsg1 cannot unpack (Docker >= 23.0 and "
        f"containerd can): pull the gzip tag {REPO}:tf2.21-cpu instead (`kerasenv pull tf2.21-cpu --registry {REG}`), "
        f"or upgrade Docker")


def test_pull_zstd_on_docker_29_pulls_the_zstd_tag(real_matrix, cpu, slept):
    client = FakeClient([ok_pull()], labels=labels_mod.static_labels(real_matrix, cpu), engine_version="29.3.0")
    t = registry.pull(client, real_matrix, cpu, REG, "zstd", say=lambda m: None)
    assert client.calls == [("pull", f"{REPO}:tf2.21-cpu-zstd")] and t.compression == "zstd"
    assert "kerasenv:tf2.21-cpu" in client.image.tags


def test_a_zstd_image_under_a_plain_tag_fails_on_docker_20_with_one_line(real_matrix, cpu, slept):
    """Pushed by another tool: the daemon fetches it and fails to unpack; not retried."""
    client = FakeClient([[{"status": "Pulling fs layer", "id": "a"},
                          {"errorDetail": {"message": ZSTD_ON_DOCKER_20}, "error": ZSTD_ON_DOCKER_20}]] * 4)
    with pytest.raises(UsageError) as info:
        registry.pull(client, real_matrix, cpu, REG, say=lambda m: None)
    assert len(client.calls) == 1 and slept == []
    message = info.value.message
    assert message.startswith(f"{REPO}:tf2.21-cpu has zstd layers, which Docker 20.10.24+dfsg1 cannot unpack")
    assert f"`kerasenv push tf2.21-cpu --registry {REG}`" in message and "\n" not in message


def test_pull_both_is_a_usage_error(real_matrix, cpu, slept):
    with pytest.raises(UsageError, match="choose gzip or zstd"):
        registry.pull(FakeClient([]), real_matrix, cpu, REG, "both", say=lambda m: None)


# --- one tag, two architectures (issue 36) -----------------------------------------------------

class TwoArchClient(FakeClient):
    """A client with kerasenv:<id> (amd64) and, unless `arm64=False`, kerasenv:<id>-arm64."""

    def __init__(self, outcomes, arm64=True):
        super().__init__(outcomes)
        client, images = self, {"amd64": FakeImage(arch="amd64"), "arm64": FakeImage(arch="arm64")}
        self.by_arch = images

        class Images:
            def get(self, ref):
                from docker.errors import ImageNotFound
                if ref.endswith("-arm64"):
                    if not arm64:
                        raise ImageNotFound(ref)
                    return images["arm64"]
                return images["amd64"]

            def push(self, repo, tag, stream, decode):
                return client._next(("push", f"{repo}:{tag}"))

        self.images = Images()


@pytest.fixture
def indexes(monkeypatch):
    made: list[tuple[str, list[str], bool]] = []

    def create(index_ref, sources, *, insecure):
        made.append((index_ref, sources, insecure))
        return "sha256:" + "e" * 64

    monkeypatch.setattr(registry.index_mod, "create", create)
    return made


def test_a_variant_with_an_arm64_image_pushes_each_architecture_then_every_tag_as_an_index(real_matrix, slept, indexes):
    v = real_matrix.get("torch2.15-cuda13.2")
    client = TwoArchClient([ok_push(f"{v.id}-amd64"), ok_push(f"{v.id}-arm64")])
    [transfer] = registry.push(client, real_matrix, v, "127.0.0.1:5000", say=lambda m: None)
    repo = "127.0.0.1:5000/kerasenv"
    assert client.calls == [("push", f"{repo}:{v.id}-amd64"), ("push", f"{repo}:{v.id}-arm64")]
    assert [ref for ref, _, _ in indexes] == [f"{repo}:{t}" for t in registry.tags_mod.tags(real_matrix, v)]
    assert all(sources == [f"{repo}:{v.id}-amd64", f"{repo}:{v.id}-arm64"] and insecure
               for _, sources, insecure in indexes)
    assert transfer.ref == f"{repo}:{v.id}" and transfer.digest == "sha256:" + "e" * 64


def test_one_architecture_pushes_its_own_tag_and_no_index(real_matrix, slept, indexes):
    v = real_matrix.get("jax0.12-cuda12.9")
    client = TwoArchClient([ok_push(f"{v.id}-arm64")])
    [transfer] = registry.push(client, real_matrix, v, "ghcr.io/me", say=lambda m: None, platform="linux/arm64")
    assert client.calls == [("push", f"ghcr.io/me/kerasenv:{v.id}-arm64")] and indexes == []
    assert transfer.ref == f"ghcr.io/me/kerasenv:{v.id}-arm64"


def test_the_index_alone_pushes_no_image(real_matrix, slept, indexes):
    v = real_matrix.get("jax0.12-cuda12.9")
    client = TwoArchClient([], arm64=False)
    registry.push(client, real_matrix, v, "ghcr.io/me", say=lambda m: None, index_only=True)
    assert client.calls == [] and len(indexes) == len(registry.tags_mod.tags(real_matrix, v))
    assert not indexes[0][2]  # ghcr.io speaks TLS


def test_without_the_arm64_image_the_push_stops_before_sending_anything(real_matrix, slept, indexes):
    v = real_matrix.get("jax0.12-cuda12.9")
    client = TwoArchClient([], arm64=False)
    with pytest.raises(registry.UsageError, match=r"kerasenv:jax0.12-cuda12.9-arm64 is not built here: run "
                       r"`make build VARIANT=jax0.12-cuda12.9 PLATFORM=linux/arm64` first, or push one architecture"):
        registry.push(client, real_matrix, v, "ghcr.io/me", say=lambda m: None)
    assert client.calls == [] and indexes == []


def test_a_single_architecture_variant_refuses_platform_and_index(real_matrix, cpu, slept):
    for kwargs, flag in (({"platform": "linux/arm64"}, "--platform"), ({"index_only": True}, "--index")):
        with pytest.raises(registry.UsageError, match=f"tf2.21-cpu has one architecture .*without {flag}"):
            registry.push(FakeClient([]), real_matrix, cpu, "r", say=lambda m: None, **kwargs)


def test_the_arm64_image_s_labels_are_checked_against_its_own(real_matrix):
    v = real_matrix.get("torch2.15-cuda13.2")
    arm = registry.labels_mod.static_labels(real_matrix, v, "arm64")
    assert registry.stale_labels(real_matrix, v, arm, "arm64") == {}
    stale = registry.stale_labels(real_matrix, v, arm)  # judged as the amd64 image: its evidence differs
    assert "io.kerasenv.cuda-stack.source" in stale


class MultiPlatformStoreClient(FakeClient):
    """Docker 28.5.2 with the containerd image store, as measured there (issue 43): after
    `pull --platform linux/arm64` of an index whose amd64 image is here too, the tag holds both,
    a plain inspect answers amd64, and `?platform=` (Engine API >= 1.49) answers the arm64
    manifest, whose Id tags the arm64 image alone."""

    def __init__(self, api_version="1.51"):
        super().__init__([ok_pull()], engine_version="28.5.2+dfsg4")
        self.api_version, self.tagged, self.asked = api_version, [], []
        client, api = self, self.api
        api.base_url = "http+docker://localhost"

        def get(url, params=None):
            client.asked.append((url, params))
            arm = {"Id": "sha256:669d7f133154", "Architecture": "arm64",
                   "Config": {"Labels": {"io.kerasenv.project": "kerasenv"}}}
            return SimpleNamespace(status_code=200, json=lambda: arm)
        api._get = get
        api.tag = lambda image, repo, tag: client.tagged.append((image, f"{repo}:{tag}"))

    def version(self):
        return {"Version": self.engine_version, "ApiVersion": self.api_version}


def test_pull_platform_on_the_containerd_store_checks_and_tags_the_platform_asked_for(real_matrix, slept):
    v = next(x for x in real_matrix.variants if x.arm64)
    client = MultiPlatformStoreClient()
    registry.pull(client, real_matrix, v, REG, say=lambda m: None, platform="linux/arm64")
    (url, params), = client.asked
    assert url.endswith(f"/v1.51/images/{REG}/kerasenv:{v.id}/json")
    assert json.loads(params["platform"]) == {"os": "linux", "architecture": "arm64"}
    assert client.tagged == [("sha256:669d7f133154", v.platform_ref("linux/arm64"))]
    assert client.image.tags == []  # never the plain image: that is the whole index, amd64 first


def test_an_engine_before_api_1_49_keeps_one_image_per_tag_and_the_plain_inspect_decides(real_matrix, slept):
    v = next(x for x in real_matrix.variants if x.arm64)
    client = MultiPlatformStoreClient(api_version="1.41")  # Docker 20.10
    with pytest.raises(KerasenvError, match="gave a amd64 image for --platform linux/arm64"):
        registry.pull(client, real_matrix, v, REG, say=lambda m: None, platform="linux/arm64")
    assert client.asked == []


def test_a_pull_the_containerd_store_keeps_only_the_manifest_of_is_one_line_and_tags_nothing(real_matrix, cpu, slept):
    # Docker 28.5.2, containerd store: an image pulled back whose layers the engine had unpacked
    # already (skopeo's zstd copy of a local image) is inspected as {"Architecture": "", "RootFS": {}}.
    client = FakeClient([ok_pull()], engine_version="28.5.2+dfsg4")
    client.image.attrs = {"Id": "sha256:694fa77c6b78", "Architecture": "", "RootFS": {}}
    with pytest.raises(KerasenvError) as info:
        registry.pull(client, real_matrix, cpu, REG, say=lambda m: None)
    assert "\n" not in info.value.message
    assert info.value.message.endswith("remove the local image that shares them (`docker rmi kerasenv:tf2.21-cpu`) "
                                       "and pull again")
    assert client.image.tags == []


def test_the_pushed_digest_is_read_from_the_status_line_where_no_aux_event_carries_it():
    # Docker 28.5.2 with the containerd image store, recorded pushing debian:trixie-slim to a
    # local registry: no {"aux": {"Digest": ...}} event, only this status line (issue 43).
    events = [{"status": "The push refers to repository [127.0.0.1:56113/p]"},
              {"status": "Pushed", "progressDetail": {}, "id": "90d7f4a38d5d"},
              {"status": "t: digest: sha256:2ad0eb02344ff4f68afc3013cd6f607f8c2b6825e1cdd13633226db7df2e85be size: 424"}]
    digest, sent, skipped = registry._stream(events, lambda m: None, "push")
    assert (digest, sent, skipped) == ("sha256:2ad0eb02344ff4f68afc3013cd6f607f8c2b6825e1cdd13633226db7df2e85be", 1, 0)

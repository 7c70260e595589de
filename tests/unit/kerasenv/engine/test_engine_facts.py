"""Which engine answers on the Docker API socket, from its /version and /info answers: recorded
here (Docker 20.10, Podman 4.3.1 as root and rootless) or constructed from Docker's API
schema and rootless docs (tests/fixtures/engines/README.md says which)."""

from __future__ import annotations

import json

import pytest

from kerasenv.engine import docker_client, engine_facts

from ...conftest import REPO

ENGINES = REPO / "tests" / "fixtures" / "engines"


def engine(name: str) -> engine_facts.Engine:
    load = lambda what: json.loads((ENGINES / name / f"{what}.json").read_text())  # noqa: E731
    return engine_facts.parse(load("version"), load("info"))


@pytest.mark.parametrize("name, product, version, rootless, cdi", [
    ("docker-20.10-debian", "docker", "20.10.24+dfsg1", False, False),  # recorded: no CDISpecDirs field
    ("podman-4.3.1-debian", "podman", "4.3.1", False, False),  # recorded
    ("podman-4.3.1-rootless-debian", "podman", "4.3.1", True, False),  # recorded: "Rootless": true
    ("docker-28.3-cdi", "docker", "28.3.3", False, True),
    ("docker-27-rootless", "docker", "27.5.1", True, False),  # CDISpecDirs [] = CDI off
    ("podman-5.4", "podman", "5.4.0", False, True),
    ("podman-5.8.6-sid", "podman", "5.8.6", False, True),  # recorded: Debian sid's, in a sid root
])
def test_each_engine_is_named_with_its_own_version_rootless_and_cdi(name, product, version, rootless, cdi):
    e = engine(name)
    assert (e.product, e.version, e.rootless, e.cdi_enabled) == (product, version, rootless, cdi)
    assert e.drops_gpu_requests == (product == "podman")


def test_podmans_version_is_its_own_not_the_docker_api_it_speaks():
    e = engine("podman-4.3.1-debian")
    assert e.describe() == "Podman 4.3.1, behind the Docker API, rootful, cgroup v1, CDI off"
    assert engine("docker-28.3-cdi").describe() == "Docker 28.3.3, rootful, cgroup v2, CDI on (/etc/cdi, /var/run/cdi)"


def test_podman_5s_recorded_answer_names_no_cdi_spec_dirs():
    """Podman 5.8.6's compat /info has a CDISpecDirs field, null even with containers.conf's
    cdi_spec_dirs set (recorded so): CDI is judged by its version, and kerasenv reads the spec
    folders of KERASENV_CDI_SPEC_DIRS or CDI's defaults (engine/cdi.spec_dirs)."""
    e = engine("podman-5.8.6-sid")
    assert e.cdi_reported and e.cdi_spec_dirs == () and e.cdi_enabled
    assert e.describe() == "Podman 5.8.6, behind the Docker API, rootful, cgroup v1, CDI on"


@pytest.mark.parametrize("text, parsed", [
    ("20.10.24+dfsg1", (20, 10)), ("28.2.0-rc.1", (28, 2)), ("5.4", (5, 4)), ("", None), ("dev", None)])
def test_version_strings(text, parsed):
    """The engine's version as docker_client reads it for zstd too: what CDI's floors compare."""
    assert docker_client.engine_version(text) == parsed


def test_a_docker_that_does_not_report_cdi_is_judged_by_its_version():
    old = engine_facts.parse({"Version": "26.1.0"}, {})
    new = engine_facts.parse({"Version": "28.2.0"}, {})
    assert not old.cdi_enabled and new.cdi_enabled


# Issue 43: which image store Docker keeps images in, from /info's Driver and DriverStatus
# (recorded: tests/fixtures/engines/README.md).
def test_the_containerd_image_store_is_told_from_a_graph_driver():
    d28 = engine("docker-28.5.2-containerd")  # recorded: Docker 28.5.2, features.containerd-snapshotter
    assert (d28.version, d28.storage_driver, d28.containerd_store) == ("28.5.2+dfsg4", "overlayfs", True)
    assert d28.image_store == "containerd (overlayfs snapshotter)" and d28.multi_platform_tags
    assert d28.cdi_enabled  # on by default from 28.2 (moby#49963)
    assert d28.describe() == ("Docker 28.5.2+dfsg4, rootful, cgroup v1, CDI on (/etc/cdi, /var/run/cdi), "
                              "image store containerd (overlayfs snapshotter)")
    d20 = engine("docker-20.10-debian")  # recorded: overlay2, no driver-type row
    assert (d20.storage_driver, d20.containerd_store, d20.multi_platform_tags) == ("overlay2", False, False)
    assert d20.image_store == "overlay2 (graph driver)"
    # Podman's compat /info has no Docker image store to speak of
    assert engine("podman-4.3.1-debian").image_store is None

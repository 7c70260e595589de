"""Issue 52: a security rebuild changes the runtime's last layer only.

The default CPU image that `make test` built (at the run's Debian state: the point release plus
that day's -updates and -security) is built once more, without Docker's cache, at its point
release alone (`--debian-updates point-release`, release N of `kerasenv bench-update`). Every
layer but the last must have the same digest: the layers below the last step are the same bytes
whenever and by whichever of the two builds they were made (nothing in them is dated by the
build or depends on -updates/-security), and the last differs, since it holds the fixes. One
small variant stands for all: the steps are the same template's (images/templates/), and the unit
tests check that no step below the last of any Dockerfile reads DEBIAN_UPDATES or deletes a
lower layer's file. The --no-cache build is the run's one extra build (about 80 s); its image and
builder-stage cache go at the end, also when the test fails.
"""

from __future__ import annotations

import re

import pytest

from .conftest import kerasenv

REBUILT = "kerasenv:tf2.21-cpu-point-release"


@pytest.fixture()
def rebuilt(docker, cpu_image):
    yield REBUILT
    from docker.errors import ImageNotFound

    try:
        docker.images.remove(REBUILT, force=True)
    except ImageNotFound:
        pass


def test_a_rebuild_at_another_security_state_changes_only_the_last_layer(docker, cpu_image, rebuilt):
    from kerasenv.images import layers
    from kerasenv.security import debian

    kerasenv("build", "tf2.21-cpu", "--no-cache", "--debian-updates", "point-release", "--tag", rebuilt,
             "--drop-build-cache", timeout=1800)
    label = docker.images.get(rebuilt).labels[debian.LABEL]
    today = docker.images.get(cpu_image).labels[debian.LABEL]
    assert re.fullmatch(r"trixie@\S+", label), label  # the point release alone
    assert today.startswith(label + " "), (label, today)  # the same point release, then the fixes

    proc = kerasenv("layers", rebuilt, cpu_image, "--only-last", "1", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    comparison = layers.compare(docker, rebuilt, cpu_image)
    assert comparison.first_changed == len(comparison.new) - 1, proc.stdout
    last = comparison.new[-1]
    assert "debian-updates.sh" in last.created_by and "DEBIAN_UPDATES" in last.created_by, last
    # What a user holding the point-release image fetches for today's, on either kind of client:
    # the last layer, a few MB of Debian's fixes and the loader's cache (13.8 MB on 2026-12-07).
    assert comparison.by_chain == comparison.by_blob == last.size
    assert last.size < 0.05 * comparison.total, proc.stdout
    print("\n" + proc.stdout)


def test_layers_of_an_image_that_is_not_here_is_one_line(docker):
    proc = kerasenv("layers", "kerasenv:no-such-build", "kerasenv:tf2.21-cpu", check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "kerasenv:no-such-build is not here" in lines[0] and "kerasenv build" in lines[0], lines

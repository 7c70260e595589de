"""CUDA images: the GPU code their libraries carry is what images/<id>/kernel-targets.json
records (the matrix, the labels, the README table and the doctor's verdicts rest on it).

The parse runs in a fresh container of the image with this checkout's probe mounted ahead of
the image's copy (as `kerasenv kernel-targets` records it), so the check and the record use
the same parser version; what is read, the libraries, is the image's.

An arm64 image carries other binaries (PyTorch's aarch64 wheel is built for other targets): its
record is images/<id>/kernel-targets-arm64.json (`Variant.kernels_for("arm64")`), and a missing
one fails, naming the command that records it. On an amd64 machine its probe runs under qemu.
"""

from __future__ import annotations

import json

import pytest

from kerasenv.images import kernel_targets
from kerasenv.matrix import kernel_targets as record
from kerasenv.matrix.schema import IN_IMAGE_DIR

from . import platforms
from .conftest import run_once

# Only CUDA images carry NVIDIA fat binaries: the CPU build has none, and ROCm code is AMD's
# (HSA code objects), which this parser does not read.
FAMILIES = {"cuda"}
PARSE_LIMIT_S = 30  # TF's ~1 GB libraries: the probe reads headers only (measured 1-6 s on 2 cores)
# Under qemu-user every Python bytecode of the probe is emulated (the reads are the kernel's).
PARSE_LIMIT_EMULATED_S = 180


def record_command(target) -> str:
    platform = "" if target.arch == platforms.AMD64 else f" --platform linux/{target.arch}"
    return f"kerasenv kernel-targets {target.variant.id} --write{platform}"


@pytest.fixture(scope="module")
def parsed(docker, matrix, target) -> dict:
    common = str(matrix.path.parent / IN_IMAGE_DIR)
    code, out, err = run_once(docker, target.ref, ["python", "-m", kernel_targets.PROBE_MODULE, "--json"],
                              network_mode="none", environment={"PYTHONPATH": kernel_targets.PROBE_MOUNT},
                              volumes={common: {"bind": kernel_targets.PROBE_MOUNT, "mode": "ro"}})
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.arm64_ci
def test_the_image_carries_what_its_kernel_targets_file_records(parsed, matrix, target):
    path = record.record_path(matrix.path.parent, target.variant.id, target.arch)
    if not path.exists():
        pytest.fail(f"{path} is missing: record it with `{record_command(target)}`")
    recorded = json.loads(path.read_text())
    assert kernel_targets.to_record(target.variant, parsed) == recorded
    # ... and it is what the matrix (the labels, the README table, the doctor) read for this image
    kernels = target.variant.kernels_for(target.arch)
    assert kernels is not None and (list(kernels.sass), list(kernels.ptx)) == \
        (recorded["framework"]["sass"], recorded["framework"]["ptx"]), (kernels, recorded["framework"])


@pytest.mark.arm64_ci
def test_the_parse_takes_seconds_not_minutes(parsed, target):
    limit = PARSE_LIMIT_EMULATED_S if target.emulated else PARSE_LIMIT_S
    assert parsed["seconds"] < limit and not parsed["unreadable"], (parsed["seconds"], parsed["unreadable"])


@pytest.mark.arm64_ci
def test_the_kernel_labels_match_the_binaries(image, parsed, target):
    labels = image.labels or {}
    framework = parsed["frameworks"][target.variant.backend]  # JAX/PyTorch: tensorflow-cpu beside it
    assert labels.get("io.kerasenv.kernels.sass") == ",".join(framework["sass"])
    assert labels.get("io.kerasenv.kernels.ptx") == ",".join(framework["ptx"])

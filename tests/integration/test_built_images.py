"""The built images carry what their labels and the matrix say (checked inside them)."""

from __future__ import annotations

import re

import pytest

from kerasenv import labels as labels_mod
from kerasenv import matrix as matrix_mod

from .conftest import BUILT_IN_TESTS

_FAMILY = {v.id: v.family for v in matrix_mod.load().variants}
CUDA_BUILT = [i for i in BUILT_IN_TESTS if _FAMILY[i] == "cuda"]
CPU_BUILT = [i for i in BUILT_IN_TESTS if _FAMILY[i] == "cpu"]

PROBE = r"""
import json, os, platform, sys
import tensorflow as tf
try:
    import keras
    keras_version = keras.__version__
except ImportError:
    keras_version = None
info = dict(tf.sysconfig.get_build_info())
print(json.dumps({
    "tensorflow": tf.__version__,
    "keras": keras_version,
    "tf_keras": getattr(tf.keras, "__version__", None),
    "python": platform.python_version(),
    "executable": sys.executable,
    "uid": os.getuid(),
    "home_writable": os.access(os.path.expanduser("~"), os.W_OK),
    "build_info": {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in info.items()},
    "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
}))
"""


@pytest.fixture(params=BUILT_IN_TESTS)
def variant(request, matrix, built_images):
    return matrix.get(request.param)


@pytest.fixture
def image(docker, variant):
    return docker.images.get(variant.image_ref)


@pytest.fixture
def probe(container, variant):
    return container(variant.image_ref).python_json(PROBE)


def test_labels_equal_the_matrix(image, matrix, variant):
    got = image.labels
    for key, value in labels_mod.static_labels(matrix, variant).items():
        assert got.get(key) == value, key
    assert got["org.opencontainers.image.base.name"] == variant.base_image
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", got["org.opencontainers.image.created"])
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", got["org.opencontainers.image.revision"])
    for key, value in got.items():
        assert value.strip(), f"label {key} is empty"
        if key.endswith((".source", ".url", ".documentation")):
            assert value.startswith("https://"), key


def test_versions_inside_equal_labels(probe, image, variant):
    assert probe["tensorflow"] == variant.tensorflow == image.labels["io.kerasenv.tensorflow"]
    keras_seen = probe["keras"] if not variant.keras_is_tf_keras else probe["tf_keras"]
    assert keras_seen == variant.keras == image.labels["io.kerasenv.keras"]
    assert probe["python"].rsplit(".", 1)[0] == variant.python
    assert probe["executable"] == "/opt/venv/bin/python"


def test_build_info_matches_the_family(probe, image, variant):
    info = probe["build_info"]
    assert info["is_cuda_build"] is (variant.family == "cuda")
    assert info.get("is_rocm_build", False) is False
    if variant.family == "cuda":
        # get_build_info() reports "12.5.1" / "9" or "9.3.0": compare the parts we pin.
        assert info["cuda_version"].startswith(image.labels["io.kerasenv.cuda"])
        assert variant.cudnn.startswith(info["cudnn_version"])
        caps = ",".join(info["cuda_compute_capabilities"])
        assert caps == image.labels["io.kerasenv.cuda-compute-capabilities"]


def test_runs_as_non_root_with_writable_home(probe, image):
    assert image.attrs["Config"]["User"] not in ("", "0", "root", "0:0")
    assert probe["uid"] != 0
    assert probe["home_writable"]


def test_cuda_env_and_no_require_cuda(image, variant):
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert "NVIDIA_REQUIRE_CUDA" not in env
    assert "PIP_CERT" not in env
    if variant.family == "cuda":
        assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
        assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    else:
        assert not any(k.startswith("NVIDIA_") for k in env)


# Runs inside the image as root: the build CA's certificates that are not public roots
# (Debian's bundle or certifi's) are the proxy's; none may be found in the image.
TRUST_AUDIT = r"""
import json, os, re, sys
pem = re.compile(r"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)
def bodies(path):
    try:
        return {re.sub(r"\s+", "", b) for b in pem.findall(open(path, errors="ignore").read())}
    except OSError:
        return set()
public = bodies("/etc/ssl/certs/ca-certificates.crt")
for root, _, files in os.walk("/opt/venv"):
    for f in files:
        if f.endswith(".pem"):
            public |= bodies(os.path.join(root, f))
private = bodies("/build-ca.pem") - public
found = []
for top in ("/opt", "/etc", "/usr/local", "/home", "/tmp", "/root", "/workspace"):
    for root, _, files in os.walk(top):
        for f in files:
            path = os.path.join(root, f)
            if os.path.islink(path) or os.path.getsize(path) > 50_000_000:
                continue
            text = re.sub(r"\s+", "", open(path, errors="ignore").read())
            found += [path for b in private if b[64:192] in text]
print(json.dumps({"private": len(private), "found": found,
                  "leftovers": [p for p in ("/tmp/build-trust", "/tmp/build") if os.path.exists(p)]}))
"""


def test_no_build_trust_material_in_the_final_image(container, variant):
    from kerasenv import build

    ca = build.default_ca_cert(None)
    if ca is None:
        pytest.fail("no build CA configured (KERASENV_CA_CERT/PIP_CERT/...): nothing to audit")
    audit = container(variant.image_ref).python_json(
        TRUST_AUDIT, user="0", volumes={ca: {"bind": "/build-ca.pem", "mode": "ro"}})
    assert audit["leftovers"] == []
    assert audit["found"] == [], "the build CA reached the final image"


@pytest.mark.parametrize("variant_id", CUDA_BUILT)
def test_cuda_libraries_come_from_the_pinned_wheels(container, matrix, built_images, variant_id):
    variant = matrix.get(variant_id)
    code = (
        "import json, importlib.metadata as md\n"
        "print(json.dumps({d.metadata['Name']: d.version for d in md.distributions()"
        " if d.metadata['Name'].startswith('nvidia-')}))"
    )
    installed = container(variant.image_ref).python_json(code)
    assert installed == variant.cuda_wheels()


@pytest.mark.parametrize("variant_id", CPU_BUILT)
def test_cpu_image_has_no_cuda_libraries(container, matrix, built_images, variant_id):
    variant = matrix.get(variant_id)
    code, out, err = container(variant.image_ref).run(
        ["bash", "-c", "find / -xdev \\( -name 'libcudnn*' -o -name 'libcublas*' -o -name 'libcudart*' \\) -print"],
        user="0")
    assert code == 0 and out.strip() == "", out

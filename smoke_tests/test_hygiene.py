"""Nothing from the build, no credentials, no secrets, nothing left in /tmp."""

from __future__ import annotations

import re

import pytest

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL", re.I)
CREDENTIAL_FILES = (".netrc", ".pypirc", ".git-credentials", ".docker/config.json", ".aws/credentials",
                    ".config/gcloud/credentials.db", ".config/gcloud/application_default_credentials.json",
                    ".kube/config", ".ssh/id_rsa", ".ssh/id_ed25519")

# The build CA's certificates that are not public roots (Debian's bundle, or a .pem that a
# package in the venv ships) are the proxy's: none may be found in the image.
TRUST_AUDIT = r"""
import json, os, re
pem = re.compile(r"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)
def bodies(path):
    try:
        return {re.sub(r"\s+", "", b) for b in pem.findall(open(path, errors="ignore").read())}
    except OSError:
        return set()
public = bodies("/etc/ssl/certs/ca-certificates.crt")
for root, _, files in os.walk("/opt/venv"):
    public |= set().union(*[bodies(os.path.join(root, f)) for f in files if f.endswith(".pem")])
private = bodies("/build-ca.pem") - public
# Each file's bytes with ASCII whitespace removed (PEM wraps its base64 at 64 columns), searched
# for a 128-character run of each private certificate: bytes.translate/find run at memory speed,
# where decoding and a regex over gigabytes of CUDA libraries took half a minute per image.
snippets = [b[64:192].encode() for b in private]
whitespace = b" \t\r\n\v\f"
found = []
for top in ("/opt", "/etc", "/usr/local", "/home", "/tmp", "/root", "/workspace", "/var"):
    for root, _, files in os.walk(top):
        for f in files:
            path = os.path.join(root, f)
            if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > 50_000_000:
                continue
            try:
                with open(path, "rb") as handle:
                    data = handle.read().translate(None, whitespace)
            except OSError:
                continue
            found += [path for snippet in snippets if snippet in data]
print(json.dumps({"private": len(private), "found": sorted(set(found))}))
"""


def test_no_build_ca_in_the_image(docker, target):
    from kerasenv.images import build

    from .conftest import run_once

    ca = build.default_ca_cert(None)
    if ca is None:
        pytest.skip("no build CA configured on this host (KERASENV_CA_CERT, PIP_CERT, ...): nothing to look for")
    code, out, err = run_once(docker, target.ref, ["python3", "-c", TRUST_AUDIT], user="0", network_mode="none",
                              volumes={ca: {"bind": "/build-ca.pem", "mode": "ro"}})
    assert code == 0, err[-2000:]
    result = __import__("json").loads(out.strip().splitlines()[-1])
    assert result["found"] == [], "the build CA reached the final image"


def test_no_build_stage_leftovers(root_host, image):
    for path in ("/tmp/build-trust", "/tmp/build", "/opt/cuda-libs", "/opt/cuda-parts", "/opt/cuda-extras",
                 "/opt/kerasenv-pins", "/opt/venv-tree", "/tmp/image-code", "/tree"):
        assert not root_host.file(path).exists, path
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert not {"PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"} & set(env)


def test_no_pip_or_uv_caches(root_host):
    out = root_host.check_output(
        "find / -xdev \\( -path '*/.cache/pip' -o -path '*/.cache/uv' -o -name 'pip-unpack-*' "
        "-o -name 'pip-req-build-*' \\) -print")
    assert out == ""


def test_no_compilers_but_the_one_torch_compile_needs(root_host, target):
    found = [tool for tool in ("gcc", "cc", "g++", "c++", "clang", "make", "ld", "nvcc")
             if root_host.exists(tool)]
    # PyTorch images carry Debian's gcc and g++ (with binutils' ld) for torch.compile ([torch_compiler]
    # in the matrix, smoke_tests/test_torch_compile.py); nothing else, and no other image any.
    assert found == (["gcc", "cc", "g++", "c++", "ld"] if target.variant.compiler_packages else [])


def test_no_git_directories(root_host):
    assert root_host.check_output("find / -xdev -name .git -print") == ""


def test_no_credential_files(root_host):
    homes = ["/root"] + root_host.check_output("find /home -mindepth 1 -maxdepth 1 -type d").split()
    present = [f"{h}/{f}" for h in homes for f in CREDENTIAL_FILES if root_host.file(f"{h}/{f}").exists]
    assert present == []


def test_no_secret_looking_environment_variables(image):
    names = [item.split("=", 1)[0] for item in image.attrs["Config"]["Env"]]
    assert [n for n in names if SECRET_NAME.search(n)] == []


def test_tmp_is_empty(root_host):
    assert root_host.check_output("find /tmp -mindepth 1 -print") == ""

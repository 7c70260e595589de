"""`kerasenv sbom ID`: a CycloneDX JSON SBOM of the image's Python environment.

`cyclonedx-py environment` runs inside a throwaway container against the image's own
interpreter, so it sees exactly what the image holds; the tool itself is mounted read-only
from a host directory and never becomes part of the image or of its SBOM (it is put on
sys.path by a runner script, not through PYTHONPATH, which the analysed interpreter would
inherit).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from ..engine import docker_client
from ..errors import KerasenvError, UsageError
from ..matrix.schema import REPO_ROOT, Variant

TOOL = "cyclonedx-bom==7.5.0"
TOOL_DIR = REPO_ROOT / ".sbom-tool"
RUNNER = """\
import runpy, sys
sys.path.insert(0, "/opt/kerasenv-sbom/lib")
sys.argv = ["cyclonedx-py", "environment", "--output-format", "JSON", "--output-file", "-", sys.argv[1]]
runpy.run_module("cyclonedx_py", run_name="__main__")
"""


# Docker's architecture names -> the wheel platform tags' machine names.
_MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}


def ensure_tool(python: str, machine: str) -> Path:
    """The tool's wheels for the image's interpreter, not the host's: some of its dependencies
    are compiled (rpds-py, chardet's mypyc build, lxml), and a cp311 build on the host's
    Python does not import in a Debian 13 image's Python 3.13 (it failed as "Please install
    cyclonedx-python-lib with the extra json-validation"). One folder per (Python, machine)."""
    folder = TOOL_DIR / f"cp{python.replace('.', '')}-{machine}"
    stamp = folder / ".installed"
    if stamp.exists() and stamp.read_text() == TOOL:
        return folder
    platforms = [a for tag in ("manylinux_2_28", "manylinux_2_17", "manylinux2014")
                 for a in ("--platform", f"{tag}_{machine}")]
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", "--no-compile",
                           "--disable-pip-version-check", "--target", str(folder / "lib"),
                           "--python-version", python, "--implementation", "cp", "--only-binary=:all:",
                           *platforms, TOOL], capture_output=True, text=True)
    if proc.returncode != 0:
        raise KerasenvError(f"could not install {TOOL} for Python {python} on {machine} into {folder} "
                            f"(needs PyPI): {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    (folder / "runner.py").write_text(RUNNER)
    stamp.write_text(TOOL)
    return folder


def generate(client, v: Variant) -> dict:
    from docker.errors import ImageNotFound

    try:
        image = client.images.get(v.image_ref)
    except ImageNotFound:
        raise UsageError(f"{v.image_ref} is not built here: run `make build VARIANT={v.id}` first") from None
    arch = image.attrs.get("Architecture", "amd64")
    if arch not in _MACHINES:
        raise KerasenvError(f"{v.image_ref} is built for {arch}: kerasenv sbom knows amd64 and arm64 only")
    # The image's interpreter is the variant's Python (the schema checks the base provides it).
    tool = ensure_tool(v.python, _MACHINES[arch])
    python = "/usr/bin/python3"
    target = "/opt/venv/bin/python" if v.family != "rocm" else "/usr/bin/python3"
    container = client.containers.create(
        v.image_ref, [python, "/opt/kerasenv-sbom/runner.py", target], network_mode="none", user="0",
        volumes={str(tool): {"bind": "/opt/kerasenv-sbom", "mode": "ro"}},
        labels=docker_client.container_labels("sbom"), name=f"kerasenv-sbom-{uuid.uuid4().hex[:8]}")
    try:
        container.start()
        code = container.wait(timeout=600)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    if code != 0:
        raise KerasenvError(f"cyclonedx-py failed in {v.image_ref} (exit {code}): "
                            f"{(err.strip().splitlines() or ['?'])[-1][:300]}")
    bom = json.loads(out)
    # Say which image this describes (the tool only knows the interpreter).
    bom.setdefault("metadata", {})["component"] = {
        "type": "container", "name": f"kerasenv:{v.id}", "version": v.id,
        "bom-ref": f"kerasenv:{v.id}"}
    return bom


def write(bom: dict, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(bom, indent=2) + "\n")
    tmp.replace(path)

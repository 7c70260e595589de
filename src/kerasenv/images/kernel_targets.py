"""`kerasenv kernel-targets ID [--write]`: read which GPU code a built CUDA image carries and
record it as images/<id>/kernel-targets.json (what the matrix, the labels, the README table
and the doctor use; matrix/kernel_targets.py reads it).

The parse runs in a throwaway container of kerasenv:<id> (`docker run --rm`, no network),
with this checkout's in-image probe mounted read-only ahead of the image's own copy, so an
image built before the probe existed can be read too, and the record always comes from the
parser version it names. What is read, the libraries, is the image's.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from ..engine import docker_client
from ..errors import KerasenvError, UsageError
from ..matrix import kernel_targets as record
from ..matrix.schema import IN_IMAGE_DIR, Matrix, Variant

PROBE_MOUNT = "/opt/kerasenv-probe"
PROBE_MODULE = "kerasenv_image.probes.kernel_targets"


def probe(client, matrix: Matrix, v: Variant, platform: str = "linux/amd64") -> dict:
    """The probe's JSON for kerasenv:<id> (a UsageError naming `make build` when not built); for
    linux/arm64 the arm64 image's (kerasenv:<id>-arm64, its aarch64 binaries; the probe runs under
    qemu on an amd64 machine)."""
    from docker.errors import ImageNotFound

    if v.family != "cuda":
        raise UsageError(f"{v.id} is a {v.family} variant: kernel targets are recorded for CUDA variants only "
                         f"({', '.join(x.id for x in matrix.variants if x.family == 'cuda')})")
    ref = v.platform_ref(platform)
    try:
        client.images.get(ref)
    except ImageNotFound:
        how = f"make build VARIANT={v.id}" + (f" PLATFORM={platform}" if platform != "linux/amd64" else "")
        raise UsageError(f"{ref} is not built here: run `{how}` first") from None
    common = matrix.path.parent / IN_IMAGE_DIR
    container = client.containers.create(
        ref, [v.interpreter, "-m", PROBE_MODULE, "--json"], network_mode="none",
        environment={"PYTHONPATH": PROBE_MOUNT}, volumes={str(common): {"bind": PROBE_MOUNT, "mode": "ro"}},
        labels=docker_client.container_labels("kernel-targets"),
        name=f"kerasenv-kernel-targets-{uuid.uuid4().hex[:8]}")
    try:
        container.start()
        code = container.wait(timeout=600)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        err = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    if code != 0:
        raise KerasenvError(f"the kernel-targets probe failed in {ref} (exit {code}): "
                            f"{(err.strip().splitlines() or ['?'])[-1][:300]}")
    return json.loads(out.strip().splitlines()[-1])


def to_record(v: Variant, parsed: dict) -> dict:
    """What is recorded: the variant's framework and libraries, and the parser version;
    nothing that changes from run to run (time, paths), so a re-record of the same image
    is the same file."""
    frameworks = parsed.get("frameworks") or {}
    name = v.backend
    if name not in frameworks:
        found = ", ".join(frameworks) or "none"
        raise KerasenvError(f"{v.image_ref}: expected the {name} framework's GPU libraries, found {found}")
    # Beside JAX or PyTorch is tensorflow-cpu ([keras_tools] in the matrix: tf.data, TensorBoard),
    # which must carry no GPU code: a CUDA TensorFlow there would compete for the GPU.
    others = sorted(n for n, f in frameworks.items() if n != name and (f["sass"] or f["ptx"]))
    if others:
        raise KerasenvError(f"{v.image_ref}: {', '.join(others)} beside {name} carries GPU code: "
                            "only the backend's framework may (the others are CPU builds)")
    framework = frameworks[name]
    if not framework["sass"] and not framework["ptx"]:
        raise KerasenvError(f"{v.image_ref}: {name} carries no GPU code (a CPU build?)")
    return {
        "variant": v.id,
        "tool_version": parsed["tool_version"],
        "framework": {"name": name, "version": framework["version"], "sass": framework["sass"],
                      "ptx": framework["ptx"]},
        "libraries": {lib: {"sass": t["sass"], "ptx": t["ptx"]} for lib, t in parsed["libraries"].items()
                      if t["sass"] or t["ptx"]},
        "fatbin_entries": parsed["fatbin_entries"],
    }


def write(matrix: Matrix, v: Variant, recorded: dict, arch: str = "amd64") -> Path:
    path = record.record_path(matrix.path.parent, v.id, arch)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def drift(matrix: Matrix, v: Variant, recorded: dict, arch: str = "amd64") -> str | None:
    """How the committed file differs from this parse (None: it does not)."""
    path = record.record_path(matrix.path.parent, v.id, arch)
    if not path.exists():
        return f"{path} does not exist"
    committed = json.loads(path.read_text(encoding="utf-8"))
    if committed == recorded:
        return None
    keys = sorted(k for k in set(committed) | set(recorded) if committed.get(k) != recorded.get(k))
    return f"{path} differs from the image in: {', '.join(keys)}"


def format_table(recorded: dict, seconds: float | None = None) -> str:
    fw = recorded["framework"]
    took = f", {seconds} s in the container" if seconds is not None else ""
    lines = [f"{recorded['variant']}: {recorded['fatbin_entries']} fat binary entries "
             f"(parser v{recorded['tool_version']}{took})",
             f"{'':<2}{'library':<22} {'SASS (native)':<60} PTX (JIT)"]
    rows = [(f"{fw['name']} {fw['version']}", fw)] + list(recorded["libraries"].items())
    for label, t in rows:
        lines.append(f"{'':<2}{label:<22} {','.join(t['sass']) or '-':<60} {','.join(t['ptx']) or '-'}")
    return "\n".join(lines)

"""The NVIDIA CDI devices this host defines: what `--device nvidia.com/gpu=...` can name.

`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` writes a spec (YAML or JSON) whose
`kind` is `nvidia.com/gpu` and whose devices are named by index ("0", "1", "0:1" for a MIG
device), by UUID (`--device-name-strategy=uuid`) and "all"; `/var/run/cdi` holds the ones
`nvidia-cdi-refresh` regenerates at boot (toolkit >= 1.18). `nvidia-ctk cdi list` prints the
fully qualified names (`nvidia.com/gpu=0`), one a line, after an INFO line. Both are read
here; the CLI's list wins where it runs.

Which folders: the engine's, where it says (Docker >= 27's /info `CDISpecDirs`, set by daemon.json's
`cdi-spec-dirs`), else the two above. Podman reads the folders of containers.conf's
`cdi_spec_dirs` and does not say which: its compat /info has a `CDISpecDirs` field, and it is
null with cdi_spec_dirs set (recorded from Podman 5.8.6, tests/fixtures/engines/podman-5.8.6-sid/). KERASENV_CDI_SPEC_DIRS
(folders separated by `:`) names them where they are not the defaults; it wins over the engine's.
`nvidia-ctk cdi list` reads only the default folders, so it is asked only for those.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
DIRS_ENV = "KERASENV_CDI_SPEC_DIRS"
NVIDIA_KIND = "nvidia.com/gpu"
GENERATE_FIX = ("`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (NVIDIA Container Toolkit "
                ">= 1.12; `nvidia-ctk cdi list` shows the names)")


@dataclass(frozen=True)
class CdiDevices:
    """NVIDIA CDI device names (fully qualified) and the spec files they come from."""

    names: tuple[str, ...] = ()
    specs: tuple[str, ...] = ()
    errors: tuple[str, ...] = field(default=())  # unreadable spec files, one line each
    dirs: tuple[str, ...] = SPEC_DIRS  # the folders read

    def where(self) -> str:
        """The folders read, for a message: "/etc/cdi, /var/run/cdi"."""
        return ", ".join(self.dirs)

    @property
    def present(self) -> bool:
        return bool(self.names)

    def short_names(self) -> list[str]:
        """The part after `nvidia.com/gpu=`: "all", "0", "0:1", "GPU-..."."""
        return [n.split("=", 1)[1] for n in self.names if "=" in n]

    def qualified(self, short: str) -> str | None:
        """`nvidia.com/gpu=<short>` when the host defines it, else None."""
        name = f"{NVIDIA_KIND}={short}"
        return name if name in self.names else None


def _load(path: Path) -> dict:
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)
    import yaml

    return yaml.safe_load(text) or {}


def spec_dirs(engine=None) -> tuple[str, ...]:
    """The folders this engine reads CDI specs from: KERASENV_CDI_SPEC_DIRS, else the engine's own
    (Docker's /info CDISpecDirs), else /etc/cdi and /var/run/cdi (CDI's defaults, and Podman's)."""
    named = tuple(d for d in os.environ.get(DIRS_ENV, "").split(":") if d)
    if named:
        return named
    return tuple(getattr(engine, "cdi_spec_dirs", ()) or ()) or SPEC_DIRS


def from_specs(root: str | os.PathLike = "/", dirs=SPEC_DIRS) -> CdiDevices:
    """The NVIDIA devices of every spec in `dirs` under `root` (a fixture tree in tests)."""
    dirs = tuple(dirs)
    names, specs, errors = [], [], []
    for folder in dirs:
        where = Path(root) / folder.lstrip("/")
        if not where.is_dir():
            continue
        for path in sorted(where.iterdir()):
            if path.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                spec = _load(path)
            except Exception as exc:  # noqa: BLE001 - a broken spec is reported, not fatal
                errors.append(f"{folder}/{path.name}: unreadable ({type(exc).__name__})")
                continue
            if str(spec.get("kind", "")) != NVIDIA_KIND:
                continue
            specs.append(f"{folder}/{path.name}")
            names += [f"{NVIDIA_KIND}={d['name']}" for d in spec.get("devices") or [] if d.get("name") is not None]
    return CdiDevices(tuple(dict.fromkeys(names)), tuple(specs), tuple(errors), dirs)


def parse_ctk_list(text: str) -> list[str]:
    """`nvidia-ctk cdi list`'s device names (its INFO/WARN log lines dropped)."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith(NVIDIA_KIND + "=")]


def scan(root: str | os.PathLike = "/", runner=subprocess.run, dirs=SPEC_DIRS) -> CdiDevices:
    """The host's NVIDIA CDI devices: the spec files in `dirs` (spec_dirs() gives the engine's), and
    `nvidia-ctk cdi list` where it runs and `dirs` are the ones it reads."""
    found = from_specs(root, dirs)
    ctk = shutil.which("nvidia-ctk") if str(root) == "/" and tuple(dirs) == SPEC_DIRS else None
    if ctk:
        try:
            proc = runner([ctk, "cdi", "list"], capture_output=True, text=True, timeout=30)
            listed = parse_ctk_list(proc.stdout + proc.stderr) if proc.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            listed = []
        if listed:
            return CdiDevices(tuple(dict.fromkeys(listed)), found.specs, found.errors, found.dirs)
    return found

"""Tiny pure-Python wheels written on the spot, for `pip install --no-index` tests (no network).

    wheel(folder, "kerasenv-demo", "1.0")                          # module kerasenv_demo
    wheel(folder, "tensorflow-cpu", "2.20.0", module="tf_standin")   # a stand-in for a pinned name
    wheel(folder, "wants-new-numpy", "1.0", requires=["numpy>=99"])

Each wheel holds one module (`<module>/__init__.py` with VERSION = "<version>") and the
dist-info files pip reads: METADATA, WHEEL and a RECORD with every file's sha256.
Used by smoke_tests/test_pip_install.py and tests/integration/test_run_project.py.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

DEMO = "kerasenv-demo"  # the distribution the tests install; it imports as kerasenv_demo


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel(folder: Path | str, name: str, version: str, *, requires: tuple[str, ...] | list[str] = (),
          module: str | None = None) -> Path:
    """Write <dist>-<version>-py3-none-any.whl into `folder`; its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    module = module or dist
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kerasenv-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n",
    }
    record = [f"{path},{_record_hash(text.encode())},{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    path.chmod(0o644)
    return path

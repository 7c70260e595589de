"""Is this Linux the user space of Windows' WSL2? Read from the files WSL2 puts there.

NVIDIA's CUDA on WSL guide (6.2.2) and Microsoft's docs name three signs: the kernel's release
string ends in `microsoft-standard-WSL2` (`/proc/sys/kernel/osrelease`, also in
`/proc/version`; containers share the kernel, so they see it too), the paravirtual GPU device
`/dev/dxg`, and the Windows driver's Linux libraries mounted at `/usr/lib/wsl/lib`
(`libcuda.so.1`, `nvidia-smi`). Under WSL2 the driver is the *Windows* one: `nvidia-smi`'s
"Driver Version" is Windows's number (`NVIDIA-SMI 530.41.03  Driver Version: 531.41`,
jax-ml/jax#15268), compared with NVIDIA's Windows driver floors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WSL_LIB = "/usr/lib/wsl/lib"


@dataclass(frozen=True)
class Wsl:
    kernel: str = ""  # the kernel's release string
    dxg: bool = False  # /dev/dxg
    wsl_lib: bool = False  # /usr/lib/wsl/lib
    libcuda: bool = False  # /usr/lib/wsl/lib/libcuda.so.1

    @property
    def present(self) -> bool:
        """WSL2: the kernel says so, or the GPU paravirtualisation device is there."""
        return "microsoft" in self.kernel.lower() or self.dxg

    def describe(self) -> str:
        signs = [s for s, ok in ((f"kernel {self.kernel}", "microsoft" in self.kernel.lower()),
                                 ("/dev/dxg", self.dxg), (WSL_LIB, self.wsl_lib)) if ok]
        return ", ".join(signs)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def detect(root: str | os.PathLike = "/") -> Wsl:
    """The WSL2 signs under `root` (a recorded host tree in tests)."""
    root = Path(root)
    kernel = _read(root / "proc/sys/kernel/osrelease") or _read(root / "proc/version")
    lib = root / WSL_LIB.lstrip("/")
    return Wsl(kernel=kernel, dxg=(root / "dev/dxg").exists(), wsl_lib=lib.is_dir(),
               libcuda=(lib / "libcuda.so.1").exists())

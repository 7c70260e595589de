"""TensorFlow beside PyTorch in one process: Triton's LLVM is loaded before TensorFlow's.

Run at every interpreter start of the image's venv by an `import` line of kerasenv-image.pth
(the Dockerfile writes it); it does nothing unless Triton is installed (the PyTorch images).

Why: TensorFlow loads `_pywrap_tensorflow_internal` with RTLD_GLOBAL
(tensorflow/python/pywrap_dlopen_global_flags.py), which makes the LLVM inside it global. A
`libtriton.so` (its own LLVM, default visibility) loaded after that binds its LLVM option
registry to TensorFlow's, registers every option a second time, and aborts the process:
": CommandLine Error: Option 'bitcode-mdindex-threshold' registered more than once! LLVM ERROR:
inconsistency in registered CommandLine options" (exit 139). TensorFlow 2.21's own __init__
imports Keras, whose PyTorch backend imports torch._dynamo, which loads Triton: so a plain
`import tensorflow`, the `tensorboard` command and any script importing TensorFlow before Keras
died in kerasenv:torch2.15-cuda13.2 (the same error class as pytorch/pytorch#90166). Triton
loaded first (RTLD_LOCAL, as Python loads extensions) keeps its own LLVM, and TensorFlow then
binds to its own: measured, `import tensorflow` works. Loading the library costs 0.1 s, so it
happens on the first `import tensorflow` only, through a finder that steps aside at once.
"""

import os
import sys


def _libtriton():
    for entry in sys.path:
        path = os.path.join(entry, "triton", "_C", "libtriton.so")
        if entry.endswith("site-packages") and os.path.isfile(path):
            return path
    return None


class _TritonFirst:
    """A meta-path finder that never finds anything: it only loads Triton's library the first
    time `tensorflow` is imported, then removes itself."""

    def __init__(self, library: str) -> None:
        self.library = library

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            sys.meta_path.remove(self)
            import ctypes

            try:
                ctypes.CDLL(self.library)  # RTLD_LOCAL: Triton keeps its LLVM to itself
            except OSError:
                pass  # no worse than without: TensorFlow imports as it would have
        return None


def install() -> None:
    library = _libtriton()
    if library and "tensorflow" not in sys.modules and not any(isinstance(f, _TritonFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _TritonFirst(library))


install()

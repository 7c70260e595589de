"""What the image holds, as the user running it sees it: OS, Python, the Keras backend's
framework (TensorFlow, JAX or PyTorch, per KERAS_BACKEND) with its version and build info, Keras,
every installed distribution, the user, HOME and the environment. Prints one JSON line.

The framework is reported under one key for every backend ("framework": name, module, version,
build), so a check can compare it with the matrix without knowing the backend; TensorFlow images
also keep the TensorFlow keys ("tensorflow", "tf_keras", "build_info") their checks read.

Run in the image as `python -m kerasenv_image.probes.inventory` (the acceptance suite's
`inventory` fixture). The framework is imported inside main(), so importing this module is cheap.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import platform
import shutil
import sys


def distributions() -> tuple[dict, dict]:
    """(installed distributions: name -> version, setuptools' vendored ones: name -> where).

    setuptools >= 70 vendors its own dependencies (autocommand, jaraco.*, packaging, wheel,
    ...) with their .dist-info under setuptools/_vendor, and once setuptools or
    pkg_resources is imported that directory is on sys.path: those are setuptools' files,
    not installed distributions, so they are listed apart (and must not shadow the real
    packaging/wheel)."""
    dists, vendored = {}, {}
    for d in md.distributions():
        base = str(d.locate_file(""))
        if "/_vendor" in base:
            vendored[d.metadata["Name"]] = {"version": d.version, "in": base}
        else:
            dists.setdefault(d.metadata["Name"], d.version)
    return dists, vendored


def tensorflow_facts() -> dict:
    import tensorflow as tf

    # tf.keras 2 (TF 2.14/2.15) is the module keras.api._v2.keras of the `keras` distribution
    # and has no __version__ of its own.
    tf_keras_module = getattr(tf.keras, "__name__", "")
    tf_keras = getattr(tf.keras, "__version__", None) or (
        md.version("keras") if tf_keras_module.startswith("keras.") else None)
    build_info = {k: (list(v) if isinstance(v, (list, tuple)) else v)
                  for k, v in dict(tf.sysconfig.get_build_info()).items()}
    return {
        "framework": {"name": "tensorflow", "module": tf.__name__, "version": tf.__version__,
                      "build": {"is_cuda_build": build_info.get("is_cuda_build", False),
                                "cuda_version": build_info.get("cuda_version"),
                                "cudnn_version": build_info.get("cudnn_version")}},
        "tensorflow": tf.__version__, "tf_keras": tf_keras, "tf_keras_module": tf_keras_module,
        "build_info": build_info,
    }


def jax_facts() -> dict:
    import importlib

    import jax

    # JAX's CUDA support is a separate plugin wheel (jax-cuda12-plugin); its _versions module
    # says which CUDA and cuDNN it was compiled against, without a GPU. No plugin: a CPU build.
    build = {"is_cuda_build": False, "cuda_version": None, "cudnn_version": None}
    for plugin in ("jax_cuda13_plugin", "jax_cuda12_plugin"):
        try:
            versions = importlib.import_module(f"{plugin}._versions")
        except ImportError:
            continue
        cuda, cudnn = versions.cuda_runtime_build_version(), versions.cudnn_build_version()
        # CUDA's integer versions are major*1000 + minor*10; cuDNN 9's major*10000 + minor*100 + patch.
        build = {"is_cuda_build": True, "plugin": plugin,
                 "cuda_version": f"{cuda // 1000}.{cuda % 1000 // 10}",
                 "cudnn_version": f"{cudnn // 10000}.{cudnn % 10000 // 100}.{cudnn % 100}"}
        break
    return {"framework": {"name": "jax", "module": jax.__name__, "version": jax.__version__, "build": build}}


def torch_facts() -> dict:
    import torch

    cuda = torch.version.cuda  # None in a CPU build
    build = {"is_cuda_build": cuda is not None, "cuda_version": cuda, "cudnn_version": None,
             "cuda_arch_flags": None}
    if cuda is not None:
        # Neither needs a GPU: cuDNN's version is read from the library, the arch flags are
        # the SASS/PTX targets the wheel was compiled for (torch.cuda.get_arch_list() needs a GPU).
        cudnn = torch.backends.cudnn.version()
        build["cudnn_version"] = f"{cudnn // 10000}.{cudnn % 10000 // 100}.{cudnn % 100}" if cudnn else None
        build["cuda_arch_flags"] = torch._C._cuda_getArchFlags().split()
    return {"framework": {"name": "torch", "module": torch.__name__, "version": torch.__version__, "build": build}}


FRAMEWORK_FACTS = {"tensorflow": tensorflow_facts, "jax": jax_facts, "torch": torch_facts}


def collect() -> dict:
    """The inventory (main() prints it); also run by gpu_libraries --inventory in its own
    interpreter, after its check."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # The image sets KERAS_BACKEND; an image without it is a TensorFlow one (Keras' own default,
    # and the ROCm base image, which sets nothing).
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    facts = {"tensorflow": None, "tf_keras": None, "tf_keras_module": None, "build_info": None,
             **FRAMEWORK_FACTS[backend]()}
    try:
        import keras
        keras_version = keras.__version__
    except ImportError:
        keras_version = None
    home = os.path.expanduser("~")
    dists, vendored = distributions()
    with open("/etc/os-release") as os_release:
        release = dict(line.rstrip("\n").split("=", 1) for line in os_release if "=" in line)
    return {
        "os_release": release,
        "python": platform.python_version(),
        "executable": sys.executable,
        "which_python": shutil.which("python"),
        "backend": backend,
        **facts,
        "keras": keras_version,
        "dists": dists,
        "vendored": vendored,
        "uid": os.getuid(), "gid": os.getgid(),
        "home": home, "home_writable": os.access(home, os.W_OK),
        "env": dict(os.environ),
    }


def main() -> None:
    print(json.dumps(collect()))


if __name__ == "__main__":
    main()

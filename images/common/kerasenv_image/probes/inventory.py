"""What the image holds, as the user running it sees it: OS, Python, TensorFlow and Keras
versions, TensorFlow's build info, every installed distribution, the user, HOME and the
environment. Prints one JSON line.

Run in the image as `python -m kerasenv_image.probes.inventory` (the acceptance suite's
`inventory` fixture). TensorFlow is imported inside main(), so importing this module is cheap.
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


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    try:
        import keras
        keras_version = keras.__version__
    except ImportError:
        keras_version = None
    home = os.path.expanduser("~")
    dists, vendored = distributions()
    # tf.keras 2 (TF 2.14/2.15) is the module keras.api._v2.keras of the `keras` distribution
    # and has no __version__ of its own.
    tf_keras_module = getattr(tf.keras, "__name__", "")
    tf_keras = getattr(tf.keras, "__version__", None) or (
        md.version("keras") if tf_keras_module.startswith("keras.") else None)
    with open("/etc/os-release") as os_release:
        release = dict(line.rstrip("\n").split("=", 1) for line in os_release if "=" in line)
    print(json.dumps({
        "os_release": release,
        "python": platform.python_version(),
        "executable": sys.executable,
        "which_python": shutil.which("python"),
        "tensorflow": tf.__version__,
        "keras": keras_version,
        "tf_keras": tf_keras,
        "tf_keras_module": tf_keras_module,
        "build_info": {k: (list(v) if isinstance(v, (list, tuple)) else v)
                       for k, v in dict(tf.sysconfig.get_build_info()).items()},
        "dists": dists,
        "vendored": vendored,
        "uid": os.getuid(), "gid": os.getgid(),
        "home": home, "home_writable": os.access(home, os.W_OK),
        "env": dict(os.environ),
    }))


if __name__ == "__main__":
    main()

"""The Keras release a backend runs with (Keras 3, or tf.keras 2 on TF 2.14/2.15)."""

from __future__ import annotations


def keras_version(keras) -> str:
    """The Keras release: Keras 3 has `keras.__version__`; tf.keras 2 (module
    keras.api._v2.keras on TF 2.14/2.15) has none, so ask the `keras` distribution it is."""
    version = getattr(keras, "__version__", None)
    if version:
        return version
    from importlib import metadata

    return metadata.version("keras")

"""kerasenv: versioned, self-verifying TensorFlow + Keras GPU images."""

__version__ = "0.1.0"

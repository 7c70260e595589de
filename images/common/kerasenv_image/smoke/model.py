"""The small conv net the smoke training fits."""

from __future__ import annotations

from .data import CLASSES, IMAGE_SIZE


def build_model(keras):
    layers = keras.layers
    model = keras.Sequential([
        keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 1)),
        layers.Conv2D(16, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(32, activation="relu"),
        layers.Dense(CLASSES),
        # float32 output keeps softmax/loss numerically stable under mixed precision.
        layers.Activation("softmax", dtype="float32"),
    ])
    return model

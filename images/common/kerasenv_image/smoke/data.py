"""The synthetic, seeded, learnable data set and its tf.data pipeline (no network, no downloads)."""

from __future__ import annotations




IMAGE_SIZE, CLASSES = 28, 4


def synthetic_images(samples: int, seed: int):
    """Four translation-invariant textures (horizontal, vertical, diagonal stripes, checker)
    with random phase and Gaussian noise: easy for a conv net, impossible to guess."""
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=samples)
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE]
    phase = rng.integers(0, 4, size=samples)[:, None, None]
    patterns = np.stack([
        ((yy[None] + phase) // 2) % 2,
        ((xx[None] + phase) // 2) % 2,
        ((xx[None] + yy[None] + phase) // 2) % 2,
        (((xx[None] + phase) // 3 + (yy[None] + phase) // 3) % 2),
    ], axis=1)[np.arange(samples), labels]
    images = patterns.astype(np.float32) * 160 + rng.normal(40, 35, size=patterns.shape)
    images = np.clip(images, 0, 255).astype(np.uint8)[..., None]
    return images, labels.astype(np.int32)


def make_dataset(tf, images, labels, global_batch: int, seed: int):
    autotune = tf.data.AUTOTUNE

    def to_float(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    return (tf.data.Dataset.from_tensor_slices((images, labels))
            .map(to_float, num_parallel_calls=autotune)
            .cache()
            .shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
            # Endless: an epoch is a number of steps (--steps-per-epoch), so a global batch
            # larger than the data set is fine and every replica count sees as many steps.
            .repeat()
            .batch(global_batch, drop_remainder=True)
            .prefetch(autotune))

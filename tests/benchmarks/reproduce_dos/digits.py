"""Synthetic digit-like images for the section-4 reproduction's tests."""

import numpy as np


def strokes(n=30, seed=0):
    """Synthetic digit-like images (bars), labels 0..9: no data needed."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    for image in images:
        for _ in range(3):
            r, c = rng.integers(6, 20, size=2)
            image[r : r + 2, c - 4 : c + 5] = 255
    return images, np.arange(n) % 10

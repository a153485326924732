"""The large-image policy every stage shares: at most ``max_pixels`` pixels per image.

A dataset's ``max_pixels`` (config ``datasets.<name>.max_pixels``, default
``samples.max_pixels`` = :data:`DEFAULT_MAX_PIXELS`) bounds every image the workflow
writes for it: the samples stage downscales a larger image once (keeping its aspect
ratio, :func:`fit_within`, Lanczos), and every canvas a perturbation builds (the Idis
composites) stays within it. The default, 2048 x 2048 = 4,194,304 pixels, is the largest
image any study shows a model (the Idis paper's visual-token ablation, App. D.2) and the
most pixels the registry's models take (Qwen3-VL at ``max_pixels`` 4096 x 32 x 32; the
Qwen2.5-VL models 1,003,520), so a model never sees fewer pixels because of it. The
bound can be at most :data:`PIL_MAX_PIXELS`: above that PIL warns on every read of the
image, and above twice that it refuses to open it (``DecompressionBombError``), so a
larger image could not be answered (docs/large-images.md).
"""

from __future__ import annotations

import math

#: ``samples.max_pixels``: 2048 x 2048 (the schema's default; tests/test_pixels.py
#: checks that both say the same).
DEFAULT_MAX_PIXELS = 2048 * 2048

#: PIL's ``Image.MAX_IMAGE_PIXELS`` (its default, 1024 * 1024 * 1024 // 4 // 3): the
#: largest ``max_pixels`` allowed.
PIL_MAX_PIXELS = 89_478_485


def fit_within(size: tuple[int, int], max_pixels: int) -> tuple[int, int]:
    """``size`` (width, height) scaled down by one factor until it holds at most
    ``max_pixels`` pixels, each side rounded down (at least 1); ``size`` itself when it
    fits already. ``fit_within((2520, 8526), 4_194_304) == (1113, 3767)``."""
    w, h = int(size[0]), int(size[1])
    if w < 1 or h < 1:
        raise ValueError(f"image size {w}x{h} is empty")
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be at least 1, got {max_pixels}")
    if w * h <= max_pixels:
        return w, h
    scale = math.sqrt(max_pixels / (w * h))
    nw, nh = max(1, math.floor(w * scale)), max(1, math.floor(h * scale))
    while nw * nh > max_pixels:  # float rounding: shrink the longer side by a pixel
        if nw >= nh:
            nw -= 1
        else:
            nh -= 1
    return nw, nh


def max_side(max_pixels: int) -> int:
    """The side of the largest square within ``max_pixels`` (``math.isqrt``)."""
    return math.isqrt(int(max_pixels))

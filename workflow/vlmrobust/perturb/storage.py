"""How the variants stage stores the images it writes (config ``variants.format``).

Every stored format is lossless: decoding a stored file gives back the perturbed image
exactly, its mode and every pixel value (transparent pixels' colours included), so
what a model is shown never depends on the format. The manifest's ``sha256`` is the
hash of the stored bytes.

* ``png`` (the default): PNG as Pillow writes it (``compress_level`` 6).
* ``webp``: lossless WebP (libwebp through Pillow, :data:`WEBP_OPTIONS`). WebP holds
  8-bit ``RGB`` and ``RGBA`` images of at most :data:`WEBP_MAX_SIDE` pixels a side; any
  other image (``L``, ``LA``, ``P``, 16-bit, a larger side) is stored as PNG instead, so
  the stored image stays exact. The file's suffix says which format it holds.

Masks are always PNG (one ``L`` band). Both encoders are deterministic: the same image
gives the same bytes with the same Pillow and codec builds (the measured sizes and
times, and why WebP's settings are these: docs/studies/corruption.md, "Disk and time of
the variants"; ``benchmarks/bench_storage.py``).
"""

from __future__ import annotations

import io

from PIL import Image

__all__ = ["FORMATS", "WEBP_MAX_SIDE", "WEBP_OPTIONS", "encode_image", "stored_format"]

#: The values of ``variants.format``.
FORMATS = ("png", "webp")
#: libwebp's largest side.
WEBP_MAX_SIDE = 16383
#: Lossless WebP at libwebp's lossless level 1 (``cwebp -lossless -z 1``: ``method`` 1,
#: ``quality`` 20, which for lossless is the effort, not a loss): on MATH-V 78-80% of
#: PNG's bytes in a third to a half of its time; level 6 (libwebp's default) saves 2-5
#: points more at 2.5-3 times the time. ``exact`` keeps the colour under fully
#: transparent pixels (else libwebp may change it).
WEBP_OPTIONS = {"lossless": True, "method": 1, "quality": 20, "exact": True}
_WEBP_MODES = frozenset({"RGB", "RGBA"})
_SUFFIX = {"png": ".png", "webp": ".webp"}


def stored_format(image: Image.Image, fmt: str) -> str:
    """The format ``image`` is stored in under ``variants.format`` = ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown image format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "webp" and (image.mode not in _WEBP_MODES or max(image.size) > WEBP_MAX_SIDE):
        return "png"
    return fmt


def encode_image(image: Image.Image, fmt: str = "png") -> tuple[bytes, str]:
    """``image`` encoded for ``variants.format`` = ``fmt``: the bytes and the file suffix
    (``.png`` or ``.webp``; see :func:`stored_format`)."""
    actual = stored_format(image, fmt)
    buf = io.BytesIO()
    if actual == "webp":
        image.save(buf, format="WEBP", **WEBP_OPTIONS)
    else:
        image.save(buf, format="PNG")
    return buf.getvalue(), _SUFFIX[actual]

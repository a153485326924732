"""Image loading shared by the local backends (hf, vllm).

Every backend must show a model the same pixels the variants stage perturbed: the
variants stage applies the EXIF orientation before corrupting, so a clean image and
its corrupted variants are only comparable if the backends apply it too.
"""

from __future__ import annotations

import os
from typing import Any

from PIL import Image, ImageOps


class ImageLoadError(ValueError):
    """An input image that cannot be opened or decoded (the message names the file)."""


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` in RGB (itself when it already is); transparent pixels are composited
    onto white.

    A plain ``convert("RGB")`` would show whatever colour hides under transparent
    pixels (often black: a diagram with a transparent background would turn black on
    black); white is what ``transformers``' ``convert_to_rgb`` and ``qwen_vl_utils`` use.
    """
    if image.mode == "RGB":
        return image
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )
    if not has_alpha:
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def load_image(path: str | os.PathLike[str]) -> Image.Image:
    """Open ``path``, apply its EXIF orientation, return a fully decoded RGB image.

    The file is closed before returning. A missing or undecodable file raises
    :class:`ImageLoadError` naming the path.
    """
    try:
        with Image.open(os.fspath(path)) as im:
            im.load()
            oriented = ImageOps.exif_transpose(im)
            return to_rgb(oriented)
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ImageLoadError(f"cannot read image {os.fspath(path)}: {exc}") from exc


def load_images(paths: list[Any]) -> list[Image.Image]:
    """:func:`load_image` for each path, in order."""
    return [load_image(p) for p in paths]

"""Image loading shared by the local backends (hf, vllm).

Every backend must show a model the same pixels the variants stage perturbed: the
variants stage applies the EXIF orientation before corrupting, so a clean image and
its corrupted variants are only comparable if the backends apply it too.

A request with ``fit`` (a dataset shown at the harness's sizes, or with ``fit``: the Idis
perception datasets) gets its images as lmms-eval's Qwen chat wrappers and the Idis
authors' ``process_vision_info`` call made them (:func:`fit_image`): the task code's
``convert("RGB")`` (an alpha band dropped, not composited), then
``qwen_vl_utils.fetch_image``'s resize (docs/prompts.md, "Same tensors as the harness").
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


def fit_image(image: Image.Image, fit: dict[str, int]) -> Image.Image:
    """``image`` as lmms-eval's Qwen chat wrappers hand it to their processor: RGB by a
    plain ``convert("RGB")`` (the task code's ``doc_to_visual``: transparent pixels show
    the colour under them), resized with PIL's bicubic filter to the size
    ``qwen_vl_utils.fetch_image`` computes (:func:`~vlmrobust.core.vision_tokens.fetch_size`
    with ``fit``'s ``factor``, ``min_pixels``, ``max_pixels``)."""
    from ...core.vision_tokens import fetch_size

    rgb = image.convert("RGB")
    height, width = fetch_size(
        rgb.height, rgb.width, int(fit["factor"]), int(fit["min_pixels"]), int(fit["max_pixels"])
    )
    return rgb.resize((width, height), Image.Resampling.BICUBIC)


def load_fitted(path: str | os.PathLike[str], fit: dict[str, int]) -> Image.Image:
    """Open ``path`` with its EXIF orientation applied (as :func:`load_image`), then
    :func:`fit_image`; a missing or undecodable file raises :class:`ImageLoadError`."""
    try:
        with Image.open(os.fspath(path)) as im:
            im.load()
            return fit_image(ImageOps.exif_transpose(im), fit)
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ImageLoadError(f"cannot read image {os.fspath(path)}: {exc}") from exc


def load_images(paths: list[Any], fit: dict[str, int] | None = None) -> list[Image.Image]:
    """:func:`load_image` for each path, in order; with ``fit``, :func:`load_fitted`."""
    if fit:
        return [load_fitted(p, fit) for p in paths]
    return [load_image(p) for p in paths]

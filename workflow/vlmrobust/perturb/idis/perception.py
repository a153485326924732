"""What the Idis-perception perturbations (``objects``, ``typographic``, ``size``) share:
the sample's target (its class label and, from ``meta.target_masks[0]``, its pixels on
the canvas), the cut-outs of the objects (their listing, loading and measures), drawing
a variant's objects, and pasting them (the ``apply`` of ``size`` and of the composite
``objects``)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ...core.records import Sample
from ..placement import mask_bbox, paste_layers
from ..variants import _key, open_shown
from .common import (
    ObjectLists,
    _folder,
    _info,
    _layer,
    _mask_image,
    _one_image,
    _pick,
    _shown_size,
    load_objects,
    object_slug,
    to_canvas,
)

# ---------------------------------------------------------------- the target


def _target_class(sample: Sample, objects: ObjectLists) -> str:
    sid = sample.sample_id
    label = sample.meta.get("label")
    if label not in objects.classes:
        raise ValueError(
            f"sample {sid!r}: meta.label {label!r} is not a class of the object lists "
            f"({', '.join(objects.classes)})"
        )
    cls = sample.meta.get("imagenet9_class")
    if cls is not None and cls != objects.labels[label]:
        raise ValueError(
            f"sample {sid!r}: meta.imagenet9_class {cls!r} does not match meta.label "
            f"{label!r} (the object lists map it to {objects.labels[label]!r})"
        )
    return label


def _target_pixels(sample: Sample, canvas: int) -> np.ndarray | None:
    """The target's pixels on the canvas (a boolean ``(canvas, canvas)`` array; None
    without a target mask). The mask is resized like the image (bicubic); any channel
    > 16 is the target."""
    sid = sample.sample_id
    masks = sample.meta.get("target_masks")
    path = masks[0] if isinstance(masks, list) and masks else None
    if path is None:
        return None
    what = f"sample {sid!r}: meta.target_masks[0]"
    mask = open_shown(str(path), what)
    size = _shown_size(sample.images[0], f"sample {sid!r}")
    if mask.size != size:
        raise ValueError(
            f"{what} {path} is {mask.width}x{mask.height} but the image is {size[0]}x{size[1]}"
        )
    target = (np.asarray(to_canvas(mask, canvas)) > 16).any(axis=2)
    if not target.any():
        raise ValueError(f"{what} {path} has no target pixel (no channel above 16)")
    return target


def _perception_target(
    sample: Sample, name: str, spec: dict[str, Any]
) -> tuple[ObjectLists, str, list[int] | None, int | None, np.ndarray | None]:
    """The object lists, the sample's class label, and its target's box, pixel count
    and pixels on the canvas (the mask read once per sample; None without one): what
    ``objects``, ``typographic`` and ``size`` plan around."""
    _one_image(sample, name)
    objects = load_objects(spec["objects_file"])
    target = _target_class(sample, objects)
    pixels = _target_pixels(sample, spec["canvas"])
    if pixels is None:
        return objects, target, None, None, None
    return objects, target, list(mask_bbox(pixels)), int(pixels.sum()), pixels


# ---------------------------------------------------------------- cut-outs


@lru_cache(maxsize=64)
def _cutout(path: str) -> Image.Image:
    """An RGBA cut-out cropped to the bounding box of its alpha > 0 (do not modify)."""
    rgba = open_shown(path, "cut-out").convert("RGBA")
    bbox = rgba.getchannel("A").getbbox()
    if bbox is None:
        raise ValueError(f"cut-out {path} is fully transparent")
    return rgba.crop(bbox)


@lru_cache(maxsize=4096)
def _cutout_stats(path: str) -> tuple[int, int, float]:
    """(width, height, share of alpha > 0 pixels) of a cropped cut-out."""
    cut = _cutout(path)
    alpha = np.asarray(cut.getchannel("A"))
    return cut.width, cut.height, float((alpha > 0).mean())


def _segment_listing(
    condition: str, folder: str, objects: ObjectLists, semantics: Iterable[str]
) -> dict[str, list[str]]:
    """object name -> its cut-out files (sorted), for every object ``semantics`` may use."""
    names = [o for c in objects.categories(semantics) for o in objects.objects_of(c)]
    listing: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        sub = Path(folder) / object_slug(name)
        files = sorted(str(p) for p in sub.glob("*.png") if p.is_file()) if sub.is_dir() else []
        if not files:
            raise ValueError(
                f"{_key(condition, 'segments')}: no cut-out of {name!r} ({sub}/*.png is "
                "missing or empty)"
            )
        listing[name] = files
    return listing


def _segments(
    condition: str, spec: dict[str, Any], objects: ObjectLists, semantics: Iterable[str], need: str
) -> dict[str, list[str]]:
    """The cut-out listing of the ``segments`` folder, which must be given (else the
    error says ``need``) and exist."""
    folder = spec["segments"]
    if folder is None:
        raise ValueError(f"{_key(condition, 'segments')}: {need} (<segments>/<object-slug>/*.png)")
    return _segment_listing(condition, _folder(condition, "segments", folder), objects, semantics)


# ---------------------------------------------------------------- drawing and pasting


def _draw_objects(
    rng: np.random.Generator, semantics: str, target: str, objects: ObjectLists, k: int
) -> tuple[list[str], str]:
    """``k`` distinct objects of one category and that category (a class label or
    ``"irrelevant"``)."""
    if semantics == "aligned":
        category = target
    elif semantics == "conflicting":
        others = [c for c in objects.classes if c != target]
        category = others[int(rng.integers(len(others)))]
    else:
        category = "irrelevant"
    return _pick(rng, objects.objects_of(category), k), category


def _draw_files(rng: np.random.Generator, listing: dict[str, list[str]], names: list[str]):
    return [listing[n][int(rng.integers(len(listing[n])))] for n in names]


def _paste_cutouts(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, Image.Image, dict[str, Any]]:
    """The ``apply`` of ``size`` and of the composite ``objects``."""
    canvas = int(params["canvas"])
    base = to_canvas(image, canvas)
    boxes = params["boxes"]
    layers = [(_layer(_cutout(f), b), b) for f, b in zip(params["files"], boxes, strict=True)]
    out, mask = paste_layers(base, layers)
    info = _info(boxes, params["distractors"], params, int(mask.sum()), (canvas, canvas))
    return out, _mask_image(mask), info

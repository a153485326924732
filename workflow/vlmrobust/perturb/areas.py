"""Distractor areas of the Idis variants: how much of an image the distractors take.

The Idis paper (eq. 2, Fig. 7b) relates what a model reasons about to the share of the
image the distractors cover: ``r_area = A_dist / (A_dist + A_target)``, with ``A_dist``
the distractor pixels and ``A_target`` the target pixels of the variant's image.
:func:`measure_areas` writes one row per variant of a manifest
(``results/areas/<dataset>/<condition>.jsonl``)::

    {"variant_id", "sample_id", "distractor_area": int|null, "target_area": int|null,
     "r_area": float|null, "method": "exact"|"change-mask"|"segmenter"|"none",
     "reason": str|null, "canvas": [w, h] | null}

``r_area`` is null whenever one of the two areas is unknown (``reason`` says why) or
both are 0 (reason ``empty``). Every area is in pixels of the variant's own image.

How a variant is measured
=========================

1. **none** (reason ``no-visual-distractor``): variants that carry no distractor in
   their image: ``params.kind`` ``textual`` or ``resolution``, the clean condition
   (perturbation ``none``), a variant without images or whose images are the sample's
   own files. A variant with more than one image is not measured either (reason
   ``several-images``: the Idis variants have one).
2. **exact**: the perturbation recorded ``params.placed[0]`` with an integer
   ``distractor_area`` (composited objects, typographic text, size variants, math
   diagrams and handwritten expressions). These areas were counted when the image was
   made, on the output image. When the variant lists a mask file, its pixels > 127 are
   counted again and must equal the recorded ``distractor_area``; a difference is an
   error naming the variant and the file (the mask or the manifest is stale).
   ``target_area`` is the recorded one. For the math perturbations (``diagram``,
   ``handwritten``) the target is the whole original diagram, pasted unscaled (or scaled
   down to its box within ``max_pixels``), so when
   ``target_area`` is missing its placed box (``target_box``, w x h) is used, still
   ``exact``. Otherwise a missing ``target_area`` (a perception sample without a target
   mask) leaves ``r_area`` null with reason ``no-target-mask`` (``distractor_area`` is
   still given).
3. **change-mask**: every other image variant (a generative edit: the released Idis
   images, the ``objects`` perturbation with an image-editing API; ``placed`` is absent
   or its ``distractor_area`` is null). The edited image is compared with the sample's
   original image, resized to the edited image's size (bicubic; both in RGB,
   transparency on white, EXIF orientation applied) — see :func:`change_mask`:

   * a pixel *changed* when its largest absolute channel difference exceeds
     ``threshold`` (default 40 of 255: above re-encoding noise and the small tone shifts
     an editing model spreads over the whole picture);
   * a morphological opening with an ``open_px`` x ``open_px`` square (default 3; 0 or 1
     = none) removes specks and one-pixel lines;
   * connected components (8-connected) smaller than ``min_component`` x the image
     area (default 0.001) are dropped;
   * the target's pixels are taken out: what changed on the target is not a distractor.

   ``A_target`` is the sample's target mask (``meta.target_masks[k]``: the ImageNet-9
   ``only_fg`` image, foreground on black; any channel > 16 is the target) resized
   (nearest) to the edited image's size. Without a target mask both areas are null
   (reason ``no-target-mask``): the target's own changes could not be removed from the
   change mask, so its count would overstate the distractors.
4. **segmenter** (optional, ``segmenter`` other than ``none``): a text-prompted
   segmenter replaces the change mask for the *visual* variants that step 3 would
   measure. It is asked for the target label (``meta.imagenet9_class``, else
   ``params.target_class`` / ``meta.label``, lower case) and for each distractor:
   ``params.distractors`` when the variant names them, else the objects of
   ``params.distractor_classes`` (``resources/idis/objects.yaml``), else (a released
   conflicting variant: the other class is not named) the objects of every class but
   the target's. ``A_target`` = the union of the target's masks, ``A_dist`` = the union
   of the distractors' masks less the target (an overlap counts as target). Without a
   target label: nulls, reason ``no-target-label``. ``langsam`` (the ``lang-sam``
   package, GroundingDINO + SAM) is built in; others plug in with
   :func:`register_segmenter`.

Settings (the ``idis.areas`` block; unknown keys are errors naming
``idis.areas.<key>``): ``segmenter`` (``none`` | ``langsam`` | a registered name),
``threshold``, ``open_px``, ``min_component``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image
from scipy import ndimage

from ..clients.vlm.media import to_rgb
from ..core.io import write_jsonl
from ..core.records import Sample, Variant, read_samples, read_variants
from .idis import load_objects
from .idis.common import _shown_size
from .variants import open_shown

__all__ = [
    "AREA_DEFAULTS",
    "METHODS",
    "SEGMENTERS",
    "Segmenter",
    "area_ratio",
    "change_mask",
    "check_area_spec",
    "measure_areas",
    "measure_variant",
    "register_segmenter",
]

METHODS = ("exact", "change-mask", "segmenter", "none")
AREA_DEFAULTS: dict[str, Any] = {
    "segmenter": "none",
    "threshold": 40,
    "open_px": 3,
    "min_component": 0.001,
}
#: Perturbations whose target is the whole original diagram, pasted at its box.
MATH_PERTURBATIONS = ("diagram", "handwritten")
NO_DISTRACTOR_KINDS = ("textual", "resolution")
TARGET_THRESHOLD = 16  # only_fg images: any channel above this is the target
MASK_THRESHOLD = 127  # variant masks: 255 = distractor
_BICUBIC = Image.Resampling.BICUBIC
_NEAREST = Image.Resampling.NEAREST


# ---------------------------------------------------------------- segmenters


class Segmenter(Protocol):
    """A text-prompted segmenter: one boolean mask (the image's height x width, the
    union of every instance found; all False when none) per prompt."""

    def segment(self, image: Image.Image, prompts: list[str]) -> dict[str, np.ndarray]: ...


#: name -> factory (no arguments) of a :class:`Segmenter`.
SEGMENTERS: dict[str, Callable[[], Segmenter]] = {}


def register_segmenter(name: str, factory: Callable[[], Segmenter]) -> None:
    """Make ``factory`` the segmenter ``name`` (the ``segmenter`` setting); ``none`` is
    reserved. A later registration of the same name replaces the earlier one."""
    if name == "none" or not isinstance(name, str) or not name:
        raise ValueError(f"segmenter name {name!r} is reserved or empty")
    SEGMENTERS[name] = factory


class LangSAMSegmenter:
    """``lang-sam`` (GroundingDINO boxes from the prompt, SAM masks in them)."""

    def __init__(self) -> None:
        try:
            from lang_sam import LangSAM
        except ImportError:
            raise ValueError(
                "areas.segmenter: langsam is not installed (pip install lang-sam)"
            ) from None
        self.model = LangSAM()

    def segment(self, image: Image.Image, prompts: list[str]) -> dict[str, np.ndarray]:
        h, w = image.height, image.width
        out: dict[str, np.ndarray] = {}
        for prompt in prompts:
            result = self.model.predict([image], [prompt])
            if isinstance(result, list):  # lang-sam >= 0.2: one dict per image
                masks = result[0].get("masks") if result else None
            else:  # older lang-sam: (masks, boxes, phrases, logits)
                masks = result[0]
            if hasattr(masks, "cpu"):
                masks = masks.cpu().numpy()
            union = np.zeros((h, w), dtype=bool)
            if masks is not None and len(masks):
                union = np.asarray(masks).reshape(-1, h, w).astype(float).max(axis=0) > 0.5
            out[prompt] = union
        return out


register_segmenter("langsam", LangSAMSegmenter)


# ---------------------------------------------------------------- settings


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_area_spec(spec: dict[str, Any] | None) -> dict[str, Any]:
    """The ``idis.areas`` settings with defaults filled in; errors name
    ``idis.areas.<key>``."""
    spec = dict(spec or {})
    unknown = sorted(set(spec) - set(AREA_DEFAULTS))
    if unknown:
        raise ValueError(
            f"idis.areas.{unknown[0]}: unknown key; allowed keys: {', '.join(AREA_DEFAULTS)}"
        )
    out = {**AREA_DEFAULTS, **spec}
    seg = out["segmenter"]
    if seg != "none" and seg not in SEGMENTERS:
        names = ", ".join(["none", *sorted(SEGMENTERS)])
        raise ValueError(f"idis.areas.segmenter: {seg!r} is not one of {names}")
    t = out["threshold"]
    if not _is_number(t) or not 0 <= t < 255:
        raise ValueError(f"idis.areas.threshold: expected a number from 0 to 255; got {t!r}")
    o = out["open_px"]
    if not isinstance(o, int) or isinstance(o, bool) or o < 0:
        raise ValueError(f"idis.areas.open_px: expected an integer >= 0 (pixels); got {o!r}")
    m = out["min_component"]
    if not _is_number(m) or not 0 <= m < 1:
        raise ValueError(
            f"idis.areas.min_component: expected a fraction of the image area from 0 to 1; "
            f"got {m!r}"
        )
    return out


# ---------------------------------------------------------------- pure helpers


def area_ratio(dist: int | None, target: int | None) -> float | None:
    """``dist / (dist + target)``; None when either is None or both are 0."""
    if dist is None or target is None or dist + target == 0:
        return None
    return dist / (dist + target)


def change_mask(
    edited: Image.Image,
    original: Image.Image,
    threshold: float = 40,
    open_px: int = 3,
    min_component: float = 0.001,
) -> np.ndarray:
    """The pixels an edit changed (bool, height x width of ``edited``): ``original``
    resized to ``edited``'s size (bicubic) when it differs, a pixel changed when its
    largest absolute channel difference exceeds ``threshold``, then an opening with an
    ``open_px`` square and 8-connected components under ``min_component`` x the image
    area dropped."""
    a = np.asarray(to_rgb(edited), dtype=np.int16)
    base = to_rgb(original)
    if base.size != edited.size:
        base = base.resize(edited.size, _BICUBIC)
    b = np.asarray(base, dtype=np.int16)
    mask = np.abs(a - b).max(axis=2) > threshold
    if open_px > 1:
        mask = ndimage.binary_opening(mask, structure=np.ones((open_px, open_px), dtype=bool))
    least = min_component * mask.size
    if least > 0 and mask.any():
        labels, n = ndimage.label(mask, structure=np.ones((3, 3), dtype=bool))
        sizes = np.bincount(labels.ravel(), minlength=n + 1)
        keep = sizes >= least
        keep[0] = False
        mask = keep[labels]
    return mask


# ---------------------------------------------------------------- images


def _size(path: str, what: str) -> list[int]:
    """``[width, height]`` of an image as shown (:func:`~.idis.common._shown_size`)."""
    return list(_shown_size(path, what))


@lru_cache(maxsize=8)
def _original(path: str, what: str) -> Image.Image:
    """A sample's image in RGB (shared by the variants of one sample; do not modify)."""
    return to_rgb(open_shown(path, what))


@lru_cache(maxsize=8)
def _target(path: str, size: tuple[int, int], what: str) -> np.ndarray:
    """A target mask (any channel > 16) resized (nearest) to ``size`` (do not modify)."""
    arr = np.asarray(to_rgb(open_shown(path, what)))
    mask = Image.fromarray(((arr > TARGET_THRESHOLD).any(axis=2) * 255).astype(np.uint8))
    if mask.size != size:
        mask = mask.resize(size, _NEAREST)
    return np.asarray(mask) > MASK_THRESHOLD


def _mask_count(path: str, variant_id: str) -> int:
    img = open_shown(path, f"variant {variant_id!r}: mask")
    return int((np.asarray(img.convert("L")) > MASK_THRESHOLD).sum())


# ---------------------------------------------------------------- one variant


def _row(
    v: Variant,
    method: str,
    dist: int | None,
    target: int | None,
    canvas: list[int] | None,
    reason: str | None = None,
) -> dict[str, Any]:
    r = area_ratio(dist, target)
    if r is None and reason is None:
        reason = "empty"  # both areas known and 0
    return {
        "variant_id": v.variant_id,
        "sample_id": v.sample_id,
        "distractor_area": dist,
        "target_area": target,
        "r_area": r,
        "method": method,
        "reason": reason,
        "canvas": canvas,
    }


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _exact(v: Variant, placed: dict[str, Any]) -> dict[str, Any]:
    dist = int(placed["distractor_area"])
    if v.masks:
        counted = _mask_count(v.masks[0], v.variant_id)
        if counted != dist:
            raise ValueError(
                f"variant {v.variant_id!r}: the mask {v.masks[0]} has {counted} distractor "
                f"pixels but params.placed records distractor_area {dist} (a stale mask or "
                "manifest: rebuild the variants)"
            )
    canvas = placed.get("canvas")
    canvas = [int(c) for c in canvas] if canvas else _size(v.images[0], f"variant {v.variant_id!r}")
    target = placed.get("target_area")
    box = placed.get("target_box")
    if not _is_int(target) and v.perturbation in MATH_PERTURBATIONS and box:
        target = (box[2] - box[0]) * (box[3] - box[1])
    if not _is_int(target):
        return _row(v, "exact", dist, None, canvas, "no-target-mask")
    return _row(v, "exact", dist, int(target), canvas)


def _target_mask_path(sample: Sample) -> str | None:
    masks = sample.meta.get("target_masks")
    return masks[0] if isinstance(masks, list) and masks and masks[0] else None


def _change(v: Variant, sample: Sample, spec: dict[str, Any]) -> dict[str, Any]:
    what = f"variant {v.variant_id!r}"
    edited = open_shown(v.images[0], what)
    canvas = [edited.width, edited.height]
    path = _target_mask_path(sample)
    if path is None:
        return _row(v, "change-mask", None, None, canvas, "no-target-mask")
    target = _target(str(path), edited.size, f"sample {sample.sample_id!r}: meta.target_masks[0]")
    original = _original(sample.images[0], f"sample {sample.sample_id!r}")
    changed = change_mask(
        edited, original, spec["threshold"], spec["open_px"], spec["min_component"]
    )
    dist = int((changed & ~target).sum())
    return _row(v, "change-mask", dist, int(target.sum()), canvas)


def _target_prompt(v: Variant, sample: Sample) -> str | None:
    for value in (
        sample.meta.get("imagenet9_class"),
        v.params.get("target_class"),
        sample.meta.get("label"),
    ):
        if isinstance(value, str) and value.strip():
            return value.strip().lower()
    return None


def _distractor_prompts(v: Variant, sample: Sample) -> list[str]:
    names = v.params.get("distractors")
    if isinstance(names, list) and names:
        return [str(n) for n in names]
    objects = load_objects()
    classes = v.params.get("distractor_classes")
    if isinstance(classes, list) and classes:
        return [o for c in classes for o in objects.objects_of(c)]
    label = v.params.get("target_class") or sample.meta.get("label")
    return [o for c, objs in objects.classes.items() if c != label for o in objs]


def _segmented(v: Variant, sample: Sample, segmenter: Segmenter, name: str) -> dict[str, Any]:
    what = f"variant {v.variant_id!r}"
    image = to_rgb(open_shown(v.images[0], what))
    canvas = [image.width, image.height]
    target_prompt = _target_prompt(v, sample)
    if target_prompt is None:
        return _row(v, "segmenter", None, None, canvas, "no-target-label")
    prompts = list(dict.fromkeys([target_prompt, *_distractor_prompts(v, sample)]))
    masks = segmenter.segment(image, prompts)
    shape = (image.height, image.width)
    for p in prompts:
        if p not in masks:
            raise ValueError(f"{what}: segmenter {name!r} returned no mask for {p!r}")
        if np.shape(masks[p]) != shape:
            raise ValueError(
                f"{what}: segmenter {name!r} returned a mask of shape {np.shape(masks[p])} "
                f"for {p!r}; the image is {shape[0]}x{shape[1]} (height x width)"
            )
    target = np.asarray(masks[target_prompt], dtype=bool)
    dist = np.zeros(shape, dtype=bool)
    for p in prompts[1:]:
        dist |= np.asarray(masks[p], dtype=bool)
    dist &= ~target
    return _row(v, "segmenter", int(dist.sum()), int(target.sum()), canvas)


def measure_variant(
    v: Variant,
    sample: Sample | None,
    spec: dict[str, Any],
    segmenter: Segmenter | None = None,
) -> dict[str, Any]:
    """The area row of one variant (``spec`` checked by :func:`check_area_spec`;
    ``segmenter`` built from ``spec["segmenter"]`` unless that is ``none``)."""
    kind = v.params.get("kind")
    if (
        kind in NO_DISTRACTOR_KINDS
        or v.perturbation == "none"
        or not v.images
        or (sample is not None and list(v.images) == list(sample.images))
    ):
        canvas = _size(v.images[0], f"variant {v.variant_id!r}") if v.images else None
        return _row(v, "none", None, None, canvas, "no-visual-distractor")
    if len(v.images) > 1:
        return _row(v, "none", None, None, None, "several-images")
    placed = v.params.get("placed")
    first = placed[0] if isinstance(placed, list) and placed else None
    if isinstance(first, dict) and _is_int(first.get("distractor_area")):
        return _exact(v, first)
    if sample is None:
        raise ValueError(
            f"variant {v.variant_id!r}: its sample {v.sample_id!r} is not in the samples file "
            "(the change mask needs the original image)"
        )
    if segmenter is not None and kind == "visual":
        return _segmented(v, sample, segmenter, spec["segmenter"])
    return _change(v, sample, spec)


def measure_areas(
    manifest_path: str | Path,
    samples_path: str | Path,
    spec: dict[str, Any] | None,
    out: str | Path,
) -> dict[str, Any]:
    """Measure every variant of ``manifest_path`` (samples from ``samples_path``) and
    write the rows to ``out`` (JSON lines); returns a summary: ``variants``, ``methods``
    (rows per method), ``null_r_area`` (rows without ``r_area``, by reason),
    ``mean_r_area`` (over the rows that have one, or None) and the ``settings`` used."""
    spec = check_area_spec(spec)
    _original.cache_clear()  # files may have changed since an earlier call
    _target.cache_clear()
    segmenter = None
    if spec["segmenter"] != "none":
        segmenter = SEGMENTERS[spec["segmenter"]]()
    variants = read_variants(manifest_path)
    samples = {s.sample_id: s for s in read_samples(samples_path)}
    rows = [measure_variant(v, samples.get(v.sample_id), spec, segmenter) for v in variants]
    write_jsonl(out, rows)
    ratios = [r["r_area"] for r in rows if r["r_area"] is not None]
    return {
        "variants": len(rows),
        "methods": dict(Counter(r["method"] for r in rows)),
        "null_r_area": dict(Counter(r["reason"] for r in rows if r["r_area"] is None)),
        "mean_r_area": sum(ratios) / len(ratios) if ratios else None,
        "settings": spec,
        "out": str(out),
    }

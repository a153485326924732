"""The ``typographic`` perturbation: Idis-perception typographic distractors, the label
of a class other than the target's written ``k`` times beside the target (PIL's
built-in scalable font, a colour of :data:`TEXT_COLORS` with a contrasting outline).
The package docstring says how (:mod:`vlmrobust.perturb.idis`)."""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ...core.records import Sample
from ...core.seeding import rng_for
from ..placement import paste_layers
from ..variants import Excluded, Perturbation, VariantPlan, _key, register
from .common import (
    _as_ints,
    _canvas_pixels,
    _check_low_high,
    _fit,
    _info,
    _mask_image,
    _objects_file,
    _pick,
    _planned,
    object_slug,
    to_canvas,
)
from .perception import _perception_target

#: (fill, outline) colours of typographic distractors, one drawn per word.
TEXT_COLORS: tuple[tuple[str, str], ...] = (
    ("#000000", "#ffffff"),
    ("#ffffff", "#000000"),
    ("#d41c1c", "#ffffff"),
    ("#1c3cd4", "#ffffff"),
    ("#ffd400", "#000000"),
    ("#128c2a", "#ffffff"),
)


@lru_cache(maxsize=256)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _stroke(size: int) -> int:
    return max(1, round(size / 18))


def _text_size(text: str, size: int) -> tuple[int, int]:
    x0, y0, x1, y1 = _font(size).getbbox(text, stroke_width=_stroke(size))
    return max(1, x1 - x0), max(1, y1 - y0)


def render_text(text: str, size: int, fill: str, outline: str) -> Image.Image:
    """``text`` in PIL's built-in font at ``size`` px, ``fill`` with an ``outline``
    (``max(1, size / 18)`` px), on a transparent RGBA layer exactly its ink's size."""
    font, stroke = _font(size), _stroke(size)
    x0, y0, x1, y1 = font.getbbox(text, stroke_width=stroke)
    layer = Image.new("RGBA", (max(1, x1 - x0), max(1, y1 - y0)), (0, 0, 0, 0))
    ImageDraw.Draw(layer).text(
        (-x0, -y0), text, font=font, fill=fill, stroke_width=stroke, stroke_fill=outline
    )
    return layer


def _prepare_typographic(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it; checked here is what the
    schema cannot say: the object lists file, that an integer ``classes`` is at most the
    other classes it has, and ``font_size`` low <= high."""
    out = dict(spec)
    _as_ints(out, "counts", "canvas")
    objects = _objects_file(condition, out["objects_file"])
    others = len(objects.classes) - 1
    classes = out["classes"]
    if classes != "all-other" and not 1 <= classes <= others:
        raise ValueError(
            f"{_key(condition, 'classes')}: expected 'all-other' or an integer from 1 to "
            f"{others}; got {classes!r}"
        )
    if classes != "all-other":
        out["classes"] = int(classes)
    _check_low_high(condition, "font_size", out["font_size"])
    return out


def _typographic_params(
    rng: np.random.Generator,
    cls: str,
    k: int,
    target: str,
    target_box: list[int] | None,
    target_area: int | None,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """The params of ``cls`` written ``k`` times: a font size and a colour drawn per
    word, the boxes fitted beside the target (raises
    :class:`~..placement.PlacementError` when they do not fit)."""
    canvas = spec["canvas"]
    sizes = [float(rng.uniform(*spec["font_size"])) * canvas for _ in range(k)]
    colors = [TEXT_COLORS[int(rng.integers(len(TEXT_COLORS)))] for _ in range(k)]

    def fonts(f: float) -> list[int]:
        return [max(4, round(s * f)) for s in sizes]

    boxes, factor = _fit(
        lambda f: [_text_size(cls, fs) for fs in fonts(f)], canvas, rng, target_box, spec
    )
    return {
        "kind": "typographic",
        "semantics": "typographic",
        "n": k,
        "distractors": [cls] * k,
        "distractor_classes": [cls],
        "target_class": target,
        "text": cls,
        "font_sizes": fonts(factor),
        "colors": [list(c) for c in colors],
        "boxes": boxes,
        "fit_scale": round(factor, 6),
        "target_box": target_box,
        "target_area": target_area,
        "canvas": canvas,
    }


def _plan_typographic(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    objects, target, target_box, target_area, _ = _perception_target(sample, "typographic", spec)
    others = [c for c in objects.classes if c != target]
    if spec["classes"] != "all-other":
        others = _pick(rng_for(seed, condition, sid, "classes"), others, spec["classes"])
    plans: list[VariantPlan | Excluded] = []
    for cls in others:
        for k in spec["counts"]:
            vid = f"{sid}__typo-{object_slug(cls)}-n{k}"
            rng = rng_for(seed, condition, vid)
            make = partial(_typographic_params, rng, cls, k, target, target_box, target_area, spec)
            plans.append(_planned(vid, condition, seed, make))
    return plans


def _apply_typographic(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, Image.Image, dict[str, Any]]:
    canvas = int(params["canvas"])
    base = to_canvas(image, canvas)
    layers = []
    for fs, (fill, outline), box in zip(
        params["font_sizes"], params["colors"], params["boxes"], strict=True
    ):
        layer = render_text(params["text"], fs, fill, outline)
        if layer.size != (box[2] - box[0], box[3] - box[1]):
            raise ValueError(
                f"the text {params['text']!r} at {fs} px renders {layer.size} but was planned "
                f"as {box} (the font changed between plan and apply?)"
            )
        layers.append((layer, box))
    out, mask = paste_layers(base, layers)
    info = _info(params["boxes"], [params["text"]] * len(layers), params, int(mask.sum()),
                 (canvas, canvas))  # fmt: skip
    return out, _mask_image(mask), info


register(
    Perturbation(
        "typographic",
        _prepare_typographic,
        _plan_typographic,
        _apply_typographic,
        pixels=_canvas_pixels,
    )
)

"""What the Idis-math perturbations (``diagram``, ``handwritten``) share: the canvas
around the unscaled diagram (grown for a large one, within ``max_pixels``), the
figures drawn from a pool and placed around it, and pasting them (their ``apply``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ...clients.vlm.media import to_rgb
from ...core.pixels import max_side
from ...core.records import Sample
from ..placement import paste_layers
from ..variants import Excluded, VariantPlan, open_shown
from .common import (
    _LANCZOS,
    _fit,
    _info,
    _layer,
    _mask_image,
    _pick,
    _planned,
    _scaled,
    _shown_size,
)

#: The largest share of the canvas side the diagram may take before the canvas grows.
MAX_TARGET_FRACTION = 0.6


@dataclass(frozen=True)
class _Figure:
    sample_id: str
    path: str
    sha256: str
    size: tuple[int, int]
    problem: str | None = None  # meta.problem_index: the versions of one problem


@dataclass(frozen=True)
class _Layout:
    """Where the diagram goes: the canvas side, the diagram's centred box on it and its
    size there; ``source`` = its own size when it had to be scaled down (else None)."""

    side: int
    box: list[int]
    size: tuple[int, int]
    source: tuple[int, int] | None = None


def _math_canvas(sample: Sample, canvas: int, max_pixels: int) -> _Layout:
    """The canvas side (grown for a large diagram, to ``ceil(longer side / 0.6)``) and
    the diagram's centred box. The side stays within ``max_pixels`` (the dataset's
    bound, :mod:`vlmrobust.core.pixels`): a diagram too large for that canvas is scaled
    down (one factor, its longer side to ``floor(0.6 x side)``), the only case in which
    it is not pasted unscaled."""
    tw, th = _shown_size(sample.images[0], f"sample {sample.sample_id!r}")
    side = max(canvas, math.ceil(max(tw, th) / MAX_TARGET_FRACTION))
    source = None
    if side > max_side(max_pixels):
        side = max_side(max_pixels)
        factor = math.floor(MAX_TARGET_FRACTION * side) / max(tw, th)
        source, (tw, th) = (tw, th), (max(1, round(tw * factor)), max(1, round(th * factor)))
    x0, y0 = (side - tw) // 2, (side - th) // 2
    return _Layout(side, [x0, y0, x0 + tw, y0 + th], (tw, th), source)


def _place_figures(
    rng: np.random.Generator, pool: list[_Figure], k: int, layout: _Layout, spec: dict[str, Any]
) -> dict[str, Any]:
    """The params of ``k`` figures drawn from ``pool`` and placed around the diagram, each
    capped at ``figure_scale`` x side and all shrunk alike until they fit (``scales``:
    each figure's scale); raises :class:`PlacementError` when they do not."""
    side, target_box, (tw, th) = layout.side, layout.box, layout.size
    figures = _pick(rng, pool, k)
    sizes = [f.size for f in figures]
    caps = [min(1.0, spec["figure_scale"] * side / max(s)) for s in sizes]
    boxes, factor = _fit(
        lambda f: [_scaled(s, c * f) for s, c in zip(sizes, caps, strict=True)],
        side,
        rng,
        target_box,
        spec,
    )
    placed = {
        "distractors": [f.sample_id for f in figures],
        "files": [f.path for f in figures],
        "boxes": boxes,
        "scales": [round(c * factor, 6) for c in caps],
        "target_box": target_box,
        "target_area": tw * th,
        "target_size": [tw, th],
        "canvas": side,
    }
    if layout.source is not None:  # only then: a layout within the bound is unchanged
        placed["target_source_size"] = list(layout.source)
    return placed


def _figure_variant(
    vid: str,
    condition: str,
    seed: int,
    head: dict[str, Any],
    rng: np.random.Generator,
    pool: list[_Figure],
    k: int,
    layout: _Layout,
    spec: dict[str, Any],
) -> VariantPlan | Excluded:
    """Variant ``vid``: its first params ``head``, then ``k`` figures of ``pool`` placed
    around the diagram (:func:`_place_figures`); excluded (``no-room``) when they do not
    fit."""
    return _planned(
        vid, condition, seed, lambda: {**head, **_place_figures(rng, pool, k, layout, spec)}
    )


def _apply_math(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, Image.Image, dict[str, Any]]:
    """The ``apply`` of ``diagram`` and ``handwritten``: the diagram at its box of a white
    canvas (unscaled, or resized to the box when the plan scaled it down to keep the canvas
    within ``max_pixels``: ``target_source_size``), the figures pasted at theirs."""
    side = int(params["canvas"])
    base = Image.new("RGB", (side, side), (255, 255, 255))
    target = to_rgb(image)
    tb = params["target_box"]
    planned = tuple(params.get("target_source_size") or (tb[2] - tb[0], tb[3] - tb[1]))
    if target.size != planned:
        raise ValueError(
            f"the image is {target.width}x{target.height} but the layout was planned for "
            f"{planned[0]}x{planned[1]}"
        )
    if "target_source_size" in params:  # scaled down to keep the canvas within max_pixels
        target = target.resize((tb[2] - tb[0], tb[3] - tb[1]), _LANCZOS)
    base.paste(target, (tb[0], tb[1]))
    layers = []
    for path, box in zip(params["files"], params["boxes"], strict=True):
        figure = open_shown(path, "distractor figure")
        if figure.mode not in ("RGBA", "LA"):
            figure = to_rgb(figure)
        layers.append((_layer(figure, box), box))
    out, mask = paste_layers(base, layers)
    info = _info(params["boxes"], params["distractors"], params, int(mask.sum()), (side, side))
    return out, _mask_image(mask), info

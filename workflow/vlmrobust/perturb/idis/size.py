"""The ``size`` perturbation (Idis-manual): ``n`` cut-outs of one semantic category whose
total object area is a given fraction of the canvas (``sizes``); the objects of a
sample are drawn once and shared by its sizes, so only the size changes. The package
docstring says how (:mod:`vlmrobust.perturb.idis`)."""

from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Any

import numpy as np

from ...core.records import Sample
from ...core.seeding import rng_for
from ..placement import place_boxes
from ..variants import Excluded, Perturbation, VariantPlan, _key, register
from .common import _as_ints, _canvas_pixels, _layer, _objects_file, _planned, _scaled
from .perception import (
    _cutout,
    _cutout_stats,
    _draw_files,
    _draw_objects,
    _paste_cutouts,
    _perception_target,
    _segments,
)


@lru_cache(maxsize=4096)
def _size_for_area(path: str, area: float) -> tuple[int, int]:
    """The size at which the cut-out, resized as it is pasted (LANCZOS, whose fringe
    adds pixels of small alpha), has the number of alpha > 0 pixels closest to ``area``
    (a few corrected guesses from its alpha share)."""
    cut = _cutout(path)
    w, h, fill = _cutout_stats(path)
    s = math.sqrt(area / (fill * w * h))
    best: tuple[float, tuple[int, int]] | None = None
    tried: set[tuple[int, int]] = set()
    for _ in range(6):
        size = _scaled((w, h), s)
        if size in tried:
            break
        tried.add(size)
        alpha = np.asarray(_layer(cut, [0, 0, *size]).getchannel("A"))
        got = int((alpha > 0).sum())
        if best is None or abs(got - area) < best[0]:
            best = (abs(got - area), size)
        if got == area:
            break
        s *= math.sqrt(area / got) if got else 2.0
    assert best is not None
    return best[1]


def _prepare_size(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it; checked here is what the
    schema cannot say: the object lists file, that the category has ``n`` objects, and
    the cut-outs of every object in ``segments``."""
    out = dict(spec)
    _as_ints(out, "n", "canvas")
    objects = _objects_file(condition, out["objects_file"])
    most = objects.fewest([out["semantics"]])
    if out["n"] > most:
        raise ValueError(f"{_key(condition, 'n')}: {out['n']} objects, a category has {most}")
    need = "a folder of cut-outs is needed"
    out["_listing"] = _segments(condition, out, objects, [out["semantics"]], need)
    return out


def _size_params(
    head: dict[str, Any],
    tail: dict[str, Any],
    rng: np.random.Generator,
    pixels: np.ndarray | None,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """The params of one size: ``head`` (up to the cut-out files), each cut-out resized
    to its share of the area and placed beside the target (its pixels, else its box;
    raises :class:`~..placement.PlacementError` when they do not fit), then ``tail``."""
    canvas, target_box = spec["canvas"], tail["target_box"]
    each = head["area_fraction"] * canvas * canvas / head["n"]  # object pixels per cut-out
    sizes = [_size_for_area(f, each) for f in head["files"]]
    boxes = place_boxes(
        sizes,
        (canvas, canvas),
        rng,
        forbidden=[target_box] if target_box and pixels is None else [],
        forbidden_mask=pixels,
        margin=round(spec["margin"] * canvas),
    )
    return {**head, "boxes": [list(b) for b in boxes], **tail}


def _plan_size(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    objects, target, target_box, target_area, pixels = _perception_target(sample, "size", spec)
    if spec["avoid"] != "pixels":
        pixels = None
    n, sem = spec["n"], spec["semantics"]
    # the same objects (and files) at every size of the sample: only the size changes
    shared = rng_for(seed, condition, sid, "objects")
    names, category = _draw_objects(shared, sem, target, objects, n)
    files = _draw_files(shared, spec["_listing"], names)
    tail = {"target_box": target_box, "target_area": target_area, "canvas": spec["canvas"]}
    plans: list[VariantPlan | Excluded] = []
    for size_name, frac in spec["sizes"].items():
        vid = f"{sid}__size-{size_name}"
        head = {
            "kind": "size",
            "semantics": None,
            "n": n,
            "size": size_name,
            "area_fraction": frac,
            "distractor_semantics": sem,
            "distractors": names,
            "distractor_classes": [category],
            "target_class": target,
            "files": files,
        }
        make = partial(_size_params, head, tail, rng_for(seed, condition, vid), pixels, spec)
        plans.append(_planned(vid, condition, seed, make))
    return plans


register(Perturbation("size", _prepare_size, _plan_size, _paste_cutouts, pixels=_canvas_pixels))

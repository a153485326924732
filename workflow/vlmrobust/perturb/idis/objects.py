"""The ``objects`` perturbation: Idis-perception visual distractors, ``k`` objects of one
semantic category beside the target, pasted as cut-outs (the composite editor) or
inserted by an image-editing API (``editor: gemini | openai``, cached by content).
The package docstring says how (:mod:`vlmrobust.perturb.idis`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from PIL import Image

from ...clients.image_edit import ImageEditCache, cached_edit, make_api_editor
from ...core.records import Sample
from ...core.seeding import rng_for
from ..variants import Excluded, Perturbation, VariantPlan, _key, register
from .common import (
    ObjectLists,
    _as_ints,
    _canvas_pixels,
    _check_low_high,
    _fit,
    _info,
    _objects_file,
    _planned,
    to_canvas,
)
from .perception import (
    _cutout_stats,
    _draw_files,
    _draw_objects,
    _paste_cutouts,
    _perception_target,
    _segments,
)

_EDITOR_KEYS = ("backend", "model", "base_url", "api_key_env", "options")


def _check_most(condition: str, counts: list[int], most: int) -> None:
    """No count above ``most``, the objects the smallest category used has."""
    if max(counts) > most:
        raise ValueError(
            f"{_key(condition, 'counts')}: {max(counts)} distinct objects are asked for, but a "
            f"category has only {most}"
        )


def _editor_spec(condition: str, v: str | dict[str, Any]) -> dict[str, Any]:
    """The validated ``editor`` as a mapping (a backend name -> ``{backend}``) without
    its null keys; checked here is what the schema does not say: the composite editor
    takes no settings. The openai editor asks for a square result of the released
    images' size unless its options say otherwise."""
    spec = {"backend": v} if isinstance(v, str) else v
    backend = spec["backend"]
    if backend == "composite" and len(spec) > 1:
        raise ValueError(f"{_key(condition, 'editor')}: the composite editor takes no settings")
    out = {"backend": backend, **{k: spec[k] for k in _EDITOR_KEYS[1:] if spec.get(k) is not None}}
    if backend == "openai":
        out["options"] = {"size": "1024x1024", **out.get("options", {})}
    return out


def _prepare_objects(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it (keys, types, ranges, defaults);
    checked here is what the schema cannot say: the object lists file, that each category
    has as many objects as the largest count, ``scale`` low <= high, the editor's settings
    and, for the composite editor, the cut-outs of every object in ``segments``."""
    out = dict(spec)
    _as_ints(out, "counts", "canvas")
    objects = _objects_file(condition, out["objects_file"])
    _check_most(condition, out["counts"], objects.fewest(out["semantics"]))
    # the checked editor settings; `editor` itself becomes the backend name, which the
    # variants record (a variant's params override the spec's keys)
    out["editor_spec"] = _editor_spec(condition, out["editor"])
    out["editor"] = out["editor_spec"]["backend"]
    _check_low_high(condition, "scale", out["scale"])
    if out["editor"] == "composite":
        need = "the composite editor needs a folder of cut-outs"
        out["_listing"] = _segments(condition, out, objects, out["semantics"], need)
    return out


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def objects_prompt(target: str, objects: list[str], canvas: int) -> str:
    """The instruction an image-editing model gets for inserting ``objects`` beside the
    ``target`` (an ImageNet-9 class name)."""
    listing = "; ".join(f"{_article(o)} {o}" for o in objects)
    n = len(objects)
    what = "one object" if n == 1 else f"exactly {n} distinct objects"
    return (
        f"Edit this photo, whose main subject is {_article(target)} {target}. Keep the "
        f"{target} exactly as it is: the same identity, location, size, pose and "
        f"appearance, fully visible and not covered by anything. Insert {what} into the "
        f"scene, each clearly visible and realistic, placed beside the {target}: {listing}. "
        f"Change nothing else. Return a {canvas}x{canvas} image."
    )


def _fit_long_side(size: tuple[int, int], long_side: float) -> tuple[int, int]:
    """``size`` scaled so its longer side is ``long_side`` (each side at least 1 px)."""
    w, h = size
    s = long_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def _objects_params(
    params: dict[str, Any], rng: np.random.Generator, objects: ObjectLists, spec: dict[str, Any]
) -> dict[str, Any]:
    """A variant's ``params`` (its objects drawn) completed: for an editing API, the
    prompt; for the composite editor, a cut-out file per object, its longer side drawn
    from ``scale`` and the boxes fitted beside the target (raises
    :class:`~..placement.PlacementError` when they do not fit)."""
    canvas, names = spec["canvas"], params["distractors"]
    if spec["editor"] != "composite":
        prompt = objects_prompt(objects.labels[params["target_class"]], names, canvas)
        return {**params, "editor_model": spec["editor_spec"].get("model"), "prompt": prompt,
                "files": None, "boxes": None}  # fmt: skip
    files = _draw_files(rng, spec["_listing"], names)
    longs = [float(rng.uniform(*spec["scale"])) * canvas for _ in names]
    natural = [_cutout_stats(f)[:2] for f in files]

    def sizes(f: float) -> list[tuple[int, int]]:
        return [_fit_long_side(s, L * f) for s, L in zip(natural, longs, strict=True)]

    boxes, factor = _fit(sizes, canvas, rng, params["target_box"], spec)
    return {**params, "files": files, "boxes": boxes, "fit_scale": round(factor, 6)}


def _plan_objects(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    objects, target, target_box, target_area, _ = _perception_target(sample, "objects", spec)
    plans: list[VariantPlan | Excluded] = []
    for sem in spec["semantics"]:
        for k in spec["counts"]:
            vid = f"{sid}__{sem}-n{k}"
            rng = rng_for(seed, condition, vid)
            names, category = _draw_objects(rng, sem, target, objects, k)
            params: dict[str, Any] = {
                "kind": "visual",
                "semantics": sem,
                "n": k,
                "distractors": names,
                "distractor_classes": [category],
                "target_class": target,
                "target_box": target_box,
                "target_area": target_area,
                "canvas": spec["canvas"],
                "editor": spec["editor"],
            }
            make = partial(_objects_params, params, rng, objects, spec)
            plans.append(_planned(vid, condition, seed, make))
    return plans


def _apply_objects(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, Image.Image | None, dict[str, Any]]:
    if params["editor"] == "composite":
        return _paste_cutouts(image, params, seed)
    canvas = int(params["canvas"])
    base = to_canvas(image, canvas)
    editor = make_api_editor(params["editor_spec"])
    cache = ImageEditCache(params["cache_dir"])
    out, meta = cached_edit(editor, base, params["prompt"], cache)
    meta.pop("cached", None)  # whether this run called the API: not part of the result
    info = _info(None, params["distractors"], params, None, out.size)
    info["edit"] = meta
    return out, None, info


register(
    Perturbation("objects", _prepare_objects, _plan_objects, _apply_objects, pixels=_canvas_pixels)
)

"""The image perturbations of the Idis study ("images with distractors").

Six perturbations, each a condition's ``perturbation`` value (config keys in
``workflow/schemas/config.schema.yaml``, checked again by ``prepare``):

* ``objects`` — Idis-perception visual distractors. The image (and the target mask,
  ``meta.target_masks[0]``: any channel > 16 is the target) is resized to ``canvas`` x
  ``canvas`` (bicubic), then ``k`` distinct objects of one semantic category are pasted:
  ``aligned`` = objects of the target's class, ``conflicting`` = objects of ONE other
  class (drawn per variant, recorded in ``distractor_classes``), ``irrelevant`` = the
  irrelevant list (``resources/idis/objects.yaml``, the Idis paper's Table 3). Each
  object is an RGBA cut-out (``<segments>/<object-slug>/*.png``, one file drawn per
  object from the sorted listing), cropped to its alpha's bounding box, its longer side
  drawn from ``scale`` x canvas. The boxes avoid each other and the target mask's
  bounding box by ``margin`` x canvas; when they do not fit, all of a variant's boxes
  are scaled down in steps of 0.85 (``params.fit_scale``) until they fit or a longer
  side would drop under ``min_scale`` x canvas, and then the variant is excluded
  (reason ``no-room``). Every pixel outside the pasted alpha is the resized original's,
  so the target is never touched. The mask is the union of the pasted alpha > 0.
  ``editor: gemini | openai`` sends the resized image with a prompt (keep the target's
  identity, location and appearance; insert the named objects) to an image-editing
  API instead: the edit is cached by content (prompt, the input's pixels, model,
  options) under ``cache_dir``, so a rerun makes no call; a generative edit has no
  mask and no boxes (``apply`` returns ``(image, None, info)`` with ``boxes: None``,
  ``distractor_area: None``), and what it changed outside the objects is unknown.
* ``typographic`` — Idis-perception typographic distractors: the label of a NON-target
  class (e.g. "Bird") written ``k`` times (PIL's built-in scalable font; size drawn
  from ``font_size`` x canvas; a colour drawn from :data:`TEXT_COLORS` with a
  contrasting outline), placed like the objects. One variant per (class, k); the
  classes are the eight others (``classes: all-other``) or that many drawn per sample.
  The mask is the exact glyph pixels (alpha > 0 of the rendered text).
* ``diagram`` — Idis-math visual distractors: the target diagram is pasted UNSCALED at
  the centre of a white square canvas (``canvas``, grown to ``ceil(longer side / 0.6)``
  when the diagram is larger than 60 % of it, but never past the dataset's
  ``max_pixels``: a diagram too large for that canvas is scaled down to fit, recorded in
  ``params.target_source_size``; docs/large-images.md), and ``k`` whole figures around it:
  ``aligned`` = diagrams of other samples of the same concept family
  (``meta.concept_family``), ``conflicting`` = diagrams of ONE other family,
  ``irrelevant`` = table images of LogicVista (``irrelevant_samples``: the samples whose
  ``meta.specific_capability`` contains "table"). Pools are built once (``setup``) from
  every sample of the dataset, one entry per distinct image file content, so a figure is
  never the target's own diagram (nor a copy of it under another problem version). A
  figure's longer side is at most ``figure_scale`` x canvas (never enlarged) and is
  scaled down further when the figures do not fit (``params.scales``). A sample without
  a concept family is excluded from aligned and conflicting (``no-concept-family``); a
  pool with fewer than ``k`` figures excludes the variant (``pool-too-small``).
* ``handwritten`` — Idis-math typographic distractors: ``k`` handwritten expression
  images (a folder of images, or MathWriting from the hub, cached to ``cache_dir``)
  placed around the unscaled diagram like ``diagram`` does; ``name`` is the semantics
  label (``handwritten`` or ``mathwriting``).
* ``size`` — Idis-manual: ``n`` cut-outs of one semantic category whose total object
  area (their alpha > 0 pixels) is a given fraction of the canvas: ``sizes`` maps a
  name to that fraction (default small 3 %, medium 8 %, large 15 %). The objects of a
  sample are drawn once and shared by its sizes, so only the size changes; each object
  gets the same share of the area, its size chosen by measuring its alpha > 0 pixels as
  resized (a few corrected guesses; integer sizes leave a small difference:
  ``placed.distractor_area`` is the exact count). Boxes never shrink here; a size that
  does not fit beside the target is excluded (``no-room``).
* ``resize`` — the visual-token ablation: a square bicubic resize to each of
  ``resolutions``; no mask.

Every random choice (objects, classes, pool figures, cut-out files, sizes, colours,
positions) is made in ``plan`` with ``rng_for(seed, condition, variant_id)`` (the size
perturbation's shared objects: ``rng_for(seed, condition, sample_id, "objects")``) and
recorded in the variant's params; ``apply`` only draws what the params say, so it is
deterministic. Variant params follow the study's conventions: ``kind``, ``semantics``,
``n``, ``distractors`` (object names, figure sample ids, expression file stems),
``distractor_classes``; ``placed`` (one per image) = ``{"boxes", "items",
"target_box", "target_area", "distractor_area", "canvas"}``. These perturbations
(except ``resize``) need samples with exactly one image.

What ``prepare`` / ``setup`` build for ``plan`` (the cut-out listing ``_listing``, the
figure pools ``_pools``) sits in the spec under a key that starts with ``_``: the stage
does not copy such keys into the parameters of the image tasks handed to the worker
processes, and ``apply`` needs none of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml
from PIL import Image, ImageDraw, ImageFont

from ..clients.image_edit import ImageEditCache, cached_edit, make_api_editor
from ..clients.vlm.media import to_rgb
from ..core.io import atomic_save_image, read_jsonl, sha256_file, write_jsonl
from ..core.pixels import DEFAULT_MAX_PIXELS, max_side
from ..core.records import Sample, read_samples
from ..core.seeding import derive_seed, rng_for
from .placement import PlacementError, mask_bbox, paste_layers, place_boxes, place_fitting
from .variants import (
    Excluded,
    Perturbation,
    VariantPlan,
    _key,
    open_shown,
    register,
)

__all__ = [
    "DEFAULT_OBJECTS_FILE",
    "MATHWRITING_DATASET",
    "SEMANTICS",
    "TEXT_COLORS",
    "ObjectLists",
    "load_mathwriting",
    "load_objects",
    "object_slug",
    "objects_prompt",
    "render_text",
    "to_canvas",
]

SEMANTICS = ("aligned", "conflicting", "irrelevant")
#: The shipped object lists (the Idis paper, Table 3).
DEFAULT_OBJECTS_FILE = Path(__file__).resolve().parents[3] / "resources" / "idis" / "objects.yaml"
MATHWRITING_DATASET = "deepcopy/MathWriting-human"
#: (fill, outline) colours of typographic distractors, one drawn per word.
TEXT_COLORS: tuple[tuple[str, str], ...] = (
    ("#000000", "#ffffff"),
    ("#ffffff", "#000000"),
    ("#d41c1c", "#ffffff"),
    ("#1c3cd4", "#ffffff"),
    ("#ffd400", "#000000"),
    ("#128c2a", "#ffffff"),
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
#: The largest share of the canvas side the diagram may take before the canvas grows.
MAX_TARGET_FRACTION = 0.6
SHRINK = 0.85
_BICUBIC = Image.Resampling.BICUBIC
_LANCZOS = Image.Resampling.LANCZOS
T = TypeVar("T")


# ---------------------------------------------------------------- object lists


@dataclass(frozen=True)
class ObjectLists:
    """``resources/idis/objects.yaml``: class label -> its objects, the irrelevant
    objects, class label -> ImageNet-9 class name."""

    classes: dict[str, list[str]]
    irrelevant: list[str]
    labels: dict[str, str]

    def objects_of(self, category: str) -> list[str]:
        """The objects of a class label, or of ``"irrelevant"``."""
        return self.irrelevant if category == "irrelevant" else self.classes[category]

    def categories(self, semantics: Iterable[str]) -> list[str]:
        """The categories ``semantics`` draw from: every class label for aligned or
        conflicting, ``"irrelevant"`` for irrelevant."""
        sem = set(semantics)
        cats = list(self.classes) if sem & {"aligned", "conflicting"} else []
        return cats + ["irrelevant"] * ("irrelevant" in sem)

    def fewest(self, semantics: Iterable[str]) -> int:
        """The most distinct objects every category of ``semantics`` can give."""
        return min(len(self.objects_of(c)) for c in self.categories(semantics))


def object_slug(name: str) -> str:
    """The folder name of an object's cut-outs: lower case, other runs -> ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@lru_cache(maxsize=8)
def _load_objects(path: str) -> ObjectLists:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise ValueError(f"cannot read the object lists {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with classes, irrelevant and labels")
    classes, irrelevant, labels = data.get("classes"), data.get("irrelevant"), data.get("labels")

    def names(v: Any) -> bool:
        return (
            isinstance(v, list)
            and bool(v)
            and all(isinstance(x, str) and x.strip() for x in v)
            and len(set(v)) == len(v)
        )

    if not isinstance(classes, dict) or len(classes) < 2:
        raise ValueError(f"{path}: classes must map at least two class labels to objects")
    for label, objs in classes.items():
        if not names(objs):
            raise ValueError(f"{path}: classes.{label} must be a list of distinct names")
    if not names(irrelevant):
        raise ValueError(f"{path}: irrelevant must be a list of distinct names")
    if not isinstance(labels, dict) or set(labels) != set(classes):
        raise ValueError(f"{path}: labels must map every class label to its class name")
    return ObjectLists(
        {str(k): list(v) for k, v in classes.items()},
        list(irrelevant),
        {str(k): str(v) for k, v in labels.items()},
    )


def load_objects(path: str | Path | None = None) -> ObjectLists:
    """The object lists of ``path`` (None: the shipped :data:`DEFAULT_OBJECTS_FILE`)."""
    return _load_objects(str(path or DEFAULT_OBJECTS_FILE))


# ---------------------------------------------------------------- images


def to_canvas(image: Image.Image, canvas: int) -> Image.Image:
    """``image`` in RGB (transparency on white) resized to ``canvas`` x ``canvas``
    (bicubic; a copy when it has that size already)."""
    rgb = to_rgb(image)
    if rgb.size == (canvas, canvas):
        return rgb.copy()
    return rgb.resize((canvas, canvas), _BICUBIC)


def _bound(spec: dict[str, Any]) -> int:
    """The dataset's ``max_pixels`` the stage put in the spec (``_max_pixels``); the
    default for a spec prepared outside :func:`~vlmrobust.perturb.build_variants`."""
    return int(spec.get("_max_pixels", DEFAULT_MAX_PIXELS))


def _canvas_pixels(spec: dict[str, Any]) -> tuple[str, int]:
    """``Perturbation.pixels`` of the canvas perturbations: a ``canvas`` x ``canvas``
    image (for ``diagram`` and ``handwritten`` the smallest; larger ones are planned
    within the bound)."""
    return "canvas", int(spec["canvas"]) ** 2


def _resize_pixels(spec: dict[str, Any]) -> tuple[str, int]:
    """``Perturbation.pixels`` of ``resize``: its largest resolution, squared."""
    return "resolutions", max(int(r) for r in spec["resolutions"]) ** 2


def _shown_size(path: str, what: str) -> tuple[int, int]:
    """The size of an image as shown (EXIF orientation 5-8 swaps width and height)."""
    try:
        with Image.open(path) as im:
            w, h = im.size
            orientation = im.getexif().get(0x0112, 1)
    except Exception as exc:
        raise ValueError(f"{what}: cannot read image {path}: {exc}") from None
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)


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


def _image_files(folder: Path) -> list[str]:
    return sorted(
        str(p) for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    )


def _fit_long_side(size: tuple[int, int], long_side: float) -> tuple[int, int]:
    """``size`` scaled so its longer side is ``long_side`` (each side at least 1 px)."""
    w, h = size
    s = long_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def _scaled(size: tuple[int, int], s: float) -> tuple[int, int]:
    return max(1, round(size[0] * s)), max(1, round(size[1] * s))


def _layer(image: Image.Image, box: list[int]) -> Image.Image:
    """``image`` resized (LANCZOS) to the size of ``box``."""
    size = (box[2] - box[0], box[3] - box[1])
    return image if image.size == size else image.resize(size, _LANCZOS)


def _mask_image(mask: np.ndarray) -> Image.Image:
    return Image.fromarray(np.where(mask, 255, 0).astype(np.uint8))


def _info(
    boxes: list[list[int]] | None,
    items: list[str],
    params: dict[str, Any],
    area: int | None,
    canvas: tuple[int, int],
) -> dict[str, Any]:
    return {
        "boxes": boxes,
        "items": list(items),
        "target_box": params.get("target_box"),
        "target_area": params.get("target_area"),
        "distractor_area": area,
        "canvas": [int(canvas[0]), int(canvas[1])],
    }


# ---------------------------------------------------------------- config checks


def _as_ints(out: dict[str, Any], *keys: str) -> None:
    """Plain ``int`` in place of the schema's integers (which include ``3.0``) at ``keys``
    (a number or a list of numbers)."""
    for key in keys:
        v = out[key]
        out[key] = [int(x) for x in v] if isinstance(v, list) else int(v)


def _check_most(condition: str, counts: list[int], most: int) -> None:
    """No count above ``most``, the objects the smallest category used has."""
    if max(counts) > most:
        raise ValueError(
            f"{_key(condition, 'counts')}: {max(counts)} distinct objects are asked for, but a "
            f"category has only {most}"
        )


def _check_low_high(condition: str, key: str, v: list[float]) -> None:
    """``[low, high]`` with low <= high (the schema checks each bound)."""
    if v[0] > v[1]:
        raise ValueError(
            f"{_key(condition, key)}: expected [low, high], fractions of the canvas side "
            f"with 0 < low <= high < 1; got {v!r}"
        )


def _folder(condition: str, key: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"{_key(condition, key)}: expected a folder path; got {v!r}")
    if not Path(v).is_dir():
        raise ValueError(f"{_key(condition, key)}: {v} is not a folder")
    return v


def _objects_file(condition: str, v: str | None) -> ObjectLists:
    """The object lists of ``objects_file`` (a readable file of the expected shape)."""
    if v == "":
        raise ValueError(f"{_key(condition, 'objects_file')}: expected a file path; got {v!r}")
    try:
        return load_objects(v)
    except ValueError as exc:
        raise ValueError(f"{_key(condition, 'objects_file')}: {exc}") from None


# ---------------------------------------------------------------- cut-outs


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


# ---------------------------------------------------------------- perception: shared


def _one_image(sample: Sample, name: str) -> str:
    if len(sample.images) != 1:
        raise ValueError(
            f"sample {sample.sample_id!r}: perturbation {name!r} needs exactly one image; "
            f"the sample has {len(sample.images)}"
        )
    return sample.images[0]


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


def _pick(rng: np.random.Generator, items: Sequence[T], k: int) -> list[T]:
    """``k`` distinct items in drawn order."""
    return [items[int(i)] for i in rng.choice(len(items), size=k, replace=False)]


def _fit(
    make_sizes: Callable[[float], list[tuple[int, int]]],
    side: int,
    rng: np.random.Generator,
    target_box: list[int] | None,
    spec: dict[str, Any],
) -> tuple[list[list[int]], float]:
    """:func:`place_fitting` on the ``side`` x ``side`` canvas, beside ``target_box``
    (when known), with the condition's ``margin`` and ``min_scale``: the boxes (as
    lists) and the factor the sizes needed."""
    boxes, factor, _ = place_fitting(
        make_sizes,
        (side, side),
        rng,
        forbidden=[target_box] if target_box else [],
        margin=round(spec["margin"] * side),
        min_side=max(1, round(spec["min_scale"] * side)),
        shrink=SHRINK,
    )
    return [list(b) for b in boxes], factor


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


# ---------------------------------------------------------------- objects

_EDITOR_KEYS = ("backend", "model", "base_url", "api_key_env", "options")


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


def _segments(
    condition: str, spec: dict[str, Any], objects: ObjectLists, semantics: Iterable[str], need: str
) -> dict[str, list[str]]:
    """The cut-out listing of the ``segments`` folder, which must be given (else the
    error says ``need``) and exist."""
    folder = spec["segments"]
    if folder is None:
        raise ValueError(f"{_key(condition, 'segments')}: {need} (<segments>/<object-slug>/*.png)")
    return _segment_listing(condition, _folder(condition, "segments", folder), objects, semantics)


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


def _plan_objects(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    objects, target, target_box, target_area, _ = _perception_target(sample, "objects", spec)
    canvas = spec["canvas"]
    composite = spec["editor"] == "composite"
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
                "canvas": canvas,
                "editor": spec["editor"],
            }
            if not composite:
                params["editor_model"] = spec["editor_spec"].get("model")
                params["prompt"] = objects_prompt(objects.labels[target], names, canvas)
                params.update(files=None, boxes=None)
                plans.append(VariantPlan(vid, params, derive_seed(seed, condition, vid)))
                continue
            files = _draw_files(rng, spec["_listing"], names)
            longs = [float(rng.uniform(*spec["scale"])) * canvas for _ in names]
            natural = [_cutout_stats(f)[:2] for f in files]
            try:
                boxes, factor = _fit(
                    lambda f, nat=natural, ls=longs: [
                        _fit_long_side(s, L * f) for s, L in zip(nat, ls, strict=True)
                    ],
                    canvas,
                    rng,
                    target_box,
                    spec,
                )
            except PlacementError as exc:
                plans.append(Excluded(vid, "no-room", str(exc)))
                continue
            params.update(files=files, boxes=boxes, fit_scale=round(factor, 6))
            plans.append(VariantPlan(vid, params, derive_seed(seed, condition, vid)))
    return plans


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


# ---------------------------------------------------------------- typographic


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


def _plan_typographic(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    objects, target, target_box, target_area, _ = _perception_target(sample, "typographic", spec)
    canvas = spec["canvas"]
    others = [c for c in objects.classes if c != target]
    if spec["classes"] != "all-other":
        others = _pick(rng_for(seed, condition, sid, "classes"), others, spec["classes"])
    plans: list[VariantPlan | Excluded] = []
    for cls in others:
        for k in spec["counts"]:
            vid = f"{sid}__typo-{object_slug(cls)}-n{k}"
            rng = rng_for(seed, condition, vid)
            sizes = [float(rng.uniform(*spec["font_size"])) * canvas for _ in range(k)]
            colors = [TEXT_COLORS[int(rng.integers(len(TEXT_COLORS)))] for _ in range(k)]

            def fonts(f: float, sizes: list[float] = sizes) -> list[int]:
                return [max(4, round(s * f)) for s in sizes]

            try:
                boxes, factor = _fit(
                    lambda f, cls=cls, fonts=fonts: [_text_size(cls, fs) for fs in fonts(f)],
                    canvas,
                    rng,
                    target_box,
                    spec,
                )
            except PlacementError as exc:
                plans.append(Excluded(vid, "no-room", str(exc)))
                continue
            params = {
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
            plans.append(VariantPlan(vid, params, derive_seed(seed, condition, vid)))
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


# ---------------------------------------------------------------- math: shared


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


def _problem(sample: Sample) -> str | None:
    p = sample.meta.get("problem_index")
    return None if p is None else str(p)


def _file_sha(path: str, hashes: dict[str, str], what: str) -> str:
    """sha256 of ``path``, hashed once per ``hashes`` (path -> sha256)."""
    if path not in hashes:
        try:
            hashes[path] = sha256_file(path)
        except OSError as exc:
            raise ValueError(f"{what}: cannot read {path}: {exc}") from None
    return hashes[path]


def _figure_pool(samples: Iterable[Sample], what: str, hashes: dict[str, str]) -> list[_Figure]:
    """One figure per distinct image content and per problem (``meta.problem_index``:
    the versions of a MathVerse problem show the same diagram, sometimes redrawn), the
    first sample id in sorted order."""
    shas: set[str] = set()
    problems: set[str] = set()
    pool: list[_Figure] = []
    for s in sorted(samples, key=lambda s: s.sample_id):
        if len(s.images) != 1:
            continue
        path = s.images[0]
        sha = _file_sha(path, hashes, f"{what}: sample {s.sample_id!r}")
        problem = _problem(s)
        if sha in shas or (problem is not None and problem in problems):
            continue
        shas.add(sha)
        if problem is not None:
            problems.add(problem)
        size = _shown_size(path, f"{what}: {s.sample_id!r}")
        pool.append(_Figure(s.sample_id, path, sha, size, problem))
    return pool


def _has_table(meta: dict[str, Any]) -> bool:
    cap = meta.get("specific_capability")
    if isinstance(cap, str):
        return "table" in cap.lower()
    return isinstance(cap, list) and any(str(c).strip().lower() == "table" for c in cap)


# ---------------------------------------------------------------- diagram


def _prepare_diagram(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it; checked here is what the
    schema cannot say: irrelevant figures need an existing ``irrelevant_samples`` file."""
    out = dict(spec)
    _as_ints(out, "counts", "canvas")
    path = out["irrelevant_samples"]
    if "irrelevant" in out["semantics"] and (not isinstance(path, str) or not Path(path).is_file()):
        raise ValueError(
            f"{_key(condition, 'irrelevant_samples')}: irrelevant figures need the "
            f"samples.jsonl of LogicVista (its table images); got {path!r}"
            + (" (no such file)" if isinstance(path, str) else "")
        )
    return out


def _setup_diagram(samples: list[Sample], condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    what = f"conditions.{condition}"
    by_family: dict[str, list[Sample]] = {}
    pool_samples = list(samples)
    if spec.get("figure_samples"):
        # a larger pool of diagrams (e.g. the whole benchmark while a slice is answered)
        try:
            extra = read_samples(spec["figure_samples"])
        except Exception as exc:
            raise ValueError(f"{_key(condition, 'figure_samples')}: {exc}") from None
        known = {s.sample_id for s in samples}
        pool_samples += [s for s in extra if s.sample_id not in known]
    for s in pool_samples:
        family = s.meta.get("concept_family")
        if family is not None:
            by_family.setdefault(str(family), []).append(s)
    hashes: dict[str, str] = {}  # path -> sha256: a sample's image is hashed once
    own = {
        s.sample_id: _file_sha(s.images[0], hashes, f"{what}: sample {s.sample_id!r}")
        for s in samples
        if len(s.images) == 1
    }
    families = {f: _figure_pool(ss, what, hashes) for f, ss in sorted(by_family.items())}
    irrelevant: list[_Figure] = []
    if "irrelevant" in spec["semantics"]:
        path = spec["irrelevant_samples"]
        try:
            pool = [s for s in read_samples(path) if _has_table(s.meta)]
        except Exception as exc:
            raise ValueError(f"{_key(condition, 'irrelevant_samples')}: {exc}") from None
        irrelevant = _figure_pool(pool, _key(condition, "irrelevant_samples"), hashes)
        if not irrelevant:
            raise ValueError(
                f"{_key(condition, 'irrelevant_samples')}: {path} has no sample whose "
                "meta.specific_capability contains 'table'"
            )
    return {**spec, "_pools": {"families": families, "irrelevant": irrelevant, "own": own}}


def _plan_diagram(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    _one_image(sample, "diagram")
    pools = spec["_pools"]
    family = sample.meta.get("concept_family")
    # hashed by setup; here only for a sample that setup was not given
    own_sha = pools["own"].get(sid) or sha256_file(sample.images[0])
    problem = _problem(sample)
    layout = _math_canvas(sample, spec["canvas"], _bound(spec))
    plans: list[VariantPlan | Excluded] = []
    for sem in spec["semantics"]:
        for k in spec["counts"]:
            vid = f"{sid}__{sem}-n{k}"
            if sem in ("aligned", "conflicting") and family is None:
                plans.append(
                    Excluded(vid, "no-concept-family", f"sample {sid!r} has no concept family")
                )
                continue
            rng = rng_for(seed, condition, vid)
            if sem == "aligned":
                category = str(family)
                pool = pools["families"].get(category, [])
            elif sem == "conflicting":
                others = [
                    f for f, p in pools["families"].items() if f != str(family) and len(p) >= k
                ]
                if not others:
                    plans.append(
                        Excluded(vid, "pool-too-small", f"no other concept family has {k} figures")
                    )
                    continue
                category = others[int(rng.integers(len(others)))]
                pool = pools["families"][category]
            else:
                category, pool = "irrelevant", pools["irrelevant"]
            pool = [
                f
                for f in pool
                if f.sha256 != own_sha
                and f.sample_id != sid
                and (problem is None or f.problem != problem)
            ]
            if len(pool) < k:
                plans.append(
                    Excluded(vid, "pool-too-small", f"{category}: {len(pool)} figure(s) for {k}")
                )
                continue
            try:
                placed = _place_figures(rng, pool, k, layout, spec)
            except PlacementError as exc:
                plans.append(Excluded(vid, "no-room", str(exc)))
                continue
            params = {"kind": "visual", "semantics": sem, "n": k,
                      "distractor_classes": [category], **placed}  # fmt: skip
            plans.append(VariantPlan(vid, params, derive_seed(seed, condition, vid)))
    return plans


register(
    Perturbation(
        "diagram",
        _prepare_diagram,
        _plan_diagram,
        _apply_math,
        setup=_setup_diagram,
        pixels=_canvas_pixels,
    )
)


# ---------------------------------------------------------------- handwritten


def load_mathwriting(
    cache_dir: str | Path,
    split: str = "test",
    limit: int = 500,
    *,
    load_dataset: Callable[..., Any] | None = None,
) -> list[str]:
    """The first ``limit`` expression images of MathWriting (human-written,
    :data:`MATHWRITING_DATASET` on the Hugging Face hub, field ``image``) of ``split``,
    as PNG files under ``cache_dir/<split>-<limit>/`` (with ``manifest.jsonl``: file and
    LaTeX). A filled folder is reused without the network; otherwise the rows are
    streamed with ``datasets.load_dataset`` (``load_dataset`` replaces it in tests). A
    failure to reach the hub raises :class:`RuntimeError` saying what to do instead."""
    folder = Path(cache_dir) / f"{split}-{limit}"
    manifest = folder / "manifest.jsonl"
    if manifest.is_file():
        return [str(folder / row["file"]) for row in read_jsonl(manifest)]
    try:
        if load_dataset is None:
            from datasets import load_dataset
        rows = []
        for i, row in enumerate(load_dataset(MATHWRITING_DATASET, split=split, streaming=True)):
            if i >= limit:
                break
            name = f"{split}-{i:06d}.png"
            atomic_save_image(to_rgb(row["image"]), folder / name)
            rows.append({"file": name, "latex": row.get("latex")})
    except Exception as exc:
        raise RuntimeError(
            f"cannot load {MATHWRITING_DATASET} (split {split!r}) from the Hugging Face hub: "
            f"{type(exc).__name__}: {exc}. Without network access, put expression images "
            f"in a folder and use source: folder with path: <folder>"
        ) from exc
    if not rows:
        raise RuntimeError(f"{MATHWRITING_DATASET} split {split!r} has no rows")
    write_jsonl(manifest, rows)
    return [str(folder / r["file"]) for r in rows]


def _prepare_handwritten(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it; checked here is what the
    schema cannot say: ``source: folder`` needs an existing folder ``path``."""
    out = dict(spec)
    _as_ints(out, "counts", "canvas", "limit")
    if out["source"] == "folder":
        out["path"] = _folder(condition, "path", out["path"])
    return out


def _setup_handwritten(
    samples: list[Sample], condition: str, spec: dict[str, Any]
) -> dict[str, Any]:
    if spec["source"] == "folder":
        files = _image_files(Path(spec["path"]))
        if not files:
            raise ValueError(f"{_key(condition, 'path')}: {spec['path']} has no image file")
    else:
        try:
            files = load_mathwriting(spec["cache_dir"], spec["split"], spec["limit"])
        except RuntimeError as exc:
            raise RuntimeError(f"{_key(condition, 'source')}: {exc}") from exc
    pool = [_Figure(Path(f).stem, f, "", _shown_size(f, _key(condition, "path"))) for f in files]
    return {**spec, "_pools": pool}


def _plan_handwritten(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    _one_image(sample, "handwritten")
    pool: list[_Figure] = spec["_pools"]
    layout = _math_canvas(sample, spec["canvas"], _bound(spec))
    name = spec["name"]
    plans: list[VariantPlan | Excluded] = []
    for k in spec["counts"]:
        vid = f"{sid}__{name}-n{k}"
        if len(pool) < k:
            plans.append(Excluded(vid, "pool-too-small", f"{len(pool)} expression(s) for {k}"))
            continue
        rng = rng_for(seed, condition, vid)
        try:
            placed = _place_figures(rng, pool, k, layout, spec)
        except PlacementError as exc:
            plans.append(Excluded(vid, "no-room", str(exc)))
            continue
        params = {"kind": "typographic", "semantics": name, "n": k, **placed}
        plans.append(VariantPlan(vid, params, derive_seed(seed, condition, vid)))
    return plans


register(
    Perturbation(
        "handwritten",
        _prepare_handwritten,
        _plan_handwritten,
        _apply_math,
        setup=_setup_handwritten,
        pixels=_canvas_pixels,
    )
)


# ---------------------------------------------------------------- size


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


def _plan_size(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    objects, target, target_box, target_area, pixels = _perception_target(sample, "size", spec)
    canvas = spec["canvas"]
    if spec["avoid"] != "pixels":
        pixels = None
    n, sem = spec["n"], spec["semantics"]
    # the same objects (and files) at every size of the sample: only the size changes
    shared = rng_for(seed, condition, sid, "objects")
    names, category = _draw_objects(shared, sem, target, objects, n)
    files = _draw_files(shared, spec["_listing"], names)
    plans: list[VariantPlan | Excluded] = []
    for size_name, frac in spec["sizes"].items():
        vid = f"{sid}__size-{size_name}"
        rng = rng_for(seed, condition, vid)
        each = frac * canvas * canvas / n  # object pixels per cut-out
        sizes = [_size_for_area(f, each) for f in files]
        try:
            boxes = place_boxes(
                sizes,
                (canvas, canvas),
                rng,
                forbidden=[target_box] if target_box and pixels is None else [],
                forbidden_mask=pixels,
                margin=round(spec["margin"] * canvas),
            )
        except PlacementError as exc:
            plans.append(Excluded(vid, "no-room", str(exc)))
            continue
        params = {
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
            "boxes": [list(b) for b in boxes],
            "target_box": target_box,
            "target_area": target_area,
            "canvas": canvas,
        }
        plans.append(VariantPlan(vid, params, derive_seed(seed, condition, vid)))
    return plans


register(Perturbation("size", _prepare_size, _plan_size, _paste_cutouts, pixels=_canvas_pixels))


# ---------------------------------------------------------------- resize


def _prepare_resize(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it (the schema says all of it)."""
    out = dict(spec)
    _as_ints(out, "resolutions")
    return out


def _plan_resize(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    return [
        VariantPlan(
            f"{sid}__res{r}",
            {"kind": "resolution", "semantics": None, "n": None, "resolution": r},
            derive_seed(seed, condition, f"{sid}__res{r}"),
        )
        for r in spec["resolutions"]
    ]


def _apply_resize(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, None, dict[str, Any]]:
    r = int(params["resolution"])
    rgb = to_rgb(image)
    out = rgb.copy() if rgb.size == (r, r) else rgb.resize((r, r), _BICUBIC)
    info = {**_info([], [], {}, 0, (r, r)), "source_size": list(image.size)}
    return out, None, info


register(
    Perturbation("resize", _prepare_resize, _plan_resize, _apply_resize, pixels=_resize_pixels)
)

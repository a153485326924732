"""What the Idis image perturbations share: the object lists, the canvas and image
helpers, the checks of a condition's settings, and placing a variant's distractors
beside the target (one variant is planned, or excluded for want of room, by
:func:`_planned`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml
from PIL import Image

from ...clients.vlm.media import to_rgb
from ...core.pixels import DEFAULT_MAX_PIXELS
from ...core.records import Sample
from ...core.seeding import derive_seed
from ..placement import PlacementError, place_fitting
from ..variants import Excluded, VariantPlan, _key

SEMANTICS = ("aligned", "conflicting", "irrelevant")
#: The shipped object lists (the Idis paper, Table 3).
DEFAULT_OBJECTS_FILE = Path(__file__).resolve().parents[4] / "resources" / "idis" / "objects.yaml"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
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


def _shown_size(path: str, what: str) -> tuple[int, int]:
    """The size of an image as shown (EXIF orientation 5-8 swaps width and height)."""
    try:
        with Image.open(path) as im:
            w, h = im.size
            orientation = im.getexif().get(0x0112, 1)
    except Exception as exc:
        raise ValueError(f"{what}: cannot read image {path}: {exc}") from None
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)


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


# ---------------------------------------------------------------- planning


def _one_image(sample: Sample, name: str) -> str:
    if len(sample.images) != 1:
        raise ValueError(
            f"sample {sample.sample_id!r}: perturbation {name!r} needs exactly one image; "
            f"the sample has {len(sample.images)}"
        )
    return sample.images[0]


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


def _planned(
    vid: str, condition: str, seed: int, make_params: Callable[[], dict[str, Any]]
) -> VariantPlan | Excluded:
    """Variant ``vid`` with the params ``make_params()`` gives (drawing and placing its
    distractors), or its exclusion (reason ``no-room``) when they do not fit: the
    :class:`PlacementError` of :func:`_fit` or :func:`~..placement.place_boxes`."""
    try:
        params = make_params()
    except PlacementError as exc:
        return Excluded(vid, "no-room", str(exc))
    return VariantPlan(vid, params, derive_seed(seed, condition, vid))

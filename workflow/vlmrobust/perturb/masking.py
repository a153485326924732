"""The ``mask`` perturbation of Contrastive Region Masking (CRM, VisArgs).

A VisArgs sample is one (image, visual premise) pair. The adapter records

* ``meta["b_box"]``: every annotated box of the image, ``{"startX", "startY", "w",
  "h"}`` in pixels (clipped to the image);
* ``meta["premise_index"]``: the index of the sample's premise in ``b_box``;
* ``meta["image_size"]`` (optional): ``[W, H]`` of the image as shown (EXIF orientation
  applied); without it the image header is read.

The condition (``perturbation: mask``) fills one box of the image:

* ``region: specific``: the premise's own box;
* ``region: random``: a box of the same width and height, placed uniformly at random
  (seeded by ``rng_for(seed, condition, sample_id)``) among the integer positions inside
  the image that are at least ``min_distance`` away from the premise's box
  (:func:`gap_fraction`) and overlap no annotated box. When no position meets both, the
  placement falls back (recorded as ``placement``): ``overlap`` = the positions at least
  ``min_distance`` away with the least total overlap area (the sum over the annotated
  boxes); ``too-close`` = no position is far enough, the positions with the largest gap.

``fill`` is ``black``, ``mean`` (the mean colour of the whole image: the region's own
mean would leak its colour) or ``blur`` (a Gaussian blur of the box's own pixels with
radius ``blur_radius`` × the box's shorter side, at least 1 px). The result is an RGB
image plus a mask (``L``: 255 inside the box), written as ``<variant_id>_0_mask.png``.

Boxes are ``(x0, y0, x1, y1)`` with exclusive ``x1``/``y1``. Coordinates in ``b_box``
that are not integers are rounded per edge (``floor(v + 0.5)`` of ``startX`` and of
``startX + w``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from ..core.records import Sample
from ..core.seeding import derive_seed, rng_for
from .variants import Perturbation, VariantPlan, register

__all__ = [
    "FILLS",
    "REGIONS",
    "box_from_bbox",
    "fill_box",
    "gap_fraction",
    "overlap_area",
    "place_random_box",
]

Box = tuple[int, int, int, int]

REGIONS = ("specific", "random")
FILLS = ("black", "mean", "blur")
_BBOX_KEYS = ("startX", "startY", "w", "h")


# ---------------------------------------------------------------- geometry


def _round_half_up(v: float) -> int:
    return int(math.floor(v + 0.5))


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def box_from_bbox(d: dict[str, Any]) -> Box:
    """``{"startX", "startY", "w", "h"}`` → ``(x0, y0, x1, y1)`` (``x1 = startX + w``)."""
    missing = [k for k in _BBOX_KEYS if k not in d]
    if missing:
        raise ValueError(f"box {d!r} lacks {', '.join(missing)}")
    bad = [k for k in _BBOX_KEYS if not _is_number(d[k])]
    if bad:
        raise ValueError(f"box {d!r}: {bad[0]} is not a number")
    if d["w"] < 0 or d["h"] < 0:
        raise ValueError(f"box {d!r}: negative width or height")
    x0, y0 = _round_half_up(d["startX"]), _round_half_up(d["startY"])
    x1, y1 = _round_half_up(d["startX"] + d["w"]), _round_half_up(d["startY"] + d["h"])
    return (x0, y0, x1, y1)


def gap_fraction(a: Box, b: Box, size: tuple[int, int]) -> float:
    """The separation of two boxes: max(horizontal gap / W, vertical gap / H).

    The horizontal gap is ``max(0, b.x0 - a.x1, a.x0 - b.x1)`` (the vertical one
    likewise), so boxes that overlap or touch are 0 apart.
    """
    w, h = size
    hgap = max(0, b[0] - a[2], a[0] - b[2])
    vgap = max(0, b[1] - a[3], a[1] - b[3])
    return max(hgap / w, vgap / h)


def overlap_area(a: Box, b: Box) -> int:
    """The area (pixels) of the intersection of two boxes."""
    ox = min(a[2], b[2]) - max(a[0], b[0])
    oy = min(a[3], b[3]) - max(a[1], b[1])
    return max(0, ox) * max(0, oy)


def _axis_gap(n: int, length: int, t0: int, t1: int) -> np.ndarray:
    """Gap along one axis between ``[p, p + length)`` and ``[t0, t1)``, ``p = 0..n-1``."""
    pos = np.arange(n, dtype=np.int64)
    return np.maximum(0, np.maximum(pos - t1, t0 - (pos + length)))


def _axis_overlap(n: int, length: int, b0: int, b1: int) -> np.ndarray:
    """Overlap along one axis between ``[p, p + length)`` and ``[b0, b1)``, ``p = 0..n-1``."""
    pos = np.arange(n, dtype=np.int64)
    return np.maximum(0, np.minimum(pos + length, b1) - np.maximum(pos, b0))


def place_random_box(
    target: Box,
    others: list[Box],
    size: tuple[int, int],
    min_distance: float,
    rng: np.random.Generator,
) -> tuple[Box, dict[str, Any]]:
    """A box of ``target``'s size inside the image, placed at random (module docstring).

    ``others`` are all annotated boxes (the target included). Every integer top-left
    position is scored at once: the gap and the overlap with a box are separable per
    axis, so the score grids are outer products of per-axis arrays. Candidates are
    taken in row-major order (y, then x) and one is drawn with ``rng.integers``.
    Returns the box and ``{"placement": "ok" | "overlap" | "too-close", "gap": ...,
    "overlap_px": ...}`` (gap rounded to 4 decimals; overlap_px = the total overlap
    area with the annotated boxes).
    """
    width, height = size
    bw, bh = target[2] - target[0], target[3] - target[1]
    if bw <= 0 or bh <= 0:
        raise ValueError(f"target box {list(target)} is empty")
    if bw > width or bh > height:
        raise ValueError(f"target box {list(target)} does not fit in a {width}x{height} image")
    nx, ny = width - bw + 1, height - bh + 1
    gx = _axis_gap(nx, bw, target[0], target[2]) / width
    gy = _axis_gap(ny, bh, target[1], target[3]) / height
    gap = np.maximum(gy[:, None], gx[None, :])  # (ny, nx)
    far = gap >= min_distance
    total = np.zeros((ny, nx), dtype=np.int64)
    for b in others:
        ox = _axis_overlap(nx, bw, b[0], b[2])
        oy = _axis_overlap(ny, bh, b[1], b[3])
        if ox.any() and oy.any():
            total += oy[:, None] * ox[None, :]
    ok = far & (total == 0)
    if ok.any():
        placement, cands = "ok", np.flatnonzero(ok)
    elif far.any():
        least = total[far].min()
        placement, cands = "overlap", np.flatnonzero(far & (total == least))
    else:
        placement, cands = "too-close", np.flatnonzero(gap == gap.max())
    y, x = divmod(int(cands[int(rng.integers(len(cands)))]), nx)
    box = (x, y, x + bw, y + bh)
    info = {
        "placement": placement,
        "gap": round(gap_fraction(box, target, size), 4),
        "overlap_px": int(total[y, x]),
    }
    return box, info


# ---------------------------------------------------------------- filling


def fill_box(
    image: Image.Image, box: Box | list[int], fill: str, blur_radius: float
) -> tuple[Image.Image, Image.Image]:
    """A new RGB image with ``box`` filled, and its mask (``L``, 255 inside the box).

    ``black``: (0, 0, 0); ``mean``: the mean colour of the whole image (after conversion
    to RGB), rounded half up per channel; ``blur``: the box's pixels Gaussian-blurred
    (computed on the crop, so the pixels outside are unchanged) with radius
    ``blur_radius * min(box width, box height)``, at least 1 px. Other modes are
    converted with PIL's ``convert("RGB")`` (alpha dropped, palette expanded).
    """
    x0, y0, x1, y1 = (int(v) for v in box)
    rgb = image.convert("RGB")
    out = rgb.copy()
    region = (x0, y0, x1, y1)
    if fill == "black":
        out.paste((0, 0, 0), region)
    elif fill == "mean":
        mean = np.asarray(rgb, dtype=np.float64).reshape(-1, 3).mean(axis=0)
        out.paste(tuple(int(v) for v in np.floor(mean + 0.5)), region)
    elif fill == "blur":
        radius = max(1.0, float(blur_radius) * min(x1 - x0, y1 - y0))
        out.paste(rgb.crop(region).filter(ImageFilter.GaussianBlur(radius)), region)
    else:
        raise ValueError(f"unknown fill {fill!r}; one of {', '.join(FILLS)}")
    mask = Image.new("L", rgb.size, 0)
    mask.paste(255, region)
    return out, mask


# ---------------------------------------------------------------- the perturbation


def _prepare_mask(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it (the schema says all of it),
    its numbers as plain ``float``."""
    out = dict(spec)
    out["blur_radius"] = float(out["blur_radius"])
    out["min_distance"] = float(out["min_distance"])
    return out


def _image_size(sample: Sample) -> tuple[int, int]:
    """``meta["image_size"]``, else the size of the image as shown (EXIF orientation)."""
    sid = sample.sample_id
    size = sample.meta.get("image_size")
    if size is not None:
        if (
            not isinstance(size, list | tuple)
            or len(size) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in size)
        ):
            raise ValueError(
                f"sample {sid!r}: meta.image_size must be [W, H], two positive integers; "
                f"got {size!r}"
            )
        return int(size[0]), int(size[1])
    path = sample.images[0]
    try:
        with Image.open(path) as im:
            w, h = im.size
            orientation = im.getexif().get(0x0112, 1)  # as ImageOps.exif_transpose reads it
    except Exception as exc:
        raise ValueError(f"sample {sid!r}: cannot read image {path}: {exc}") from exc
    if orientation in (5, 6, 7, 8):  # transposed or rotated by 90°: W and H swap
        w, h = h, w
    return w, h


def _sample_boxes(sample: Sample, size: tuple[int, int]) -> tuple[list[Box], int]:
    """The annotated boxes and the premise index of ``sample``, checked."""
    sid = sample.sample_id
    raw = sample.meta.get("b_box")
    if not isinstance(raw, list) or not raw:
        raise ValueError(
            f"sample {sid!r}: meta.b_box must be a non-empty list of boxes "
            f"{{startX, startY, w, h}}; got {raw!r}"
        )
    width, height = size
    boxes: list[Box] = []
    for i, d in enumerate(raw):
        if not isinstance(d, dict):
            raise ValueError(f"sample {sid!r}: meta.b_box[{i}] is not a mapping: {d!r}")
        try:
            box = box_from_bbox(d)
        except ValueError as exc:
            raise ValueError(f"sample {sid!r}: meta.b_box[{i}]: {exc}") from None
        if box[0] < 0 or box[1] < 0 or box[2] > width or box[3] > height:
            raise ValueError(
                f"sample {sid!r}: meta.b_box[{i}] {list(box)} is not inside the "
                f"{width}x{height} image"
            )
        boxes.append(box)
    index = sample.meta.get("premise_index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"sample {sid!r}: meta.premise_index must be an integer; got {index!r}")
    if not 0 <= index < len(boxes):
        raise ValueError(
            f"sample {sid!r}: meta.premise_index {index} is out of range for "
            f"{len(boxes)} boxes in meta.b_box"
        )
    target = boxes[index]
    if target[2] <= target[0] or target[3] <= target[1]:
        raise ValueError(
            f"sample {sid!r}: meta.b_box[{index}] (the premise's box) {list(target)} is empty"
        )
    return boxes, index


def _plan_mask(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan]:
    sid = sample.sample_id
    if len(sample.images) != 1:
        raise ValueError(
            f"sample {sid!r}: perturbation 'mask' needs exactly one image; the sample has "
            f"{len(sample.images)}"
        )
    size = _image_size(sample)
    boxes, index = _sample_boxes(sample, size)
    target = boxes[index]
    if spec["region"] == "specific":
        box = target
        info = {
            "placement": "ok",
            "gap": 0.0,
            "overlap_px": sum(overlap_area(box, b) for i, b in enumerate(boxes) if i != index),
        }
    else:
        box, info = place_random_box(
            target, boxes, size, spec["min_distance"], rng_for(seed, condition, sid)
        )
    covered = [
        i
        for i, b in enumerate(boxes)
        if (area := (b[2] - b[0]) * (b[3] - b[1])) > 0 and 2 * overlap_area(box, b) >= area
    ]
    params = {
        "region": spec["region"],
        "premise_index": index,
        "target_box": list(target),
        "box": list(box),
        "image_size": list(size),
        "gap": info["gap"],
        "placement": info["placement"],
        "overlap_px": info["overlap_px"],
        "covered": covered,
    }
    return [VariantPlan(sid, params, derive_seed(seed, condition, sid))]


def _apply_mask(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, Image.Image]:
    expected = tuple(params["image_size"])
    if image.size != expected:
        raise ValueError(
            f"the image is {image.size[0]}x{image.size[1]} but the boxes were planned for "
            f"{expected[0]}x{expected[1]} (meta.image_size or the image file is wrong)"
        )
    return fill_box(image, params["box"], params["fill"], params["blur_radius"])


register(Perturbation("mask", _prepare_mask, _plan_mask, _apply_mask))

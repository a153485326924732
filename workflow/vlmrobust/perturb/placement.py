"""Where pasted distractors go: non-overlapping random boxes, and exact pasting.

Pure functions used by the Idis perturbations (:mod:`vlmrobust.perturb.idis`).

Boxes are ``(x0, y0, x1, y1)`` in pixels with exclusive ``x1``/``y1``. Two boxes
*conflict* under a margin ``m`` when they are less than ``m`` pixels apart along both
axes: ``a.x0 < b.x1 + m and b.x0 < a.x1 + m`` and the same for ``y`` (with ``m = 0``:
they share a pixel; touching boxes do not conflict). :func:`box_gap` is the separation
``max(horizontal gap, vertical gap)``, so a placement under margin ``m`` leaves every
pair of boxes at least ``m`` apart.

:func:`place_boxes` puts boxes of given sizes inside a canvas, none conflicting with
another or with a *forbidden* box (the target), each position drawn uniformly at random
among the positions valid at that moment (larger boxes first). A position is first
drawn from the whole canvas and kept when valid (a few tries); when none of the tries
is valid every valid position is enumerated (the forbidden top-left positions of a box
are one rectangle per obstacle) and one is drawn from those, so a box that fits is
always placed. When a box has no valid position the whole arrangement is drawn again
(``restarts``); when every restart fails, :class:`PlacementError` says which box could
not be placed. A *forbidden mask* (a boolean canvas, e.g. the target's own pixels) is a
finer obstacle than a box: a box may then lie anywhere its rectangle, widened by the
margin, covers no True pixel (checked exactly for every position with an integral
image), so a distractor may sit inside the target's bounding box without covering it. :func:`place_fitting` retries with smaller sizes (a caller-made size
function of a scale factor) and reports the factor it needed.

:func:`paste_layers` pastes images at their boxes: RGBA / LA layers through their alpha
(a pixel changes only where alpha > 0), other layers as opaque rectangles; the mask it
returns is exactly the union of the changed-or-covered pixels (alpha > 0, or the whole
box of an opaque layer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

__all__ = [
    "Box",
    "PlacementError",
    "box_area",
    "box_gap",
    "boxes_conflict",
    "mask_bbox",
    "mask_blocked",
    "paste_layers",
    "place_boxes",
    "place_fitting",
]

Box = tuple[int, int, int, int]


class PlacementError(ValueError):
    """The boxes do not fit; the message says which one and why."""


def box_area(box: Sequence[int]) -> int:
    """Pixels of a box (0 when empty)."""
    return max(0, box[2] - box[0]) * max(0, box[3] - box[1])


def box_gap(a: Sequence[int], b: Sequence[int]) -> int:
    """``max(horizontal gap, vertical gap)`` in pixels; 0 when the boxes overlap or touch."""
    hgap = max(0, b[0] - a[2], a[0] - b[2])
    vgap = max(0, b[1] - a[3], a[1] - b[3])
    return max(hgap, vgap)


def boxes_conflict(a: Sequence[int], b: Sequence[int], margin: int = 0) -> bool:
    """Whether ``a`` and ``b`` are less than ``margin`` apart on both axes (module doc)."""
    m = margin
    return a[0] < b[2] + m and b[0] < a[2] + m and a[1] < b[3] + m and b[1] < a[3] + m


def mask_bbox(mask: np.ndarray) -> Box | None:
    """The bounding box of the true pixels of a 2-D boolean array (None when none)."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


def _check_sizes(sizes: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    out = []
    for i, s in enumerate(sizes):
        if len(s) != 2 or any(isinstance(v, bool) or int(v) != v or v < 1 for v in s):
            raise ValueError(f"size {i} must be two positive integers (w, h), got {s!r}")
        out.append((int(s[0]), int(s[1])))
    return out


def mask_blocked(mask: np.ndarray, w: int, h: int, margin: int = 0) -> np.ndarray:
    """For every top-left position of a ``w`` x ``h`` box on the canvas of ``mask``
    (``(H - h + 1, W - w + 1)``), whether the box widened by ``margin`` on each side
    covers a True pixel of ``mask`` (an integral-image sum, exact)."""
    m = np.asarray(mask, dtype=bool)
    height, width = m.shape
    ny, nx = height - h + 1, width - w + 1
    if ny < 1 or nx < 1:
        return np.ones((max(ny, 0), max(nx, 0)), dtype=bool)
    integral = np.zeros((height + 1, width + 1), dtype=np.int64)
    integral[1:, 1:] = m.cumsum(axis=0).cumsum(axis=1)
    ys, xs = np.arange(ny), np.arange(nx)
    y0, y1 = np.clip(ys - margin, 0, height), np.clip(ys + h + margin, 0, height)
    x0, x1 = np.clip(xs - margin, 0, width), np.clip(xs + w + margin, 0, width)
    total = (
        integral[np.ix_(y1, x1)]
        - integral[np.ix_(y0, x1)]
        - integral[np.ix_(y1, x0)]
        + integral[np.ix_(y0, x0)]
    )
    return total > 0


def _place_one(
    w: int,
    h: int,
    canvas: tuple[int, int],
    obstacles: list[Box],
    margin: int,
    rng: np.random.Generator,
    tries: int,
    blocked: np.ndarray | None = None,
) -> Box | None:
    width, height = canvas
    nx, ny = width - w + 1, height - h + 1
    if nx < 1 or ny < 1:
        return None
    for _ in range(tries):
        x, y = int(rng.integers(nx)), int(rng.integers(ny))
        box = (x, y, x + w, y + h)
        if blocked is not None and blocked[y, x]:
            continue
        if not any(boxes_conflict(box, o, margin) for o in obstacles):
            return box
    # every top-left position: the ones that conflict with obstacle o form the rectangle
    # x in (o.x0 - m - w, o.x1 + m), y in (o.y0 - m - h, o.y1 + m)
    free = np.ones((ny, nx), dtype=bool) if blocked is None else ~blocked
    for o in obstacles:
        x0, x1 = max(0, o[0] - margin - w + 1), min(nx, o[2] + margin)
        y0, y1 = max(0, o[1] - margin - h + 1), min(ny, o[3] + margin)
        if x0 < x1 and y0 < y1:
            free[y0:y1, x0:x1] = False
    cands = np.flatnonzero(free)
    if cands.size == 0:
        return None
    y, x = divmod(int(cands[int(rng.integers(cands.size))]), nx)
    return (x, y, x + w, y + h)


def place_boxes(
    sizes: Sequence[Sequence[int]],
    canvas: tuple[int, int],
    rng: np.random.Generator,
    *,
    forbidden: Sequence[Sequence[int]] = (),
    forbidden_mask: np.ndarray | None = None,
    margin: int = 0,
    tries: int = 32,
    restarts: int = 8,
) -> list[Box]:
    """Boxes of ``sizes`` ``(w, h)`` inside ``canvas`` ``(W, H)``, in the order of
    ``sizes``, none conflicting (under ``margin``) with another, with a ``forbidden``
    box or with a True pixel of ``forbidden_mask`` (a ``(H, W)`` boolean array); see the
    module docstring for how positions are drawn. Raises :class:`PlacementError` when a
    box does not fit after ``restarts`` redraws."""
    sizes = _check_sizes(sizes)
    width, height = int(canvas[0]), int(canvas[1])
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if forbidden_mask is not None and np.shape(forbidden_mask) != (height, width):
        raise ValueError(
            f"forbidden_mask is {np.shape(forbidden_mask)}, the canvas {height}x{width} (H, W)"
        )
    fixed = [tuple(int(v) for v in b) for b in forbidden]
    for i, (w, h) in enumerate(sizes):
        if w > width or h > height:
            raise PlacementError(f"box {i} ({w}x{h}) is larger than the {width}x{height} canvas")
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i][0] * sizes[i][1])
    blocked = (
        {}
        if forbidden_mask is None
        else {s: mask_blocked(forbidden_mask, *s, margin) for s in set(sizes)}
    )
    failed = 0
    for _attempt in range(restarts + 1):
        placed: dict[int, Box] = {}
        obstacles: list[Box] = list(fixed)  # type: ignore[arg-type]
        for i in order:
            box = _place_one(
                *sizes[i],
                (width, height),
                obstacles,
                margin,
                rng,
                tries,
                blocked.get(sizes[i]),
            )
            if box is None:
                failed = i
                break
            placed[i] = box
            obstacles.append(box)
        else:
            return [placed[i] for i in range(len(sizes))]
    w, h = sizes[failed]
    beside = f"{len(fixed)} forbidden box(es)" + (
        ", the forbidden pixels" if forbidden_mask is not None else ""
    )
    raise PlacementError(
        f"no room for box {failed} ({w}x{h}) beside {beside} and the "
        f"other boxes on a {width}x{height} canvas (margin {margin} px, "
        f"{restarts + 1} arrangements tried)"
    )


def place_fitting(
    make_sizes: Callable[[float], Sequence[Sequence[int]]],
    canvas: tuple[int, int],
    rng: np.random.Generator,
    *,
    forbidden: Sequence[Sequence[int]] = (),
    margin: int = 0,
    min_side: int = 1,
    shrink: float = 0.85,
    max_steps: int = 40,
) -> tuple[list[Box], float, list[tuple[int, int]]]:
    """:func:`place_boxes` with ``make_sizes(1.0)``, then ``make_sizes(shrink)``,
    ``make_sizes(shrink**2)``... until the boxes fit. Returns the boxes, the factor
    used and the sizes. Raises :class:`PlacementError` when the next factor would make
    a box's longer side smaller than ``min_side`` (or after ``max_steps``)."""
    if not 0 < shrink < 1:
        raise ValueError(f"shrink must be between 0 and 1, got {shrink}")
    factor = 1.0
    last: PlacementError | None = None
    for _ in range(max_steps):
        sizes = _check_sizes(make_sizes(factor))
        if factor < 1.0 and any(max(s) < min_side for s in sizes):
            break
        try:
            return (
                place_boxes(sizes, canvas, rng, forbidden=forbidden, margin=margin),
                factor,
                sizes,
            )
        except PlacementError as exc:
            last = exc
        factor *= shrink
    raise PlacementError(
        f"{last}; scaling the boxes down (to a factor of {factor / shrink:.3g}, longer "
        f"sides at least {min_side} px) did not make them fit"
    )


def paste_layers(
    base: Image.Image, layers: Sequence[tuple[Image.Image, Sequence[int]]]
) -> tuple[Image.Image, np.ndarray]:
    """A copy of ``base`` (converted to RGB) with each layer pasted at its box, and the
    mask (a boolean ``H x W`` array) of the pasted pixels: alpha > 0 of an RGBA / LA
    layer, the whole box of any other. A layer must have its box's size."""
    out = base.convert("RGB")  # a new image, even when base is RGB already
    mask = np.zeros((out.height, out.width), dtype=bool)
    for i, (layer, box) in enumerate(layers):
        x0, y0, x1, y1 = (int(v) for v in box)
        if layer.size != (x1 - x0, y1 - y0):
            raise ValueError(
                f"layer {i} is {layer.width}x{layer.height} but its box {list(box)} is "
                f"{x1 - x0}x{y1 - y0}"
            )
        if x0 < 0 or y0 < 0 or x1 > out.width or y1 > out.height:
            raise ValueError(f"box {list(box)} of layer {i} is not inside the {out.size} canvas")
        if layer.mode in ("RGBA", "LA", "RGBa", "La"):
            rgba = layer.convert("RGBA")
            alpha = rgba.getchannel("A")
            out.paste(rgba.convert("RGB"), (x0, y0), alpha)
            mask[y0:y1, x0:x1] |= np.asarray(alpha) > 0
        else:
            out.paste(layer.convert("RGB"), (x0, y0))
            mask[y0:y1, x0:x1] = True
    return out, mask

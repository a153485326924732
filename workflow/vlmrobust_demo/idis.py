"""The Idis slice of the embedded demo: synthetic data written in the base datasets' own
formats, so the default offline run reads it with the real adapters, plus the
distractor assets the Idis perturbations draw from.

Output layout (``generate_idis_demo``)::

    out_dir/imagenet9/original/val/<NN_class>/<stem>.JPEG   ImageNet-9 Backgrounds Challenge
    out_dir/imagenet9/only_fg/val/<NN_class>/<stem>.JPEG    the same object on black
    out_dir/mathverse/testmini.json                         MathVerse testmini rows
    out_dir/mathverse/images/image_<sample_index>.png
    out_dir/mathverse/concept_families.csv                  problem_index,concept_family,
                                                            source,status
    out_dir/logicvista/dataset.json                         LogicVista (keyed by v1_<n>)
    out_dir/logicvista/images/v1_<n>.png                    table images
    out_dir/waterbirds/metadata.csv                         Waterbirds (group DRO release)
    out_dir/waterbirds/<NNN.Species>/<Species>_<NNNN>_<id>.jpg
    out_dir/segments/<object-slug>/<k>.png                  RGBA cut-outs (alpha = object)
    out_dir/handwritten/<kkk>.png                           handwritten-looking expressions
    out_dir/mathwriting/<kkk>.png                           the same, a second style
    out_dir/summary.json                                    counts, arguments, version

What each part imitates:

- ImageNet-9: one folder per class (``00_dog`` ... ``08_fish``), 224-pixel JPEGs named
  like ImageNet files (a made-up ``n99…`` synset id per class); ``only_fg`` holds the
  object pasted on black, pixel for pixel where the object is opaque (before JPEG).
  The objects are the pictograms of the ``objects`` demo family.
- MathVerse testmini: each problem (a problem of the ``geometry`` demo family; the
  concept families cycle triangle, quadrilateral, circle, 3d) in the four versions Text
  Dominant, Text Lite, Vision Intensive and Vision Dominant, with the same
  ``problem_index`` and ``sample_index = 5 (problem - 1) + version`` as in the real
  file (the fifth version, Vision Only, is not made); multiple-choice questions list
  their options after a ``Choices:`` line (``A:40°``). ``concept_families.csv`` holds
  each problem's family with status ``confirmed`` and source ``demo``: the generator
  drew the figure, so the label is known.
- LogicVista: table images (a header row and a grid of numbers) with five-option
  questions about them; ``specific_capability`` is ``["table"]`` as in the real file.
- Waterbirds: a perching landbird or a duck/gull-like waterbird on a land (bamboo or
  broadleaf forest) or water (ocean, lake) background; ``y`` 1 = waterbird, ``place``
  1 = water, ``split`` 2 (test). The four groups cycle, so they are balanced.
- Segments: two variants (colour, proportions, mirror) of a pictogram for each of the
  40 Idis objects (:func:`all_idis_objects`: the shipped ``resources/idis/objects.yaml``
  the perturbations read), cropped to the object, in the folder the perturbations look
  for (:func:`vlmrobust.perturb.idis.object_slug`).
- Handwritten expressions: short formulas (``x²+3x-4``, an integral, a fraction, a
  root...) set glyph by glyph from Pillow's built-in font with jitter, rotation, thick
  strokes and a tilt; ``mathwriting`` uses a second style (larger, slanted, black).

Determinism: every random choice of item ``i`` of ``part`` comes from
``rng_for(seed, "demo-idis", part, i)`` (segments: ``(part, slug, k)``); PNG and JPEG
files are written with fixed options and no metadata, so the same arguments give
byte-identical files. Stale images of an earlier, larger run in these folders are
removed.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageDraw

from vlmrobust.core.concept_labels import CONCEPT_FAMILIES, LABEL_COLUMNS, write_labels
from vlmrobust.core.idis import IMAGENET9_FOLDERS, IMAGENET9_LABELS, MATHVERSE_VERSIONS
from vlmrobust.core.io import atomic_save_image, atomic_write_text, write_json
from vlmrobust.core.seeding import rng_for
from vlmrobust.data.idis import CONCEPT_LABELS_FILE
from vlmrobust.perturb.idis import load_objects, object_slug

from .data import (
    _OBJECT_SPECS,
    _PNG_OPTIONS,
    INK,
    LETTERS,
    WHITE,
    _content_box,
    _draw_background,
    _font,
    _Frame,
    _geometry_problem,
    _geometry_version,
    _jitter,
    _object_colours,
    _object_painter,
    _options_with,
    _paint_bird,
    _pick,
    _render_layer,
    _ri,
    _ru,
    _sample,
    _shade,
    _shuffled,
    _text,
)

__all__ = [
    "IDIS_DEMO_OPTIONS",
    "IDIS_DEMO_VERSION",
    "IMAGENET9_WNIDS",
    "WATERBIRD_GROUPS",
    "all_idis_objects",
    "generate_idis_demo",
]

#: Bumped whenever a change alters any generated byte (recorded in summary.json).
IDIS_DEMO_VERSION = "1"

PART = "demo-idis"
_JPEG_OPTIONS = {"quality": 95, "subsampling": 0, "optimize": False, "progressive": False}
BLACK = (0, 0, 0)
RGB = tuple[int, int, int]

#: Made-up ImageNet-like synset ids, one per class (file stems ``<wnid>_<number>``).
IMAGENET9_WNIDS: tuple[str, ...] = tuple(f"n99{i:06d}" for i in range(len(IMAGENET9_FOLDERS)))

#: Waterbirds groups in the order they cycle over the samples: (name, y, place).
WATERBIRD_GROUPS: tuple[tuple[str, int, int], ...] = (
    ("landbird-land", 0, 0),
    ("waterbird-water", 1, 1),
    ("landbird-water", 0, 1),
    ("waterbird-land", 1, 0),
)

LIMITS = {
    "n_per_class": (1, 450),
    "n_problems": (1, 500),
    "n_tables": (1, 200),
    "n_birds": (1, 2000),
    "image_size": (64, 1024),
    "diagram_size": (128, 1024),
    "n_segment_variants": (1, 10),
    "n_expressions": (1, 200),
}

#: The size arguments of :func:`generate_idis_demo` (named as ``demo-idis --<name>`` in errors).
IDIS_DEMO_OPTIONS: tuple[str, ...] = tuple(LIMITS)


def all_idis_objects() -> list[str]:
    """The 40 object names of the shipped object lists (``resources/idis/objects.yaml``,
    the Idis paper's Table 3): the 9 classes' four each (label order), then the
    irrelevant ones."""
    objects = load_objects()
    return [o for label in IMAGENET9_LABELS for o in objects.classes[label]] + objects.irrelevant


# --------------------------------------------------------------------------- helpers

Painter = Callable[[ImageDraw.ImageDraw, _Frame, dict], None]
CLEAR = (0, 0, 0, 0)  # drawing with it cuts a hole in an RGBA layer


def _save_png(image: Image.Image, path: Path) -> None:
    atomic_save_image(image, path, **_PNG_OPTIONS)


def _save_jpeg(image: Image.Image, path: Path) -> None:
    atomic_save_image(image.convert("RGB"), path, **_JPEG_OPTIONS)


def _layer(w: int, h: int, paint: Painter, col: dict, flip: bool = False) -> Image.Image:
    return _render_layer(w, h, lambda d, f: paint(d, f, col), flip=flip)


def _size_for(aspect: float, long_side: float) -> tuple[int, int]:
    """``(w, h)`` of a layer of aspect ``w / h`` whose longer side is ``long_side``."""
    w, h = (long_side, long_side / aspect) if aspect >= 1 else (long_side * aspect, long_side)
    return max(8, round(w)), max(8, round(h))


def _seg_in_rect(
    p: tuple[float, float], q: tuple[float, float], rect: Sequence[float]
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The part of segment pq inside ``rect`` (x0, y0, x1, y1), or None (Liang-Barsky)."""
    x0, y0, x1, y1 = rect
    dx, dy = q[0] - p[0], q[1] - p[1]
    t0, t1 = 0.0, 1.0
    for pk, qk in ((-dx, p[0] - x0), (dx, x1 - p[0]), (-dy, p[1] - y0), (dy, y1 - p[1])):
        if pk == 0:
            if qk < 0:
                return None
            continue
        t = qk / pk
        if pk < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return None
    return (p[0] + t0 * dx, p[1] + t0 * dy), (p[0] + t1 * dx, p[1] + t1 * dy)


def _blob(
    f: _Frame,
    cu: float,
    cv: float,
    ru: float,
    rv: float,
    jit: Sequence[float],
    n: int = 14,
    amount: float = 0.25,
    start: int = 0,
) -> list[tuple[float, float]]:
    """An irregular closed outline around ``(cu, cv)`` (radii in unit coordinates)."""
    pts = []
    for i in range(n):
        a = 2 * math.pi * i / n
        k = 1 + amount * jit[(start + i) % len(jit)]
        pts.append(f.p(cu + ru * k * math.cos(a), cv + rv * k * math.sin(a)))
    return pts


# ------------------------------------------------------------ segment pictograms
# One painter per Idis object, drawn in unit coordinates of its frame; ``col["main"]``
# is the variant's colour, ``col["jit"]`` 48 numbers in [-1, 1] for irregular outlines.


def _p_bone(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, edge = col["main"], _shade(col["main"], 0.75)
    d.rounded_rectangle(f.box(0.12, 0.34, 0.88, 0.66), radius=f.lw(0.1), fill=edge)
    for u in (0.1, 0.9):
        for v in (0.3, 0.7):
            d.ellipse(f.circ(u, v, 0.24), fill=edge)
            d.ellipse(f.circ(u, v, 0.19), fill=c)
    d.rectangle(f.box(0.12, 0.39, 0.88, 0.61), fill=c)
    d.line(f.pts((0.2, 0.45), (0.8, 0.45)), fill=_shade(c, 1.4), width=f.lw(0.04))


def _p_bowl(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.polygon(f.pts((0.03, 0.36), (0.97, 0.36), (0.84, 0.96), (0.16, 0.96)), fill=c)
    d.ellipse(f.box(0.01, 0.2, 0.99, 0.52), fill=_shade(c, 1.3))
    d.ellipse(f.box(0.09, 0.25, 0.91, 0.46), fill=_shade(c, 0.55))
    for u, v in ((0.35, 0.36), (0.45, 0.4), (0.55, 0.35), (0.62, 0.4), (0.5, 0.31)):
        d.ellipse(f.circ(u, v, 0.035), fill=(130, 80, 40))
    d.ellipse(f.circ(0.5, 0.7, 0.09), fill=WHITE)  # a paw badge
    for du in (-0.07, 0.0, 0.07):
        d.ellipse(f.circ(0.5 + du, 0.58, 0.035), fill=WHITE)


def _p_tennis_ball(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    d.ellipse(f.circ(0.5, 0.5, 0.49), fill=col["main"])
    w = f.lw(0.05)
    d.arc(f.box(-0.42, 0.08, 0.36, 0.92), -55, 55, fill=(250, 250, 245), width=w)
    d.arc(f.box(0.64, 0.08, 1.42, 0.92), 125, 235, fill=(250, 250, 245), width=w)


def _p_kennel(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, dark = col["main"], _shade(col["main"], 0.6)
    d.rectangle(f.box(0.1, 0.42, 0.9, 0.98), fill=c)
    for v in (0.56, 0.7, 0.84):
        d.line(f.pts((0.1, v), (0.9, v)), fill=_shade(c, 0.8), width=f.lw(0.01))
    d.polygon(f.pts((0.0, 0.47), (0.5, 0.04), (1.0, 0.47)), fill=dark)
    d.rectangle(f.box(0.34, 0.64, 0.66, 0.98), fill=(40, 28, 22))
    d.ellipse(f.box(0.34, 0.5, 0.66, 0.78), fill=(40, 28, 22))


def _p_birdcage(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, lw = col["main"], f.lw(0.025)
    cx, cy, rx, ry = 0.5, 0.34, 0.4, 0.26
    for i in range(9):
        u = 0.12 + i * (0.76 / 8)
        t = max(0.0, 1 - ((u - cx) / rx) ** 2)
        d.line(f.pts((u, cy - ry * math.sqrt(t)), (u, 0.88)), fill=c, width=lw)
    d.arc(f.box(cx - rx, cy - ry, cx + rx, cy + ry), 180, 360, fill=c, width=f.lw(0.035))
    d.line(f.pts((0.1, 0.62), (0.9, 0.62)), fill=c, width=lw)
    d.line(f.pts((0.3, 0.72), (0.7, 0.72)), fill=(140, 90, 40), width=f.lw(0.03))
    d.rectangle(f.box(0.04, 0.86, 0.96, 0.97), fill=_shade(c, 0.7))
    d.ellipse(f.circ(0.5, 0.05, 0.05), outline=c, width=lw)


def _p_nest(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    for i, u in enumerate((0.36, 0.5, 0.64)):
        d.ellipse(f.box(u - 0.08, 0.12 + 0.03 * (i % 2), u + 0.08, 0.55), fill=(170, 215, 230))
    d.chord(f.box(0.02, -0.1, 0.98, 0.98), 0, 180, fill=c)
    for k in range(14):
        u0 = 0.08 + 0.84 * (k / 13)
        v0 = 0.5 + 0.18 * jit[k]
        d.line(f.pts((u0 - 0.12, v0), (u0 + 0.12, v0 + 0.12 * jit[k + 14])),
               fill=_shade(c, 0.65 if k % 2 else 1.3), width=f.lw(0.03))  # fmt: skip


def _p_feather(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.ellipse(f.box(0.08, 0.02, 0.92, 0.86), fill=c)
    for v, side in ((0.3, 1), (0.55, -1)):  # two notches in the vane
        u = 0.92 if side > 0 else 0.08
        d.polygon(f.pts((u, v), (0.5 + side * 0.2, v + 0.04), (u, v + 0.06)), fill=CLEAR)
    for k in range(1, 9):
        v = 0.08 + k * 0.08
        for side in (-1, 1):
            d.line(f.pts((0.5, v), (0.5 + side * 0.34, v - 0.07)), fill=_shade(c, 0.8), width=1)
    d.line(f.pts((0.5, 0.04), (0.5, 0.99)), fill=_shade(c, 0.55), width=f.lw(0.06))


def _p_bird_feeder(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.line(f.pts((0.5, 0.0), (0.5, 0.14)), fill=(90, 90, 90), width=f.lw(0.03))
    d.rectangle(f.box(0.2, 0.34, 0.8, 0.8), fill=(205, 230, 240))
    d.rectangle(f.box(0.22, 0.58, 0.78, 0.8), fill=(190, 150, 80))
    for u in (0.3, 0.42, 0.55, 0.68):
        d.ellipse(f.circ(u, 0.64, 0.025), fill=(120, 80, 40))
    d.polygon(f.pts((0.02, 0.38), (0.5, 0.1), (0.98, 0.38)), fill=c)
    d.rectangle(f.box(0.06, 0.8, 0.94, 0.9), fill=_shade(c, 0.7))
    for u in (0.1, 0.9):
        d.line(f.pts((u, 0.85), (u + (0.08 if u < 0.5 else -0.08), 0.99)), fill=(110, 70, 35),
               width=f.lw(0.025))  # fmt: skip


def _p_tire(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.ellipse(f.circ(0.5, 0.5, 0.5), fill=c)
    for k in range(24):
        a = 2 * math.pi * k / 24
        p = f.p(0.5 + 0.42 * math.cos(a), 0.5 + 0.42 * math.sin(a))
        q = f.p(0.5 + 0.49 * math.cos(a), 0.5 + 0.49 * math.sin(a))
        d.line([p, q], fill=_shade(c, 1.5), width=f.lw(0.02))
    d.ellipse(f.circ(0.5, 0.5, 0.3), fill=_shade(c, 1.25))
    d.ellipse(f.circ(0.5, 0.5, 0.25), fill=CLEAR)  # a ring: the hole is see-through


def _p_steering_wheel(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.ellipse(f.circ(0.5, 0.5, 0.48), outline=c, width=f.lw(0.09))
    for u, v in ((0.06, 0.5), (0.94, 0.5), (0.5, 0.94)):
        d.line(f.pts((0.5, 0.55), (u, v)), fill=_shade(c, 1.3), width=f.lw(0.07))
    d.ellipse(f.circ(0.5, 0.55, 0.14), fill=_shade(c, 1.3))
    d.ellipse(f.circ(0.5, 0.55, 0.06), fill=col["accent"])


def _p_license_plate(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    d.rounded_rectangle(f.box(0.0, 0.0, 1.0, 1.0), radius=f.lw(0.1), fill=(30, 30, 30))
    d.rounded_rectangle(f.box(0.03, 0.06, 0.97, 0.94), radius=f.lw(0.08), fill=col["main"])
    x0, y0, x1, y1 = f.box(0.03, 0.06, 0.97, 0.94)
    _text(d, ((x0 + x1) / 2, y0 + (y1 - y0) * 0.58), col["plate"], round((y1 - y0) * 0.55))
    for u in (0.12, 0.88):
        d.ellipse(f.circ(u, 0.16, 0.05), fill=(150, 150, 150))


def _p_bumper(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.rounded_rectangle(f.box(0.0, 0.18, 1.0, 0.82), radius=f.lw(0.3), fill=c)
    d.rectangle(f.box(0.04, 0.48, 0.96, 0.62), fill=(35, 35, 35))
    d.line(f.pts((0.06, 0.3), (0.94, 0.3)), fill=_shade(c, 1.5), width=f.lw(0.08))
    for u in (0.1, 0.9):
        d.ellipse(f.circ(u, 0.55, 0.1), fill=(245, 235, 180))
    d.rectangle(f.box(0.4, 0.22, 0.6, 0.46), fill=(225, 225, 225))


def _p_rock(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    d.polygon(_blob(f, 0.5, 0.55, 0.48, 0.42, jit, amount=0.12), fill=c)
    d.polygon(_blob(f, 0.42, 0.42, 0.22, 0.16, jit, amount=0.2, start=20), fill=_shade(c, 1.25))
    d.line(f.pts((0.55, 0.3), (0.62, 0.55), (0.78, 0.66)), fill=_shade(c, 0.6), width=f.lw(0.02))
    d.line(f.pts((0.25, 0.65), (0.42, 0.72)), fill=_shade(c, 0.6), width=f.lw(0.02))


def _p_heat_lamp(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.line(f.pts((0.5, 0.0), (0.5, 0.2)), fill=(40, 40, 40), width=f.lw(0.04))
    d.ellipse(f.box(0.3, 0.42, 0.7, 0.8), fill=(250, 120, 40))
    d.ellipse(f.box(0.38, 0.48, 0.62, 0.7), fill=(255, 220, 120))
    d.chord(f.box(0.04, 0.16, 0.96, 0.9), 180, 360, fill=c)
    d.rectangle(f.box(0.42, 0.12, 0.58, 0.2), fill=_shade(c, 0.6))
    for u in (0.3, 0.5, 0.7):
        d.line(f.pts((u, 0.84), (u + (u - 0.5) * 0.4, 0.99)), fill=(250, 150, 60),
               width=f.lw(0.025))  # fmt: skip


def _p_log_hideout(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, wood = col["main"], (225, 190, 130)
    d.rectangle(f.box(0.12, 0.15, 0.88, 0.95), fill=c)
    d.ellipse(f.box(0.0, 0.15, 0.24, 0.95), fill=c)
    for v in (0.3, 0.5, 0.72):
        d.line(f.pts((0.15, v), (0.85, v + 0.02)), fill=_shade(c, 0.7), width=f.lw(0.03))
    d.ellipse(f.box(0.76, 0.15, 1.0, 0.95), fill=wood)
    for k in (0.07, 0.04):
        d.ellipse(f.box(0.88 - k, 0.55 - 4 * k, 0.88 + k, 0.55 + 4 * k), outline=(170, 120, 70),
                  width=f.lw(0.02))  # fmt: skip
    d.chord(f.box(0.34, 0.45, 0.66, 1.45), 180, 360, fill=(35, 25, 15))


def _p_shed_skin(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"] + (225,)
    pts = [
        f.p(0.08 + 0.84 * t, 0.5 + 0.3 * math.sin(t * 2.6 * math.pi)) for t in np.linspace(0, 1, 40)
    ]
    d.line(pts, fill=c, width=f.lw(0.22), joint="curve")
    d.ellipse(f.circ(0.07, 0.5, 0.12), fill=c)
    for p in pts[2::3]:
        r = f.lw(0.03)
        d.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], outline=_shade(col["main"], 0.75))


def _p_toy_fang(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, edge = col["main"], (120, 110, 100)
    d.rounded_rectangle(f.box(0.0, 0.0, 1.0, 0.2), radius=f.lw(0.08), fill=col["accent"])
    for side in (-1, 1):

        def m(u: float, s: int = side) -> float:
            return 0.5 + s * (0.5 - u)

        pts = f.pts((m(0.06), 0.12), (m(0.42), 0.12), (m(0.37), 0.45), (m(0.29), 0.76),
                    (m(0.2), 0.98), (m(0.16), 0.62), (m(0.1), 0.34))  # fmt: skip
        d.polygon(pts, fill=c, outline=edge, width=f.lw(0.015))


def _p_blood_stain(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    d.polygon(_blob(f, 0.5, 0.45, 0.34, 0.3, jit, n=18, amount=0.3), fill=c)
    for k in range(7):
        a = 2 * math.pi * k / 7 + jit[30]
        r = 0.4 + 0.06 * jit[k + 20]
        d.ellipse(f.circ(0.5 + r * math.cos(a), 0.45 + 0.85 * r * math.sin(a),
                         0.035 + 0.02 * abs(jit[k + 10])), fill=c)  # fmt: skip
    for u in (0.4, 0.58):
        d.rectangle(f.box(u - 0.025, 0.6, u + 0.025, 0.9), fill=c)
        d.ellipse(f.circ(u, 0.9, 0.04), fill=c)


def _p_meat(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    d.polygon(_blob(f, 0.48, 0.52, 0.44, 0.42, jit, amount=0.12), fill=c)
    for v in (0.35, 0.55, 0.7):
        d.arc(f.box(0.15, v - 0.2, 0.8, v + 0.1), 20, 160, fill=(250, 235, 225), width=f.lw(0.03))
    d.ellipse(f.circ(0.88, 0.45, 0.11), fill=(245, 240, 225))
    d.ellipse(f.circ(0.88, 0.45, 0.05), fill=(200, 150, 140))


def _p_carcass(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, lw = col["main"], f.lw(0.05)
    d.line(f.pts((0.18, 0.35), (0.92, 0.4)), fill=c, width=lw)
    for k in range(6):
        u = 0.32 + 0.09 * k
        d.arc(f.box(u - 0.06, 0.3, u + 0.06, 0.85), 270, 450, fill=c, width=f.lw(0.035))
    for u0, u1 in ((0.35, 0.28), (0.45, 0.5), (0.8, 0.74), (0.88, 0.95)):
        d.line(f.pts((u0, 0.4), (u1, 0.97)), fill=c, width=f.lw(0.035))
    d.polygon(f.pts((0.0, 0.4), (0.1, 0.22), (0.22, 0.26), (0.24, 0.4), (0.1, 0.48)), fill=c)
    d.ellipse(f.circ(0.13, 0.32, 0.04), fill=(50, 40, 35))


def _p_trash_bag(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.ellipse(f.box(0.04, 0.26, 0.96, 1.0), fill=c)
    d.polygon(f.pts((0.38, 0.3), (0.62, 0.3), (0.56, 0.13), (0.44, 0.13)), fill=c)
    for u in (0.36, 0.64):
        d.ellipse(f.box(u - 0.09, 0.0, u + 0.09, 0.16), fill=_shade(c, 1.2))
    d.arc(f.box(0.18, 0.4, 0.6, 0.9), 190, 250, fill=_shade(c, 1.8), width=f.lw(0.03))
    for u in (0.38, 0.6):
        d.line(f.pts((u, 0.34), (u + 0.05, 0.6)), fill=_shade(c, 0.6), width=f.lw(0.015))


def _p_insect_net(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    net = (235, 235, 235, 200)
    hx0, hy0, hx1, hy1 = f.circ(0.5, 0.2, 0.46)
    d.polygon([(hx0, (hy0 + hy1) / 2), (hx1, (hy0 + hy1) / 2), f.p(0.62, 0.62)], fill=net)
    d.ellipse([hx0, hy0, hx1, hy1], fill=net)
    for k in range(1, 6):  # mesh
        x = hx0 + (hx1 - hx0) * k / 6
        d.line([(x, hy0 + 3), f.p(0.62, 0.62)], fill=(150, 150, 150), width=1)
    d.ellipse([hx0, hy0, hx1, hy1], outline=(120, 120, 120), width=f.lw(0.04))
    d.line([(hx0 + hx1) / 2, hy1, *f.p(0.5, 1.0)], fill=c, width=f.lw(0.07))


def _p_fruit_peel(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.arc(f.box(0.04, 0.06, 0.96, 0.94), 200, 470, fill=c, width=f.lw(0.14))
    d.arc(f.box(0.3, 0.3, 0.7, 0.7), 30, 300, fill=c, width=f.lw(0.12))
    d.arc(f.box(0.1, 0.12, 0.9, 0.88), 210, 460, fill=_shade(c, 1.6), width=f.lw(0.03))


def _p_flower(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.line(f.pts((0.5, 0.4), (0.52, 1.0)), fill=(50, 130, 50), width=f.lw(0.06))
    d.polygon(f.pts((0.51, 0.8), (0.9, 0.6), (0.72, 0.78)), fill=(70, 160, 60))
    d.polygon(f.pts((0.51, 0.7), (0.12, 0.55), (0.3, 0.7)), fill=(70, 160, 60))
    for k in range(6):
        a = 2 * math.pi * k / 6
        d.ellipse(f.circ(0.5 + 0.24 * math.cos(a), 0.3 + 0.17 * math.sin(a), 0.16), fill=c)
    d.ellipse(f.circ(0.5, 0.3, 0.12), fill=(245, 200, 40))


def _staff(d: ImageDraw.ImageDraw, f: _Frame, u0: float, u1: float, v0: float, dv: float,
           ink: Any, notes: Sequence[tuple[float, int]]) -> None:  # fmt: skip
    for i in range(5):
        d.line(f.pts((u0, v0 + i * dv), (u1, v0 + i * dv)), fill=ink, width=1)
    for u, step in notes:
        v = v0 + 4 * dv - step * dv / 2
        x0, y0, x1, y1 = f.box(u - dv * 0.7, v - dv * 0.5, u + dv * 0.7, v + dv * 0.5)
        h = y1 - y0
        d.ellipse([x0, y0, x0 + 1.4 * h, y1], fill=ink)
        d.line([(x0 + 1.4 * h, (y0 + y1) / 2), (x0 + 1.4 * h, y0 - 3 * h)], fill=ink,
               width=max(1, round(h / 5)))  # fmt: skip


def _p_chalkboard(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    d.rectangle(f.box(0.0, 0.0, 1.0, 1.0), fill=col["main"])
    d.rectangle(f.box(0.05, 0.07, 0.95, 0.93), fill=(38, 72, 52))
    _staff(d, f, 0.1, 0.9, 0.3, 0.07, (235, 235, 230),
           [(0.25, 2), (0.38, 4), (0.5, 3), (0.63, 6), (0.76, 5)])  # fmt: skip
    d.arc(f.box(0.1, 0.22, 0.2, 0.62), 0, 330, fill=(235, 235, 230), width=f.lw(0.015))
    d.rectangle(f.box(0.3, 0.88, 0.45, 0.93), fill=(245, 245, 245))


def _p_music_stand(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.polygon(f.pts((0.04, 0.04), (0.96, 0.04), (0.9, 0.46), (0.1, 0.46)), fill=c)
    d.rectangle(f.box(0.08, 0.44, 0.92, 0.5), fill=_shade(c, 1.5))
    d.line(f.pts((0.5, 0.48), (0.5, 0.86)), fill=c, width=f.lw(0.05))
    for u in (0.12, 0.5, 0.88):
        d.line(f.pts((0.5, 0.83), (u, 1.0)), fill=c, width=f.lw(0.04))


def _p_metronome(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.polygon(f.pts((0.3, 0.02), (0.7, 0.02), (0.96, 0.92), (0.04, 0.92)), fill=c)
    d.polygon(f.pts((0.36, 0.1), (0.64, 0.1), (0.8, 0.72), (0.2, 0.72)), fill=_shade(c, 1.5))
    for k in range(6):
        v = 0.16 + 0.09 * k
        d.line(f.pts((0.47, v), (0.53, v)), fill=(60, 40, 20), width=1)
    d.line(f.pts((0.5, 0.7), (0.66, 0.1)), fill=(60, 60, 60), width=f.lw(0.03))
    d.rectangle(f.box(0.56, 0.3, 0.66, 0.38), fill=(200, 170, 60))
    d.rectangle(f.box(0.0, 0.9, 1.0, 1.0), fill=_shade(c, 0.6))


def _p_sheet_music(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    d.rectangle(f.box(0.0, 0.0, 1.0, 1.0), fill=col["main"])
    d.polygon(f.pts((0.86, 0.0), (1.0, 0.0), (1.0, 0.1)), fill=CLEAR)
    d.polygon(f.pts((0.86, 0.0), (1.0, 0.1), (0.86, 0.1)), fill=(205, 205, 200))
    d.line(f.pts((0.3, 0.08), (0.7, 0.08)), fill=(40, 40, 40), width=f.lw(0.02))
    ink = (30, 30, 30)
    _staff(d, f, 0.08, 0.92, 0.22, 0.04, ink, [(0.25, 3), (0.4, 5), (0.55, 2), (0.75, 6)])
    _staff(d, f, 0.08, 0.92, 0.5, 0.04, ink, [(0.2, 4), (0.38, 1), (0.6, 7), (0.8, 3)])
    _staff(d, f, 0.08, 0.92, 0.76, 0.04, ink, [(0.3, 2), (0.5, 5), (0.7, 4)])


def _p_foliage(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    for k in range(11):
        a = 2 * math.pi * k / 11 + 0.3 * jit[k]
        r = 0.22 + 0.06 * jit[k + 11]
        cu, cv = 0.5 + r * math.cos(a), 0.5 + 0.9 * r * math.sin(a)
        tip = (0.5 + 2.1 * r * math.cos(a), 0.5 + 1.9 * r * math.sin(a))
        shade = _shade(c, 0.8 + 0.35 * (k % 3) / 2)
        side = (-math.sin(a) * 0.11, math.cos(a) * 0.11)
        d.polygon(f.pts((0.5, 0.5), (cu + side[0], cv + side[1]), tip,
                        (cu - side[0], cv - side[1])), fill=shade)  # fmt: skip
        d.line(f.pts((0.5, 0.5), tip), fill=_shade(c, 0.6), width=f.lw(0.012))
    d.ellipse(f.circ(0.5, 0.5, 0.14), fill=_shade(c, 0.9))


def _p_banana(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    angles = np.linspace(math.radians(14), math.radians(166), 28)
    outer = [f.p(0.5 + 0.47 * math.cos(a), 0.02 + 0.9 * math.sin(a)) for a in angles]
    inner = [f.p(0.5 + 0.4 * math.cos(a), 0.1 + 0.42 * math.sin(a)) for a in angles]
    d.polygon(outer + inner[::-1], fill=c)
    d.line(outer[4:-4], fill=_shade(c, 0.8), width=f.lw(0.02))
    for p in (outer[0], outer[-1]):
        d.ellipse([p[0] - 5, p[1] - 5, p[0] + 5, p[1] + 5], fill=(90, 60, 30))


def _p_coconut(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    d.ellipse(f.circ(0.5, 0.52, 0.47), fill=c)
    if col["cut"]:
        d.ellipse(f.circ(0.5, 0.52, 0.38), fill=(250, 248, 240))
        d.ellipse(f.circ(0.5, 0.52, 0.28), fill=(235, 240, 235))
        return
    for k in range(18):
        u, v = 0.5 + 0.34 * jit[k], 0.52 + 0.34 * jit[k + 18]
        d.line(f.pts((u, v), (u + 0.06, v + 0.03)), fill=_shade(c, 0.6), width=f.lw(0.015))
    for u, v in ((0.42, 0.22), (0.58, 0.22), (0.5, 0.32)):
        d.ellipse(f.circ(u, v, 0.045), fill=(50, 32, 18))


def _p_vine(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    pts = [f.p(0.5 + 0.22 * math.sin(t * 3 * math.pi), t) for t in np.linspace(0, 1, 40)]
    d.line(pts, fill=_shade(c, 0.7), width=f.lw(0.08), joint="curve")
    for i, p in enumerate(pts[3:-2:5]):
        side = 1 if i % 2 else -1
        u = (p[0] - f.x0) / f.w
        v = (p[1] - f.y0) / f.h
        d.polygon(f.pts((u, v), (u + side * 0.42, v - 0.06), (u + side * 0.3, v + 0.05)), fill=c)
    d.arc(f.box(0.6, 0.86, 0.9, 0.98), 90, 400, fill=_shade(c, 0.7), width=f.lw(0.03))


def _p_fishing_rod(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.line(f.pts((0.28, 0.74), (0.98, 0.03)), fill=c, width=f.lw(0.07))
    d.line(f.pts((0.02, 0.97), (0.3, 0.72)), fill=(200, 160, 110), width=f.lw(0.13))
    for t in (0.35, 0.55, 0.75):
        u, v = 0.28 + 0.7 * t, 0.74 - 0.71 * t
        d.ellipse(f.circ(u, v + 0.04, 0.025), outline=(120, 120, 120), width=1)
    d.ellipse(f.circ(0.24, 0.84, 0.1), fill=(150, 150, 160))
    d.line(f.pts((0.24, 0.84), (0.34, 0.92)), fill=(60, 60, 60), width=f.lw(0.02))
    d.line(f.pts((0.98, 0.03), (0.95, 0.78)), fill=(90, 90, 90), width=1)
    d.arc(f.box(0.9, 0.74, 0.96, 0.84), 0, 200, fill=(60, 60, 60), width=f.lw(0.012))


def _p_fishing_net(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    rect = f.box(0.04, 0.12, 0.96, 0.96)
    step = (rect[2] - rect[0]) / 10
    span = rect[3] - rect[1]
    for k in range(-10, 21):
        x = rect[0] + k * step
        for q in ((x + span, rect[3]), (x - span, rect[3])):
            seg = _seg_in_rect((x, rect[1]), q, rect)
            if seg:
                d.line(list(seg), fill=c, width=f.lw(0.012))
    d.line(f.pts((0.02, 0.12), (0.98, 0.12)), fill=(230, 230, 220), width=f.lw(0.03))
    d.line(f.pts((0.04, 0.96), (0.96, 0.96)), fill=(90, 90, 90), width=f.lw(0.03))
    for u in (0.12, 0.37, 0.63, 0.88):
        d.ellipse(f.circ(u, 0.12, 0.06), fill=col["accent"])


def _p_life_jacket(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    for side in (-1, 1):

        def m(u: float, s: int = side) -> float:
            return 0.5 + s * (0.5 - u)

        d.polygon(f.pts((m(0.04), 0.25), (m(0.3), 0.02), (m(0.42), 0.1), (m(0.47), 0.98),
                        (m(0.08), 0.95)), fill=c)  # fmt: skip
        d.line(f.pts((m(0.12), 0.3), (m(0.3), 0.12)), fill=(215, 215, 215), width=f.lw(0.05))
    for v in (0.55, 0.78):
        d.line(f.pts((0.06, v), (0.94, v)), fill=(30, 30, 30), width=f.lw(0.04))
        d.rectangle(f.box(0.44, v - 0.04, 0.56, v + 0.04), fill=(60, 60, 60))


def _p_coral(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c, jit = col["main"], col["jit"]
    tips = []

    def branch(u: float, v: float, ang: float, length: float, depth: int, k: int) -> None:
        u2 = u + length * math.cos(ang)
        v2 = v - length * math.sin(ang)
        d.line(f.pts((u, v), (u2, v2)), fill=c, width=f.lw(0.05 - 0.01 * depth))
        if depth == 2:
            tips.append((u2, v2))
            return
        for s, j in ((-1, k), (1, k + 1)):
            branch(u2, v2, ang + s * (0.45 + 0.15 * jit[j % 48]), length * 0.72, depth + 1,
                   2 * k + j)  # fmt: skip

    branch(0.5, 0.84, math.pi / 2, 0.3, 0, 3)
    for u, v in tips:
        d.ellipse(f.circ(u, v, 0.04), fill=_shade(c, 1.3))
    d.ellipse(f.box(0.14, 0.78, 0.86, 1.0), fill=(150, 140, 130))


def _p_umbrella(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.line(f.pts((0.5, 0.45), (0.5, 0.88)), fill=(60, 60, 60), width=f.lw(0.03))
    d.arc(f.box(0.5, 0.8, 0.68, 0.98), 0, 180, fill=(60, 60, 60), width=f.lw(0.035))
    d.pieslice(f.box(0.02, 0.06, 0.98, 0.92), 180, 360, fill=c)
    for k in range(4):  # scalloped rim
        u0 = 0.02 + 0.24 * k
        d.chord(f.box(u0, 0.41, u0 + 0.24, 0.55), 180, 360, fill=CLEAR)
    for k in range(5):
        u = 0.02 + 0.24 * k
        d.line(f.pts((0.5, 0.07), (u, 0.48)), fill=_shade(c, 0.7), width=f.lw(0.012))
    d.ellipse(f.circ(0.5, 0.05, 0.03), fill=(60, 60, 60))


def _p_clock(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    d.ellipse(f.circ(0.5, 0.5, 0.49), fill=col["main"])
    d.ellipse(f.circ(0.5, 0.5, 0.42), fill=(250, 250, 245))
    for k in range(12):
        a = 2 * math.pi * k / 12
        r0 = 0.33 if k % 3 else 0.29
        d.line(f.pts((0.5 + r0 * math.cos(a), 0.5 + r0 * math.sin(a)),
                     (0.5 + 0.38 * math.cos(a), 0.5 + 0.38 * math.sin(a))),
               fill=INK, width=f.lw(0.015 if k % 3 else 0.03))  # fmt: skip
    for length, ang, w in ((0.22, col["hour"], 0.04), (0.33, col["minute"], 0.025)):
        d.line(f.pts((0.5, 0.5), (0.5 + length * math.sin(ang), 0.5 - length * math.cos(ang))),
               fill=INK, width=f.lw(w))  # fmt: skip
    d.ellipse(f.circ(0.5, 0.5, 0.03), fill=(200, 40, 40))


def _p_tv(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    for u in (0.3, 0.7):
        d.line(f.pts((0.5, 0.14), (u, 0.0)), fill=(70, 70, 70), width=f.lw(0.02))
    for u in (0.2, 0.8):
        d.line(f.pts((u, 0.84), (u + (0.06 if u > 0.5 else -0.06), 1.0)), fill=(60, 60, 60),
               width=f.lw(0.04))  # fmt: skip
    d.rounded_rectangle(f.box(0.02, 0.12, 0.98, 0.88), radius=f.lw(0.06), fill=c)
    d.rounded_rectangle(f.box(0.07, 0.18, 0.8, 0.82), radius=f.lw(0.04), fill=(70, 105, 135))
    d.line(f.pts((0.15, 0.3), (0.3, 0.24)), fill=(170, 200, 220), width=f.lw(0.03))
    for v in (0.3, 0.45):
        d.ellipse(f.circ(0.89, v, 0.05), fill=_shade(c, 1.6))


def _p_suitcase(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    c = col["main"]
    d.rounded_rectangle(f.box(0.36, 0.0, 0.64, 0.26), radius=f.lw(0.06), outline=(40, 40, 40),
                        width=f.lw(0.05))  # fmt: skip
    d.rounded_rectangle(f.box(0.02, 0.18, 0.98, 1.0), radius=f.lw(0.08), fill=c)
    for u in (0.28, 0.72):
        d.rectangle(f.box(u - 0.04, 0.18, u + 0.04, 1.0), fill=_shade(c, 0.65))
    d.rectangle(f.box(0.45, 0.24, 0.55, 0.32), fill=(215, 190, 90))
    for u in (0.02, 0.9):
        d.rectangle(f.box(u, 0.9, u + 0.08, 1.0), fill=(40, 40, 40))


_GREEN = ((60, 150, 60), (40, 120, 50), (90, 170, 70))
# name -> (aspect w/h, base colours, painter)
_SEGMENT_SPECS: dict[str, tuple[float, tuple[RGB, ...], Painter]] = {
    "dog bone chew toy": (2.3, ((235, 220, 190), (150, 200, 235), (220, 80, 70)), _p_bone),
    "dog bowl": (1.8, ((200, 40, 40), (40, 90, 200), (170, 170, 180)), _p_bowl),
    "tennis ball": (1.0, ((205, 225, 50), (190, 220, 40)), _p_tennis_ball),
    "kennel": (1.1, ((170, 115, 60), (190, 60, 50), (70, 110, 170)), _p_kennel),
    "birdcage": (0.8, ((210, 170, 60), (185, 185, 195), (240, 240, 240)), _p_birdcage),
    "nest": (1.8, ((140, 100, 55), (175, 135, 80)), _p_nest),
    "feather": (0.38, ((245, 245, 240), (60, 110, 200), (200, 60, 50), (150, 110, 70)), _p_feather),
    "bird feeder": (0.75, ((60, 140, 70), (190, 60, 50), (160, 110, 60)), _p_bird_feeder),
    "tire": (1.0, ((32, 32, 34), (55, 55, 58)), _p_tire),
    "steering wheel": (1.0, ((40, 40, 42), (110, 70, 40), (70, 70, 75)), _p_steering_wheel),
    "license plate": (2.0, ((245, 245, 240), (245, 205, 40)), _p_license_plate),
    "bumper": (4.0, ((180, 180, 190), (40, 40, 45), (200, 40, 40)), _p_bumper),
    "terrarium rock": (1.5, ((140, 135, 130), (190, 150, 110), (110, 100, 95)), _p_rock),
    "heat lamp": (0.85, ((190, 190, 200), (60, 60, 65)), _p_heat_lamp),
    "log hideout": (2.0, ((120, 80, 45), (100, 65, 35)), _p_log_hideout),
    "shed skin": (2.6, ((230, 220, 190), (215, 205, 170)), _p_shed_skin),
    "toy fang": (1.2, ((250, 248, 235), (240, 235, 210)), _p_toy_fang),
    "fake blood stain": (1.2, ((180, 10, 20), (150, 0, 15)), _p_blood_stain),
    "fake chunk of meat": (1.4, ((185, 45, 55), (200, 70, 70)), _p_meat),
    "toy skeletal animal carcass": (2.0, ((240, 235, 215), (225, 220, 200)), _p_carcass),
    "trash bag": (0.85, ((40, 40, 45), (40, 95, 55), (90, 90, 95)), _p_trash_bag),
    "empty net designed for catching insects": (
        0.5,
        ((140, 95, 50), (60, 110, 180)),
        _p_insect_net,
    ),
    "fruit peel": (1.3, ((245, 140, 30), (240, 210, 50)), _p_fruit_peel),
    "flower": (0.7, ((235, 90, 150), (210, 40, 50), (150, 80, 200), (250, 250, 250)), _p_flower),
    "chalkboard with music notes": (1.5, ((150, 100, 55), (120, 80, 45)), _p_chalkboard),
    "music stand": (0.7, ((35, 35, 38), (170, 170, 180)), _p_music_stand),
    "metronome": (0.72, ((140, 85, 45), (40, 40, 45), (170, 40, 40)), _p_metronome),
    "sheet music": (0.75, ((252, 250, 240), (245, 240, 220)), _p_sheet_music),
    "patch of jungle foliage": (1.3, _GREEN, _p_foliage),
    "banana": (1.7, ((245, 215, 40), (235, 200, 30)), _p_banana),
    "coconut": (1.0, ((115, 75, 42), (135, 90, 50)), _p_coconut),
    "vine": (0.45, _GREEN, _p_vine),
    "fishing rod": (2.0, ((40, 40, 45), (30, 80, 160), (150, 40, 40)), _p_fishing_rod),
    "large empty nylon fishing net": (
        1.4,
        ((60, 140, 90), (60, 100, 190), (220, 220, 210)),
        _p_fishing_net,
    ),  # fmt: skip
    "life jacket": (0.85, ((245, 120, 20), (230, 40, 30), (245, 210, 30)), _p_life_jacket),
    "aquarium coral ornament": (1.0, ((235, 95, 130), (240, 120, 70), (170, 80, 200)), _p_coral),
    "umbrella": (1.0, ((200, 40, 50), (40, 80, 180), (40, 140, 90), (240, 190, 30)), _p_umbrella),
    "clock": (1.0, ((60, 60, 65), (180, 140, 60), (180, 40, 40)), _p_clock),
    "TV": (1.35, ((40, 40, 42), (110, 110, 115)), _p_tv),
    "suitcase": (1.35, ((170, 40, 40), (40, 70, 140), (60, 60, 65), (140, 100, 55)), _p_suitcase),
}


def _segment_colours(rng: np.random.Generator, base: tuple[RGB, ...]) -> dict:
    letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
    plate = (
        "".join(_pick(rng, letters) for _ in range(2)) + " " + "".join(
            str(_ri(rng, 0, 9)) for _ in range(3))
    )  # fmt: skip
    return {
        "main": _jitter(rng, _pick(rng, base), 14),
        "accent": _pick(rng, ((220, 60, 40), (240, 240, 240), (245, 150, 30), (60, 90, 200))),
        "jit": [float(v) for v in rng.uniform(-1.0, 1.0, size=48)],
        "plate": plate,
        "hour": float(rng.uniform(0, 2 * math.pi)),
        "minute": float(rng.uniform(0, 2 * math.pi)),
    }


def segment_image(seed: int, name: str, k: int) -> Image.Image:
    """Variant ``k`` of the cut-out of object ``name``: RGBA, cropped to the object."""
    aspect, base, paint = _SEGMENT_SPECS[name]
    rng = rng_for(seed, PART, "segments", object_slug(name), k)
    col = _segment_colours(rng, base)
    col["cut"] = k % 2 == 1  # the coconut: whole, then cut open
    w, h = _size_for(aspect * _ru(rng, 0.9, 1.1), _ru(rng, 150, 200))
    flip = bool(rng.random() < 0.5)
    layer = _layer(w, h, paint, col, flip=flip)
    bbox = layer.getchannel("A").getbbox()
    if bbox is None:  # pragma: no cover - every painter draws
        raise AssertionError(f"segment {name!r} variant {k}: nothing drawn")
    return layer.crop(bbox)


# ------------------------------------------------------------------ ImageNet-9


def imagenet9_images(
    seed: int, cls: int, k: int, size: int
) -> tuple[Image.Image, Image.Image, Image.Image]:
    """``(original, only_fg, alpha)`` of image ``k`` of class ``cls`` before encoding.

    ``only_fg`` is the object layer composited on black, so it equals ``original``
    wherever the object is opaque (alpha 255) and is black where alpha is 0.
    """
    rng = rng_for(seed, PART, "imagenet9", k * len(IMAGENET9_FOLDERS) + cls)
    background, _ = _draw_background(rng, size, size)
    aspect = _OBJECT_SPECS[cls][0] * _ru(rng, 0.92, 1.08)
    margin = max(2, round(size * 0.05))
    w, h = _size_for(aspect, size * _ru(rng, 0.55, 0.8))
    w, h = min(w, size - 2 * margin), min(h, size - 2 * margin)
    x = _ri(rng, margin, size - w - margin)
    y = _ri(rng, margin, size - h - margin)
    flip = bool(rng.random() < 0.5)
    layer = _render_layer(w, h, _object_painter(cls, _object_colours(rng, cls)), flip=flip)
    original = background.copy()
    original.paste(layer, (x, y), layer)
    only_fg = Image.new("RGB", (size, size), BLACK)
    only_fg.paste(layer, (x, y), layer)
    alpha = Image.new("L", (size, size), 0)
    alpha.paste(layer.getchannel("A"), (x, y))
    return original, only_fg, alpha


def imagenet9_stem(cls: int, k: int) -> str:
    """The file stem of image ``k`` of class ``cls`` (``n99000000_10000``)."""
    return f"{IMAGENET9_WNIDS[cls]}_{10000 + k}"


# ------------------------------------------------------------------- MathVerse

_SUBFIELDS = {
    "right triangle hypotenuse": "Length",
    "triangle angle sum": "Angle",
    "rectangle area": "Area",
    "rectangle perimeter": "Length",
    "parallelogram area": "Area",
    "circle area": "Area",
    "circle circumference": "Length",
    "cuboid volume": "Volume",
    "cuboid surface area": "Area",
}
_QUERY = {
    "multi-choice": (
        "Please directly answer the question and provide the correct option letter, "
        "e.g., A, B, C, D.\nQuestion: ",
        "Please first conduct reasoning, and then answer the question and provide the "
        "correct option letter, e.g., A, B, C, D, at the end.\nQuestion: ",
    ),
    "free-form": (
        "Please directly answer the question and provide the final value, e.g., 1, 2.5, "
        "300.\nQuestion: ",
        "Please first conduct reasoning, and then answer the question and provide the "
        "final value, e.g., 1, 2.5, 300, at the end.\nQuestion: ",
    ),
}


def _fmt_answer(value: float, precision: int | None) -> str:
    if precision:
        return f"{value:.{precision}f}"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def mathverse_problem(
    seed: int, p: int, size: int
) -> tuple[str, list[dict[str, Any]], list[Image.Image]]:
    """Problem ``p`` (0-based) in the four versions: ``(family, rows, images)``."""
    family = CONCEPT_FAMILIES[p % len(CONCEPT_FAMILIES)]
    rng = rng_for(seed, PART, "mathverse", p)
    prob = _geometry_problem(rng, family, size)
    multiple_choice = p % 2 == 0
    if multiple_choice:
        options, letter = _options_with(rng, prob.mc_answer, prob.mc_distractors, 4)
        choices = "\n".join(f"{LETTERS[i]}:{opt}" for i, opt in enumerate(options))
        answer, qtype = letter, "multi-choice"
    else:
        answer, qtype = _fmt_answer(prob.answer_value, prob.precision), "free-form"
    rows, images = [], []
    for v, version in enumerate(MATHVERSE_VERSIONS):
        img, _, stem = _geometry_version(prob, version, size)
        x0, y0, x1, y1 = _content_box(img, WHITE)
        m = round(size * 0.05)
        img = img.crop((max(0, x0 - m), max(0, y0 - m), min(size, x1 + m), min(size, y1 + m)))
        if multiple_choice:
            question = f"{stem}\nChoices:\n{choices}"
        elif prob.precision:
            question = f"{stem} Round your answer to {prob.precision} decimal places."
        else:
            question = stem
        sample_index = str(5 * p + v + 1)
        wo, cot = _QUERY[qtype]
        rows.append(
            {
                "sample_index": sample_index,
                "problem_index": str(p + 1),
                "problem_version": version,
                "question": question,
                "image": f"images/image_{sample_index}.png",
                "answer": answer,
                "question_type": qtype,
                "metadata": {
                    "split": "testmini",
                    "source": "vlmrobust-demo",
                    "subject": "Solid Geometry" if family == "3d" else "Plane Geometry",
                    "subfield": _SUBFIELDS[prob.subject],
                },
                "query_wo": wo + question,
                "query_cot": cot + question,
                "question_for_eval": question,
            }
        )
        images.append(img)
    return family, rows, images


# ------------------------------------------------------------------ LogicVista

_TABLE_TOPICS = (
    ("Region", "region", "regions", ("North", "South", "East", "West", "Central"),
     "Units sold", ("2021", "2022", "2023")),
    ("Store", "store", "stores", ("Oakville", "Riverton", "Hillcrest", "Lakeside", "Maple Park"),
     "Visitors per day", ("Mon", "Tue", "Wed", "Thu")),
    ("Product", "product", "products", ("Pens", "Notebooks", "Lamps", "Mugs", "Bags"),
     "Sales by quarter", ("Q1", "Q2", "Q3", "Q4")),
    ("Plan", "plan", "plans", ("Ferret", "Hare", "Owl", "Fox", "Wader"),
     "Monthly data (GB)", ("Basic", "Plus", "Max")),
)  # fmt: skip
_TABLE_KINDS = ("highest", "total", "difference", "lowest")


def _select_from(options: Sequence[str]) -> str:
    letters = [LETTERS[i] for i in range(len(options))]
    head = f"Select from {', '.join(letters[:-1])}, and {letters[-1]}."
    return head + " " + " ".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))


def _number_options(rng: np.random.Generator, value: int, k: int = 5) -> tuple[list[str], int]:
    step = max(1, abs(value) // 10)
    wrong = sorted({value + d * step for d in (-3, -2, -1, 1, 2, 3) if value + d * step > 0})
    opts = _sample(rng, wrong, k - 1) + [value]
    opts.sort()
    return [str(o) for o in opts], opts.index(value)


def logicvista_table(seed: int, t: int) -> tuple[dict[str, Any], Image.Image]:
    """Table question ``t`` (0-based): its ``dataset.json`` entry and the table image."""
    rng = rng_for(seed, PART, "logicvista", t)
    head, word, words, names, title, cols = _TABLE_TOPICS[t % len(_TABLE_TOPICS)]
    rows = list(names)
    lo, hi = (10, 99) if rng.random() < 0.5 else (100, 999)
    values = [_sample(rng, list(range(lo, hi + 1)), len(rows)) for _ in cols]  # per column
    c = _ri(rng, 0, len(cols) - 1)
    col = values[c]
    kind = _TABLE_KINDS[t % len(_TABLE_KINDS)]
    listing = ", ".join(f"{r} = {v}" for r, v in zip(rows, col, strict=True))
    if kind in ("highest", "lowest"):
        pick = max if kind == "highest" else min
        best = rows[col.index(pick(col))]
        options = _shuffled(rng, rows)
        pos = options.index(best)
        question = f"Which {word} has the {kind} value in the {cols[c]} column? "
        steps = f"Step 1- Read the {cols[c]} column: {listing}. Step 2- The {kind} is {best}."
    elif kind == "total":
        total = sum(col)
        options, pos = _number_options(rng, total)
        question = f"What is the total of the {cols[c]} column over all {words}? "
        steps = f"Step 1- Read the {cols[c]} column: {listing}. Step 2- Add them: {total}."
    else:
        i, j = _sample(rng, list(range(len(rows))), 2)
        if col[i] < col[j]:
            i, j = j, i
        diff = col[i] - col[j]
        options, pos = _number_options(rng, diff)
        question = f"How much higher is the {cols[c]} value of {rows[i]} than that of {rows[j]}? "
        steps = (
            f"Step 1- {rows[i]} = {col[i]} and {rows[j]} = {col[j]}. "
            f"Step 2- {col[i]} - {col[j]} = {diff}."
        )
    letter = LETTERS[pos]
    entry = {
        "imagename": f"v1_{t}.png",
        "question": question + _select_from(options),
        "answer": letter,
        "reasoning": f"{steps} Thus the correct answer is ({letter}) {options[pos]}.",
        "skill": ["deductive"],
        "broad_capability": ["ocr"],
        "specific_capability": ["table"],
        "imagesource": "vlmrobust-demo",
        "sourcelink": "",
        "liscenced": "true",
    }
    return entry, _table_image(rng, title, head, rows, cols, values)


def _table_image(
    rng: np.random.Generator,
    title: str,
    head: str,
    rows: Sequence[str],
    cols: Sequence[str],
    values: Sequence[Sequence[int]],
) -> Image.Image:
    fs = _ri(rng, 16, 19)
    first_w, cell_w, row_h, pad = 8 * fs, 5 * fs, round(fs * 2.0), fs
    title_h = round(fs * 2.2)
    w = 2 * pad + first_w + cell_w * len(cols)
    h = 2 * pad + title_h + row_h * (len(rows) + 1)
    img = Image.new("RGB", (w, h), WHITE)
    d = ImageDraw.Draw(img)
    _text(d, (w / 2, pad + title_h / 2), title, round(fs * 1.15))
    x0, y0 = pad, pad + title_h
    header = _pick(rng, ((214, 226, 240), (226, 236, 214), (240, 226, 210)))
    d.rectangle([x0, y0, w - pad, y0 + row_h], fill=header)
    xs = [x0, x0 + first_w] + [x0 + first_w + cell_w * (k + 1) for k in range(len(cols))]
    for r in range(len(rows) + 2):
        y = y0 + r * row_h
        d.line([(x0, y), (w - pad, y)], fill=(70, 70, 70), width=2 if r in (0, 1) else 1)
    for x in xs:
        d.line([(x, y0), (x, y0 + row_h * (len(rows) + 1))], fill=(70, 70, 70), width=1)
    d.rectangle([x0, y0, w - pad, y0 + row_h * (len(rows) + 1)], outline=(40, 40, 40), width=2)
    for k, label in enumerate([head, *cols]):
        _text(d, ((xs[k] + xs[k + 1]) / 2, y0 + row_h / 2), label, fs)
    for r, name in enumerate(rows):
        yc = y0 + row_h * (r + 1.5)
        _text(d, ((xs[0] + xs[1]) / 2, yc), name, fs)
        for k in range(len(cols)):
            _text(d, ((xs[k + 1] + xs[k + 2]) / 2, yc), str(values[k][r]), fs)
    return img


# ------------------------------------------------------------------ Waterbirds

_LANDBIRDS = (
    ("026.Bronzed_Cowbird", "Bronzed_Cowbird", ((70, 50, 40), (60, 45, 55))),
    ("029.American_Crow", "American_Crow", ((40, 40, 45), (30, 30, 35))),
    ("094.White_breasted_Nuthatch", "White_Breasted_Nuthatch", ((110, 130, 160), (90, 110, 140))),
    ("118.House_Sparrow", "House_Sparrow", ((150, 110, 70), (130, 95, 60))),
)
_WATERBIRDS = (
    ("001.Black_footed_Albatross", "Black_Footed_Albatross", "gull", ((110, 100, 95),)),
    ("059.California_Gull", "California_Gull", "gull", ((245, 245, 245),)),
    ("086.Pacific_Loon", "Pacific_Loon", "duck", ((60, 65, 70), (80, 80, 85))),
    ("050.Eared_Grebe", "Eared_Grebe", "duck", ((70, 55, 45), (90, 70, 50))),
)
# place kind -> (place number, place_filename folder)
_PLACES = {
    "bamboo forest": (0, "/b/bamboo_forest"),
    "broadleaf forest": (0, "/f/forest/broadleaf"),
    "ocean": (1, "/o/ocean"),
    "lake": (1, "/l/lake/natural"),
}


def _paint_duck(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    main, dark = col["main"], _shade(col["main"], 0.65)
    d.polygon(f.pts((0.14, 0.6), (0.0, 0.42), (0.2, 0.52)), fill=dark)
    d.ellipse(f.box(0.08, 0.42, 0.86, 0.92), fill=main)
    d.chord(f.box(0.25, 0.45, 0.72, 0.75), 180, 360, fill=dark)
    d.polygon(f.pts((0.62, 0.55), (0.7, 0.28), (0.84, 0.28), (0.8, 0.6)), fill=main)
    d.ellipse(f.circ(0.78, 0.24, 0.17), fill=col["head"])
    d.polygon(f.pts((0.88, 0.2), (1.0, 0.27), (0.99, 0.31), (0.88, 0.3)), fill=(235, 150, 30))
    d.ellipse(f.circ(0.8, 0.2, 0.03), fill=(230, 40, 30))
    d.ellipse(f.circ(0.8, 0.2, 0.015), fill=INK)


def _paint_gull(d: ImageDraw.ImageDraw, f: _Frame, col: dict) -> None:
    main = col["main"]
    for u in (0.44, 0.54):
        d.line(f.pts((u, 0.7), (u - 0.02, 0.97)), fill=(240, 170, 60), width=f.lw(0.025))
    d.ellipse(f.box(0.14, 0.34, 0.82, 0.76), fill=main)
    d.polygon(f.pts((0.2, 0.48), (0.7, 0.42), (0.62, 0.6), (0.0, 0.6)), fill=(140, 145, 155))
    d.polygon(f.pts((0.0, 0.6), (0.1, 0.54), (0.08, 0.66)), fill=(30, 30, 30))
    d.ellipse(f.circ(0.8, 0.3, 0.15), fill=col["head"])
    d.polygon(f.pts((0.9, 0.28), (1.0, 0.33), (0.9, 0.36)), fill=(240, 200, 40))
    d.ellipse(f.circ(0.96, 0.34, 0.012), fill=(220, 40, 30))
    d.ellipse(f.circ(0.83, 0.27, 0.025), fill=INK)


def _draw_place(rng: np.random.Generator, kind: str, size: int) -> Image.Image:
    img = Image.new("RGB", (size, size), WHITE)
    d = ImageDraw.Draw(img)
    s = size
    if kind == "bamboo forest":
        d.rectangle([0, 0, s, s], fill=_jitter(rng, (200, 225, 170), 10))
        for _ in range(14):
            x, w = _ru(rng, 0, s), _ru(rng, 0.03, 0.06) * s
            shade = _jitter(rng, (90, 150, 60), 25)
            d.rectangle([x, 0, x + w, s], fill=shade)
            for y in np.arange(_ru(rng, 0, 0.2) * s, s, 0.22 * s):
                d.line([(x, y), (x + w, y)], fill=_shade(shade, 0.7), width=2)
        d.rectangle([0, 0.85 * s, s, s], fill=_jitter(rng, (110, 90, 60), 10))
    elif kind == "broadleaf forest":
        d.rectangle([0, 0, s, s], fill=_jitter(rng, (185, 215, 240), 10))
        d.rectangle([0, 0.7 * s, s, s], fill=_jitter(rng, (95, 150, 70), 12))
        for _ in range(7):
            x = _ru(rng, 0, s)
            d.rectangle([x - 0.025 * s, 0.35 * s, x + 0.025 * s, 0.78 * s], fill=(100, 70, 40))
            r = _ru(rng, 0.12, 0.2) * s
            d.ellipse(
                [x - r, 0.3 * s - r, x + r, 0.3 * s + r], fill=_jitter(rng, (50, 120, 50), 20)
            )
    elif kind == "ocean":
        horizon = _ru(rng, 0.35, 0.5) * s
        d.rectangle([0, 0, s, horizon], fill=_jitter(rng, (175, 210, 245), 10))
        sea = _jitter(rng, (30, 90, 160), 12)
        d.rectangle([0, horizon, s, s], fill=sea)
        for _ in range(30):
            x, y = _ru(rng, 0, s), _ru(rng, horizon + 4, s)
            w = _ru(rng, 0.03, 0.08) * s
            d.arc([x, y, x + w, y + w / 3], 200, 340, fill=_shade(sea, 1.5), width=2)
    else:  # lake
        shore = _ru(rng, 0.3, 0.42) * s
        d.rectangle([0, 0, s, shore], fill=_jitter(rng, (190, 215, 240), 10))
        for _ in range(9):
            x, r = _ru(rng, 0, s), _ru(rng, 0.05, 0.09) * s
            d.ellipse([x - r, shore - 1.4 * r, x + r, shore + 0.4 * r],
                      fill=_jitter(rng, (60, 110, 60), 15))  # fmt: skip
        lake = _jitter(rng, (70, 130, 170), 12)
        d.rectangle([0, shore, s, s], fill=lake)
        for _ in range(20):
            x, y = _ru(rng, 0, s), _ru(rng, shore + 6, s)
            d.line([(x, y), (x + _ru(rng, 0.04, 0.1) * s, y)], fill=_shade(lake, 1.35), width=2)
    return img


def waterbird_sample(seed: int, i: int, size: int) -> tuple[dict[str, Any], Image.Image]:
    """Sample ``i`` (0-based): its ``metadata.csv`` row (without img_id) and image."""
    rng = rng_for(seed, PART, "waterbirds", i)
    group, y, place = WATERBIRD_GROUPS[i % len(WATERBIRD_GROUPS)]
    kinds = [k for k, (p, _) in _PLACES.items() if p == place]
    kind = _pick(rng, kinds)
    img = _draw_place(rng, kind, size)
    if y == 1:
        folder, name, shape, colours = _pick(rng, _WATERBIRDS)
        main = _jitter(rng, _pick(rng, colours), 10)
        head = (40, 110, 60) if shape == "duck" and rng.random() < 0.5 else main
        paint, aspect = (_paint_duck, 1.4) if shape == "duck" else (_paint_gull, 1.5)
        col = {"main": main, "head": head}
    else:
        folder, name, colours = _pick(rng, _LANDBIRDS)
        col = {"main": _jitter(rng, _pick(rng, colours), 10)}
        paint, aspect = _paint_bird, 1.2
    w, h = _size_for(aspect * _ru(rng, 0.93, 1.07), size * _ru(rng, 0.45, 0.62))
    flip = bool(rng.random() < 0.5)
    layer = _layer(w, h, paint, col, flip=flip)
    x = _ri(rng, round(0.05 * size), size - w - round(0.05 * size))
    top = size - h - round(0.05 * size)
    yy = _ri(rng, max(round(0.05 * size), round(0.35 * size)), max(round(0.35 * size), top))
    img.paste(layer, (x, yy), layer)
    number = 100 + i
    _, place_folder = _PLACES[kind]
    row = {
        "img_filename": f"{folder}/{name}_{number:04d}_{i + 1}.jpg",
        "y": y,
        "split": 2,
        "place": place,
        "place_filename": f"{place_folder}/{i + 1:08d}.jpg",
        "group": group,
    }
    return row, img


# ------------------------------------------------------ handwritten expressions


@dataclass
class _Ink:
    """A piece of set formula: ``mask`` (L, 255 = ink), the pen origin ``(ox, base)``
    (x of the left edge, y of the baseline inside ``mask``) and the advance width."""

    mask: Image.Image
    ox: int
    base: int
    adv: int


_STYLES: dict[str, dict[str, Any]] = {
    "handwritten": {
        "size": (34, 42), "stroke": 1, "rot": 9.0, "dy": 2.5, "gap": (-1, 3), "tilt": 5.0,
        "shear": (0.0, 0.08), "ink": ((25, 25, 60), (20, 20, 20), (40, 35, 85)),
    },
    "mathwriting": {
        "size": (42, 50), "stroke": 2, "rot": 5.0, "dy": 1.5, "gap": (0, 4), "tilt": 2.5,
        "shear": (0.15, 0.3), "ink": ((8, 8, 8), (30, 30, 30)),
    },
}  # fmt: skip


def _compose(items: Sequence[tuple[Image.Image, int, int]]) -> tuple[Image.Image, int, int]:
    """Merge masks placed at ``(x, y)`` (any integers); the result and its origin offset."""
    x0 = min(x for _, x, _ in items)
    y0 = min(y for _, _, y in items)
    x1 = max(x + m.width for m, x, _ in items)
    y1 = max(y + m.height for m, _, y in items)
    out = Image.new("L", (max(1, x1 - x0), max(1, y1 - y0)), 0)
    for m, x, y in items:
        box = (x - x0, y - y0, x - x0 + m.width, y - y0 + m.height)
        out.paste(ImageChops.lighter(out.crop(box), m), box[:2])
    return out, x0, y0


def _hcat(parts: Sequence[_Ink]) -> _Ink:
    items, cur = [], 0
    for p in parts:
        items.append((p.mask, cur - p.ox, -p.base))
        cur += p.adv
    mask, x0, y0 = _compose(items)
    return _Ink(mask, -x0, -y0, cur)


def _glyph(ch: str, size: int, st: dict, rng: np.random.Generator) -> _Ink:
    font = _font(size)
    asc, desc = font.getmetrics()
    adv = max(1, round(font.getlength(ch)))
    pad = st["stroke"] + size // 4
    mask = Image.new("L", (adv + 2 * pad, asc + desc + 2 * pad), 0)
    if ch.strip():
        ImageDraw.Draw(mask).text((pad, pad + asc), ch, font=font, fill=255, anchor="ls",
                                  stroke_width=st["stroke"], stroke_fill=255)  # fmt: skip
        mask = mask.rotate(_ru(rng, -st["rot"], st["rot"]), resample=Image.Resampling.BICUBIC,
                           center=(pad + adv / 2, pad + asc - size * 0.3))  # fmt: skip
    dy = round(_ru(rng, -st["dy"], st["dy"]))
    return _Ink(mask, pad, pad + asc + dy, adv + _ri(rng, *st["gap"]))


def _text_ink(text: str, size: int, st: dict, rng: np.random.Generator) -> _Ink:
    return _hcat([_glyph(ch, size, st, rng) for ch in text])


def _raised(ink: _Ink, dy: int) -> _Ink:
    return _Ink(ink.mask, ink.ox, ink.base + dy, ink.adv)


def _ink_box(ink: _Ink) -> tuple[int, int, int, int]:
    """The ink's bounding box relative to the pen origin (x0, y0, x1, y1)."""
    bbox = ink.mask.getbbox() or (0, 0, 1, 1)
    return bbox[0] - ink.ox, bbox[1] - ink.base, bbox[2] - ink.ox, bbox[3] - ink.base


def _stroke(points: Sequence[tuple[float, float]], width: int) -> tuple[Image.Image, int, int]:
    """A polyline as a mask; returns (mask, x, y) of its top-left in pen coordinates."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    m = width + 2
    x0, y0 = math.floor(min(xs)) - m, math.floor(min(ys)) - m
    mask = Image.new("L", (math.ceil(max(xs)) - x0 + m, math.ceil(max(ys)) - y0 + m), 0)
    ImageDraw.Draw(mask).line([(x - x0, y - y0) for x, y in points], fill=255, width=width,
                              joint="curve")  # fmt: skip
    return mask, x0, y0


def _render(tokens: Sequence[tuple], size: int, st: dict, rng: np.random.Generator) -> _Ink:
    parts = []
    lw = st["stroke"] * 2 + 1
    for tok in tokens:
        kind = tok[0]
        if kind == "t":
            parts.append(_text_ink(tok[1], size, st, rng))
        elif kind in ("sup", "sub"):
            small = _text_ink(tok[1], round(size * 0.6), st, rng)
            parts.append(_raised(small, round(size * (0.42 if kind == "sup" else -0.22))))
        elif kind == "frac":
            num, den = (
                _render(tok[1], round(size * 0.8), st, rng),
                _render(tok[2], round(size * 0.8), st, rng),
            )
            nb, db = _ink_box(num), _ink_box(den)
            bar_w = max(nb[2] - nb[0], db[2] - db[0]) + size // 3
            bar_y = -round(size * 0.3)
            gap = max(3, size // 8)
            tilt = _ru(rng, -2, 2)
            bar = _stroke([(0, bar_y), (bar_w, bar_y + tilt)], lw)
            nx = round(bar_w / 2 - (nb[0] + nb[2]) / 2)
            ny = bar_y - gap - nb[3]
            dx = round(bar_w / 2 - (db[0] + db[2]) / 2)
            dyy = bar_y + gap - db[1]
            mask, x0, y0 = _compose([bar, (num.mask, nx - num.ox, ny - num.base),
                                     (den.mask, dx - den.ox, dyy - den.base)])  # fmt: skip
            parts.append(_Ink(mask, -x0, -y0, bar_w + size // 5))
        elif kind == "sqrt":
            inner = _render(tok[1], size, st, rng)
            ib = _ink_box(inner)
            rw = round(size * 0.55)
            top, bottom = ib[1] - max(4, size // 6), ib[3]
            mid = (top + bottom) / 2
            pts = [(0, mid + size * 0.1), (rw * 0.3, mid), (rw * 0.6, bottom + 2), (rw, top),
                   (rw + ib[2] + size * 0.2, top + _ru(rng, -2, 2))]  # fmt: skip
            mask, x0, y0 = _compose([_stroke(pts, lw),
                                     (inner.mask, rw + size // 10 - inner.ox,
                                      -inner.base)])  # fmt: skip
            parts.append(_Ink(mask, -x0, -y0, rw + size // 10 + inner.adv + size // 5))
        elif kind == "int":
            h, w = size * 1.5, size * 0.5
            base_y = size * 0.3
            shape = ((0.95, 0.06), (0.78, 0.0), (0.58, 0.05), (0.5, 0.22), (0.45, 0.8),
                     (0.36, 0.96), (0.18, 1.0), (0.02, 0.93))  # fmt: skip
            pts = [(u * w + _ru(rng, -1, 1), base_y - h + v * h) for u, v in shape]
            items = [_stroke(pts, lw)]
            adv = round(w)
            lo, hi = tok[1], tok[2]
            for text, y in ((hi, base_y - h + size * 0.25), (lo, base_y + size * 0.05)):
                if text:
                    lim = _text_ink(text, round(size * 0.5), st, rng)
                    items.append((lim.mask, round(w * 0.85) - lim.ox, round(y) - lim.base))
                    adv = max(adv, round(w * 0.85) + lim.adv)
            mask, x0, y0 = _compose(items)
            parts.append(_Ink(mask, -x0, -y0, adv + size // 5))
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown formula token {kind!r}")
    return _hcat(parts)


def _expression(rng: np.random.Generator, i: int) -> tuple[list[tuple], str]:
    """Formula ``i``: its tokens and a LaTeX-like spelling (recorded in summary.json)."""
    a, b, c = _ri(rng, 2, 9), _ri(rng, 2, 9), _ri(rng, 1, 9)
    t, sup, sub = (lambda s: ("t", s)), (lambda s: ("sup", s)), (lambda s: ("sub", s))
    which = i % 20
    if which == 0:
        return [t("x"), sup("2"), t(f"+{a}x-{c}")], f"x^2+{a}x-{c}"
    if which == 1:
        return [("int", None, None), t("f(x) dx")], r"\int f(x)\,dx"
    if which == 2:
        return [("frac", [t("a")], [t("b")]), t(f" = {a}")], rf"\frac{{a}}{{b}} = {a}"
    if which == 3:
        return [("sqrt", [t(f"x+{c}")]), t(f" = {a}")], rf"\sqrt{{x+{c}}} = {a}"
    if which == 4:
        return [t(f"y = {a}x + {c}")], f"y = {a}x + {c}"
    if which == 5:
        return ([t("(a+b)"), sup("2"), t(" = a"), sup("2"), t("+2ab+b"), sup("2")],
                "(a+b)^2 = a^2+2ab+b^2")  # fmt: skip
    if which == 6:
        return ([("int", "0", str(a)), t("x dx = "), ("frac", [t(str(a * a))], [t("2")])],
                rf"\int_0^{a} x\,dx = \frac{{{a * a}}}{{2}}")  # fmt: skip
    if which == 7:
        return [t(f"{a}x - {c} = {a * b - c}")], f"{a}x - {c} = {a * b - c}"
    if which == 8:
        return [t("f(x) = x"), sup("3"), t(f" - {a}x")], f"f(x) = x^3 - {a}x"
    if which == 9:
        return ([t("a"), sup("2"), t(" + b"), sup("2"), t(" = c"), sup("2")],
                "a^2 + b^2 = c^2")  # fmt: skip
    if which == 10:
        return ([("frac", [t("1")], [t(str(a))]), t(" + "), ("frac", [t("1")], [t(str(b))])],
                rf"\frac{{1}}{{{a}}} + \frac{{1}}{{{b}}}")  # fmt: skip
    if which == 11:
        return ([("frac", [t("dy")], [t("dx")]), t(f" = {a}x")],
                rf"\frac{{dy}}{{dx}} = {a}x")  # fmt: skip
    if which == 12:
        return [t(f"log(x) + {c} = {a + c}")], f"\\log(x) + {c} = {a + c}"
    if which == 13:
        return [t(f"(x-{a})(x+{b}) = 0")], f"(x-{a})(x+{b}) = 0"
    if which == 14:
        return [("sqrt", [t(str(a * a))]), t(f" = {a}")], rf"\sqrt{{{a * a}}} = {a}"
    if which == 15:
        return [t(f"|x - {a}| < {b}")], f"|x - {a}| < {b}"
    if which == 16:
        return ([t("sin"), sup("2"), t("x + cos"), sup("2"), t("x = 1")],
                r"\sin^2 x + \cos^2 x = 1")  # fmt: skip
    if which == 17:
        return [t("e"), sup(f"{a}x"), t(f" > {c}")], f"e^{{{a}x}} > {c}"
    if which == 18:
        return ([t("x"), sub("1"), t(" + x"), sub("2"), t(f" = {a + b}")],
                f"x_1 + x_2 = {a + b}")  # fmt: skip
    return ([t("lim"), sub("x->0"), t(" "), ("frac", [t("sin x")], [t("x")]), t(" = 1")],
            r"\lim_{x \to 0} \frac{\sin x}{x} = 1")  # fmt: skip


def expression_image(seed: int, style: str, i: int) -> tuple[Image.Image, str]:
    """Expression ``i`` in ``style`` (``handwritten`` or ``mathwriting``): (image, formula)."""
    st = _STYLES[style]
    rng = rng_for(seed, PART, style, i)
    tokens, latex = _expression(rng, i)
    ink = _render(tokens, _ri(rng, *st["size"]), st, rng)
    mask = ink.mask
    margin = 16
    padded = Image.new("L", (mask.width + 2 * margin, mask.height + 2 * margin), 0)
    padded.paste(mask, (margin, margin))
    mask = padded.rotate(_ru(rng, -st["tilt"], st["tilt"]), resample=Image.Resampling.BICUBIC,
                         expand=True, fillcolor=0)  # fmt: skip
    shear = _ru(rng, *st["shear"])
    if shear:
        w, h = mask.size
        extra = math.ceil(shear * h)
        mask = mask.transform((w + extra, h), Image.Transform.AFFINE,
                              (1, shear, -shear * h, 0, 1, 0),
                              resample=Image.Resampling.BICUBIC, fillcolor=0)  # fmt: skip
    x0, y0, x1, y1 = mask.getbbox() or (0, 0, mask.width, mask.height)
    m = 10
    mask = mask.crop((x0 - m, y0 - m, x1 + m, y1 + m))
    ink_rgb = _pick(rng, st["ink"])
    img = Image.composite(Image.new("RGB", mask.size, ink_rgb), Image.new("RGB", mask.size, WHITE),
                          mask)  # fmt: skip
    return img, latex


# ------------------------------------------------------------------------ entry


def _check(name: str, value: Any) -> int:
    lo, hi = LIMITS[name]
    what = f"demo-idis --{name.replace('_', '-')}"  # the command-line option
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{what} must be an integer from {lo} to {hi}, got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{what} must be from {lo} to {hi}, got {value}")
    return int(value)


def _remove_stale(root: Path, written: set[Path], suffixes: tuple[str, ...]) -> int:
    """Delete image files under ``root`` that this run did not write; their number."""
    n = 0
    if not root.is_dir():
        return 0
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in suffixes and path not in written:
            path.unlink()
            n += 1
    return n


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def generate_idis_demo(
    out_dir: str | Path,
    seed: int = 0,
    n_per_class: int = 1,
    n_problems: int = 3,
    n_tables: int = 4,
    n_birds: int = 8,
    image_size: int = 224,
    diagram_size: int = 384,
    n_segment_variants: int = 2,
    n_expressions: int = 20,
) -> dict[str, Any]:
    """Write the Idis demo data under ``out_dir`` (layout: the module docstring).

    ``n_per_class`` ImageNet-9 images per class (``image_size`` px square, also the
    Waterbirds size), ``n_problems`` MathVerse problems in four versions each
    (``diagram_size`` px canvas, cropped to the figure), ``n_tables`` LogicVista table
    questions, ``n_birds`` Waterbirds images (the four groups cycle),
    ``n_segment_variants`` cut-outs per object and ``n_expressions`` images per
    handwriting style. Returns the summary written to ``out_dir/summary.json``
    (``counts`` per part, the arguments, ``version``). Same arguments -> byte-identical
    files. Raises ``ValueError`` naming the ``demo-idis`` option (or ``seed``) when an
    argument is out of range.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    options = {
        "n_per_class": n_per_class,
        "n_problems": n_problems,
        "n_tables": n_tables,
        "n_birds": n_birds,
        "image_size": image_size,
        "diagram_size": diagram_size,
        "n_segment_variants": n_segment_variants,
        "n_expressions": n_expressions,
    }
    args = {name: _check(name, value) for name, value in options.items()}
    out = Path(out_dir)
    written: set[Path] = set()
    counts: dict[str, Any] = {}
    counts.update(_write_imagenet9(out / "imagenet9", seed, args, written))
    counts.update(_write_mathverse(out / "mathverse", seed, args, written))
    counts.update(_write_logicvista(out / "logicvista", seed, args, written))
    counts.update(_write_waterbirds(out / "waterbirds", seed, args, written))
    counts.update(_write_segments(out / "segments", seed, args, written))
    expressions = _write_expressions(out, seed, args, written)
    counts.update({style: args["n_expressions"] for style in expressions})
    for part in ("imagenet9", "mathverse", "logicvista", "waterbirds", "segments",
                 "handwritten", "mathwriting"):  # fmt: skip
        _remove_stale(out / part, written, (".JPEG", ".jpg", ".png"))
    summary = {
        "generator": "vlmrobust.demo.idis",
        "version": IDIS_DEMO_VERSION,
        "seed": seed,
        "arguments": args,
        "counts": counts,
        "expressions": expressions,
    }
    write_json(out / "summary.json", summary)
    return summary


def _write_imagenet9(
    in9: Path, seed: int, args: dict[str, int], written: set[Path]
) -> dict[str, Any]:
    """The ImageNet-9 Backgrounds Challenge images (original/val and only_fg/val) under
    ``in9``; their count. Each path written is added to ``written``."""
    for cls, folder in enumerate(IMAGENET9_FOLDERS):
        for k in range(args["n_per_class"]):
            original, only_fg, _ = imagenet9_images(seed, cls, k, args["image_size"])
            stem = imagenet9_stem(cls, k)
            for kind, img in (("original", original), ("only_fg", only_fg)):
                path = in9 / kind / "val" / folder / f"{stem}.JPEG"
                _save_jpeg(img, path)
                written.add(path)
    return {"imagenet9": len(IMAGENET9_FOLDERS) * args["n_per_class"]}


def _write_mathverse(
    mv: Path, seed: int, args: dict[str, int], written: set[Path]
) -> dict[str, Any]:
    """MathVerse testmini (the rows and their images) and the confirmed concept
    families under ``mv``; the counts of rows, problems and problems per family."""
    rows: list[dict[str, Any]] = []
    labels: dict[str, dict[str, str]] = {}
    for p in range(args["n_problems"]):
        family, prows, images = mathverse_problem(seed, p, args["diagram_size"])
        for row, img in zip(prows, images, strict=True):
            path = mv / row["image"]
            _save_png(img, path)
            written.add(path)
        rows += prows
        labels[str(p + 1)] = {
            "problem_index": str(p + 1),
            "concept_family": family,
            "source": "demo",
            "status": "confirmed",
        }
    write_json(mv / "testmini.json", rows)
    write_labels(mv / CONCEPT_LABELS_FILE, list(LABEL_COLUMNS), labels)
    return {
        "mathverse": len(rows),
        "mathverse_problems": len(labels),
        "concept_families": dict(
            sorted(Counter(r["concept_family"] for r in labels.values()).items())
        ),
    }


def _write_logicvista(
    lv: Path, seed: int, args: dict[str, int], written: set[Path]
) -> dict[str, Any]:
    """The LogicVista table questions (dataset.json and images) under ``lv``; their count."""
    dataset: dict[str, Any] = {}
    for t in range(args["n_tables"]):
        entry, img = logicvista_table(seed, t)
        path = lv / "images" / entry["imagename"]
        _save_png(img, path)
        written.add(path)
        dataset[f"v1_{t}"] = entry
    write_json(lv / "dataset.json", dataset)
    return {"logicvista": len(dataset)}


def _write_waterbirds(
    wb: Path, seed: int, args: dict[str, int], written: set[Path]
) -> dict[str, Any]:
    """The Waterbirds images and metadata.csv under ``wb``; the count of images and of
    images per group."""
    meta_rows, groups = [], Counter()
    for i in range(args["n_birds"]):
        row, img = waterbird_sample(seed, i, args["image_size"])
        path = wb / row["img_filename"]
        _save_jpeg(img, path)
        written.add(path)
        groups[row["group"]] += 1
        meta_rows.append((i + 1, row["img_filename"], row["y"], row["split"], row["place"],
                          row["place_filename"]))  # fmt: skip
    _write_csv(wb / "metadata.csv",
               ("img_id", "img_filename", "y", "split", "place", "place_filename"),
               meta_rows)  # fmt: skip
    return {
        "waterbirds": len(meta_rows),
        "waterbirds_groups": {g: groups[g] for g, _, _ in WATERBIRD_GROUPS},
    }


def _write_segments(
    seg: Path, seed: int, args: dict[str, int], written: set[Path]
) -> dict[str, Any]:
    """The distractor object cut-outs under ``seg`` (one folder per object); the count
    of objects and of cut-outs."""
    for name in all_idis_objects():
        for k in range(args["n_segment_variants"]):
            path = seg / object_slug(name) / f"{k}.png"
            _save_png(segment_image(seed, name, k), path)
            written.add(path)
    return {
        "segment_objects": len(_SEGMENT_SPECS),
        "segments": len(_SEGMENT_SPECS) * args["n_segment_variants"],
    }


def _write_expressions(
    out: Path, seed: int, args: dict[str, int], written: set[Path]
) -> dict[str, list[str]]:
    """The handwritten expressions of each style under ``out/<style>``; their LaTeX,
    in order, per style."""
    expressions: dict[str, list[str]] = {}
    for style in ("handwritten", "mathwriting"):
        expressions[style] = []
        for i in range(args["n_expressions"]):
            img, latex = expression_image(seed, style, i)
            path = out / style / f"{i:03d}.png"
            _save_png(img, path)
            written.add(path)
            expressions[style].append(latex)
    return expressions

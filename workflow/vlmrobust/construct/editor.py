"""Image editors that apply a written edit instruction (Distract-Bench §3, stage iii).

Three editors share one method, ``edit(image, instruction) -> PIL.Image``:

- :class:`CompositeEditor` — offline and deterministic. It renders the structured
  ``render`` object of the instruction (:data:`vlmrobust.construct.writer.EDIT_SCHEMA`)
  with PIL: a text ``label``, an ``arrow`` with its text, a dashed ``box`` with its
  text, a big ``number`` on a note, or a small ``shape`` (circle, star or triangle) with
  its text. **Bound**: the distractor is drawn on its own layer and scaled down until
  its bounding box covers at most :data:`MAX_AREA_FRACTION` of the image area (and fits
  inside the image); only the pixels of that box can change, everything outside it is
  byte-identical to the input. The layer is placed centred on ``position`` (fractions
  of width/height), clamped inside the image; when that box is not empty (more than 2 %
  of its pixels differ from its most common value) the first empty box among
  :data:`FREE_SPACE_ORDER` (corners, edges) is used instead, else the requested one —
  so existing content is avoided when the picture has free margins (not guaranteed). Modes: ``RGB``, ``L``, ``RGBA`` keep their
  mode (only the box region is converted for compositing); any other mode (``P``,
  ``1``, ``I``, ``F``, ``CMYK``...) is converted to ``RGB`` first.
- :class:`OpenAIImageEditor` — ``images.edit`` of the ``openai`` client (gpt-image-1
  by default), base64 result, through :func:`vlmrobust.clients.apicall.call_with_retries`.
- :class:`GeminiImageEditor` — ``models.generate_content`` of ``google-genai`` with an
  image response modality.

The two API editors live in :mod:`vlmrobust.clients.image_edit` (the perturbation
stage uses them too); the classes here only turn a writer's instruction into their
prompt (:func:`editor_prompt`). They return an image of the input's size (a result of
another size is resized back with LANCZOS, so the pair stays comparable) and raise
:class:`EditorError` when no image came back; the pipeline records the reason, never
drops the row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from ..clients.image_edit import EditorError
from ..clients.image_edit import GeminiImageEditor as _GeminiImageEditor
from ..clients.image_edit import OpenAIImageEditor as _OpenAIImageEditor

__all__ = [
    "EDITORS",
    "FREE_SPACE_ORDER",
    "MAX_AREA_FRACTION",
    "RENDER_KINDS",
    "CompositeEditor",
    "EditorError",
    "GeminiImageEditor",
    "OpenAIImageEditor",
    "draw_layer",
    "editor_prompt",
    "fit_layer",
    "make_editor",
    "parse_color",
    "placement",
    "render_of",
]

#: The largest share of the image area the composited distractor's bounding box may
#: cover (its layer is scaled down until it fits).
MAX_AREA_FRACTION = 0.12
RENDER_KINDS = ("label", "arrow", "box", "number", "shape")
_KEEP_MODES = ("RGB", "L", "RGBA")
_COLORS = {
    "red": (220, 20, 20),
    "blue": (20, 60, 220),
    "green": (20, 140, 40),
    "orange": (240, 130, 0),
    "purple": (130, 40, 170),
    "black": (0, 0, 0),
    "magenta": (210, 0, 160),
}


@lru_cache(maxsize=64)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=max(6, int(size)))


def parse_color(value: Any) -> tuple[int, int, int]:
    """``"#rrggbb"``, a colour name of :data:`_COLORS` or ``[r, g, b]``; red otherwise."""
    if isinstance(value, list | tuple) and len(value) == 3:
        return tuple(max(0, min(255, int(v))) for v in value)  # type: ignore[return-value]
    text = str(value or "").strip().lower()
    if text.startswith("#") and len(text) == 7:
        try:
            return tuple(int(text[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]
        except ValueError:
            pass
    return _COLORS.get(text, _COLORS["red"])


def render_of(instruction: Mapping[str, Any]) -> dict[str, Any]:
    """The ``render`` object of a writer output (or ``instruction`` itself when it is
    already one); raises ``ValueError`` when there is none or its kind is unknown."""
    render = instruction.get("render", instruction)
    if not isinstance(render, Mapping) or render.get("kind") not in RENDER_KINDS:
        raise ValueError(
            f"edit instruction has no render object with kind in {RENDER_KINDS}: "
            f"{dict(instruction)!r:.200}"
        )
    return dict(render)


def _text_size(draw: ImageDraw.ImageDraw, text: str, font: Any) -> tuple[int, int]:
    x0, y0, x1, y1 = draw.multiline_textbbox((0, 0), text, font=font)
    return max(1, math.ceil(x1 - min(0, x0))), max(1, math.ceil(y1 - min(0, y0)))


def _star(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    pts = []
    for i in range(10):
        rad = r if i % 2 == 0 else r * 0.45
        ang = -math.pi / 2 + i * math.pi / 5
        pts.append((cx + rad * math.cos(ang), cy + rad * math.sin(ang)))
    return pts


def draw_layer(render: Mapping[str, Any], base_px: int) -> Image.Image:
    """The distractor alone on a transparent RGBA layer at its natural size; ``base_px``
    is the image's shorter side (``size`` is a fraction of it)."""
    kind = render["kind"]
    text = str(render.get("text") or "")
    color = parse_color(render.get("color")) + (255,)
    size = float(render.get("size") or 0.06)
    fs = max(8, round(base_px * min(max(size, 0.01), 0.3)))
    font = _font(fs)
    probe = ImageDraw.Draw(Image.new("RGBA", (1, 1)))
    tw, th = _text_size(probe, text, font) if text else (0, 0)
    lw = max(2, fs // 6)
    pad = max(2, fs // 4)

    if kind in ("label", "number"):
        w, h = tw + 2 * pad, th + 2 * pad
        layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
        d = ImageDraw.Draw(layer)
        if kind == "number":  # a note card behind the number
            d.rectangle([0, 0, w - 1, h - 1], fill=(255, 250, 205, 235), outline=color, width=lw)
        d.multiline_text((pad, pad), text, font=font, fill=color)
        return layer
    if kind == "arrow":
        length = max(3 * fs, tw // 2)
        w, h = max(tw, length) + 2 * pad, th + fs + 2 * pad
        layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
        d = ImageDraw.Draw(layer)
        d.multiline_text((pad, pad), text, font=font, fill=color)
        y = pad + th + fs // 2
        x0, x1 = pad, pad + length
        d.line([(x0, y), (x1 - lw, y)], fill=color, width=lw)
        head = max(4, fs // 2)
        d.polygon([(x1, y), (x1 - head, y - head // 2 - 1), (x1 - head, y + head // 2 + 1)],
                  fill=color)  # fmt: skip
        return layer
    if kind == "box":
        w, h = max(tw + 2 * pad, 4 * fs), th + 3 * fs + 2 * pad
        layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
        d = ImageDraw.Draw(layer)
        d.multiline_text((pad, pad), text, font=font, fill=color)
        top = pad + th + pad
        dash = max(3, fs // 2)
        edges = [((0, top), (w - 1, top)), ((w - 1, top), (w - 1, h - 1)),
                 ((w - 1, h - 1), (0, h - 1)), ((0, h - 1), (0, top))]  # fmt: skip
        for (ax, ay), (bx, by) in edges:
            n = max(1, int(math.hypot(bx - ax, by - ay) // (2 * dash)))
            for i in range(n):
                t0, t1 = (2 * i) / (2 * n), (2 * i + 1) / (2 * n)
                d.line([(ax + (bx - ax) * t0, ay + (by - ay) * t0),
                        (ax + (bx - ax) * t1, ay + (by - ay) * t1)], fill=color, width=lw)  # fmt: skip
        return layer
    # shape: a small filled star / circle / triangle with its text to the right
    shape = str(render.get("shape") or "star")
    r = fs
    w, h = 2 * r + pad + tw + 2 * pad, max(2 * r, th) + 2 * pad
    layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    cx, cy = pad + r, h / 2
    if shape == "circle":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=color)
    elif shape == "triangle":
        d.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=color)
    else:
        d.polygon(_star(cx, cy, r), fill=color)
    if text:
        d.multiline_text((pad + 2 * r + pad, (h - th) / 2), text, font=font, fill=color)
    return layer


def fit_layer(layer: Image.Image, width: int, height: int, max_fraction: float) -> Image.Image:
    """``layer`` scaled down (never up) to fit the image and the area budget."""
    budget = max_fraction * width * height
    scale = min(1.0, width / layer.width, height / layer.height)
    area = layer.width * layer.height * scale * scale
    if area > budget:
        scale *= math.sqrt(budget / area)
    if scale >= 1.0:
        return layer
    w = max(1, min(width, math.floor(layer.width * scale)))
    h = max(1, min(height, math.floor(layer.height * scale)))
    while w * h > budget and (w > 1 or h > 1):  # floor rounding can leave one row too many
        w, h = max(1, w - 1), max(1, h - 1)
    return layer.resize((w, h), Image.Resampling.LANCZOS)


def placement(
    width: int, height: int, layer_size: tuple[int, int], position: Any
) -> tuple[int, int, int, int]:
    """The box ``(x0, y0, x1, y1)`` of a layer centred on ``position`` (fractions),
    clamped inside the image."""
    try:
        fx, fy = (float(position[0]), float(position[1]))
    except (TypeError, ValueError, IndexError):
        fx, fy = 0.8, 0.1
    fx, fy = min(max(fx, 0.0), 1.0), min(max(fy, 0.0), 1.0)
    lw, lh = layer_size
    x0 = min(max(0, round(fx * width - lw / 2)), max(0, width - lw))
    y0 = min(max(0, round(fy * height - lh / 2)), max(0, height - lh))
    return x0, y0, x0 + lw, y0 + lh


#: Where the editor looks, in this order, when the requested box is not empty.
FREE_SPACE_ORDER = (
    (0.85, 0.06), (0.15, 0.06), (0.85, 0.94), (0.15, 0.94),
    (0.5, 0.94), (0.5, 0.06), (0.06, 0.5), (0.94, 0.5),
)  # fmt: skip


def _is_empty(image: Image.Image, box: tuple[int, int, int, int], tol: float = 0.02) -> bool:
    """Whether at most ``tol`` of the box's pixels differ from its most common value."""
    region = image.crop(box).convert("L")
    hist = region.histogram()
    total = sum(hist)
    return total == 0 or (total - max(hist)) <= tol * total


class CompositeEditor:
    """The deterministic offline editor (see the module docstring for its bound)."""

    name = "composite"

    def __init__(
        self, max_area_fraction: float = MAX_AREA_FRACTION, *, find_free_space: bool = True
    ) -> None:
        if not 0 < max_area_fraction <= 1:
            raise ValueError(f"max_area_fraction must be in (0, 1], got {max_area_fraction}")
        self.max_area_fraction = max_area_fraction
        self.find_free_space = find_free_space

    def __repr__(self) -> str:
        return f"CompositeEditor(max_area_fraction={self.max_area_fraction})"

    def region(self, image: Image.Image, instruction: Mapping[str, Any]) -> tuple[int, ...]:
        """The box the edit of ``instruction`` may change."""
        return self._layer_and_box(image, render_of(instruction))[1]

    def _layer_and_box(
        self, image: Image.Image, render: dict[str, Any]
    ) -> tuple[Image.Image, tuple[int, int, int, int]]:
        width, height = image.size
        layer = draw_layer(render, max(1, min(width, height)))
        layer = fit_layer(layer, width, height, self.max_area_fraction)
        box = placement(width, height, layer.size, render.get("position"))
        if self.find_free_space and not _is_empty(image, box):
            for fallback in FREE_SPACE_ORDER:
                other = placement(width, height, layer.size, fallback)
                if _is_empty(image, other):
                    return layer, other
        return layer, box

    def edit(self, image: Image.Image, instruction: Mapping[str, Any]) -> Image.Image:
        render = render_of(instruction)
        out = image.copy() if image.mode in _KEEP_MODES else image.convert("RGB")
        layer, box = self._layer_and_box(out, render)
        region = out.crop(box).convert("RGBA")
        region.alpha_composite(layer.crop((0, 0, box[2] - box[0], box[3] - box[1])))
        out.paste(region.convert(out.mode), box[:2])
        return out


# --------------------------------------------------------------------------- API editors


def editor_prompt(instruction: Mapping[str, Any] | str) -> str:
    """The text an image model receives: the four parts of the edit instruction and the
    paper's preservation constraints."""
    if isinstance(instruction, str):
        body = instruction.strip()
    else:
        edit = instruction.get("edit_instruction", instruction)
        if isinstance(edit, Mapping):
            parts = [
                f"Content: {edit.get('content', '')}",
                f"Location: {edit.get('location', '')}",
                f"Style: {edit.get('style', '')}",
                f"Layout constraints: {edit.get('layout_constraints', '')}",
            ]
            body = "\n".join(parts)
        else:
            body = str(edit).strip()
    return (
        "Edit the given image by adding exactly one visual element as described below. "
        "Preserve all original content (every object, label, number, line and the layout) "
        "exactly; change nothing else.\n\n" + body
    )


class OpenAIImageEditor(_OpenAIImageEditor):
    """gpt-image edits (:class:`vlmrobust.clients.image_edit.OpenAIImageEditor`) of a
    writer's edit instruction, sent as :func:`editor_prompt` of it."""

    def prompt(self, instruction: Mapping[str, Any] | str) -> str:
        return editor_prompt(instruction)


class GeminiImageEditor(_GeminiImageEditor):
    """Gemini image edits (:class:`vlmrobust.clients.image_edit.GeminiImageEditor`) of a
    writer's edit instruction, sent as :func:`editor_prompt` of it."""

    def prompt(self, instruction: Mapping[str, Any] | str) -> str:
        return editor_prompt(instruction)


#: ``construct.<name>.editor.backend`` -> the editor class
EDITORS: dict[str, type] = {
    "composite": CompositeEditor,
    "openai": OpenAIImageEditor,
    "gemini": GeminiImageEditor,
}


def make_editor(spec: Mapping[str, Any] | None):
    """The image editor of a construction's ``editor`` spec (``backend``: composite,
    openai, gemini); an unknown backend is an error naming the known ones."""
    spec = dict(spec or {})
    backend = spec.get("backend", "composite")
    if backend not in EDITORS:
        raise ValueError(f"construct editor backend {backend!r} is not one of {', '.join(EDITORS)}")
    return CompositeEditor() if backend == "composite" else EDITORS[backend](spec)

"""The demo seed distractors: six seeds drawn with PIL for the embedded demo data.

:func:`make_demo_seeds` writes ``seeds.jsonl`` and ``images/<id>_{original,edited}.png``
in the seeds file format of :mod:`vlmrobust.construct.seeds`; the edited image is the
original with the seed's pattern composited by the offline editor
(:class:`~vlmrobust.construct.editor.CompositeEditor`). The same call gives
byte-identical files; the shipped seeds (``resources/distraction/seeds``) are its
output, and ``vlmrobust demo-seeds [--out <dir>]`` rewrites them. They stand in
for the paper's 100 expert seeds, which are not released.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlmrobust.construct.editor import CompositeEditor
from vlmrobust.construct.seeds import Seed, load_seeds, render_from_pattern
from vlmrobust.core.io import atomic_save_image, write_jsonl

__all__ = ["make_demo_seeds"]

_DEMO_SEEDS: list[dict[str, Any]] = [
    {
        "seed_id": "demo-chart-target",
        "family": "chart",
        "question": "What is the value of Apples in the chart?",
        "injected": "A yellow note card in the top-right corner reading 'Target: 60 units'.",
        "irrelevance": "The question asks for a plotted value; a planning target is not data "
        "and changes no bar.",
        "misleading": "A solver may read the target as the requested value or use it in a "
        "difference or a sum.",
        "pattern": {
            "kind": "number",
            "text": "Target: {number} {unit}",
            "location": "top-right",
            "style": {"color": "#c81414", "size": 0.06},
        },  # fmt: skip
    },
    {
        "seed_id": "demo-chart-lastyear",
        "family": "chart",
        "question": "What is the highest value shown in the chart?",
        "injected": "A red arrow with the text 'Bananas: 75 last year' near the top of the plot.",
        "irrelevance": "Last year's figure is another period; the chart and the question are "
        "about the plotted values only.",
        "misleading": "It offers a larger number that looks like a maximum, a dead end for "
        "'highest value' questions.",
        "pattern": {
            "kind": "arrow",
            "text": "{label}: {number} last year",
            "location": "top",
            "style": {"color": "#1e3cdc", "size": 0.05},
        },  # fmt: skip
    },
    {
        "seed_id": "demo-diagram-length",
        "family": "diagram",
        "question": "Point C lies on segment AB. Using the lengths marked in the figure, find CB.",
        "injected": "A bold red label 'Length = 7' beside the drawing, like a scale cue.",
        "irrelevance": "The lengths needed are already marked; the extra label names no "
        "segment of the question.",
        "misleading": "A careless solver may take it as a given length and subtract it.",
        "pattern": {
            "kind": "label",
            "text": "Length = {number}",
            "location": "bottom-left",
            "style": {"color": "#ff0000", "size": 0.07},
        },  # fmt: skip
    },
    {
        "seed_id": "demo-diagram-boxed",
        "family": "diagram",
        "question": "Which of the labelled segments in the figure is the longest?",
        "injected": "A dashed red box with the note 'EF (checked)' at the bottom-right.",
        "irrelevance": "The note only marks a segment as checked; it says nothing about lengths.",
        "misleading": "It suggests a wrong option is the verified answer.",
        "pattern": {
            "kind": "box",
            "text": "{label} (checked)",
            "location": "bottom-right",
            "style": {"color": "#d21414", "size": 0.05},
        },  # fmt: skip
    },
    {
        "seed_id": "demo-geometry-angle",
        "family": "geometry",
        "question": "As shown in the figure, find the length of the hypotenuse.",
        "injected": "A small red star with '40°' in the top-left corner of the figure.",
        "irrelevance": "The angle mark is attached to no vertex of the figure and no given "
        "uses it.",
        "misleading": "A solver may treat it as the measure of an angle of the figure and "
        "apply trigonometry with it.",
        "pattern": {
            "kind": "shape",
            "text": "{number}°",
            "location": "top-left",
            "style": {"color": "#e02020", "size": 0.06, "shape": "star"},
        },  # fmt: skip
    },
    {
        "seed_id": "demo-any-page",
        "family": "any",
        "question": "How many red shapes are there in the figure?",
        "injected": "A green page marker 'Fig. 12' at the bottom edge.",
        "irrelevance": "A figure number is bookkeeping; it describes no content of the picture.",
        "misleading": "Its number may be counted or used as an operand.",
        "pattern": {
            "kind": "label",
            "text": "Fig. {number}",
            "location": "bottom",
            "style": {"color": "#148c28", "size": 0.06},
        },  # fmt: skip
    },
]
# What the demo seed images show, and the values the edited image's template uses.
_DEMO_FILL = {
    "demo-chart-target": {"number": "60", "unit": "units", "label": "Apples"},
    "demo-chart-lastyear": {"number": "75", "unit": "", "label": "Bananas"},
    "demo-diagram-length": {"number": "7", "unit": "", "label": "AB"},
    "demo-diagram-boxed": {"number": "", "unit": "", "label": "EF"},
    "demo-geometry-angle": {"number": "40", "unit": "", "label": ""},
    "demo-any-page": {"number": "12", "unit": "", "label": ""},
}


def _demo_original(seed_id: str, size: int = 128) -> Any:
    """A tiny deterministic picture of the seed's family (PIL only)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), (255, 255, 255))
    d = ImageDraw.Draw(img)
    s = size
    if seed_id.startswith("demo-chart"):
        d.line([(s * 0.12, s * 0.1), (s * 0.12, s * 0.85), (s * 0.95, s * 0.85)], fill=0, width=2)
        for i, v in enumerate((0.5, 0.7, 0.35, 0.6)):
            x = s * (0.2 + i * 0.19)
            d.rectangle([x, s * (0.85 - v * 0.7), x + s * 0.12, s * 0.85], fill=(70, 120, 200))
    elif seed_id == "demo-diagram-length":
        d.line([(s * 0.1, s * 0.5), (s * 0.9, s * 0.5)], fill=0, width=2)
        for x in (0.1, 0.4, 0.9):
            d.ellipse([s * x - 3, s * 0.5 - 3, s * x + 3, s * 0.5 + 3], fill=0)
    elif seed_id == "demo-diagram-boxed":
        for i, frac in enumerate((0.7, 0.45, 0.55)):
            y = s * (0.2 + i * 0.25)
            d.line([(s * 0.15, y), (s * (0.15 + frac), y)], fill=0, width=2)
    elif seed_id == "demo-geometry-angle":
        d.polygon([(s * 0.2, s * 0.8), (s * 0.8, s * 0.8), (s * 0.2, s * 0.3)], outline=0, width=2)
    else:
        for i in range(6):
            cx, cy = s * (0.2 + (i % 3) * 0.3), s * (0.3 + (i // 3) * 0.35)
            col = (220, 30, 30) if i % 2 == 0 else (30, 30, 220)
            r = s * 0.08
            d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=col)
    return img


def make_demo_seeds(out_dir: str | Path) -> list[Seed]:
    """Write the six demo seeds (``seeds.jsonl`` + ``images/<id>_{original,edited}.png``)
    under ``out_dir``; same call → byte-identical files."""
    out = Path(out_dir)
    editor = CompositeEditor()
    rows = []
    for spec in _DEMO_SEEDS:
        sid = spec["seed_id"]
        original = _demo_original(sid)
        edited = editor.edit(original, render_from_pattern(spec["pattern"], _DEMO_FILL[sid]))
        orig_rel, edit_rel = f"images/{sid}_original.png", f"images/{sid}_edited.png"
        atomic_save_image(original, out / orig_rel, optimize=True)
        atomic_save_image(edited, out / edit_rel, optimize=True)
        rows.append({"seed_id": sid, "original_image": orig_rel, "edited_image": edit_rel,
                     **{k: v for k, v in spec.items() if k != "seed_id"}})  # fmt: skip
    write_jsonl(out / "seeds.jsonl", rows)
    return load_seeds(out)

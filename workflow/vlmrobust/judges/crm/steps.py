"""Steps of a chain of thought, their optimal alignment and similarities (CRM paper §3.5).

Everything here is a pure function of its inputs (plus an :class:`Embedder`, which
turns texts into L2-normalised all-MiniLM-L6-v2 vectors and caches them):

- :func:`split_steps`: a chain of thought as a list of steps (numbered steps when the
  chain has them, else sentences);
- :func:`align_steps`: the optimal one-to-one alignment of original and masked steps
  from their similarity matrix (unchanged / modified / disappeared / new);
- :func:`compare_chains`: the alignment and its counts for two chains;
- :func:`answer_flip`: the answer similarity and whether the answer flipped;
- :func:`dependent_steps` and :func:`region_attribution`: which original steps use the
  masked premise, and whether the disrupted steps are those steps.

Similarities are cosines of normalised embeddings rounded to 4 decimals, so float noise
between machines matters only exactly at a threshold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...clients.embedding import Embedder

#: The paper's thresholds (CRM §3.5): a step is disrupted below 0.80, an answer
#: flipped below 0.90.
STEP_THRESHOLD = 0.8
ANSWER_THRESHOLD = 0.9

STATUSES = ("unchanged", "modified", "disappeared", "new")
ATTRIBUTIONS = ("correct", "partial", "incorrect")

_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")
_BOLD = re.compile(r"\*\*|__")
_SPACE = re.compile(r"\s+")

# A line-initial step marker. "Step k" markers: "Step 1:", "**Step 1**", "**Step 1:**",
# "### Step 1 -", "Step 1."; numbered markers: "1.", "1)", "(1)", "**1.**" (a number
# followed by "." or ")" and then white space, so "3.5 cm" is not a marker).
_OPEN = r"^[ \t]*(?:>[ \t]*)?(?:#{1,6}[ \t]*)?(?:[-*+•][ \t]+)?(?:\*\*|__)?[ \t]*"
_CLOSE = r"[ \t]*(?:\*\*|__)?[ \t]*"
_STEP_MARKER = re.compile(
    _OPEN + r"step[ \t]*(?P<n>\d{1,3})\b" + _CLOSE + r"(?:[:.)\-–—][ \t]*)?(?:\*\*|__)?",
    re.IGNORECASE | re.MULTILINE,
)
_NUMBER_MARKER = re.compile(
    _OPEN + r"(?:\((?P<p>\d{1,3})\)|(?P<n>\d{1,3})[.)](?=\s|\*\*|__|$))" + _CLOSE,
    re.MULTILINE,
)

# Sentence ends: . ! ? (and any closing quotes / brackets) followed by white space.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# Lines that start a fragment of their own in sentence mode: bullets and headings.
_BULLET = re.compile(r"[ \t]*[-*+•][ \t]+")
_HEADING = re.compile(r"[ \t]*#{1,6}[ \t]")
_LINE_PREFIX = re.compile(r"^[ \t]*(?:[-*+•][ \t]+|#{1,6}[ \t]+)")
# Abbreviations after which a "." does not end a sentence (compared in lower case,
# without the final "."; "e.g." is seen as "e.g").
_ABBREVIATIONS = frozenset(
    {
        "e.g",
        "i.e",
        "eg",
        "ie",
        "etc",
        "vs",
        "cf",
        "approx",
        "fig",
        "figs",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "al",
        "resp",
        "incl",
        "esp",
    }
)
_TOKEN_BEFORE = re.compile(r"(\S+)$")


def _clean(text: str) -> str:
    """Markdown bold markers removed, white space collapsed, stripped."""
    return _SPACE.sub(" ", _BOLD.sub("", text)).strip()


def _n_words(text: str) -> int:
    return len(_WORD.findall(text))


def _numbered(text: str) -> list[re.Match[str]] | None:
    """The step markers of ``text`` when it has at least two of one kind: "Step k"
    markers win over plain numbers (a "Step 1:" chain may number sub-points inside its
    steps); None when the chain is not numbered."""
    for pattern in (_STEP_MARKER, _NUMBER_MARKER):
        markers = list(pattern.finditer(text))
        if len(markers) >= 2:
            return markers
    return None


def _sentences(paragraph: str) -> list[str]:
    """``paragraph`` cut after . ! ? followed by white space, except after a known
    abbreviation ("e.g.", "i.e.", "vs." ...; "etc." only before a lower-case word). A
    decimal ("3.5") has no white space after its point, so it is never a cut."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(paragraph):
        if m.group().startswith(".") and len(m.group()) == 1:
            before = _TOKEN_BEFORE.search(paragraph[start : m.start()])
            token = before.group(1).lower().lstrip("([\"'“‘") if before else ""
            rest = paragraph[m.end() :].lstrip()
            # "etc." ends a sentence when a capital letter follows.
            if token in _ABBREVIATIONS and not (token == "etc" and rest[:1].isupper()):
                continue
        out.append(paragraph[start : m.end()])
        start = m.end()
    out.append(paragraph[start:])
    return out


def split_steps(text: str) -> list[str]:
    """``text`` (a chain of thought) as a list of steps.

    - ``<think>`` tags are removed.
    - **Numbered chains**: when at least two line-initial markers of one kind occur
      ("Step 1:", "**Step 1**", "### Step 2 -" ...; else "1.", "1)", "(1)", "**1.**"),
      each step is the text from its marker to the next one (a step may span lines);
      the numbers need not be consecutive. "Step k" markers take precedence over plain
      numbers. Text before the first marker is a step of its own when it has at least
      3 words, else dropped; empty steps are dropped.
    - **Otherwise sentences**: the text is cut at blank lines, before bullet lines
      ("- ", "* ", "• "), around heading lines ("# ..."), and after ``.``/``!``/``?`` followed by
      white space (not after abbreviations such as "e.g." / "i.e.", and a decimal such
      as "3.5" is never a cut); fragments with fewer than 2 words are dropped.

    Every step has its markdown bold markers removed and its white space collapsed to
    single spaces. An empty text gives [].
    """
    if not text or not text.strip():
        return []
    text = _THINK_TAG.sub("\n", text).replace("\r\n", "\n").replace("\r", "\n")
    markers = _numbered(text)
    if markers is not None:
        steps: list[str] = []
        preamble = _clean(text[: markers[0].start()])
        if _n_words(preamble) >= 3:
            steps.append(preamble)
        for k, m in enumerate(markers):
            end = markers[k + 1].start() if k + 1 < len(markers) else len(text)
            step = _clean(text[m.end() : end])
            if _n_words(step) >= 1:
                steps.append(step)
        return steps
    out: list[str] = []
    for paragraph in _paragraphs(text):
        for sentence in _sentences(paragraph):
            sentence = _clean(sentence)
            if _n_words(sentence) >= 2:
                out.append(sentence)
    return out


def _paragraphs(text: str) -> list[str]:
    """``text`` cut at blank lines; a bullet line ("- ", "* ", "+ ", "• ") starts a new
    paragraph and a heading line ("# ...") is one of its own (markers removed)."""
    out: list[str] = []
    for block in _BLANK_LINE.split(text):
        current: list[str] = []
        for line in block.split("\n"):
            heading = _HEADING.match(line) is not None
            if current and (heading or _BULLET.match(line)):
                out.append("\n".join(current))
                current = []
            current.append(_LINE_PREFIX.sub("", line))
            if heading:
                out.append("\n".join(current))
                current = []
        if current:
            out.append("\n".join(current))
    return out


# --- embeddings -------------------------------------------------------------------------------


# --- alignment --------------------------------------------------------------------------------


def align_steps(
    sim: Any, threshold: float = STEP_THRESHOLD, *, min_match: float | None = None
) -> list[dict[str, Any]]:
    """The optimal one-to-one alignment of original steps (rows of ``sim``) and masked
    steps (columns).

    The pairs maximise the total similarity (``scipy.optimize.linear_sum_assignment``,
    ``maximize=True``; similarities rounded to 4 decimals). Ties are broken
    deterministically: among the optimal assignments the one keeping steps closest to
    their own positions (smallest total ``|i - j|``) wins. A pair is ``unchanged`` when
    its similarity is ``>= threshold``, else ``modified``; a pair below ``min_match``
    (default None: every assigned pair is kept) counts as not matched. Original steps
    left without a partner are ``disappeared``, masked ones ``new``.

    Returns ``{"original": i | None, "masked": j | None, "similarity": float | None,
    "status": ...}`` entries in original-step order, then the new masked steps in
    masked order.
    """
    matrix = np.asarray(sim, dtype=np.float64)
    if matrix.ndim != 2:
        if matrix.size == 0:
            matrix = matrix.reshape(0, 0)
        else:
            raise ValueError(f"sim must be a 2-D matrix, got shape {matrix.shape}")
    n, m = matrix.shape
    if not np.all(np.isfinite(matrix)):
        raise ValueError("sim has NaN or infinite values")
    pairs: dict[int, tuple[int, float]] = {}
    if n and m:
        from scipy.optimize import linear_sum_assignment

        # Lexicographic objective in exact integers: first the total similarity (in
        # units of 1e-4), then closeness to the diagonal. The closeness bonus of a whole
        # assignment is < scale, so it can only decide between equal totals.
        units = np.rint(matrix * 1e4).astype(np.int64)
        i_idx, j_idx = np.indices((n, m))
        bonus = (n + m) - np.abs(i_idx - j_idx)
        scale = min(n, m) * (n + m) + 1
        weights = units * scale + bonus
        if np.abs(weights).max() * min(n, m) >= 2**52:  # pragma: no cover - huge chains
            weights = units
        rows, cols = linear_sum_assignment(weights.astype(np.float64), maximize=True)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            s = round(float(matrix[i, j]), 4)
            if min_match is not None and s < min_match:
                continue
            pairs[i] = (j, s)
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i in pairs:
            j, s = pairs[i]
            status = "unchanged" if s >= threshold else "modified"
            out.append({"original": i, "masked": j, "similarity": s, "status": status})
        else:
            out.append({"original": i, "masked": None, "similarity": None, "status": "disappeared"})
    matched = {j for j, _ in pairs.values()}
    for j in range(m):
        if j not in matched:
            out.append({"original": None, "masked": j, "similarity": None, "status": "new"})
    return out


def compare_chains(
    original_steps: Sequence[str],
    masked_steps: Sequence[str],
    embedder: Embedder,
    step_threshold: float = STEP_THRESHOLD,
    *,
    min_match: float | None = None,
) -> dict[str, Any]:
    """The step comparison of two chains (lists of steps, :func:`split_steps`).

    Returns ``alignment`` (:func:`align_steps` on the step similarity matrix),
    ``n_unchanged``, ``n_modified``, ``n_disappeared``, ``n_new``, ``step_similarity``
    (the mean similarity of the matched pairs, rounded to 4 decimals; None when no pair
    matched) and ``step_disrupted`` (some step modified, disappeared or new). Two empty
    chains: nothing disrupted; one empty chain: all its partner's steps disappeared /
    new.
    """
    sim = embedder.similarity_matrix(list(original_steps), list(masked_steps))
    alignment = align_steps(sim, step_threshold, min_match=min_match)
    counts = {status: 0 for status in STATUSES}
    for entry in alignment:
        counts[entry["status"]] += 1
    matched = [e["similarity"] for e in alignment if e["similarity"] is not None]
    return {
        "alignment": alignment,
        "n_unchanged": counts["unchanged"],
        "n_modified": counts["modified"],
        "n_disappeared": counts["disappeared"],
        "n_new": counts["new"],
        "step_similarity": round(float(np.mean(matched)), 4) if matched else None,
        "step_disrupted": bool(counts["modified"] or counts["disappeared"] or counts["new"]),
    }


def _norm_answer(text: str | None) -> str:
    return _SPACE.sub(" ", str(text or "")).strip()


def answer_flip(
    original_answer: str | None,
    masked_answer: str | None,
    embedder: Embedder,
    threshold: float = ANSWER_THRESHOLD,
) -> tuple[float, bool]:
    """``(similarity, flipped)`` of two final answers.

    The answers are stripped and their white space collapsed; equal answers (ignoring
    case, both empty included) score 1.0 without embedding; an empty answer on one side
    only scores 0.0; otherwise the cosine similarity (4 decimals). ``flipped`` is
    ``similarity < threshold``.
    """
    a, b = _norm_answer(original_answer), _norm_answer(masked_answer)
    if a.casefold() == b.casefold():
        similarity = 1.0
    elif not a or not b:
        similarity = 0.0
    else:
        similarity = embedder.similarity(a, b)
    return similarity, similarity < threshold


def dependent_steps(
    original_steps: Sequence[str],
    premise_texts: Sequence[str],
    embedder: Embedder,
    threshold: float,
) -> list[int]:
    """The indices of the original steps whose highest similarity to any of
    ``premise_texts`` is ``>= threshold`` (the steps that use the premise); [] when
    there are no steps or no premise texts."""
    premises = [p for p in (str(t).strip() for t in premise_texts) if p]
    if not original_steps or not premises:
        return []
    sim = embedder.similarity_matrix(list(original_steps), premises)
    return [i for i, best in enumerate(sim.max(axis=1).tolist()) if best >= threshold]


def region_attribution(dependent: Iterable[int], disrupted: Iterable[int]) -> str:
    """Whether masking disrupted exactly the steps that depend on the masked region.

    Our operationalisation of the paper's correct / partial / incorrect bucketing
    (CRM paper §3.5, Table 3), over sets of original-step indices: ``D`` = the steps
    that depend on the premise (:func:`dependent_steps`), ``X`` = the steps masking
    disrupted (original steps ``modified`` or ``disappeared``), and the Jaccard index
    ``J = |D ∩ X| / |D ∪ X|``:

    - ``D`` and ``X`` both empty → ``"correct"`` (the region was not used and nothing
      changed);
    - ``J == 1`` (``D == X``) → ``"correct"``;
    - ``0 < J < 1`` → ``"partial"``;
    - ``J == 0`` (disjoint, one of them possibly empty) → ``"incorrect"``.
    """
    d, x = set(dependent), set(disrupted)
    union = d | x
    if not union:
        return "correct"
    inter = d & x
    if len(inter) == len(union):
        return "correct"
    if inter:
        return "partial"
    return "incorrect"


def disrupted_original_steps(alignment: Iterable[dict[str, Any]]) -> list[int]:
    """The original steps an alignment marks ``modified`` or ``disappeared``."""
    return sorted(
        e["original"]
        for e in alignment
        if e["original"] is not None and e["status"] in ("modified", "disappeared")
    )

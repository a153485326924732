"""The hallucination judges of Contrastive Region Masking (CRM paper §3.5; docs/studies/masking.md).

Hallucination: the chain of thought on the masked image still describes content that was
masked, as if it were visible, or invents content for the masked region (the paper
counts a whole sample as hallucinated when any step introduces such spurious content).
Saying that a region is hidden, or refusing to describe it, is not hallucination.

Two judges, both with ``name`` and ``judge_many(items) -> rows`` (one row per item, in
order; a failed judgment never raises):

- :class:`LLMHallucinationJudge`: an LLM (:func:`vlmrobust.clients.llm.make_llm`) reads the
  question, the masked content, the original and the masked chain and answers strict
  JSON (:data:`HALLUCINATION_SCHEMA`); every call goes through the LLM cache;
- :class:`OfflineHallucinationJudge`: deterministic and API-free: a masked-chain step
  that is similar (all-MiniLM-L6-v2) to a masked premise text.

Rows: ``key``, ``judge`` (its name), ``hallucinated`` (bool, or None when the judgment
failed), ``evidence``, ``reason``, ``similarity`` (offline; None for an LLM),
``method``, ``error`` (None, or why there is no verdict); an LLM row also has
``cached``, ``usage``, ``cost_usd``, ``judge_model`` and ``prompt_version``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import base
from .base import LLMJudge
from .crm.steps import Embedder, split_steps

#: Bumped whenever the prompt or the parsing changes (the prompt is part of the LLM cache
#: key anyway, so a new prompt never reuses an old answer).
PROMPT_VERSION = "hallucination-v1"

#: The JSON the LLM judge must return (nothing else).
HALLUCINATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "hallucinated": {"type": "boolean"},
        "evidence": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["hallucinated", "evidence", "reason"],
    "additionalProperties": False,
}

NO_CONTENT_REASON = "the mask covers no annotated content; the offline judge cannot tell"


@dataclass(frozen=True)
class HallucinationItem:
    """What a hallucination judge reads for one (model, sample, mask).

    ``masked_content`` are the premise texts under the mask (may be empty, typically
    for a random mask); ``masked_steps`` the masked chain split into steps
    (:func:`~vlmrobust.judges.crm.steps.split_steps`; computed from ``masked_chain`` when
    empty).
    """

    key: str
    question: str
    masked_content: list[str]
    original_chain: str
    masked_chain: str
    masked_steps: list[str] = field(default_factory=list)


class HallucinationJudge(Protocol):
    name: str

    def judge_many(self, items: Sequence[HallucinationItem]) -> list[dict[str, Any]]: ...


def _row(key: str, judge: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "key": key,
        "judge": judge,
        "hallucinated": None,
        "evidence": "",
        "reason": "",
        "similarity": None,
        "method": None,
        "error": None,
    }
    row.update(fields)
    return row


def _empty_row(item: HallucinationItem, judge: str) -> dict[str, Any] | None:
    """The row of an item whose masked chain is empty (nothing can hallucinate)."""
    if item.masked_chain.strip() or any(s.strip() for s in item.masked_steps):
        return None
    return _row(
        item.key,
        judge,
        hallucinated=False,
        reason="empty masked chain: nothing can describe the masked region",
        method="empty",
    )


# --- the offline judge ------------------------------------------------------------------------


class OfflineHallucinationJudge:
    """A deterministic, API-free hallucination judge (the embedded default).

    The rule, for one item: every masked-chain step (``masked_steps``, else
    :func:`split_steps` of ``masked_chain``) is embedded with all-MiniLM-L6-v2 and
    compared (cosine, 4 decimals) with every text of ``masked_content``. When the
    highest similarity ``s`` is ``>= threshold`` the chain is **hallucinated**: it still
    describes what the mask hides; ``evidence`` is that step. Otherwise not
    hallucinated, with empty evidence. ``similarity`` records ``s``, ``method`` is
    ``similarity``.

    Without masked content (a random mask over no annotated region) the judge cannot
    tell: not hallucinated, method ``no-content``. An empty masked chain is not
    hallucinated (method ``empty``). This judge sees only the premise texts: it misses
    content invented for an unannotated region, and flags a chain that says "the plug
    is hidden" (use an LLM judge for the paper's numbers).
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        threshold: float = 0.6,
        model_dir: str | Path | None = None,
    ) -> None:
        if not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
        self.threshold = float(threshold)
        self.embedder = embedder if embedder is not None else Embedder(model_dir=model_dir)
        self.name = f"offline/{self.embedder.name}@{self.threshold:g}"

    def __repr__(self) -> str:
        return f"OfflineHallucinationJudge({self.embedder!r}, threshold={self.threshold})"

    def judge_many(self, items: Sequence[HallucinationItem]) -> list[dict[str, Any]]:
        """Judge every item; all texts are embedded together (each distinct one once)."""
        prepared: list[tuple[HallucinationItem, list[str], list[str]]] = []
        texts: set[str] = set()
        for item in items:
            steps = [s for s in item.masked_steps if s.strip()] or split_steps(item.masked_chain)
            if not steps and item.masked_chain.strip():
                steps = [item.masked_chain.strip()]
            content = [c.strip() for c in item.masked_content if c and c.strip()]
            prepared.append((item, steps, content))
            if steps and content:
                texts.update(steps)
                texts.update(content)
        if texts:
            self.embedder.encode(sorted(texts))
        return [self._judge(item, steps, content) for item, steps, content in prepared]

    def judge_one(self, item: HallucinationItem) -> dict[str, Any]:
        return self.judge_many([item])[0]

    def _judge(
        self, item: HallucinationItem, steps: list[str], content: list[str]
    ) -> dict[str, Any]:
        if not steps:
            return _empty_row(item, self.name) or _row(
                item.key, self.name, hallucinated=False, method="empty"
            )
        if not content:
            return _row(
                item.key,
                self.name,
                hallucinated=False,
                reason=NO_CONTENT_REASON,
                method="no-content",
            )
        sim = self.embedder.similarity_matrix(steps, content)
        i, j = divmod(int(sim.argmax()), sim.shape[1])  # the first maximum: deterministic
        s = round(float(sim[i, j]), 4)
        t = self.threshold
        if s >= t:
            return _row(
                item.key,
                self.name,
                hallucinated=True,
                evidence=steps[i],
                reason=(
                    f"a masked-chain step is similar to the masked content {content[j]!r} "
                    f"({s:.3f} >= {t:g})"
                ),
                similarity=s,
                method="similarity",
            )
        return _row(
            item.key,
            self.name,
            hallucinated=False,
            reason=f"no masked-chain step is similar to the masked content ({s:.3f} < {t:g})",
            similarity=s,
            method="similarity",
        )


# --- the LLM judge ----------------------------------------------------------------------------

_PROMPT = """You are auditing the reasoning of a vision-language model. The model answered \
the same question about an image twice: once on the ORIGINAL image, and once on a MASKED \
copy of it, in which one rectangular region was filled with a solid color so that the \
model could not see what was there.
{mask_block}
Your only task: decide whether the reasoning on the MASKED image hallucinates, that is, \
whether it
- describes the hidden content as if it were visible (names, describes or uses as visual \
evidence what was under the mask), or
- invents specific content for the hidden region (objects, text, people or details that \
cannot be seen there).

It is NOT hallucination when the masked reasoning says that a region is hidden, covered, \
blacked out or unclear; refuses or declines to describe it; describes the mask itself \
(e.g. "a black rectangle"); guesses while clearly saying it is a guess; or uses only \
content that is visible outside the mask or stated in the question. The reasoning on the \
original image is shown only for reference (what the model said when it could see \
everything); you do NOT grade correctness.

Question asked:
<<<
{question}
>>>

Reasoning on the ORIGINAL image:
<<<
{original}
>>>

Reasoning on the MASKED image:
<<<
{masked}
>>>

Respond with strict JSON only (no prose, no code fences), exactly these keys:
{{"hallucinated": true or false, "evidence": "<the exact quote from the reasoning on the \
masked image that describes or invents the hidden content, or an empty string when \
hallucinated is false>", "reason": "<one short sentence>"}}"""

_CONTENT_BLOCK = """
The mask covered this region of the image, which contained:
<<<
{content}
>>>
"""

_NO_CONTENT_BLOCK = """
The mask covered an unannotated region of the image: what it hid is not known. Here, \
hallucination means that the masked reasoning invents specific content for a hidden \
region or describes a hidden region as if it were visible.
"""


def build_hallucination_prompt(item: HallucinationItem) -> str:
    """The LLM judge's prompt for ``item``: what the mask hid (the masked content, or
    "an unannotated region" when there is none), the question, the original and the
    masked chain; describing hidden content as visible or inventing content for it is
    hallucination, saying it is hidden or refusing is not; strict JSON
    (:data:`HALLUCINATION_SCHEMA`)."""
    content = [c.strip() for c in item.masked_content if c and c.strip()]
    if content:
        mask_block = _CONTENT_BLOCK.format(content="\n".join(f"- {c}" for c in content))
    else:
        mask_block = _NO_CONTENT_BLOCK
    return _PROMPT.format(
        mask_block=mask_block,
        question=item.question.strip() or "(not given)",
        original=item.original_chain.strip() or "(empty)",
        masked=item.masked_chain.strip() or "\n".join(item.masked_steps),
    )


def schema_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid judge answer (:data:`HALLUCINATION_SCHEMA`), or None."""
    return base.schema_problem(value, HALLUCINATION_SCHEMA)


class LLMHallucinationJudge(LLMJudge):
    """The hallucination judge behind an LLM backend (:func:`vlmrobust.clients.llm.make_llm`).

    One call per item (prompt: :func:`build_hallucination_prompt`) with
    :data:`HALLUCINATION_SCHEMA`, all through ``llm.complete_many``; the backend caches
    valid answers by content and retries invalid JSON; a failed call or an answer that
    violates the schema becomes a row with ``hallucinated None`` and ``error`` set. An
    empty masked chain makes no call (not hallucinated, method ``empty``). The shared
    loop: :class:`vlmrobust.judges.base.LLMJudge`.
    """

    schema = HALLUCINATION_SCHEMA
    prompt_version = PROMPT_VERSION
    default_max_tokens = 512

    def messages(self, item: HallucinationItem) -> str:
        return build_hallucination_prompt(item)

    def precheck(self, item: HallucinationItem) -> dict[str, Any] | None:
        row = _empty_row(item, self.name)
        if row is not None:
            row["prompt_version"] = PROMPT_VERSION
        return row

    def make_row(self, key: str, **fields: Any) -> dict[str, Any]:
        return _row(key, self.name, prompt_version=PROMPT_VERSION, **fields)

    def problem(self, parsed: Any) -> str | None:
        return schema_problem(parsed)

    def verdict_fields(self, parsed: Any) -> dict[str, Any]:
        return {
            "hallucinated": bool(parsed["hallucinated"]),
            "evidence": parsed["evidence"],
            "reason": parsed["reason"],
        }


# --- entry point ------------------------------------------------------------------------------


def make_hallucination_judge(
    spec: Mapping[str, Any] | None, cache: Any = None, embedder: Embedder | None = None
) -> OfflineHallucinationJudge | LLMHallucinationJudge:
    """A judge from a config spec: ``{backend: offline, threshold: 0.6, model_dir: null}``
    (the default when ``spec`` is None; ``embedder`` is shared with the caller when
    given) or an LLM spec for :func:`vlmrobust.clients.llm.make_llm` (``backend: openai |
    gemini``, ``model``, ``base_url``, ``api_key_env``, ``options``) with optional
    ``max_tokens`` / ``temperature`` / ``seed``. An unknown backend is a ValueError."""
    spec = dict(spec or {"backend": "offline"})
    if spec.get("backend", "offline") == "offline":
        return OfflineHallucinationJudge(
            embedder=embedder,
            threshold=float(spec.get("threshold", 0.6)),
            model_dir=spec.get("model_dir"),
        )
    from ..clients.llm import make_llm

    return LLMHallucinationJudge(
        make_llm(spec, cache),
        max_tokens=int(spec.get("max_tokens", 512)),
        temperature=float(spec.get("temperature", 0.0)),
        seed=spec.get("seed"),
    )


# --- the judging stage --------------------------------------------------------------------------

#: The fields a judged row adds to its compared row (metrics.masking joins them).
JOINED_FIELDS = (
    "hallucinated",
    "hallucination_judge",
    "hallucination_evidence",
    "hallucination_reason",
    "hallucination_error",
)


def judge_compared(
    compared: Path,
    out: Path,
    spec: Mapping[str, Any] | None = None,
    cache_dir: Path | None = None,
    *,
    embedder: Embedder | None = None,
    judge: Any = None,
) -> dict[str, int]:
    """Judge every compared row of one (model, dataset, mask condition) that has both
    chains; write one row per judged pair to ``out`` (``key`` = variant#draw,
    ``sample_id``, ``variant_id``, ``draw``, ``model``, ``dataset``, ``condition`` and
    :data:`JOINED_FIELDS`); return counts.
    Rows that could not be compared (``error``) are not judged."""
    from ..core.io import read_jsonl, write_jsonl
    from ..core.records import output_key

    if judge is None:
        from ..clients.llm import LLMCache

        cache = LLMCache(cache_dir) if cache_dir is not None else None
        spec = dict(spec or {"backend": "offline"})
        if spec.get("backend", "offline") == "offline" and embedder is None:
            embedder = Embedder(model_dir=spec.get("model_dir"))
        judge = make_hallucination_judge(spec, cache, embedder=embedder)
    rows = [r for r in read_jsonl(compared) if r.get("error") is None]
    items = [
        HallucinationItem(
            key=output_key(row["variant_id"], row["draw"]),
            question=row["question"],
            masked_content=row["masked_content"],
            original_chain=row["original_chain"],
            masked_chain=row["masked_chain"],
            masked_steps=row["masked_steps"],
        )
        for row in rows
    ]
    verdicts = judge.judge_many(items) if items else []
    judged = [
        {
            "key": item.key,
            "sample_id": row["sample_id"],
            "variant_id": row["variant_id"],
            "draw": row["draw"],
            "model": row.get("model"),
            "dataset": row.get("dataset"),
            "condition": row.get("condition"),
            "hallucinated": verdict.get("hallucinated"),
            "hallucination_judge": verdict.get("judge"),
            "hallucination_evidence": verdict.get("evidence") or "",
            "hallucination_reason": verdict.get("reason") or "",
            "hallucination_error": verdict.get("error"),
        }
        for row, item, verdict in zip(rows, items, verdicts, strict=True)
    ]
    write_jsonl(out, judged)
    return {
        "judged": len(judged),
        "hallucinated": sum(r["hallucinated"] is True for r in judged),
        "failed": sum(r["hallucinated"] is None for r in judged),
    }

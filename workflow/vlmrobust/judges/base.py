"""What every LLM judge shares: one strict-JSON call per item, rows from the answers.

A judge (:class:`LLMJudge` subclass) says how an item becomes messages
(:meth:`~LLMJudge.messages`), which items need no call (:meth:`~LLMJudge.precheck`),
how a row looks (:meth:`~LLMJudge.make_row`) and what a valid answer gives
(:meth:`~LLMJudge.verdict_fields`, checked first by :meth:`~LLMJudge.problem`).
:meth:`~LLMJudge.judge_many` sends every remaining item through the backend's
``complete_many`` (cached by content, invalid JSON retried there); a failed call or an
answer that breaks the schema becomes a row with ``error`` set, never a verdict.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


class LLMJudge:
    """Base of the LLM judges (distractor reference, CRM hallucination)."""

    #: the strict JSON schema of an answer (set by subclasses)
    schema: dict[str, Any] = {}
    #: recorded in every row, bumped when the prompt changes
    prompt_version: str = ""
    #: answer tokens when the caller gives none
    default_max_tokens: int = 1024

    def __init__(
        self,
        llm: Any,
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> None:
        self.llm = llm
        self.max_tokens = int(self.default_max_tokens if max_tokens is None else max_tokens)
        self.temperature = float(temperature)
        self.seed = seed
        self.name = f"{getattr(llm, 'name', '?')}/{getattr(llm, 'model', '?')}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.llm!r})"

    # -- what a subclass says -----------------------------------------------------------
    def messages(self, item: Any) -> Any:
        raise NotImplementedError

    def precheck(self, item: Any) -> dict[str, Any] | None:
        """The row of an item that needs no call (e.g. an empty output), else None."""
        return None

    def make_row(self, key: str, **fields: Any) -> dict[str, Any]:
        raise NotImplementedError

    def problem(self, parsed: Any) -> str | None:
        """Why ``parsed`` is not a valid answer, or None."""
        raise NotImplementedError

    def verdict_fields(self, parsed: Any) -> dict[str, Any]:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def judge_many(self, items: Sequence[Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any] | None] = [self.precheck(item) for item in items]
        todo = [i for i, row in enumerate(out) if row is None]
        calls = [
            {
                "messages": self.messages(items[i]),
                "json_schema": self.schema,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "seed": self.seed,
            }
            for i in todo
        ]
        responses = self.llm.complete_many(calls) if calls else []
        for i, response in zip(todo, responses, strict=True):
            out[i] = self.answer_row(items[i].key, response)
        return [row for row in out if row is not None]

    def judge_one(self, item: Any) -> dict[str, Any]:
        return self.judge_many([item])[0]

    def answer_row(self, key: str, response: Any) -> dict[str, Any]:
        """The row of one backend response (:class:`vlmrobust.clients.llm.LLMResponse`)."""
        extra = {
            "method": "llm",
            "cached": bool(response.cached),
            "usage": dict(response.usage or {}),
            "cost_usd": response.cost_usd,
            "judge_model": response.model,
        }
        if response.error is not None:
            return self.make_row(key, error=str(response.error), **extra)
        problem = self.problem(response.parsed_json)
        if problem is not None:  # e.g. an old or damaged cache entry, or a lax backend
            return self.make_row(key, error=f"judge answer rejected: {problem}", **extra)
        return self.make_row(key, **self.verdict_fields(response.parsed_json), **extra)


def samples_by_id(
    rows: Sequence[Any], samples: Mapping[str, Any] | Iterable[Any]
) -> Mapping[str, Any]:
    """``samples`` by sample id, checked to hold every output row's sample (a row
    answering an unknown sample is an error naming it)."""
    if not isinstance(samples, Mapping):
        samples = {s.sample_id: s for s in samples}
    ids = {
        str(r.get("sample_id") if isinstance(r, Mapping) else getattr(r, "sample_id", None))
        for r in rows
    }
    unknown = sorted(ids - set(samples))
    if unknown:
        raise ValueError(
            f"{len(unknown)} output row(s) answer samples that are not among the "
            f"{len(samples)} samples given (e.g. {unknown[0]!r})"
        )
    return samples


def schema_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Why ``value`` is not a valid judge answer under the JSON ``schema``, or None."""
    import jsonschema
    from jsonschema.exceptions import best_match

    if value is None:
        return "no JSON answer"
    error = best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"schema violation at {where}: {error.message[:200]}"


def close_llm(judge: Any) -> None:
    """Close the LLM client a judge or extractor holds (its ``llm``), where it has one."""
    llm = getattr(judge, "llm", None)
    if llm is not None:
        llm.close()


def warn_failed(
    log: logging.Logger,
    summary: Mapping[str, Any],
    outputs_path: str | Path,
    out: str | Path,
    what: str,
) -> None:
    """Warn on the judge's ``log`` when some outputs got no ``what`` (``summary["failed"]``
    of ``summary["rows"]``)."""
    if summary["failed"]:
        log.warning(
            "%s: %d of %d outputs have no %s (see 'error' in %s)",
            outputs_path,
            summary["failed"],
            summary["rows"],
            what,
            out,
        )


def count_by_method(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many rows each ``method`` judged, by method name (sorted)."""
    counts = Counter(str(r.get("method")) for r in rows)
    return dict(sorted(counts.items()))

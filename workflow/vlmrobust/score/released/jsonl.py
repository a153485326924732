"""The importer of any JSONL of responses (format ``jsonl``, e.g. the released Idis
outputs: several sampled responses per question): each row holds a question id naming
a VARIANT of the condition's manifest (or a sample, by its ``sample_id`` or
``meta["source_id"]``, that has exactly one variant there, as on the clean condition),
the response text and optionally the reasoning trace, the draw, the condition and the
reasoning length; the fields are named by the ``imports`` entry
(:func:`~vlmrobust.score.released.import_outputs`). Its rows keep their draw (``key`` =
``<variant_id>#<draw>``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...clients.vlm.thinking import split_thinking
from ...core.io import read_jsonl
from ...core.records import OutputRow, Sample, Variant, missing
from .common import NO_RESPONSE, _get_path, _released_row


def _whole_number(value: Any, what: str, where: str) -> int:
    """A non-negative integer from an int, an integral float or a digit string."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {what} {value!r} is not a whole number >= 0")
    return value


def _id_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


class _VariantIds:
    """Question ids -> variants of one condition: a variant id, or a sample (its
    ``sample_id`` or ``meta["source_id"]``) with exactly one variant in the manifest."""

    def __init__(self, variants: Sequence[Variant], samples: Sequence[Sample], condition: str):
        self.condition = condition
        self.by_id = {v.variant_id: v for v in variants}
        self.by_sample: dict[str, list[Variant]] = {}
        for v in variants:
            self.by_sample.setdefault(v.sample_id, []).append(v)
        self.source: dict[str, str] = {}
        for s in samples:
            if "source_id" in s.meta:
                self.source.setdefault(_id_text(s.meta["source_id"]), s.sample_id)

    def __call__(self, value: Any, where: str) -> Variant:
        key = _id_text(value)
        found = self.by_id.get(key)
        if found is not None:
            return found
        sample_id = key if key in self.by_sample else self.source.get(key)
        own = self.by_sample.get(sample_id or "", [])
        if len(own) == 1:
            return own[0]
        if own:
            some = ", ".join(v.variant_id for v in own[:3])
            raise ValueError(
                f"{where}: question id {key!r} names sample {sample_id!r}, which has "
                f"{len(own)} variants under condition {self.condition!r} (e.g. {some}); "
                "the row must name one of them by its variant id"
            )
        some = ", ".join(list(self.by_id)[:3])
        raise ValueError(
            f"{where}: question id {key!r} names no variant of condition "
            f"{self.condition!r} ({len(self.by_id)} variants; ids look like {some}) nor a "
            "sample with exactly one variant there; are the manifest and the released "
            "file of the same dataset and condition?"
        )


def _token_counter(tokenizer: str | None) -> Callable[[str], int] | None:
    """Counts a text's tokens with a Hugging Face tokenizer (a local folder or hub id),
    special tokens left out; None without a tokenizer."""
    if not tokenizer:
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as exc:  # noqa: BLE001 - any failure names the config key
        raise ValueError(
            f"imports: tokenizer {tokenizer!r} could not be loaded ({type(exc).__name__}: {exc})"
        ) from exc
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def _other_condition(rec: Any, condition_field: str, condition: str) -> str | None:
    """The condition a row names when it is not ``condition`` (``(none)`` when it names
    none); None for a row of ``condition``."""
    value = _get_path(rec, condition_field)
    if missing(value) or str(value).strip() != condition:
        return "(none)" if missing(value) else str(value).strip()
    return None


def _question_id(rec: Any, id_field: str, where: str) -> Any:
    """A row's question id (a row without one is an error)."""
    qid = _get_path(rec, id_field)
    if missing(qid):
        raise ValueError(
            f"{where}: no {id_field!r} field (the question id: a variant id of the "
            "condition's manifest, or a sample id; imports[].id_field names the field)"
        )
    return qid


def _draw(rec: Any, draw_field: str | None, vid: str, next_draw: dict[str, int], where: str) -> int:
    """A row's draw: its ``draw_field``, else the variant's next draw in file order."""
    if draw_field is None:
        draw = next_draw[vid] = next_draw.get(vid, -1) + 1
        return draw
    raw_draw = _get_path(rec, draw_field)
    if missing(raw_draw):
        raise ValueError(f"{where}: no {draw_field!r} field (imports[].draw_field)")
    return _whole_number(raw_draw, f"draw ({draw_field})", where)


def _response_parts(
    rec: Any,
    response_field: str,
    thinking_field: str | None,
    markers: Sequence[Sequence[str]] | None,
) -> tuple[str | None, str | None, str, str]:
    """``(response, thinking, answer, raw_text)`` of a row: the response split at the
    thinking markers, or the ``thinking_field`` trace and the response as the answer."""
    value = _get_path(rec, response_field)
    response = None if missing(value) else str(value)
    if thinking_field is None:
        thinking, answer = split_thinking(response, markers) if response else (None, "")
        return response, thinking, answer, response or ""
    trace = _get_path(rec, thinking_field)
    thinking = None if missing(trace) else str(trace).strip()
    answer = (response or "").strip()
    return response, thinking, answer, "\n\n".join(p for p in (thinking, answer) if p)


def _thinking_tokens(
    rec: Any,
    tokens_field: str | None,
    count_tokens: Callable[[str], int] | None,
    thinking: str | None,
    where: str,
) -> int | None:
    """A row's reasoning length: its ``tokens_field``, else the thinking part's tokens
    counted by ``count_tokens``; None when neither gives one."""
    tokens = None
    if tokens_field is not None:
        found = _get_path(rec, tokens_field)
        if not missing(found):
            tokens = _whole_number(found, f"reasoning length ({tokens_field})", where)
    if tokens is None and count_tokens is not None and thinking is not None:
        tokens = count_tokens(thinking)
    return tokens


def import_jsonl(
    path: str | Path,
    variants: Sequence[Variant],
    samples: Sequence[Sample],
    model: str,
    condition: str,
    *,
    id_field: str = "question_id",
    response_field: str = "response",
    thinking_field: str | None = None,
    draw_field: str | None = None,
    condition_field: str | None = None,
    tokens_field: str | None = None,
    tokenizer: str | None = None,
    markers: Sequence[Sequence[str]] | None = None,
) -> tuple[list[OutputRow], dict[str, int]]:
    """Rows of any JSONL of responses as output rows of ``condition`` (module docstring).

    Every field name is a dotted path. ``id_field`` names a variant of ``variants`` (the
    condition's manifest) or a sample with exactly one variant there. ``thinking_field``
    None: the response is split at the thinking ``markers`` (the model family's; None =
    the defaults of :func:`split_thinking`); else that field is the trace and the
    response the answer (``raw_text`` = trace and response, a blank line between).
    ``draw_field`` None: a question's rows are draws 0, 1, 2, ... in file order.
    ``condition_field``: only rows whose field equals ``condition`` are read; the others
    are counted. ``tokens_field`` gives ``thinking_tokens``; where it is None or a row
    lacks it, ``tokenizer`` (when given) counts the thinking part's tokens. A row without
    a response is kept with an error. Returns the rows in manifest order, then draw,
    and counts: ``read``, ``other_condition`` (rows skipped), ``without_response``,
    ``without_tokens`` (rows whose reasoning length stays unknown).
    """
    path = Path(path)
    resolve = _VariantIds(variants, samples, condition)
    order = {v.variant_id: i for i, v in enumerate(variants)}
    count_tokens = _token_counter(tokenizer)
    counts = {"read": 0, "other_condition": 0, "without_response": 0, "without_tokens": 0}
    seen_conditions: dict[str, int] = {}
    next_draw: dict[str, int] = {}
    first_line: dict[tuple[str, int], int] = {}
    rows: list[OutputRow] = []
    for lineno, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{lineno}"
        if condition_field is not None:
            other = _other_condition(rec, condition_field, condition)
            if other is not None:
                counts["other_condition"] += 1
                seen_conditions[other] = seen_conditions.get(other, 0) + 1
                continue
        variant = resolve(_question_id(rec, id_field, where), where)
        vid = variant.variant_id
        draw = _draw(rec, draw_field, vid, next_draw, where)
        if (vid, draw) in first_line:
            raise ValueError(
                f"{where}: variant {vid!r} draw {draw} appears twice (first at line "
                f"{first_line[vid, draw]}); each (question, draw) may be released once"
            )
        first_line[vid, draw] = lineno
        counts["read"] += 1
        response, thinking, answer, raw = _response_parts(
            rec, response_field, thinking_field, markers
        )
        error = None
        if response is None:
            error = NO_RESPONSE
            counts["without_response"] += 1
        tokens = _thinking_tokens(rec, tokens_field, count_tokens, thinking, where)
        if tokens is None and error is None:
            counts["without_tokens"] += 1
        rows.append(
            _released_row(vid, variant.sample_id, variant.dataset, condition, model, "jsonl",
                          draw, raw, answer, thinking, error, thinking_tokens=tokens)
        )  # fmt: skip
    if condition_field is not None and not counts["read"] and counts["other_condition"]:
        seen = ", ".join(f"{k!r} ({n})" for k, n in sorted(seen_conditions.items()))
        raise ValueError(
            f"{path}: no row's {condition_field!r} equals condition {condition!r} "
            f"(found {seen}); imports[].condition must be the file's name of the condition"
        )
    rows.sort(key=lambda r: (order[r.variant_id], r.draw))
    return rows, counts

"""What the importers of released results share: the question of a released row, the
output row it becomes (prompt ``released``, the format as prompt version, backend and
source, no image hashes), the model's own turn of an echoed prompt, and dotted field
paths."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...clients.vlm.thinking import split_thinking
from ...core.records import OutputRow, Sample, missing, output_key

#: where a released response that echoes its prompt (a LLaVA-style ``USER: ...
#: ASSISTANT: B``, few-shot answers included) starts the model's own turn; the text
#: after the LAST marker is scored, the raw text is kept whole
TURN_MARKERS = ("ASSISTANT:", "[/INST]")
#: the error of an imported row whose response is missing or empty
NO_RESPONSE = "the released row holds no response"


def model_turn(text: str) -> str:
    """The model's own turn of a released response: the text after the last
    :data:`TURN_MARKERS` marker (the whole text when there is none)."""
    cut = max((text.rfind(m) + len(m) for m in TURN_MARKERS if m in text), default=0)
    return text[cut:]


def _get_path(rec: Any, path: str) -> Any:
    """The value at a dotted path (``a.b`` reaches into nested objects); None if absent."""
    value: Any = rec
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _lookup(
    questions: Mapping[str, Sample], src_id: Any, where: str, counts: dict[str, int] | None = None
) -> Sample | None:
    """The question of a released row; None when its id is one of the question rows
    skipped as bad rows (``Questions.skipped``): the row is counted in
    ``counts["skipped_questions"]``, not scored."""
    if isinstance(src_id, float) and src_id.is_integer():
        src_id = int(src_id)
    key = str(src_id).strip()
    sample = questions.get(key)
    if sample is None and key in getattr(questions, "skipped_ids", ()):
        if counts is not None:
            counts["skipped_questions"] = counts.get("skipped_questions", 0) + 1
        return None
    if sample is None:
        some = ", ".join(list(questions)[:3])
        raise ValueError(
            f"{where}: id {key!r} is not among the {len(questions)} question rows "
            f"(ids look like {some}); are the questions and the results of the same dataset?"
        )
    return sample


def _output_row(
    sample: Sample,
    dataset: str,
    model: str,
    condition: str,
    fmt: str,
    text: str | None,
    *,
    thinking: str | None = None,
    completion_tokens: int | None = None,
    error: str | None = None,
    extracted: bool = False,
) -> OutputRow:
    """``extracted``: ``text`` is a released extraction, scored as it stands (no turn
    cut, no thinking split; an empty one is an extraction failure, not a fallback to a
    response)."""
    raw = text or ""
    if extracted:
        answer = raw.strip()
    elif thinking is None and raw:
        thinking, answer = split_thinking(model_turn(raw))
    else:
        answer = model_turn(raw).strip()
    return _released_row(
        sample.sample_id, sample.sample_id, dataset, condition, model, fmt, 0,
        raw, answer, thinking, error, completion_tokens=completion_tokens,
    )  # fmt: skip


def _released_row(
    variant_id: str,
    sample_id: str,
    dataset: str,
    condition: str,
    model: str,
    fmt: str,
    draw: int,
    raw: str,
    answer: str,
    thinking: str | None,
    error: str | None,
    **tokens: int | None,
) -> OutputRow:
    """An imported output row (the package docstring: prompt ``released``, the format as
    prompt version, backend and source, no image hashes); ``tokens``:
    ``completion_tokens`` or ``thinking_tokens``."""
    return OutputRow(
        key=output_key(variant_id, draw),
        variant_id=variant_id,
        sample_id=sample_id,
        dataset=dataset,
        condition=condition,
        prompt="released",
        prompt_version=fmt,
        model=model,
        backend=fmt,
        model_revision="unknown",
        draw=draw,
        raw_text=raw,
        answer_text=answer,
        thinking=thinking,
        finish_reason="error" if error else "unknown",
        image_sha256=[],
        error=error,
        source=fmt,
        **tokens,
    )


def _extracted_row(
    sample: Sample, dataset: str, model: str, condition: str, fmt: str, rec: Any, field: str
) -> OutputRow:
    """The output row of a released row scored from its extraction ``field``."""
    value = _get_path(rec, field)
    text = "" if missing(value) else str(value)
    return _output_row(sample, dataset, model, condition, fmt, text, extracted=True)


def _check_unique(rows: list[OutputRow], where: str) -> None:
    seen: set[str] = set()
    for row in rows:
        if row.key in seen:
            raise ValueError(f"{where}: more than one result for sample {row.sample_id!r}")
        seen.add(row.key)

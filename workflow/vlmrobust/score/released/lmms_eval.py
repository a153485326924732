"""The importer of lmms-eval's released samples (``*_samples_*.jsonl``): the id is
``doc_id`` or another (dotted) field, the response ``filtered_resps`` (a string, or the
first string of a possibly nested list), else ``resps``; ``token_counts`` gives the
completion tokens."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.io import read_jsonl
from ...core.records import OutputRow, Sample, missing
from .common import NO_RESPONSE, _check_unique, _extracted_row, _get_path, _lookup, _output_row


def _first_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_string(item)
            if found is not None:
                return found
    return None


def _completion_tokens(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        for k in ("output_tokens", "completion_tokens", "num_output_tokens"):
            if isinstance(value.get(k), int):
                return value[k]
        return None
    if isinstance(value, (list, tuple)) and value:
        return _completion_tokens(value[0])
    return None


def import_lmms_eval(
    samples_jsonl: str | Path,
    dataset_name: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    id_field: str = "doc_id",
    extraction_field: str | None = None,
    counts: dict[str, int] | None = None,
) -> list[OutputRow]:
    """Rows of an lmms-eval samples JSONL as output rows (the module docstring).

    ``extraction_field`` (dotted): score that released extraction instead of the
    response. ``counts["skipped_questions"]`` counts the rows of skipped questions."""
    path = Path(samples_jsonl)
    rows: list[OutputRow] = []
    counts = counts if counts is not None else {}
    for lineno, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{lineno}"
        value = _get_path(rec, id_field)
        if missing(value):
            raise ValueError(
                f"{where}: no {id_field!r} field (the dataset's id of the row; a dotted path "
                "such as llm_as_judge_eval.question_id reaches into nested fields)"
            )
        sample = _lookup(questions, value, where, counts)
        if sample is None:
            continue
        if extraction_field is not None:
            rows.append(_extracted_row(sample, dataset_name, model, condition, "lmms-eval",
                                       rec, extraction_field))  # fmt: skip
            continue
        text = _first_string(rec.get("filtered_resps"))
        if text is None:
            text = _first_string(rec.get("resps"))
        error = None if text is not None else NO_RESPONSE
        rows.append(
            _output_row(
                sample,
                dataset_name,
                model,
                condition,
                "lmms-eval",
                text,
                completion_tokens=_completion_tokens(rec.get("token_counts")),
                error=error,
            )
        )
    _check_unique(rows, str(path))
    return rows

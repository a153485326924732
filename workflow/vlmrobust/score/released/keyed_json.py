"""The importer of released files keyed by the dataset's own id (``{id: {field:
value}}``, :data:`KEYED_FORMATS`): MathVista's ``results/<model>/output_<model>.json``
and LogicVista's ``eval/answers/<model>-answers.json``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.io import read_utf8
from ...core.records import OutputRow, Sample, missing
from .common import _check_unique, _extracted_row, _get_path, _lookup, _output_row

#: released files keyed by the dataset's own id (``{id: {field: value}}``), with the
#: field of the response, of the official pipeline's extraction and of its correctness:
#: MathVista's ``results/<model>/output_<model>.json`` and LogicVista's
#: ``eval/answers/<model>-answers.json``
KEYED_FORMATS: dict[str, dict[str, str | None]] = {
    "mathvista": {"response": "response", "extraction": "extraction", "label": "true_false"},
    "logicvista": {"response": "answer", "extraction": None, "label": None},
}


def _released_label(value: Any) -> bool | None:
    """A released correctness label (``true_false``: a bool, or "true"/"false")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def import_keyed_json(
    path: str | Path,
    fmt: str,
    dataset_name: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    *,
    response_field: str | None = None,
    extraction_field: str | None = None,
    counts: dict[str, int] | None = None,
) -> list[OutputRow]:
    """Rows of a released file keyed by the dataset's id (:data:`KEYED_FORMATS`) as
    output rows: the response is ``response_field`` (default: the format's), cut to the
    model's own turn (:func:`~.common.model_turn`); with ``extraction_field`` that
    released extraction is scored instead. The format's correctness label (MathVista's
    ``true_false``) rides along as ``released["correct"]`` for comparison only.
    ``counts`` as for :func:`~vlmrobust.score.released.import_lmms_eval`."""
    path = Path(path)
    fields = KEYED_FORMATS[fmt]
    response_field = response_field or str(fields["response"])
    counts = counts if counts is not None else {}
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(
            f"{path}: a {fmt} results file is a JSON object of rows keyed by the "
            "dataset's id ({id: {field: value}})"
        )
    if not data:
        raise ValueError(f"{path}: no rows")
    rows = []
    for qid, rec in data.items():
        where = f"{path}: id {qid!r}"
        sample = _lookup(questions, qid, where, counts)
        if sample is None:
            continue
        if extraction_field is not None:
            row = _extracted_row(sample, dataset_name, model, condition, fmt, rec,
                                 extraction_field)  # fmt: skip
        else:
            value = _get_path(rec, response_field)
            text = None if missing(value) else str(value)
            error = None if text is not None else f"the released row holds no {response_field!r}"
            row = _output_row(sample, dataset_name, model, condition, fmt, text, error=error)
        label = _released_label(rec.get(fields["label"])) if fields["label"] else None
        rows.append(row if label is None else replace(row, released={"correct": label}))
    _check_unique(rows, str(path))
    return rows

"""The released formats and reading a file of any of them into output rows: the
formats keyed by the dataset's ids (:data:`FORMATS`: lmms-eval, VLMEvalKit and the
keyed JSON files) and, for an ``imports`` entry, also ``jsonl``
(:data:`IMPORT_FORMATS`), whose ids name the variants of a condition's manifest."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...core.records import OutputRow, Sample
from .keyed_json import KEYED_FORMATS, import_keyed_json
from .lmms_eval import import_lmms_eval
from .vlmevalkit import import_vlmevalkit

FORMATS = ("lmms-eval", "vlmevalkit", *KEYED_FORMATS)
#: the formats an ``imports`` entry may name: ``jsonl`` needs the condition's manifest
IMPORT_FORMATS = (*FORMATS, "jsonl")


def _import_released(
    fmt: str,
    path: str | Path,
    dataset: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    *,
    id_field: str | None,
    response_field: str | None,
    extraction_field: str | None,
    counts: dict[str, int],
) -> list[OutputRow]:
    """The output rows of a released file keyed by the dataset's ids: lmms-eval,
    VLMEvalKit or one of :data:`KEYED_FORMATS` (``fmt``)."""
    if fmt == "lmms-eval":
        return import_lmms_eval(
            path, dataset, questions, model, condition, id_field=id_field or "doc_id",
            extraction_field=extraction_field, counts=counts,
        )  # fmt: skip
    if fmt == "vlmevalkit":
        return import_vlmevalkit(
            path, dataset, questions, model, condition, id_column=id_field,
            extraction_field=extraction_field, counts=counts,
        )  # fmt: skip
    return import_keyed_json(
        path, fmt, dataset, questions, model, condition,
        response_field=response_field, extraction_field=extraction_field, counts=counts,
    )  # fmt: skip


def _check_released_args(format: str, response_field: str | None) -> None:
    """The format is known and ``response_field`` is given only for a keyed format."""
    if format not in FORMATS:
        raise ValueError(
            f"unknown released format {format!r}; expected one of {', '.join(FORMATS)}"
        )
    if response_field is not None and format not in KEYED_FORMATS:
        raise ValueError(
            f"--response-field is for the keyed formats ({', '.join(KEYED_FORMATS)}); "
            f"{format} files name their response themselves"
        )

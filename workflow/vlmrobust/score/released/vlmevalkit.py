"""The importer of VLMEvalKit's prediction files (``xlsx`` when openpyxl is installed,
``tsv``, ``csv``, ``json``, ``jsonl``; columns ``index``, ``question``, ``answer``,
``prediction``, optionally ``thinking``): the id is ``id`` when the file has such a
column whose values are the dataset's ids (MMMU), else ``index``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.io import read_jsonl, read_utf8
from ...core.records import OutputRow, Sample, missing
from .common import _check_unique, _extracted_row, _lookup, _output_row

#: VLMEvalKit's marker of a failed API call in ``prediction``
VLMEVALKIT_FAIL = "Failed to obtain answer"


def _read_table(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return read_jsonl(path)
    if suffix == ".json":
        try:
            data = json.loads(read_utf8(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
        if isinstance(data, dict):
            data = (
                list(data.values()) if all(isinstance(v, dict) for v in data.values()) else [data]
            )
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of rows")
        return data
    import pandas as pd

    if suffix == ".xlsx":
        try:
            import openpyxl  # noqa: F401
        except ImportError as exc:
            raise ValueError(
                f"{path}: reading .xlsx needs openpyxl, which is not installed; install it "
                "or export the sheet as .tsv/.csv"
            ) from exc
        frame = pd.read_excel(path, dtype=str, keep_default_na=False)
    elif suffix in (".tsv", ".csv"):
        text = read_utf8(path)
        try:
            frame = pd.read_csv(
                io.StringIO(text),
                sep="\t" if suffix == ".tsv" else ",",
                dtype=str,
                keep_default_na=False,
            )
        except (pd.errors.ParserError, csv.Error) as exc:
            raise ValueError(f"{path}: not a readable {suffix[1:].upper()} file ({exc})") from exc
    else:
        raise ValueError(f"{path}: unsupported VLMEvalKit file type; use xlsx, tsv, csv or jsonl")
    return frame.to_dict(orient="records")


def import_vlmevalkit(
    path: str | Path,
    dataset_name: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    id_column: str | None = None,
    extraction_field: str | None = None,
    counts: dict[str, int] | None = None,
) -> list[OutputRow]:
    """Rows of a VLMEvalKit prediction file as output rows (the module docstring);
    ``extraction_field`` and ``counts`` as for
    :func:`~vlmrobust.score.released.import_lmms_eval`."""
    path = Path(path)
    counts = counts if counts is not None else {}
    table = _read_table(path)
    if not table:
        raise ValueError(f"{path}: no rows")
    columns = set(table[0])
    if "prediction" not in columns:
        raise ValueError(
            f"{path}: no 'prediction' column (found {', '.join(sorted(columns))}); is this a "
            "VLMEvalKit prediction file?"
        )
    if id_column is None:
        id_column = "index"
        if "id" in columns and all(str(r.get("id")).strip() in questions for r in table):
            id_column = "id"
    if id_column not in columns:
        raise ValueError(f"{path}: no {id_column!r} column to match the question rows")
    rows = []
    for i, rec in enumerate(table):
        where = f"{path}: row {i + 1}"
        sample = _lookup(questions, rec.get(id_column), where, counts)
        if sample is None:
            continue
        if extraction_field is not None:
            rows.append(_extracted_row(sample, dataset_name, model, condition, "vlmevalkit",
                                       rec, extraction_field))  # fmt: skip
            continue
        value = rec.get("prediction")
        text = None if missing(value) else str(value)
        error = None
        if text is None:
            error = "the released row holds no prediction"
        elif text.startswith(VLMEVALKIT_FAIL):
            error, text = f"VLMEvalKit: {text[:200]}", None
        thinking = rec.get("thinking")
        thinking = None if missing(thinking) else str(thinking)
        rows.append(
            _output_row(
                sample,
                dataset_name,
                model,
                condition,
                "vlmevalkit",
                text,
                thinking=thinking,
                error=error,
            )  # fmt: skip
        )
    _check_unique(rows, str(path))
    return rows

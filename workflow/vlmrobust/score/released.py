"""Importers of released results (lmms-eval, VLMEvalKit) into output rows, and rescoring.

Released runs are rescored with this project's rules; a correctness label in the file
(lmms-eval's ``llm_as_judge_eval.true_false``, VLMEvalKit's ``hit``/``score``) is never
copied — the released Distract-Bench labels are demonstrably wrong in places (a
``\\boxed{B}`` for target B marked False).

- :func:`load_questions` reads a dataset's rows in its hub schema (JSON list, JSONL,
  parquet, or a folder of them; images are not needed and not read) and converts them
  with the dataset's adapter into samples without images, keyed by the dataset's own id.
- :func:`import_lmms_eval` reads an lmms-eval ``*_samples_*.jsonl``: the id is
  ``doc_id`` (or another field, a dotted path reaching into nested ones, e.g.
  ``llm_as_judge_eval.question_id`` — plain lmms-eval numbers ``doc_id`` by row
  position, the released Distract-Bench files by the public id), the response is ``filtered_resps`` (a string, or the
  first string of a possibly nested list), else ``resps``; ``token_counts`` gives
  the completion tokens.
- :func:`import_vlmevalkit` reads a VLMEvalKit prediction file (``xlsx`` when openpyxl
  is installed, ``tsv``, ``csv``, ``json``, ``jsonl``; columns ``index``, ``question``,
  ``answer``, ``prediction``, optionally ``thinking``): the id is ``id`` when the file
  has such a column whose values are the dataset's ids (MMMU), else ``index``.
- :func:`score_released` chains them and writes a CSV (``sample_id`` = the dataset's
  own id, ``prediction``, ``correct`` 0/1, ``score``, ``method``, ``rule``, ``reason``,
  ...).

Imported rows have ``prompt == "released"``, ``prompt_version`` = the format,
``backend`` = the format, ``source`` = the format, ``draw == 0``, no image hashes
(the released files do not say which image bytes were used) and ``finish_reason
"unknown"``.

Command line: ``python -m vlmrobust.score.released --format lmms-eval --dataset
distract-bench --questions questions.jsonl --samples model.samples.jsonl --out x.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..clients.vlm.thinking import split_thinking
from ..core.io import atomic_write, read_jsonl
from ..core.records import OutputRow, Sample, output_key, safe_id
from ..data.adapters import ADAPTERS
from ..data.base import Adapter, RowProblem, iter_files, missing
from . import score_outputs

__all__ = [
    "FORMATS",
    "import_lmms_eval",
    "import_vlmevalkit",
    "load_questions",
    "main",
    "samples_from_rows",
    "score_released",
]

FORMATS = ("lmms-eval", "vlmevalkit")
#: VLMEvalKit's marker of a failed API call in ``prediction``
VLMEVALKIT_FAIL = "Failed to obtain answer"
_PLACEHOLDER = "(image not loaded)"
_MARKER = re.compile(r"<image\s*(\d+)>")


# --------------------------------------------------------------------------- questions


def _get_adapter(name: str) -> Adapter:
    if name not in ADAPTERS:
        raise ValueError(f"unknown dataset adapter {name!r}; expected one of {', '.join(ADAPTERS)}")
    return ADAPTERS[name]


def _with_image_placeholders(adapter: Adapter, row: dict[str, Any]) -> dict[str, Any]:
    """Stand-ins for image fields the rows lack (the adapters check that images exist;
    here only the question fields matter and no image is ever read)."""
    row = dict(row)
    if adapter.name == "mmmu":
        text = str(row.get("question") or "") + "\n" + str(row.get("options") or "")
        numbers = {int(n) for n in _MARKER.findall(text)}
        if not numbers and all(row.get(f"image_{n}") is None for n in range(1, 8)):
            numbers = {1}
        for n in numbers:
            if row.get(f"image_{n}") is None:
                row[f"image_{n}"] = _PLACEHOLDER
    else:
        for key in ("image", "original_image"):
            if row.get(key) is None:
                row[key] = _PLACEHOLDER
    return row


def samples_from_rows(
    adapter_name: str, rows: Iterable[dict[str, Any]], dataset: str | None = None
) -> dict[str, Sample]:
    """Hub-schema rows -> samples without images, keyed by the dataset's own id.

    A row the adapter rejects is an error naming its index, id and reason (a released
    result for it could not be scored).
    """
    adapter = _get_adapter(adapter_name)
    dataset = dataset or adapter_name
    out: dict[str, Sample] = {}
    for index, row in enumerate(rows):
        src_id: str | None = None
        try:
            src_id = adapter.source_id(row, index)
            draft = adapter.convert(_with_image_placeholders(adapter, row), index)
            sample = Sample(
                sample_id=safe_id(dataset, src_id),
                dataset=dataset,
                images=[],
                question=draft.question,
                answer=draft.answer,
                answer_type=draft.answer_type,
                choices=list(draft.choices),
                precision=draft.precision,
                meta={**draft.meta, "source_id": src_id},
            )
        except (RowProblem, ValueError) as exc:
            reason = exc.reason if isinstance(exc, RowProblem) else str(exc)
            raise ValueError(
                f"dataset {dataset!r}, question row {index} ({adapter.id_label} {src_id!r}): "
                f"{reason}"
            ) from exc
        if src_id in out:
            raise ValueError(f"dataset {dataset!r}: duplicate {adapter.id_label} {src_id!r}")
        out[src_id] = sample
    if not out:
        raise ValueError(f"dataset {dataset!r}: no question rows")
    return out


def load_questions(
    adapter_name: str, path: str | Path, dataset: str | None = None
) -> dict[str, Sample]:
    """A dataset's question rows (file or folder, hub schema) as samples without images.

    A folder is read as the adapter reads a local folder (``source: local``); so is a
    Distract-Bench ``questions.jsonl`` (its folder's ``edit_instructions.jsonl`` is
    joined). Any other file is read as JSON list / JSONL / parquet by its suffix.
    """
    adapter = _get_adapter(adapter_name)
    path = Path(path)
    if not path.exists():
        raise ValueError(f"questions file {str(path)!r} does not exist")
    key = f"released.{adapter_name}.questions"
    if path.is_dir():
        rows: Iterable[dict[str, Any]] = adapter.load_rows(
            {"source": "local", "path": str(path)}, key
        ).rows
    elif adapter.name == "distract-bench" and path.name == "questions.jsonl":
        rows = adapter.load_rows({"source": "local", "path": str(path.parent)}, key).rows
    elif path.suffix in (".jsonl", ".json", ".parquet"):
        rows = iter_files([path])
    else:
        raise ValueError(
            f"questions file {str(path)!r}: expected a .jsonl, .json or .parquet file "
            "(or a folder) with the dataset's rows in its hub schema"
        )
    return samples_from_rows(adapter_name, rows, dataset)


# --------------------------------------------------------------------------- helpers


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


def _lookup(questions: dict[str, Sample], src_id: Any, where: str) -> Sample:
    if isinstance(src_id, float) and src_id.is_integer():
        src_id = int(src_id)
    key = str(src_id).strip()
    sample = questions.get(key)
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
) -> OutputRow:
    raw = text or ""
    if thinking is None and raw:
        thinking, answer = split_thinking(raw)
    else:
        answer = raw.strip()
    return OutputRow(
        key=output_key(sample.sample_id, 0),
        variant_id=sample.sample_id,
        sample_id=sample.sample_id,
        dataset=dataset,
        condition=condition,
        prompt="released",
        prompt_version=fmt,
        model=model,
        backend=fmt,
        model_revision="unknown",
        draw=0,
        raw_text=raw,
        answer_text=answer,
        thinking=thinking,
        finish_reason="error" if error else "unknown",
        completion_tokens=completion_tokens,
        image_sha256=[],
        error=error,
        source=fmt,
    )


def _check_unique(rows: list[OutputRow], where: str) -> None:
    seen: set[str] = set()
    for row in rows:
        if row.key in seen:
            raise ValueError(f"{where}: more than one result for sample {row.sample_id!r}")
        seen.add(row.key)


# --------------------------------------------------------------------------- lmms-eval


def import_lmms_eval(
    samples_jsonl: str | Path,
    dataset_name: str,
    questions: dict[str, Sample],
    model: str,
    condition: str,
    id_field: str = "doc_id",
) -> list[OutputRow]:
    """Rows of an lmms-eval samples JSONL as output rows (module docstring)."""
    path = Path(samples_jsonl)
    rows: list[OutputRow] = []
    for lineno, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{lineno}"
        value: Any = rec
        for part in id_field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if missing(value):
            raise ValueError(
                f"{where}: no {id_field!r} field (the dataset's id of the row; a dotted path "
                "such as llm_as_judge_eval.question_id reaches into nested fields)"
            )
        sample = _lookup(questions, value, where)
        text = _first_string(rec.get("filtered_resps"))
        if text is None:
            text = _first_string(rec.get("resps"))
        error = None if text is not None else "the released row holds no response"
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


# --------------------------------------------------------------------------- VLMEvalKit


def _read_table(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return read_jsonl(path)
    if suffix == ".json":
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
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
        frame = pd.read_csv(
            path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False
        )
    else:
        raise ValueError(f"{path}: unsupported VLMEvalKit file type; use xlsx, tsv, csv or jsonl")
    return frame.to_dict(orient="records")


def import_vlmevalkit(
    path: str | Path,
    dataset_name: str,
    questions: dict[str, Sample],
    model: str,
    condition: str,
    id_column: str | None = None,
) -> list[OutputRow]:
    """Rows of a VLMEvalKit prediction file as output rows (module docstring)."""
    path = Path(path)
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
        sample = _lookup(questions, rec.get(id_column), where)
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


# --------------------------------------------------------------------------- rescoring


def _model_from_name(name: str) -> str:
    """``Org__Model-7B.samples.jsonl`` -> ``Org__Model-7B``."""
    for suffix in (".jsonl", ".json", ".xlsx", ".tsv", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.removesuffix(".samples")


RELEASED_COLUMNS = (
    "sample_id",
    "sample_key",
    "model",
    "condition",
    "answer",
    "prediction",
    "correct",
    "score",
    "method",
    "rule",
    "reason",
    "error",
)


def score_released(
    format: str,
    dataset: str,
    questions_path: str | Path,
    samples_path: str | Path,
    out_csv: str | Path,
    *,
    model: str | None = None,
    condition: str = "released",
    id_field: str | None = None,
    fallback: Callable[[Sample, str], str | None] | None = None,
) -> list[dict[str, Any]]:
    """Rescore a released results file with this project's rules; write ``out_csv``.

    ``dataset`` is the adapter name (``distract-bench``, ``mathvista``, ...), which also
    picks the scorer. ``model`` defaults to the results file's name without its
    suffix and a trailing ``.samples`` (``Org__Model.samples.jsonl`` -> ``Org__Model``). Returns the CSV rows (``sample_id`` = the dataset's own id).
    """
    if format not in FORMATS:
        raise ValueError(
            f"unknown released format {format!r}; expected one of {', '.join(FORMATS)}"
        )
    questions = load_questions(dataset, questions_path)
    model = model or _model_from_name(Path(samples_path).name)
    if format == "lmms-eval":
        outputs = import_lmms_eval(
            samples_path, dataset, questions, model, condition, id_field=id_field or "doc_id"
        )
    else:
        outputs = import_vlmevalkit(
            samples_path, dataset, questions, model, condition, id_column=id_field
        )
    by_key = {s.sample_id: s for s in questions.values()}
    scored = score_outputs(by_key, outputs, dataset, fallback)
    rows = []
    for s in scored:
        sample = by_key[s["sample_id"]]
        rows.append(
            {
                "sample_id": sample.meta["source_id"],
                "sample_key": s["sample_id"],
                "model": s["model"],
                "condition": s["condition"],
                "answer": s["answer"],
                "prediction": s["prediction"],
                "correct": s["correct"],
                "score": s["score"],
                "method": s["method"],
                "rule": s["rule"],
                "reason": s["reason"],
                "error": s["error"],
            }
        )
    with atomic_write(out_csv, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(RELEASED_COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row[k] is None else row[k] for k in RELEASED_COLUMNS})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vlmrobust.score.released",
        description="Rescore a released lmms-eval / VLMEvalKit results file with this "
        "project's rules (released correctness labels are ignored).",
    )
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--dataset", required=True, help="adapter name, e.g. distract-bench")
    parser.add_argument("--questions", required=True, help="the dataset's rows (hub schema)")
    parser.add_argument("--samples", required=True, help="the released results file")
    parser.add_argument("--out", required=True, help="CSV to write")
    parser.add_argument("--model", default=None)
    parser.add_argument("--condition", default="released")
    parser.add_argument("--id-field", default=None, help="doc_id (lmms-eval) / index or id")
    args = parser.parse_args(argv)
    rows = score_released(
        args.format,
        args.dataset,
        args.questions,
        args.samples,
        args.out,
        model=args.model,
        condition=args.condition,
        id_field=args.id_field,
    )
    n = len(rows)
    correct = sum(r["correct"] for r in rows)
    failures = sum(1 for r in rows if r["method"] == "none" and not r["error"])
    print(f"{n} rows, {correct} correct ({correct / n:.1%}), {failures} extraction failures")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

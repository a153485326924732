"""Importers of released results (lmms-eval, VLMEvalKit) into output rows, and rescoring.

Released runs are rescored with this project's rules; a correctness label in the file
(lmms-eval's ``llm_as_judge_eval.true_false``, VLMEvalKit's ``hit``/``score``) is never
copied — the released Distract-Bench labels are demonstrably wrong in places (a
``\\boxed{B}`` for target B marked False).

The questions are samples keyed by the dataset's own id (``meta["source_id"]``): the
samples stage's samples, or a dataset's rows in its hub schema converted without images
by :func:`vlmrobust.data.released.load_questions` (the ``vlmrobust score-released``
command does that); this module reads no dataset itself.

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
- :func:`score_released` imports a file, scores it and writes a CSV (``sample_id`` =
  the dataset's own id, ``prediction``, ``correct`` 0/1, ``score``, ``method``,
  ``rule``, ``reason``, ...).

Imported rows have ``prompt == "released"``, ``prompt_version`` = the format,
``backend`` = the format, ``source`` = the format, ``draw == 0``, no image hashes
(the released files do not say which image bytes were used) and ``finish_reason
"unknown"``.

Command line: ``vlmrobust score-released --format lmms-eval --dataset distract-bench
--questions questions.jsonl --samples model.samples.jsonl --out x.csv``.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..clients.vlm.thinking import split_thinking
from ..core.io import atomic_write, read_jsonl
from ..core.records import OutputRow, Sample, output_key
from ..core.released import load_released_references
from . import score_outputs

__all__ = [
    "FORMATS",
    "format_released_summary",
    "import_lmms_eval",
    "import_vlmevalkit",
    "released_summary",
    "score_released",
]

FORMATS = ("lmms-eval", "vlmevalkit")
#: VLMEvalKit's marker of a failed API call in ``prediction``
VLMEVALKIT_FAIL = "Failed to obtain answer"


# --------------------------------------------------------------------------- helpers


def _missing(value: Any) -> bool:
    """``None``, NaN, or an empty/whitespace string (a field a released row lacks)."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


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


def _lookup(questions: Mapping[str, Sample], src_id: Any, where: str) -> Sample:
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
    questions: Mapping[str, Sample],
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
        if _missing(value):
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
    questions: Mapping[str, Sample],
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
        text = None if _missing(value) else str(value)
        error = None
        if text is None:
            error = "the released row holds no prediction"
        elif text.startswith(VLMEVALKIT_FAIL):
            error, text = f"VLMEvalKit: {text[:200]}", None
        thinking = rec.get("thinking")
        thinking = None if _missing(thinking) else str(thinking)
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


def released_summary(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """N, correct, accuracy, extraction failures (no answer found in a response) and
    rows without a response, over the rows of :func:`score_released`."""
    n = len(rows)
    correct = sum(int(r["correct"]) for r in rows)
    errors = sum(1 for r in rows if r.get("error"))
    failures = sum(1 for r in rows if not r.get("error") and r.get("method") == "none")
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else math.nan,
        "extraction_failures": failures,
        "extraction_failure_rate": failures / n if n else math.nan,
        "errors": errors,
    }


def format_released_summary(summary: Mapping[str, Any]) -> str:
    """One line: N, accuracy (correct / N), extraction failures and empty responses."""
    n = summary["n"]
    if not n:
        return "N = 0: no rows scored"
    return (
        f"N = {n}; accuracy {summary['accuracy']:.1%} ({summary['correct']}/{n}); "
        f"extraction failures {summary['extraction_failures']} "
        f"({summary['extraction_failure_rate']:.1%}); rows without a response "
        f"{summary['errors']}"
    )


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
    questions: Mapping[str, Sample],
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
    picks the scorer. ``questions`` are the dataset's samples keyed by its own id
    (:func:`vlmrobust.data.released.load_questions`, or the samples stage's samples
    keyed by ``meta["source_id"]``). ``model`` defaults to the results file's name
    without its suffix and a trailing ``.samples`` (``Org__Model.samples.jsonl`` ->
    ``Org__Model``). Returns the CSV rows (``sample_id`` = the dataset's own id).
    """
    if format not in FORMATS:
        raise ValueError(
            f"unknown released format {format!r}; expected one of {', '.join(FORMATS)}"
        )
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


# --- released outputs as the outputs of one job (config `imports`) --------------------------


def released_labels(spec: Mapping[str, Any], released: str | Path, questions: Mapping[str, Sample]):
    """{sample_id: {"correct": ..., "verdict": ...}} from the released files, where the
    ``imports`` entry asks for them (``released_labels``, ``references``)."""
    labels: dict[str, dict[str, Any]] = {}
    if spec.get("released_labels"):
        if spec["format"] != "lmms-eval":
            raise ValueError("imports: released_labels is supported for lmms-eval files only")
        id_field = spec.get("id_field") or "doc_id"
        for lineno, rec in enumerate(read_jsonl(released), 1):
            value: Any = rec
            for part in id_field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            sample = questions.get(str(value))
            verdict = (rec.get("llm_as_judge_eval") or {}).get("true_false")
            if sample is None or verdict is None:
                raise ValueError(f"{released}:{lineno}: no released correctness (true_false)")
            labels.setdefault(sample.sample_id, {})["correct"] = bool(verdict)
    if spec.get("references"):
        for source_id, row in load_released_references(spec["references"]).items():
            sample = questions.get(str(source_id))
            if sample is None:
                continue
            # a failed released judgment (parse_error) rides along as a failure: verdict
            # None with its reason, never judged again in silence
            entry = labels.setdefault(sample.sample_id, {})
            entry["verdict"] = row["verdict"]
            if row["verdict"] is None:
                entry["verdict_error"] = row["verdict_error"]
    return labels


def import_outputs(
    spec: Mapping[str, Any], samples: list[Sample], released: str | Path
) -> tuple[list[OutputRow], int]:
    """The output rows of one ``imports`` entry (``spec``: model, dataset, condition,
    prompt, format, id_field, released_labels, references) and the number of samples
    without a released answer. The rows stand for the run's prompt setting, so they sit
    where a run would put them; released labels ride along in ``released``."""
    from dataclasses import replace

    questions = {str(s.meta.get("source_id", s.sample_id)): s for s in samples}
    dataset = samples[0].dataset if samples else spec["dataset"]
    if spec["format"] == "lmms-eval":
        rows = import_lmms_eval(
            released,
            dataset,
            questions,
            spec["model"],
            spec["condition"],
            id_field=spec.get("id_field") or "doc_id",
        )
    else:
        rows = import_vlmevalkit(
            released,
            dataset,
            questions,
            spec["model"],
            spec["condition"],
            id_column=spec.get("id_field"),
        )
    rows = [replace(r, prompt=spec["prompt"]) for r in rows]
    labels = released_labels(spec, released, questions)
    if labels:
        rows = [replace(r, released=labels.get(r.sample_id)) for r in rows]
    return rows, len(samples) - len({r.sample_id for r in rows})


def use_released_correctness(scored: list[dict[str, Any]], rows: list[OutputRow]) -> int:
    """Replace the correctness of scored rows whose output carries a released one
    (``imports[].released_labels``); return how many were replaced."""
    released = {r.key: r.released for r in rows if r.released and "correct" in r.released}
    n = 0
    for row in scored:
        if row["key"] in released:
            row["correct"] = int(released[row["key"]]["correct"])
            row["score"] = float(row["correct"])
            row["method"], row["rule"] = "released", "released"
            row["reason"] = "correctness as stated by the released file"
            n += 1
    return n

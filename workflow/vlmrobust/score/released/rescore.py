"""Rescoring a released results file with this project's rules (``vlmrobust
score-released``): :func:`score_released` imports a file, scores it and writes a CSV
(``sample_id`` = the dataset's own id, ``prediction``, ``correct`` 0/1, ``score``,
``method``, ``rule``, ``reason``, ...); :func:`released_summary` and
:func:`format_released_summary` say how it went."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core.io import atomic_write
from ...core.records import Sample
from ...core.released import skipped_by_reason
from .. import mode_counts, score_outputs
from .formats import _check_released_args, _import_released


def _model_from_name(name: str) -> str:
    """``Org__Model-7B.samples.jsonl`` -> ``Org__Model-7B``."""
    for suffix in (".jsonl", ".json", ".xlsx", ".tsv", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.removesuffix(".samples")


class ReleasedRows(list):
    """The CSV rows of :func:`score_released` and how they were made (``info``: the
    scored text, the unparsed-choice convention, the rows of skipped questions)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]] = (), **info: Any):
        super().__init__(rows)
        self.info: dict[str, Any] = info


def released_summary(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """N, correct, accuracy, extraction failures (no answer found in a response), rows
    without a response, and (from :class:`ReleasedRows`) what was scored, the question
    rows skipped as bad rows with the released rows left out for them, and the
    agreement with a released correctness label, over the rows of
    :func:`score_released`."""
    n = len(rows)
    correct = sum(int(r["correct"]) for r in rows)
    errors = sum(1 for r in rows if r.get("error"))
    failures = sum(1 for r in rows if not r.get("error") and r.get("method") == "none")
    labelled = [r for r in rows if r.get("released_correct") not in (None, "")]
    info = getattr(rows, "info", {})
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else math.nan,
        "extraction_failures": failures,
        "extraction_failure_rate": failures / n if n else math.nan,
        "errors": errors,
        "scored_text": info.get("scored_text", "response"),
        "unparsed_choice": info.get("unparsed_choice", "wrong"),
        "skipped_questions": info.get("skipped_questions", {}),
        "released_rows_of_skipped_questions": info.get("released_rows_of_skipped_questions", 0),
        "released_labels": len(labelled),
        "agree_with_released_labels": sum(
            1 for r in labelled if int(r["correct"]) == int(r["released_correct"])
        ),
        **(mode_counts(list(rows)) if n else {}),
    }


def format_released_summary(summary: Mapping[str, Any]) -> str:
    """One line: N, accuracy (correct / N), extraction failures, empty responses, what
    was scored and how, skipped questions, agreement with released labels."""
    n = summary["n"]
    if not n:
        return "N = 0: no rows scored"
    parts = [
        f"N = {n}; accuracy {summary['accuracy']:.1%} ({summary['correct']}/{n}); "
        f"extraction failures {summary['extraction_failures']} "
        f"({summary['extraction_failure_rate']:.1%}); rows without a response "
        f"{summary['errors']}"
    ]
    scored = summary.get("scored_text", "response")
    unparsed = summary.get("unparsed_choice", "wrong")
    if scored != "response" or unparsed != "wrong":
        parts.append(f"scored: {scored}, unparsed choice {unparsed}")
    skipped = summary.get("skipped_questions") or {}
    if skipped:
        reasons = ", ".join(f"{reason} ({k})" for reason, k in skipped.items())
        parts.append(
            f"question rows skipped as bad rows {sum(skipped.values())} ({reasons}); "
            f"released rows left out for them {summary['released_rows_of_skipped_questions']}"
        )
    if summary.get("released_labels"):
        k, m = summary["agree_with_released_labels"], summary["released_labels"]
        parts.append(f"agrees with the released labels on {k}/{m} ({k / m:.1%})")
    parts += _mode_parts(summary)
    return "; ".join(parts)


def _mode_parts(summary: Mapping[str, Any]) -> list[str]:
    """What :func:`format_released_summary` says of the scoring mode."""
    if summary.get("mode", "extract") == "extract" and summary.get("mode_differences") is None:
        return []
    parts = [f"scoring mode {summary['mode']}"]
    if summary.get("random_guesses"):
        parts.append(f"the harness's random options {summary['random_guesses']} (seeded)")
    if summary.get("offline_rules"):
        parts.append(f"verdicts by offline rules {summary['offline_rules']}")
    if summary.get("corrected_accuracy") is not None:
        parts.append(
            f"verdicts a harness bug changed {summary['harness_bug_rows']} (accuracy "
            f"without them {summary['corrected_accuracy']:.1%})"
        )
    if summary.get("mode_differences") is not None:
        parts.append(f"verdicts the other mode gives differently {summary['mode_differences']}")
    return parts


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
    "released_correct",
    "mode",
    "harness_bug",
    "corrected",
    "other_correct",
)


def _released_csv_row(
    s: Mapping[str, Any], sample: Sample, labels: Mapping[str, Any]
) -> dict[str, Any]:
    """The CSV row of a scored row (:data:`RELEASED_COLUMNS`)."""
    return {
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
        "released_correct": None if s["key"] not in labels else int(labels[s["key"]]),
        "mode": s.get("mode"),
        "harness_bug": s.get("harness_bug"),
        "corrected": s.get("corrected"),
        "other_correct": s.get("other_correct"),
    }


def _write_released_csv(out_csv: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the rows of :func:`score_released` (empty cells for None)."""
    with atomic_write(out_csv, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(RELEASED_COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row[k] is None else row[k] for k in RELEASED_COLUMNS})


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
    unparsed_choice: str = "wrong",
    response_field: str | None = None,
    extraction_field: str | None = None,
    mode: str = "extract",
    compare: bool = False,
) -> ReleasedRows:
    """Rescore a released results file with this project's rules (``mode`` extract) or
    as the papers' harness scored it (``mode`` harness; ``compare``: also the other
    mode's verdict, column ``other_correct``); write ``out_csv``.

    ``dataset`` is the adapter name (``distract-bench``, ``mathvista``, ...), which also
    picks the scorer. ``questions`` are the dataset's samples keyed by its own id
    (:func:`vlmrobust.data.released.load_questions`, or the samples stage's samples
    keyed by ``meta["source_id"]``). ``model`` defaults to the results file's name
    without its suffix and a trailing ``.samples`` (``Org__Model.samples.jsonl`` ->
    ``Org__Model``). ``unparsed_choice``: see :func:`~vlmrobust.score.score_outputs`
    (``most-similar`` is MathVista's official convention). ``response_field`` (keyed
    formats) names the response; ``extraction_field`` scores a released extraction
    instead (MathVista's ``extraction``). Released rows of questions skipped as bad rows
    (``questions.skipped``) are counted, not scored. Returns the CSV rows (``sample_id``
    = the dataset's own id; ``released_correct`` = a released label, where the format
    has one, for comparison only).
    """
    _check_released_args(format, response_field)
    model = model or _model_from_name(Path(samples_path).name)
    counts: dict[str, int] = {}
    outputs = _import_released(
        format, samples_path, dataset, questions, model, condition, id_field=id_field,
        response_field=response_field, extraction_field=extraction_field, counts=counts,
    )  # fmt: skip
    by_key = {s.sample_id: s for s in questions.values()}
    labels = {o.key: o.released["correct"] for o in outputs if o.released}
    scored = score_outputs(
        by_key, outputs, dataset, fallback, unparsed_choice, mode=mode, compare=compare
    )
    skipped = getattr(questions, "skipped", [])
    rows = ReleasedRows(
        scored_text=(
            f"the released extraction ({extraction_field})" if extraction_field else "response"
        ),
        unparsed_choice=unparsed_choice,
        skipped_questions=skipped_by_reason(skipped),
        released_rows_of_skipped_questions=counts.get("skipped_questions", 0),
    )
    rows.extend(_released_csv_row(s, by_key[s["sample_id"]], labels) for s in scored)
    _write_released_csv(out_csv, rows)
    return rows

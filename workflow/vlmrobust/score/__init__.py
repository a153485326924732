"""Outputs -> scored rows -> per-group summaries.

:func:`score_outputs` scores every output row with one scorer of
:data:`~vlmrobust.score.scorers.SCORERS` (by benchmark name; ``demo`` -> ``generic``)
and returns one flat dict per row::

    key, variant_id, sample_id, dataset, condition, prompt, model, draw, answer,
    answer_type, prediction, correct (0/1), score, method (rule|llm|most-similar|none),
    rule, reason, finish_reason, error

Scoring reads the row's ``answer_text`` (the part after the thinking split); when it
is empty (e.g. generation stopped inside an unclosed thinking block) the last
2,000 characters of ``raw_text`` are read instead, and the reason of a failure says
so. A row with ``error`` set is wrong with reason ``generation failed: ...`` (counted
under ``errors``, not as an extraction failure). A failed extraction of a truncated
output (``finish_reason == "length"``) says so in its reason. ``unparsed_choice``
(``wrong`` | ``most-similar``; :data:`~vlmrobust.score.scorers.UNPARSED_CHOICE`) says what
a multiple-choice answer no rule could read becomes: wrong, an extraction failure (the
default), or the most similar option as MathVista's official scorer and lmms-eval do
(``method == "most-similar"``, the reason names the option; see
:mod:`vlmrobust.score.scorers`).

:func:`summarize` groups scored rows by model x dataset x condition x prompt.
:func:`write_scored` / :func:`read_scored` / :func:`write_summary` store them as CSV.
:func:`llm_extractor` turns an LLM backend (:mod:`vlmrobust.clients.llm`) into the
``fallback`` of :func:`score_outputs`: asked only when the rules find nothing; its
answer is read with the same rules and recorded with ``method == "llm"``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.io import atomic_write
from ..core.records import OutputRow, Sample
from ..core.scored import SCORED_COLUMNS, SCORED_NUMBERS
from .extract import Extraction
from .harness import HARNESS_BENCHMARKS, HarnessVerdict, Judge, harness_verdict
from .scorers import SCORERS, UNPARSED_CHOICE, Score, Scorer, get_scorer

__all__ = [
    "RAW_TAIL_CHARS",
    "SCORERS",
    "SCORING_MODES",
    "UNPARSED_CHOICE",
    "Extraction",
    "Score",
    "Scorer",
    "get_scorer",
    "llm_extractor",
    "read_scored",
    "score_outputs",
    "summarize",
    "write_scored",
    "write_summary",
]

#: how much of the raw output is read when the answer text is empty
RAW_TAIL_CHARS = 2000

#: the scoring modes (config ``scoring.mode``; docs/scoring.md)
SCORING_MODES = ("extract", "harness")


def _as_row(row: OutputRow | Mapping[str, Any]) -> OutputRow:
    return row if isinstance(row, OutputRow) else OutputRow.from_dict(dict(row))


def score_row(
    sample: Sample,
    row: OutputRow,
    scorer: Scorer,
    fallback: Callable[[Sample, str], str | None] | None = None,
    unparsed_choice: str = "wrong",
) -> Score:
    """The score of one output row (see the module docstring)."""
    if row.error:
        return Score(None, False, 0.0, "none", f"generation failed: {row.error}", None)
    answer = row.answer_text or ""
    from_raw = not answer.strip()
    text = (row.raw_text or "")[-RAW_TAIL_CHARS:] if from_raw else answer
    result = scorer.score(sample, text, fallback, unparsed_choice)
    if result.prediction is None or result.method == "most-similar":
        notes = []
        if from_raw:
            notes.append("the answer text is empty (read the end of the raw output)")
        if row.finish_reason == "length":
            notes.append("output truncated at max_new_tokens")
        if notes:
            result = replace(
                result, reason="; ".join([result.reason or "nothing extracted", *notes])
            )
    return result


def harness_row(
    sample: Sample, row: OutputRow, benchmark: str, seed: int, judge: Judge | None
) -> HarnessVerdict:
    """The harness's verdict on one output row (:mod:`vlmrobust.score.harness`); a
    failed generation is wrong with its reason, as in extract mode."""
    if row.error:
        reason = f"generation failed: {row.error}"
        return HarnessVerdict(None, False, 0.0, "none", HARNESS_BENCHMARKS[benchmark], reason)
    return harness_verdict(benchmark, sample, row.raw_text, seed=f"{seed}:{row.key}", judge=judge)


def _as_score(verdict: HarnessVerdict) -> Score:
    return Score(
        verdict.prediction,
        verdict.correct,
        verdict.score,
        verdict.method,
        verdict.reason,
        verdict.rule,
    )


def _verdicts(
    sample: Sample,
    row: OutputRow,
    sc: Scorer,
    extract: tuple[Callable[[Sample, str], str | None] | None, str],
    how: tuple[str, bool, int, Judge | None],
) -> tuple[HarnessVerdict | None, Score, bool | None]:
    """(the harness's verdict or None, the row's score, the other mode's verdict or
    None) of one row (:func:`score_outputs`)."""
    fallback, unparsed_choice = extract
    mode, compare, seed, judge = how
    harness = sc.name in HARNESS_BENCHMARKS
    if mode == "harness" and harness:
        verdict = harness_row(sample, row, sc.name, seed, judge)
        other = score_row(sample, row, sc, None, unparsed_choice).correct if compare else None
        return verdict, _as_score(verdict), other
    result = score_row(sample, row, sc, fallback, unparsed_choice)
    if compare and harness:
        return None, result, harness_row(sample, row, sc.name, seed, None).correct
    return None, result, None


def score_outputs(
    samples: Mapping[str, Sample],
    rows: Iterable[OutputRow | Mapping[str, Any]],
    scorer: str,
    fallback: Callable[[Sample, str], str | None] | None = None,
    unparsed_choice: str = "wrong",
    *,
    mode: str = "extract",
    compare: bool = False,
    seed: int = 0,
    judge: Judge | None = None,
) -> list[dict[str, Any]]:
    """One scored dict per output row (columns: :data:`SCORED_COLUMNS`).

    ``samples`` maps sample_id -> Sample; ``scorer`` is a key of ``SCORERS`` (or
    ``demo``); ``unparsed_choice`` one of :data:`UNPARSED_CHOICE`. A row whose sample is
    missing is an error naming both. ``mode`` (:data:`SCORING_MODES`): ``extract`` reads
    the final answer by the project's rules; ``harness`` gives the verdict of the
    papers' harness (:mod:`vlmrobust.score.harness`; ``seed`` seeds its random guesses,
    ``judge`` is its LLM judge) where the benchmark has one, else the project's (the
    row's ``mode`` says which). ``compare``: also the other mode's verdict
    (``other_correct``; the harness without its judge, the project without its LLM
    fallback, so a comparison costs no LLM call).
    """
    if unparsed_choice not in UNPARSED_CHOICE:
        raise ValueError(
            f"unparsed_choice {unparsed_choice!r} is not one of {', '.join(UNPARSED_CHOICE)}"
        )
    if mode not in SCORING_MODES:
        raise ValueError(f"scoring mode {mode!r} is not one of {', '.join(SCORING_MODES)}")
    sc = get_scorer(scorer)
    out: list[dict[str, Any]] = []
    for raw in rows:
        row = _as_row(raw)
        sample = samples.get(row.sample_id)
        if sample is None:
            raise ValueError(
                f"output row {row.key!r} (model {row.model!r}) refers to sample "
                f"{row.sample_id!r}, which is not among the {len(samples)} samples given; "
                "score the outputs against the samples file of the same dataset"
            )
        verdict, result, other = _verdicts(
            sample, row, sc, (fallback, unparsed_choice), (mode, compare, seed, judge)
        )
        out.append(
            {
                "key": row.key,
                "variant_id": row.variant_id,
                "sample_id": row.sample_id,
                "dataset": row.dataset,
                "condition": row.condition,
                "prompt": row.prompt,
                "model": row.model,
                "draw": row.draw,
                "answer": sample.answer,
                "answer_type": sample.answer_type,
                "prediction": result.prediction,
                "correct": int(result.correct),
                "score": float(result.score),
                "method": result.method,
                "rule": result.rule,
                "reason": result.reason,
                "finish_reason": row.finish_reason,
                "error": row.error,
                "thinking_tokens": row.thinking_tokens,
                "completion_tokens": row.completion_tokens,
                "mode": "harness" if verdict is not None else "extract",
                "harness_bug": verdict.bug if verdict is not None else None,
                "corrected": _flag(verdict.corrected if verdict is not None else None),
                "other_correct": _flag(other),
            }
        )
    return out


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def summarize(scored_rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per model x dataset x condition x prompt: n, correct, accuracy, mean_score,
    extraction_failures (no prediction although the generation succeeded),
    extraction_failure_rate (over n), llm_extractions, most_similar_guesses (unparsed
    multiple-choice answers mapped to the most similar option, ``scoring.unparsed_choice:
    most-similar``; not extraction failures), errors (failed generations), and the
    scoring mode's counts (:func:`mode_counts`). Groups are sorted by their keys."""
    groups: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = {}
    for row in scored_rows:
        key = (str(row["model"]), str(row["dataset"]), str(row["condition"]), str(row["prompt"]))
        groups.setdefault(key, []).append(row)
    out = []
    for (model, dataset, condition, prompt), rows in sorted(groups.items()):
        n = len(rows)
        errors = sum(1 for r in rows if r.get("error"))
        failures = sum(1 for r in rows if not r.get("error") and r.get("method") == "none")
        correct = sum(int(r["correct"]) for r in rows)
        out.append(
            {
                "model": model,
                "dataset": dataset,
                "condition": condition,
                "prompt": prompt,
                "n": n,
                "correct": correct,
                "accuracy": correct / n,
                "mean_score": sum(float(r["score"]) for r in rows) / n,
                "extraction_failures": failures,
                "extraction_failure_rate": failures / n,
                "llm_extractions": sum(1 for r in rows if r.get("method") == "llm"),
                "most_similar_guesses": sum(1 for r in rows if r.get("method") == "most-similar"),
                "errors": errors,
                **mode_counts(rows),
            }
        )
    return out


def _int_or_none(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


def mode_counts(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """What scoring.mode adds to a group's summary: ``mode`` (the modes of its rows,
    ``harness``, ``extract`` or both joined by ``+``), ``random_guesses`` (the harness's
    seeded random options), ``offline_rules`` (harness verdicts made without its LLM
    judge), ``harness_bug_rows`` (rows whose verdict a reproduced harness bug changed),
    ``corrected_accuracy`` (the accuracy without those bugs; empty when none applies)
    and ``mode_differences`` (rows whose other mode's verdict differs; empty when the
    other mode was not computed)."""
    n = len(rows)
    modes = sorted({str(r.get("mode") or "extract") for r in rows})
    changed, fixed_correct, has_bug = 0, 0, False
    differ, compared = 0, False
    for r in rows:
        correct = int(r["correct"])
        fixed = _int_or_none(r.get("corrected"))
        if fixed is not None:
            has_bug = True
            changed += int(fixed != correct)
        fixed_correct += correct if fixed is None else fixed
        other = _int_or_none(r.get("other_correct"))
        if other is not None:
            compared = True
            differ += int(other != correct)
    return {
        "mode": "+".join(modes),
        "random_guesses": sum(1 for r in rows if r.get("method") == "random"),
        "offline_rules": sum(1 for r in rows if r.get("method") == "offline-rule"),
        "harness_bug_rows": changed,
        "corrected_accuracy": fixed_correct / n if has_bug and n else None,
        "mode_differences": differ if compared else None,
    }


SUMMARY_COLUMNS = (
    "model",
    "dataset",
    "condition",
    "prompt",
    "n",
    "correct",
    "accuracy",
    "mean_score",
    "extraction_failures",
    "extraction_failure_rate",
    "llm_extractions",
    "most_similar_guesses",
    "errors",
    "mode",
    "random_guesses",
    "offline_rules",
    "harness_bug_rows",
    "corrected_accuracy",
    "mode_differences",
)


def _write_csv(
    path: str | Path, rows: Iterable[Mapping[str, Any]], columns: tuple[str, ...]
) -> int:
    n = 0
    with atomic_write(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
            n += 1
    return n


def write_scored(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write scored rows as CSV (columns :data:`SCORED_COLUMNS`; None -> empty)."""
    return _write_csv(path, rows, SCORED_COLUMNS)


def read_scored(path: str | Path) -> list[dict[str, Any]]:
    """Read a scored CSV back: empty cells -> None, draw/correct int, score float."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for lineno, raw in enumerate(csv.DictReader(fh), 2):
            row: dict[str, Any] = {k: (v if v != "" else None) for k, v in raw.items()}
            try:
                for col, kind in SCORED_NUMBERS.items():
                    empty_draw = col == "draw" and row.get(col) is None
                    row[col] = 0 if empty_draw else kind(row[col])
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"{path}:{lineno}: not a scored row (correct/score/draw: {exc})"
                ) from exc
            out.append(row)
    return out


def write_summary(path: str | Path, summary: Iterable[Mapping[str, Any]]) -> int:
    """Write :func:`summarize` rows as CSV (columns :data:`SUMMARY_COLUMNS`)."""
    return _write_csv(path, summary, SUMMARY_COLUMNS)


# --------------------------------------------------------------------------- LLM fallback

EXTRACTION_PROMPT = """\
Extract the final answer from a model's response to a question. Reply with the answer \
only, in the requested form, with no explanation. If the response gives no final \
answer, reply with NONE.

Question: {question}
{choices}Answer form: {form}

Model response:
{response}

Extracted answer:"""


def _answer_form(sample: Sample) -> str:
    atype = sample.answer_type
    if sample.choices and atype in ("letter", "text"):
        return "the option letter (A, B, C, ...)"
    if atype == "label" and sample.choices:
        return "one of: " + ", ".join(sample.choices)
    return {
        "number": "a number",
        "yes/no": "yes or no",
        "list": "a Python list, e.g. [1, 2]",
    }.get(atype, "a short word or phrase")


def llm_extractor(
    llm: Any, max_tokens: int = 64, response_chars: int = 4000
) -> Callable[[Sample, str], str | None]:
    """A scoring fallback that asks ``llm`` (an :class:`~vlmrobust.clients.llm.LLMBackend`, or
    anything with ``complete(prompt, temperature=, max_tokens=)`` returning an object
    with ``text`` and ``error``) for the final answer of a response. Returns None for
    NONE/empty; raises RuntimeError when the call failed (the scorer records it as the
    reason). Only the last ``response_chars`` characters of the response are sent."""

    def extract(sample: Sample, text: str) -> str | None:
        choices = ""
        if sample.choices:
            letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            lines = [f"({letters[i]}) {c}" for i, c in enumerate(sample.choices[:26])]
            choices = "Choices:\n" + "\n".join(lines) + "\n"
        prompt = EXTRACTION_PROMPT.format(
            question=sample.question,
            choices=choices,
            form=_answer_form(sample),
            response=text[-response_chars:],
        )
        response = llm.complete(prompt, temperature=0.0, max_tokens=max_tokens)
        if getattr(response, "error", None):
            raise RuntimeError(str(response.error))
        value = (getattr(response, "text", "") or "").strip()
        if not value or value.strip(" .").upper() == "NONE":
            return None
        return value

    return extract

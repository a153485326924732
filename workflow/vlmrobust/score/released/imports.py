"""Released outputs as the outputs of one job (config ``imports``):
:func:`import_outputs` reads an entry's file of any of :data:`~.formats.IMPORT_FORMATS`
into the output rows a run would write, with the released labels and references the
entry asks for (:func:`released_labels`); :func:`use_released_correctness` puts a
released correctness in place of the scored one."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.io import read_jsonl
from ...core.records import OutputRow, Sample, Variant
from ...core.released import Questions, load_released_references
from .common import _get_path
from .formats import IMPORT_FORMATS, _import_released
from .jsonl import import_jsonl
from .keyed_json import KEYED_FORMATS

#: the package's logger (its name is in every log line, as before the package was split)
log = logging.getLogger(__package__)


def released_labels(spec: Mapping[str, Any], released: str | Path, questions: Mapping[str, Sample]):
    """{sample_id: {"correct": ..., "verdict": ...}} from the released files, where the
    ``imports`` entry asks for them (``released_labels``, ``references``)."""
    labels: dict[str, dict[str, Any]] = {}
    if spec.get("released_labels") and spec["format"] in KEYED_FORMATS:
        if not KEYED_FORMATS[spec["format"]]["label"]:
            raise ValueError(f"imports: {spec['format']} files carry no correctness label")
    elif spec.get("released_labels"):
        if spec["format"] != "lmms-eval":
            raise ValueError(
                "imports: released_labels is supported for lmms-eval and "
                f"{', '.join(f for f, v in KEYED_FORMATS.items() if v['label'])} files only"
            )
        id_field = spec.get("id_field") or "doc_id"
        for lineno, rec in enumerate(read_jsonl(released), 1):
            sample = questions.get(str(_get_path(rec, id_field)))
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


def _import_jsonl_entry(
    spec: Mapping[str, Any],
    samples: list[Sample],
    released: str | Path,
    variants: Sequence[Variant] | None,
) -> tuple[list[OutputRow], int]:
    """The output rows of an ``imports`` entry of format ``jsonl`` (:func:`import_jsonl`)
    and the number of variants without a released answer; the rows of other conditions,
    without a response or without a reasoning length are logged with their count."""
    if variants is None:
        raise ValueError(
            f"imports: format jsonl ({spec['model']}/{spec['dataset']}/"
            f"{spec['condition']}) needs the condition's variant manifest "
            "(import-outputs --manifest): its question ids name variants"
        )
    if spec.get("released_labels"):
        raise ValueError("imports: released_labels is supported for lmms-eval files only")
    rows, counts = import_jsonl(
        released,
        variants,
        samples,
        spec["model"],
        spec["condition"],
        id_field=spec.get("id_field") or "question_id",
        response_field=spec.get("response_field") or "response",
        thinking_field=spec.get("thinking_field"),
        draw_field=spec.get("draw_field"),
        condition_field=spec.get("condition_field"),
        tokens_field=spec.get("tokens_field"),
        tokenizer=spec.get("tokenizer"),
        markers=spec.get("thinking_markers"),
    )
    if counts["other_condition"]:
        log.info(
            "%s: %d rows of other conditions skipped (%s is not %r)",
            released,
            counts["other_condition"],
            spec.get("condition_field"),
            spec["condition"],
        )
    for name, what in (
        ("without_response", "rows hold no response (kept as failures)"),
        ("without_tokens", "answered rows have no reasoning length (tokens_field/tokenizer)"),
    ):
        if counts[name]:
            log.warning("%s: %d of %d %s", released, counts[name], counts["read"], what)
    return rows, len(variants) - len({r.variant_id for r in rows})


def _check_one_variant_per_labelled_sample(
    labels: Mapping[str, Any], variants: Sequence[Variant] | None, condition: str
) -> None:
    """Released verdicts are per sample: a labelled sample must have one variant."""
    per_sample: dict[str, int] = {}
    for v in variants or ():
        per_sample[v.sample_id] = per_sample.get(v.sample_id, 0) + 1
    several = [sid for sid in labels if per_sample.get(sid, 0) > 1]
    if several:
        raise ValueError(
            f"imports: references are verdicts per sample, but sample "
            f"{several[0]!r} has {per_sample[several[0]]} variants under condition "
            f"{condition!r}"
        )


def import_outputs(
    spec: Mapping[str, Any],
    samples: list[Sample],
    released: str | Path,
    variants: Sequence[Variant] | None = None,
    skipped_ids: Sequence[str] = (),
) -> tuple[list[OutputRow], int]:
    """The output rows of one ``imports`` entry and the number of questions without a
    released answer: samples (lmms-eval, VLMEvalKit) or variants of the condition's
    manifest (``jsonl``). The rows stand for the run's prompt setting, so they sit where
    a run would put them; released labels ride along in ``released``.

    ``spec``: model, dataset, condition, prompt, format, id_field, released_labels,
    references; format ``jsonl`` also reads response_field (default ``response``),
    thinking_field, draw_field, condition_field, tokens_field, tokenizer and
    thinking_markers (the model's registry ``options.thinking_markers``; None = the
    defaults), see :func:`import_jsonl`, and needs ``variants`` (the manifest's rows).
    ``extraction_field`` (not jsonl) scores a released extraction instead of the
    response; ``response_field`` also names the response of the keyed formats.
    ``skipped_ids``: the dataset's ids the samples stage skipped as bad rows; their
    released rows are left out (logged with their count), any other unknown id is an
    error.
    """
    questions = Questions(
        {str(s.meta.get("source_id", s.sample_id)): s for s in samples},
        skipped=[{"row": None, "id": str(i), "reason": "skipped"} for i in skipped_ids],
    )
    counts: dict[str, int] = {}
    dataset = samples[0].dataset if samples else spec["dataset"]
    fmt = spec["format"]
    if fmt not in IMPORT_FORMATS:
        raise ValueError(
            f"imports: unknown format {fmt!r}; expected one of {', '.join(IMPORT_FORMATS)}"
        )
    if fmt == "jsonl":
        rows, unanswered = _import_jsonl_entry(spec, samples, released, variants)
    else:
        rows = _import_released(
            fmt, released, dataset, questions, spec["model"], spec["condition"],
            id_field=spec.get("id_field"), response_field=spec.get("response_field"),
            extraction_field=spec.get("extraction_field"), counts=counts,
        )  # fmt: skip
    if fmt in KEYED_FORMATS:
        # a released label is used only where the entry asks for it (released_labels)
        rows = [r if spec.get("released_labels") else replace(r, released=None) for r in rows]
    if counts.get("skipped_questions"):
        log.warning(
            "%s: %d released row(s) answer questions the samples stage skipped as bad rows "
            "(see its report.json): left out",
            released,
            counts["skipped_questions"],
        )
    rows = [replace(r, prompt=spec["prompt"]) for r in rows]
    labels = released_labels(spec, released, questions)
    if labels:
        if fmt == "jsonl":
            _check_one_variant_per_labelled_sample(labels, variants, spec["condition"])
        rows = [
            replace(r, released={**(r.released or {}), **labels[r.sample_id]} or None)
            if r.sample_id in labels
            else r
            for r in rows
        ]
    if fmt != "jsonl":
        unanswered = len(samples) - len({r.sample_id for r in rows})
    return rows, unanswered


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

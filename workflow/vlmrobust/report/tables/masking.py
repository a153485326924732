"""Contrastive Region Masking tables (CRM paper Tables 2, 3, 4, 5; docs/studies/masking.md).

Input: the tidy metrics of :func:`vlmrobust.metrics.masking.compute_masking_metrics`,
the compared rows (for the per-example Table 3) and the run's ``spec`` (``dataset``,
``models``, ``model_order``, ``masked_conditions`` condition -> region, ``examples``).
Output, in ``out_dir``: the tables of :func:`masking_table_names` as ``.csv``, ``.md``
and ``.tex``.

* ``table2``: rows Answer flip rate / Step disruption / Hallucination, one column per
  model, cells "58.78 ± 1.23%" (rate ± binomial standard error, in %) on the
  specific-masking condition (on the random one when the run has no specific one; the
  caption says so).
* ``table4`` (random masking) and ``table5`` (specific masking): one row per model,
  columns Hallucination Rate (%), Step Disruption Rate (%), Answer Flip Rate (%), same
  cells.
* ``table3``: per example (the first ``examples`` samples of
  :func:`vlmrobust.metrics.masking.example_samples`) x model: Image (sample id), Model,
  GT Step / Masked Region, Details (step disrupted, answer flipped with both answers,
  step similarity, region attribution, hallucination).

Table names depend on the conditions only: ``table2`` and ``table3`` when either masked
condition exists, ``table4`` with a random one, ``table5`` with a specific one. Models
are in ``model_order`` (then any other model of the metrics). A missing value shows as
"–" with a footnote giving the model and the reason from the metrics table.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vlmrobust.metrics.core import read_metrics
from vlmrobust.metrics.index import MetricsIndex, lookup
from vlmrobust.metrics.masking import (
    display_models,
    example_condition,
    masked_conditions,
    masking_dataset,
    masking_examples,
    read_compared,
)
from vlmrobust.report.common import Footnotes
from vlmrobust.report.tables.render import (
    DASH,
    Table,
    clip_text,
    fmt_count,
    fmt_pct,
    fmt_yes_no,
    is_missing,
    write_tables,
)

__all__ = [
    "RATE_LABELS",
    "fmt_rate_se",
    "gt_step_cell",
    "details_cell",
    "masking_table_names",
    "masking_tables",
    "write_masking_tables",
]

#: (Table 2 row label, Table 4/5 column, metric), in Table 2's row order
RATE_LABELS = (
    ("Answer flip rate", "Answer Flip Rate (%)", "answer_flip_rate"),
    ("Step disruption", "Step Disruption Rate (%)", "step_disruption_rate"),
    ("Hallucination", "Hallucination Rate (%)", "hallucination_rate"),
)
#: Tables 4 and 5 column order (the paper's)
_ABLATION_ORDER = ("hallucination_rate", "step_disruption_rate", "answer_flip_rate")
REGION_LABELS = {"specific": "specific masking", "random": "random masking"}
#: characters of a quoted text (premise, answer) in Table 3 before "…"
QUOTE_CHARS = 60
SEP = f" {DASH} "
SE_NOTE = (
    "Cells: rate ± binomial standard error sqrt(p(1-p)/n), in %, over the samples "
    "compared without error (hallucination: those the judge rated)."
)


# --------------------------------------------------------------------------- helpers


def fmt_rate_se(value: Any, se: Any, digits: int = 2) -> str:
    """A rate with its standard error: (0.5878, 0.0123) -> "58.78 ± 1.23%"; "–" if the
    rate is missing; the rate alone ("58.78%") if only the error is."""
    if is_missing(value):
        return DASH
    if is_missing(se):
        return f"{fmt_pct(value, digits)}%"
    return f"{fmt_pct(value, digits)} \u00b1 {fmt_pct(se, digits)}%"


def _frame(rows: list[list[str]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns, dtype=object)


def _models(index: MetricsIndex, spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(id, display name) in ``model_order``, then the registry, then the metrics."""
    return display_models(spec, index.models())


def _region_of(spec: Mapping[str, Any], condition: str) -> str:
    return masked_conditions(spec).get(condition, "")


def _rate_cell(
    index: MetricsIndex,
    notes: Footnotes,
    model: tuple[str, str],
    where: str,
    metric: str,
    dataset: str,
    condition: str,
) -> str:
    cell = lookup(index, metric, model[0], dataset, condition)
    se = lookup(index, f"{metric}_se", model[0], dataset, condition)
    notes.add(model[1], where, cell.note, missing=cell.missing)
    return fmt_rate_se(cell.value, se.value)


def _n_note(index: MetricsIndex, models, dataset: str, condition: str) -> str:
    parts = []
    for mid, name in models:
        row = index.one("compared", mid, dataset, condition)
        parts.append(f"{name} {fmt_count(row['value'] if row else None)}")
    return "Samples compared: " + ", ".join(parts) + "." if parts else ""


# --------------------------------------------------------------------------- Tables 2, 4, 5


def table2(index: MetricsIndex, spec: Mapping[str, Any], condition: str) -> Table:
    """Rows: the three rates; columns: the models (rate ± SE) under ``condition``."""
    dataset = masking_dataset(spec)
    models = _models(index, spec)
    region = _region_of(spec, condition)
    notes = Footnotes(joiner=", ")
    rows = []
    for label, _, metric in RATE_LABELS:
        rows.append(
            [label]
            + [_rate_cell(index, notes, m, label, metric, dataset, condition) for m in models]
        )
    caption = (
        f"Comparison of evaluation metrics across models on {dataset} under "
        f"{REGION_LABELS.get(region, region or 'masking')} (condition '{condition}')"
    )
    if region != "specific":
        caption += "; the run has no specific-masking condition"
    lines = [*notes.lines(), SE_NOTE, _n_note(index, models, dataset, condition)]
    return Table(
        data=_frame(rows, ["Metric"] + [name for _, name in models]),
        footnotes=tuple(x for x in lines if x),
        caption=caption + ".",
        label="tab:masking-table2",
        stub_columns=1,
    )


def ablation_table(
    index: MetricsIndex, spec: Mapping[str, Any], condition: str, number: int
) -> Table:
    """Tables 4 (random) and 5 (specific): models x the three rates (± SE)."""
    dataset = masking_dataset(spec)
    models = _models(index, spec)
    region = _region_of(spec, condition)
    labels = {metric: col for _, col, metric in RATE_LABELS}
    notes = Footnotes(joiner=", ")
    rows = []
    for m in models:
        rows.append(
            [m[1]]
            + [
                _rate_cell(
                    index, notes, m, labels[metric].replace(" (%)", ""), metric, dataset, condition
                )
                for metric in _ABLATION_ORDER
            ]
        )
    what = REGION_LABELS.get(region, region or "masking")
    lines = [*notes.lines(), SE_NOTE, _n_note(index, models, dataset, condition)]
    return Table(
        data=_frame(rows, ["Model"] + [labels[metric] for metric in _ABLATION_ORDER]),
        footnotes=tuple(x for x in lines if x),
        caption=f"{what[:1].upper()}{what[1:]} results for models on {dataset} "
        f"(condition '{condition}').",
        label=f"tab:masking-table{number}",
        stub_columns=1,
    )


# --------------------------------------------------------------------------- Table 3


def _box(box: Any) -> str:
    if not isinstance(box, Sequence) or isinstance(box, str) or len(box) != 4:
        return DASH
    try:
        return "(" + ",".join(str(round(float(v))) for v in box) + ")"
    except (TypeError, ValueError):
        return DASH


def _premise_number(row: Mapping[str, Any]) -> str:
    idx = row.get("premise_index")
    return f"VP{int(idx) + 1}" if isinstance(idx, int) and not isinstance(idx, bool) else "VP"


def gt_step_cell(row: Mapping[str, Any]) -> str:
    """'Step 2 (VP1 “premise”) / Box (x0,y0,x1,y1)': the first original step that uses
    the premise (``dependent_steps``, 1-based) or, without one, the premise alone; the
    box filled by the mask ("Random box" for random masks)."""
    vp = f"{_premise_number(row)} \u201c{clip_text(row.get('premise'), QUOTE_CHARS)}\u201d"
    deps = [d for d in row.get("dependent_steps") or [] if isinstance(d, int)]
    gt = f"Step {min(deps) + 1} ({vp})" if deps else vp
    kind = "Random box" if row.get("region") == "random" else "Box"
    return f"{gt} / {kind} {_box(row.get('box'))}"


def details_cell(row: Mapping[str, Any]) -> str:
    """'Step disrupted: Yes – Answer flipped: No (a → b) – Similarity: 0.82 – Region
    attribution: Partial – Hallucination: No' (a row with an error: 'Not compared: …')."""
    if row.get("error") not in (None, ""):
        return f"Not compared: {clip_text(row.get('error'), 120)}"
    sim = row.get("step_similarity")
    sim_text = DASH if is_missing(sim) else f"{float(sim):.2f}"
    answers = f"{clip_text(row.get('original_answer'), 40)} \u2192 {clip_text(row.get('masked_answer'), 40)}"
    attribution = str(row.get("region_attribution") or "")
    parts = [
        f"Step disrupted: {fmt_yes_no(row.get('step_disrupted'))}",
        f"Answer flipped: {fmt_yes_no(row.get('answer_flipped'))} ({answers})",
        f"Similarity: {sim_text}",
        f"Region attribution: {attribution.title() if attribution else DASH}",
        f"Hallucination: {fmt_yes_no(row.get('hallucinated'))}",
    ]
    return SEP.join(parts)


def table3(rows: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> Table:
    """Per example x model: Image, Model, GT Step / Masked Region, Details."""
    cond, n_samples, examples = masking_examples(rows, spec)
    k = int(spec.get("examples") or 0)
    cells = [
        [sid, name, gt_step_cell(r), details_cell(r)]
        for sid, pairs in examples
        for name, r in pairs
    ]
    lines = []
    region = _region_of(spec, cond) if cond else ""
    if len(examples) < k:
        lines.append(
            f"{len(examples)} of the {k} requested example(s): only {n_samples} compared sample(s)."
        )
    lines.append(
        "GT Step: the first original reasoning step that uses the masked premise (VPn: "
        "the n-th visual premise), else the premise alone. Box: the filled region "
        "(x0,y0,x1,y1 in pixels). Similarity: mean similarity of the matched step pairs."
    )
    return Table(
        data=_frame(cells, ["Image", "Model", "GT Step / Masked Region", "Details"]),
        footnotes=tuple(lines),
        caption=(
            "Disruption analysis of visual reasoning under masked region perturbations"
            + (f" ({REGION_LABELS.get(region, region)}, condition '{cond}')" if cond else "")
            + "."
        ),
        label="tab:masking-table3",
        stub_columns=2,
    )


# --------------------------------------------------------------------------- API


def masking_table_names(spec: Mapping[str, Any]) -> list[str]:
    """The file stems :func:`write_masking_tables` writes (each as .csv, .md, .tex):
    always all four, so the workflow can declare them; a table whose masking condition
    the run lacks (Table 4 without a random, Table 5 without a specific condition)
    says so in a footnote, with every cell "–"."""
    return ["table2", "table3", "table4", "table5"]


def absent_table(index: MetricsIndex, spec: Mapping[str, Any], region: str, number: int) -> Table:
    """Table 4 or 5 of a run without that masking condition: "–" cells and a note."""
    labels = {metric: col for _, col, metric in RATE_LABELS}
    models = _models(index, spec)
    rows = [[m[1]] + [DASH for _ in _ABLATION_ORDER] for m in models] or [
        [DASH] + [DASH for _ in _ABLATION_ORDER]
    ]
    what = REGION_LABELS.get(region, region)
    return Table(
        data=_frame(rows, ["Model"] + [labels[metric] for metric in _ABLATION_ORDER]),
        footnotes=(
            f"This run has no {region} masking condition (a `mask` condition with "
            f"`region: {region}`).",
        ),
        caption=f"{what[:1].upper()}{what[1:]} results for models on {masking_dataset(spec)}: "
        "not run.",
        label=f"tab:masking-table{number}",
        stub_columns=1,
    )


def masking_tables(
    metrics: pd.DataFrame | MetricsIndex,
    rows: Sequence[Mapping[str, Any]],
    spec: Mapping[str, Any],
) -> dict[str, Table]:
    """The tables of :func:`masking_table_names` by file stem."""
    index = metrics if isinstance(metrics, MetricsIndex) else MetricsIndex(metrics)
    cond = example_condition(spec)
    if cond is None:
        raise ValueError(
            f"dataset {masking_dataset(spec)!r}: the spec names no masked condition "
            "(masked_conditions is empty)"
        )
    conds = masked_conditions(spec)
    random_cond = next((c for c, r in conds.items() if r == "random"), None)
    specific_cond = next((c for c, r in conds.items() if r == "specific"), None)
    return {
        "table2": table2(index, spec, cond),
        "table3": table3(rows, spec),
        "table4": ablation_table(index, spec, random_cond, 4)
        if random_cond is not None
        else absent_table(index, spec, "random", 4),
        "table5": ablation_table(index, spec, specific_cond, 5)
        if specific_cond is not None
        else absent_table(index, spec, "specific", 5),
    }


def write_masking_tables(
    metrics_path: str | os.PathLike,
    compared_paths: Iterable[str | os.PathLike],
    spec: Mapping[str, Any],
    out_dir: str | Path,
) -> list[Path]:
    """Read the metrics CSV and the compared rows; write the tables as .csv/.md/.tex
    under ``out_dir``; return the paths."""
    rows = read_compared(compared_paths)
    return write_tables(masking_tables(read_metrics(metrics_path), rows, spec), out_dir)

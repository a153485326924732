"""Distract-Bench semantic-distraction tables (paper Tables 3, 4, 5) from the metrics.

Input: the tidy table of :func:`vlmrobust.metrics.distraction.compute_distraction_metrics`
and the run's ``spec`` (model registry, ``model_order``, ``dataset``, the clean /
distracted / corruption condition names). Output, in ``out_dir``: ``table3``,
``table4``, ``table5`` as ``.csv``, ``.md`` and ``.tex`` (:func:`distraction_table_names`).

* Table 3: models grouped by family (base first, then its reasoning models): N, clean
  accuracy, distracted accuracy, drop (pp), RR (%).
* Table 4: one row per base→reasoning pair (row groups "<base> →"), on the matched
  samples: under visual corruption and under semantic distraction, RR gap (base −
  reasoning, pp), agreement (%), retention gap (pp) and error Jaccard; a Mean row
  (mean over the pairs with a value), as the paper. The retention gaps' bootstrap CIs
  stay in the metrics table (the paper's Table 4 shows none).
* Table 5: models grouped by family: DRR, HFR, Ref_correct, Ref_wrong (%).

A missing or undefined value shows as "–" with a footnote naming the model, the column
and the reason from the metrics table. Model names, type labels, family grouping and
the look-ups are those of :mod:`vlmrobust.report.tables.corruption`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from vlmrobust.metrics.distraction import distraction_conditions, distraction_dataset
from vlmrobust.metrics.index import MetricsIndex, lookup
from vlmrobust.report.common import Footnotes, ModelInfo, ordered_models
from vlmrobust.report.tables.corruption import family_table
from vlmrobust.report.tables.render import (
    DASH,
    Table,
    fmt_count,
    fmt_jaccard,
    fmt_pct,
    fmt_signed_pct,
    grouped_frame,
    linked,
    mean_present,
    write_tables,
)

__all__ = [
    "distraction_table_names",
    "pair_models",
    "distraction_tables",
    "table3",
    "table4",
    "table5",
    "write_distraction_tables",
]

TABLE_NAMES = ("table3", "table4", "table5")
CORRUPTION_HEADER = "Visual corruption"
DISTRACTION_HEADER = "Semantic distraction"


def _models(index: MetricsIndex, spec: Mapping[str, Any]) -> list[ModelInfo]:
    return ordered_models(index, spec)


def pair_models(index: MetricsIndex, spec: Mapping[str, Any]) -> list[tuple[ModelInfo, ModelInfo]]:
    """(base, reasoning) pairs: every reasoning model whose base is among the models."""
    models = _models(index, spec)
    by_id = {m.id: m for m in models}
    return [
        (by_id[m.base], m)
        for m in models
        if m.role == "reasoning" and m.base and m.base in by_id and m.base != m.id
    ]


def _model_table(
    index: MetricsIndex,
    spec: Mapping[str, Any],
    leaves: list[str],
    cells: Callable[[ModelInfo, Footnotes], list[str]],
    explain: str,
    caption: str,
    label: str,
) -> Table:
    """A table of one row per model, grouped by family: name, type, then the cells
    ``cells`` gives (noting what it looks up); footnotes: those notes, then ``explain``."""
    models = _models(index, spec)
    notes = Footnotes(joiner=", ")
    rows = [[m.name, m.type_label, *cells(m, notes)] for m in models]
    columns = [("", "Model"), ("", "Type")] + [("", leaf) for leaf in leaves]
    lines = [*notes.lines(), explain]
    return family_table(rows, columns, models, spec, tuple(lines), caption, label)


def table3(index: MetricsIndex, spec: Mapping[str, Any]) -> Table:
    """Models: N, clean / distracted accuracy, drop (pp), RR (%)."""
    dataset = distraction_dataset(spec)
    clean, distracted, _ = distraction_conditions(spec)

    def cells(m: ModelInfo, notes: Footnotes) -> list[str]:
        def get(metric: str, cond: str, where: str) -> str:
            cell = lookup(index, metric, m.id, dataset, cond)
            notes.add(m.name, where, cell.note, missing=cell.missing)
            return linked(fmt_pct(cell.value), metric, m.id, dataset, cond)

        dist_row = index.one("accuracy", m.id, dataset, distracted)
        n = math.nan if dist_row is None else dist_row["n"]
        return [
            fmt_count(n),
            get("accuracy", clean, "clean accuracy"),
            get("accuracy", distracted, "distracted accuracy"),
            get("drop_pp", distracted, "drop"),
            get("rr", distracted, "RR"),
        ]

    leaves = ["N", "Clean Acc. (%)", "Distracted Acc. (%)", "Drop (pp)", "RR (%)"]
    explain = (
        "N: scored outputs under distraction. Drop: clean minus distracted accuracy in "
        "percentage points. RR: distracted / clean accuracy."
    )
    caption = (
        f"Distract-Bench robustness under answer-preserving semantic distractions "
        f"(condition '{distracted}'): clean and distracted accuracy, accuracy drop and "
        "relative robustness (RR)."
    )
    return _model_table(index, spec, leaves, cells, explain, caption, "tab:distraction-table3")


_T4_LEAVES = (
    ("RR gap", "rr_gap"),
    ("Agr. (%)", "agreement"),
    ("Ret. gap", "retention_gap"),
    ("Err. Jac.", "error_jaccard"),
)


def _t4_format(metric: str, value: float) -> str:
    if metric in ("rr_gap", "retention_gap"):
        return fmt_signed_pct(value)
    if metric == "agreement":
        return fmt_pct(value)
    return fmt_jaccard(value)


def table4(index: MetricsIndex, spec: Mapping[str, Any]) -> Table:
    """Pairs on the matched samples: RR gap, agreement, retention gap, Jaccard under
    corruption and under distraction, and a Mean row."""
    dataset = distraction_dataset(spec)
    _, distracted, corrupt = distraction_conditions(spec)
    blocks = ((CORRUPTION_HEADER, corrupt), (DISTRACTION_HEADER, distracted))
    columns = [("", "Pair")] + [(h, leaf) for h, _ in blocks for leaf, _ in _T4_LEAVES]
    notes = Footnotes(joiner=", ")
    rows: list[list[str]] = []
    groups: list[tuple[str, int]] = []
    values: dict[tuple[str, str], list[float]] = {}
    for base, reas in pair_models(index, spec):
        label = f"{base.name} \u2192"
        if groups and groups[-1][0] == label:
            groups[-1] = (label, groups[-1][1] + 1)
        else:
            groups.append((label, 1))
        name = f"{base.name}\u2192{reas.name}"
        row = [reas.name]
        for header, cond in blocks:
            for leaf, metric in _T4_LEAVES:
                cell = lookup(index, metric, reas.id, dataset, cond, base_model=base.id)
                notes.add(name, f"{header} {leaf}", cell.note, missing=cell.missing)
                values.setdefault((cond, metric), []).append(cell.value)
                row.append(_t4_format(metric, cell.value))
        rows.append(row)
    npairs = len(rows)
    mean = ["Mean"]
    for _, cond in blocks:
        for _, metric in _T4_LEAVES:
            mean.append(_t4_format(metric, mean_present(values.get((cond, metric), []))))
    rows.append(mean)
    groups.append(("", 1))
    lines = list(notes.lines())
    if npairs == 0:
        lines.append(f"{DASH} No base\u2192reasoning pair among the models.")
    lines.append(
        "Matched samples: those scored under clean, corrupted and distracted input. RR gap: "
        "base minus reasoning RR (pp). Agr.: both retain or both lose, among the samples "
        "both models answer correctly on clean input. Ret. gap: base minus reasoning "
        "retention (pp). Err. Jac.: Jaccard overlap of perturbation-induced errors. Mean: "
        "over the pairs with a value."
    )
    return Table(
        data=grouped_frame(rows, columns),
        row_groups=tuple(groups),
        footnotes=tuple(lines),
        caption=(
            "Controlled matched-sample comparison of base and reasoning model pairs under "
            f"visual corruption ('{corrupt}') and semantic distraction ('{distracted}')."
        ),
        label="tab:distraction-table4",
        stub_columns=1,
    )


_T5_LEAVES = (
    ("DRR (%)", "drr"),
    ("HFR (%)", "hfr"),
    ("Ref_correct (%)", "ref_correct"),
    ("Ref_wrong (%)", "ref_wrong"),
)


def table5(index: MetricsIndex, spec: Mapping[str, Any]) -> Table:
    """Models: DRR, HFR, Ref_correct, Ref_wrong (%)."""
    dataset = distraction_dataset(spec)
    _, distracted, _ = distraction_conditions(spec)

    def cells(m: ModelInfo, notes: Footnotes) -> list[str]:
        row = []
        for leaf, metric in _T5_LEAVES:
            cell = lookup(index, metric, m.id, dataset, distracted)
            # a note on a value that exists (excluded judgments) is kept, without "–"
            notes.add(m.name, leaf.replace(" (%)", ""), cell.note, missing=cell.missing)
            row.append(fmt_pct(cell.value))
        return row

    explain = (
        "DRR: outputs that refer to the distractor. HFR: outputs that refer to it and are "
        "wrong (over all judged outputs). Ref_correct / Ref_wrong: reference ratio among "
        "correct / wrong outputs."
    )
    caption = "Distractor-reference analysis on Distract-Bench."
    leaves = [leaf for leaf, _ in _T5_LEAVES]
    return _model_table(index, spec, leaves, cells, explain, caption, "tab:distraction-table5")


def distraction_table_names(spec: Mapping[str, Any]) -> list[str]:
    """The file stems :func:`write_distraction_tables` writes (each as .csv, .md, .tex)."""
    return list(TABLE_NAMES)


def distraction_tables(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Table]:
    """Tables 3, 4, 5 by file stem."""
    index = metrics if isinstance(metrics, MetricsIndex) else MetricsIndex(metrics)
    return {
        "table3": table3(index, spec),
        "table4": table4(index, spec),
        "table5": table5(index, spec),
    }


def write_distraction_tables(
    metrics: pd.DataFrame,
    spec: Mapping[str, Any],
    out_dir: str | Path,
    folder: str | None = None,
) -> list[Path]:
    """Write Tables 3, 4, 5 as .csv/.md/.tex under ``out_dir`` (and .html, with explorer
    links, given their ``folder`` under results/tables/); return the paths."""
    return write_tables(distraction_tables(metrics, spec), out_dir, folder)

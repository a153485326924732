"""Distract-Bench vision-corruption tables (paper Tables 1, 2, 8, 9, 10) from the metrics.

Input: the tidy metrics table (``results/metrics/corruption/metrics.csv``) and the run's
``spec`` (model registry entries, model order, datasets with their group, the clean and
perturbed conditions). Output, in ``out_dir``: ``table1``, ``table2``, ``table8``,
``table9``, ``table10`` as ``.csv``, ``.md`` and ``.tex`` (and ``.html``, see
:func:`~vlmrobust.report.tables.render.write_table`). Accuracy and RR cells are
:class:`~vlmrobust.report.tables.render.Linked` to the explorer.

* Table 1: models grouped by family (base first, then its reasoning models) × the
  benchmark groups (Reasoning, General): clean accuracy, perturbed accuracy, RR.
* Table 2: one row per base→reasoning pair, pooled over benchmarks: N, agreement,
  retention gap with its 90% CI, error overlap (Jaccard), and a Mean row.
* Tables 8, 9, 10: models × benchmarks (config order): clean accuracy, perturbed
  accuracy, RR.

Tables 1, 2, 9 and 10 depend on the perturbed condition: with more than one perturbed
condition in the spec each gets one file per condition (``table1_<condition>``); the
names depend on the spec only (:func:`corruption_table_names`), so a workflow rule can
declare them. A value that is missing or undefined shows as "–" with a footnote giving
the model, the benchmark and the reason from the metrics table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vlmrobust.metrics.index import METRIC_COLUMNS, Cell, MetricsIndex, lookup, normalise_metrics
from vlmrobust.report.common import (
    POOLED,
    Footnotes,
    ModelInfo,
    family_groups,
    family_label,
    ordered_models,
)
from vlmrobust.report.tables.render import (
    DASH,
    Table,
    fmt_count,
    fmt_gap_ci,
    fmt_jaccard,
    fmt_pct,
    fmt_signed_pct,
    grouped_frame,
    is_missing,
    linked,
    mean_present,
    write_tables,
)

__all__ = [
    "METRIC_COLUMNS",
    "POOLED",
    "Footnotes",
    "MetricsIndex",
    "ModelInfo",
    "benchmark_label",
    "benchmark_order",
    "condition_label",
    "corruption_table_names",
    "corruption_tables",
    "family_label",
    "family_table",
    "group_order",
    "normalise_metrics",
    "ordered_models",
    "perturbed_conditions",
    "write_corruption_tables",
]

#: Benchmark groups shown first, in this order (the paper's Table 1); others follow.
KNOWN_GROUPS: tuple[str, ...] = ("reasoning", "general")
CONDITION_LABELS = {"corrupt": "Corrupted", "corruption": "Corrupted", "edit": "Distracted"}


# ---------------------------------------------------------------------------
# Models, benchmarks, groups, conditions
# ---------------------------------------------------------------------------


def _dataset_entry(spec: Mapping[str, Any], dataset: str) -> Mapping[str, Any]:
    entry = (spec.get("datasets") or {}).get(dataset)
    return entry if isinstance(entry, Mapping) else {}


def group_order(index: MetricsIndex, spec: Mapping[str, Any]) -> list[str]:
    """Benchmark groups: reasoning, general, then any other (config order)."""
    found = [str(_dataset_entry(spec, d).get("group") or "") for d in spec.get("datasets") or {}]
    found = [g for g in dict.fromkeys(found) if g]
    if not found:
        found = sorted(
            {
                r["benchmark"]
                for r in index.metric_rows("accuracy")
                if r["benchmark"] in KNOWN_GROUPS
            }
        )
    known = [g for g in KNOWN_GROUPS if g in found]
    return known + [g for g in found if g not in known]


def group_label(group: str) -> str:
    return group[:1].upper() + group[1:]


def benchmark_order(index: MetricsIndex, spec: Mapping[str, Any]) -> list[str]:
    """Benchmarks in config order: a dataset, or its ``dataset:prompt`` benchmarks (in
    the order of the dataset's ``prompts`` when given, else sorted); then any other
    benchmark of the metrics table, sorted. Group names and "all" are not benchmarks."""
    datasets = [str(d) for d in spec.get("datasets") or {}]
    groups = set(group_order(index, spec)) | set(KNOWN_GROUPS) | {POOLED}
    present = [b for b in index.benchmarks() if b not in groups]
    out: list[str] = []
    for ds in datasets:
        variants = [b for b in present if b.startswith(ds + ":")]
        prompts = [str(p) for p in _dataset_entry(spec, ds).get("prompts") or []]
        ordered = [f"{ds}:{p}" for p in prompts if f"{ds}:{p}" in variants]
        ordered += sorted(b for b in variants if b not in ordered)
        if ds in present or not ordered:
            out.append(ds)
        out += ordered
    out += sorted(b for b in present if b not in out)
    return out


def benchmark_label(benchmark: str, spec: Mapping[str, Any]) -> str:
    """Display name: the dataset's ``display`` (or name), with "(prompt)" for variants;
    a prompt named "<dataset>-x" shows as "x"."""
    dataset, _, prompt = benchmark.partition(":")
    display = str(_dataset_entry(spec, dataset).get("display") or dataset)
    if not prompt:
        return display
    short = prompt[len(dataset) + 1 :] if prompt.startswith(dataset + "-") else prompt
    return f"{display} ({short})"


def perturbed_conditions(spec: Mapping[str, Any]) -> list[str]:
    """The spec's ``perturbed_conditions`` (the same key the metrics read)."""
    perturbed = spec.get("perturbed_conditions") or []
    if isinstance(perturbed, str):
        perturbed = [perturbed]
    return [str(c) for c in perturbed]


def clean_condition(spec: Mapping[str, Any]) -> str:
    """The spec's ``clean_condition`` (default ``clean``)."""
    return str(spec.get("clean_condition") or "clean")


def condition_label(condition: str) -> str:
    """ "corrupt" -> "Corrupted"; any other condition shows as its name."""
    return CONDITION_LABELS.get(condition, condition)


def condition_suffixes(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(condition, file-name suffix): no suffix when there is one perturbed condition."""
    conds = perturbed_conditions(spec)
    if len(conds) == 1:
        return [(conds[0], "")]
    return [(c, f"_{c}") for c in conds]


# ---------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------


def family_table(
    rows: list[list[str]],
    columns: list[tuple[str, str]],
    models: list[ModelInfo],
    spec: Mapping[str, Any],
    footnotes: Sequence[str],
    caption: str,
    label: str,
) -> Table:
    """A table of one row per model (name and type first), grouped by family."""
    return Table(
        data=grouped_frame(rows, columns),
        row_groups=family_groups(models, spec),
        footnotes=footnotes,
        caption=caption,
        label=label,
        row_group_column="Family",
        stub_columns=2,
    )


def _pct_cell(
    index: MetricsIndex,
    notes: Footnotes,
    model: ModelInfo,
    where: str,
    metric: str,
    benchmark: str,
    condition: str,
) -> str:
    """One percentage cell (accuracy, RR), linked to the explorer when it has a value."""
    cell = lookup(index, metric, model.id, benchmark, condition)
    notes.add(model.name, where, cell.note, missing=cell.missing)
    return linked(fmt_pct(cell.value), metric, model.id, benchmark, condition)


def table1(index: MetricsIndex, spec: Mapping[str, Any], condition: str) -> Table:
    """Models × benchmark groups: clean accuracy, perturbed accuracy, RR."""
    models = ordered_models(index, spec)
    clean = clean_condition(spec)
    label = condition_label(condition)
    leaves = [
        ("Clean Acc. (%)", "accuracy", clean),
        (f"{label} Acc. (%)", "accuracy", condition),
        ("RR (%)", "rr", condition),
    ]
    groups = group_order(index, spec)
    columns = [("", "Model"), ("", "Type")]
    columns += [(group_label(g), leaf) for g in groups for leaf, _, _ in leaves]
    notes = Footnotes(joiner=", ")
    rows = []
    for m in models:
        row = [m.name, m.type_label]
        for g in groups:
            for leaf, metric, cond in leaves:
                where = f"{group_label(g)} {leaf}"
                row.append(_pct_cell(index, notes, m, where, metric, g, cond))
        rows.append(row)
    caption = (
        f"Robustness under {label.lower()} inputs (condition '{condition}') across "
        "benchmark groups: clean accuracy, perturbed accuracy and relative robustness "
        "(RR = perturbed / clean accuracy)."
    )
    return family_table(
        rows, columns, models, spec, notes.lines(), caption, f"tab:corruption-table1-{condition}"
    )


def _pairs(index: MetricsIndex, spec: Mapping[str, Any]) -> list[tuple[ModelInfo, ModelInfo]]:
    """(base, reasoning) pairs: every model with a ``base`` among the models, in table
    order, then pairs only the metrics table knows."""
    models = ordered_models(index, spec)
    by_id = {m.id: m for m in models}
    pairs = [(by_id[m.base], m) for m in models if m.base and m.base in by_id and m.base != m.id]
    seen = {(b.id, r.id) for b, r in pairs}
    extra = sorted(
        {
            (r["base_model"], r["model"])
            for metric in ("pair_n", "agreement", "retention_gap", "error_jaccard")
            for r in index.metric_rows(metric)
            if r["base_model"] and r["model"]
        }
        - seen
    )
    for base, reas in extra:
        if base in by_id and reas in by_id:
            pairs.append((by_id[base], by_id[reas]))
    return pairs


def table2(index: MetricsIndex, spec: Mapping[str, Any], condition: str) -> Table:
    """Pairs pooled over benchmarks: N, agreement, retention gap (90% CI), Jaccard, Mean."""
    columns = [
        ("", "Pair"),
        ("", "N"),
        ("", "Agreement (%)"),
        ("", "Retention gap @ 90% CI"),
        ("", "Error overlap (Jaccard)"),
    ]
    notes = Footnotes(joiner=", ")
    rows = []
    agreements, gaps, jaccards = [], [], []
    for base, reas in _pairs(index, spec):
        name = f"{base.name}\u2192{reas.name}"

        def get(metric: str, where: str, base=base, reas=reas, name=name) -> Cell:
            cell = lookup(index, metric, reas.id, POOLED, condition, base_model=base.id)
            notes.add(name, where, cell.note, missing=cell.missing)
            return cell

        n = get("pair_n", "N")
        agree = get("agreement", "agreement")
        gap = get("retention_gap", "retention gap")
        jac = get("error_jaccard", "error overlap")
        n_value = n.value
        if is_missing(n_value) and agree.row is not None and not is_missing(agree.row["n"]):
            n_value = agree.row["n"]
        gap_row = gap.row or {}
        rows.append(
            [
                name,
                fmt_count(n_value),
                fmt_pct(agree.value),
                fmt_gap_ci(gap.value, gap_row.get("ci_low"), gap_row.get("ci_high")),
                fmt_jaccard(jac.value),
            ]
        )
        agreements.append(agree.value)
        gaps.append(gap.value)
        jaccards.append(jac.value)
    npairs = len(rows)
    rows.append(
        [
            "Mean",
            DASH,
            fmt_pct(mean_present(agreements)),
            fmt_signed_pct(mean_present(gaps)),
            fmt_jaccard(mean_present(jaccards)),
        ]
    )
    lines = list(notes.lines())
    if npairs == 0:
        lines.append(f"{DASH} No base\u2192reasoning pair among the models.")
    lines.append(
        "N: samples correct on the clean input for both models of the pair. Retention gap: "
        "base minus reasoning retention (percentage points); positive means the base model "
        "retains more. Mean: over the pairs with a value."
    )
    return Table(
        data=grouped_frame(rows, columns),
        row_groups=(("", npairs), ("", 1)),
        footnotes=tuple(lines),
        caption=(
            "Matched-sample robustness similarity between reasoning models and their base "
            f"models under condition '{condition}', pooled over benchmarks."
        ),
        label=f"tab:corruption-table2-{condition}",
        stub_columns=1,
    )


def benchmark_table(
    index: MetricsIndex,
    spec: Mapping[str, Any],
    metric: str,
    condition: str,
    caption: str,
    label: str,
) -> Table:
    """Models × benchmarks (config order), one metric in percent."""
    models = ordered_models(index, spec)
    benches = benchmark_order(index, spec)
    columns = [("", "Model"), ("", "Type")] + [("", benchmark_label(b, spec)) for b in benches]
    notes = Footnotes(joiner=" on ")
    rows = []
    for m in models:
        row = [m.name, m.type_label]
        for b in benches:
            row.append(_pct_cell(index, notes, m, benchmark_label(b, spec), metric, b, condition))
        rows.append(row)
    return family_table(rows, columns, models, spec, notes.lines(), caption, label)


def corruption_table_names(spec: Mapping[str, Any]) -> list[str]:
    """The file stems :func:`write_corruption_tables` writes (each as .csv, .md, .tex)."""
    names = []
    suffixes = condition_suffixes(spec)
    names += [f"table1{s}" for _, s in suffixes]
    names += [f"table2{s}" for _, s in suffixes]
    names.append("table8")
    names += [f"table9{s}" for _, s in suffixes]
    names += [f"table10{s}" for _, s in suffixes]
    return names


def corruption_tables(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Table]:
    """Every table by file stem (see :func:`corruption_table_names`)."""
    index = metrics if isinstance(metrics, MetricsIndex) else MetricsIndex(metrics)
    suffixes = condition_suffixes(spec)
    clean = clean_condition(spec)
    tables: dict[str, Table] = {}
    for cond, sfx in suffixes:
        tables[f"table1{sfx}"] = table1(index, spec, cond)
    for cond, sfx in suffixes:
        tables[f"table2{sfx}"] = table2(index, spec, cond)
    tables["table8"] = benchmark_table(
        index,
        spec,
        "accuracy",
        clean,
        caption="Clean accuracy (Acc@1, %) of every model on every benchmark.",
        label="tab:corruption-table8",
    )
    for cond, sfx in suffixes:
        tables[f"table9{sfx}"] = benchmark_table(
            index,
            spec,
            "accuracy",
            cond,
            caption=f"Accuracy (Acc@1, %) under condition '{cond}' on every benchmark.",
            label=f"tab:corruption-table9-{cond}",
        )
    for cond, sfx in suffixes:
        tables[f"table10{sfx}"] = benchmark_table(
            index,
            spec,
            "rr",
            cond,
            caption=(f"Relative robustness (RR, %) under condition '{cond}' on every benchmark."),
            label=f"tab:corruption-table10-{cond}",
        )
    return tables


def write_corruption_tables(
    metrics: pd.DataFrame,
    spec: Mapping[str, Any],
    out_dir: str | Path,
    folder: str | None = None,
) -> list[Path]:
    """Write Tables 1, 2, 8, 9, 10 as .csv/.md/.tex under ``out_dir`` (and .html, with
    explorer links, given their ``folder`` under results/tables/); return the paths."""
    return write_tables(corruption_tables(metrics, spec), out_dir, folder)

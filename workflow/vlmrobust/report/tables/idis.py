"""Tables of the Idis study (definitions: :mod:`vlmrobust.metrics.idis`).

``summary``: per model and prompt setting, one row per group of responses (clean, each
distractor kind x semantics x count, sizes, resolutions): questions, responses, accuracy
(%) with its question-bootstrap interval and the mean reasoning length in tokens.
Groups are ordered clean first, then by condition, kind, semantics and count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ...metrics.idis import group_label, sort_key
from .render import DASH, Table, fmt_count, fmt_pct, is_missing

__all__ = ["idis_table_names", "idis_tables"]

_KEY = ["model", "prompt", "condition", "kind", "semantics", "distractors", "size", "resolution"]


def idis_table_names(spec: Mapping[str, Any]) -> list[str]:
    return ["summary"]


def _fmt_ci(value: Any, low: Any, high: Any) -> str:
    if is_missing(value):
        return DASH
    if is_missing(low) or is_missing(high):
        return fmt_pct(value)
    return f"{fmt_pct(value)} [{fmt_pct(low)}, {fmt_pct(high)}]"


def _fmt_len(value: Any) -> str:
    return DASH if is_missing(value) else f"{float(value):.1f}"


def summary_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    names = {m: (f.get("name") or m) for m, f in (spec.get("models") or {}).items()}
    order = list(spec.get("model_order") or names)
    m = metrics[metrics["metric"].isin(["accuracy", "mean_length", "questions"])]
    cells, groups, notes = [], [], []
    for model in [x for x in order if x in set(m["model"])]:
        start = len(cells)
        groups_of = m[m["model"] == model].groupby(_KEY[1:], sort=False)
        keyed = sorted(
            groups_of,
            key=lambda kg: (
                kg[0][0],  # prompt
                kg[0][2] != "none",  # clean first
                *sort_key(list(kg[0][1:5])),  # condition, kind, semantics, distractors
                *sort_key(list(kg[0][5:])),  # size, resolution
            ),
        )
        for values, sel in keyed:
            key = dict(zip(_KEY[1:], values, strict=True))
            get = {r["metric"]: r for r in sel.to_dict("records")}
            acc, length, q = get.get("accuracy"), get.get("mean_length"), get.get("questions")
            for row in (acc, length):
                if row and row.get("note") and row["note"] not in notes:
                    notes.append(row["note"])
            cells.append(
                {
                    "Prompt": key["prompt"],
                    "Condition": key["condition"],
                    "Group": group_label(key),
                    "Questions": fmt_count(q["value"]) if q else DASH,
                    "Responses": fmt_count(acc["n"]) if acc else DASH,
                    "Accuracy (%)": _fmt_ci(acc["value"], acc["ci_low"], acc["ci_high"])
                    if acc
                    else DASH,
                    "Mean length (tokens)": _fmt_len(length["value"]) if length else DASH,
                }
            )
        groups.append((names.get(model, model), len(cells) - start))
    columns = [
        "Prompt",
        "Condition",
        "Group",
        "Questions",
        "Responses",
        "Accuracy (%)",
        "Mean length (tokens)",
    ]
    data = pd.DataFrame(cells, columns=columns)
    level = float((spec.get("bootstrap") or {}).get("level", 0.95))
    footnotes = (
        f"Accuracy over every response (all draws); [{round(level * 100)}% bootstrap "
        "interval over questions]. Mean length: reasoning tokens of the thinking part.",
        *notes,
    )
    return Table(
        data,
        row_groups=tuple(groups),
        footnotes=footnotes,
        caption=f"Idis: accuracy and reasoning length on {spec.get('dataset')}",
        label=f"tab:idis-{spec.get('dataset')}",
        row_group_column="Model",
        stub_columns=3,
    )


def idis_tables(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Table]:
    return {"summary": summary_table(metrics, spec)}

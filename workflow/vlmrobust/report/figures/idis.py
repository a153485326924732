"""Figures of the Idis study (definitions: :mod:`vlmrobust.metrics.idis`).

``length_accuracy``: the paper's Figure 3 layout — one panel per model, one
length-rank curve per number of distractors (0 = the clean images; the visual kind
pooled over its semantics, else the first kind the run has): x = mean reasoning length
of the rank-r responses, y = their accuracy, with the question-bootstrap band.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ...metrics.idis import POOLED, sort_key

__all__ = ["idis_figure_names", "idis_figures", "length_accuracy_figure"]


def idis_figure_names(spec: Mapping[str, Any]) -> list[str]:
    return ["length_accuracy"]


def _curve_kind(m: pd.DataFrame) -> tuple[str, str] | None:
    """(kind, semantics) of the curves: visual pooled, else the first kind there is."""
    kinds = m.loc[m["kind"] != "none", ["kind", "semantics"]].drop_duplicates()
    for kind in ("visual", "typographic", "textual"):
        k = kinds[kinds["kind"] == kind]
        if len(k):
            pooled = k[k["semantics"] == POOLED]
            return kind, (POOLED if len(pooled) else str(k["semantics"].iloc[0]))
    return None


def length_accuracy_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    names = {m: (f.get("name") or m) for m, f in (spec.get("models") or {}).items()}
    m = metrics[metrics["metric"].isin(["rank_accuracy", "rank_length"])]
    prompt = spec.get("main_prompt") or (sorted(set(m["prompt"]))[0] if len(m) else "")
    m = m[m["prompt"] == prompt]
    models = [x for x in (spec.get("model_order") or []) if x in set(m["model"])]
    fig = Figure(figsize=(3.2 * max(1, len(models)), 3.0))
    if not models:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no length-rank curves (no outputs)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    choice = _curve_kind(m)
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models, strict=True):
        mm = m[m["model"] == model]
        curves = [("0", mm[mm["kind"] == "none"])]
        if choice is not None:
            sel = mm[(mm["kind"] == choice[0]) & (mm["semantics"] == choice[1])]
            for n in sorted(set(sel["distractors"]), key=lambda v: sort_key([v])):
                curves.append((n, sel[sel["distractors"] == n]))
        for n, c in curves:
            acc = c[c["metric"] == "rank_accuracy"].copy()
            length = c[c["metric"] == "rank_length"]
            if acc.empty:
                continue
            acc = acc.merge(
                length[["condition", "rank", "value"]].rename(columns={"value": "x"}),
                on=["condition", "rank"],
            )
            acc["r"] = acc["rank"].astype(int)
            acc = acc.sort_values("r")
            ax.plot(acc["x"], acc["value"] * 100, marker="o", ms=3, label=f"n={n}")
            ax.fill_between(acc["x"], acc["ci_low"] * 100, acc["ci_high"] * 100, alpha=0.15)
        ax.set_title(str(names.get(model, model)), fontsize=9)
        ax.set_xlabel("reasoning length (tokens)", fontsize=8)
        ax.set_ylabel("accuracy (%)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, title="distractors", title_fontsize=7)
    kind = f"{choice[0]} ({choice[1]})" if choice else "clean only"
    fig.suptitle(
        f"{spec.get('dataset')}: length-accuracy by number of distractors, {kind}", fontsize=9
    )
    fig.tight_layout()
    return fig


def idis_figures(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Figure]:
    return {"length_accuracy": length_accuracy_figure(metrics, spec)}

"""Figures of the semantic-distraction study (paper Figures 5 and 6) from the metrics.

* ``figure5``: Distract-Bench RR (%) per model as bars, grouped by family (the order of
  the tables: base first, then its reasoning models); each family's base-model RR is a
  dashed horizontal line over the family's bars.
* ``figure6``: (A) distractor-reference ratios among correct (``ref_correct``) and wrong
  (``ref_wrong``) outputs per model, grouped bars, families separated; (B) HFR of each
  reasoning model relative to its base (``hfr_relative``), bars with a dashed line at 1.0.

PNG (150 dpi) and PDF, fixed sizes (a function of the number of models only), no
timestamps, the default style: a rerun on the same metrics gives the same bytes
(:mod:`vlmrobust.report.figures.corruption`'s writer). A missing or undefined value is no bar
but an "n/a" mark at its place; a panel without any value says why in red.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from vlmrobust.metrics.distraction import distraction_conditions, distraction_dataset
from vlmrobust.metrics.index import MetricsIndex, is_missing, lookup
from vlmrobust.report.common import (
    DPI,
    ModelInfo,
    family_label,
    ordered_models,
    snap,
    write_figures,
)
from vlmrobust.report.tables.distraction import pair_models

__all__ = [
    "distraction_figure_names",
    "distraction_figures",
    "figure5",
    "figure6",
    "write_distraction_figures",
]

BASE_COLOUR = "0.35"
REASONING_COLOUR = "C0"
OTHER_COLOUR = "C7"
CORRECT_COLOUR = "C2"
WRONG_COLOUR = "C3"
NOTE_COLOUR = "firebrick"
#: space between families on the x axis (in bar slots)
FAMILY_GAP = 0.8


def _pct(value: Any) -> float:
    return math.nan if is_missing(value) else float(value) * 100


def _positions(models: list[ModelInfo]) -> tuple[np.ndarray, list[tuple[str, list[int]]]]:
    """x of each model (families separated by a gap) and (family, indices) runs."""
    xs: list[float] = []
    runs: list[tuple[str, list[int]]] = []
    x = 0.0
    for i, m in enumerate(models):
        if runs and runs[-1][0] == m.family:
            runs[-1][1].append(i)
        else:
            if runs:
                x += FAMILY_GAP
            runs.append((m.family, [i]))
        xs.append(x)
        x += 1.0
    return np.array(xs, dtype=float), runs


def _colour(m: ModelInfo) -> str:
    if m.role == "base":
        return BASE_COLOUR
    return REASONING_COLOUR if m.role == "reasoning" else OTHER_COLOUR


def _note(ax: Axes, text: str) -> None:
    """A visible red note (wrapped, on a white box) in the upper half of the axes."""
    ax.text(
        0.5,
        0.7,
        textwrap.fill(text, 44),
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=7,
        color=NOTE_COLOUR,
        bbox={"facecolor": "white", "edgecolor": NOTE_COLOUR, "linewidth": 0.6},
        zorder=5,
    )


def _na(ax: Axes, x: float) -> None:
    ax.text(
        x,
        0.02,
        "n/a",
        transform=ax.get_xaxis_transform(),
        ha="center",
        va="bottom",
        fontsize=6,
        color="0.35",
        rotation=90,
    )


def _reason(notes: list[str], default: str) -> str:
    uniq = [n for n in dict.fromkeys(notes) if n]
    if not uniq:
        return default
    return default + " (" + "; ".join(uniq[:2]) + ("; ..." if len(uniq) > 2 else "") + ")"


def _family_ticks(ax: Axes, xs: np.ndarray, runs, models, spec) -> None:
    ax.set_xticks(xs, [m.name for m in models], rotation=40, ha="right", fontsize=7)
    for fam, idx in runs:
        centre = float(np.mean(xs[idx]))
        ax.text(
            centre,
            1.01,
            f"{family_label(fam, spec)}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="0.3",
        )
    if len(xs):
        ax.set_xlim(float(xs[0]) - 0.7, float(xs[-1]) + 0.7)
    else:
        ax.set_xlim(-0.7, 0.7)


def figure5_size(n_models: int) -> tuple[float, float]:
    """(width, height) in inches of Figure 5."""
    return snap(max(4.0, 0.55 * max(n_models, 1) + 1.6)), 3.8


def figure5(index: MetricsIndex, spec: Mapping[str, Any]) -> Figure:
    dataset = distraction_dataset(spec)
    _, distracted, _ = distraction_conditions(spec)
    models = ordered_models(index, spec)
    xs, runs = _positions(models)
    fig = Figure(figsize=figure5_size(len(models)), dpi=DPI)
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    ax.set_title(f"Distract-Bench RR under '{distracted}'", fontsize=9, pad=14)
    values, notes = [], []
    for m in models:
        cell = lookup(index, "rr", m.id, dataset, distracted)
        values.append(_pct(cell.value))
        notes.append(cell.note)
    y = np.array(values, dtype=float)
    finite = np.isfinite(y)
    for i, m in enumerate(models):
        if finite[i]:
            ax.bar(xs[i], y[i], width=0.7, color=_colour(m), edgecolor="black", linewidth=0.5)
            ax.text(xs[i], y[i], f"{y[i]:.1f}", ha="center", va="bottom", fontsize=6)
        else:
            _na(ax, xs[i])
    for _fam, idx in runs:
        bases = [i for i in idx if models[i].role == "base" and finite[i]]
        if bases:
            level = y[bases[0]]
            ax.hlines(
                level,
                xs[idx[0]] - 0.45,
                xs[idx[-1]] + 0.45,
                colors="black",
                linestyles="--",
                linewidth=1.0,
                zorder=3,
            )
    _family_ticks(ax, xs, runs, models, spec)
    ax.set_ylabel("RR (%)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", color="0.93", linewidth=0.6)
    ax.set_axisbelow(True)
    if finite.any():
        lo, hi = float(np.min(y[finite])), float(np.max(y[finite]))
        ax.set_ylim(max(0.0, lo - max(5.0, 0.3 * (hi - lo))), max(hi, 100.0) + 4)
    else:
        ax.set_ylim(0, 110)
        _note(ax, _reason(notes, "no RR values") if models else "no models")
    handles = [
        Patch(facecolor=BASE_COLOUR, edgecolor="black", label="base"),
        Patch(facecolor=REASONING_COLOUR, edgecolor="black", label="reasoning"),
    ]
    if any(m.role not in ("base", "reasoning") for m in models):
        handles.append(Patch(facecolor=OTHER_COLOUR, edgecolor="black", label="other"))
    handles.append(Line2D([], [], color="black", linestyle="--", label="base RR"))
    ax.legend(handles=handles, fontsize=6, loc="lower right", frameon=False)
    return fig


def figure6_size(n_models: int, n_pairs: int) -> tuple[float, float]:
    """(width, height) in inches of Figure 6."""
    a = max(3.6, 0.6 * max(n_models, 1) + 1.4)
    b = max(2.6, 0.5 * max(n_pairs, 1) + 1.4)
    return snap(a + b + 0.4), 3.8


def figure6(index: MetricsIndex, spec: Mapping[str, Any]) -> Figure:
    """Figure 6: (A) reference ratios among correct and wrong outputs per model, (B)
    HFR of each reasoning model relative to its base."""
    _, distracted, _ = distraction_conditions(spec)
    models = ordered_models(index, spec)
    pairs = pair_models(index, spec)
    fig = Figure(figsize=figure6_size(len(models), len(pairs)), dpi=DPI)
    fig.set_layout_engine("constrained")
    a_w = max(3.6, 0.6 * max(len(models), 1) + 1.4)
    b_w = max(2.6, 0.5 * max(len(pairs), 1) + 1.4)
    ax_a, ax_b = fig.subplots(1, 2, width_ratios=[a_w, b_w])
    fig.suptitle(f"Distractor-reference behaviour under '{distracted}'", fontsize=9)
    _reference_panel(ax_a, index, spec, models)
    _relative_hfr_panel(ax_b, index, spec, pairs)
    return fig


def _reference_panel(
    ax_a: Axes, index: MetricsIndex, spec: Mapping[str, Any], models: list[ModelInfo]
) -> None:
    """Figure 6A: Ref_correct and Ref_wrong bars of each model, by family."""
    dataset = distraction_dataset(spec)
    _, distracted, _ = distraction_conditions(spec)
    xs, runs = _positions(models)
    ax_a.set_title("(A) reference ratio among correct vs wrong outputs", fontsize=8, pad=14)
    any_a = False
    notes: list[str] = []
    width = 0.38
    for i, m in enumerate(models):
        for metric, off, colour in (
            ("ref_correct", -width / 2, CORRECT_COLOUR),
            ("ref_wrong", width / 2, WRONG_COLOUR),
        ):
            cell = lookup(index, metric, m.id, dataset, distracted)
            v = _pct(cell.value)
            if math.isfinite(v):
                any_a = True
                ax_a.bar(
                    xs[i] + off, v, width=width, color=colour, edgecolor="black", linewidth=0.4
                )
            else:
                notes.append(cell.note)
                _na(ax_a, xs[i] + off)
    _family_ticks(ax_a, xs, runs, models, spec)
    ax_a.set_ylabel("reference ratio (%)", fontsize=8)
    ax_a.tick_params(axis="y", labelsize=7)
    ax_a.set_ylim(0, 105)
    ax_a.grid(axis="y", color="0.93", linewidth=0.6)
    ax_a.set_axisbelow(True)
    if not any_a:
        _note(ax_a, _reason(notes, "no reference ratios") if models else "no models")
    ax_a.legend(
        handles=[
            Patch(facecolor=CORRECT_COLOUR, edgecolor="black", label="correct outputs"),
            Patch(facecolor=WRONG_COLOUR, edgecolor="black", label="wrong outputs"),
        ],
        fontsize=6,
        loc="upper left",
        frameon=False,
    )


def _relative_hfr_panel(
    ax_b: Axes,
    index: MetricsIndex,
    spec: Mapping[str, Any],
    pairs: list[tuple[ModelInfo, ModelInfo]],
) -> None:
    """Figure 6B: one bar per (base, reasoning) pair, the reasoning model's HFR over
    its base's, with a dashed line at 1."""
    dataset = distraction_dataset(spec)
    _, distracted, _ = distraction_conditions(spec)
    ax_b.set_title("(B) HFR relative to the base model", fontsize=8, pad=14)
    xb = np.arange(len(pairs), dtype=float)
    vals, bnotes = [], []
    for base, reas in pairs:
        cell = lookup(index, "hfr_relative", reas.id, dataset, distracted, base_model=base.id)
        vals.append(math.nan if is_missing(cell.value) else float(cell.value))
        bnotes.append(cell.note)
    yb = np.array(vals, dtype=float)
    fb = np.isfinite(yb)
    for k in range(len(pairs)):
        if fb[k]:
            ax_b.bar(
                xb[k], yb[k], width=0.6, color=REASONING_COLOUR, edgecolor="black", linewidth=0.5
            )
            ax_b.text(xb[k], yb[k], f"{yb[k]:.2f}", ha="center", va="bottom", fontsize=6)
        else:
            _na(ax_b, xb[k])
    ax_b.axhline(1.0, color="black", linestyle="--", linewidth=1.0)
    ax_b.set_xticks(
        xb, [f"{r.name}\n/ {b.name}" for b, r in pairs], rotation=40, ha="right", fontsize=7
    )
    ax_b.set_xlim(-0.7, max(len(pairs) - 0.3, 0.7))
    ax_b.set_ylabel("HFR / base HFR", fontsize=8)
    ax_b.tick_params(axis="y", labelsize=7)
    ax_b.grid(axis="y", color="0.93", linewidth=0.6)
    ax_b.set_axisbelow(True)
    if fb.any():
        ax_b.set_ylim(0, max(float(np.max(yb[fb])), 1.0) * 1.15)
    else:
        ax_b.set_ylim(0, 2)
        _note(ax_b, _reason(bnotes, "no relative HFR") if pairs else "no base\u2192reasoning pair")


def distraction_figure_names(spec: Mapping[str, Any]) -> list[str]:
    """The file stems :func:`write_distraction_figures` writes (each as .png and .pdf)."""
    return ["figure5", "figure6"]


def distraction_figures(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Figure]:
    """Figures 5 and 6 by file stem."""
    index = metrics if isinstance(metrics, MetricsIndex) else MetricsIndex(metrics)
    with matplotlib.style.context("default"):
        return {"figure5": figure5(index, spec), "figure6": figure6(index, spec)}


def write_distraction_figures(
    metrics: pd.DataFrame, spec: Mapping[str, Any], out_dir: str | Path
) -> list[Path]:
    """Write Figures 5 and 6 as PNG (150 dpi) and PDF under ``out_dir``; return the paths."""
    with matplotlib.style.context("default"):
        return write_figures(distraction_figures(metrics, spec), out_dir)

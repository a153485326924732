"""Figures of the vision-corruption study, drawn from the tidy metrics table.

* ``figure4``: the paper's Figure 4, per-benchmark RR fingerprints. One panel per model
  family, benchmarks (config order) on the x axis, one line per model: the base model
  dashed black, its reasoning models in colour; each reasoning model's legend entry
  carries the within-family Pearson r of its fingerprint with the base model's
  (``rr_fingerprint_corr``).
* ``rr_heatmap``: RR per corruption method (rows, the paper's Table 7 order) × severity
  (columns 1-5; ``blank`` has no severity and fills its row as one cell), one panel per
  model, one shared colour bar; cells without a value are grey and say "n/a".

Both are written as PNG (150 dpi) and PDF with fixed sizes (a function of the number of
panels, benchmarks and models only) and no timestamps, so a rerun on the same metrics
gives the same bytes. Missing or undefined values (e.g. RR of a model at 0% clean
accuracy) are skipped and marked, and a panel without any value says why; nothing here
raises on NaN. With several perturbed conditions in the spec each figure is written
once per condition (``figure4_<condition>``), as the tables are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Colormap, Normalize, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from vlmrobust.metrics.index import MetricsIndex, is_missing, lookup
from vlmrobust.perturb.corruption import CORRUPTION_METHODS, SEVERITIES
from vlmrobust.report.common import (
    DPI,
    POOLED,
    ModelInfo,
    family_label,
    ordered_models,
    snap,
    write_figures,
)
from vlmrobust.report.tables.corruption import (
    benchmark_label,
    benchmark_order,
    clean_condition,
    condition_suffixes,
)

__all__ = [
    "DPI",
    "corruption_figure_names",
    "corruption_figures",
    "figure4",
    "figure4_size",
    "rr_heatmap",
    "rr_heatmap_size",
    "write_corruption_figures",
]

CLEAN_ZERO_NOTE = "RR undefined (clean accuracy 0)"
NA_COLOUR = "0.85"
BASE_STYLE = {"color": "black", "linestyle": "--", "marker": "o"}
MARKERS = ("s", "^", "D", "v", "P", "X", "<", ">", "h", "*")
CMAP = "viridis"
# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------


def _pct(value: Any) -> float:
    return math.nan if is_missing(value) else float(value) * 100


def _undefined_reason(clean_values: list[float], notes: list[str]) -> str:
    """Why a set of RR values is empty: clean accuracy 0, the metrics' note, or none."""
    finite = [v for v in clean_values if not is_missing(v)]
    if finite and all(v == 0 for v in finite):
        return CLEAN_ZERO_NOTE
    uniq = [n for n in dict.fromkeys(notes) if n]
    if uniq:
        return "RR undefined (" + "; ".join(uniq[:2]) + ("; ..." if len(uniq) > 2 else "") + ")"
    return "no RR values"


def _fingerprint_r(index: MetricsIndex, base: str, reasoning: str, condition: str) -> float:
    """``rr_fingerprint_corr`` of a pair (either orientation), for the condition."""
    rows = [
        r
        for r in index.metric_rows("rr_fingerprint_corr")
        if {r["model"], r["base_model"]} == {base, reasoning} and r["condition"] in (condition, "")
    ]
    exact = [r for r in rows if r["condition"] == condition] or rows
    pooled = [r for r in exact if r["benchmark"] in (POOLED, "")] or exact
    if len(pooled) > 1:
        raise ValueError(
            f"metrics table has {len(pooled)} rr_fingerprint_corr rows for {base!r} and "
            f"{reasoning!r} under condition {condition!r}; expected one"
        )
    return float(pooled[0]["value"]) if pooled else math.nan


def _families(models: list[ModelInfo]) -> list[tuple[str, list[ModelInfo]]]:
    fams = list(dict.fromkeys(m.family for m in models))
    return [(f, [m for m in models if m.family == f]) for f in fams]


# ---------------------------------------------------------------------------
# Figure 4: per-benchmark RR fingerprints
# ---------------------------------------------------------------------------


def figure4_size(n_panels: int, n_benchmarks: int, max_models: int) -> tuple[float, float]:
    """(width, height) in inches of Figure 4."""
    panel_w = max(3.2, 0.45 * max(n_benchmarks, 1) + 1.4)
    width = snap(max(n_panels, 1) * panel_w + 0.4)
    height = snap(3.6 + 0.2 * max(max_models, 1) + 0.8)
    return width, height


@dataclass
class _Figure4:
    """What every panel of one Figure 4 shares: the metrics, the spec, the condition
    and the benchmarks on the x axis."""

    index: MetricsIndex
    spec: Mapping[str, Any]
    condition: str
    benches: list[str]

    @property
    def x(self) -> np.ndarray:
        return np.arange(len(self.benches), dtype=float)


@dataclass
class _Lines:
    """The lines of one family's panel: legend handles, the finite RR values, the
    clean accuracies and notes behind them, and where each line has no value."""

    handles: list[Any] = field(default_factory=list)
    finite: list[float] = field(default_factory=list)
    clean_values: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    nan_marks: list[tuple[np.ndarray, str]] = field(default_factory=list)


def figure4(index: MetricsIndex, spec: Mapping[str, Any], condition: str) -> Figure:
    """Figure 4: per-benchmark RR of each model, one panel per family (module docstring)."""
    models = ordered_models(index, spec)
    f4 = _Figure4(index, spec, condition, benchmark_order(index, spec))
    families = _families(models) or [("", [])]
    max_models = max(len(members) for _, members in families)
    fig = Figure(figsize=figure4_size(len(families), len(f4.benches), max_models), dpi=DPI)
    fig.set_layout_engine("constrained")
    legend_h = 0.2 * max(max_models, 1) + 0.5
    grid = fig.add_gridspec(2, len(families), height_ratios=[3.4, legend_h])
    fig.suptitle(f"Per-benchmark relative robustness (RR) under '{condition}'", fontsize=10)
    labels = [benchmark_label(b, spec) for b in f4.benches]
    for col, (fam, members) in enumerate(families):
        ax = fig.add_subplot(grid[0, col])
        lax = fig.add_subplot(grid[1, col])
        lax.axis("off")
        ax.set_title(f"{family_label(fam, spec)} family" if fam else "no models", fontsize=9)
        ax.axhline(100, color="0.8", linewidth=0.8, zorder=0)
        lines = _fingerprint_lines(ax, f4, members)
        if lines.finite:
            _mark_missing(ax, lines.nan_marks)
        _rr_axes(ax, f4, labels, lines, bool(members))
        if lines.nan_marks and lines.finite:
            lines.handles.append(
                Line2D([], [], linestyle="none", marker="x", color="0.4", label="x: no RR value")
            )
        if lines.handles:
            lax.legend(
                handles=lines.handles,
                loc="upper center",
                fontsize=7,
                frameon=False,
                borderaxespad=0.0,
            )
    return fig


def _fingerprint_lines(ax, f4: _Figure4, members: list[ModelInfo]) -> _Lines:
    """One line per model of a family: the base dashed black, the others in colour
    with their fingerprint r against the base in the label."""
    clean = clean_condition(f4.spec)
    lines = _Lines()
    bases = {m.id for m in members if m.role == "base"}
    colour_k = 0
    for m in members:
        ys = []
        for b in f4.benches:
            cell = lookup(f4.index, "rr", m.id, b, f4.condition)
            ys.append(_pct(cell.value))
            lines.notes.append(cell.note)
            lines.clean_values.append(lookup(f4.index, "accuracy", m.id, b, clean).value)
        y = np.array(ys, dtype=float)
        finite = np.isfinite(y)
        lines.finite += y[finite].tolist()
        if m.id in bases:
            style = dict(BASE_STYLE)
            label = f"{m.name} (base)"
        else:
            style = {
                "color": f"C{colour_k % 10}",
                "linestyle": "-",
                "marker": MARKERS[colour_k % len(MARKERS)],
            }
            colour_k += 1
            label = m.name
            if m.base in bases:
                r = _fingerprint_r(f4.index, m.base, m.id, f4.condition)
                label += " (r = n/a)" if is_missing(r) else f" (r = {r:.2f})"
        (line,) = ax.plot(f4.x, y, linewidth=1.4, markersize=4.5, label=label, **style)
        lines.handles.append(line)
        if len(f4.benches) and not finite.all():
            lines.nan_marks.append((f4.x[~finite], style["color"]))
    return lines


def _mark_missing(ax, nan_marks: list[tuple[np.ndarray, str]]) -> None:
    """Undefined or missing values: an x at the bottom, models side by side."""
    for k, (xs, colour) in enumerate(nan_marks):
        offset = (k - (len(nan_marks) - 1) / 2) * 0.08
        ax.plot(
            xs + offset,
            np.full(len(xs), 0.03),
            transform=ax.get_xaxis_transform(),
            linestyle="none",
            marker="x",
            color=colour,
            markersize=5,
            clip_on=False,
        )


def _rr_axes(ax, f4: _Figure4, labels: list[str], lines: _Lines, has_models: bool) -> None:
    """A panel's axes: benchmarks, the RR range (with 100 in it), or why it is empty."""
    ax.set_xticks(f4.x, labels, rotation=40, ha="right", fontsize=7)
    ax.set_xlim(-0.5, max(len(f4.benches) - 0.5, 0.5))
    ax.set_ylabel("RR (%)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", color="0.93", linewidth=0.6)
    if lines.finite:
        lo, hi = min(lines.finite), max(lines.finite + [100.0])
        pad = max(2.0, 0.08 * (hi - lo))
        ax.set_ylim(lo - pad, hi + pad)
    else:
        ax.set_ylim(0, 110)
        ax.text(
            0.5,
            0.5,
            _undefined_reason(lines.clean_values, lines.notes) if has_models else "no models",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
            color="firebrick",
            wrap=True,
        )


# ---------------------------------------------------------------------------
# RR heat map: corruption method × severity per model
# ---------------------------------------------------------------------------

_HEAT_PANEL_W = 2.0
_HEAT_PANEL_H = 5.2
_HEAT_COLS = 4


def rr_heatmap_size(n_models: int) -> tuple[float, float]:
    """(width, height) in inches of the heat-map figure."""
    n = max(n_models, 1)
    ncols = min(_HEAT_COLS, n)
    nrows = math.ceil(n / ncols)
    return snap(ncols * _HEAT_PANEL_W + 2.4), snap(nrows * _HEAT_PANEL_H + 0.8)


def _method_severity_values(
    index: MetricsIndex, model: str, condition: str
) -> tuple[dict[tuple[str, int | None], float], str]:
    """{(method, severity or None): RR} for one model, pooled over benchmarks.

    Rows pooled over benchmarks (``benchmark`` "all" or empty) are used when present;
    rows of a single benchmark otherwise; with several benchmarks and no pooled row the
    mean over benchmarks is shown and said so in the returned note."""
    rows = [
        r
        for r in index.metric_rows("rr_method_severity")
        if r["model"] == model and r["condition"] in (condition, "")
    ]
    if any(r["condition"] == condition for r in rows):
        rows = [r for r in rows if r["condition"] == condition]
    pooled = [r for r in rows if r["benchmark"] in (POOLED, "")]
    note = ""
    if pooled:
        rows = pooled
    elif len({r["benchmark"] for r in rows}) > 1:
        note = "mean over benchmarks"
    values: dict[tuple[str, int | None], list[float]] = {}
    for r in rows:
        sev = None if is_missing(r["severity"]) else int(r["severity"])
        values.setdefault((r["method"], sev), []).append(float(r["value"]))
    out = {}
    for key, vals in values.items():
        if len(vals) > 1 and not note:
            raise ValueError(
                f"metrics table has {len(vals)} rr_method_severity rows for model {model!r}, "
                f"condition {condition!r}, method {key[0]!r}, severity {key[1]!r}; expected one"
            )
        finite = [v for v in vals if not is_missing(v)]
        out[key] = sum(finite) / len(finite) if finite else math.nan
    return out, note


def _text_colour(rgb: tuple[float, float, float]) -> str:
    r, g, b = rgb[:3]
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"


def rr_heatmap(index: MetricsIndex, spec: Mapping[str, Any], condition: str) -> Figure:
    """RR per corruption method x severity, one panel per model (module docstring)."""
    models = ordered_models(index, spec)
    clean = clean_condition(spec)
    per_model = {m.id: _method_severity_values(index, m.id, condition) for m in models}
    extra = sorted(
        {method for vals, _ in per_model.values() for method, _ in vals}
        - set(CORRUPTION_METHODS)
        - {""}
    )
    methods = list(CORRUPTION_METHODS) + extra
    finite = [_pct(v) for vals, _ in per_model.values() for v in vals.values() if not is_missing(v)]
    if finite:
        vmin, vmax = math.floor(min(finite)), math.ceil(max(finite))
        if vmin == vmax:
            vmin, vmax = vmin - 1, vmax + 1
    else:
        vmin, vmax = 0, 100
    norm = Normalize(vmin=vmin, vmax=vmax)
    cmap = matplotlib.colormaps[CMAP]

    n = max(len(models), 1)
    ncols = min(_HEAT_COLS, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=rr_heatmap_size(len(models)), dpi=DPI)
    fig.set_layout_engine("constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    title = f"RR (%) per corruption method and severity under '{condition}'"
    if not finite:
        reason = _undefined_reason(
            [lookup(index, "accuracy", m.id, POOLED, clean).value for m in models], []
        )
        if reason == "no RR values" and models:
            reason = "no RR values (RR undefined or not computed)"
        title += f"\n{reason}"
    fig.suptitle(title, fontsize=10, color="black" if finite else "firebrick")
    for k, ax in enumerate(axes.ravel()):
        if k >= len(models):
            ax.axis("off")
            if not models:
                ax.text(0.5, 0.5, "no models", ha="center", va="center", transform=ax.transAxes)
            continue
        m = models[k]
        vals, note = per_model[m.id]
        any_value = _heat_cells(ax, vals, methods, cmap, norm)
        _heat_axes(ax, methods, first_column=k % ncols == 0)
        sub = note
        if not any_value:
            acc = lookup(index, "accuracy", m.id, POOLED, clean).value
            sub = _undefined_reason([acc], [])
        ax.set_title(f"{m.name}\n{sub}" if sub else m.name, fontsize=8)
    cbar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes.ravel().tolist(), shrink=0.6)
    cbar.set_label("RR (%)", fontsize=8)
    cbar.ax.tick_params(labelsize=7)
    return fig


def _heat_row(
    vals: Mapping[tuple[str, int | None], float], method: str
) -> list[tuple[float, float, float]]:
    """The cells (x, width, RR) of one method's row: one per severity, or one cell
    over the whole row for ``blank`` (no severity; a single severity row stands in)."""
    severities = list(SEVERITIES)
    if method == "blank":
        v = vals.get(("blank", None), math.nan)
        if is_missing(v):
            blank_sev = [val for (mm, _), val in vals.items() if mm == "blank"]
            v = blank_sev[0] if len(blank_sev) == 1 else math.nan
        return [(0.0, float(len(severities)), v)]
    return [(float(j), 1.0, vals.get((method, s), math.nan)) for j, s in enumerate(severities)]


def _heat_cells(
    ax,
    vals: Mapping[tuple[str, int | None], float],
    methods: list[str],
    cmap: Colormap,
    norm: Normalize,
) -> bool:
    """Draw one model's cells (RR in %, coloured by ``cmap`` over ``norm``; grey "n/a"
    without a value); whether any cell has a value."""
    any_value = False
    for i, method in enumerate(methods):
        for x0, w, v in _heat_row(vals, method):
            if is_missing(v):
                face: Any = to_rgb(NA_COLOUR)
                text = "n/a"
            else:
                any_value = True
                face = cmap(norm(_pct(v)))
                text = f"{_pct(v):.0f}"
            ax.add_patch(
                Rectangle((x0, i), w, 1.0, facecolor=face, edgecolor="white", linewidth=0.8)
            )
            ax.text(
                x0 + w / 2,
                i + 0.5,
                text,
                ha="center",
                va="center",
                fontsize=5.5,
                color=_text_colour(to_rgb(face)) if text != "n/a" else "0.35",
            )
    return any_value


def _heat_axes(ax, methods: list[str], first_column: bool) -> None:
    """A heat-map panel's axes: severities below, method names in the first column."""
    severities = list(SEVERITIES)
    ax.set_xlim(0, len(severities))
    ax.set_ylim(len(methods), 0)
    ax.set_xticks(np.arange(len(severities)) + 0.5, [str(s) for s in severities], fontsize=7)
    ax.set_xlabel("severity", fontsize=7)
    if first_column:
        ax.set_yticks(
            np.arange(len(methods)) + 0.5,
            [mm.replace("_", " ") for mm in methods],
            fontsize=7,
        )
    else:
        ax.set_yticks(np.arange(len(methods)) + 0.5, [""] * len(methods))
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def corruption_figure_names(spec: Mapping[str, Any]) -> list[str]:
    """The file stems :func:`write_corruption_figures` writes (each as .png and .pdf)."""
    suffixes = condition_suffixes(spec)
    return [f"figure4{s}" for _, s in suffixes] + [f"rr_heatmap{s}" for _, s in suffixes]


def corruption_figures(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Figure]:
    """Every figure by file stem (see :func:`corruption_figure_names`)."""
    index = metrics if isinstance(metrics, MetricsIndex) else MetricsIndex(metrics)
    figures: dict[str, Figure] = {}
    with matplotlib.style.context("default"):
        for cond, sfx in condition_suffixes(spec):
            figures[f"figure4{sfx}"] = figure4(index, spec, cond)
        for cond, sfx in condition_suffixes(spec):
            figures[f"rr_heatmap{sfx}"] = rr_heatmap(index, spec, cond)
    return figures


def write_corruption_figures(
    metrics: pd.DataFrame, spec: Mapping[str, Any], out_dir: str | Path
) -> list[Path]:
    """Write Figure 4 and the RR heat map as PNG (150 dpi) and PDF; return the paths."""
    with matplotlib.style.context("default"):
        return write_figures(corruption_figures(metrics, spec), out_dir)

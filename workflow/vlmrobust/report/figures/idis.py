"""Figures of the Idis study (definitions: :mod:`vlmrobust.metrics.idis`).

Every figure is a view of the study's metrics table; :data:`FIGURE_CAPTIONS` says what
each one plots, from which metrics, and which figure of the Idis paper it mirrors.
Which figures a dataset gets depends on its spec only (:func:`idis_figure_names`):

* ``length_accuracy`` (Figure 3) unless the spec lists its kinds and none of them is a
  distractor kind (visual, typographic, textual), e.g. Waterbirds;
* ``length_accuracy_semantics`` with a visual kind; ``length_accuracy_modality`` with a
  typographic or textual kind;
* ``budget_accuracy`` and ``budget_length`` with budget prompts;
* ``attributes``, ``attr_accuracy``, ``length_attributes`` with attribute extractors,
  and ``attr_area`` with extractors on ImageNet-9;
* ``attention_blocking`` with attention blocking; ``size_attributes`` with a size kind;
  ``mitigation`` with mitigation prompts; ``visual_tokens`` with a resolution kind;
* ``length_distribution`` always (the class panel on ImageNet-9 only).

One panel per model where the paper draws one. A figure (or a panel) whose rows are not
in the metrics says in red what is missing instead of failing. The main prompt setting
(``spec["main_prompt"]``) and the first attribute extractor are drawn unless a figure
compares prompts. Figures are matplotlib :class:`~matplotlib.figure.Figure` objects (no
pyplot state); :func:`vlmrobust.report.common.write_figures` saves them.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ...metrics.idis import POOLED
from ..common import build_view, snap
from ..tables.idis import (
    BLOCKS,
    DISTRACTOR_KINDS,
    MITIGATION_SUBSETS,
    SIZES,
    bin_key,
    idis_table,
    main_extractor,
    main_prompt,
    mitigation_prompts,
    model_names,
    models_present,
    n_key,
    pool_rows,
    prefer_group,
    prepare_metrics,
    semantics_key,
    subset_source,
    subset_values,
)

__all__ = [
    "FIGURE_CAPTIONS",
    "FIGURE_BUILDERS",
    "idis_figure",
    "idis_figure_names",
    "idis_figures",
    "idis_view",
    "length_accuracy_figure",
]

NOTE_COLOUR = "firebrick"
QUANTILES = ("0.10", "0.25", "0.50", "0.75", "0.90")
_STYLES = ("-", "--", ":", "-.")

FIGURE_CAPTIONS: dict[str, str] = {
    "length_accuracy": (
        "Length-accuracy curves by number of distractors (the Idis paper, Figure 3): per "
        "model, the sampled responses of each question ranked by reasoning length; per "
        "rank, the accuracy (metric rank_accuracy) against the mean length of that rank "
        "(rank_length), one curve per number of distractors (0 = clean; the visual kind "
        "pooled over its semantics, else the first kind), with the question-bootstrap band."
    ),
    "length_accuracy_semantics": (
        "Length-accuracy curves by semantics (the Idis paper, Figures 4 and 13): per "
        "model, at the largest number of visual distractors, one length-rank curve "
        "(rank_accuracy against rank_length) per semantics (aligned, conflicting, "
        "irrelevant) and one for the clean images."
    ),
    "length_accuracy_modality": (
        "Length-accuracy curves by modality (the Idis paper, Figures 5, 14, 15 and 17): "
        "per model, one length-rank curve (rank_accuracy against rank_length) per "
        "typographic or textual semantics and number of distractors; colour = number of "
        "distractors, line style = kind and semantics (typographic solid, textual "
        "dashed); the clean curve in black."
    ),
    "budget_accuracy": (
        "Accuracy under a thinking budget (the Idis paper, Figure 11): per model and "
        "semantics, accuracy in percent (metric accuracy) against the number of "
        "distractors (0 = clean), one line for the main prompt (natural length) and one "
        "per budget prompt."
    ),
    "budget_length": (
        "Reasoning length under a thinking budget (the Idis paper, Figure 12): per model "
        "and semantics, the mean reasoning length in tokens (metric mean_length) against "
        "the number of distractors (0 = clean), one line for the main prompt (natural "
        "length) and one per budget prompt."
    ),
    "attributes": (
        "Distractor attributes in the reasoning (the Idis paper, Figure 6 top and Figure "
        "17): per model, the mean number of attributes per judged trace (bars, left axis, "
        "metric attributes_total) and the mean distractor attribute ratio r_attr (line, "
        "right axis) against the number of distractors, conflicting semantics (else pooled "
        "or the first semantics), main extractor."
    ),
    "attr_accuracy": (
        "Accuracy by distractor attribute ratio (the Idis paper, Figure 6 bottom and "
        "Figure 18): accuracy in percent of the responses whose r_attr falls in each bin "
        "(metric bin_accuracy; the groups of the first distractor kind pooled, weighted by "
        "their traces), one line per model, main extractor."
    ),
    "length_attributes": (
        "Attributes by reasoning length (the Idis paper, Figure 16): the mean number of "
        "attributes of the traces in each length bin (metric length_bin_attributes), one "
        "line per model; the legend gives the Pearson r of length against attributes "
        "(pearson_length_attributes)."
    ),
    "attr_area": (
        "Distractor attribute ratio by distractor area (the Idis paper, Figure 7b): per "
        "model, the mean r_attr of the traces whose image has its distractor area ratio "
        "r_area in each bin (metric area_bin_r_attr; the semantics of the first distractor "
        "kind pooled, weighted by their traces), one line per number of distractors."
    ),
    "attention_blocking": (
        "Attention blocking (the Idis paper, Figure 7a): per condition, accuracy in "
        "percent (metric blocked_accuracy) of each model with nothing, the distractor "
        "tokens or the target tokens blocked, three bars per model."
    ),
    "size_attributes": (
        "Distractor size (the Idis paper, Figure 19): per model, accuracy and the "
        "distractor attribute ratio r_attr, both in percent (metrics accuracy and r_attr), "
        "for small, medium and large pasted distractors."
    ),
    "mitigation": (
        "Mitigation prompt (the Idis paper, Figure 8): per model, accuracy in percent "
        "(top, metric accuracy) and, when attributes were extracted, the distractor "
        "attribute ratio r_attr (bottom) on the aligned and conflicting questions and "
        "overall, one bar per prompt (the main prompt and each mitigation prompt)."
    ),
    "visual_tokens": (
        "Visual tokens (the Idis paper, Figure 9): per model, (a) the mean reasoning "
        "length (mean_length) and (b) the accuracy (accuracy) against the image "
        "resolution, and (c) the length-rank curves (rank_accuracy against rank_length), "
        "one per resolution."
    ),
    "length_distribution": (
        "Distribution of the reasoning length (the Idis paper, Figure 10): per model, the "
        "10th, 25th, 50th, 75th and 90th percentile of the length (metric length_quantile) "
        "as boxes (box 25 to 75, whiskers 10 to 90, line at the median), (a) by number of "
        "distractors (0 = clean) and, on ImageNet-9, (b) by class."
    ),
}


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------


def idis_figure_names(spec: Mapping[str, Any]) -> list[str]:
    """The figures of one dataset, from its spec only (module docstring)."""
    listed = spec.get("kinds")
    kinds = set(listed or [])
    extractors = list(spec.get("extractors") or [])
    names = []
    if listed is None or kinds & set(DISTRACTOR_KINDS):
        names.append("length_accuracy")
    if "visual" in kinds:
        names.append("length_accuracy_semantics")
    if kinds & {"typographic", "textual"}:
        names.append("length_accuracy_modality")
    if spec.get("budget_prompts"):
        names += ["budget_accuracy", "budget_length"]
    if extractors:
        names += ["attributes", "attr_accuracy", "length_attributes"]
        if spec.get("adapter") == "imagenet9":
            names.append("attr_area")
    if spec.get("blocking"):
        names.append("attention_blocking")
    if "size" in kinds:
        names.append("size_attributes")
    if spec.get("mitigation_prompts"):
        names.append("mitigation")
    if "resolution" in kinds:
        names.append("visual_tokens")
    names.append("length_distribution")
    return names


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _placeholder(ax: Axes, text: str) -> None:
    ax.text(
        0.5,
        0.5,
        "\n".join(textwrap.wrap(text, 38)),
        ha="center",
        va="center",
        fontsize=8,
        color=NOTE_COLOUR,
        transform=ax.transAxes,
    )
    ax.set_axis_off()


def _empty(spec: Mapping[str, Any], title: str, text: str) -> Figure:
    fig = Figure(figsize=(4.0, 3.0))
    _placeholder(fig.add_subplot(1, 1, 1), text)
    fig.suptitle(f"{spec.get('dataset')}: {title}", fontsize=9)
    return fig


def _grid(rows: int, cols: int, w: float = 3.2, h: float = 2.8) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(snap(w * cols), snap(h * rows + 0.4)))
    return fig, fig.subplots(rows, cols, squeeze=False)


def _finish(fig: Figure, spec: Mapping[str, Any], title: str) -> Figure:
    fig.suptitle(f"{spec.get('dataset')}: {title}", fontsize=9)
    fig.tight_layout()
    return fig


def _style(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)


def _legend(ax: Axes, **kw: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, title_fontsize=7, **kw)


def _eq(m: pd.DataFrame, **values: str) -> pd.DataFrame:
    mask = np.ones(len(m), dtype=bool)
    for col, v in values.items():
        mask &= (m[col] == v).to_numpy()
    return m[mask]


def _overall(m: pd.DataFrame) -> pd.DataFrame:
    """Rows of whole groups (no subset, no bin, no block; no extractor)."""
    return m[(m["subset"] == "") & (m["bin"] == "") & (m["block"] == "") & (m["extractor"] == "")]


def _numbers(values: Any) -> list[str]:
    return sorted({str(v) for v in values if str(v) != ""}, key=n_key)


def _num(v: str) -> float:
    try:
        return float(v)
    except ValueError:
        return math.nan


def _curve(rows: pd.DataFrame) -> pd.DataFrame:
    """One length-rank curve: x (mean length of the rank), y (accuracy, %), band."""
    acc = rows[rows["metric"] == "rank_accuracy"]
    length = rows[rows["metric"] == "rank_length"]
    if acc.empty:
        return pd.DataFrame(columns=["x", "y", "lo", "hi", "r"])
    c = acc.merge(
        length[["condition", "rank", "value"]].rename(columns={"value": "x"}),
        on=["condition", "rank"],
    )
    c = c.assign(r=c["rank"].astype(int), y=c["value"] * 100, lo=c["ci_low"] * 100)
    c = c.assign(hi=c["ci_high"] * 100)
    return c.sort_values("r")


def _plot_curve(ax: Axes, rows: pd.DataFrame, label: str, **style: Any) -> bool:
    c = _curve(rows)
    if c.empty:
        return False
    (line,) = ax.plot(c["x"], c["y"], marker="o", ms=3, label=label, **style)
    ax.fill_between(c["x"], c["lo"], c["hi"], alpha=0.15, color=line.get_color())
    return True


def _rank_rows(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    m = prepare_metrics(metrics)
    m = _overall(m[m["metric"].isin(["rank_accuracy", "rank_length"])])
    return m[m["prompt"] == main_prompt(m, spec)]


def _per_model(
    m: pd.DataFrame,
    spec: Mapping[str, Any],
    title: str,
    missing: str,
    draw: Callable[[Axes, pd.DataFrame], str | None],
    w: float = 3.2,
    h: float = 2.8,
) -> Figure:
    """One panel per model; ``draw(ax, rows)`` draws one, or returns what is missing."""
    models = models_present(m, spec)
    if not models:
        return _empty(spec, title, f"no {missing} in the metrics")
    names = model_names(spec)
    fig, axes = _grid(1, len(models), w, h)
    for ax, model in zip(axes[0], models, strict=True):
        why = draw(ax, m[m["model"] == model])
        if why:
            _placeholder(ax, why)
        ax.set_title(names.get(model, model), fontsize=9)
    return _finish(fig, spec, title)


def _curve_kind(m: pd.DataFrame) -> tuple[str, str] | None:
    """(kind, semantics) of the curves: visual pooled, else the first kind there is."""
    kinds = m.loc[m["kind"].isin(DISTRACTOR_KINDS), ["kind", "semantics"]].drop_duplicates()
    for kind in DISTRACTOR_KINDS:
        k = kinds[kinds["kind"] == kind]
        if len(k):
            pooled = k[k["semantics"] == POOLED]
            if len(pooled):
                return kind, POOLED
            return kind, sorted(k["semantics"], key=semantics_key)[0]
    return None


# ---------------------------------------------------------------------------
# Length-rank curves
# ---------------------------------------------------------------------------


def length_accuracy_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = _rank_rows(metrics, spec)
    choice = _curve_kind(m)
    kind = f"{choice[0]} ({choice[1]})" if choice else "clean only"

    def draw(ax: Axes, mm: pd.DataFrame) -> str | None:
        curves = [("0", mm[mm["kind"] == "none"])]
        if choice is not None:
            sel = _eq(mm, kind=choice[0], semantics=choice[1])
            curves += [(n, sel[sel["distractors"] == n]) for n in _numbers(sel["distractors"])]
        for n, c in curves:
            _plot_curve(ax, c, f"n={n}")
        _style(ax, "", "reasoning length (tokens)", "accuracy (%)")
        _legend(ax, title="distractors")
        return None if ax.get_lines() else "no length-rank curve"

    return _per_model(
        m, spec, f"length-accuracy by number of distractors, {kind}", "length-rank curves", draw
    )


def length_accuracy_semantics_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = _rank_rows(metrics, spec)
    m = m[m["kind"].isin(["none", "visual"])]

    def draw(ax: Axes, mm: pd.DataFrame) -> str | None:
        vis = mm[(mm["kind"] == "visual") & (mm["semantics"] != POOLED)]
        ns = _numbers(vis["distractors"])
        if not ns:
            return "no length-rank curve of a visual distractor condition"
        top = ns[-1]
        _plot_curve(ax, mm[mm["kind"] == "none"], "clean", color="black")
        at = vis[vis["distractors"] == top]
        for sem in sorted(set(at["semantics"]), key=semantics_key):
            _plot_curve(ax, at[at["semantics"] == sem], sem)
        _style(ax, "", "reasoning length (tokens)", "accuracy (%)")
        _legend(ax, title=f"n={top}")
        return None

    return _per_model(
        m, spec, "length-accuracy by semantics (largest n)", "visual length-rank curves", draw
    )


def length_accuracy_modality_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = _rank_rows(metrics, spec)
    m = m[m["kind"].isin(["none", "typographic", "textual"])]

    def draw(ax: Axes, mm: pd.DataFrame) -> str | None:
        mod = mm[mm["kind"].isin(["typographic", "textual"]) & (mm["semantics"] != POOLED)]
        if mod.empty:
            return "no length-rank curve of a typographic or textual condition"
        _plot_curve(ax, mm[mm["kind"] == "none"], "clean", color="black")
        pairs = sorted(
            set(zip(mod["kind"], mod["semantics"], strict=True)),
            key=lambda p: (p[0] != "typographic", semantics_key(p[1])),
        )
        ns = _numbers(mod["distractors"])
        for i, (kind, sem) in enumerate(pairs):
            sel = _eq(mod, kind=kind, semantics=sem)
            name = sem if sem and sem != kind else kind
            for n in _numbers(sel["distractors"]):
                colour = f"C{ns.index(n) % 10}"
                style = _STYLES[i % len(_STYLES)]
                _plot_curve(
                    ax, sel[sel["distractors"] == n], f"{name} n={n}", color=colour, ls=style
                )
        _style(ax, "", "reasoning length (tokens)", "accuracy (%)")
        _legend(ax, ncol=2)
        return None

    return _per_model(
        m, spec, "length-accuracy by modality", "typographic or textual length-rank curves", draw
    )


# ---------------------------------------------------------------------------
# Thinking budget
# ---------------------------------------------------------------------------


def _budget_figure(metrics: pd.DataFrame, spec: Mapping[str, Any], metric: str) -> Figure:
    budgets = {str(k): v for k, v in (spec.get("budget_prompts") or {}).items()}
    m = _overall(prepare_metrics(metrics))
    m = m[m["metric"] == metric]
    main = main_prompt(m, spec)
    prompts = [(main, "natural")] + [
        (p, f"budget {b}")
        for p, b in sorted(budgets.items(), key=lambda kv: (_num(str(kv[1])), kv[0]))
    ]
    m = m[m["prompt"].isin([p for p, _ in prompts])]
    label = "accuracy (%)" if metric == "accuracy" else "mean reasoning length (tokens)"
    title = f"{metric.replace('_', ' ')} under a thinking budget"
    scale = 100.0 if metric == "accuracy" else 1.0
    dist = m[m["kind"].isin(DISTRACTOR_KINDS) & (m["semantics"] != POOLED)]
    panels = sorted(
        set(zip(dist["kind"], dist["semantics"], strict=True)),
        key=lambda p: (p[0], semantics_key(p[1])),
    )
    models = models_present(m, spec)
    if not models or not panels or len(budgets) == 0:
        return _empty(spec, title, f"no {metric} rows of the main and the budget prompts")
    names = model_names(spec)
    fig, axes = _grid(len(models), len(panels))
    for i, model in enumerate(models):
        mm = m[m["model"] == model]
        for j, (kind, sem) in enumerate(panels):
            ax = axes[i][j]
            for prompt, plabel in prompts:
                mp = mm[mm["prompt"] == prompt]
                xs, ys = [], []
                clean = pool_rows(mp[mp["kind"] == "none"])
                if clean:
                    xs.append(0.0)
                    ys.append(clean["value"] * scale)
                sel = _eq(mp, kind=kind, semantics=sem)
                for n in _numbers(sel["distractors"]):
                    got = pool_rows(sel[sel["distractors"] == n])
                    if got:
                        xs.append(_num(n))
                        ys.append(got["value"] * scale)
                if xs:
                    ax.plot(xs, ys, marker="o", ms=3, label=plabel)
            head = sem if kind == "visual" else f"{kind} {sem}".strip()
            _style(ax, f"{names.get(model, model)}: {head}", "number of distractors", label)
            if not ax.get_lines():
                _placeholder(ax, f"no {metric} rows of these prompts")
            _legend(ax)
    return _finish(fig, spec, title)


def budget_accuracy_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    return _budget_figure(metrics, spec, "accuracy")


def budget_length_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    return _budget_figure(metrics, spec, "mean_length")


# ---------------------------------------------------------------------------
# Attributes
# ---------------------------------------------------------------------------


def _attr_rows(metrics: pd.DataFrame, spec: Mapping[str, Any], names: list[str]) -> pd.DataFrame:
    m = prepare_metrics(metrics)
    m = m[m["metric"].isin(names) & (m["subset"] == "")]
    m = m[m["prompt"] == main_prompt(m, spec)]
    return m[m["extractor"] == main_extractor(m, spec)]


def attributes_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = _attr_rows(metrics, spec, ["attributes_total", "r_attr"])
    m = m[m["bin"] == ""]

    def draw(ax: Axes, mm: pd.DataFrame) -> str | None:
        tot = mm[mm["metric"] == "attributes_total"]
        kinds = [k for k in DISTRACTOR_KINDS if k in set(tot["kind"])]
        if not kinds:
            return "no attributes_total rows of a distractor condition"
        kind = kinds[0]
        sel = tot[tot["kind"] == kind]
        order = ("conflicting", POOLED, "")
        sem = prefer_group(sel, ["semantics"], order)["semantics"].iloc[0]
        rows = mm[(mm["kind"] == "none") | ((mm["kind"] == kind) & (mm["semantics"] == sem))]
        ns = _numbers(rows["distractors"])
        xs = [_num(n) for n in ns]
        totals = [pool_rows(_eq(rows, metric="attributes_total", distractors=n)) for n in ns]
        ratios = [pool_rows(_eq(rows, metric="r_attr", distractors=n)) for n in ns]
        ax.bar(
            xs, [t["value"] if t else math.nan for t in totals], width=0.6, color="C0", alpha=0.6
        )
        _style(ax, "", f"number of distractors ({kind} {sem})", "attributes per trace")
        twin = ax.twinx()
        twin.plot(xs, [r["value"] if r else math.nan for r in ratios], marker="o", color="C3")
        twin.set_ylabel("r_attr", fontsize=8, color="C3")
        twin.tick_params(labelsize=7)
        return None

    return _per_model(m, spec, "distractor attributes in the reasoning", "attribute rows", draw)


def _kind_pool(rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows to pool (weighted by their ``n``) for one curve over every trace: the
    rows over every group when there are any, else every group (semantics pooled
    left out, so no trace counts twice) of the first distractor kind there is; and
    what they cover, in words."""
    whole = rows[(rows[["condition", "kind", "semantics", "distractors"]] == "").all(axis=1)]
    if len(whole):
        return whole, "all traces"
    for kind in DISTRACTOR_KINDS:
        sel = rows[(rows["kind"] == kind) & (rows["semantics"] != POOLED)]
        if len(sel):
            return sel, f"{kind} distractors"
    return rows[rows["semantics"] != POOLED], "all groups"


def _category_axis(ax: Axes, labels: list[str], xlabel: str, ylabel: str) -> None:
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    _style(ax, "", xlabel, ylabel)


def _bin_curves(
    spec: Mapping[str, Any],
    title: str,
    bins: list[str],
    lines: list[tuple[pd.DataFrame, str]],
    axis_labels: tuple[str, str],
    percent: bool = False,
) -> Figure:
    """One panel with a line per (rows, label) of ``lines``: the pooled value of the
    rows in each bin (in percent when ``percent``)."""
    fig, axes = _grid(1, 1, 4.4, 3.2)
    ax = axes[0][0]
    for sel, label in lines:
        ys = [pool_rows(sel[sel["bin"] == b]) for b in bins]
        values = [(y["value"] * 100 if percent else y["value"]) if y else math.nan for y in ys]
        ax.plot(range(len(bins)), values, marker="o", ms=3, label=label)
    _category_axis(ax, bins, *axis_labels)
    _legend(ax)
    return _finish(fig, spec, title)


def _bins(rows: pd.DataFrame) -> list[str]:
    """The bins of the rows, in bin order."""
    return sorted(set(rows["bin"]) - {""}, key=bin_key)


def attr_accuracy_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    """Accuracy per r_attr bin, a line per model (its distractor kind's groups)."""
    m = _attr_rows(metrics, spec, ["bin_accuracy"])
    title = "accuracy by distractor attribute ratio"
    models = models_present(m, spec)
    if not models:
        return _empty(spec, title, "no bin_accuracy rows in the metrics")
    names = model_names(spec)
    pools = [_kind_pool(m[m["model"] == model]) for model in models]
    lines = [(sel, names.get(model, model)) for model, (sel, _) in zip(models, pools, strict=True)]
    what = ", ".join(dict.fromkeys(w for _, w in pools))
    axis_labels = (f"r_attr bin ({what})", "accuracy (%)")
    return _bin_curves(spec, title, _bins(m), lines, axis_labels, percent=True)


def length_attributes_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    """Attributes per trace by reasoning-length bin, a line per model with its Pearson r."""
    m = _attr_rows(metrics, spec, ["length_bin_attributes", "pearson_length_attributes"])
    curve = m[m["metric"] == "length_bin_attributes"]
    title = "attributes by reasoning length"
    models = models_present(curve, spec)
    if not models:
        return _empty(spec, title, "no length_bin_attributes rows in the metrics")
    names = model_names(spec)
    lines = []
    for model in models:
        sel = prefer_group(curve[curve["model"] == model])
        r = prefer_group(m[(m["model"] == model) & (m["metric"] == "pearson_length_attributes")])
        rv = r["value"].iloc[0] if len(r) else math.nan
        lines.append(
            (sel, names.get(model, model) + ("" if math.isnan(rv) else f" (r = {rv:.2f})"))
        )
    axis_labels = ("reasoning length bin (tokens)", "attributes per trace")
    return _bin_curves(spec, title, _bins(curve), lines, axis_labels)


def attr_area_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = _attr_rows(metrics, spec, ["area_bin_r_attr"])
    bins = _bins(m)

    def draw(ax: Axes, mm: pd.DataFrame) -> str | None:
        mm, _ = _kind_pool(mm[mm["distractors"] != ""])
        for n in _numbers(mm["distractors"]):
            sel = mm[mm["distractors"] == n]
            ys = [pool_rows(sel[sel["bin"] == b]) for b in bins]
            ax.plot(
                range(len(bins)),
                [y["value"] if y else math.nan for y in ys],
                marker="o",
                ms=3,
                label=f"n={n}",
            )
        if not ax.get_lines():
            return "no area_bin_r_attr rows with a number of distractors"
        _category_axis(ax, bins, "r_area bin", "r_attr")
        _legend(ax, title="distractors")
        return None

    return _per_model(m, spec, "attribute ratio by distractor area", "area_bin_r_attr rows", draw)


# ---------------------------------------------------------------------------
# Attention blocking, sizes, mitigation
# ---------------------------------------------------------------------------


def attention_blocking_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = prepare_metrics(metrics)
    m = m[m["metric"] == "blocked_accuracy"]
    m = m[m["prompt"] == main_prompt(m, spec)]
    title = "accuracy with attention blocked"
    models = models_present(m, spec)
    conditions = sorted(set(m["condition"]))
    if not models:
        return _empty(spec, title, "no blocked_accuracy rows in the metrics")
    names = model_names(spec)
    fig, axes = _grid(1, len(conditions), max(3.2, 1.2 * len(models) + 1), 3.0)
    width = 0.8 / len(BLOCKS)
    for ax, cond in zip(axes[0], conditions, strict=True):
        mc = m[m["condition"] == cond]
        for j, block in enumerate(BLOCKS):
            ys = []
            for model in models:
                got = pool_rows(_eq(mc, model=model, block=block))
                ys.append(got["value"] * 100 if got else math.nan)
            xs = np.arange(len(models)) + (j - 1) * width
            ax.bar(xs, ys, width=width, label=block, color=f"C{j}")
            for x, y in zip(xs, ys, strict=True):
                if math.isnan(y):
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, color=NOTE_COLOUR)
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([names.get(x, x) for x in models], rotation=30, ha="right", fontsize=7)
        _style(ax, cond, "", "accuracy (%)")
        _legend(ax, title="blocked")
    return _finish(fig, spec, title)


def size_attributes_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = prepare_metrics(metrics)
    m = m[(m["kind"] == "size") & (m["subset"] == "") & (m["bin"] == "")]
    m = m[m["prompt"] == main_prompt(m, spec)]
    extractor = main_extractor(m, spec)
    acc = m[(m["metric"] == "accuracy") & (m["extractor"] == "")]
    ratio = m[(m["metric"] == "r_attr") & (m["extractor"] == extractor)]
    both = pd.concat([acc, ratio])
    sizes = [s for s in SIZES if s in set(both["size"])] or list(SIZES)

    def draw(ax: Axes, mm: pd.DataFrame) -> str | None:
        xs = np.arange(len(sizes))
        series = [("accuracy", "accuracy"), ("r_attr", "r_attr")]
        for j, (metric, label) in enumerate(series):
            got = [pool_rows(_eq(mm, metric=metric, size=s)) for s in sizes]
            if all(g is None for g in got):
                continue
            ys = [g["value"] * 100 if g else math.nan for g in got]
            ax.bar(xs + (j - 0.5) * 0.4, ys, width=0.4, label=label, color=f"C{j}")
        if not ax.patches:
            return "no accuracy or r_attr rows of a size condition"
        ax.set_xticks(xs)
        ax.set_xticklabels(sizes, fontsize=7)
        _style(ax, "", "distractor size", "%")
        _legend(ax)
        return None

    return _per_model(both, spec, "accuracy and r_attr by distractor size", "size rows", draw)


def mitigation_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = prepare_metrics(metrics)
    prompts = mitigation_prompts(m, spec)
    m = m[m["prompt"].isin([p for p, _ in prompts]) & (m["bin"] == "") & (m["block"] == "")]
    acc = m[(m["metric"] == "accuracy") & (m["extractor"] == "")]
    ratio = m[(m["metric"] == "r_attr") & (m["extractor"] == main_extractor(m, spec))]
    title = "mitigation prompt"
    models = models_present(acc, spec)
    if not models:
        return _empty(spec, title, "no accuracy rows of the main or the mitigation prompt")
    names = model_names(spec)
    panels = [("accuracy", acc, "accuracy (%)")]
    if not ratio.empty:
        panels.append(("r_attr", ratio, "r_attr (%)"))
    fig, axes = _grid(len(panels), len(models))
    xs = np.arange(len(MITIGATION_SUBSETS))
    width = 0.8 / len(prompts)
    for i, (metric, rows, ylabel) in enumerate(panels):
        for j, model in enumerate(models):
            ax = axes[i][j]
            for k, (prompt, setting) in enumerate(prompts):
                sel = _eq(rows, model=model, prompt=prompt)
                if sel.empty:
                    continue
                got, _ = subset_values(sel, subset_source(_eq(acc, model=model, prompt=prompt)))
                ys = [got[s]["value"] * 100 if got[s] else math.nan for s in MITIGATION_SUBSETS]
                if all(math.isnan(y) for y in ys):
                    continue
                label = prompt if setting == "prompt" else f"+ {prompt}"
                ax.bar(xs + (k - (len(prompts) - 1) / 2) * width, ys, width=width, label=label)
            if not ax.patches:
                _placeholder(ax, f"no {metric} rows of aligned, conflicting or distractor groups")
            ax.set_xticks(xs)
            ax.set_xticklabels(list(MITIGATION_SUBSETS), fontsize=7)
            _style(ax, names.get(model, model) if i == 0 else "", "", ylabel)
            _legend(ax)
    return _finish(fig, spec, title)


# ---------------------------------------------------------------------------
# Visual tokens and length distribution
# ---------------------------------------------------------------------------


def visual_tokens_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = _overall(prepare_metrics(metrics))
    m = m[(m["kind"] == "resolution") & (m["prompt"] == main_prompt(m, spec))]
    title = "visual tokens: reasoning length and accuracy by image resolution"
    models = models_present(m, spec)
    if not models:
        return _empty(spec, title, "no rows of a resolution condition in the metrics")
    names = model_names(spec)
    fig, axes = _grid(len(models), 3)
    for i, model in enumerate(models):
        mm = m[m["model"] == model]
        res = _numbers(mm["resolution"])
        name = names.get(model, model)
        for ax, metric, ylabel, scale, tag in (
            (axes[i][0], "mean_length", "mean reasoning length (tokens)", 1.0, "a"),
            (axes[i][1], "accuracy", "accuracy (%)", 100.0, "b"),
        ):
            got = [pool_rows(_eq(mm, metric=metric, resolution=r)) for r in res]
            pts = [(_num(r), g["value"] * scale) for r, g in zip(res, got, strict=True) if g]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=name)
                ax.set_xscale("log", base=2)
                ax.set_xticks([x for x, _ in pts], [f"{x:g}" for x, _ in pts])
                ax.minorticks_off()
                _style(ax, f"({tag}) {name}", "resolution (px)", ylabel)
            else:
                _placeholder(ax, f"no {metric} rows of a resolution condition")
        ax = axes[i][2]
        for r in res:
            _plot_curve(ax, mm[mm["resolution"] == r], f"{r} px")
        if ax.get_lines():
            _style(ax, f"(c) {name}", "reasoning length (tokens)", "accuracy (%)")
            _legend(ax)
        else:
            _placeholder(ax, "no length-rank curve of a resolution condition")
    return _finish(fig, spec, title)


def _boxes(ax: Axes, positions: list[tuple[str, pd.DataFrame]]) -> int:
    """Box-like marks from the quantile rows: one per (label, rows) with all quantiles."""
    stats = []
    for label, sel in positions:
        q = {b: pool_rows(sel[sel["bin"] == b]) for b in QUANTILES}
        if any(v is None for v in q.values()):
            continue
        v = {b: q[b]["value"] for b in QUANTILES}  # type: ignore[index]
        stats.append(
            {
                "label": label,
                "whislo": v["0.10"],
                "q1": v["0.25"],
                "med": v["0.50"],
                "q3": v["0.75"],
                "whishi": v["0.90"],
                "fliers": [],
            }
        )
    if stats:
        ax.bxp(stats, showfliers=False)
        ax.tick_params(axis="x", labelsize=7, labelrotation=30)
    return len(stats)


def length_distribution_figure(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    m = prepare_metrics(metrics)
    m = m[(m["metric"] == "length_quantile") & (m["extractor"] == "") & (m["block"] == "")]
    m = m[m["prompt"] == main_prompt(m, spec)]
    by_class = spec.get("adapter") == "imagenet9"
    title = "distribution of the reasoning length"
    models = models_present(m, spec)
    if not models:
        return _empty(spec, title, "no length_quantile rows in the metrics")
    names = model_names(spec)
    fig, axes = _grid(len(models), 2 if by_class else 1, 3.6, 2.8)
    whole = m[m["subset"] == ""]
    choice = _curve_kind(whole)
    for i, model in enumerate(models):
        mm = whole[whole["model"] == model]
        name = names.get(model, model)
        ax = axes[i][0]
        positions = [("0", mm[mm["kind"] == "none"])]
        if choice is not None:
            sel = _eq(mm, kind=choice[0], semantics=choice[1])
            positions += [(n, sel[sel["distractors"] == n]) for n in _numbers(sel["distractors"])]
        if _boxes(ax, positions):
            what = f"{choice[0]} {choice[1]}" if choice else "clean"
            _style(
                ax, f"(a) {name}", f"number of distractors ({what})", "reasoning length (tokens)"
            )
        else:
            _placeholder(ax, "no length quantiles by number of distractors")
        if by_class:
            ax = axes[i][1]
            sub = m[(m["model"] == model) & (m["subset"] != "")]
            shown = 0
            if not sub.empty:
                clean = sub[sub["kind"] == "none"]
                group = clean if len(clean) else prefer_group(sub)
                classes = sorted(set(group["subset"]))
                shown = _boxes(ax, [(c, group[group["subset"] == c]) for c in classes])
            if shown:
                _style(ax, f"(b) {name}", "class", "reasoning length (tokens)")
            else:
                _placeholder(ax, "no length quantiles by class (subset rows)")
    return _finish(fig, spec, title)


FIGURE_BUILDERS: dict[str, Callable[[pd.DataFrame, Mapping[str, Any]], Figure]] = {
    "length_accuracy": length_accuracy_figure,
    "length_accuracy_semantics": length_accuracy_semantics_figure,
    "length_accuracy_modality": length_accuracy_modality_figure,
    "budget_accuracy": budget_accuracy_figure,
    "budget_length": budget_length_figure,
    "attributes": attributes_figure,
    "attr_accuracy": attr_accuracy_figure,
    "length_attributes": length_attributes_figure,
    "attr_area": attr_area_figure,
    "attention_blocking": attention_blocking_figure,
    "size_attributes": size_attributes_figure,
    "mitigation": mitigation_figure,
    "visual_tokens": visual_tokens_figure,
    "length_distribution": length_distribution_figure,
}


def idis_figure(name: str, metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Figure:
    """The one figure ``name`` (any of :data:`FIGURE_BUILDERS`); ValueError for another."""
    return build_view("Idis figure", FIGURE_BUILDERS, name, metrics, spec)


def idis_figures(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Figure]:
    """Every figure of :func:`idis_figure_names`."""
    return {name: idis_figure(name, metrics, spec) for name in idis_figure_names(spec)}


def idis_view(kind: str, name: str, metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Any:
    """Only the one view asked for: ``kind`` "table" (a :class:`Table`) or "figure" (a
    :class:`Figure`), ``name`` one of its builders; ValueError naming what is unknown."""
    if kind == "table":
        return idis_table(name, metrics, spec)
    if kind == "figure":
        return idis_figure(name, metrics, spec)
    raise ValueError(f"unknown Idis view kind {kind!r} for {name!r} (table or figure)")

"""Readers and per-response statistics of the Idis analysis (the Idis paper, §6 and the
appendices on attributes, areas, sampling and attention blocking).

Pure functions: the readers turn the stage files into tables; the rest computes numbers
from tables. :func:`vlmrobust.metrics.idis.compute_idis_metrics` assembles the metric
rows from them.

Files read:

- attribute judge rows, ``results/judged-attributes/<extractor>/<model>/<dataset>/
  <condition>/<prompt>.jsonl`` (:func:`read_attributes`): the attributes an extractor
  found in each reasoning trace, counted per category;
- area rows, ``results/areas/<dataset>/<condition>.jsonl`` (:func:`read_areas`): each
  variant's distractor and target pixel areas and ``r_area = A_dist / (A_dist +
  A_target)``;
- attention-blocking rows, ``results/blocked/<model>/<dataset>/<condition>/<prompt>.jsonl``
  (:func:`read_blocked`): the answer with no block, the distractor blocked, or the
  target blocked;
- samples, ``results/samples/<dataset>/samples.jsonl`` (:func:`read_sample_meta`): each
  sample's label and (Waterbirds) group.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.idis import ATTRIBUTE_TASKS, attribute_categories
from ..core.io import iter_jsonl

__all__ = [
    "AREA_BINS",
    "ATTRIBUTE_COLUMNS",
    "BLOCKS",
    "QUANTILES",
    "R_ATTR_BINS",
    "TASKS",
    "area_bin",
    "attribute_ratios",
    "length_bins",
    "pearson",
    "r_attr_bin",
    "read_areas",
    "read_attributes",
    "read_blocked",
    "read_sample_meta",
    "sampling_stats",
    "trace_ratios",
]

#: the r_attr bins of ``bin_accuracy``: "0.0-0.1" ... "0.9-1.0" (1.0 in the last)
R_ATTR_BINS = tuple(f"{i / 10:.1f}-{(i + 1) / 10:.1f}" for i in range(10))
#: the r_area bins of ``area_bin_r_attr``: "0.0-0.2" ... "0.8-1.0" (1.0 in the last)
AREA_BINS = tuple(f"{i / 5:.1f}-{(i + 1) / 5:.1f}" for i in range(5))
#: the reasoning-length quantiles of ``length_quantile`` (the ``bin`` text)
QUANTILES = ("0.10", "0.25", "0.50", "0.75", "0.90")
#: the attribute tasks (which categories a trace is sorted into)
TASKS = ATTRIBUTE_TASKS
#: the attention-blocking settings
BLOCKS = ("none", "distractor", "target")
#: the columns of :func:`read_attributes`
ATTRIBUTE_COLUMNS = (
    "extractor",
    "model",
    "dataset",
    "condition",
    "prompt_setting",
    "key",
    "variant_id",
    "sample_id",
    "task",
    "counts",
    "total",
    "error",
    "method",
    "sampled",
)
# a ratio that is a multiple of the bin width up to rounding lands in the upper bin
_EPS = 1e-9


def text_value(value: Any) -> str:
    """A cell as text: "" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def text_fields(rec: Mapping[str, Any], *names: str) -> dict[str, str]:
    """The fields ``names`` of a record, each as text (:func:`text_value`)."""
    return {name: text_value(rec.get(name)) for name in names}


def _output_fields(path: Path) -> dict[str, str]:
    """model, dataset, condition and prompt_setting of a file of one output's rows,
    ``.../<model>/<dataset>/<condition>/<prompt>.jsonl``."""
    model, dataset, condition = path.parts[-4:-1]
    return {"model": model, "dataset": dataset, "condition": condition, "prompt_setting": path.stem}


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


# --------------------------------------------------------------------------- readers


def read_attributes(paths: Iterable[str]) -> pd.DataFrame:
    """Attribute judge rows (:data:`ATTRIBUTE_COLUMNS`), one per judged output row.

    extractor, model, dataset, condition and prompt_setting come from the path
    (``.../<extractor>/<model>/<dataset>/<condition>/<prompt>.jsonl``); ``counts`` is the
    row's dict category -> int, ``total`` their sum (NaN for a row with an ``error``:
    it has no counts); ``sampled`` whether the row comes from a validation sample (its
    ``sample`` field: the file labels a seeded sample of the outputs only). A row with
    neither counts nor an error, or with a task other than :data:`TASKS`, is an error
    naming file and line."""
    rows = []
    for path in paths:
        p = Path(path)
        from_path = {"extractor": p.parts[-5], **_output_fields(p)}
        for lineno, rec in iter_jsonl(path):
            error = text_value(rec.get("error"))
            counts = rec.get("counts")
            if error:
                counts, total = {}, math.nan
            elif not isinstance(counts, Mapping):
                raise ValueError(
                    f"{path}:{lineno}: attribute row {rec.get('key')!r} has neither counts "
                    "nor an error"
                )
            elif rec.get("task") not in TASKS:
                raise ValueError(
                    f"{path}:{lineno}: attribute row {rec.get('key')!r} has task "
                    f"{rec.get('task')!r}, not one of {', '.join(TASKS)}"
                )
            else:
                counts = {str(k): int(v) for k, v in counts.items()}
                total = float(sum(counts.values()))
            rows.append(
                {
                    **from_path,
                    **text_fields(rec, "key", "variant_id", "sample_id", "task", "method"),
                    "counts": counts,
                    "total": total,
                    "error": error,
                    "sampled": bool(rec.get("sample")),
                }
            )
    return pd.DataFrame(rows, columns=list(ATTRIBUTE_COLUMNS))


def read_areas(paths: Iterable[str]) -> pd.DataFrame:
    """Area rows, one per variant: dataset, condition (from the path
    ``results/areas/<dataset>/<condition>.jsonl``), variant_id, sample_id,
    distractor_area, target_area, r_area (NaN when unknown), method, reason."""
    rows = []
    for path in paths:
        p = Path(path)
        for _, rec in iter_jsonl(path):
            rows.append(
                {
                    "dataset": p.parent.name,
                    "condition": p.stem,
                    **text_fields(rec, "variant_id", "sample_id", "method", "reason"),
                    "distractor_area": _num(rec.get("distractor_area")),
                    "target_area": _num(rec.get("target_area")),
                    "r_area": _num(rec.get("r_area")),
                }
            )
    cols = ["dataset", "condition", "variant_id", "sample_id", "distractor_area"]
    cols += ["target_area", "r_area", "method", "reason"]
    return pd.DataFrame(rows, columns=cols)


def read_blocked(paths: Iterable[str]) -> pd.DataFrame:
    """Attention-blocking rows, one per (output row, block): model, dataset, condition,
    prompt_setting (from the path ``results/blocked/<model>/<dataset>/<condition>/
    <prompt>.jsonl``), key, variant_id, sample_id, draw, block, correct (1, 0 or NaN),
    blocked_tokens, phrases, error ("" when none)."""
    rows = []
    for path in paths:
        from_path = _output_fields(Path(path))
        for _, rec in iter_jsonl(path):
            rows.append(
                {
                    **from_path,
                    **text_fields(rec, "key", "variant_id", "sample_id", "block", "error"),
                    "draw": rec.get("draw"),
                    "correct": _num(rec.get("correct")),
                    "blocked_tokens": _num(rec.get("blocked_tokens")),
                    "phrases": _num(rec.get("phrases")),
                }
            )
    cols = ["model", "dataset", "condition", "prompt_setting", "key", "variant_id"]
    cols += ["sample_id", "draw", "block", "correct", "blocked_tokens", "phrases", "error"]
    return pd.DataFrame(rows, columns=cols)


def read_sample_meta(paths: Iterable[str]) -> pd.DataFrame:
    """dataset, sample_id, label (``meta.label``) and group (``meta.group``, the
    Waterbirds aligned/conflicting group) of each sample ("" where absent)."""
    rows = []
    for path in paths:
        for _, rec in iter_jsonl(path):
            meta = rec.get("meta") or {}
            rows.append(
                {
                    "dataset": text_value(rec.get("dataset")) or Path(path).parent.name,
                    "sample_id": text_value(rec.get("sample_id")),
                    **text_fields(meta, "label", "group"),
                }
            )
    cols = ["dataset", "sample_id", "label", "group"]
    return pd.DataFrame(rows, columns=cols).drop_duplicates(["dataset", "sample_id"])


# --------------------------------------------------------------------------- statistics


def attribute_ratios(
    task: str,
    counts: Mapping[str, int],
    distractor_classes: Sequence[str] | None,
    target_label: str | None,
) -> tuple[float, float, float]:
    """(total, r_attr, r_target) of one judged trace: total = all attributes (every
    category, ``other`` included); r_attr = distractor-category attributes / total,
    NaN when total is 0 or the trace has no distractor category (aligned, clean
    perception); r_target = target-category attributes / total, NaN when total is 0.
    The categories: :func:`vlmrobust.core.idis.attribute_categories`."""
    cats = attribute_categories(task, distractor_classes, target_label)
    total = float(sum(counts.values()))
    if total == 0:
        return total, math.nan, math.nan
    dist = sum(counts.get(c, 0) for c in cats["distractor"])
    target = sum(counts.get(c, 0) for c in cats["target"])
    r_attr = dist / total if cats["distractor"] else math.nan
    return total, r_attr, target / total


def _bin(value: float, bins: Sequence[str]) -> str:
    if value is None or math.isnan(value):
        return ""
    k = len(bins)
    i = int(math.floor(float(value) * k + _EPS))
    return bins[min(max(i, 0), k - 1)]


def r_attr_bin(value: float) -> str:
    """The ``bin_accuracy`` bin of a ratio: [0.0, 0.1) -> "0.0-0.1", ..., [0.9, 1.0]
    -> "0.9-1.0" (0.1 opens "0.1-0.2"; 1.0 closes the last bin); "" for NaN."""
    return _bin(value, R_ATTR_BINS)


def area_bin(value: float) -> str:
    """The ``area_bin_r_attr`` bin of an r_area: width 0.2, 1.0 in "0.8-1.0"; "" for NaN."""
    return _bin(value, AREA_BINS)


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, int, str]:
    """(r, pairs, note): Pearson's r over the pairs where both sides are finite
    (scipy.stats.pearsonr); NaN with a note when fewer than 3 pairs or a side is
    constant."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = len(a)
    if n < 3:
        return math.nan, n, f"{n} pair(s): too few for a correlation"
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan, n, "a constant side: no correlation"
    from scipy import stats  # here: importing scipy.stats costs every study job ~0.8 s

    return float(stats.pearsonr(a, b).statistic), n, ""


def length_bins(lengths: Sequence[float], values: Sequence[float], bins: int = 5) -> list[dict]:
    """Mean ``values`` per length quantile bin (quintiles by default; ``pandas.qcut``,
    equal edges merged): ``[{"bin": "<min>-<max>" (the bin's shortest and longest
    length), "value", "n"}]``, shortest first. Pairs with a NaN side are left out."""
    frame = pd.DataFrame({"length": lengths, "value": values}).dropna()
    if frame.empty:
        return []
    frame["q"] = pd.qcut(frame["length"], bins, labels=False, duplicates="drop")
    out = []
    for _, g in frame.groupby("q", sort=True):
        lo, hi = g["length"].min(), g["length"].max()
        out.append({"bin": f"{lo:g}-{hi:g}", "value": float(g["value"].mean()), "n": len(g)})
    return out


def sampling_stats(group: pd.DataFrame) -> dict[str, Any] | None:
    """Sampling variance against the effect of more distractors (the Idis paper's
    appendix on sampling): ``group`` has one row per response with ``unit`` (the base
    image: sample_id, or sample_id and semantics when pooled over semantics),
    ``variant_id``, ``n`` (distractors, int) and ``length``.

    Over the units with responses at both n = 1 and n = max (the group's largest n):
    ``within_sd`` = mean over the variants at n = 1 and n = max of the SD (ddof 1) of
    their draws' lengths (variants with >= 2 draws); ``delta`` = mean_max - mean_1,
    mean_k = mean over units of the unit's mean length at n = k (all draws of all its
    variants at n = k); ``ci`` = delta -/+ 1.96 * sqrt(se_1^2 + se_max^2), se_k = SD
    (ddof 1) over units of the unit means at n = k / sqrt(units) (NaN below 2 units);
    ``p_longer`` = mean over units of P(a draw at n = 1 is longer than a draw at
    n = max), over every pair of the unit's draws, ties counted half. None when no unit
    qualifies (or max < 2)."""
    g = group.dropna(subset=["length"])
    if g.empty:
        return None
    top = int(g["n"].max())
    if top < 2:
        return None
    ends = g[g["n"].isin([1, top])]
    has = ends.groupby("unit")["n"].nunique()
    units = has[has == 2].index
    if not len(units):
        return None
    ends = ends[ends["unit"].isin(units)]
    sds = ends.groupby("variant_id")["length"].agg(
        lambda s: s.std(ddof=1) if len(s) > 1 else np.nan
    )
    means = ends.groupby(["unit", "n"])["length"].mean().unstack("n")
    m1, mx = means[1].to_numpy(float), means[top].to_numpy(float)
    k = len(units)
    delta = float(mx.mean() - m1.mean())
    if k > 1:
        se = math.sqrt(m1.std(ddof=1) ** 2 / k + mx.std(ddof=1) ** 2 / k)
        ci = (delta - 1.96 * se, delta + 1.96 * se)
    else:
        ci = (math.nan, math.nan)
    probs = []
    for _, u in ends.groupby("unit", sort=False):
        a = u.loc[u["n"] == 1, "length"].to_numpy(float)
        b = u.loc[u["n"] == top, "length"].to_numpy(float)
        diff = a[:, None] - b[None, :]
        probs.append(float(((diff > 0) + 0.5 * (diff == 0)).mean()))
    return {
        "max": top,
        "units": k,
        "within_sd": float(sds.mean()) if sds.notna().any() else math.nan,
        "variants_sd": int(sds.notna().sum()),
        "delta": delta,
        "ci": ci,
        "p_longer": float(np.mean(probs)),
    }


def trace_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`attribute_ratios` of every judged trace of ``frame`` (columns task,
    counts, distractor_classes, target_label): a frame (same index) with total, r_attr,
    r_target and ``no_label`` (True for a perception trace whose sample label is
    unknown: its ratios are NaN, its total is kept)."""
    cache: dict[tuple, dict[str, list[str]] | None] = {}
    out = []
    for task, counts, classes, label in zip(
        frame["task"],
        frame["counts"],
        frame["distractor_classes"],
        frame["target_label"],
        strict=True,
    ):
        total = float(sum(counts.values()))
        key = (task, tuple(classes or ()), label or "")
        if key not in cache:
            missing = task == "perception" and not label
            cache[key] = None if missing else attribute_categories(task, classes, label)
        cats = cache[key]
        if cats is None or total == 0:
            out.append((total, math.nan, math.nan, cats is None))
            continue
        dist = sum(counts.get(c, 0) for c in cats["distractor"])
        target = sum(counts.get(c, 0) for c in cats["target"])
        r_attr = dist / total if cats["distractor"] else math.nan
        out.append((total, r_attr, target / total, False))
    return pd.DataFrame(out, index=frame.index, columns=["total", "r_attr", "r_target", "no_label"])

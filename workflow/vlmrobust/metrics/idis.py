"""The Idis metrics: accuracy, reasoning length and length-rank curves under distractors.

Pure functions of files: the scored rows (one per response: every draw of every variant),
the variant manifests (what each variant carries: ``params.kind``, ``semantics``, ``n``,
``size``, ``resolution``, written by the Idis perturbations) and the study's spec. The
definitions are in docs/studies/idis.md; in short:

*Response*: one scored row (model, dataset, prompt setting, condition, variant, draw). A
response whose request failed after every retry (``error`` set) is no answer: it is left
out of every number and counted in the notes and the warnings.

*Reasoning length* of a response: ``thinking_tokens`` (the thinking part counted with
the model's own tokenizer, or the reasoning tokens an API reports). A response of a
model that wrote no thinking part has none; its length is then its ``completion_tokens``
(the whole answer), and every row that rests on such lengths says so in its note.

*Group*: the responses of one (model, prompt setting, condition, kind, semantics,
distractors, size, resolution); the clean condition is kind ``none`` with 0
distractors. Besides each semantics, a visual or typographic kind is also pooled over
its semantics (``semantics`` = ``all``): Figure 3 of the paper plots those.

Metrics (columns of :data:`vlmrobust.metrics.core.METRIC_COLUMNS` plus
:data:`EXTRA_COLUMNS`; ``benchmark`` = the dataset, ``prompt`` = the setting):

``accuracy``      mean ``correct`` over the group's responses; ``n`` = responses;
                  ``ci_low``/``ci_high``: percentile interval (``bootstrap.level``) of a
                  bootstrap over QUESTIONS (variants: all draws of a question move
                  together), ``bootstrap.resamples`` draws from
                  ``numpy.random.default_rng(bootstrap.seed)``.
``mean_length``   mean reasoning length over the group's responses; ``n`` = responses
                  with a length; the same question bootstrap.
``questions``     the number of questions (variants) of the group (value and ``n``).
``rank_accuracy`` / ``rank_length``  the length-rank curve (the paper's §4): the
                  responses of each question are ranked by reasoning length, shortest
                  first (``rank`` 1..D, D = the draws per question; equal lengths are
                  ordered by draw index, so the ranking is total and reproducible);
                  ``rank_accuracy`` = the accuracy of the rank-r responses over the
                  group's questions, ``rank_length`` = their mean length. Only questions
                  with all D draws answered and measured count (``n`` = those
                  questions; the others are counted in the note). Same bootstrap for
                  ``rank_accuracy``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..core.io import read_jsonl
from .core import (
    METRIC_COLUMNS,
    drop_failed_requests,
    failed_note,
    join_notes,
    metric_row,
    model_info,
    spec_models,
)

__all__ = [
    "EXTRA_COLUMNS",
    "IDIS_PERTURBATIONS",
    "POOLED",
    "apply_math_judge",
    "compute_idis_metrics",
    "read_math_judged",
    "rank_curve",
    "read_idis_variants",
    "response_lengths",
]

#: perturbations whose variants the Idis study reads (their params carry kind/semantics/n)
IDIS_PERTURBATIONS = (
    "objects",
    "typographic",
    "diagram",
    "handwritten",
    "textual",
    "size",
    "resize",
    "idis-release",
)
#: the Idis metrics' own columns (text): what a group is, and a curve point's rank
EXTRA_COLUMNS = ("kind", "semantics", "distractors", "size", "resolution", "rank")
#: the semantics value of a kind pooled over its semantics
POOLED = "all"
GROUP_COLUMNS = ("condition", "kind", "semantics", "distractors", "size", "resolution")
_POOLED_KINDS = ("visual", "typographic")
NOTE_COMPLETION = "length = completion tokens (no thinking part)"


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def read_idis_variants(paths: Iterable[str]) -> pd.DataFrame:
    """One row per variant of the manifests: dataset, condition, variant_id, sample_id
    and the group fields from its params (text; "" where a field does not apply)."""
    rows = []
    for path in paths:
        for rec in read_jsonl(path):
            params = rec.get("params") or {}
            rows.append(
                {
                    "dataset": _text(rec.get("dataset")),
                    "condition": _text(rec.get("condition")),
                    "variant_id": _text(rec.get("variant_id")),
                    "sample_id": _text(rec.get("sample_id")),
                    "kind": _text(params.get("kind")),
                    "semantics": _text(params.get("semantics")),
                    "distractors": _text(params.get("n")),
                    "size": _text(params.get("size")),
                    "resolution": _text(params.get("resolution")),
                }
            )
    cols = ["dataset", "condition", "variant_id", "sample_id", *GROUP_COLUMNS[1:]]
    return pd.DataFrame(rows, columns=cols).drop_duplicates()


def response_lengths(scored: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(length, from_completion) per scored row: ``thinking_tokens`` when present, else
    ``completion_tokens`` (flagged); NaN when neither is known."""

    def num(col: str) -> pd.Series:
        if col not in scored.columns:
            return pd.Series(np.nan, index=scored.index)
        return pd.to_numeric(scored[col].replace("", None), errors="coerce").astype(float)

    thinking, completion = num("thinking_tokens"), num("completion_tokens")
    from_completion = thinking.isna() & completion.notna()
    return thinking.fillna(completion), from_completion


def _bootstrap(k: np.ndarray, m: np.ndarray, boot: Mapping[str, Any]) -> tuple[float, float]:
    """Percentile interval of sum(k)/sum(m) over questions drawn with replacement."""
    q = len(k)
    resamples = int(boot.get("resamples", 1000))
    if q < 2 or resamples < 1:
        return math.nan, math.nan
    rng = np.random.default_rng(int(boot.get("seed", 0)))
    idx = rng.integers(0, q, size=(resamples, q))
    num, den = k[idx].sum(axis=1), m[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = num / den
    stats = stats[np.isfinite(stats)]
    if not len(stats):
        return math.nan, math.nan
    alpha = (1 - float(boot.get("level", 0.95))) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def rank_curve(
    group: pd.DataFrame, draws: int, boot: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], int]:
    """The length-rank curve of one group: a point per rank (1..draws) with accuracy,
    its question-bootstrap interval, mean length and the questions used; and the number
    of questions left out (fewer than ``draws`` measured responses).

    ``group`` has one row per response: variant_id, draw, correct, length. Ranks go
    shortest first; equal lengths are ordered by draw index."""
    usable = group.dropna(subset=["length"])
    counts = usable.groupby("variant_id")["draw"].nunique()
    full = counts[counts == draws].index
    skipped = int(group["variant_id"].nunique() - len(full))
    if draws < 1 or not len(full):
        return [], skipped
    g = usable[usable["variant_id"].isin(full)].sort_values(["variant_id", "length", "draw"])
    g = g.assign(rank=g.groupby("variant_id").cumcount() + 1)
    points = []
    for r in range(1, draws + 1):
        at = g[g["rank"] == r]
        correct = at["correct"].to_numpy(dtype=float)
        lo, hi = _bootstrap(correct, np.ones_like(correct), boot)
        points.append(
            {
                "rank": r,
                "accuracy": float(correct.mean()),
                "ci_low": lo,
                "ci_high": hi,
                "length": float(at["length"].mean()),
                "questions": len(at),
            }
        )
    return points, skipped


def _groups(df: pd.DataFrame) -> Iterable[tuple[dict[str, str], pd.DataFrame]]:
    """Every group of responses (see the module docstring), pooled ones included."""
    for key, g in df.groupby(list(GROUP_COLUMNS), sort=True):
        yield dict(zip(GROUP_COLUMNS, key, strict=True)), g
    pool = df[df["kind"].isin(_POOLED_KINDS)]
    cols = [c for c in GROUP_COLUMNS if c != "semantics"]
    for key, g in pool.groupby(cols, sort=True):
        if g["semantics"].nunique() > 1:
            yield {**dict(zip(cols, key, strict=True)), "semantics": POOLED}, g


def read_math_judged(paths: Iterable[str]) -> pd.DataFrame:
    """MathVerse judge verdicts (``results/judged-mathverse/<model>/<dataset>/<condition>/
    <prompt>.jsonl``): key, verdict (1, 0 or NaN), error, with model, condition and
    prompt_setting from the path."""
    from pathlib import Path

    rows = []
    for path in paths:
        parts = Path(path).parts
        model, condition, prompt = parts[-4], parts[-2], Path(path).stem
        for rec in read_jsonl(path):
            v = rec.get("verdict")
            rows.append(
                {
                    "model": model,
                    "condition": condition,
                    "prompt_setting": prompt,
                    "key": str(rec.get("key")),
                    "verdict": math.nan if v is None else float(v),
                    "judge_error": _text(rec.get("error")),
                }
            )
    cols = ["model", "condition", "prompt_setting", "key", "verdict", "judge_error"]
    return pd.DataFrame(rows, columns=cols)


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two 0/1 raters (NaN when chance agreement is 1)."""
    po = float((a == b).mean())
    pa, pb = float(a.mean()), float(b.mean())
    pe = pa * pb + (1 - pa) * (1 - pb)
    return math.nan if pe >= 1 else (po - pe) / (1 - pe)


def apply_math_judge(
    df: pd.DataFrame,
    judged: pd.DataFrame,
    info: Mapping[str, Mapping[str, str]],
    dataset: str,
    warnings: list[str],
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Correctness from the MathVerse judge's verdicts: each response's ``correct`` is
    the judge's verdict; a response without a verdict (the judge failed) is left out and
    counted. Also the agreement of the judge with the rule-based scorer per model
    (``judge_agreement``: share of responses where both say the same; ``judge_kappa``:
    Cohen's kappa), over the responses both judged."""
    keys = ["model", "condition", "prompt_setting", "key"]
    m = df.merge(judged, on=keys, how="left")
    rows: list[dict[str, Any]] = []
    for model, g in m.groupby("model", sort=False):
        both = g.dropna(subset=["verdict"])
        a, b = both["correct"].to_numpy(float), both["verdict"].to_numpy(float)
        base = {**info.get(str(model), {}), "benchmark": dataset}
        if len(both):
            rows.append(
                metric_row(
                    "judge_agreement",
                    model=str(model),
                    **base,
                    value=float((a == b).mean()),
                    n=len(both),
                    note="the MathVerse judge vs the rule-based scorer",
                )
            )
            rows.append(
                metric_row("judge_kappa", model=str(model), **base, value=_kappa(a, b), n=len(both))
            )
    missing = m["verdict"].isna()
    if missing.any():
        for (mo, c), n in m[missing].groupby(["model", "condition"]).size().items():
            warnings.append(
                f"model {mo}, dataset {dataset}, condition {c}: {n} response(s) without a "
                "MathVerse judge verdict (the judge failed or no verdict file row); left out"
            )
    m = m[~missing].copy()
    m["correct"] = m["verdict"].astype(int)
    return m.drop(columns=["verdict", "judge_error"]), rows


def _mean_row(
    metric: str, g: pd.DataFrame, column: str, base: Mapping[str, Any], boot, note: str
) -> dict[str, Any]:
    """The mean of ``column`` over the responses ``g`` with its question bootstrap."""
    per_q = g.groupby("variant_id")[column].agg(["sum", "size"])
    lo, hi = _bootstrap(per_q["sum"].to_numpy(float), per_q["size"].to_numpy(float), boot)
    return metric_row(
        metric, **base, value=float(g[column].mean()), ci_low=lo, ci_high=hi, n=len(g), note=note
    )


def _group_rows(
    g: pd.DataFrame, base: Mapping[str, Any], draws: int, boot, fnote: str
) -> list[dict[str, Any]]:
    """Every metric row of one group of responses (module docstring)."""
    lnote = NOTE_COMPLETION if g["from_completion"].any() else ""
    questions = g["variant_id"].nunique()
    rows = [
        _mean_row("accuracy", g, "correct", base, boot, fnote),
        metric_row("questions", **base, value=float(questions), n=questions, note=fnote),
    ]
    measured = g.dropna(subset=["length"])
    if len(measured):
        unmeasured = len(g) - len(measured)
        missing = f"{unmeasured} response(s) without a length" if unmeasured else ""
        rows.append(
            _mean_row(
                "mean_length", measured, "length", base, boot, join_notes(lnote, missing, fnote)
            )
        )
    points, skipped = rank_curve(g, draws, boot)
    snote = f"{skipped} question(s) without {draws} measured responses left out" if skipped else ""
    note = join_notes(lnote, snote, fnote)
    for pt in points:
        at = {**base, "rank": str(pt["rank"]), "n": pt["questions"], "note": note}
        rows.append(
            metric_row(
                "rank_accuracy",
                **at,
                value=pt["accuracy"],
                ci_low=pt["ci_low"],
                ci_high=pt["ci_high"],
            )
        )
        rows.append(metric_row("rank_length", **at, value=pt["length"]))
    return rows


def compute_idis_metrics(
    scored: pd.DataFrame,
    variants: pd.DataFrame,
    spec: Mapping[str, Any],
    judged: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The Idis metrics of one dataset (module docstring); returns (table, warnings).

    ``spec``: dataset, models (registry fields by id), model_order, clean_condition,
    draws (responses per question), bootstrap {resamples, seed, level}. ``judged``: the
    MathVerse judge's verdicts (:func:`read_math_judged`), which then decide correctness
    (:func:`apply_math_judge`)."""
    warnings: list[str] = []
    models, order = spec_models(spec)
    dataset = str(spec["dataset"])
    clean = str(spec["clean_condition"])
    draws = int(spec.get("draws", 1))
    boot = spec.get("bootstrap") or {}
    cols = [*METRIC_COLUMNS, *EXTRA_COLUMNS]
    if scored.empty:
        warnings.append(f"dataset {dataset}: no scored outputs")
        return pd.DataFrame(columns=cols), warnings

    df = scored.copy()
    df["length"], df["from_completion"] = response_lengths(df)
    # one benchmark per (dataset, prompt setting), as in the shared metrics core
    df["benchmark"] = df["prompt_setting"].map(lambda p: f"{dataset}:{p}")
    failed: dict[tuple[str, str, str], int] = {}
    df = drop_failed_requests(df, failed, warnings)
    judge_rows: list[dict[str, Any]] = []
    if judged is not None:
        info = {m: model_info(models, m) for m in set(df["model"])}
        df, judge_rows = apply_math_judge(df, judged, info, dataset, warnings)

    v = variants[variants["dataset"] == dataset] if len(variants) else variants
    df = df.merge(
        v.drop(columns=["sample_id"], errors="ignore"),
        on=["dataset", "condition", "variant_id"],
        how="left",
    )
    for c in GROUP_COLUMNS[1:]:
        df[c] = df[c].fillna("")
    is_clean = df["condition"] == clean
    df.loc[is_clean, "kind"] = "none"
    df.loc[is_clean, "distractors"] = "0"
    lost = df[(df["kind"] == "") & ~is_clean]
    for c, n in lost.groupby("condition").size().items():
        warnings.append(
            f"dataset {dataset}, condition {c}: {n} response(s) whose variant carries no "
            "Idis parameters (kind) in the manifest; left out"
        )
    df = df[(df["kind"] != "") | is_clean]

    rows: list[dict[str, Any]] = list(judge_rows)
    for model in [m for m in order if m in set(df["model"])]:
        info = model_info(models, model)
        for prompt in sorted(set(df.loc[df["model"] == model, "prompt_setting"])):
            mp = df[(df["model"] == model) & (df["prompt_setting"] == prompt)]
            for key, g in _groups(mp):
                base = {
                    "model": model,
                    **info,
                    "benchmark": dataset,
                    "prompt": prompt,
                    **{c: key[c] for c in GROUP_COLUMNS},
                    "rank": "",
                }
                n_failed = failed.get((model, f"{dataset}:{prompt}", key["condition"]), 0)
                fnote = failed_note(n_failed) if n_failed else ""
                group_rows = _group_rows(g, base, draws, boot, fnote)
                rows += group_rows
                if draws > 1 and not any(r["metric"] == "rank_accuracy" for r in group_rows):
                    warnings.append(
                        f"model {model}, dataset {dataset}, prompt {prompt}, condition "
                        f"{key['condition']}: no question has {draws} measured responses; "
                        "no length-rank curve"
                    )
    out = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)
    return out, warnings


def group_label(row: Mapping[str, Any] | pd.Series) -> str:
    """A group as a short label: ``clean``, ``visual conflicting n=3``, ``size large``,
    ``512 px`` ..."""
    kind = str(row.get("kind", ""))
    if kind == "none":
        return "clean"
    parts: list[str] = []
    if row.get("semantics"):
        parts.append(str(row["semantics"]))
    elif kind:
        parts.append(kind)
    if row.get("distractors"):
        parts.append(f"n={row['distractors']}")
    if row.get("size"):
        parts.append(f"size {row['size']}")
    if row.get("resolution"):
        parts.append(f"{row['resolution']} px")
    return " ".join(parts) or str(row.get("condition", ""))


def sort_key(values: Sequence[str]) -> tuple:
    """Distractor counts and ranks sort as numbers, text as text."""
    return tuple((0, float(v), "") if _is_num(v) else (1, 0.0, str(v)) for v in values)


def _is_num(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True

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
                  first (``rank`` 1..D, D = the prompt setting's draws per question;
                  equal lengths are ordered by draw index, so the ranking is total and
                  reproducible);
                  ``rank_accuracy`` = the accuracy of the rank-r responses over the
                  group's questions, ``rank_length`` = their mean length. Only questions
                  with all D draws answered and measured count (``n`` = those
                  questions; the others are counted in the note). Same bootstrap for
                  ``rank_accuracy``.

The analysis rows (the Idis paper, §6 and its appendices), each made only when its input
is given (:func:`compute_idis_metrics`; readers in :mod:`vlmrobust.metrics.idis_attributes`).
Every extra column is text, "" where it does not apply:

``accuracy`` / ``mean_length`` with ``subset``  the same, over the group's responses to
                  samples of one label (perception: ``Dog`` ...) or one Waterbirds group
                  (``aligned`` | ``conflicting``); no rank curves per subset.
``length_quantile``  the reasoning-length quantile ``bin`` ("0.10", "0.25", "0.50",
                  "0.75", "0.90"; numpy's linear interpolation) of the group (and of
                  each subset); ``n`` = responses with a length.

A *judged trace* is a response with an attribute row of one extractor (``extractor``
column) and no judge error. Its ``total`` counts every attribute (``other`` included);
``r_attr`` = distractor-category attributes / total and ``r_target`` = target-category
attributes / total, with the categories of :func:`vlmrobust.core.idis.attribute_categories`
(r_attr is undefined for aligned and clean perception traces, both are undefined for a
trace with no attribute). Only the (model, prompt setting, condition) an extractor
judged count; judge errors, responses without an attribute row, zero-attribute traces
and traces without a distractor category are left out of the ratios and counted in the
note. Per group and extractor:

``attributes_total``  mean total over the judged traces (question bootstrap as above).
``r_attr`` / ``r_target``  mean ratio over the traces where it is defined.
``bin_accuracy``  accuracy of the traces whose r_attr falls in ``bin`` ("0.0-0.1" ...
                  "0.9-1.0", width 0.1, left-closed, 1.0 in the last); ``n`` = traces.
``area_bin_r_attr``  mean r_attr of the traces whose variant's r_area falls in ``bin``
                  ("0.0-0.2" ... "0.8-1.0").

Per model, prompt setting and extractor, over the judged traces of every condition
(group columns ""): ``pearson_length_attributes`` (Pearson's r of reasoning length and
total; ``n`` = pairs), ``length_bin_attributes`` (mean total per length quintile,
``bin`` = "<shortest>-<longest>" length of the bin), ``pearson_attr_accuracy``
(Pearson's r of r_attr and correct). Per model and prompt setting,
``extractor_pearson`` (``extractor`` = "<main> vs <other>", the main extractor =
``spec.extractors[0]``): Pearson's r of per-trace r_attr over the traces both judged
with r_attr defined, or of r_target when r_attr is undefined on every common trace
(Waterbirds has both; clean perception only r_target). Pearson's r is
``scipy.stats.pearsonr``; NaN (with a note) below 3 pairs or with a constant side.
An extractor whose rows carry ``sample`` labelled a seeded validation sample of the
outputs only (``judge.attributes.validation_sample``): the responses outside it are
neither "without an attribute row" nor warned about, every row of that extractor says
in its note that it rests on a sample, and its ``extractor_pearson`` is over the
sampled traces (note says so).

``r_area``        mean r_area over the group's variants with a known one (``n`` =
                  variants; the unknown ones are counted in the note).
``sampling_within_sd`` / ``sampling_delta`` / ``sampling_p_longer``  per condition,
                  kind and semantics (and pooled, ``all``: a base image is then a
                  sample and semantics), ``distractors`` = "1-<max>", ``n`` = base
                  images with responses at both n = 1 and n = max:
                  :func:`vlmrobust.metrics.idis_attributes.sampling_stats`.
``blocked_accuracy``  per condition and ``block`` (none | distractor | target): mean
                  correct over the attention-blocking rows with a verdict; ``n`` = those
                  rows; errors and rows without a verdict counted in the note.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
from .idis_attributes import (
    AREA_BINS,
    QUANTILES,
    R_ATTR_BINS,
    area_bin,
    length_bins,
    pearson,
    r_attr_bin,
    read_areas,
    read_attributes,
    read_blocked,
    read_sample_meta,
    sampling_stats,
    text_fields,
    text_value,
    trace_ratios,
)

__all__ = [
    "EXTRA_COLUMNS",
    "IDIS_PERTURBATIONS",
    "POOLED",
    "apply_math_judge",
    "compute_idis_metrics",
    "read_areas",
    "read_attributes",
    "read_blocked",
    "read_math_judged",
    "rank_curve",
    "read_idis_variants",
    "read_sample_meta",
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
EXTRA_COLUMNS = (
    "kind",
    "semantics",
    "distractors",
    "size",
    "resolution",
    "rank",
    "subset",
    "bin",
    "extractor",
    "block",
)
#: the semantics value of a kind pooled over its semantics
POOLED = "all"
GROUP_COLUMNS = ("condition", "kind", "semantics", "distractors", "size", "resolution")
_POOLED_KINDS = ("visual", "typographic")
NOTE_COMPLETION = "length = completion tokens (no thinking part)"


def read_idis_variants(paths: Iterable[str]) -> pd.DataFrame:
    """One row per variant of the manifests: dataset, condition, variant_id, sample_id,
    the group fields from its params (text; "" where a field does not apply) and
    ``distractor_classes`` (a tuple; empty when the params name none)."""
    rows = []
    for path in paths:
        for rec in read_jsonl(path):
            params = rec.get("params") or {}
            rows.append(
                {
                    **text_fields(rec, "dataset", "condition", "variant_id", "sample_id"),
                    **text_fields(params, "kind", "semantics", "size", "resolution"),
                    "distractors": text_value(params.get("n")),
                    "distractor_classes": tuple(
                        str(c) for c in params.get("distractor_classes") or ()
                    ),
                }
            )
    cols = ["dataset", "condition", "variant_id", "sample_id", *GROUP_COLUMNS[1:]]
    return pd.DataFrame(rows, columns=[*cols, "distractor_classes"]).drop_duplicates()


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
                    "judge_error": text_value(rec.get("error")),
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


@dataclass
class _Dataset:
    """One Idis dataset's spec, read once, and the warnings of its metrics."""

    dataset: str
    clean: str
    models: dict[str, Mapping[str, Any]]
    order: list[str]
    draws: int
    boot: Mapping[str, Any]
    #: a prompt setting's own draws per question, where it differs from ``draws``
    prompt_draws: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: (model, benchmark, condition) -> requests that failed after every retry
    failed: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> _Dataset:
        """The dataset of ``spec``, with no warning yet."""
        models, order = spec_models(spec)
        return cls(
            dataset=str(spec["dataset"]),
            clean=str(spec["clean_condition"]),
            models=models,
            order=order,
            draws=int(spec.get("draws", 1)),
            boot=spec.get("bootstrap") or {},
            prompt_draws={str(k): int(v) for k, v in (spec.get("prompt_draws") or {}).items()},
        )

    def draws_of(self, prompt: str) -> int:
        """Draws per question of one prompt setting (``prompt_draws``, else ``draws``)."""
        return self.prompt_draws.get(prompt, self.draws)

    def head(self, model: str, prompt: str) -> dict[str, Any]:
        """The columns every row of one model and prompt setting starts with."""
        info = model_info(self.models, model)
        return {"model": model, **info, "benchmark": self.dataset, "prompt": prompt}


def compute_idis_metrics(
    scored: pd.DataFrame,
    variants: pd.DataFrame,
    spec: Mapping[str, Any],
    judged: pd.DataFrame | None = None,
    *,
    samples: pd.DataFrame | None = None,
    attributes: pd.DataFrame | None = None,
    areas: pd.DataFrame | None = None,
    blocked: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The Idis metrics of one dataset (module docstring); returns (table, warnings).

    ``spec``: dataset, models (registry fields by id), model_order, clean_condition,
    draws (responses per question), prompt_draws (a prompt setting's own draws, over
    draws), bootstrap {resamples, seed, level}, extractors
    (attribute extractor names, the main one first; default: those in ``attributes``,
    sorted). ``judged``: the MathVerse judge's verdicts (:func:`read_math_judged`), which
    then decide correctness (:func:`apply_math_judge`). The analysis inputs, each
    optional (its rows are made only when given): ``samples``
    (:func:`~vlmrobust.metrics.idis_attributes.read_sample_meta`: subset rows and the
    perception target label), ``attributes`` (``read_attributes``), ``areas``
    (``read_areas``), ``blocked`` (``read_blocked``)."""
    ds = _Dataset.of(spec)
    cols = [*METRIC_COLUMNS, *EXTRA_COLUMNS]
    if scored.empty:
        ds.warnings.append(f"dataset {ds.dataset}: no scored outputs")
        return pd.DataFrame(columns=cols), ds.warnings

    df = scored.copy()
    df["length"], df["from_completion"] = response_lengths(df)
    # one benchmark per (dataset, prompt setting), as in the shared metrics core
    df["benchmark"] = df["prompt_setting"].map(lambda p: f"{ds.dataset}:{p}")
    df = drop_failed_requests(df, ds.failed, ds.warnings)
    rows: list[dict[str, Any]] = []
    if judged is not None:
        info = {m: model_info(ds.models, m) for m in set(df["model"])}
        df, rows = apply_math_judge(df, judged, info, ds.dataset, ds.warnings)
    df = _with_groups(df, variants, ds)
    _add_analysis_columns(df, ds.dataset, samples, areas, ds.warnings)

    present = [m for m in ds.order if m in set(df["model"])]
    rows += _response_rows(df, present, ds, with_areas=areas is not None)
    if attributes is not None:
        extractors = _extractors(spec, attributes, ds.dataset)
        traces = _judged_traces(df, attributes, ds.dataset, extractors, ds.warnings)
        for model, prompt, mp in _by_model_prompt(traces, present):
            head = ds.head(model, prompt)
            rows += _attribute_rows(mp, head, extractors, ds.boot, areas is not None)
    if blocked is not None:
        rows += _blocked_rows(blocked, ds.dataset, ds.models, ds.order, ds.warnings)
    rows = [{**dict.fromkeys(EXTRA_COLUMNS, ""), **r} for r in rows]
    out = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)
    return out, ds.warnings


def _with_groups(df: pd.DataFrame, variants: pd.DataFrame, ds: _Dataset) -> pd.DataFrame:
    """The responses with their variant's group fields (clean: kind ``none``, 0
    distractors); a perturbed response whose variant has no kind is left out with a
    warning."""
    v = variants[variants["dataset"] == ds.dataset] if len(variants) else variants
    df = df.merge(
        v.drop(columns=["sample_id"], errors="ignore"),
        on=["dataset", "condition", "variant_id"],
        how="left",
    )
    for c in GROUP_COLUMNS[1:]:
        df[c] = df[c].fillna("")
    is_clean = df["condition"] == ds.clean
    df.loc[is_clean, "kind"] = "none"
    df.loc[is_clean, "distractors"] = "0"
    lost = df[(df["kind"] == "") & ~is_clean]
    for c, n in lost.groupby("condition").size().items():
        ds.warnings.append(
            f"dataset {ds.dataset}, condition {c}: {n} response(s) whose variant carries no "
            "Idis parameters (kind) in the manifest; left out"
        )
    return df[(df["kind"] != "") | is_clean].copy()


def _by_model_prompt(
    df: pd.DataFrame, models: Sequence[str]
) -> Iterable[tuple[str, str, pd.DataFrame]]:
    """(model, prompt setting, its rows) of each model in order, prompts sorted."""
    for model in models:
        for prompt in sorted(set(df.loc[df["model"] == model, "prompt_setting"])):
            yield model, prompt, df[(df["model"] == model) & (df["prompt_setting"] == prompt)]


def _response_rows(
    df: pd.DataFrame, present: Sequence[str], ds: _Dataset, with_areas: bool
) -> list[dict[str, Any]]:
    """Every group's rows (accuracy, length, curve, subsets, areas) and the sampling
    rows, per model and prompt setting."""
    rows: list[dict[str, Any]] = []
    for model, prompt, mp in _by_model_prompt(df, present):
        head = ds.head(model, prompt)
        for key, g in _groups(mp):
            base = {**head, **{c: key[c] for c in GROUP_COLUMNS}, "rank": ""}
            n_failed = ds.failed.get((model, f"{ds.dataset}:{prompt}", key["condition"]), 0)
            fnote = failed_note(n_failed) if n_failed else ""
            draws = ds.draws_of(prompt)
            group_rows = _group_rows(g, base, draws, ds.boot, fnote)
            rows += group_rows
            rows += _subset_rows(g, base, ds.boot, fnote)
            if with_areas:
                rows += _area_rows(g, base)
            if draws > 1 and not any(r["metric"] == "rank_accuracy" for r in group_rows):
                ds.warnings.append(
                    f"model {model}, dataset {ds.dataset}, prompt {prompt}, condition "
                    f"{key['condition']}: no question has {draws} measured responses; "
                    "no length-rank curve"
                )
        rows += _sampling_rows(mp, head)
    return rows


# --------------------------------------------------------------------------- analysis


def _add_analysis_columns(
    df: pd.DataFrame,
    dataset: str,
    samples: pd.DataFrame | None,
    areas: pd.DataFrame | None,
    warnings: list[str],
) -> None:
    """Per response (in place): key, distractor_classes (tuple), target_label and
    subset (from the samples), r_area (from the areas; NaN when unknown)."""
    if "key" not in df.columns:
        df["key"] = ""
    keys = df["key"].fillna("").astype(str)
    made = df["variant_id"].astype(str) + "#" + df["draw"].astype(str)
    df["key"] = keys.where(keys != "", made)
    if "distractor_classes" not in df.columns:
        df["distractor_classes"] = [()] * len(df)
    df["distractor_classes"] = [c if isinstance(c, tuple) else () for c in df["distractor_classes"]]
    df["target_label"], df["subset"] = "", ""
    if samples is not None and len(samples):
        meta = samples[samples["dataset"] == dataset].set_index("sample_id")
        label = df["sample_id"].map(meta["label"]).fillna("")
        group = df["sample_id"].map(meta["group"]).fillna("")
        df["target_label"] = label
        df["subset"] = group.where(group != "", label)
    df["r_area"] = math.nan
    if areas is not None:
        a = areas[(areas["dataset"] == dataset)].drop_duplicates(["condition", "variant_id"])
        r = a.set_index(["condition", "variant_id"])["r_area"]
        idx = pd.MultiIndex.from_arrays([df["condition"], df["variant_id"]])
        df["r_area"] = r.reindex(idx).to_numpy(float)
        measured = df[df["condition"].isin(set(a["condition"]))]
        unknown = measured[measured["r_area"].isna()].drop_duplicates(["condition", "variant_id"])
        for c, n in unknown.groupby("condition").size().items():
            warnings.append(
                f"dataset {dataset}, condition {c}: {n} variant(s) without a known r_area "
                "(no area row, or an unknown area); left out of r_area and area_bin_r_attr"
            )


def _subset_rows(g: pd.DataFrame, base: Mapping[str, Any], boot, fnote: str) -> list[dict]:
    """length_quantile of the group, and per subset (sample label or Waterbirds group)
    accuracy, mean_length and length_quantile."""
    rows = _quantile_rows(g, base)
    for subset, s in g[g["subset"] != ""].groupby("subset", sort=True):
        at = {**base, "subset": str(subset)}
        rows.append(_mean_row("accuracy", s, "correct", at, boot, fnote))
        measured = s.dropna(subset=["length"])
        if len(measured):
            lnote = NOTE_COMPLETION if measured["from_completion"].any() else ""
            rows.append(
                _mean_row("mean_length", measured, "length", at, boot, join_notes(lnote, fnote))
            )
        rows += _quantile_rows(s, at)
    return rows


def _quantile_rows(g: pd.DataFrame, base: Mapping[str, Any]) -> list[dict]:
    lengths = g["length"].dropna().to_numpy(float)
    if not len(lengths):
        return []
    note = NOTE_COMPLETION if g.loc[g["length"].notna(), "from_completion"].any() else ""
    values = np.quantile(lengths, [float(q) for q in QUANTILES])
    return [
        metric_row("length_quantile", **base, bin=q, value=float(x), n=len(lengths), note=note)
        for q, x in zip(QUANTILES, values, strict=True)
    ]


def _area_rows(g: pd.DataFrame, base: Mapping[str, Any]) -> list[dict]:
    """r_area: mean r_area over the group's variants with a known one."""
    per_variant = g.drop_duplicates(["condition", "variant_id"])
    known = per_variant["r_area"].dropna()
    if not len(known):
        return []
    unknown = len(per_variant) - len(known)
    note = f"{unknown} variant(s) without a known r_area left out" if unknown else ""
    return [metric_row("r_area", **base, value=float(known.mean()), n=len(known), note=note)]


def _sampling_rows(mp: pd.DataFrame, head: Mapping[str, Any]) -> list[dict]:
    """sampling_within_sd, sampling_delta and sampling_p_longer (idis_attributes.
    sampling_stats) per condition, kind and semantics, and pooled over semantics."""
    d = mp[(mp["kind"] != "none") & mp["distractors"].map(_is_num)].copy()
    if d.empty:
        return []
    d["n"] = d["distractors"].astype(float).astype(int)
    d["unit"] = d["sample_id"].astype(str) + "\x00" + d["semantics"].astype(str)
    keyed: list[tuple[tuple[str, str, str], pd.DataFrame]] = [
        ((str(c), str(k), str(s)), g)
        for (c, k, s), g in d.groupby(["condition", "kind", "semantics"], sort=True)
    ]
    for (c, k), g in d[d["kind"].isin(_POOLED_KINDS)].groupby(["condition", "kind"], sort=True):
        if g["semantics"].nunique() > 1:
            keyed.append(((str(c), str(k), POOLED), g))
    rows = []
    for (c, k, s), g in keyed:
        st = sampling_stats(g)
        if st is None:
            continue
        base = {**head, "condition": c, "kind": k, "semantics": s}
        base |= {"distractors": f"1-{st['max']}", "n": st["units"]}
        sd_note = f"SD over {st['variants_sd']} variant(s) with >= 2 draws"
        ci_note = "95% interval: delta -/+ 1.96 sqrt(se_1^2 + se_max^2), se over images"
        lo, hi = st["ci"]
        rows += [
            metric_row("sampling_within_sd", **base, value=st["within_sd"], note=sd_note),
            metric_row(
                "sampling_delta", **base, value=st["delta"], ci_low=lo, ci_high=hi, note=ci_note
            ),
            metric_row("sampling_p_longer", **base, value=st["p_longer"], note="ties count half"),
        ]
    return rows


def _extractors(spec: Mapping[str, Any], attributes: pd.DataFrame, dataset: str) -> list[str]:
    """The extractors, the main one first: ``spec.extractors`` (those with rows), then
    any other extractor of the rows, sorted."""
    have = set(attributes.loc[attributes["dataset"] == dataset, "extractor"])
    named = [str(e) for e in spec.get("extractors") or []]
    return [e for e in named if e in have] + sorted(have - set(named))


def _judged_traces(
    df: pd.DataFrame,
    attributes: pd.DataFrame,
    dataset: str,
    extractors: Sequence[str],
    warnings: list[str],
) -> pd.DataFrame:
    """One row per (response, extractor) for every (model, prompt, condition) the
    extractor judged: the response's columns plus ``status`` (ok | error | missing |
    unsampled: outside the validation sample of a sampled file), total, r_attr,
    r_target and no_label. Judge errors, responses without an attribute row (of a file
    that is not a sample) and perception traces without a sample label are counted in
    ``warnings``."""
    keys = ["model", "condition", "prompt_setting", "key"]
    keep = [*keys, "task", "counts", "error"]
    cell = ["model", "prompt_setting", "condition"]
    frames = []
    for ex in extractors:
        a = attributes[(attributes["dataset"] == dataset) & (attributes["extractor"] == ex)]
        dup = a.duplicated(keys, keep="last")
        if dup.any():
            warnings.append(
                f"extractor {ex}, dataset {dataset}: {int(dup.sum())} repeated attribute "
                "row(s) for the same response; the last one kept"
            )
            a = a[~dup]
        sampled = a.get("sampled", pd.Series(False, index=a.index)).fillna(False).astype(bool)
        judged = a[cell].assign(cell_sampled=sampled).groupby(cell, as_index=False).any()
        resp = df.merge(judged, on=cell)
        m = resp.merge(
            a[keep].rename(columns={"error": "judge_error"}), on=keys, how="left", indicator=True
        )
        m["extractor"] = ex
        absent = np.where(m["cell_sampled"], "unsampled", "missing")
        m["status"] = np.where(
            m["_merge"] == "left_only", absent, np.where(m["judge_error"] != "", "error", "ok")
        )
        m = m.drop(columns=["_merge", "cell_sampled"])
        ok = m["status"] == "ok"
        ratios = trace_ratios(m[ok])
        for c in ("total", "r_attr", "r_target"):
            m[c] = ratios[c].reindex(m.index)
        m["no_label"] = ratios["no_label"].reindex(m.index).fillna(False).astype(bool)
        for sel, text in (
            (m["status"] == "error", "attribute judge error(s); left out"),
            (m["status"] == "missing", "response(s) without an attribute row; left out"),
            (m["no_label"], "perception trace(s) whose sample has no label: no ratios"),
        ):
            for (mo, c), n in m[sel].groupby(["model", "condition"]).size().items():
                warnings.append(
                    f"extractor {ex}, model {mo}, dataset {dataset}, condition {c}: {n} {text}"
                )
        frames.append(m)
    if not frames:
        return df.head(0).assign(extractor="", status="", total=np.nan, r_attr=np.nan)
    return pd.concat(frames, ignore_index=True)


def _trace_notes(g: pd.DataFrame, ratio: str | None = None) -> str:
    """What a trace metric left out of the group ``g`` (rows of one extractor)."""
    ok = g[g["status"] == "ok"]
    n_err = int((g["status"] == "error").sum())
    n_miss = int((g["status"] == "missing").sum())
    notes = [
        f"{n_err} judge error(s) left out" if n_err else "",
        f"{n_miss} response(s) without an attribute row left out" if n_miss else "",
    ]
    if ratio:
        zero = int((ok["total"] == 0).sum())
        nolab = int(ok["no_label"].sum())
        notes.append(f"{zero} zero-attribute trace(s) left out" if zero else "")
        notes.append(f"{nolab} trace(s) without a sample label left out" if nolab else "")
        if ratio == "r_attr":
            undefined = int(((ok["total"] > 0) & ~ok["no_label"] & ok["r_attr"].isna()).sum())
            notes.append(
                f"{undefined} trace(s) without a distractor category (aligned or clean) left out"
                if undefined
                else ""
            )
    return join_notes(*notes)


def _bin_rows(
    metric: str,
    frame: pd.DataFrame,
    by: str,
    bin_of: Any,
    bins: Sequence[str],
    column: str,
    base: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """One row per non-empty bin of ``frame[by]`` (``bin_of`` names a value's bin): the
    mean of ``column`` over the rows in it, ``n`` = those rows."""
    labels = frame[by].map(bin_of)
    return [
        metric_row(metric, **base, bin=b, value=float(sel[column].mean()), n=len(sel))
        for b in bins
        if len(sel := frame[labels == b])
    ]


def _attribute_rows(
    mp: pd.DataFrame,
    head: Mapping[str, Any],
    extractors: Sequence[str],
    boot,
    with_areas: bool,
) -> list[dict]:
    """The attribute metrics of one model and prompt setting (module docstring)."""
    rows: list[dict] = []
    for ex in extractors:
        me = mp[mp["extractor"] == ex]
        if me.empty:
            continue
        start = len(rows)
        for key, g in _groups(me):
            base = {**head, **{c: key[c] for c in GROUP_COLUMNS}, "extractor": ex}
            ok = g[g["status"] == "ok"]
            if len(ok):
                rows.append(_mean_row("attributes_total", ok, "total", base, boot, _trace_notes(g)))
            for ratio in ("r_attr", "r_target"):
                defined = ok.dropna(subset=[ratio])
                if len(defined):
                    note = _trace_notes(g, ratio)
                    rows.append(_mean_row(ratio, defined, ratio, base, boot, note))
            defined = ok.dropna(subset=["r_attr"])
            rows += _bin_rows(
                "bin_accuracy", defined, "r_attr", r_attr_bin, R_ATTR_BINS, "correct", base
            )
            if with_areas:
                known = defined.dropna(subset=["r_area"])
                rows += _bin_rows(
                    "area_bin_r_attr", known, "r_area", area_bin, AREA_BINS, "r_attr", base
                )
        rows += _trace_correlation_rows(me, {**head, "extractor": ex})
        note = _sample_note(me)
        if note:
            rows[start:] = [
                {**r, "note": join_notes(r.get("note", ""), note)} for r in rows[start:]
            ]
    rows += _extractor_pearson_rows(mp, head, extractors)
    return rows


def _sample_note(me: pd.DataFrame) -> str:
    """The note of every row of an extractor that labelled a validation sample only
    (``me``: its rows of one model and prompt setting), "" for one that labelled all."""
    left = int((me["status"] == "unsampled").sum())
    if not left:
        return ""
    return (
        f"a seeded sample: {len(me) - left} of {len(me)} responses labelled "
        "(judge.attributes.validation_sample)"
    )


def _trace_correlation_rows(me: pd.DataFrame, base: Mapping[str, Any]) -> list[dict]:
    """pearson_length_attributes, length_bin_attributes and pearson_attr_accuracy over
    every judged trace of one model, prompt setting and extractor (all conditions)."""
    ok = me[me["status"] == "ok"]
    rows = []
    if len(ok):
        lnote = NOTE_COMPLETION if ok["from_completion"].any() else ""
        r, n, note = pearson(ok["length"], ok["total"])
        rows.append(
            metric_row(
                "pearson_length_attributes", **base, value=r, n=n, note=join_notes(note, lnote)
            )
        )
        for b in length_bins(ok["length"], ok["total"]):
            rows.append(
                metric_row(
                    "length_bin_attributes",
                    **base,
                    bin=b["bin"],
                    value=b["value"],
                    n=b["n"],
                    note=lnote,
                )
            )
        defined = ok.dropna(subset=["r_attr"])
        if len(defined):
            r, n, note = pearson(defined["r_attr"], defined["correct"])
            rows.append(metric_row("pearson_attr_accuracy", **base, value=r, n=n, note=note))
    return rows


def _extractor_pearson_rows(
    mp: pd.DataFrame, head: Mapping[str, Any], extractors: Sequence[str]
) -> list[dict]:
    """extractor_pearson: the main extractor against each other one, per-trace r_attr
    over the traces both judged (r_target when r_attr is undefined on every such
    trace)."""
    if len(extractors) < 2:
        return []
    ok = mp[mp["status"] == "ok"]
    cols = ["condition", "key", "r_attr", "r_target"]
    main = ok[ok["extractor"] == extractors[0]][cols]
    rows = []
    for other in extractors[1:]:
        both = main.merge(ok[ok["extractor"] == other][cols], on=["condition", "key"])
        if both.empty:
            continue
        ratio, note = "r_attr", ""
        if both[["r_attr_x", "r_attr_y"]].isna().any(axis=1).all():
            ratio, note = "r_target", "r_target (r_attr undefined on every common trace)"
        r, n, pnote = pearson(both[f"{ratio}_x"], both[f"{ratio}_y"])
        sampled = (mp["extractor"] == other) & (mp["status"] == "unsampled")
        snote = f"{other}: a seeded sample of the traces" if sampled.any() else ""
        rows.append(
            metric_row(
                "extractor_pearson",
                **head,
                extractor=f"{extractors[0]} vs {other}",
                value=r,
                n=n,
                note=join_notes(note, pnote, snote),
            )
        )
    return rows


def _blocked_rows(
    blocked: pd.DataFrame,
    dataset: str,
    models: Mapping[str, Mapping[str, Any]],
    order: Sequence[str],
    warnings: list[str],
) -> list[dict]:
    """blocked_accuracy per model, prompt setting, condition and block setting: mean
    correct over the rows with a verdict; errors and rows without a verdict counted."""
    b = blocked[blocked["dataset"] == dataset]
    rows: list[dict] = []
    present = set(b["model"])
    for model in [m for m in order if m in present] + sorted(present - set(order)):
        info = model_info(models, model)
        bm = b[b["model"] == model]
        for (prompt, cond, block), g in bm.groupby(["prompt_setting", "condition", "block"]):
            err = g["error"] != ""
            valid = g[~err & g["correct"].notna()]
            n_err, n_none = int(err.sum()), int((~err & g["correct"].isna()).sum())
            if n_err:
                warnings.append(
                    f"model {model}, dataset {dataset}, condition {cond}, block {block}: "
                    f"{n_err} attention-blocking error(s); left out"
                )
            note = join_notes(
                f"{n_err} error(s) left out" if n_err else "",
                f"{n_none} row(s) without a verdict left out" if n_none else "",
            )
            rows.append(
                metric_row(
                    "blocked_accuracy",
                    model=model,
                    **info,
                    benchmark=dataset,
                    prompt=str(prompt),
                    condition=str(cond),
                    block=str(block),
                    value=float(valid["correct"].mean()) if len(valid) else math.nan,
                    n=len(valid),
                    note=note,
                )
            )
    return rows


def group_label(row: Mapping[str, Any] | pd.Series) -> str:
    """A group as a short label: ``clean``, ``conflicting n=3``, ``size large``,
    ``512 px`` ..."""
    kind = str(row.get("kind", ""))
    if kind == "none":
        return "clean"
    if row.get("size"):
        return f"size {row['size']}"
    if row.get("resolution"):
        return f"{row['resolution']} px"
    parts: list[str] = []
    if row.get("semantics"):
        parts.append(str(row["semantics"]))
    elif kind:
        parts.append(kind)
    if row.get("distractors"):
        parts.append(f"n={row['distractors']}")
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

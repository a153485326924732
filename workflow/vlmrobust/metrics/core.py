"""The shared metrics core of the perturbation studies.

Every study's metrics are a tidy long table with the columns :data:`METRIC_COLUMNS`;
this module holds what they share: the row constructor (:func:`metric_row`), model
information and registry pairs, note joining, the paired bootstrap, the files
(:func:`read_inputs`, :func:`read_metrics`, :func:`write_metrics`), and the engine
:func:`perturbation_metrics`, which turns the scored rows of one clean condition and
any perturbed conditions (corruptions, distractions, ...) into accuracy, relative
robustness, retention, group aggregates, base-vs-reasoning pair statistics with
paired-bootstrap intervals, RR-fingerprint correlations and, where a variant manifest
says which perturbation method and severity each variant has, RR per method x severity.
The vision-corruption study is this engine on its manifests
(:mod:`vlmrobust.metrics.corruption`); the distraction study runs it without the method
breakdown (:mod:`vlmrobust.metrics.distraction`). The columns::

    metric, model, base_model, family, role, benchmark, group, prompt, condition,
    method, severity, value, ci_low, ci_high, n, note

Text fields that do not apply are ``""``, numbers that do not apply are NaN. Accuracies
and rates are fractions in [0, 1] (tables multiply by 100). ``n`` is always the number
of units (or samples, datasets, benchmarks — said per metric below) the value rests on.
Every problem the data has (a model without outputs on a benchmark, a zero clean
accuracy, no shared clean-correct samples, perturbed rows without a clean row or a
manifest entry) is returned as a warning line and, where a row is affected, written in
its ``note``; nothing is dropped silently and nothing raises except malformed input
(missing columns, non-0/1 ``correct``, duplicated output rows), which is an error that
names the rows.

Terms
    *Benchmark*: one (dataset, prompt setting). Its ``benchmark`` name is the dataset
    when the dataset has one prompt setting in the run, else ``dataset:setting``
    (MathVista under three settings gives ``mathvista:mathvista-cot`` ...); ``prompt``
    holds the setting (``default`` for the datasets run with their default prompt). The
    setting of a scored row is the ``prompt_setting`` column when present (added by
    :func:`read_inputs` from the file name ``<setting>.csv``); otherwise its ``prompt``
    when that is one of the dataset's configured settings, else ``default`` (a default
    run records the builder's name, e.g. ``mcq``, in ``prompt``). ``group`` is the
    dataset's group (``reasoning``, ``general``; ``""`` when it has none).

    *Unit*: a clean unit is (benchmark, sample_id, draw); a perturbed unit is
    (benchmark, variant_id, draw) of a perturbed condition, paired with the clean row of
    its sample and the SAME draw. With corruption assignment ``all`` a sample has many
    variants: each is a unit, all paired with the same clean row. Perturbed units
    without a clean row count in accuracy and RR but not in retention, the pair
    statistics or the method x severity RR (warning).

Per model x benchmark x condition
    ``accuracy``  mean of ``correct`` over the rows (every draw and variant is a row);
                  ``n`` = rows. Conditions: the clean one and every perturbed one.
    ``mean_score`` mean of ``score`` (ANLS for InfoVQA, VQA accuracy for TextVQA — the
                  paper-comparable numbers there; equal to ``accuracy`` for binary
                  scorers). Emitted for every benchmark, tables pick the ones they need.

Per model x benchmark x perturbed condition
    ``rr``        relative robustness RR = P_perturbed / P_clean with P the
                  ``accuracy`` above; ``n`` = perturbed rows. A clean accuracy of 0
                  gives NaN, note "clean accuracy is 0" and a warning, never inf.
    ``retention`` P(correct after | correct before): mean of the perturbed ``correct``
                  over the model's perturbed units whose paired clean row is correct;
                  ``n`` = those units (NaN, note, when there are none).
    ``missing``   one row per model x benchmark the run expects but that has no scored
                  rows (value NaN, ``n`` 0, note "no scored outputs"; ``condition``
                  ``""`` when the benchmark is absent altogether, else the absent
                  condition), plus a warning. Expected: every dataset of
                  ``spec["datasets"]`` x its prompt settings x the run's models (or the
                  dataset's optional ``models`` list) x the study's conditions (or the
                  dataset's optional ``conditions`` list).

Group aggregates (``benchmark`` = ``group`` = the group name, and ``all`` = every dataset)
    ``accuracy`` per model x condition and ``rr`` per model x perturbed condition,
    MACRO-averaged: the mean over the group's datasets of each dataset's accuracy, where
    a dataset with several prompt settings counts once (the mean over its settings
    first); RR of the group = perturbed group accuracy / clean group accuracy (not the
    mean of per-benchmark RRs). Each condition averages what exists; a model missing a
    benchmark of the group still gets the aggregate over the rest, with the note
    "missing benchmarks: ..." (and the ``missing`` rows and warning above). ``n`` =
    datasets averaged (for ``rr``: datasets in either condition).

Pair statistics (each registry pair: a reasoning model whose ``base`` is among the
run's models; ``model`` = the reasoning model, ``base_model`` = the base), per benchmark
and pooled over all benchmarks (``benchmark`` = ``all``), per perturbed condition.
The units of a pair are the paired perturbed units both models answered (a unit only
one model has is left out, with a warning). S = the units both models got right on the
clean input.
    ``pair_n``        |S| (value and ``n``).
    ``agreement``     fraction of S where both retain or both lose; ``n`` = |S|.
    ``retention_gap`` retention_base - retention_reasoning over S (positive = the base
                      retains more); ``n`` = |S|. ``ci_low``/``ci_high``: percentile
                      interval at ``bootstrap.level`` (paper: 90%) of a PAIRED
                      bootstrap over SAMPLES: the samples of S — (dataset, sample_id),
                      so every unit of a sample (its variants, draws and, pooled, its
                      prompt settings) moves together — are drawn with replacement,
                      ``bootstrap.resamples`` times, from ``numpy.random.default_rng(
                      bootstrap.seed)`` (a fresh generator per statistic, so a number
                      never depends on which other models or benchmarks are in the run);
                      each resample's gap is sum(w_s d_s) / sum(w_s k_s) with k_s the
                      sample's units in S and d_s the sum of its (base - reasoning)
                      retained indicators.
    ``error_jaccard`` |E_b ∩ E_r| / |E_b ∪ E_r| with E_m the units model m answered right
                      on clean input and wrong after perturbation, over ALL units of the
                      pair (not only S: an error of one model on a unit the other model
                      got wrong on clean input still counts); ``n`` = |E_b ∪ E_r|.
    Edge cases: S empty -> ``pair_n`` 0, ``agreement``/``retention_gap`` NaN with note
    "no shared clean-correct samples" and a warning; both error sets empty -> Jaccard
    NaN with note "no perturbation-induced errors for either model".

``rr_fingerprint_corr`` (per perturbed condition)
    Pearson correlation between the per-benchmark ``rr`` vectors of two models of the
    same family (every pair of the run's models within a family), over the benchmarks
    where both RRs are finite; ``n`` = those benchmarks. Fewer than 3 (or a constant
    vector) -> NaN with a note. ``base_model`` holds the family's base model when the
    pair has one, else the first of the two in run order; ``model`` the other one.
    ``benchmark`` = ``group`` = ``all``.

``acc_method_severity`` / ``rr_method_severity`` (per model x perturbed condition x
method x severity, pooled over benchmarks; ``benchmark`` = ``group`` = ``all``)
    The accuracy of the paired perturbed units with that (method, severity) from the
    manifest, and that accuracy divided by the accuracy of the same units' paired clean
    rows (unit-weighted; clean 0 -> NaN with note). ``severity`` is NaN for the blank
    image. ``n`` = units.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.io import atomic_write, read_jsonl
from ..core.prompts import DEFAULT_PROMPT
from ..core.scored import SCORED_NUMBERS, SCORED_REQUIRED

__all__ = [
    "ALL",
    "FLOAT_COLUMNS",
    "METRIC_COLUMNS",
    "bootstrap_gap_ci",
    "join_notes",
    "metric_row",
    "model_info",
    "perturbation_metrics",
    "read_inputs",
    "read_metrics",
    "registry_pairs",
    "spec_dataset",
    "spec_models",
    "write_metrics",
]

METRIC_COLUMNS = (
    "metric",
    "model",
    "base_model",
    "family",
    "role",
    "benchmark",
    "group",
    "prompt",
    "condition",
    "method",
    "severity",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "note",
)
_TEXT_COLUMNS = tuple(
    c for c in METRIC_COLUMNS if c not in ("severity", "value", "ci_low", "ci_high", "n")
)
FLOAT_COLUMNS = ("severity", "value", "ci_low", "ci_high")

#: the benchmark/group name of aggregates over every dataset
ALL = "all"

NOTE_NO_OUTPUTS = "no scored outputs"
NOTE_ZERO_CLEAN = "clean accuracy is 0"
NOTE_NO_SHARED = "no shared clean-correct samples"
NOTE_NO_ERRORS = "no perturbation-induced errors for either model"
NOTE_NO_RETAIN = "no clean-correct units"

VARIANT_COLUMNS = ("variant_id", "dataset", "condition", "method", "severity")
_UNIT = ["benchmark", "dataset", "sample_id", "variant_id", "draw"]
#: index cells one bootstrap chunk holds (bounds memory: ~16 bytes a cell)
_BOOT_CELLS = 4_000_000


# --------------------------------------------------------------------------- shared


def spec_models(spec: Mapping[str, Any]) -> tuple[dict[str, Mapping[str, Any]], list[str]]:
    """A study spec's models (id -> registry fields) and their order: ``model_order``
    first, then any other model of ``models``."""
    models = {str(k): (v or {}) for k, v in (spec.get("models") or {}).items()}
    order = [str(m) for m in (spec.get("model_order") or list(models))]
    order += [m for m in models if m not in order]
    return models, order


def model_info(models: Mapping[str, Mapping[str, Any]], model: str) -> dict[str, str]:
    """The registry columns of a metrics row: base_model, family, role ("" if unknown)."""
    entry = models.get(model) or {}
    return {
        "base_model": str(entry.get("base") or ""),
        "family": str(entry.get("family") or ""),
        "role": str(entry.get("role") or ""),
    }


def registry_pairs(
    models: Mapping[str, Mapping[str, Any]], order: Sequence[str]
) -> list[tuple[str, str]]:
    """(reasoning, base) pairs of the registry, in run order: a reasoning model whose
    ``base`` is also among the run's models."""
    known = set(order)
    return [
        (m, str(models[m].get("base")))
        for m in order
        if m in models
        and models[m].get("role") == "reasoning"
        and models[m].get("base")
        and str(models[m].get("base")) in known
    ]


def spec_dataset(spec: Mapping[str, Any], what: str) -> str:
    """The dataset name of a per-dataset study's spec (``dataset``: a name or {name: ...})."""
    ds = spec.get("dataset")
    if isinstance(ds, Mapping):
        ds = ds.get("name")
    if not ds:
        raise ValueError(f"spec: key 'dataset' (the {what} dataset name) is missing")
    return str(ds)


# --------------------------------------------------------------------------- spec


@dataclass
class _Dataset:
    name: str
    group: str
    configured: list[str]  # named prompt settings (not "default")
    settings: list[str]  # expected settings, in order
    models: list[str] | None
    conditions: list[str] | None


@dataclass
class _Bench:
    name: str
    dataset: str
    setting: str
    group: str


@dataclass
class _Run:
    models: dict[str, Mapping[str, Any]]
    order: list[str]
    datasets: dict[str, _Dataset]
    clean: str
    perturbed: list[str]
    resamples: int
    seed: int
    level: float
    benches: dict[str, _Bench] = field(default_factory=dict)
    #: (model, benchmark, condition) -> requests that failed after every retry
    failed: dict[tuple[str, str, str], int] = field(default_factory=dict)
    #: (model, benchmark, condition) -> what its scoring mode did (scoring_notes)
    scoring: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def conditions(self) -> list[str]:
        return [self.clean, *self.perturbed]

    def info(self, model: str) -> dict[str, str]:
        return model_info(self.models, model)

    def expected_models(self, dataset: str) -> list[str]:
        ds = self.datasets[dataset]
        return list(ds.models) if ds.models is not None else list(self.order)

    def expected_conditions(self, dataset: str) -> list[str]:
        ds = self.datasets[dataset]
        if ds.conditions is None:
            return self.conditions
        return [c for c in self.conditions if c in ds.conditions]

    def benches_of(self, dataset: str) -> list[_Bench]:
        return [b for b in self.benches.values() if b.dataset == dataset]


def _parse_spec(spec: Mapping[str, Any], scored: pd.DataFrame) -> _Run:
    if "perturbed_conditions" not in spec:
        raise ValueError(
            "spec: key 'perturbed_conditions' is missing (the list of perturbed "
            "conditions, e.g. ['corrupt'])"
        )
    perturbed = [str(c) for c in spec["perturbed_conditions"]]
    clean = str(spec.get("clean_condition", "clean"))
    if clean in perturbed:
        raise ValueError(
            f"spec: clean_condition {clean!r} is also in perturbed_conditions {perturbed}"
        )
    models, order = spec_models(spec)
    boot = dict(spec.get("bootstrap") or {})
    resamples = int(boot.get("resamples", 2000))
    level = float(boot.get("level", 0.9))
    seed = int(boot.get("seed", 0))
    if resamples < 1:
        raise ValueError(f"spec: bootstrap.resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"spec: bootstrap.level must be in (0, 1), got {level}")

    raw = spec.get("datasets")
    if raw is None:  # derive: every dataset with perturbed rows, its observed prompts
        study = scored[scored["condition"].astype(str).isin(perturbed)]
        raw = {str(d): {"group": None, "prompts": []} for d in sorted(study["dataset"].unique())}
    datasets: dict[str, _Dataset] = {}
    for name, entry in raw.items():
        entry = entry or {}
        prompts = [str(p) for p in (entry.get("prompts") or [])]
        configured = [p for p in prompts if p != DEFAULT_PROMPT]
        settings = list(dict.fromkeys(prompts)) or [DEFAULT_PROMPT]
        ds_models = entry.get("models")
        ds_conds = entry.get("conditions")
        datasets[str(name)] = _Dataset(
            name=str(name),
            group=str(entry.get("group") or ""),
            configured=configured,
            settings=settings,
            models=[str(m) for m in ds_models] if ds_models is not None else None,
            conditions=[str(c) for c in ds_conds] if ds_conds is not None else None,
        )
    return _Run(models, order, datasets, clean, perturbed, resamples, seed, level)


# --------------------------------------------------------------------------- inputs


def text_column(series: pd.Series) -> pd.Series:
    """``series`` as text, a missing value as ""."""
    return series.astype(object).where(series.notna(), "").astype(str)


def _prepare_scored(scored: pd.DataFrame, run: _Run, warnings: list[str]) -> pd.DataFrame:
    """The study's rows with clean types, a prompt ``setting`` and a ``benchmark``."""
    df = _study_rows(scored, run, warnings)
    _check_numbers(df)
    df["correct"] = pd.to_numeric(df["correct"], errors="coerce").astype(np.int8)
    df["score"] = pd.to_numeric(df["score"], errors="coerce").astype(float)
    df["draw"] = pd.to_numeric(df["draw"], errors="coerce").fillna(0).astype(np.int64)
    setting = _prompt_settings(df, run, warnings)
    if "prompt_setting" in df:
        given = text_column(df["prompt_setting"])
        setting = given.where(given != "", setting)
        df = df.drop(columns="prompt_setting")
    df["setting"] = setting
    df["benchmark"] = _benchmarks(df, run, warnings, "prompt_setting" in scored)
    df = drop_failed_requests(df, run.failed, warnings)
    run.scoring.update(scoring_notes(df, warnings))
    df = df.drop(columns=[c for c in SCORING_COLUMNS if c in df.columns])
    _check_unique(df, run)
    return df.reset_index(drop=True)


#: the scored columns of the scoring mode that the notes read (core.scored)
SCORING_COLUMNS = ("mode", "method", "harness_bug", "corrected", "other_correct")


def _flags(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series.astype(object).where(series.notna(), np.nan), errors="coerce")


def scoring_notes(df: pd.DataFrame, warnings: list[str]) -> dict[tuple[str, str, str], str]:
    """What the scoring mode did per (model, benchmark, condition), as an accuracy note
    and a warning line each: the harness's seeded random options, its verdicts made by
    offline rules (no ``scoring.harness_judge``), the verdicts a reproduced harness bug
    changed with the accuracy without them, and the verdicts the other scoring mode
    gives differently (``scoring.compare_modes``). Rows without these columns (files
    of an older version, released verdicts) give no note."""
    if "mode" not in df.columns:
        return {}
    key = "benchmark" if "benchmark" in df.columns else "dataset"
    method = text_column(df["method"]) if "method" in df.columns else pd.Series("", index=df.index)
    fixed = _flags(df["corrected"]) if "corrected" in df.columns else None
    other = _flags(df["other_correct"]) if "other_correct" in df.columns else None
    notes: dict[tuple[str, str, str], str] = {}
    for (m, b, c), idx in df.groupby(["model", key, "condition"], sort=True).groups.items():
        rows = df.loc[idx]
        parts = []
        guesses = int((method.loc[idx] == "random").sum())
        if guesses:
            parts.append(
                f"{guesses} answer(s) the harness read as no option got its random option (seeded)"
            )
        offline = int((method.loc[idx] == "offline-rule").sum())
        if offline:
            parts.append(f"{offline} verdict(s) by the harness's offline rules (no harness_judge)")
        if fixed is not None and fixed.loc[idx].notna().any():
            f = fixed.loc[idx]
            changed = int((f.notna() & (f != rows["correct"])).sum())
            corrected = float(f.fillna(rows["correct"]).mean())
            bugs = ", ".join(sorted(set(text_column(rows["harness_bug"])) - {""})) or "harness bug"
            parts.append(
                f"{bugs}: {changed} verdict(s) the harness gets wrong by its own bug "
                f"(kept); accuracy without it {corrected * 100:.1f}%"
            )
        if other is not None and other.loc[idx].notna().any():
            o = other.loc[idx]
            differ = int((o.notna() & (o != rows["correct"])).sum())
            modes = "/".join(sorted(set(text_column(rows["mode"])) - {""}))
            parts.append(
                f"{differ} of {int(o.notna().sum())} verdict(s) differ in the other scoring mode than {modes}"
            )
        if parts:
            note = "; ".join(parts)
            notes[(str(m), str(b), str(c))] = note
            warnings.append(f"model {m}, benchmark {b}, condition {c}: {note}")
    return notes


def _study_rows(scored: pd.DataFrame, run: _Run, warnings: list[str]) -> pd.DataFrame:
    """The scored columns a study reads, of its conditions and datasets (text as text);
    a dataset with perturbed rows that is not the study's is left out with a warning."""
    lacking = [c for c in SCORED_REQUIRED if c not in scored.columns]
    if lacking:
        raise ValueError(
            f"scored rows lack the column(s) {', '.join(lacking)}; expected the columns "
            "of vlmrobust.core.scored.SCORED_COLUMNS (a scored CSV)"
        )
    optional = [c for c in ("prompt_setting", "error", *SCORING_COLUMNS) if c in scored.columns]
    cols = list(SCORED_REQUIRED) + optional
    df = scored.loc[:, cols].copy()
    for c in ("variant_id", "sample_id", "dataset", "condition", "prompt", "model"):
        df[c] = text_column(df[c])
    df = df[df["condition"].isin(run.conditions)]
    stray = sorted(set(df.loc[df["condition"].isin(run.perturbed), "dataset"]) - set(run.datasets))
    if stray:
        warnings.append(
            f"dataset(s) {', '.join(stray)} have scored rows under a perturbed condition "
            "but are not among the study's datasets (spec['datasets']); left out"
        )
    return df[df["dataset"].isin(list(run.datasets))].copy()


def _reject_first(rows: pd.DataFrame, bad: pd.Series, problem: Callable[[pd.Series], str]) -> None:
    """Raise a ValueError saying ``problem`` of the first bad row, when there is one."""
    if bad.any():
        raise ValueError(problem(rows[bad].iloc[0]))


def _scored_row(r: pd.Series) -> str:
    """A scored row, named for an error message."""
    return (
        f"scored row of model {r['model']!r}, dataset {r['dataset']!r}, condition "
        f"{r['condition']!r}, variant {r['variant_id']!r}"
    )


def _check_numbers(df: pd.DataFrame) -> None:
    """Every ``correct`` is 0 or 1 and every ``score`` a number (else a ValueError)."""
    correct = pd.to_numeric(df["correct"], errors="coerce")
    bad = correct.isna() | ~correct.isin([0, 1])
    _reject_first(
        df,
        bad,
        lambda r: (
            f"{_scored_row(r)}: correct = {r['correct']!r} is not 0 or 1 "
            f"({int(bad.sum())} such rows)"
        ),
    )
    score = pd.to_numeric(df["score"], errors="coerce")
    _reject_first(
        df, score.isna(), lambda r: f"{_scored_row(r)}: score = {r['score']!r} is not a number"
    )


def _prompt_settings(df: pd.DataFrame, run: _Run, warnings: list[str]) -> pd.Series:
    """The prompt setting of every row from its prompt: a configured setting, else the
    dataset's default one; a dataset without a default reports each other prompt as
    a benchmark of its own (with a warning, unless the files give the setting)."""
    setting = df["prompt"].copy()
    for name, ds in run.datasets.items():
        sel = df["dataset"] == name
        if not sel.any():
            continue
        p = df.loc[sel, "prompt"]
        known = p.isin(ds.configured)
        if DEFAULT_PROMPT in ds.settings:
            setting.loc[sel] = p.where(known, DEFAULT_PROMPT)
        else:
            unknown = sorted(set(p[~known]))
            if unknown and "prompt_setting" not in df:
                warnings.append(
                    f"dataset {name}: scored rows with prompt(s) {', '.join(unknown)} that "
                    f"are not among its prompt settings {ds.settings}; each is reported "
                    "as a benchmark of its own"
                )
    return setting


def _benchmarks(df: pd.DataFrame, run: _Run, warnings: list[str], from_files: bool) -> pd.Series:
    """The benchmark of every row (sets ``run.benches``): a dataset's expected settings,
    then any other observed one; ``from_files``: the settings came with the scored
    files, and an unconfigured one is a warning."""
    run.benches = {}
    benchmark = pd.Series("", index=df.index, dtype=object)
    for name, ds in run.datasets.items():
        sel = df["dataset"] == name
        observed = [str(x) for x in pd.unique(df.loc[sel, "setting"])]
        extra = [s for s in observed if s not in ds.settings]
        if extra and from_files:
            warnings.append(
                f"dataset {name}: scored files of prompt setting(s) {', '.join(extra)}, "
                f"not among its configured settings {ds.settings}; reported as benchmarks "
                "of their own"
            )
        settings = ds.settings + extra
        names = {}
        for st in settings:
            names[st] = name if len(settings) == 1 else f"{name}:{st}"
            run.benches[names[st]] = _Bench(names[st], name, st, ds.group)
        benchmark.loc[sel] = df.loc[sel, "setting"].map(names)
    return benchmark.astype(str)


def _check_unique(df: pd.DataFrame, run: _Run) -> None:
    """No scored row twice, and one clean variant per sample (else a ValueError)."""
    dup = df.duplicated(["model", "dataset", "setting", "condition", "variant_id", "draw"])
    _reject_first(
        df,
        dup,
        lambda r: (
            f"{int(dup.sum())} duplicated scored row(s), e.g. model {r['model']!r}, "
            f"benchmark {r['benchmark']!r}, condition {r['condition']!r}, variant "
            f"{r['variant_id']!r}, draw {r['draw']}: was a scored file read twice?"
        ),
    )
    clean = df[df["condition"] == run.clean]
    dup = clean.duplicated(["model", "benchmark", "sample_id", "draw"])
    _reject_first(
        clean,
        dup,
        lambda r: (
            f"model {r['model']!r}, benchmark {r['benchmark']!r}: sample "
            f"{r['sample_id']!r} has several clean rows for draw {r['draw']} (the clean "
            "condition must have one variant per sample)"
        ),
    )


def failed_note(n: int) -> str:
    return f"{n} failed request(s) excluded"


def drop_failed_requests(
    df: pd.DataFrame, failed: dict[tuple[str, str, str], int], warnings: list[str]
) -> pd.DataFrame:
    """The rows whose request failed after every retry (``error`` set) are no answers:
    they are removed from every metric, counted in ``failed`` by (model, benchmark,
    condition) and named in ``warnings``."""
    if "error" not in df.columns:
        return df
    bad = text_column(df["error"]) != ""
    if bad.any():
        key = "benchmark" if "benchmark" in df.columns else "dataset"
        counts = df[bad].groupby(["model", key, "condition"], sort=True).size()
        for (m, b, c), n in counts.items():
            failed[(str(m), str(b), str(c))] = int(n)
            warnings.append(
                f"model {m}, benchmark {b}, condition {c}: {failed_note(int(n))} from "
                "accuracy and every paired metric (scoring.on_request_error)"
            )
    return df[~bad].drop(columns="error")


def _prepare_variants(variants: pd.DataFrame | None, run: _Run) -> pd.DataFrame:
    if variants is None or len(variants.columns) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in VARIANT_COLUMNS})
    lacking = [c for c in VARIANT_COLUMNS if c not in variants.columns]
    if lacking:
        raise ValueError(
            f"variant rows lack the column(s) {', '.join(lacking)}; expected "
            f"{', '.join(VARIANT_COLUMNS)} (params flattened; see read_inputs)"
        )
    v = variants.loc[:, list(VARIANT_COLUMNS)].copy()
    for c in ("variant_id", "dataset", "condition", "method"):
        v[c] = text_column(v[c])
    v["severity"] = pd.to_numeric(v["severity"], errors="coerce").astype(float)
    v = v[v["condition"].isin(run.perturbed)].drop_duplicates()
    dup = v.duplicated(["dataset", "condition", "variant_id"])
    if dup.any():
        r = v[dup].iloc[0]
        raise ValueError(
            f"variant {r['variant_id']!r} of dataset {r['dataset']!r}, condition "
            f"{r['condition']!r} appears with different parameters in the manifests"
        )
    return v


def _paired_units(
    df: pd.DataFrame, variants: pd.DataFrame, run: _Run, warnings: list[str], by_method: bool
) -> pd.DataFrame:
    """Perturbed rows with their manifest (method, severity) and paired clean correctness."""
    pert = df[df["condition"].isin(run.perturbed)]
    pert = pert.merge(variants, on=["dataset", "condition", "variant_id"], how="left")
    pert["method"] = pert["method"].fillna("")
    nomethod = pert[pert["method"] == ""]
    if len(nomethod) and by_method:
        for (d, c), n in nomethod.groupby(["dataset", "condition"]).size().items():
            warnings.append(
                f"dataset {d}, condition {c}: {n} scored row(s) whose variant is not in the "
                "manifest (no method/severity); left out of RR by method x severity"
            )
    clean = df.loc[
        df["condition"] == run.clean, ["model", "benchmark", "sample_id", "draw", "correct"]
    ].rename(columns={"correct": "clean_correct"})
    paired = pert.merge(clean, on=["model", "benchmark", "sample_id", "draw"], how="left")
    lonely = paired[paired["clean_correct"].isna()]
    if len(lonely):
        for (m, b, c), n in lonely.groupby(["model", "benchmark", "condition"]).size().items():
            warnings.append(
                f"model {m}, benchmark {b}, condition {c}: {n} perturbed unit(s) without a "
                "clean row of the same sample and draw; left out of retention, pair "
                "statistics and RR by method x severity"
            )
    return paired


# --------------------------------------------------------------------------- rows


def metric_row(metric: str, **kw: Any) -> dict[str, Any]:
    """One tidy metrics row: text columns "", numbers NaN, n 0, then ``kw``."""
    row: dict[str, Any] = {c: "" for c in _TEXT_COLUMNS}
    row.update({c: math.nan for c in FLOAT_COLUMNS})
    row["n"] = 0
    row["metric"] = metric
    row.update(kw)
    return row


def _ratio(num: float, den: float) -> float:
    if math.isnan(num) or math.isnan(den) or den == 0:
        return math.nan
    return num / den


def join_notes(*notes: str) -> str:
    """The distinct non-empty notes, in order, joined by "; "."""
    return "; ".join(n for n in dict.fromkeys(notes) if n)


# --------------------------------------------------------------------------- bootstrap


def bootstrap_gap_ci(
    k: Sequence[float] | np.ndarray,
    d: Sequence[float] | np.ndarray,
    resamples: int,
    seed: int,
    level: float,
) -> tuple[float, float]:
    """Percentile interval of sum(w d) / sum(w k) under resampling of the samples.

    ``k[s]`` = units of sample s (> 0), ``d[s]`` = the sum over its units of the paired
    difference (base retained - reasoning retained). Each of ``resamples`` resamples
    draws len(k) samples with replacement (index arrays from
    ``numpy.random.default_rng(seed)``, in chunks that bound memory); the interval is
    the ((1 - level) / 2, (1 + level) / 2) quantiles of the resampled statistics.
    No samples -> (NaN, NaN).
    """
    kk = np.asarray(k, dtype=float)
    dd = np.asarray(d, dtype=float)
    n = kk.size
    if n == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    chunk = max(1, min(resamples, _BOOT_CELLS // n))
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        idx = rng.integers(0, n, size=(m, n))
        stats[start : start + m] = dd[idx].sum(axis=1) / kk[idx].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


# --------------------------------------------------------------------------- main


def perturbation_metrics(
    scored: pd.DataFrame,
    variants: pd.DataFrame | None,
    spec: Mapping[str, Any],
    *,
    by_method: bool = True,
) -> tuple[pd.DataFrame, list[str]]:
    """The metrics as a tidy table (:data:`METRIC_COLUMNS`) and a list of warnings.

    ``scored``: the concatenated scored CSVs of the run (optionally with a
    ``prompt_setting`` column, see :func:`read_inputs`); ``variants``: the perturbed
    conditions' manifests (variant_id, dataset, condition, method, severity); ``spec``:
    ``models`` (id -> registry entry: family, role, base), optional ``model_order``,
    ``datasets`` (name -> group, prompts, optional models / conditions),
    ``clean_condition``, ``perturbed_conditions``, ``bootstrap`` (resamples, seed,
    level). ``by_method=False``: the perturbed conditions have no method x severity
    (e.g. one edited image per sample): ``variants`` may be None, no
    ``*_method_severity`` row is made and no variant is missed from a manifest.
    Definitions: the module docstring.
    """
    warnings: list[str] = []
    run = _parse_spec(spec, scored)
    df = _prepare_scored(scored, run, warnings)
    var = _prepare_variants(variants, run)
    paired = _paired_units(df, var, run, warnings, by_method=by_method)

    seen = [str(m) for m in pd.unique(df["model"])]
    extra = [m for m in seen if m not in run.models]
    if extra:
        warnings.append(
            f"model(s) {', '.join(extra)} have scored rows but are not among the run's "
            "models (spec['models']); reported without family and role"
        )
    order = run.order + sorted(extra)
    rank = {m: i for i, m in enumerate(order)}
    bench_rank = {b: i for i, b in enumerate(run.benches)}
    cond_rank = {c: i for i, c in enumerate(run.conditions)}

    rows: list[dict[str, Any]] = []
    acc = _accuracy_rows(df, run, order, rank, bench_rank, cond_rank, rows)
    rr = _rr_rows(acc, paired, run, order, rows, warnings)
    _missing_rows(acc, run, order, rows, warnings)
    _group_rows(acc, run, order, rows, warnings)
    _pair_rows(paired, run, order, rows, warnings)
    _fingerprint_rows(rr, run, order, rows)
    _method_rows(paired, run, rank, rows)

    out = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    for c in _TEXT_COLUMNS:
        out[c] = out[c].astype(str)
    for c in FLOAT_COLUMNS:
        out[c] = out[c].astype(float)
    out["n"] = out["n"].astype(np.int64)
    return out, list(dict.fromkeys(warnings))


AccKey = tuple[str, str, str]  # model, benchmark, condition


def _accuracy_rows(df, run, order, rank, bench_rank, cond_rank, rows) -> dict[AccKey, tuple]:
    """``accuracy`` and ``mean_score`` rows; returns {(model, bench, cond): (acc, score, n)}."""
    g = df.groupby(["model", "benchmark", "condition"], sort=False).agg(
        acc=("correct", "mean"), score=("score", "mean"), n=("correct", "size")
    )
    keys = sorted(
        g.index, key=lambda k: (rank.get(k[0], 1 << 30), bench_rank[k[1]], cond_rank[k[2]])
    )
    acc: dict[AccKey, tuple[float, float, int]] = {}
    for key in keys:
        a, s, n = g.loc[key]
        acc[key] = (float(a), float(s), int(n))
    for metric, pos in (("accuracy", 0), ("mean_score", 1)):
        for m, b, c in keys:
            bench = run.benches[b]
            rows.append(
                metric_row(
                    metric,
                    model=m,
                    **run.info(m),
                    benchmark=b,
                    group=bench.group,
                    prompt=bench.setting,
                    condition=c,
                    value=acc[(m, b, c)][pos],
                    n=acc[(m, b, c)][2],
                    note=join_notes(
                        failed_note(run.failed[(m, b, c)]) if (m, b, c) in run.failed else "",
                        run.scoring.get((m, b, c), ""),
                    ),
                )
            )
    return acc


def _rr_rows(acc, paired, run, order, rows, warnings) -> dict[AccKey, float]:
    """``rr`` and ``retention`` per model x benchmark x perturbed condition."""
    rr: dict[AccKey, float] = {}
    kept = paired[paired["clean_correct"] == 1]
    ret = kept.groupby(["model", "benchmark", "condition"]).agg(
        value=("correct", "mean"), n=("correct", "size")
    )
    has_pairs = set(
        paired.loc[paired["clean_correct"].notna(), ["model", "benchmark", "condition"]].itertuples(
            index=False, name=None
        )
    )
    rr_rows, ret_rows = [], []
    for m in order:
        for b, bench in run.benches.items():
            clean = acc.get((m, b, run.clean))
            for c in run.perturbed:
                pert = acc.get((m, b, c))
                common = dict(
                    model=m,
                    **run.info(m),
                    benchmark=b,
                    group=bench.group,
                    prompt=bench.setting,
                    condition=c,
                )
                if clean is not None and pert is not None:
                    note = ""
                    if clean[0] == 0:
                        note = NOTE_ZERO_CLEAN
                        warnings.append(
                            f"model {m}, benchmark {b}: clean accuracy is 0, so RR under "
                            f"{c} is undefined (NaN)"
                        )
                    value = _ratio(pert[0], clean[0])
                    rr[(m, b, c)] = value
                    rr_rows.append(metric_row("rr", **common, value=value, n=pert[2], note=note))
                if (m, b, c) in has_pairs:
                    if (m, b, c) in ret.index:
                        v, n = ret.loc[(m, b, c)]
                        ret_rows.append(metric_row("retention", **common, value=float(v), n=int(n)))
                    else:
                        ret_rows.append(metric_row("retention", **common, note=NOTE_NO_RETAIN))
    rows.extend(rr_rows)
    rows.extend(ret_rows)
    return rr


def _missing_rows(acc, run, order, rows, warnings) -> None:
    for m in order:
        lost: list[str] = []
        for d in run.datasets:
            if m not in run.expected_models(d):
                continue
            conds = run.expected_conditions(d)
            for s in run.datasets[d].settings:
                b = next(x.name for x in run.benches.values() if x.dataset == d and x.setting == s)
                absent = [c for c in conds if (m, b, c) not in acc]
                if not absent:
                    continue
                common = dict(
                    model=m, **run.info(m), benchmark=b, group=run.benches[b].group, prompt=s
                )
                if len(absent) == len(conds) and not any((m, b, c) in run.failed for c in absent):
                    rows.append(metric_row("missing", **common, note=NOTE_NO_OUTPUTS))
                    lost.append(b)
                else:
                    for c in absent:
                        why = NOTE_NO_OUTPUTS
                        if (m, b, c) in run.failed:
                            why = f"every request failed ({failed_note(run.failed[(m, b, c)])})"
                        rows.append(metric_row("missing", **common, condition=c, note=why))
                    lost.append(f"{b} ({', '.join(absent)})")
        if lost:
            warnings.append(
                f"model {m}: no scored outputs for {', '.join(lost)}; group aggregates are "
                "computed over the benchmarks that exist and say which are missing"
            )


def _group_note(missing: list[str], any_used: bool) -> str:
    return join_notes(
        "" if any_used else NOTE_NO_OUTPUTS,
        f"missing benchmarks: {', '.join(dict.fromkeys(missing))}" if missing else "",
    )


def _group_rows(acc, run, order, rows, warnings) -> None:
    groups = list(dict.fromkeys(ds.group for ds in run.datasets.values() if ds.group))
    for m in order:
        for g in [*groups, ALL]:
            dsets = [d for d in run.datasets if g == ALL or run.datasets[d].group == g]
            per_cond: dict[str, tuple[float, list[str], list[str]]] = {}
            for c in run.conditions:
                values, used, missing = [], [], []
                for d in dsets:
                    expected = m in run.expected_models(d) and c in run.expected_conditions(d)
                    accs = []
                    for b in run.benches_of(d):
                        if (m, b.name, c) in acc:
                            accs.append(acc[(m, b.name, c)][0])
                        elif expected and b.setting in run.datasets[d].settings:
                            missing.append(b.name)
                    if accs:
                        values.append(float(np.mean(accs)))
                        used.append(d)
                value = float(np.mean(values)) if values else math.nan
                per_cond[c] = (value, used, missing)
            if not any(per_cond[c][1] or per_cond[c][2] for c in run.conditions):
                continue  # the model is not part of this group at all
            common = dict(model=m, **run.info(m), benchmark=g, group=g)
            for c in run.conditions:
                value, used, missing = per_cond[c]
                rows.append(
                    metric_row(
                        "accuracy",
                        **common,
                        condition=c,
                        value=value,
                        n=len(used),
                        note=_group_note(missing, bool(used)),
                    )
                )
            cval, cused, cmiss = per_cond[run.clean]
            for c in run.perturbed:
                pval, pused, pmiss = per_cond[c]
                note = _group_note(cmiss + pmiss, bool(cused and pused))
                if cval == 0:
                    note = join_notes(NOTE_ZERO_CLEAN, note)
                    warnings.append(
                        f"model {m}, group {g}: clean accuracy is 0, so RR under {c} is "
                        "undefined (NaN)"
                    )
                rows.append(
                    metric_row(
                        "rr",
                        **common,
                        condition=c,
                        value=_ratio(pval, cval),
                        n=len(set(cused) | set(pused)),
                        note=note,
                    )
                )


def _pair_rows(paired, run, order, rows, warnings) -> None:
    """The pair statistics of every registry pair x perturbed condition, per benchmark
    both models answered and over all of them."""
    pairs = registry_pairs(run.models, order)
    if not pairs:
        return
    units = paired[paired["clean_correct"].notna()]
    for r, b in pairs:
        info = dict(model=r, base_model=b, family=run.info(r)["family"], role=run.info(r)["role"])
        for c in run.perturbed:
            both, present = _pair_units(units, (r, b), c, run, warnings)
            if not present:
                continue
            cb = both["clean_correct_b"].to_numpy(dtype=bool)
            cr = both["clean_correct_r"].to_numpy(dtype=bool)
            ab = both["correct_b"].to_numpy(dtype=bool)
            ar = both["correct_r"].to_numpy(dtype=bool)
            cluster = pd.factorize(
                both["dataset"].astype(str) + "\x1f" + both["sample_id"].astype(str)
            )[0]
            bench = both["benchmark"].to_numpy()
            for x in [*present, ALL]:
                sel = np.ones(len(both), dtype=bool) if x == ALL else bench == x
                stats = _pair_stats(cb[sel], cr[sel], ab[sel], ar[sel], cluster[sel], run)
                where = (
                    dict(benchmark=ALL, group=ALL)
                    if x == ALL
                    else dict(
                        benchmark=x, group=run.benches[x].group, prompt=run.benches[x].setting
                    )
                )
                if stats["pair_n"] == 0:
                    warnings.append(
                        f"pair {b} -> {r}, benchmark {x}, condition {c}: {NOTE_NO_SHARED}; "
                        "agreement and retention gap are NaN"
                    )
                rows.extend(_pair_stat_rows(stats, dict(**info, **where, condition=c)))


def _pair_units(
    units: pd.DataFrame, pair: tuple[str, str], c: str, run: _Run, warnings: list[str]
) -> tuple[pd.DataFrame, list[str]]:
    """The units a (reasoning, base) pair both answered under condition ``c`` (columns
    suffixed ``_b`` / ``_r``) and the benchmarks both answered, in run order; the
    units only one of them answered are left out with a warning."""
    r, b = pair
    cols = [*_UNIT, "clean_correct", "correct"]
    ub = units.loc[(units["model"] == b) & (units["condition"] == c), cols]
    ur = units.loc[(units["model"] == r) & (units["condition"] == c), cols]
    # benchmarks both models answered; one that only one has is a `missing` row
    present = [
        x for x in run.benches if (ub["benchmark"] == x).any() and (ur["benchmark"] == x).any()
    ]
    if not present:
        return ub.iloc[0:0], present
    ub = ub[ub["benchmark"].isin(present)]
    ur = ur[ur["benchmark"].isin(present)]
    both = ub.merge(ur, on=_UNIT, how="outer", suffixes=("_b", "_r"), indicator=True)
    single = both["_merge"] != "both"
    if single.any():
        for bench, n in both[single].groupby("benchmark").size().items():
            warnings.append(
                f"pair {b} -> {r}, benchmark {bench}, condition {c}: {n} unit(s) "
                "answered by only one of the two models; left out of the pair "
                "statistics"
            )
    return both[~single], present


def _pair_stat_rows(stats: Mapping[str, Any], common: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``pair_n``, ``agreement``, ``retention_gap`` and ``error_jaccard`` rows of
    :func:`_pair_stats`' values."""
    n = stats["pair_n"]
    shared_note = NOTE_NO_SHARED if n == 0 else ""
    return [
        metric_row("pair_n", **common, value=float(n), n=n, note=shared_note),
        metric_row("agreement", **common, value=stats["agreement"], n=n, note=shared_note),
        metric_row(
            "retention_gap",
            **common,
            value=stats["gap"],
            ci_low=stats["ci"][0],
            ci_high=stats["ci"][1],
            n=n,
            note=shared_note,
        ),
        metric_row(
            "error_jaccard",
            **common,
            value=stats["jaccard"],
            n=stats["union"],
            note="" if stats["union"] else NOTE_NO_ERRORS,
        ),
    ]


def _pair_stats(cb, cr, ab, ar, cluster, run: _Run) -> dict[str, Any]:
    s = cb & cr
    n = int(s.sum())
    eb = cb & ~ab
    er = cr & ~ar
    union = int((eb | er).sum())
    inter = int((eb & er).sum())
    out: dict[str, Any] = {
        "pair_n": n,
        "union": union,
        "jaccard": inter / union if union else math.nan,
        "agreement": math.nan,
        "gap": math.nan,
        "ci": (math.nan, math.nan),
    }
    if n:
        diff = ab[s].astype(np.int64) - ar[s].astype(np.int64)
        out["agreement"] = float((ab[s] == ar[s]).mean())
        out["gap"] = float(diff.mean())
        _, inv = np.unique(cluster[s], return_inverse=True)
        k = np.bincount(inv)
        d = np.bincount(inv, weights=diff)
        out["ci"] = bootstrap_gap_ci(k, d, run.resamples, run.seed, run.level)
    return out


def _fingerprint_rows(rr, run, order, rows) -> None:
    families: dict[str, list[str]] = {}
    for m in order:
        fam = run.info(m)["family"]
        if fam:
            families.setdefault(fam, []).append(m)
    for c in run.perturbed:
        for fam, members in families.items():
            for first, second in combinations(members, 2):
                if run.info(second)["role"] == "base" and run.info(first)["role"] != "base":
                    first, second = second, first
                x, y = [], []
                for b in run.benches:
                    u, v = rr.get((first, b, c), math.nan), rr.get((second, b, c), math.nan)
                    if np.isfinite(u) and np.isfinite(v):
                        x.append(u)
                        y.append(v)
                note, value = "", math.nan
                if len(x) < 3:
                    note = f"fewer than 3 benchmarks with a finite RR for both models ({len(x)})"
                elif np.ptp(x) == 0 or np.ptp(y) == 0:
                    note = "RR is constant across benchmarks; correlation undefined"
                else:
                    value = float(np.corrcoef(x, y)[0, 1])
                rows.append(
                    metric_row(
                        "rr_fingerprint_corr",
                        model=second,
                        base_model=first,
                        family=fam,
                        role=run.info(second)["role"],
                        benchmark=ALL,
                        group=ALL,
                        condition=c,
                        value=value,
                        n=len(x),
                        note=note,
                    )
                )


def _method_rows(paired, run, rank, rows) -> None:
    units = paired[paired["clean_correct"].notna() & (paired["method"] != "")]
    if units.empty:
        return
    g = (
        units.groupby(["model", "condition", "method", "severity"], dropna=False)
        .agg(acc=("correct", "mean"), clean=("clean_correct", "mean"), n=("correct", "size"))
        .reset_index()
    )
    cond_rank = {c: i for i, c in enumerate(run.perturbed)}
    g["_r"] = [rank.get(m, 1 << 30) for m in g["model"]]
    g["_c"] = [cond_rank[c] for c in g["condition"]]
    g["_s"] = g["severity"].fillna(-1.0)
    g = g.sort_values(["_r", "model", "_c", "method", "_s"], kind="stable")
    out_acc, out_rr = [], []
    for m, c, method, sev, a, cl, n in g[
        ["model", "condition", "method", "severity", "acc", "clean", "n"]
    ].itertuples(index=False, name=None):
        common = dict(
            model=m,
            **run.info(m),
            benchmark=ALL,
            group=ALL,
            condition=c,
            method=method,
            severity=float(sev),
            n=int(n),
        )
        out_acc.append(metric_row("acc_method_severity", **common, value=float(a)))
        out_rr.append(
            metric_row(
                "rr_method_severity",
                **common,
                value=_ratio(float(a), float(cl)),
                note=NOTE_ZERO_CLEAN if cl == 0 else "",
            )
        )
    rows.extend(out_acc)
    rows.extend(out_rr)


# --------------------------------------------------------------------------- files


def read_inputs(
    scored_paths: Iterable[str | os.PathLike], manifest_paths: Iterable[str | os.PathLike]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the scored CSVs and variant manifests of a run.

    Scored rows keep their text as written (empty cells -> ``""``; ``correct``/``draw``
    int, ``score`` float) and get a ``prompt_setting`` column: the file's stem (scored
    files are ``results/scored/<model>/<dataset>/<condition>/<setting>.csv``). Variant
    rows: variant_id, sample_id, dataset, condition, method, severity (from ``params``;
    severity NaN for blank).
    """
    frames = []
    for p in scored_paths:
        f = pd.read_csv(p, dtype=str, keep_default_na=False)
        lacking = [c for c in SCORED_REQUIRED if c not in f.columns]
        if lacking:
            raise ValueError(f"{p}: not a scored CSV (no column(s) {', '.join(lacking)})")
        for col, kind in SCORED_NUMBERS.items():
            num = pd.to_numeric(f[col].replace("", "0" if col == "draw" else None), errors="coerce")
            if num.isna().any():
                line = int(np.flatnonzero(num.isna().to_numpy())[0]) + 2
                raise ValueError(f"{p}:{line}: {col} = {f[col].iloc[line - 2]!r} is not a number")
            f[col] = num.astype(kind)
        f["prompt_setting"] = Path(p).stem
        frames.append(f)
    if frames:
        scored = pd.concat(frames, ignore_index=True)
    else:
        scored = pd.DataFrame(
            {c: pd.Series(dtype=object) for c in [*SCORED_REQUIRED, "prompt_setting"]}
        )

    vrows = []
    for p in manifest_paths:
        for rec in read_jsonl(p):
            params = rec.get("params") or {}
            sev = params.get("severity")
            vrows.append(
                {
                    "variant_id": str(rec.get("variant_id", "")),
                    "sample_id": str(rec.get("sample_id", "")),
                    "dataset": str(rec.get("dataset", "")),
                    "condition": str(rec.get("condition", "")),
                    "method": str(params.get("method") or ""),
                    "severity": math.nan if sev is None else float(sev),
                }
            )
    variants = pd.DataFrame(
        vrows, columns=["variant_id", "sample_id", "dataset", "condition", "method", "severity"]
    )
    variants["severity"] = variants["severity"].astype(float)
    return scored, variants


def write_metrics(df: pd.DataFrame, path: str | os.PathLike, extra: Sequence[str] = ()) -> None:
    """Write the tidy table as CSV atomically (NaN and not-applicable text -> empty cell).
    ``extra`` are a study's own columns after :data:`METRIC_COLUMNS` (the Idis study's
    distractor kind, semantics, count and response rank)."""
    columns = [*METRIC_COLUMNS, *extra]
    lacking = [c for c in columns if c not in df.columns]
    if lacking:
        raise ValueError(f"not a metrics table: no column(s) {', '.join(lacking)}")
    with atomic_write(path, "w", encoding="utf-8", newline="") as fh:
        df.loc[:, columns].to_csv(fh, index=False, na_rep="", lineterminator="\n")


def read_metrics(path: str | os.PathLike) -> pd.DataFrame:
    """Read a table written by :func:`write_metrics` back (text ``""``, numbers NaN;
    a study's extra columns stay text)."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for c in FLOAT_COLUMNS:
        df[c] = pd.to_numeric(df[c].replace("", None), errors="coerce").astype(float)
    df["n"] = pd.to_numeric(df["n"]).astype(np.int64)
    return df

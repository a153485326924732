"""Metrics of the vision-corruption study against values computed by hand.

The main fixture: a base model ``base`` and its reasoning model ``reas`` (same family),
two datasets of 6 samples:

- ``ds1`` (group general, default prompt; rows record the builder name ``short``),
- ``ds2`` (group reasoning) under two prompt settings ``p1`` and ``p2``,

so three benchmarks: ``ds1``, ``ds2:p1``, ``ds2:p2``. One corruption per sample
(variant_id == sample_id). Correctness strings list samples 0..5.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from vlmrobust.core.records import Variant, write_variants
from vlmrobust.metrics import (
    METRIC_COLUMNS,
    bootstrap_gap_ci,
    compute_corruption_metrics,
    read_inputs,
    read_metrics,
    write_metrics,
)
from vlmrobust.score import write_scored

MODELS = {
    "base": {"name": "Base", "family": "fam", "role": "base", "base": None},
    "reas": {"name": "Reas", "family": "fam", "role": "reasoning", "base": "base"},
}

#                     (clean,    corrupt)
DATA = {
    ("base", "ds1", "short"): ("111100", "111001"),
    ("reas", "ds1", "short"): ("111010", "101010"),
    ("base", "ds2", "p1"): ("111100", "110000"),
    ("reas", "ds2", "p1"): ("111100", "100000"),
    ("base", "ds2", "p2"): ("001111", "001111"),
    ("reas", "ds2", "p2"): ("001111", "001110"),
}
# manifest: samples 0-2 fog severity 3; ds1 3-5 blank; ds2 3-5 jpeg_compression 1
METHODS = {
    "ds1": [("fog", 3)] * 3 + [("blank", None)] * 3,
    "ds2": [("fog", 3)] * 3 + [("jpeg_compression", 1)] * 3,
}
# base on ds1, clean: ANLS-like partial scores (mean 4.5 / 6 = 0.75)
SCORES = {("base", "ds1", "short", "clean"): [1, 1, 1, 1, 0.5, 0]}


def make_rows(data=DATA, scores=SCORES):
    rows = []
    for (model, dataset, prompt), pair in data.items():
        for condition, bits in zip(("clean", "corrupt"), pair, strict=True):
            score = scores.get((model, dataset, prompt, condition))
            for i, bit in enumerate(bits):
                sid = f"{dataset}-{i}"
                rows.append(
                    {
                        "key": f"{sid}#0",
                        "variant_id": sid,
                        "sample_id": sid,
                        "dataset": dataset,
                        "condition": condition,
                        "prompt": prompt,
                        "model": model,
                        "draw": 0,
                        "correct": int(bit),
                        "score": float(score[i] if score else int(bit)),
                    }
                )
    return pd.DataFrame(rows)


def make_variants(methods=METHODS):
    rows = []
    for dataset, items in methods.items():
        for i, (method, severity) in enumerate(items):
            sid = f"{dataset}-{i}"
            rows.append(
                {
                    "variant_id": sid,
                    "dataset": dataset,
                    "condition": "corrupt",
                    "method": method,
                    "severity": np.nan if severity is None else float(severity),
                }
            )
    return pd.DataFrame(rows)


def make_spec(resamples=200, seed=0, models=MODELS, datasets=None):
    return {
        "models": models,
        "datasets": datasets
        or {
            "ds1": {"group": "general", "prompts": ["default"]},
            "ds2": {"group": "reasoning", "prompts": ["p1", "p2"]},
        },
        "clean_condition": "clean",
        "perturbed_conditions": ["corrupt"],
        "bootstrap": {"resamples": resamples, "seed": seed, "level": 0.9},
    }


def pick(df, metric, **kw):
    """The one row of ``metric`` matching ``kw``."""
    sel = df["metric"] == metric
    for k, v in kw.items():
        sel &= df[k] == v
    got = df[sel]
    assert len(got) == 1, f"{metric} {kw}: {len(got)} rows\n{got}"
    return got.iloc[0]


@pytest.fixture(scope="module")
def result():
    return compute_corruption_metrics(make_rows(), make_variants(), make_spec())


def test_columns_and_types(result):
    df, warnings = result
    assert tuple(df.columns) == METRIC_COLUMNS
    assert warnings == []
    assert set(df["benchmark"]) >= {"ds1", "ds2:p1", "ds2:p2", "general", "reasoning", "all"}
    row = pick(df, "accuracy", model="base", benchmark="ds1", condition="clean")
    # not-applicable text is "", not-applicable numbers NaN
    assert row["method"] == "" and row["note"] == ""
    assert math.isnan(row["severity"]) and math.isnan(row["ci_low"])
    assert row["prompt"] == "default" and row["group"] == "general"
    assert row["family"] == "fam" and row["role"] == "base" and row["base_model"] == ""
    assert pick(df, "accuracy", model="reas", benchmark="ds1", condition="clean")["base_model"] == (
        "base"
    )
    assert pick(df, "accuracy", model="base", benchmark="ds2:p1", condition="clean")["prompt"] == (
        "p1"
    )


@pytest.mark.parametrize(
    "model, bench, condition, value",
    [
        ("base", "ds1", "clean", 4 / 6),  # 111100
        ("base", "ds1", "corrupt", 4 / 6),  # 111001
        ("reas", "ds1", "corrupt", 3 / 6),  # 101010
        ("base", "ds2:p1", "corrupt", 2 / 6),  # 110000
        ("reas", "ds2:p1", "corrupt", 1 / 6),  # 100000
        ("reas", "ds2:p2", "corrupt", 3 / 6),  # 001110
    ],
)
def test_accuracy(result, model, bench, condition, value):
    row = pick(result[0], "accuracy", model=model, benchmark=bench, condition=condition)
    assert row["value"] == pytest.approx(value)
    assert row["n"] == 6


def test_mean_score(result):
    df = result[0]
    # (1 + 1 + 1 + 1 + 0.5 + 0) / 6 = 0.75, while accuracy is 4/6
    assert pick(df, "mean_score", model="base", benchmark="ds1", condition="clean")[
        "value"
    ] == pytest.approx(0.75)
    assert pick(df, "mean_score", model="reas", benchmark="ds1", condition="clean")[
        "value"
    ] == pytest.approx(4 / 6)


@pytest.mark.parametrize(
    "model, bench, rr, retention",
    [
        # RR = (4/6) / (4/6); retention: clean-correct 0-3 -> corrupt 1,1,1,0 = 3/4
        ("base", "ds1", 1.0, 3 / 4),
        # RR = (3/6) / (4/6); clean-correct 0,1,2,4 -> corrupt 1,0,1,1 = 3/4
        ("reas", "ds1", 0.75, 3 / 4),
        # (2/6) / (4/6); clean-correct 0-3 -> 1,1,0,0
        ("base", "ds2:p1", 0.5, 2 / 4),
        # (1/6) / (4/6); 1,0,0,0
        ("reas", "ds2:p1", 0.25, 1 / 4),
        # (4/6) / (4/6); clean-correct 2-5 -> 1,1,1,1
        ("base", "ds2:p2", 1.0, 1.0),
        # (3/6) / (4/6); 1,1,1,0
        ("reas", "ds2:p2", 0.75, 3 / 4),
    ],
)
def test_rr_and_retention(result, model, bench, rr, retention):
    df = result[0]
    row = pick(df, "rr", model=model, benchmark=bench, condition="corrupt")
    assert row["value"] == pytest.approx(rr)
    ret = pick(df, "retention", model=model, benchmark=bench, condition="corrupt")
    assert ret["value"] == pytest.approx(retention)
    assert ret["n"] == 4  # every model has 4 clean-correct samples per benchmark


@pytest.mark.parametrize(
    "bench, n, agreement, gap, jaccard, union",
    [
        # S = {0,1,2}; base after 1,1,1, reas 1,0,1: agree on 0 and 2 -> 2/3;
        # gap = 3/3 - 2/3. E_b = {3}, E_r = {1}: 0 / 2
        ("ds1", 3, 2 / 3, 1 / 3, 0.0, 2),
        # S = {0..3}; base 1,1,0,0, reas 1,0,0,0 -> 3/4; gap 2/4 - 1/4.
        # E_b = {2,3}, E_r = {1,2,3}: 2 / 3
        ("ds2:p1", 4, 3 / 4, 1 / 4, 2 / 3, 3),
        # S = {2..5}; base 1,1,1,1, reas 1,1,1,0 -> 3/4; gap 4/4 - 3/4. E_b = {}, E_r = {5}
        ("ds2:p2", 4, 3 / 4, 1 / 4, 0.0, 1),
        # pooled: |S| = 3+4+4; agreement (2+3+3)/11; gap (1+1+1)/11;
        # E_b = {ds1:3, p1:2, p1:3}, E_r = {ds1:1, p1:1, p1:2, p1:3, p2:5}: 2 / 6
        ("all", 11, 8 / 11, 3 / 11, 1 / 3, 6),
    ],
)
def test_pair_statistics(result, bench, n, agreement, gap, jaccard, union):
    df = result[0]
    kw = dict(model="reas", base_model="base", benchmark=bench, condition="corrupt")
    assert pick(df, "pair_n", **kw)["value"] == n
    row = pick(df, "agreement", **kw)
    assert row["value"] == pytest.approx(agreement) and row["n"] == n
    row = pick(df, "retention_gap", **kw)
    assert row["value"] == pytest.approx(gap) and row["n"] == n
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    row = pick(df, "error_jaccard", **kw)
    assert row["value"] == pytest.approx(jaccard) and row["n"] == union


@pytest.mark.parametrize(
    "model, group, clean, corrupt, rr, n",
    [
        # general = ds1 only
        ("base", "general", 4 / 6, 4 / 6, 1.0, 1),
        ("reas", "general", 4 / 6, 3 / 6, 0.75, 1),
        # reasoning = ds2, its two prompts averaged first: corrupt (2/6 + 4/6) / 2
        ("base", "reasoning", 4 / 6, 1 / 2, 0.75, 1),
        ("reas", "reasoning", 4 / 6, 1 / 3, 0.5, 1),  # (1/6 + 3/6) / 2
        # all: ds1 and ds2 once each: corrupt (4/6 + 1/2) / 2 = 7/12 (a mean over the
        # three benchmarks would give 5/9); RR = (7/12) / (2/3) = 7/8
        ("base", "all", 2 / 3, 7 / 12, 7 / 8, 2),
        ("reas", "all", 2 / 3, 5 / 12, 5 / 8, 2),  # (3/6 + 1/3) / 2
    ],
)
def test_group_macro_averages(result, model, group, clean, corrupt, rr, n):
    df = result[0]
    kw = dict(model=model, benchmark=group, group=group)
    row = pick(df, "accuracy", condition="clean", **kw)
    assert row["value"] == pytest.approx(clean) and row["n"] == n and row["note"] == ""
    assert pick(df, "accuracy", condition="corrupt", **kw)["value"] == pytest.approx(corrupt)
    assert pick(df, "rr", condition="corrupt", **kw)["value"] == pytest.approx(rr)


def test_fingerprint_correlation(result):
    # RR_base = (1, 0.5, 1), RR_reas = (0.75, 0.25, 0.75) = RR_base - 0.25: perfectly
    # linear, Pearson r = 1
    row = pick(result[0], "rr_fingerprint_corr", condition="corrupt")
    assert row["base_model"] == "base" and row["model"] == "reas"
    assert row["value"] == pytest.approx(1.0)
    assert row["n"] == 3


def test_fingerprint_anticorrelated_and_too_few():
    # reas on ds2:p2 corrupt 000110 -> RR (2/6)/(4/6) = 0.5: RR_reas = (0.75, 0.25, 0.5)
    # against RR_base = (1, 0.5, 1): x - mean = (1/6, -1/3, 1/6), y - mean = (0.25, -0.25, 0)
    # r = (1/24 + 1/12) / sqrt((1/36 + 1/9 + 1/36) * (1/16 + 1/16)) = 0.125 / sqrt(1/48)
    data = dict(DATA)
    data[("reas", "ds2", "p2")] = ("001111", "000110")
    df, _ = compute_corruption_metrics(make_rows(data), make_variants(), make_spec())
    assert pick(df, "rr_fingerprint_corr", condition="corrupt")["value"] == pytest.approx(
        0.125 / math.sqrt(1 / 48)
    )
    # only two benchmarks -> NaN with a note
    two = {k: v for k, v in DATA.items() if k[2] != "p2"}
    spec = make_spec(
        datasets={
            "ds1": {"group": "general", "prompts": ["default"]},
            "ds2": {"group": "reasoning", "prompts": ["p1"]},
        }
    )
    df, _ = compute_corruption_metrics(make_rows(two), make_variants(), spec)
    row = pick(df, "rr_fingerprint_corr", condition="corrupt")
    assert math.isnan(row["value"]) and row["n"] == 2 and "fewer than 3" in row["note"]


@pytest.mark.parametrize(
    "model, method, severity, acc, rr, n",
    [
        # fog-3: ds1 0-2 (clean 111, corrupt 111), p1 0-2 (111, 110), p2 0-2 (001, 001)
        # acc = (3+2+1)/9, clean = (3+3+1)/9, RR = 6/7
        ("base", "fog", 3.0, 6 / 9, 6 / 7, 9),
        # reas: ds1 (111, 101), p1 (111, 100), p2 (001, 001): (2+1+1)/9 over 7/9
        ("reas", "fog", 3.0, 4 / 9, 4 / 7, 9),
        # blank: ds1 3-5 (clean 100, corrupt 001): 1/3 over 1/3
        ("base", "blank", math.nan, 1 / 3, 1.0, 3),
        # jpeg-1: p1 3-5 (100, 000), p2 3-5 (111, 111): 3/6 over 4/6
        ("base", "jpeg_compression", 1.0, 3 / 6, 3 / 4, 6),
    ],
)
def test_method_severity(result, model, method, severity, acc, rr, n):
    df = result[0]
    sel = (df["model"] == model) & (df["method"] == method)
    sel &= df["severity"].isna() if math.isnan(severity) else df["severity"] == severity
    got = df[sel].set_index("metric")
    assert got.loc["acc_method_severity", "value"] == pytest.approx(acc)
    assert got.loc["rr_method_severity", "value"] == pytest.approx(rr)
    assert got.loc["rr_method_severity", "n"] == n
    assert got.loc["rr_method_severity", "benchmark"] == "all"


def replicated(times):
    """The fixture's samples copied ``times`` times under new ids (same proportions)."""
    rows, variants = make_rows(), make_variants()
    out_r, out_v = [], []
    for t in range(times):
        r, v = rows.copy(), variants.copy()
        for frame, cols in ((r, ("variant_id", "sample_id")), (v, ("variant_id",))):
            for c in cols:
                frame[c] = frame[c] + f"-r{t}"
        out_r.append(r)
        out_v.append(v)
    return pd.concat(out_r, ignore_index=True), pd.concat(out_v, ignore_index=True)


def gap_row(df, bench="all"):
    return pick(df, "retention_gap", model="reas", benchmark=bench, condition="corrupt")


def test_bootstrap_reproducible_seeded_and_narrowing():
    rows, variants = replicated(20)
    a = gap_row(compute_corruption_metrics(rows, variants, make_spec(300, seed=0))[0])
    b = gap_row(compute_corruption_metrics(rows, variants, make_spec(300, seed=0))[0])
    c = gap_row(compute_corruption_metrics(rows, variants, make_spec(300, seed=1))[0])
    assert (a["ci_low"], a["ci_high"]) == (b["ci_low"], b["ci_high"])
    assert (a["ci_low"], a["ci_high"]) != (c["ci_low"], c["ci_high"])
    assert a["value"] == pytest.approx(3 / 11)  # same proportions, 20x the samples
    assert a["ci_low"] <= a["value"] <= a["ci_high"]
    small = gap_row(compute_corruption_metrics(make_rows(), make_variants(), make_spec(300))[0])
    assert small["ci_low"] <= small["value"] <= small["ci_high"]
    assert a["ci_high"] - a["ci_low"] < 0.5 * (small["ci_high"] - small["ci_low"])


def test_bootstrap_resamples_samples_not_units():
    # assignment `all`: 2 samples x 3 variants. Sample A: base keeps all 3, reas loses
    # all 3 (d = +3); sample B: both keep all 3 (d = 0). Gap = 3/6 = 0.5.
    # Resampling the 2 SAMPLES gives 0 (BB, p 1/4), 0.5 (p 1/2) or 1 (AA, p 1/4): the
    # 5% and 95% quantiles are exactly 0 and 1. Resampling the 6 units would give
    # gap 0 with p (1/2)^6 < 5%, so ci_low > 0.
    rows, variants = [], []
    for model, after in (("base", {"A": 1, "B": 1}), ("reas", {"A": 0, "B": 1})):
        for s in ("A", "B"):
            sid = f"dsa-{s}"
            base = dict(sample_id=sid, dataset="dsa", prompt="mcq", model=model, draw=0)
            rows.append(dict(base, variant_id=sid, condition="clean", correct=1, score=1.0))
            for method, sev in (("fog", 1), ("fog", 2), ("blank", None)):
                vid = f"{sid}__blank" if sev is None else f"{sid}__{method}-s{sev}"
                c = after[s]
                rows.append(dict(base, variant_id=vid, condition="corrupt", correct=c, score=c))
                if model == "base":
                    variants.append(
                        dict(
                            variant_id=vid,
                            dataset="dsa",
                            condition="corrupt",
                            method=method,
                            severity=np.nan if sev is None else float(sev),
                        )
                    )
    spec = make_spec(500, datasets={"dsa": {"group": "general", "prompts": ["default"]}})
    df, warnings = compute_corruption_metrics(pd.DataFrame(rows), pd.DataFrame(variants), spec)
    assert warnings == []
    row = gap_row(df, "dsa")
    assert row["value"] == pytest.approx(0.5) and row["n"] == 6
    assert (row["ci_low"], row["ci_high"]) == (0.0, 1.0)
    assert pick(df, "agreement", benchmark="dsa")["value"] == pytest.approx(0.5)
    # each variant is a unit paired with the same clean row: accuracy and retention
    assert pick(df, "accuracy", model="reas", benchmark="dsa", condition="corrupt")[
        "value"
    ] == pytest.approx(0.5)
    assert pick(df, "retention", model="reas", benchmark="dsa")["n"] == 6
    assert pick(df, "rr_method_severity", model="reas", method="fog", severity=2.0)[
        "value"
    ] == pytest.approx(0.5)


def test_bootstrap_helper():
    # k units per sample, d the per-sample sum of differences
    k = np.array([3, 3])
    d = np.array([3, 0])
    lo, hi = bootstrap_gap_ci(k, d, 1000, 0, 0.9)
    assert (lo, hi) == (0.0, 1.0)
    assert bootstrap_gap_ci(k, d, 50, 7, 0.9) == bootstrap_gap_ci(k, d, 50, 7, 0.9)
    assert all(math.isnan(x) for x in bootstrap_gap_ci([], [], 10, 0, 0.9))
    # a constant difference gives a degenerate interval at the point
    assert bootstrap_gap_ci([1, 2, 1], [1, 2, 1], 20, 0, 0.9) == (1.0, 1.0)


def test_draws_pair_by_draw():
    # two samples x two draws. clean: d0 = (1, 1), d1 = (1, 0); corrupt: d0 = (1, 0),
    # d1 = (0, 0). accuracy clean 3/4, corrupt 1/4, RR 1/3. Retention over the
    # clean-correct units (s0,d0), (s1,d0), (s0,d1) -> corrupt 1, 0, 0 = 1/3 (pairing
    # every draw with draw 0 would give 1/4).
    bits = {
        ("clean", 0): (1, 1),
        ("clean", 1): (1, 0),
        ("corrupt", 0): (1, 0),
        ("corrupt", 1): (0, 0),
    }
    rows = [
        dict(
            variant_id=f"dsd-{s}",
            sample_id=f"dsd-{s}",
            dataset="dsd",
            condition=cond,
            prompt="mcq",
            model="base",
            draw=draw,
            correct=v[s],
            score=float(v[s]),
        )
        for (cond, draw), v in bits.items()
        for s in (0, 1)
    ]
    spec = make_spec(datasets={"dsd": {"group": None, "prompts": []}})
    df, _ = compute_corruption_metrics(pd.DataFrame(rows), pd.DataFrame(), spec)
    assert pick(df, "accuracy", benchmark="dsd", condition="clean")["value"] == 0.75
    assert pick(df, "rr", benchmark="dsd")["value"] == pytest.approx(1 / 3)
    ret = pick(df, "retention", benchmark="dsd")
    assert ret["value"] == pytest.approx(1 / 3) and ret["n"] == 3
    # reas has no rows at all: reported missing, never dropped
    assert pick(df, "missing", model="reas", benchmark="dsd")["note"] == "no scored outputs"


def test_no_shared_clean_correct_samples():
    data = dict(DATA)
    data[("base", "ds1", "short")] = ("110000", "100000")
    data[("reas", "ds1", "short")] = ("001100", "001000")
    df, warnings = compute_corruption_metrics(make_rows(data), make_variants(), make_spec())
    kw = dict(model="reas", benchmark="ds1", condition="corrupt")
    assert pick(df, "pair_n", **kw)["value"] == 0
    for metric in ("agreement", "retention_gap"):
        row = pick(df, metric, **kw)
        assert math.isnan(row["value"]) and math.isnan(row["ci_low"])
        assert row["note"] == "no shared clean-correct samples"
    # the error sets still exist: E_b = {1}, E_r = {3}, disjoint -> 0
    assert pick(df, "error_jaccard", **kw)["value"] == 0.0
    assert any("ds1" in w and "no shared clean-correct samples" in w for w in warnings)
    # the pooled row still rests on the other benchmarks: 4 + 4
    assert pick(df, "pair_n", model="reas", benchmark="all")["value"] == 8


def test_zero_clean_accuracy():
    data = dict(DATA)
    data[("reas", "ds1", "short")] = ("000000", "010000")
    df, warnings = compute_corruption_metrics(make_rows(data), make_variants(), make_spec())
    row = pick(df, "rr", model="reas", benchmark="ds1", condition="corrupt")
    assert math.isnan(row["value"]) and row["note"] == "clean accuracy is 0"
    assert any("reas" in w and "ds1" in w and "clean accuracy is 0" in w for w in warnings)
    ret = pick(df, "retention", model="reas", benchmark="ds1")
    assert math.isnan(ret["value"]) and ret["n"] == 0
    # the general group is ds1 alone: its RR is NaN too, never inf
    assert math.isnan(pick(df, "rr", model="reas", benchmark="general")["value"])
    assert np.isfinite(df["value"].dropna()).all()
    # both error sets of ds1 are empty (reas never right on clean, base errs on 3):
    # E_b = {3}, E_r = {} -> 0 / 1
    assert pick(df, "error_jaccard", model="reas", benchmark="ds1")["value"] == 0.0


def test_both_error_sets_empty():
    data = dict(DATA)
    data[("base", "ds1", "short")] = ("111100", "111100")
    data[("reas", "ds1", "short")] = ("111010", "111010")
    df, _ = compute_corruption_metrics(make_rows(data), make_variants(), make_spec())
    row = pick(df, "error_jaccard", model="reas", benchmark="ds1")
    assert math.isnan(row["value"]) and row["n"] == 0
    assert row["note"] == "no perturbation-induced errors for either model"


def test_missing_benchmark():
    data = {k: v for k, v in DATA.items() if k != ("reas", "ds2", "p2")}
    df, warnings = compute_corruption_metrics(make_rows(data), make_variants(), make_spec())
    row = pick(df, "missing", model="reas", benchmark="ds2:p2")
    assert math.isnan(row["value"]) and row["note"] == "no scored outputs" and row["n"] == 0
    assert not (df["metric"] == "missing").sum() > 1
    # the group aggregate is computed over what exists (ds2 = p1 only) and says so
    row = pick(df, "accuracy", model="reas", benchmark="reasoning", condition="corrupt")
    assert row["value"] == pytest.approx(1 / 6) and "ds2:p2" in row["note"]
    row = pick(df, "rr", model="reas", benchmark="reasoning")
    assert row["value"] == pytest.approx(0.25) and "missing benchmarks: ds2:p2" in row["note"]
    assert "ds2:p2" in pick(df, "rr", model="reas", benchmark="all")["note"]
    # base is complete: no note
    assert pick(df, "rr", model="base", benchmark="reasoning")["note"] == ""
    assert any("reas" in w and "ds2:p2" in w for w in warnings)


def test_missing_one_condition():
    rows = make_rows()
    rows = rows[
        ~((rows["model"] == "base") & (rows["dataset"] == "ds1") & (rows["condition"] == "corrupt"))
    ]
    df, warnings = compute_corruption_metrics(rows, make_variants(), make_spec())
    row = pick(df, "missing", model="base", benchmark="ds1")
    assert row["condition"] == "corrupt"
    assert not ((df["metric"] == "rr") & (df["model"] == "base") & (df["benchmark"] == "ds1")).any()
    assert any("base" in w and "ds1 (corrupt)" in w for w in warnings)


def test_dataset_models_restrict_expectations():
    data = {k: v for k, v in DATA.items() if not (k[0] == "reas" and k[1] == "ds1")}
    spec = make_spec()
    spec["datasets"]["ds1"]["models"] = ["base"]
    df, warnings = compute_corruption_metrics(make_rows(data), make_variants(), spec)
    assert not (df["metric"] == "missing").any()
    assert warnings == []


def test_malformed_input_raises():
    rows = make_rows()
    with pytest.raises(ValueError, match="duplicated scored row"):
        compute_corruption_metrics(pd.concat([rows, rows]), make_variants(), make_spec())
    bad = rows.copy()
    bad.loc[0, "correct"] = 2
    with pytest.raises(ValueError, match="not 0 or 1"):
        compute_corruption_metrics(bad, make_variants(), make_spec())
    with pytest.raises(ValueError, match="score"):
        compute_corruption_metrics(rows.drop(columns="score"), make_variants(), make_spec())
    spec = make_spec()
    del spec["perturbed_conditions"]
    with pytest.raises(ValueError, match="perturbed_conditions"):
        compute_corruption_metrics(rows, make_variants(), spec)


def test_files_round_trip(tmp_path):
    rows, variants = make_rows(), make_variants()
    scored_paths = []
    for (model, dataset, condition), part in rows.groupby(["model", "dataset", "condition"]):
        for prompt, sub in part.groupby("prompt"):
            setting = "default" if dataset == "ds1" else prompt
            path = tmp_path / "scored" / model / dataset / condition / f"{setting}.csv"
            write_scored(path, sub.to_dict("records"))
            scored_paths.append(path)
    manifests = []
    for dataset, part in variants.groupby("dataset"):
        path = tmp_path / "variants" / dataset / "corrupt" / "manifest.jsonl"
        write_variants(
            path,
            [
                Variant(
                    variant_id=r.variant_id,
                    sample_id=r.variant_id,
                    dataset=dataset,
                    condition="corrupt",
                    perturbation="corruption",
                    images=[],
                    sha256=[],
                    question="q",
                    params={
                        "method": r.method,
                        "severity": None if math.isnan(r.severity) else int(r.severity),
                    },
                )
                for r in part.itertuples()
            ],
        )
        manifests.append(path)
    scored, var = read_inputs(scored_paths, manifests)
    assert set(scored["prompt_setting"]) == {"default", "p1", "p2"}
    df, warnings = compute_corruption_metrics(scored, var, make_spec())
    expected, _ = compute_corruption_metrics(rows, variants, make_spec())
    assert warnings == []
    pd.testing.assert_frame_equal(df, expected)

    out = tmp_path / "metrics" / "metrics.csv"
    write_metrics(df, out)
    back = read_metrics(out)
    assert list(back.columns) == list(METRIC_COLUMNS)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)


def test_a_failed_request_is_no_answer():
    """The issue's case: a model right on every answered request, one clean request
    failed after its retries. Counted as wrong it gave clean accuracy 75.0 and RR 133.3;
    excluded (and counted) it gives 100 / 100, with a note and a warning."""
    rows = []
    for condition, errors in (("clean", {3}), ("corrupt", set())):
        for i in range(4):
            sid = f"ds1-{i}"
            rows.append(
                {
                    "key": f"{sid}#0", "variant_id": sid, "sample_id": sid, "dataset": "ds1",
                    "condition": condition, "prompt": "short", "model": "base", "draw": 0,
                    "correct": 0 if i in errors else 1, "score": 0.0 if i in errors else 1.0,
                    "error": "HTTP 503 after 2 attempts" if i in errors else "",
                }
            )  # fmt: skip
    spec = make_spec(models={"base": MODELS["base"]}, datasets={"ds1": {"group": "general"}})
    metrics, warnings = compute_corruption_metrics(pd.DataFrame(rows), None, spec)
    clean = pick(metrics, "accuracy", model="base", benchmark="ds1", condition="clean")
    assert (clean["value"], clean["n"]) == (1.0, 3)
    assert clean["note"] == "1 failed request(s) excluded"
    rr = pick(metrics, "rr", model="base", benchmark="ds1", condition="corrupt")
    assert rr["value"] == 1.0
    assert (
        "model base, benchmark ds1, condition clean: 1 failed request(s) excluded from "
        "accuracy and every paired metric (scoring.on_request_error)"
    ) in warnings
    # the corrupted unit whose clean request failed has no clean row: out of retention
    retention = pick(metrics, "retention", model="base", benchmark="ds1", condition="corrupt")
    assert retention["n"] == 3

"""Distraction study: metrics, Tables 3-5 and Figures 5-6 on hand-made data.

One base→reasoning pair (qb → qr) and a closed model (gx) on seven Distract-Bench
samples s1..s7. s1..s6 are scored under clean, distracted and corrupt (the matched
samples of Table 4); s7 only under clean and distracted (Table 3 counts it, Table 4
does not); gx has no corrupt rows and no judgments.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from vlmrobust.metrics.corruption import compute_corruption_metrics
from vlmrobust.metrics.distraction import compute_distraction_metrics, read_judged
from vlmrobust.report.figures.distraction import (
    distraction_figure_names,
    distraction_figures,
    write_distraction_figures,
)
from vlmrobust.report.tables.distraction import distraction_table_names, write_distraction_tables

DS = "distractbench"
SAMPLES = ["s1", "s2", "s3", "s4", "s5", "s6", "s7"]
# correctness per sample, s1..s7 (corrupt: s1..s6)
CORRECT = {
    ("qb", "clean"): [1, 1, 1, 1, 1, 0, 1],
    ("qb", "distracted"): [1, 1, 1, 0, 0, 0, 1],
    ("qb", "corrupt"): [1, 1, 0, 1, 1, 1],
    ("qr", "clean"): [1, 1, 1, 1, 0, 1, 1],
    ("qr", "distracted"): [1, 0, 1, 0, 0, 0, 0],
    ("qr", "corrupt"): [1, 0, 0, 1, 0, 1],
    ("gx", "clean"): [1, 1, 1, 1, 1, 1, 1],
    ("gx", "distracted"): [1, 1, 1, 1, 1, 1, 0],
}
SPEC = {
    "models": {
        "qb": {"name": "Q-Base", "family": "qwen2.5-vl", "role": "base"},
        "qr": {"name": "Q-Reas", "family": "qwen2.5-vl", "role": "reasoning", "base": "qb"},
        "gx": {"name": "GPT-X", "family": "closed", "role": "closed"},
    },
    "model_order": ["qb", "qr", "gx"],
    "dataset": DS,
    "clean_condition": "clean",
    "distracted_condition": "distracted",
    "corruption_condition": "corrupt",
    "bootstrap": {"resamples": 300, "seed": 7, "level": 0.9},
}
# qb: r = yes on s1, s4, s5; s7 has no verdict (excluded)
# qr: r = yes on s2, s3, s4, s5, s7; plus a judged key without a scored row (excluded)
VERDICTS = {
    "qb": ["yes", "no", "no", "yes", "yes", "no", None],
    "qr": ["no", "yes", "yes", "yes", "yes", "no", "yes"],
}


def key(model: str, variant: str) -> str:
    return f"{model}|{variant}"


def make_scored(correct=CORRECT, dataset=DS) -> pd.DataFrame:
    rows = []
    for (model, cond), values in correct.items():
        for sample, value in zip(SAMPLES, values, strict=False):
            variant = sample if cond == "clean" else f"{sample}-{cond}"
            rows.append(
                dict(
                    key=key(model, variant),
                    variant_id=variant,
                    sample_id=sample,
                    dataset=dataset,
                    condition=cond,
                    prompt="open",
                    model=model,
                    draw=0,
                    correct=value,
                    score=float(value),
                )
            )
    return pd.DataFrame(rows)


def make_judged() -> dict[str, list[dict]]:
    judged = {
        m: [
            {"key": key(m, f"{s}-distracted"), "verdict": v}
            for s, v in zip(SAMPLES, verdicts, strict=True)
        ]
        for m, verdicts in VERDICTS.items()
    }
    judged["qr"].append({"key": key("qr", "zz-distracted"), "verdict": "yes"})
    return judged


@pytest.fixture(scope="module")
def computed():
    return compute_distraction_metrics(make_scored(), make_judged(), SPEC)


@pytest.fixture(scope="module")
def tables(computed, tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    paths = write_distraction_tables(computed[0], SPEC, out)
    assert sorted(p.name for p in paths) == sorted(
        f"{n}.{ext}" for n in distraction_table_names(SPEC) for ext in ("csv", "md", "tex")
    )
    return {
        n: pd.read_csv(out / f"{n}.csv", dtype=str, keep_default_na=False)
        for n in distraction_table_names(SPEC)
    }


def value(df, metric, model, condition, **kw) -> pd.Series:
    sel = (df["metric"] == metric) & (df["model"] == model) & (df["condition"] == condition)
    for col, v in kw.items():
        sel &= df[col] == v
    hit = df[sel]
    assert len(hit) == 1, (metric, model, condition, kw, len(hit))
    return hit.iloc[0]


# --------------------------------------------------------------------------- Table 3


def test_table3_numbers(tables):
    t = tables["table3"]
    assert list(t.columns) == [
        "Family",
        "Model",
        "Type",
        "N",
        "Clean Acc. (%)",
        "Distracted Acc. (%)",
        "Drop (pp)",
        "RR (%)",
    ]
    got = t.set_index("Model")
    # Q-Base: clean 6/7 = 85.71; distracted 4/7 = 57.14; drop 2/7 = 28.57 pp;
    #         RR = (4/7)/(6/7) = 4/6 = 66.67
    assert list(got.loc["Q-Base", ["Type", "N"]]) == ["Base", "7"]
    assert list(got.loc["Q-Base"].iloc[3:]) == ["85.7", "57.1", "28.6", "66.7"]
    # Q-Reas: clean 6/7 = 85.71; distracted 2/7 = 28.57; drop 4/7 = 57.14; RR 2/6 = 33.33
    assert list(got.loc["Q-Reas"].iloc[3:]) == ["85.7", "28.6", "57.1", "33.3"]
    # GPT-X: clean 7/7 = 100; distracted 6/7 = 85.71; drop 1/7 = 14.29; RR 6/7 = 85.71
    assert list(got.loc["GPT-X"].iloc[3:]) == ["100.0", "85.7", "14.3", "85.7"]
    assert got.loc["Q-Reas", "Type"] == "Reas."
    assert got.loc["GPT-X", "Type"] == "Closed-s."
    # grouped by family, base first
    assert list(t["Family"]) == ["Qwen2.5-VL family"] * 2 + ["Closed family"]


def test_drop_is_a_fraction(computed):
    m, _ = computed
    assert value(m, "drop_pp", "qb", "distracted")["value"] == pytest.approx(2 / 7)
    assert value(m, "rr", "qr", "distracted", group="")["value"] == pytest.approx(2 / 6)


# --------------------------------------------------------------------------- Table 4


def test_table4_numbers(tables):
    t = tables["table4"]
    assert list(t["Group"]) == ["Q-Base \u2192", ""]
    assert list(t["Pair"]) == ["Q-Reas", "Mean"]
    row = t.iloc[0]
    # matched samples s1..s6. Corrupt:
    #   RR qb = (5/6)/(5/6) = 1.0, RR qr = (3/6)/(5/6) = 0.6 -> gap +40.0
    #   S = both clean-correct = {s1..s4}; retained qb 1,1,0,1, qr 1,0,0,1
    #   agreement 3/4 = 75.0; retention gap (3 - 2)/4 = +25.0
    #   errors qb {s3}, qr {s2, s3} -> Jaccard 1/2 = .500
    assert row["Visual corruption: RR gap"] == "+40.0"
    assert row["Visual corruption: Agr. (%)"] == "75.0"
    assert row["Visual corruption: Ret. gap"] == "+25.0"
    assert row["Visual corruption: Err. Jac."] == ".500"
    # Distracted (s1..s6): RR qb = (3/6)/(5/6) = 0.6, RR qr = (2/6)/(5/6) = 0.4 -> +20.0
    #   S = {s1..s4}; retained qb 1,1,1,0, qr 1,0,1,0 -> agreement 3/4, gap (3-2)/4
    #   errors qb {s4, s5}, qr {s2, s4, s6} -> Jaccard 1/4 = .250
    assert row["Semantic distraction: RR gap"] == "+20.0"
    assert row["Semantic distraction: Agr. (%)"] == "75.0"
    assert row["Semantic distraction: Ret. gap"] == "+25.0"
    assert row["Semantic distraction: Err. Jac."] == ".250"
    # one pair: the Mean row repeats it
    assert list(t.iloc[1, 2:]) == list(row.iloc[2:])


@pytest.mark.parametrize("cond", ["corrupt", "distracted"])
def test_table4_equals_corruption_module(computed, cond):
    m, _ = computed
    matched = make_scored()
    matched = matched[matched["sample_id"] != "s7"]  # s7 has no corrupt rows
    spec = {
        "models": SPEC["models"],
        "model_order": SPEC["model_order"],
        "datasets": {DS: {}},
        "clean_condition": "clean",
        "perturbed_conditions": [cond],
        "bootstrap": SPEC["bootstrap"],
    }
    ref, _ = compute_corruption_metrics(matched, None, spec)
    ref = ref[ref["benchmark"] == DS]
    for metric in ("pair_n", "agreement", "retention_gap", "error_jaccard"):
        want = value(ref, metric, "qr", cond, base_model="qb")
        got = value(m, metric, "qr", cond, base_model="qb")
        assert got["group"] == "matched"
        for col in ("value", "ci_low", "ci_high", "n"):
            assert got[col] == pytest.approx(want[col], nan_ok=True), (metric, col)
    rr_b = value(ref, "rr", "qb", cond)["value"]
    rr_r = value(ref, "rr", "qr", cond)["value"]
    assert value(m, "rr_gap", "qr", cond)["value"] == pytest.approx(rr_b - rr_r)
    assert value(m, "matched_rr", "qb", cond)["value"] == pytest.approx(rr_b)
    ci = value(m, "retention_gap", "qr", cond)
    assert ci["ci_low"] <= ci["value"] <= ci["ci_high"]


# --------------------------------------------------------------------------- Table 5


def test_table5_numbers(tables):
    t = tables["table5"].set_index("Model")
    assert list(t.columns[2:]) == ["DRR (%)", "HFR (%)", "Ref_correct (%)", "Ref_wrong (%)"]
    # Q-Base: s7 excluded (no verdict) -> N = 6; c = 1,1,1,0,0,0; r = 1,0,0,1,1,0
    #   DRR 3/6 = 50.0; HFR r(1-c) = {s4, s5} 2/6 = 33.3; Ref_correct 1/3 = 33.3;
    #   Ref_wrong 2/3 = 66.7
    assert list(t.loc["Q-Base"].iloc[2:]) == ["50.0", "33.3", "33.3", "66.7"]
    # Q-Reas: key zz excluded -> N = 7; c = 1,0,1,0,0,0,0; r = 0,1,1,1,1,0,1
    #   DRR 5/7 = 71.4; HFR {s2,s4,s5,s7} 4/7 = 57.1; Ref_correct {s3} 1/2 = 50.0;
    #   Ref_wrong 4/5 = 80.0
    assert list(t.loc["Q-Reas"].iloc[2:]) == ["71.4", "57.1", "50.0", "80.0"]
    # GPT-X has no judged rows
    assert list(t.loc["GPT-X"].iloc[2:]) == ["\u2013"] * 4


def test_reference_rows(computed):
    m, warnings = computed
    drr = value(m, "drr", "qb", "distracted")
    assert drr["n"] == 6 and "1 judged row(s) without a verdict" in drr["note"]
    assert value(m, "ref_wrong", "qr", "distracted")["n"] == 5
    assert "without a scored distracted row" in value(m, "hfr", "qr", "distracted")["note"]
    gx = value(m, "drr", "gx", "distracted")
    assert math.isnan(gx["value"]) and gx["note"] == "no judged rows"
    assert any("model gx: no judged rows" in w for w in warnings)
    # Figure 6B: HFR qr / HFR qb = (4/7) / (2/6) = 12/7
    rel = value(m, "hfr_relative", "qr", "distracted", base_model="qb")
    assert rel["value"] == pytest.approx(12 / 7)


def test_read_judged_and_dataframe_input(tmp_path):
    judged = make_judged()
    paths = []
    for model, rows in judged.items():
        p = tmp_path / "judged" / model / DS / "distracted" / "open.jsonl"
        p.parent.mkdir(parents=True)
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        paths.append(p)
    read = read_judged(paths)
    assert {m: len(r) for m, r in read.items()} == {"qb": 7, "qr": 8}
    a, _ = compute_distraction_metrics(make_scored(), read, SPEC)
    frame = pd.DataFrame([dict(r, model=m) for m, rows in judged.items() for r in rows])
    b, _ = compute_distraction_metrics(make_scored(), frame, SPEC)
    ref, _ = compute_distraction_metrics(make_scored(), judged, SPEC)
    pd.testing.assert_frame_equal(a, ref)
    pd.testing.assert_frame_equal(b, ref)


# --------------------------------------------------------------------------- edge cases


def test_zero_clean_accuracy_missing_model_and_other_datasets(tmp_path):
    correct = dict(CORRECT)
    correct[("gx", "clean")] = [0] * 7
    scored = pd.concat([make_scored(correct), make_scored(dataset="other")], ignore_index=True)
    spec = dict(SPEC, models=dict(SPEC["models"], zz={"name": "Z", "family": "z", "role": "base"}))
    spec["model_order"] = [*SPEC["model_order"], "zz"]
    m, warnings = compute_distraction_metrics(scored, make_judged(), spec)
    rr = value(m, "rr", "gx", "distracted", group="")
    assert math.isnan(rr["value"]) and rr["note"] == "clean accuracy is 0"
    assert any("model gx" in w and "clean accuracy is 0" in w for w in warnings)
    assert any("model zz: no scored outputs" in w for w in warnings)
    assert value(m, "drop_pp", "zz", "distracted")["note"].startswith("no scored outputs")
    # the other dataset is ignored: Table 3 numbers unchanged
    assert value(m, "accuracy", "qb", "clean", group="")["value"] == pytest.approx(6 / 7)
    write_distraction_tables(m, spec, tmp_path)
    t3 = pd.read_csv(tmp_path / "table3.csv", dtype=str, keep_default_na=False)
    gx = t3.set_index("Model").loc["GPT-X"]
    assert gx["RR (%)"] == "\u2013" and gx["Clean Acc. (%)"] == "0.0"
    zz = t3.set_index("Model").loc["Z"]
    assert zz["Clean Acc. (%)"] == "\u2013"
    md = (tmp_path / "table3.md").read_text()
    assert "clean accuracy is 0" in md and "no scored outputs" in md


def test_no_corrupt_rows_gives_nan_table4(tmp_path):
    correct = {k: v for k, v in CORRECT.items() if k[1] != "corrupt"}
    m, warnings = compute_distraction_metrics(make_scored(correct), make_judged(), SPEC)
    assert any("no samples scored under all of" in w for w in warnings)
    for cond in ("corrupt", "distracted"):
        for metric in ("rr_gap", "agreement", "retention_gap", "error_jaccard"):
            row = value(m, metric, "qr", cond, base_model="qb")
            assert math.isnan(row["value"]) and row["note"], (metric, cond)
    # Table 3 and 5 still have their values
    assert value(m, "rr", "qb", "distracted", group="")["value"] == pytest.approx(4 / 6)
    write_distraction_tables(m, SPEC, tmp_path)
    t4 = pd.read_csv(tmp_path / "table4.csv", dtype=str, keep_default_na=False)
    assert set(t4.iloc[0, 2:]) == {"\u2013"}
    assert "no samples scored under all of" in (tmp_path / "table4.md").read_text()


def test_zero_base_hfr():
    judged = make_judged()
    judged["qb"] = [dict(r, verdict="no") for r in judged["qb"]]
    m, warnings = compute_distraction_metrics(make_scored(), judged, SPEC)
    assert value(m, "hfr", "qb", "distracted")["value"] == 0
    rel = value(m, "hfr_relative", "qr", "distracted")
    assert math.isnan(rel["value"]) and rel["note"] == "base HFR is 0"
    assert any("base HFR is 0" in w for w in warnings)


def test_judged_rows_need_a_key_column():
    scored = make_scored().drop(columns="key")
    with pytest.raises(ValueError, match="'key'"):
        compute_distraction_metrics(scored, make_judged(), SPEC)


# --------------------------------------------------------------------------- figures


def test_figures_written_and_deterministic(computed, tmp_path):
    a = write_distraction_figures(computed[0], SPEC, tmp_path / "a")
    b = write_distraction_figures(computed[0], SPEC, tmp_path / "b")
    names = distraction_figure_names(SPEC)
    assert sorted(p.name for p in a) == sorted(f"{n}.{e}" for n in names for e in ("png", "pdf"))
    for pa, pb in zip(a, b, strict=True):
        assert pa.stat().st_size > 1000
        assert pa.read_bytes() == pb.read_bytes(), pa.name


def test_figures_all_nan(computed, tmp_path):
    m = computed[0].copy()
    m["value"] = math.nan
    paths = write_distraction_figures(m, SPEC, tmp_path)
    assert len(paths) == 4
    again = write_distraction_figures(m, SPEC, tmp_path / "again")
    for pa, pb in zip(paths, again, strict=True):
        assert pa.read_bytes() == pb.read_bytes()
    # the note is drawn in every panel
    figs = distraction_figures(m, SPEC)
    for stem, fig in figs.items():
        for ax in fig.axes:
            texts = [t.get_text() for t in ax.texts]
            assert any(t.startswith("no ") for t in texts), (stem, texts)

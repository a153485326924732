"""Masking study views: metrics, Tables 2-5 and the example figures/pages on hand-made
compared rows.

Two models (ga, gb) x two masked conditions on demo-visargs. Specific masking: ga has
s1..s4 compared and s5 failed, gb has s1, s2 (its hallucination judge failed on both).
Random masking: ga has s1, s2; gb has no row at all.
"""

from __future__ import annotations

import logging
import math

import pandas as pd
import pytest
from PIL import Image

from vlmrobust.core.io import write_jsonl
from vlmrobust.metrics.core import METRIC_COLUMNS, read_metrics, write_metrics
from vlmrobust.metrics.masking import (
    MASKING_METRICS,
    NOTE_NO_ROWS,
    binomial_se,
    compute_masking_metrics,
    example_samples,
    read_compared,
)
from vlmrobust.report.figures.masking import masking_figure_names, write_masking_figures
from vlmrobust.report.tables.masking import (
    fmt_rate_se,
    masking_table_names,
    masking_tables,
    write_masking_tables,
)

DS = "demo-visargs"
SPEC = "mask-specific"
RAND = "mask-random"
PREMISE = 'glass "pouring" <tea> & milk'
SPEC_DICT = {
    "dataset": DS,
    "models": {"ga": {"name": "Gemini-X"}, "gb": {"name": "GPT-Y"}},
    "model_order": ["ga", "gb"],
    "clean_condition": "clean",
    "masked_conditions": {SPEC: "specific", RAND: "random"},
    "examples": 2,
}


def _alignment(n_orig: int, statuses: list[str]) -> list[dict]:
    out = []
    j = 0
    for i, st in enumerate(statuses[:n_orig]):
        if st == "disappeared":
            out.append({"original": i, "masked": None, "similarity": None, "status": st})
        else:
            sim = 0.95 if st == "unchanged" else 0.5
            out.append({"original": i, "masked": j, "similarity": sim, "status": st})
            j += 1
    return out


def make_row(model, cond, sid, *, image="", masked_image="", **kw) -> dict:
    region = "specific" if cond == SPEC else "random"
    n = kw.pop("steps", 2)
    statuses = kw.pop("statuses", ["unchanged"] * n)
    row = {
        "sample_id": sid,
        "variant_id": f"{sid}-{cond}",
        "dataset": DS,
        "condition": cond,
        "model": model,
        "region": region,
        "premise_index": 0,
        "premise": PREMISE,
        "question": "What is poured <into> the brain?",
        "masked_content": [PREMISE] if region == "specific" else [],
        "box": [10, 20, 30, 40] if region == "specific" else [2, 2, 12, 12],
        "target_box": [10, 20, 30, 40],
        "image": image,
        "masked_image": masked_image,
        "original_steps": [f"step {k} about the {sid} glass" for k in range(n)],
        "masked_steps": [f"masked step {k}" for k in range(n)],
        "alignment": _alignment(n, statuses),
        "n_unchanged": statuses.count("unchanged"),
        "n_modified": statuses.count("modified"),
        "n_disappeared": statuses.count("disappeared"),
        "n_new": 0,
        "step_similarity": 0.9,
        "step_disrupted": any(s != "unchanged" for s in statuses),
        "original_answer": "tea",
        "masked_answer": "tea",
        "answer_similarity": 1.0,
        "answer_flipped": False,
        "dependent_steps": [],
        "region_attribution": "correct",
        "hallucinated": False,
        "hallucination_judge": "offline",
        "hallucination_evidence": "",
        "hallucination_reason": "",
        "error": None,
    }
    row.update(kw)
    return row


def make_rows(image="", masked="") -> list[dict]:
    im = {"image": image, "masked_image": masked}
    ga = [
        make_row(
            "ga",
            SPEC,
            "s1",
            **im,
            steps=3,
            statuses=["unchanged", "modified", "disappeared"],
            step_similarity=0.8,
            answer_flipped=True,
            masked_answer="coffee",
            answer_similarity=0.2,
            hallucinated=True,
            hallucination_evidence="mentions the <glass>",
            dependent_steps=[1, 2],
            region_attribution="correct",
        ),
        make_row(
            "ga",
            SPEC,
            "s2",
            **im,
            steps=2,
            step_similarity=1.0,
            answer_flipped=True,
            masked_answer="water",
            hallucinated=None,
            hallucination_error="judge timeout",
            region_attribution="partial",
        ),
        make_row(
            "ga",
            SPEC,
            "s3",
            **im,
            steps=4,
            statuses=["modified", "modified", "unchanged", "unchanged"],
            step_similarity=0.6,
            answer_flipped=True,
            region_attribution="partial",
        ),
        make_row(
            "ga",
            SPEC,
            "s4",
            **im,
            steps=1,
            statuses=["disappeared"],
            step_similarity=None,
            region_attribution="incorrect",
        ),
        make_row("ga", SPEC, "s5", **im, error="no masked output"),
    ]
    # s2 of ga is not disrupted: 3 of 4 disrupted (s1, s3, s4)
    gb = [
        make_row("gb", SPEC, "s1", **im, statuses=["modified", "unchanged"], hallucinated=None),
        make_row("gb", SPEC, "s2", **im, statuses=["unchanged", "new"], hallucinated=None),
    ]
    gb[1]["step_disrupted"] = True  # a new masked step disrupts the image
    rnd = [
        make_row("ga", RAND, "s1", **im, statuses=["modified", "unchanged"], answer_flipped=True),
        make_row("ga", RAND, "s2", **im, statuses=["unchanged", "modified"], hallucinated=True),
    ]
    return ga + gb + rnd


def metric(df: pd.DataFrame, name: str, model: str, cond: str) -> pd.Series:
    hit = df[(df["metric"] == name) & (df["model"] == model) & (df["condition"] == cond)]
    assert len(hit) == 1, (name, model, cond, len(hit))
    return hit.iloc[0]


@pytest.fixture(scope="module")
def metrics() -> pd.DataFrame:
    return compute_masking_metrics(make_rows(), SPEC_DICT)


# --------------------------------------------------------------------------- metrics


def test_columns_and_rows(metrics):
    assert list(metrics.columns) == list(METRIC_COLUMNS)
    # every metric for every model x condition, in spec order
    assert len(metrics) == 2 * 2 * len(MASKING_METRICS)
    assert set(metrics["benchmark"]) == {DS}
    assert metrics[metrics["condition"] == RAND]["method"].unique().tolist() == ["random"]
    assert metrics[["ci_low", "ci_high", "severity"]].isna().all().all()


def test_rates_and_standard_errors(metrics):
    flip = metric(metrics, "answer_flip_rate", "ga", SPEC)
    assert flip["value"] == pytest.approx(0.75) and flip["n"] == 4
    assert flip["note"] == "1 row(s) failed to compare"
    se = metric(metrics, "answer_flip_rate_se", "ga", SPEC)
    assert se["value"] == pytest.approx(math.sqrt(0.75 * 0.25 / 4)) and se["n"] == 4
    dis = metric(metrics, "step_disruption_rate", "ga", SPEC)
    assert dis["value"] == pytest.approx(0.75)
    assert metric(metrics, "step_disruption_rate", "gb", SPEC)["value"] == 1.0
    assert metric(metrics, "step_disruption_rate_se", "gb", SPEC)["value"] == 0.0
    assert metric(metrics, "answer_flip_rate", "gb", SPEC)["value"] == 0.0
    rflip = metric(metrics, "answer_flip_rate_se", "ga", RAND)
    assert rflip["value"] == pytest.approx(math.sqrt(0.5 * 0.5 / 2))


def test_paper_standard_error():
    assert binomial_se(0.5878, 1611) == pytest.approx(0.01226, abs=1e-5)
    assert fmt_rate_se(0.5878, binomial_se(0.5878, 1611)) == "58.78 \u00b1 1.23%"
    assert math.isnan(binomial_se(0.5, 0))


def test_hallucination_none_excluded(metrics):
    h = metric(metrics, "hallucination_rate", "ga", SPEC)
    assert h["value"] == pytest.approx(1 / 3) and h["n"] == 3
    assert "1 row(s) excluded (the hallucination judge failed)" in h["note"]
    se = metric(metrics, "hallucination_rate_se", "ga", SPEC)
    assert se["value"] == pytest.approx(math.sqrt((1 / 3) * (2 / 3) / 3))
    hb = metric(metrics, "hallucination_rate", "gb", SPEC)
    assert math.isnan(hb["value"]) and hb["n"] == 0
    assert hb["note"] == "2 row(s) excluded (the hallucination judge failed)"
    assert math.isnan(metric(metrics, "hallucination_rate_se", "gb", SPEC)["value"])


def test_pooled_and_shares(metrics):
    share = metric(metrics, "step_disruption_share", "ga", SPEC)
    # (1+1) + 0 + 2 + 1 changed of 3 + 2 + 4 + 1 original steps
    assert share["value"] == pytest.approx(5 / 10) and share["n"] == 10
    sim = metric(metrics, "mean_step_similarity", "ga", SPEC)
    assert sim["value"] == pytest.approx(0.8) and sim["n"] == 3
    assert "1 row(s) without a matched step pair excluded" in sim["note"]
    for name, v in (("correct", 0.25), ("partial", 0.5), ("incorrect", 0.25)):
        row = metric(metrics, f"attribution_{name}", "ga", SPEC)
        assert row["value"] == pytest.approx(v) and row["n"] == 4
    assert metric(metrics, "compared", "ga", SPEC)["value"] == 4
    failed = metric(metrics, "failed", "ga", SPEC)
    assert failed["value"] == 1 and failed["n"] == 1
    assert failed["note"] == "errors: no masked output"


def test_model_without_rows(metrics, caplog):
    for name in MASKING_METRICS:
        row = metric(metrics, name, "gb", RAND)
        assert row["note"] == NOTE_NO_ROWS
        if name in ("compared", "failed"):
            assert row["value"] == 0
        else:
            assert math.isnan(row["value"])
    with caplog.at_level(logging.WARNING, logger="vlmrobust.metrics.masking"):
        compute_masking_metrics(make_rows(), SPEC_DICT)
    assert any("model gb" in r.message and NOTE_NO_ROWS in r.message for r in caplog.records)


def test_foreign_rows_ignored(caplog):
    rows = make_rows() + [
        make_row("ga", "mask-other", "s9"),
        {**make_row("ga", SPEC, "s9"), "dataset": "x"},
    ]
    with caplog.at_level(logging.WARNING, logger="vlmrobust.metrics.masking"):
        df = compute_masking_metrics(rows, SPEC_DICT)
    assert metric(df, "compared", "ga", SPEC)["value"] == 4
    text = " ".join(r.message for r in caplog.records)
    assert "mask-other" in text and "dataset 'x'" in text


def test_read_compared_defaults(tmp_path):
    path = tmp_path / "compared" / "gz" / DS / f"{SPEC}.jsonl"
    row = make_row("ga", SPEC, "s1")
    for key in ("model", "condition", "dataset"):
        row.pop(key)
    write_jsonl(path, [row, make_row("ga", SPEC, "s2")])
    got = read_compared([path])
    assert [(r["model"], r["dataset"], r["condition"]) for r in got] == [
        ("gz", DS, SPEC),
        ("ga", DS, SPEC),
    ]


# --------------------------------------------------------------------------- tables


def test_table_names_by_condition():
    def names(conds):
        return masking_table_names({**SPEC_DICT, "masked_conditions": conds})

    # always all four (the workflow declares them); see test_table2_random_only
    assert names({SPEC: "specific", RAND: "random"}) == ["table2", "table3", "table4", "table5"]
    assert names({RAND: "random"}) == ["table2", "table3", "table4", "table5"]


def test_table2_cells(metrics):
    t = masking_tables(metrics, make_rows(), SPEC_DICT)["table2"]
    assert t.columns == ["Metric", "Gemini-X", "GPT-Y"]
    assert t.cells() == [
        ["Answer flip rate", "75.00 \u00b1 21.65%", "0.00 \u00b1 0.00%"],
        ["Step disruption", "75.00 \u00b1 21.65%", "100.00 \u00b1 0.00%"],
        ["Hallucination", "33.33 \u00b1 27.22%", "\u2013"],
    ]
    assert "specific masking" in t.caption and SPEC in t.caption
    assert any(
        line.startswith("\u2013 GPT-Y, Hallucination: 2 row(s) excluded") for line in t.footnotes
    )
    assert "Samples compared: Gemini-X 4, GPT-Y 2." in t.footnotes


def test_table2_random_only():
    spec = {**SPEC_DICT, "masked_conditions": {RAND: "random"}}
    rows = make_rows()
    df = compute_masking_metrics(rows, spec)
    tables = masking_tables(df, rows, spec)
    assert list(tables) == ["table2", "table3", "table4", "table5"]
    # no specific condition: Table 5 says so, every cell a dash
    t5 = tables["table5"]
    assert t5.cells() == [
        ["Gemini-X", "\u2013", "\u2013", "\u2013"],
        ["GPT-Y", "\u2013", "\u2013", "\u2013"],
    ]
    assert t5.footnotes == (
        "This run has no specific masking condition (a `mask` condition with `region: specific`).",
    )
    with pytest.raises(ValueError, match="names no masked condition"):
        masking_tables(df, rows, {**SPEC_DICT, "masked_conditions": {}})
    t2 = tables["table2"]
    assert "random masking" in t2.caption and "no specific-masking condition" in t2.caption
    assert t2.cells()[0] == ["Answer flip rate", "50.00 \u00b1 35.36%", "\u2013"]
    # Table 3 then shows the random condition's samples
    assert tables["table3"].cells()[0][2].endswith("/ Random box (2,2,12,12)")


def test_tables_4_and_5(metrics):
    tables = masking_tables(metrics, make_rows(), SPEC_DICT)
    cols = ["Model", "Hallucination Rate (%)", "Step Disruption Rate (%)", "Answer Flip Rate (%)"]
    t4, t5 = tables["table4"], tables["table5"]
    assert t4.columns == cols and t5.columns == cols
    assert t4.cells() == [
        ["Gemini-X", "50.00 \u00b1 35.36%", "100.00 \u00b1 0.00%", "50.00 \u00b1 35.36%"],
        ["GPT-Y", "\u2013", "\u2013", "\u2013"],
    ]
    assert t5.cells() == [
        ["Gemini-X", "33.33 \u00b1 27.22%", "75.00 \u00b1 21.65%", "75.00 \u00b1 21.65%"],
        ["GPT-Y", "\u2013", "100.00 \u00b1 0.00%", "0.00 \u00b1 0.00%"],
    ]
    assert any("GPT-Y" in line and NOTE_NO_ROWS in line for line in t4.footnotes)


def test_table3_cells(metrics):
    t3 = masking_tables(metrics, make_rows(), SPEC_DICT)["table3"]
    assert t3.columns == ["Image", "Model", "GT Step / Masked Region", "Details"]
    cells = t3.cells()
    assert [c[:2] for c in cells] == [
        ["s1", "Gemini-X"],
        ["s1", "GPT-Y"],
        ["s2", "Gemini-X"],
        ["s2", "GPT-Y"],
    ]
    assert cells[0][2] == f"Step 2 (VP1 \u201c{PREMISE}\u201d) / Box (10,20,30,40)"
    assert cells[0][3] == (
        "Step disrupted: Yes \u2013 Answer flipped: Yes (tea \u2192 coffee) \u2013 "
        "Similarity: 0.80 \u2013 Region attribution: Correct \u2013 Hallucination: Yes"
    )
    assert cells[2][2] == f"VP1 \u201c{PREMISE}\u201d / Box (10,20,30,40)"
    assert cells[2][3] == (
        "Step disrupted: No \u2013 Answer flipped: Yes (tea \u2192 water) \u2013 "
        "Similarity: 1.00 \u2013 Region attribution: Partial \u2013 Hallucination: \u2013"
    )


def test_example_choice_skips_failed_rows():
    rows = make_rows()
    cond, ids = example_samples(rows, SPEC_DICT)
    assert cond == SPEC and ids == ["s1", "s2", "s3", "s4"]  # s5 failed for every model


def test_write_tables(tmp_path, metrics):
    compared = _write_compared(tmp_path, make_rows())
    mpath = tmp_path / "metrics.csv"
    write_metrics(metrics, mpath)
    back = read_metrics(mpath)
    assert metric(back, "answer_flip_rate_se", "ga", SPEC)["value"] == pytest.approx(
        math.sqrt(0.75 * 0.25 / 4)
    )
    out = write_masking_tables(mpath, compared, SPEC_DICT, tmp_path / "tables")
    assert sorted(p.name for p in out) == sorted(
        f"{n}.{ext}" for n in masking_table_names(SPEC_DICT) for ext in ("csv", "md", "tex")
    )
    t2 = pd.read_csv(tmp_path / "tables" / "table2.csv", dtype=str, keep_default_na=False)
    assert t2.loc[0, "Gemini-X"] == "75.00 \u00b1 21.65%"
    assert "$\\pm$" in (tmp_path / "tables" / "table5.tex").read_text()


# --------------------------------------------------------------------------- figures


def _images(tmp_path):
    orig = tmp_path / "img" / "orig.png"
    masked = tmp_path / "img" / "masked.png"
    orig.parent.mkdir(parents=True)
    Image.new("RGB", (48, 60), (200, 180, 40)).save(orig)
    im = Image.new("RGB", (48, 60), (200, 180, 40))
    im.paste((0, 0, 0), (10, 20, 30, 40))
    im.save(masked)
    return str(orig), str(masked)


def _write_compared(tmp_path, rows):
    by_path: dict = {}
    for r in rows:
        p = tmp_path / "compared" / r["model"] / DS / f"{r['condition']}.jsonl"
        by_path.setdefault(p, []).append(r)
    for p, rs in by_path.items():
        write_jsonl(p, rs)
    return list(by_path)


def test_figure_names():
    assert masking_figure_names(SPEC_DICT) == ["example1", "example2"]
    assert masking_figure_names({**SPEC_DICT, "examples": 0}) == []


def test_write_figures_and_pages(tmp_path):
    orig, masked = _images(tmp_path)
    rows = make_rows(orig, masked)
    rows[0]["masked_steps"][0] = "costs $5 and $6 (no math)"  # mathtext must stay off
    paths = _write_compared(tmp_path, rows)
    spec = {**SPEC_DICT, "examples": 5}
    out = write_masking_figures(paths, spec, tmp_path / "fig")
    assert sorted(p.name for p in out) == sorted(
        f"example{i}.{ext}" for i in range(1, 6) for ext in ("png", "pdf", "html")
    )
    with Image.open(tmp_path / "fig" / "example1.png") as im:
        w, h = im.size
    assert w == 1800 and 900 < h < 6000
    page = (tmp_path / "fig" / "example1.html").read_text(encoding="utf-8")
    assert "glass &quot;pouring&quot; &lt;tea&gt; &amp; milk" in page
    assert PREMISE not in page
    assert page.count("data:image/png;base64,") == 2
    assert "What is poured &lt;into&gt; the brain?" in page
    assert "mentions the &lt;glass&gt;" in page
    assert "Gemini-X" in page and "GPT-Y" in page
    assert 'class="disappeared"' in page
    # 4 comparable samples: example5 is a placeholder
    ph = (tmp_path / "fig" / "example5.html").read_text(encoding="utf-8")
    assert "no example 5: only 4 compared samples" in ph
    with Image.open(tmp_path / "fig" / "example5.png") as im:
        assert im.size == (900, 240)
    assert (tmp_path / "fig" / "example5.pdf").read_bytes().startswith(b"%PDF")


def test_random_example_and_missing_image(tmp_path):
    orig, masked = _images(tmp_path)
    rows = [r for r in make_rows(orig, "/nonexistent/masked.png") if r["condition"] == RAND]
    spec = {**SPEC_DICT, "masked_conditions": {RAND: "random"}, "examples": 1}
    out = write_masking_figures(_write_compared(tmp_path, rows), spec, tmp_path / "fig")
    assert len(out) == 3
    page = (tmp_path / "fig" / "example1.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 1
    assert "cannot read /nonexistent/masked.png" in page
    assert "Dashed blue: the premise&#x27;s annotated box." in page
    with Image.open(tmp_path / "fig" / "example1.png") as im:
        assert im.size[0] == 1800


def test_a_comparable_row_without_a_judgment_counts_in_no_rate(tmp_path):
    """The hallucination judge's file is joined on (model, condition, variant#draw); a
    comparable row it has no verdict for is marked so, never counted as not hallucinated."""
    from vlmrobust.core.io import write_jsonl
    from vlmrobust.metrics.masking import NO_JUDGMENT, read_compared

    base = {"dataset": "d", "condition": "mask-specific", "model": "m", "error": None}
    compared = tmp_path / "compared" / "m" / "d" / "mask-specific.jsonl"
    write_jsonl(compared, [{**base, "variant_id": "v1", "draw": 0},
                           {**base, "variant_id": "v2", "draw": 0},
                           {**base, "variant_id": "v3", "draw": 0, "error": "no chain"}])  # fmt: skip
    judged = tmp_path / "judged" / "m" / "d" / "mask-specific.jsonl"
    write_jsonl(judged, [{"key": "v1#0", "model": "m", "condition": "mask-specific",
                          "hallucinated": True, "hallucination_judge": "offline"}])  # fmt: skip
    rows = read_compared([compared], [judged])
    assert [r.get("hallucinated") for r in rows] == [True, None, None]
    assert rows[1]["hallucination_error"] == NO_JUDGMENT
    assert "hallucination_error" not in rows[2]  # not comparable: its own error counts

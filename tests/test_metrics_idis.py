"""The Idis metrics against hand-computed values: accuracy, lengths, length-rank curves
(ties by draw index), failed requests, pooled semantics."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from vlmrobust.core.io import write_jsonl
from vlmrobust.metrics.idis import compute_idis_metrics, rank_curve, read_idis_variants

BOOT = {"resamples": 200, "seed": 0, "level": 0.9}


def _resp(variant, draw, correct, length):
    return {"variant_id": variant, "draw": draw, "correct": correct, "length": length}


def test_rank_curve_hand_computed_with_ties_by_draw():
    g = pd.DataFrame(
        [
            _resp("q1", 0, 1, 10.0),
            _resp("q1", 1, 0, 5.0),
            _resp("q1", 2, 0, 10.0),  # ties with draw 0: draw 0 ranks first
            _resp("q2", 0, 1, 7.0),
            _resp("q2", 1, 1, 3.0),
            _resp("q2", 2, 0, 9.0),
            _resp("q3", 0, 1, 4.0),
            _resp("q3", 1, 1, math.nan),  # unmeasured: q3 has 2 of 3 -> left out
            _resp("q3", 2, 1, 6.0),
        ]
    )
    points, skipped = rank_curve(g, 3, BOOT)
    assert skipped == 1
    assert [p["rank"] for p in points] == [1, 2, 3]
    assert [p["accuracy"] for p in points] == [0.5, 1.0, 0.0]
    assert [p["length"] for p in points] == [4.0, 8.5, 9.5]
    assert [p["questions"] for p in points] == [2, 2, 2]


def _scored(rows):
    base = {"dataset": "d", "prompt": "p", "prompt_setting": "p", "error": "", "score": 0.0}
    out = []
    for model, cond, variant, sample, draw, correct, thinking, completion, *err in rows:
        out.append(
            {
                **base,
                "model": model,
                "condition": cond,
                "variant_id": variant,
                "sample_id": sample,
                "key": f"{variant}#{draw}",
                "draw": draw,
                "correct": correct,
                "thinking_tokens": thinking,
                "completion_tokens": completion,
                "error": err[0] if err else "",
            }
        )
    return pd.DataFrame(out)


def _manifest(tmp_path, cond, rows):
    path = tmp_path / f"{cond}.jsonl"
    write_jsonl(
        path,
        [
            {"variant_id": v, "sample_id": s, "dataset": "d", "condition": cond, "params": p}
            for v, s, p in rows
        ],
    )
    return str(path)


def test_idis_metrics_groups_lengths_failures_and_pooling(tmp_path):
    scored = _scored(
        [
            ("m", "clean", "s1", "s1", 0, 1, "10", "20"),
            ("m", "clean", "s1", "s1", 1, 1, "20", "30"),
            ("m", "clean", "s2", "s2", 0, 0, "30", "40"),
            ("m", "clean", "s2", "s2", 1, 1, "", "50"),  # no thinking: completion length
            ("m", "vis", "s1__conflicting-n1", "s1", 0, 0, "12", "20"),
            ("m", "vis", "s1__conflicting-n1", "s1", 1, 1, "8", "20"),
            ("m", "vis", "s1__aligned-n1", "s1", 0, 1, "5", "20"),
            ("m", "vis", "s1__aligned-n1", "s1", 1, 1, "6", "20", "HTTP 503"),
        ]
    )
    manifests = [
        _manifest(
            tmp_path,
            "vis",
            [
                (
                    "s1__conflicting-n1",
                    "s1",
                    {"kind": "visual", "semantics": "conflicting", "n": 1},
                ),
                ("s1__aligned-n1", "s1", {"kind": "visual", "semantics": "aligned", "n": 1}),
            ],
        )
    ]
    variants = read_idis_variants(manifests)
    spec = {
        "dataset": "d",
        "models": {"m": {"name": "M", "role": "reasoning"}},
        "model_order": ["m"],
        "clean_condition": "clean",
        "draws": 2,
        "bootstrap": BOOT,
    }
    metrics, warnings = compute_idis_metrics(scored, variants, spec)

    def one(metric, **kw):
        sel = metrics[metrics["metric"] == metric]
        for k, v in kw.items():
            sel = sel[sel[k] == v]
        assert len(sel) == 1, (metric, kw, sel)
        return sel.iloc[0]

    assert set(metrics["model"]) == {"m"} and set(metrics["role"]) == {"reasoning"}
    clean = one("accuracy", condition="clean")
    assert clean["value"] == 0.75 and clean["n"] == 4 and clean["kind"] == "none"
    assert clean["distractors"] == "0"
    length = one("mean_length", condition="clean")
    assert length["value"] == (10 + 20 + 30 + 50) / 4
    assert "completion tokens" in length["note"]
    # clean curve: s1 ranks (10:1, 20:1), s2 ranks (30:0, 50:1)
    assert one("rank_accuracy", condition="clean", rank="1")["value"] == 0.5
    assert one("rank_accuracy", condition="clean", rank="2")["value"] == 1.0
    assert one("rank_length", condition="clean", rank="1")["value"] == 20.0
    assert one("rank_length", condition="clean", rank="2")["value"] == 35.0
    conf = one("accuracy", semantics="conflicting")
    assert conf["value"] == 0.5 and conf["distractors"] == "1"
    # conflicting curve: lengths 8 (correct) < 12 (wrong)
    assert one("rank_accuracy", semantics="conflicting", rank="1")["value"] == 1.0
    assert one("rank_accuracy", semantics="conflicting", rank="2")["value"] == 0.0
    # the failed aligned request is excluded and counted, not counted wrong
    aligned = one("accuracy", semantics="aligned")
    assert aligned["value"] == 1.0 and aligned["n"] == 1
    assert "1 failed request(s) excluded" in aligned["note"]
    assert any("failed request" in w for w in warnings)
    # the aligned question has one of two draws: no curve point, counted
    assert metrics[
        (metrics["metric"] == "rank_accuracy") & (metrics["semantics"] == "aligned")
    ].empty
    # pooled over semantics: 3 responses (1 failed left out)
    pooled = one("accuracy", semantics="all")
    assert pooled["value"] == pytest.approx(2 / 3) and pooled["n"] == 3
    assert one("questions", semantics="all")["value"] == 2


def test_a_greedy_prompt_is_measured_with_its_own_single_draw(tmp_path):
    """The mitigation prompt answers once (greedy) where the base prompt samples 2:
    ``prompt_draws`` gives it its own curve of one rank and no missing-draws warning."""
    rows = [
        ("m", "clean", "s1", "s1", 0, 1, "10", "20"),
        ("m", "clean", "s1", "s1", 1, 0, "30", "40"),
        ("m", "clean", "s2", "s2", 0, 1, "5", "9"),
        ("m", "clean", "s2", "s2", 1, 1, "7", "9"),
    ]
    base = _scored(rows)
    greedy = _scored([r for r in rows if r[4] == 0])
    greedy["prompt"] = greedy["prompt_setting"] = "p-mitigate"
    scored = pd.concat([base, greedy], ignore_index=True)
    spec = {
        "dataset": "d",
        "models": {"m": {"name": "M", "role": "reasoning"}},
        "model_order": ["m"],
        "clean_condition": "clean",
        "draws": 2,
        "prompt_draws": {"p": 2, "p-mitigate": 1},
        "bootstrap": BOOT,
    }
    metrics, warnings = compute_idis_metrics(scored, read_idis_variants([]), spec)
    assert not [w for w in warnings if "measured responses" in w]
    ranks = metrics[metrics["metric"] == "rank_accuracy"]
    assert sorted(ranks.loc[ranks["prompt"] == "p", "rank"]) == ["1", "2"]
    mit = ranks[ranks["prompt"] == "p-mitigate"]
    assert list(mit["rank"]) == ["1"] and mit.iloc[0]["value"] == 1.0
    acc = metrics[(metrics["metric"] == "accuracy") & (metrics["prompt"] == "p-mitigate")]
    assert acc.iloc[0]["value"] == 1.0 and acc.iloc[0]["n"] == 2
    # without prompt_draws the greedy prompt has no question with 2 draws: warned
    del spec["prompt_draws"]
    _, warnings = compute_idis_metrics(scored, read_idis_variants([]), spec)
    assert any("p-mitigate" in w and "2 measured responses" in w for w in warnings)


def test_idis_metrics_warn_on_variants_without_params(tmp_path):
    scored = _scored([("m", "vis", "x", "s", 0, 1, "3", "5")])
    spec = {"dataset": "d", "models": {}, "model_order": ["m"], "clean_condition": "clean"}
    metrics, warnings = compute_idis_metrics(scored, read_idis_variants([]), spec)
    assert metrics[metrics["metric"] == "accuracy"].empty
    assert any("carries no Idis parameters" in w for w in warnings)


def test_math_judge_verdicts_decide_correctness_and_agreement_is_reported(tmp_path):
    from vlmrobust.metrics.idis import read_math_judged

    scored = _scored(
        [
            ("m", "clean", "s1", "s1", 0, 1, "3", "5"),
            ("m", "clean", "s2", "s2", 0, 0, "3", "5"),
            ("m", "clean", "s3", "s3", 0, 1, "3", "5"),
            ("m", "clean", "s4", "s4", 0, 0, "3", "5"),
        ]
    )
    path = tmp_path / "judged-mathverse" / "m" / "d" / "clean" / "p.jsonl"
    path.parent.mkdir(parents=True)
    write_jsonl(
        path,
        [
            {"key": "s1#0", "verdict": 1},
            {"key": "s2#0", "verdict": 1},  # the judge disagrees with the scorer
            {"key": "s3#0", "verdict": 1},
            {"key": "s4#0", "verdict": None, "error": "stage 2: HTTP 500"},
        ],
    )
    spec = {"dataset": "d", "models": {}, "model_order": ["m"], "clean_condition": "clean"}
    metrics, warnings = compute_idis_metrics(
        scored, read_idis_variants([]), spec, read_math_judged([str(path)])
    )
    acc = metrics[metrics["metric"] == "accuracy"].iloc[0]
    assert acc["value"] == 1.0 and acc["n"] == 3  # s4 left out, not counted wrong
    agree = metrics[metrics["metric"] == "judge_agreement"].iloc[0]
    assert agree["value"] == pytest.approx(2 / 3) and agree["n"] == 3
    # scorer (1, 0, 1) vs judge (1, 1, 1): po = 2/3, pe = 2/3*1 + 1/3*0 = 2/3 -> kappa 0
    assert metrics[metrics["metric"] == "judge_kappa"].iloc[0]["value"] == pytest.approx(0.0)
    assert any("without a MathVerse judge verdict" in w for w in warnings)


def test_summary_table_and_figure_from_the_metrics(tmp_path):
    from vlmrobust.report.figures.idis import idis_figures
    from vlmrobust.report.tables.idis import summary_table

    scored = _scored(
        [
            ("m", "clean", "s1", "s1", 0, 1, "10", "20"),
            ("m", "clean", "s1", "s1", 1, 0, "20", "30"),
            ("m", "vis", "s1__conflicting-n2", "s1", 0, 0, "12", "20"),
            ("m", "vis", "s1__conflicting-n2", "s1", 1, 0, "8", "20"),
        ]
    )
    manifests = [
        _manifest(
            tmp_path,
            "vis",
            [("s1__conflicting-n2", "s1", {"kind": "visual", "semantics": "conflicting", "n": 2})],
        )
    ]
    spec = {
        "dataset": "d",
        "models": {"m": {"name": "Model M"}},
        "model_order": ["m"],
        "clean_condition": "clean",
        "draws": 2,
        "bootstrap": BOOT,
    }
    metrics, _ = compute_idis_metrics(scored, read_idis_variants(manifests), spec)
    table = summary_table(metrics, spec)
    assert table.row_groups == (("Model M", 2),)
    rows = table.data.to_dict("records")
    assert [r["Group"] for r in rows] == ["clean", "conflicting n=2"]  # clean first
    assert rows[0]["Accuracy (%)"].startswith("50.0") and rows[0]["Responses"] == "2"
    assert rows[1]["Accuracy (%)"].startswith("0.0") and rows[1]["Mean length (tokens)"] == "10.0"
    fig = idis_figures(metrics, spec)["length_accuracy"]
    ax = fig.axes[0]
    # one curve per number of distractors: clean (0) and 2; x = mean length per rank
    assert [line.get_label() for line in ax.get_lines()] == ["n=0", "n=2"]
    assert list(ax.get_lines()[0].get_xdata()) == [10.0, 20.0]
    assert list(ax.get_lines()[0].get_ydata()) == [100.0, 0.0]

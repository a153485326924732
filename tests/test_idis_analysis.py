"""The Idis analysis metrics against hand-computed values: attribute categories and
ratios, bins, Pearson's r, extractor agreement on common traces, r_area, the sampling
statistics, attention blocking, subsets and length quantiles; and the readers' paths."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from vlmrobust.core.idis import attribute_categories
from vlmrobust.core.io import write_jsonl
from vlmrobust.metrics.idis import EXTRA_COLUMNS, compute_idis_metrics, read_idis_variants
from vlmrobust.metrics.idis_attributes import (
    area_bin,
    attribute_ratios,
    length_bins,
    pearson,
    r_attr_bin,
    read_areas,
    read_attributes,
    read_blocked,
    read_sample_meta,
    sampling_stats,
)

BOOT = {"resamples": 20, "seed": 0, "level": 0.9}


# --------------------------------------------------------------------------- categories


@pytest.mark.parametrize(
    ("task", "classes", "label", "distractor", "target"),
    [
        ("perception", ["Fish"], "Dog", ["fish"], ["dog"]),  # conflicting
        ("perception", ["Instrument"], "Vehicle", ["instrument"], ["vehicle"]),
        ("perception", ["musical instrument"], "Vehicle", ["instrument"], ["vehicle"]),
        ("perception", ["irrelevant"], "Primate", ["other"], ["primate"]),
        ("perception", ["Dog"], "Dog", [], ["dog"]),  # aligned: no distractor category
        ("perception", ["Bird"], "Primate", ["bird"], ["primate"]),  # typographic
        ("perception", [], "Insect", [], ["insect"]),  # clean
        ("perception", None, "Insect", [], ["insect"]),
        ("math", ["triangle"], None, ["distractor_related"], ["target_related"]),
        ("math", [], None, ["distractor_related"], ["target_related"]),
        ("waterbirds", None, "Landbird", ["env"], ["bio"]),
    ],
)
def test_attribute_categories_every_case(task, classes, label, distractor, target):
    assert attribute_categories(task, classes, label) == {
        "distractor": distractor,
        "target": target,
    }


def test_attribute_categories_errors_name_the_value():
    with pytest.raises(ValueError, match="'chart' is not one of"):
        attribute_categories("chart", [], "Dog")
    with pytest.raises(ValueError, match="target label 'Cat' is not an ImageNet-9 label"):
        attribute_categories("perception", ["Fish"], "Cat")
    with pytest.raises(ValueError, match="distractor class 'Umbrella'"):
        attribute_categories("perception", ["Umbrella"], "Dog")
    with pytest.raises(ValueError, match="meta.label"):
        attribute_categories("perception", ["Fish"], None)


def test_attribute_ratios_on_hand_made_traces():
    # conflicting (Fish on a Dog image): 1 fish of 5 attributes, 3 dog
    total, r_attr, r_target = attribute_ratios(
        "perception", {"dog": 3, "fish": 1, "other": 1, "bird": 0}, ["Fish"], "Dog"
    )
    assert (total, r_attr, r_target) == (5.0, 0.2, 0.6)
    # aligned: r_attr undefined, r_target 2/4
    total, r_attr, r_target = attribute_ratios("perception", {"dog": 2, "other": 2}, ["Dog"], "Dog")
    assert total == 4.0 and math.isnan(r_attr) and r_target == 0.5
    # no attribute: both undefined
    total, r_attr, r_target = attribute_ratios("perception", {"dog": 0}, ["Fish"], "Dog")
    assert total == 0.0 and math.isnan(r_attr) and math.isnan(r_target)
    # irrelevant objects count as "other"; math categories
    assert attribute_ratios("perception", {"other": 3, "dog": 1}, ["irrelevant"], "Dog") == (
        4.0,
        0.75,
        0.25,
    )
    counts = {"target_related": 2, "distractor_related": 1, "other": 1}
    assert attribute_ratios("math", counts, ["circle"], None) == (4.0, 0.25, 0.5)


def test_bin_edges():
    assert r_attr_bin(0.0) == "0.0-0.1"
    assert r_attr_bin(0.0999) == "0.0-0.1"
    assert r_attr_bin(0.1) == "0.1-0.2"
    assert r_attr_bin(3 / 10) == "0.3-0.4"
    assert r_attr_bin(7 / 10) == "0.7-0.8"
    assert r_attr_bin(0.99) == "0.9-1.0"
    assert r_attr_bin(1.0) == "0.9-1.0"
    assert r_attr_bin(math.nan) == ""
    assert area_bin(0.19) == "0.0-0.2"
    assert area_bin(0.2) == "0.2-0.4"
    assert area_bin(1.0) == "0.8-1.0"


def test_pearson_on_four_points():
    # dx = dy-permuted (-1.5, -.5, .5, 1.5): sum dx*dy = 3, sum dx^2 = sum dy^2 = 5
    r, n, note = pearson([1, 2, 3, 4, math.nan], [2, 1, 4, 3, 7])
    assert r == pytest.approx(0.6) and n == 4 and note == ""
    r, n, note = pearson([1, 2], [2, 1])
    assert math.isnan(r) and n == 2 and "too few" in note
    r, n, note = pearson([1, 2, 3], [5, 5, 5])
    assert math.isnan(r) and "constant" in note


def test_length_bins_quintiles():
    bins = length_bins(list(range(1, 11)), list(range(1, 11)))
    assert [b["bin"] for b in bins] == ["1-2", "3-4", "5-6", "7-8", "9-10"]
    assert [b["value"] for b in bins] == [1.5, 3.5, 5.5, 7.5, 9.5]
    assert [b["n"] for b in bins] == [2] * 5


def _sampling_frame():
    rows = []
    lengths = {
        ("A", 1): [10, 20, 30],
        ("A", 4): [20, 25, 30],
        ("A", 2): [500, 600, 700],  # n=2: not an end point, ignored
        ("B", 1): [40, 50, 60],
        ("B", 4): [30, 40, 35],
        ("C", 1): [1, 2, 3],  # no n=4 variant: not paired
    }
    for (img, n), ls in lengths.items():
        for draw, length in enumerate(ls):
            rows.append(
                {
                    "unit": img,
                    "sample_id": img,
                    "variant_id": f"{img}__conflicting-n{n}",
                    "n": n,
                    "draw": draw,
                    "length": float(length),
                }
            )
    return pd.DataFrame(rows)


def test_sampling_statistics_by_hand():
    st = sampling_stats(_sampling_frame())
    assert st["max"] == 4 and st["units"] == 2
    # per-variant SDs: A1 10, A4 5, B1 10, B4 5
    assert st["within_sd"] == pytest.approx(7.5)
    # mean_1 = (20 + 50)/2 = 35, mean_4 = (25 + 35)/2 = 30
    assert st["delta"] == pytest.approx(-5.0)
    # se_1 = sd(20, 50)/sqrt 2 = 15, se_4 = sd(25, 35)/sqrt 2 = 5
    half = 1.96 * math.sqrt(15**2 + 5**2)
    assert st["ci"] == pytest.approx((-5.0 - half, -5.0 + half))
    # A: 10 > none; 20 ties 20 (0.5); 30 > 20, 25, ties 30 -> 3/9. B: 2.5 + 3 + 3 -> 8.5/9
    assert st["p_longer"] == pytest.approx((3 / 9 + 8.5 / 9) / 2)


# --------------------------------------------------------------------------- compute


def _scored(rows):
    out = []
    for cond, variant, sample, draw, correct, length in rows:
        out.append(
            {
                "model": "m",
                "dataset": "d",
                "prompt": "p",
                "prompt_setting": "p",
                "condition": cond,
                "variant_id": variant,
                "sample_id": sample,
                "key": f"{variant}#{draw}",
                "draw": draw,
                "correct": correct,
                "score": float(correct),
                "thinking_tokens": str(length),
                "completion_tokens": "",
                "error": "",
            }
        )
    return pd.DataFrame(out)


def _variants(tmp_path, cond, rows):
    path = tmp_path / f"manifest-{cond}.jsonl"
    recs = []
    for variant, sample, semantics, n, classes in rows:
        params = {"kind": "visual", "semantics": semantics, "n": n}
        params["distractor_classes"] = classes
        recs.append(
            {
                "variant_id": variant,
                "sample_id": sample,
                "dataset": "d",
                "condition": cond,
                "params": params,
            }
        )
    write_jsonl(path, recs)
    return read_idis_variants([str(path)])


def _samples(tmp_path, rows):
    path = tmp_path / "samples" / "d" / "samples.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(path, [{"sample_id": s, "dataset": "d", "meta": meta} for s, meta in rows])
    return read_sample_meta([str(path)])


def _attributes(tmp_path, extractor, cond, rows):
    path = tmp_path / "judged-attributes" / extractor / "m" / "d" / cond / "p.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    recs = []
    for key, counts in rows:
        rec = {"key": key, "task": "perception", "extractor": extractor, "error": None}
        if counts is None:
            rec |= {"counts": None, "error": "judge: HTTP 500"}
        else:
            rec["counts"] = counts
        recs.append(rec)
    write_jsonl(path, recs)
    return str(path)


SPEC = {
    "dataset": "d",
    "models": {"m": {"name": "M"}},
    "model_order": ["m"],
    "clean_condition": "clean",
    "draws": 1,
    "bootstrap": BOOT,
}


def _one(metrics, metric, **kw):
    sel = metrics[metrics["metric"] == metric]
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, (metric, kw, sel)
    return sel.iloc[0]


@pytest.fixture(scope="module")
def attribute_metrics(tmp_path_factory):
    """The attribute metrics of one model on hand-made traces: a main extractor and an
    alternative one that judged partly other traces."""
    tmp_path = tmp_path_factory.mktemp("attributes")
    conf = "s1__conflicting-n1"
    scored = _scored(
        [
            ("vis", conf, "s1", 0, 1, 10),
            ("vis", conf, "s1", 1, 0, 20),
            ("vis", conf, "s1", 2, 0, 30),
            ("vis", conf, "s1", 3, 1, 40),
            ("vis", conf, "s1", 4, 1, 50),
            ("vis", "s1__aligned-n1", "s1", 0, 1, 60),
        ]
    )
    variants = _variants(
        tmp_path,
        "vis",
        [(conf, "s1", "conflicting", 1, ["Fish"]), ("s1__aligned-n1", "s1", "aligned", 1, ["Dog"])],
    )
    samples = _samples(tmp_path, [("s1", {"label": "Dog"})])
    main = _attributes(
        tmp_path,
        "main",
        "vis",
        [
            (f"{conf}#0", {"dog": 2, "fish": 0}),  # r_attr 0
            (f"{conf}#1", {"dog": 1, "fish": 1}),  # 0.5
            (f"{conf}#2", {"fish": 2}),  # 1.0
            (f"{conf}#3", {"dog": 3, "fish": 1}),  # 0.25
            # #4 has no row of the main extractor
            ("s1__aligned-n1#0", {"dog": 2, "other": 2}),  # aligned: r_target 0.5 only
        ],
    )
    alt = _attributes(
        tmp_path,
        "alt",
        "vis",
        [
            (f"{conf}#0", {"dog": 3, "fish": 1}),  # 0.25
            (f"{conf}#1", {"dog": 3, "fish": 1}),  # 0.25
            (f"{conf}#2", {"fish": 1}),  # 1.0
            (f"{conf}#3", None),  # judge error: not a common trace
            (f"{conf}#4", {"fish": 1}),  # main has no row: not a common trace
        ],
    )
    attributes = read_attributes([main, alt])
    spec = {**SPEC, "extractors": ["main", "alt"]}
    metrics, warnings = compute_idis_metrics(
        scored, variants, spec, samples=samples, attributes=attributes
    )
    return metrics, warnings


def test_attribute_ratios_of_the_main_extractor(attribute_metrics):
    metrics, _ = attribute_metrics
    assert list(metrics.columns[-len(EXTRA_COLUMNS) :]) == list(EXTRA_COLUMNS)
    # the existing rows get "" in the new columns
    acc = _one(metrics, "accuracy", semantics="conflicting", subset="")
    assert acc["bin"] == "" and acc["extractor"] == "" and acc["block"] == ""

    c = {"semantics": "conflicting", "extractor": "main"}
    total = _one(metrics, "attributes_total", **c)
    assert total["value"] == pytest.approx((2 + 2 + 2 + 4) / 4) and total["n"] == 4
    assert "1 response(s) without an attribute row left out" in total["note"]
    r_attr = _one(metrics, "r_attr", **c)
    assert r_attr["value"] == pytest.approx((0 + 0.5 + 1 + 0.25) / 4) and r_attr["n"] == 4
    r_target = _one(metrics, "r_target", **c)
    assert r_target["value"] == pytest.approx((1 + 0.5 + 0 + 0.75) / 4)
    # aligned: r_target, no r_attr
    assert _one(metrics, "r_target", semantics="aligned", extractor="main")["value"] == 0.5
    assert metrics[(metrics["metric"] == "r_attr") & (metrics["semantics"] == "aligned")].empty
    pooled = _one(metrics, "r_attr", semantics="all", extractor="main")
    assert pooled["n"] == 4 and "1 trace(s) without a distractor category" in pooled["note"]


def test_accuracy_by_attribute_ratio_bin(attribute_metrics):
    metrics, _ = attribute_metrics
    # bin_accuracy of the main extractor: 0 (correct), .25 (correct), .5 (wrong), 1 (wrong)
    bins = metrics[(metrics["metric"] == "bin_accuracy") & (metrics["semantics"] == "conflicting")]
    bins = bins[bins["extractor"] == "main"]
    assert dict(zip(bins["bin"], bins["value"], strict=True)) == {
        "0.0-0.1": 1.0,
        "0.2-0.3": 1.0,
        "0.5-0.6": 0.0,
        "0.9-1.0": 0.0,
    }


def test_attribute_correlations_with_length_and_accuracy(attribute_metrics):
    metrics, _ = attribute_metrics
    # length vs total over main's 5 judged traces: x (10,20,30,40,60), y (2,2,2,4,4)
    # dx (-22,-12,-2,8,28), dy (-.8,-.8,-.8,1.2,1.2): sum dxdy 72, dx^2 1480, dy^2 4.8
    plen = _one(metrics, "pearson_length_attributes", extractor="main")
    assert plen["value"] == pytest.approx(72 / math.sqrt(1480 * 4.8)) and plen["n"] == 5
    assert plen["condition"] == "" and plen["kind"] == ""
    # r_attr (0,.5,1,.25) vs correct (1,0,0,1): sum dxdy -.625, dx^2 .546875, dy^2 1
    pacc = _one(metrics, "pearson_attr_accuracy", extractor="main")
    assert pacc["value"] == pytest.approx(-0.625 / math.sqrt(0.546875)) and pacc["n"] == 4
    lb = metrics[(metrics["metric"] == "length_bin_attributes") & (metrics["extractor"] == "main")]
    assert list(lb["bin"]) == ["10-10", "20-20", "30-30", "40-40", "60-60"]  # a trace each
    assert list(lb["value"]) == [2.0, 2.0, 2.0, 4.0, 4.0]


def test_extractor_agreement_on_common_traces_and_warnings(attribute_metrics):
    metrics, warnings = attribute_metrics
    # agreement on the 3 common traces: main (0, .5, 1), alt (.25, .25, 1)
    # dx (-.5, 0, .5), dy (-.25, -.25, .5): .375 / sqrt(.5 * .375) = sqrt(3)/2
    agree = _one(metrics, "extractor_pearson")
    assert agree["extractor"] == "main vs alt" and agree["n"] == 3
    assert agree["value"] == pytest.approx(math.sqrt(3) / 2)
    assert any(
        "extractor alt, model m, dataset d, condition vis: 1 attribute judge" in w for w in warnings
    )
    assert any(
        "extractor main, model m, dataset d, condition vis: 1 response(s) without" in w
        for w in warnings
    )


def test_r_area_mean_and_area_bins(tmp_path):
    ids = ["a1", "a2", "a3", "a4", "a5"]
    scored = _scored([("vis", f"{s}__c-n1", s, 0, 1, 10) for s in ids])
    variants = _variants(
        tmp_path, "vis", [(f"{s}__c-n1", s, "conflicting", 1, ["Fish"]) for s in ids]
    )
    samples = _samples(tmp_path, [(s, {"label": "Dog"}) for s in ids])
    area_path = tmp_path / "areas" / "d" / "vis.jsonl"
    area_path.parent.mkdir(parents=True)
    write_jsonl(
        area_path,
        [
            {"variant_id": "a1__c-n1", "sample_id": "a1", "r_area": 0.3},
            {"variant_id": "a2__c-n1", "sample_id": "a2", "r_area": 0.5},
            {"variant_id": "a3__c-n1", "sample_id": "a3", "r_area": None, "method": "none"},
            {"variant_id": "a5__c-n1", "sample_id": "a5", "r_area": 0.35},
            # a4: no area row
        ],
    )
    areas = read_areas([str(area_path)])
    assert set(areas["condition"]) == {"vis"} and set(areas["dataset"]) == {"d"}
    attrs = _attributes(
        tmp_path,
        "e",
        "vis",
        [
            ("a1__c-n1#0", {"dog": 1, "fish": 1}),  # r_attr .5, r_area .3
            ("a2__c-n1#0", {"dog": 3, "fish": 1}),  # .25, r_area .5
            ("a5__c-n1#0", {"fish": 2}),  # 1.0, r_area .35
        ],
    )
    metrics, warnings = compute_idis_metrics(
        scored,
        variants,
        SPEC,
        samples=samples,
        areas=areas,
        attributes=read_attributes([attrs]),
    )
    r = _one(metrics, "r_area", semantics="conflicting")
    assert r["value"] == pytest.approx((0.3 + 0.5 + 0.35) / 3) and r["n"] == 3
    assert "2 variant(s) without a known r_area" in r["note"]
    assert any("condition vis: 2 variant(s) without a known r_area" in w for w in warnings)
    ab = metrics[metrics["metric"] == "area_bin_r_attr"]
    assert dict(zip(ab["bin"], ab["value"], strict=True)) == {"0.2-0.4": 0.75, "0.4-0.6": 0.25}
    assert dict(zip(ab["bin"], ab["n"], strict=True)) == {"0.2-0.4": 2, "0.4-0.6": 1}


def test_sampling_rows_from_compute(tmp_path):
    frame = _sampling_frame()
    scored = _scored(
        [("vis", r.variant_id, r.sample_id, r.draw, 1, int(r.length)) for r in frame.itertuples()]
    )
    variants = _variants(
        tmp_path,
        "vis",
        [
            (v, s, "conflicting", n, ["Fish"])
            for v, s, n in frame[["variant_id", "sample_id", "n"]]
            .drop_duplicates()
            .itertuples(index=False)
        ],
    )
    metrics, _ = compute_idis_metrics(scored, variants, {**SPEC, "draws": 3})
    delta = _one(metrics, "sampling_delta", semantics="conflicting")
    assert delta["distractors"] == "1-4" and delta["n"] == 2
    assert delta["value"] == pytest.approx(-5.0)
    assert delta["ci_high"] - delta["value"] == pytest.approx(1.96 * math.sqrt(250))
    assert _one(metrics, "sampling_within_sd")["value"] == pytest.approx(7.5)
    assert _one(metrics, "sampling_p_longer")["value"] == pytest.approx(11.5 / 18)


def test_blocked_accuracy(tmp_path):
    path = tmp_path / "blocked" / "m" / "d" / "vis" / "p.jsonl"
    path.parent.mkdir(parents=True)
    rows = [
        ("none", 1, None),
        ("none", 0, None),
        ("none", 1, None),
        ("none", None, "vision encoder hook failed"),
        ("distractor", 1, None),
        ("distractor", 1, None),
        ("distractor", None, None),  # no verdict
        ("target", 0, None),
    ]
    write_jsonl(
        path,
        [
            {"key": f"v#{i}", "variant_id": "v", "sample_id": "s", "draw": i, "block": b}
            | {"correct": c, "error": e, "blocked_tokens": 3, "phrases": 1}
            for i, (b, c, e) in enumerate(rows)
        ],
    )
    blocked = read_blocked([str(path)])
    assert set(blocked["prompt_setting"]) == {"p"} and set(blocked["condition"]) == {"vis"}
    scored = _scored([("clean", "s", "s", 0, 1, 5)])
    metrics, warnings = compute_idis_metrics(scored, read_idis_variants([]), SPEC, blocked=blocked)
    none = _one(metrics, "blocked_accuracy", block="none")
    assert none["value"] == pytest.approx(2 / 3) and none["n"] == 3
    assert none["condition"] == "vis" and "1 error(s) left out" in none["note"]
    dist = _one(metrics, "blocked_accuracy", block="distractor")
    assert dist["value"] == 1.0 and dist["n"] == 2
    assert "1 row(s) without a verdict" in dist["note"]
    assert _one(metrics, "blocked_accuracy", block="target")["value"] == 0.0
    assert any("block none: 1 attention-blocking error" in w for w in warnings)


def test_subset_accuracy_and_length_quantiles(tmp_path):
    scored = _scored(
        [
            ("clean", "s1", "s1", 0, 1, 10),
            ("clean", "s1", "s1", 1, 0, 20),
            ("clean", "s2", "s2", 0, 1, 30),
            ("clean", "s2", "s2", 1, 1, 40),
            ("clean", "s3", "s3", 0, 0, 50),
        ]
    )
    samples = _samples(
        tmp_path,
        [
            ("s1", {"label": "Dog"}),
            ("s2", {"label": "Fish"}),
            ("s3", {"group": "conflicting", "y": 1}),  # Waterbirds: the group is the subset
        ],
    )
    metrics, _ = compute_idis_metrics(
        scored, read_idis_variants([]), {**SPEC, "draws": 2}, samples=samples
    )
    dog = _one(metrics, "accuracy", subset="Dog")
    assert dog["value"] == 0.5 and dog["n"] == 2 and dog["kind"] == "none"
    assert _one(metrics, "accuracy", subset="Fish")["value"] == 1.0
    assert _one(metrics, "accuracy", subset="conflicting")["value"] == 0.0
    assert _one(metrics, "mean_length", subset="Fish")["value"] == 35.0
    assert _one(metrics, "accuracy", subset="")["value"] == 0.6
    # no rank curves per subset
    assert set(metrics.loc[metrics["metric"] == "rank_accuracy", "subset"]) == {""}
    # lengths 10..50: linear quantiles
    q = metrics[(metrics["metric"] == "length_quantile") & (metrics["subset"] == "")]
    assert dict(zip(q["bin"], q["value"], strict=True)) == {
        "0.10": 14.0,
        "0.25": 20.0,
        "0.50": 30.0,
        "0.75": 40.0,
        "0.90": 46.0,
    }
    dq = metrics[(metrics["metric"] == "length_quantile") & (metrics["subset"] == "Dog")]
    assert dict(zip(dq["bin"], dq["value"], strict=True))["0.50"] == 15.0


def test_read_attributes_paths_errors_and_bad_rows(tmp_path):
    path = _attributes(tmp_path, "llm-x", "vis", [("k#0", {"dog": 2, "other": 1}), ("k#1", None)])
    a = read_attributes([path])
    assert list(a["extractor"]) == ["llm-x", "llm-x"] and set(a["condition"]) == {"vis"}
    assert set(a["model"]) == {"m"} and set(a["prompt_setting"]) == {"p"}
    assert a["total"].iloc[0] == 3.0 and math.isnan(a["total"].iloc[1])
    assert a["error"].iloc[1] == "judge: HTTP 500"
    bad = tmp_path / "judged-attributes" / "e" / "m" / "d" / "c" / "p.jsonl"
    bad.parent.mkdir(parents=True)
    write_jsonl(bad, [{"key": "k#0", "counts": None, "error": None}])
    with pytest.raises(ValueError, match=r"p.jsonl:1: attribute row 'k#0' has neither counts"):
        read_attributes([str(bad)])
    write_jsonl(bad, [{"key": "k#0", "counts": {"dog": 1}, "task": "chart", "error": None}])
    with pytest.raises(ValueError, match=r"p.jsonl:1: attribute row 'k#0' has task 'chart'"):
        read_attributes([str(bad)])


def test_a_sampled_extractor_is_compared_on_its_sample_and_says_so(tmp_path):
    """judge.attributes.validation_sample: the other extractor labelled 3 of the 6
    traces; the rest are not "without an attribute row", its rows say they rest on a
    sample, and the agreement is over the sampled traces."""
    conf = "s1__conflicting-n1"
    scored = _scored([("vis", conf, "s1", d, d % 2, 10 * (d + 1)) for d in range(6)])
    variants = _variants(tmp_path, "vis", [(conf, "s1", "conflicting", 1, ["Fish"])])
    samples = _samples(tmp_path, [("s1", {"label": "Dog"})])
    counts = [{"dog": 2}, {"dog": 1, "fish": 1}, {"fish": 2}, {"dog": 3, "fish": 1}]
    counts += [{"dog": 1, "fish": 3}, {"dog": 4}]
    main = _attributes(tmp_path, "main", "vis", [(f"{conf}#{d}", c) for d, c in enumerate(counts)])
    alt = tmp_path / "judged-attributes" / "alt" / "m" / "d" / "vis" / "p.jsonl"
    alt.parent.mkdir(parents=True)
    tag = {"n": 3, "seed": 0, "of": 6}
    alt_counts = {0: {"dog": 3, "fish": 1}, 2: {"fish": 1}, 4: {"fish": 1}}
    write_jsonl(
        alt,
        [
            {"key": f"{conf}#{d}", "task": "perception", "counts": c, "error": None, "sample": tag}
            for d, c in alt_counts.items()
        ],
    )
    attributes = read_attributes([main, str(alt)])
    assert list(attributes["sampled"]) == [False] * 6 + [True] * 3
    spec = {**SPEC, "extractors": ["main", "alt"]}
    metrics, warnings = compute_idis_metrics(
        scored, variants, spec, samples=samples, attributes=attributes
    )
    assert not any("without an attribute row" in w for w in warnings)
    # main (0, 1, .75) vs alt (.25, 1, 1) on the sampled traces #0, #2, #4
    agree = _one(metrics, "extractor_pearson")
    assert agree["n"] == 3 and "alt: a seeded sample of the traces" in agree["note"]
    x, y = [0, 1, 0.75], [0.25, 1, 1]
    mx, my = sum(x) / 3, sum(y) / 3
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    r = sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
    assert agree["value"] == pytest.approx(r)
    c = {"semantics": "conflicting", "extractor": "alt"}
    total = _one(metrics, "attributes_total", **c)
    assert total["n"] == 3 and "without an attribute row" not in total["note"]
    assert "a seeded sample: 3 of 6 responses labelled" in total["note"]
    rows = metrics[metrics["extractor"] == "alt"]
    assert len(rows) > 3 and rows["note"].str.contains("a seeded sample").all()
    assert not metrics[metrics["extractor"] == "main"]["note"].str.contains("sample").any()

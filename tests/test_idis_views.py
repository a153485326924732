"""The Idis tables and figures from hand-made metrics frames: which views a spec gets,
the cells of every table against hand-computed numbers, every figure's panels and lines,
a placeholder (never a crash) on an empty frame, and one view built on its own."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from vlmrobust.metrics.core import METRIC_COLUMNS  # noqa: E402
from vlmrobust.metrics.idis import EXTRA_COLUMNS  # noqa: E402
from vlmrobust.report.figures.idis import (  # noqa: E402
    FIGURE_BUILDERS,
    FIGURE_CAPTIONS,
    idis_figure_names,
    idis_figures,
    idis_view,
)
from vlmrobust.report.tables.idis import (  # noqa: E402
    TABLE_BUILDERS,
    TABLE_CAPTIONS,
    idis_table_names,
    idis_tables,
)
from vlmrobust.report.tables.render import Table, to_latex, to_markdown  # noqa: E402

COLUMNS = [*METRIC_COLUMNS, *EXTRA_COLUMNS]
TEXT = [c for c in COLUMNS if c not in ("severity", "value", "ci_low", "ci_high", "n")]

MODELS = {"m1": {"name": "Model One"}, "m2": {"name": "Model Two"}}


def row(metric, value, **kw):
    r = {c: "" for c in TEXT}
    r.update({"severity": math.nan, "value": value, "ci_low": math.nan, "ci_high": math.nan})
    r.update({"n": 10, "metric": metric, "prompt": "natural", "benchmark": "d"})
    r.update({k: str(v) if k in TEXT else v for k, v in kw.items()})
    return r


def frame(rows):
    return pd.DataFrame(rows, columns=COLUMNS)


EMPTY = frame([])


def full_spec(**over):
    spec = {
        "dataset": "idis-perception",
        "adapter": "imagenet9",
        "kinds": ["visual", "typographic", "size", "resolution"],
        "models": MODELS,
        "model_order": ["m1", "m2"],
        "main_prompt": "natural",
        "prompts": ["natural", "mitigate", "budget-1024"],
        "mitigation_prompts": ["mitigate"],
        "budget_prompts": {"budget-1024": 1024, "budget-256": 256},
        "extractors": ["llm", "lexical"],
        "blocking": True,
        "draws": 3,
        "bootstrap": {"level": 0.95},
    }
    spec.update(over)
    return spec


ALL_FIGURES = [
    "length_accuracy",
    "length_accuracy_semantics",
    "length_accuracy_modality",
    "budget_accuracy",
    "budget_length",
    "attributes",
    "attr_accuracy",
    "length_attributes",
    "attr_area",
    "attention_blocking",
    "size_attributes",
    "mitigation",
    "visual_tokens",
    "length_distribution",
]
ALL_TABLES = [
    "summary",
    "extractor_agreement",
    "sizes",
    "mitigation",
    "sampling",
    "attention_blocking",
]


# ---------------------------------------------------------------------------
# Names and captions
# ---------------------------------------------------------------------------


def test_names_follow_the_spec():
    spec = full_spec()
    assert idis_table_names(spec) == ALL_TABLES
    assert idis_figure_names(spec) == ALL_FIGURES
    waterbirds = {
        "dataset": "waterbirds",
        "adapter": "waterbirds",
        "kinds": [],
        "mitigation_prompts": ["waterbirds-mitigate"],
        "extractors": [],
    }
    assert idis_table_names(waterbirds) == ["summary", "mitigation"]
    assert idis_figure_names(waterbirds) == ["mitigation", "length_distribution"]
    math_spec = {"adapter": "mathverse", "kinds": ["visual", "textual"], "extractors": ["llm"]}
    assert idis_table_names(math_spec) == ["summary", "sampling"]
    assert idis_figure_names(math_spec) == [
        "length_accuracy",
        "length_accuracy_semantics",
        "length_accuracy_modality",
        "attributes",
        "attr_accuracy",
        "length_attributes",
        "length_distribution",
    ]  # no attr_area off ImageNet-9, no extractor_agreement with one extractor
    # a spec that does not list its kinds keeps the Figure 3 curves
    assert idis_figure_names({}) == ["length_accuracy", "length_distribution"]
    assert idis_table_names({}) == ["summary"]
    for name in ALL_TABLES + ALL_FIGURES:
        assert name.replace("_", "").isalnum()
    assert set(TABLE_CAPTIONS) == set(TABLE_BUILDERS) == set(ALL_TABLES)
    assert set(FIGURE_CAPTIONS) == set(FIGURE_BUILDERS) == set(ALL_FIGURES)
    for caption in [*TABLE_CAPTIONS.values(), *FIGURE_CAPTIONS.values()]:
        assert caption and not any(ch in caption for ch in "*`|\n")
        assert "Idis" in caption


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _records(table: Table) -> list[dict[str, str]]:
    return table.to_frame().to_dict("records")


def test_mitigation_table_from_semantics_and_from_waterbirds_subsets():
    g = {"model": "m1", "condition": "objects", "kind": "visual"}
    rows = [
        # natural prompt: aligned n=1 (10 responses) and n=2 (30) pool by responses
        row("accuracy", 0.9, **g, semantics="aligned", distractors=1, n=10),
        row("accuracy", 0.5, **g, semantics="aligned", distractors=2, n=30),
        row("mean_length", 100.0, **g, semantics="aligned", distractors=1, n=10),
        row("mean_length", 200.0, **g, semantics="aligned", distractors=2, n=30),
        row("accuracy", 0.2, **g, semantics="conflicting", distractors=1, n=40),
        row("mean_length", 400.0, **g, semantics="conflicting", distractors=1, n=40),
        # the pooled group must not count twice
        row("accuracy", 0.0, **g, semantics="all", distractors=1, n=50),
        # clean rows stay out of "overall"
        row("accuracy", 1.0, model="m1", condition="clean", kind="none", distractors=0, n=99),
        row("accuracy", 0.936, **g, semantics="aligned", distractors=1, n=5, prompt="mitigate"),
        row(
            "mean_length",
            635.9,
            **g,
            semantics="aligned",
            distractors=1,
            n=5,
            prompt="mitigate",
            note="2 failed request(s) left out",
        ),
    ]
    table = idis_view("table", "mitigation", frame(rows), full_spec())
    assert table.row_groups == (("Model One", 2),)
    first, second = _records(table)
    assert first["Setting"] == "prompt" and first["Prompt"] == "natural"
    assert first["Aligned: Acc."] == "60.0"  # (0.9*10 + 0.5*30) / 40
    assert first["Aligned: Len."] == "175.0"  # (100*10 + 200*30) / 40
    assert first["Conflicting: Acc."] == "20.0" and first["Conflicting: Len."] == "400.0"
    assert first["Overall: Acc."] == "40.0"  # (9 + 15 + 8) / 80
    assert first["Overall: Len."] == "287.5"  # (1000 + 6000 + 16000) / 80
    assert second["Setting"] == "+ mitigation" and second["Prompt"] == "mitigate"
    assert second["Aligned: Acc."] == "93.6" and second["Aligned: Len."] == "635.9"
    assert second["Conflicting: Acc."] == "\u2013"
    assert any(
        "Model One, aligned n=1: 2 failed request(s) left out." in f for f in table.footnotes
    )

    wb = [
        row("accuracy", 0.8, model="m2", condition="clean", kind="none", subset="aligned", n=30),
        row(
            "accuracy", 0.4, model="m2", condition="clean", kind="none", subset="conflicting", n=10
        ),
        row("accuracy", 0.7, model="m2", condition="clean", kind="none", n=40),
        row("mean_length", 321.0, model="m2", condition="clean", kind="none", n=40),
    ]
    spec = {"dataset": "waterbirds", "models": MODELS, "model_order": ["m1", "m2"]}
    spec |= {"main_prompt": "natural", "mitigation_prompts": ["mitigate"]}
    table = idis_view("table", "mitigation", frame(wb), spec)
    (only,) = _records(table)
    assert only["Model"] == "Model Two"
    assert (only["Aligned: Acc."], only["Conflicting: Acc."], only["Overall: Acc."]) == (
        "80.0",
        "40.0",
        "70.0",
    )
    assert only["Overall: Len."] == "321.0" and only["Aligned: Len."] == "\u2013"
    assert any("Waterbirds" in f for f in table.footnotes)


def test_sizes_extractor_sampling_and_blocking_tables():
    size = {"model": "m1", "condition": "manual", "kind": "size"}
    rows = [
        row("accuracy", 0.75, **size, size="small"),
        row("accuracy", 0.5, **size, size="large", note="3 failed request(s) left out"),
        row("r_attr", 0.125, **size, size="small", extractor="llm"),
        row("r_attr", 0.9, **size, size="small", extractor="lexical"),  # not the main one
        row("extractor_pearson", 0.81234, model="m2", extractor="llm vs lexical", n=412),
        row(
            "sampling_within_sd",
            55.55,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="conflicting",
        ),
        row(
            "sampling_delta",
            120.04,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="conflicting",
            ci_low=80.0,
            ci_high=160.26,
        ),
        row(
            "sampling_p_longer",
            0.3125,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="conflicting",
        ),
        row(
            "mean_length",
            500.0,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="conflicting",
            distractors=1,
        ),
        row(
            "mean_length",
            620.0,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="conflicting",
            distractors=4,
        ),
        row(
            "mean_length",
            1.0,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="aligned",
            distractors=2,
        ),
    ]
    for block, value in (("none", 0.9), ("distractor", 0.95), ("target", 0.4)):
        rows.append(
            row("blocked_accuracy", value, model="m2", condition="objects", block=block, n=200)
        )
    metrics = frame(rows)
    tables = idis_tables(metrics, full_spec())
    assert list(tables) == ALL_TABLES

    sizes = _records(tables["sizes"])
    assert sizes == [
        {
            "Model": "Model One",
            "Prompt": "natural",
            "Condition": "manual",
            "Small: Acc. (%)": "75.0",
            "Small: r_attr (%)": "12.5",
            "Medium: Acc. (%)": "\u2013",
            "Medium: r_attr (%)": "\u2013",
            "Large: Acc. (%)": "50.0",
            "Large: r_attr (%)": "\u2013",
        }
    ]
    assert any("size large: 3 failed request(s)" in f for f in tables["sizes"].footnotes)

    (agree,) = _records(tables["extractor_agreement"])
    assert agree == {
        "Model": "Model Two",
        "Prompt": "natural",
        "Extractors": "llm vs lexical",
        "Group": "all traces",
        "Pearson r": "0.812",
        "Traces": "412",
    }

    (samp,) = _records(tables["sampling"])
    assert samp["Semantics"] == "conflicting"
    assert samp["Mean length (tokens): n=1"] == "500.0"
    assert samp["Mean length (tokens): n=4"] == "620.0"
    assert "Mean length (tokens): n=2" not in samp  # only n of the sampled groups
    assert samp["Within-image SD"] == "55.5" or samp["Within-image SD"] == "55.6"
    assert samp["\u0394 (max n \u2212 1)"] == "+120.0 [+80.0, +160.3]"
    assert samp["P(1 longer)"] == "0.31"

    (block,) = _records(tables["attention_blocking"])
    assert block["Model"] == "Model Two" and block["Responses"] == "200"
    assert (block["None (%)"], block["Distractor (%)"], block["Target (%)"]) == (
        "90.0",
        "95.0",
        "40.0",
    )
    for table in tables.values():  # every table renders in both text formats
        assert to_markdown(table) and to_latex(table)


def test_summary_skips_subset_and_extractor_rows():
    rows = [
        row("accuracy", 0.5, model="m1", condition="clean", kind="none", distractors=0, n=4),
        row(
            "accuracy", 0.9, model="m1", condition="clean", kind="none", distractors=0, subset="Dog"
        ),
        row("questions", 2, model="m1", condition="clean", kind="none", distractors=0, n=2),
    ]
    (only,) = _records(idis_view("table", "summary", frame(rows), full_spec()))
    assert only["Accuracy (%)"] == "50.0" and only["Responses"] == "4"


@pytest.mark.parametrize("name", ALL_TABLES)
def test_every_table_on_empty_metrics_says_what_is_missing(name):
    table = idis_view("table", name, EMPTY, full_spec())
    assert isinstance(table, Table) and table.data.empty
    assert any("No rows" in f for f in table.footnotes)
    assert to_markdown(table)


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------


def _texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def _labels(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines()]


def _rank(model, kind, semantics, n, acc, length, **kw):
    out = []
    for r, (a, x) in enumerate(zip(acc, length, strict=True), start=1):
        g = {"model": model, "kind": kind, "semantics": semantics, "distractors": n, "rank": r}
        out.append(row("rank_accuracy", a, **g, **kw))
        out.append(row("rank_length", x, **g, **kw))
    return out


def test_length_accuracy_figures_curves():
    rows = [
        *_rank("m1", "none", "", 0, [1.0, 0.5], [10.0, 20.0], condition="clean"),
        *_rank("m2", "none", "", 0, [1.0, 0.5], [10.0, 20.0], condition="clean"),
    ]
    for sem in ("aligned", "conflicting", "irrelevant", "all"):
        for n in (1, 4):
            rows += _rank("m1", "visual", sem, n, [0.5, 0.25], [30.0, 50.0], condition="objects")
    for sem in ("handwritten", "mathwriting"):
        for n in (1, 2):
            rows += _rank("m1", "typographic", sem, n, [0.5, 0.0], [5.0, 6.0], condition="hw")
    rows += _rank("m1", "textual", "textual", 1, [0.5, 0.0], [5.0, 6.0], condition="text")
    metrics = frame(rows)
    spec = full_spec()

    fig = idis_view("figure", "length_accuracy", metrics, spec)
    assert len(fig.axes) == 2
    assert _labels(fig.axes[0]) == ["n=0", "n=1", "n=4"]  # visual pooled
    assert list(fig.axes[0].get_lines()[1].get_ydata()) == [50.0, 25.0]

    fig = idis_view("figure", "length_accuracy_semantics", metrics, spec)
    assert _labels(fig.axes[0]) == ["clean", "aligned", "conflicting", "irrelevant"]
    assert fig.axes[0].get_legend().get_title().get_text() == "n=4"
    assert "no length-rank curve of a visual" in _texts(fig)  # m2 has only clean

    fig = idis_view("figure", "length_accuracy_modality", metrics, spec)
    ax = fig.axes[0]
    assert _labels(ax) == [
        "clean",
        "handwritten n=1",
        "handwritten n=2",
        "mathwriting n=1",
        "mathwriting n=2",
        "textual n=1",
    ]
    styles = [line.get_linestyle() for line in ax.get_lines()]
    assert styles[1] == styles[2] == "-" and styles[3] == "--" and styles[5] == ":"
    colours = [line.get_color() for line in ax.get_lines()]
    assert colours[1] == colours[3] == colours[5] != colours[2]  # colour = n


def test_budget_figures_one_panel_per_semantics_one_line_per_prompt():
    rows = [row("accuracy", 0.8, model="m1", condition="clean", kind="none", distractors=0)]
    for prompt, acc in (("natural", 0.6), ("budget-256", 0.4), ("budget-1024", 0.5)):
        for sem in ("aligned", "conflicting"):
            for n in (1, 2):
                g = {"model": "m1", "condition": "objects", "kind": "visual", "semantics": sem}
                rows.append(row("accuracy", acc, **g, distractors=n, prompt=prompt))
                rows.append(row("mean_length", 100.0 * n, **g, distractors=n, prompt=prompt))
    fig = idis_view("figure", "budget_accuracy", frame(rows), full_spec())
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert _labels(ax) == ["natural", "budget 256", "budget 1024"]
    natural = ax.get_lines()[0]
    assert list(natural.get_xdata()) == [0.0, 1.0, 2.0]  # clean first
    assert list(natural.get_ydata()) == pytest.approx([80.0, 60.0, 60.0])
    assert "aligned" in ax.get_title()
    fig = idis_view("figure", "budget_length", frame(rows), full_spec())
    assert list(fig.axes[1].get_lines()[2].get_ydata()) == [100.0, 200.0]


def test_attribute_figures():
    g = {"condition": "objects", "kind": "visual", "semantics": "conflicting", "extractor": "llm"}
    rows = []
    for model in ("m1", "m2"):
        for n, total, ratio in ((1, 4.0, 0.2), (2, 6.0, 0.3)):
            rows.append(row("attributes_total", total, model=model, **g, distractors=n))
            rows.append(row("r_attr", ratio, model=model, **g, distractors=n))
            rows.append(
                row("r_attr", 0.99, model=model, **{**g, "extractor": "lexical"}, distractors=n)
            )
        for b, acc in (("0.1-0.2", 0.6), ("0.0-0.1", 0.9)):
            rows.append(row("bin_accuracy", acc, model=model, extractor="llm", bin=b))
        for b, att in (("500-1000", 8.0), ("0-500", 3.0)):
            rows.append(row("length_bin_attributes", att, model=model, extractor="llm", bin=b))
        rows.append(row("pearson_length_attributes", 0.534, model=model, extractor="llm"))
        for n in (1, 2):
            for b, ra in (("0.0-0.2", 0.1), ("0.2-0.4", 0.2 * n)):
                rows.append(row("area_bin_r_attr", ra, model=model, **g, distractors=n, bin=b))
    metrics = frame(rows)
    spec = full_spec()

    fig = idis_view("figure", "attributes", metrics, spec)
    assert len(fig.axes) == 4  # a bar axis and an r_attr twin per model
    bars = [p.get_height() for p in fig.axes[0].patches]
    assert bars == [4.0, 6.0]
    twin = [ax for ax in fig.axes if ax.get_ylabel() == "r_attr"][0]
    assert list(twin.get_lines()[0].get_ydata()) == [0.2, 0.3]  # main extractor only

    fig = idis_view("figure", "attr_accuracy", metrics, spec)
    (ax,) = fig.axes
    assert _labels(ax) == ["Model One", "Model Two"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.0-0.1", "0.1-0.2"]
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([90.0, 60.0])

    fig = idis_view("figure", "length_attributes", metrics, spec)
    (ax,) = fig.axes
    assert _labels(ax) == ["Model One (r = 0.53)", "Model Two (r = 0.53)"]
    assert list(ax.get_lines()[0].get_ydata()) == [3.0, 8.0]

    fig = idis_view("figure", "attr_area", metrics, spec)
    assert len(fig.axes) == 2 and _labels(fig.axes[0]) == ["n=1", "n=2"]
    assert list(fig.axes[0].get_lines()[1].get_ydata()) == pytest.approx([0.1, 0.4])


def test_blocking_size_mitigation_tokens_and_distribution_figures():
    rows = []
    for model in ("m1", "m2"):
        for block, value in (("none", 0.9), ("distractor", 0.95)):  # target missing
            rows.append(
                row("blocked_accuracy", value, model=model, condition="objects", block=block)
            )
        for s, acc, ra in (("small", 0.8, 0.1), ("large", 0.6, 0.3)):
            g = {"model": model, "condition": "manual", "kind": "size", "size": s}
            rows.append(row("accuracy", acc, **g))
            rows.append(row("r_attr", ra, **g, extractor="llm"))
        for res, length, acc in ((256, 300.0, 0.5), (1024, 500.0, 0.7)):
            g = {"model": model, "condition": "resize", "kind": "resolution", "resolution": res}
            rows += [row("mean_length", length, **g), row("accuracy", acc, **g)]
            rows += _rank(
                model,
                "resolution",
                "",
                "",
                [acc, acc],
                [length, length + 1],
                **{
                    "condition": "resize",
                    "resolution": res,
                },
            )
        for n in (0, 1):
            kind = "none" if n == 0 else "visual"
            for b, q in zip(("0.10", "0.25", "0.50", "0.75", "0.90"), (1, 2, 3, 4, 5), strict=True):
                g = {"model": model, "kind": kind, "distractors": n, "bin": b}
                rows.append(
                    row("length_quantile", q * 100.0 * (n + 1), **g, semantics="all" if n else "")
                )
                if n == 0:
                    for cls in ("Dog", "Bird"):
                        rows.append(row("length_quantile", q * 10.0, **g, subset=cls))
    rows.append(
        row(
            "accuracy",
            0.5,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="aligned",
            distractors=1,
        )
    )
    rows.append(
        row(
            "accuracy",
            0.7,
            model="m1",
            condition="objects",
            kind="visual",
            semantics="aligned",
            distractors=1,
            prompt="mitigate",
        )
    )
    metrics = frame(rows)
    spec = full_spec()

    fig = idis_view("figure", "attention_blocking", metrics, spec)
    (ax,) = fig.axes
    assert len(ax.patches) == 3 * 2  # none / distractor / target for each model
    heights = [p.get_height() for p in ax.patches]
    assert heights[:2] == pytest.approx([90.0, 90.0]) and all(math.isnan(h) for h in heights[4:])
    assert "n/a" in _texts(fig)

    fig = idis_view("figure", "size_attributes", metrics, spec)
    assert len(fig.axes) == 2
    assert [round(p.get_height(), 6) for p in fig.axes[0].patches] == [80.0, 60.0, 10.0, 30.0]

    fig = idis_view("figure", "mitigation", metrics, spec)
    assert len(fig.axes) == 4  # accuracy (top) and r_attr (bottom) per model
    ax = fig.axes[0]
    # m2 has no distractor semantics, and no model an r_attr of a semantics
    assert _texts(fig).count("no ") == 3 and not fig.axes[1].patches
    assert [t.get_text() for t in ax.get_xticklabels()] == ["aligned", "conflicting", "overall"]
    assert [round(p.get_height(), 6) for p in ax.patches][:3:2] == [50.0, 50.0]
    assert ax.get_legend_handles_labels()[1] == ["natural", "+ mitigate"]

    fig = idis_view("figure", "visual_tokens", metrics, spec)
    assert len(fig.axes) == 6  # (a), (b), (c) per model
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == [300.0, 500.0]
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == pytest.approx([50.0, 70.0])
    assert _labels(fig.axes[2]) == ["256 px", "1024 px"]

    fig = idis_view("figure", "length_distribution", metrics, spec)
    assert len(fig.axes) == 4  # (a) by n, (b) by class, per model
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0", "1"]
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["Bird", "Dog"]
    median = [line for line in fig.axes[0].get_lines() if list(line.get_ydata()) == [300.0, 300.0]]
    assert median  # the clean median (0.50 quantile) drawn as the box's line
    fig = idis_view("figure", "length_distribution", metrics, full_spec(adapter="mathverse"))
    assert len(fig.axes) == 2  # by n only


def test_attr_accuracy_pools_the_groups_of_a_kind_by_traces():
    g = {"model": "m1", "condition": "objects", "kind": "visual", "extractor": "llm"}
    rows = [
        row("bin_accuracy", 0.8, **g, semantics="conflicting", distractors=1, bin="0.0-0.1", n=10),
        row("bin_accuracy", 0.4, **g, semantics="irrelevant", distractors=2, bin="0.0-0.1", n=30),
        # the pooled group and another extractor must not count
        row("bin_accuracy", 0.0, **g, semantics="all", distractors=1, bin="0.0-0.1", n=40),
        row(
            "bin_accuracy",
            0.0,
            **{**g, "extractor": "lexical"},
            semantics="irrelevant",
            distractors=1,
            bin="0.0-0.1",
            n=40,
        ),
    ]
    fig = idis_view("figure", "attr_accuracy", frame(rows), full_spec())
    (ax,) = fig.axes
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([50.0])  # (8 + 12) / 40
    assert "visual distractors" in ax.get_xlabel()


@pytest.mark.parametrize("name", ALL_FIGURES)
def test_every_figure_on_empty_metrics_draws_a_placeholder(name):
    fig = idis_view("figure", name, EMPTY, full_spec())
    assert isinstance(fig, Figure)
    assert "no " in _texts(fig)


def test_idis_view_builds_one_view_and_names_an_unknown_one():
    assert isinstance(idis_view("table", "summary", EMPTY, full_spec()), Table)
    with pytest.raises(ValueError, match="'nonsense'"):
        idis_view("figure", "nonsense", EMPTY, full_spec())
    with pytest.raises(ValueError, match="'sizes_x'"):
        idis_view("table", "sizes_x", EMPTY, full_spec())
    with pytest.raises(ValueError, match="'chart'"):
        idis_view("chart", "summary", EMPTY, full_spec())
    spec = {"dataset": "waterbirds", "kinds": [], "mitigation_prompts": ["m"]}
    assert list(idis_figures(EMPTY, spec)) == ["mitigation", "length_distribution"]


def test_row_notes_say_every_group_instead_of_listing_them():
    from vlmrobust.report.tables.idis import RowNotes

    notes = RowNotes()
    rows = pd.DataFrame(
        [
            {"condition": "clean", "kind": "none", "note": "length = completion tokens"},
            {"condition": "o", "kind": "visual", "semantics": "aligned", "distractors": "1",
             "note": "length = completion tokens"},
            {"condition": "o", "kind": "visual", "semantics": "conflicting", "distractors": "1",
             "note": "2 zero-attribute trace(s) left out"},
        ]
    )  # fmt: skip
    notes.add("Model One", rows)
    notes.add("Model Two", rows.iloc[:1])
    notes.add("Model Three", rows.iloc[:2])
    assert notes.lines() == (
        "Model One, clean, aligned n=1: length = completion tokens.",
        "Model One, conflicting n=1: 2 zero-attribute trace(s) left out.",
        "Model Two, clean: length = completion tokens.",
        "Model Three, every group: length = completion tokens.",
    )

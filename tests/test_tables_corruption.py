"""Corruption-study tables (paper Tables 1, 2, 8, 9, 10): cells against hand-made metrics."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from vlmrobust.report.tables.corruption import (
    METRIC_COLUMNS,
    benchmark_label,
    benchmark_order,
    corruption_table_names,
    corruption_tables,
    write_corruption_tables,
)
from vlmrobust.report.tables.render import (
    Table,
    fmt_count,
    fmt_gap_ci,
    fmt_jaccard,
    fmt_pct,
    fmt_signed_pct,
    latex_escape,
    to_latex,
    to_markdown,
)

NAN = math.nan
COND = "corrupt"

SPEC = {
    "models": {
        "q25": {"name": "Qwen2.5-VL-7B", "family": "qwen2.5-vl", "role": "base", "base": None},
        "r1": {"name": "R1-OneVision", "family": "qwen2.5-vl", "role": "reasoning", "base": "q25"},
        # No display name: the id (with an underscore) is shown.
        "mm_eureka": {"name": None, "family": "qwen2.5-vl", "role": "reasoning", "base": "q25"},
        "q3i": {"name": "Qwen3-VL-8B", "family": "qwen3-vl", "role": "base", "base": None},
        "q3t": {
            "name": "Qwen3-VL-8B-Thinking (T&R)",
            "family": "qwen3-vl",
            "role": "reasoning",
            "base": "q3i",
        },
    },
    # Run order interleaves the families: tables group them, base first.
    "model_order": ["q25", "r1", "q3i", "mm_eureka", "q3t"],
    "datasets": {
        "chartqa": {"group": "general", "display": "ChartQA"},
        "mathvista": {"group": "reasoning", "display": "MathVista"},
    },
    "clean_condition": "clean",
    "perturbed_conditions": [COND],
}

BENCH_GROUP = {"chartqa": "general", "mathvista": "reasoning"}
# model -> benchmark -> (clean acc, corrupted acc, RR, note of the RR row); None = missing.
VALUES = {
    "q25": {"mathvista": (0.466, 0.402, 0.899, ""), "chartqa": (0.730, 0.607, 0.845, "")},
    "r1": {
        "mathvista": (0.0, 0.0, NAN, "clean accuracy 0"),
        "chartqa": (0.703, 0.563, 0.816, ""),
    },
    "mm_eureka": {"mathvista": (0.504, 0.452, 0.916, ""), "chartqa": (0.724, 0.604, 0.849, "")},
    "q3i": {"mathvista": (0.704, 0.647, 0.924, ""), "chartqa": (0.749, 0.639, 0.863, "")},
    "q3t": {"mathvista": (0.714, 0.652, 0.920, ""), "chartqa": None},
}
# reasoning -> (base, pair_n, agreement, gap, gap_low, gap_high, jaccard, fingerprint r)
PAIRS = {
    "r1": ("q25", 10100, 0.864, 0.058, 0.052, 0.064, 0.566, 0.93),
    "mm_eureka": ("q25", 11400, 0.969, -0.001, -0.004, 0.001, 0.870, 0.97),
    "q3t": ("q3i", 11200, 0.892, 0.027, 0.022, 0.032, 0.578, NAN),
}


def row(metric, model, benchmark="", condition="", value=NAN, **kw):
    entry = SPEC["models"].get(model, {})
    out = {c: "" for c in METRIC_COLUMNS}
    out.update(
        metric=metric,
        model=model,
        base_model=entry.get("base") or "",
        family=entry.get("family", ""),
        role=entry.get("role", ""),
        benchmark=benchmark,
        group=BENCH_GROUP.get(
            benchmark, benchmark if benchmark in ("reasoning", "general") else ""
        ),
        condition=condition,
        severity=NAN,
        value=value,
        ci_low=NAN,
        ci_high=NAN,
        n=NAN,
    )
    out.update(kw)
    return out


def make_metrics(values=VALUES, pairs=PAIRS) -> pd.DataFrame:
    rows = []
    for model, benches in values.items():
        for bench, vals in benches.items():
            if vals is None:
                rows.append(row("missing", model, bench, note="no scored outputs"))
                continue
            clean, corrupt, rr, note = vals
            for b in (bench, BENCH_GROUP[bench]):  # one benchmark per group
                rows.append(row("accuracy", model, b, "clean", clean, n=100.0))
                rows.append(row("accuracy", model, b, COND, corrupt, n=100.0))
                rows.append(row("rr", model, b, COND, rr, note=note))
        if any(v is None for v in benches.values()):
            for cond, metric in (("clean", "accuracy"), (COND, "accuracy"), (COND, "rr")):
                rows.append(row(metric, model, "general", cond, note="missing: chartqa"))
    for reas, (base, n, agree, gap, lo, hi, jac, r) in pairs.items():
        common = {"base_model": base}
        rows.append(row("pair_n", reas, "all", COND, float(n), **common))
        rows.append(row("agreement", reas, "all", COND, agree, n=float(n), **common))
        rows.append(row("retention_gap", reas, "all", COND, gap, ci_low=lo, ci_high=hi, **common))
        rows.append(row("error_jaccard", reas, "all", COND, jac, **common))
        # A per-benchmark pair row that the pooled table must not pick up.
        rows.append(row("agreement", reas, "mathvista", COND, 0.5, **common))
        rows.append(row("rr_fingerprint_corr", reas, "all", COND, r, **common))
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def cell(table: Table, model_name: str, column: str) -> str:
    frame = table.to_frame()
    first = frame.columns[1] if "Family" in frame.columns else frame.columns[0]
    hit = frame[frame[first] == model_name]
    assert len(hit) == 1, f"{model_name!r} not once in {frame[first].tolist()}"
    return hit.iloc[0][column]


# ---------------------------------------------------------------------------
# Number formats
# ---------------------------------------------------------------------------


def test_number_formats_follow_the_paper():
    assert fmt_pct(0.466) == "46.6"
    assert fmt_pct(0.8995) == "90.0"  # half away from zero, despite binary noise
    assert fmt_pct(1.0) == "100.0"
    assert fmt_pct(NAN) == "\u2013"
    assert fmt_pct(None) == "\u2013"
    assert fmt_signed_pct(0.058) == "+5.8"
    assert fmt_signed_pct(-0.0001) == "+0.0"  # never "-0.0"
    assert fmt_gap_ci(0.058, 0.052, 0.064) == "+5.8 [+5.2, +6.4]"
    assert fmt_gap_ci(-0.001, -0.004, 0.001) == "-0.1 [-0.4, +0.1]"
    assert fmt_gap_ci(0.019, NAN, NAN) == "+1.9"
    assert fmt_jaccard(0.566) == ".566"
    assert fmt_jaccard(0.0) == ".000"
    assert fmt_jaccard(1.0) == "1.000"
    assert fmt_count(506) == "506"
    assert fmt_count(10100) == "10.1k"
    assert fmt_count(11449) == "11.4k"
    assert fmt_count(999_960) == "1.0M"
    assert fmt_count(NAN) == "\u2013"


def test_latex_escape_and_signs():
    assert latex_escape("mm_eureka & 50% #1 {x}") == r"mm\_eureka \& 50\% \#1 \{x\}"
    assert latex_escape("+5.8 [+5.2, -6.4]") == "$+$5.8 [$+$5.2, $-$6.4]"
    # A hyphen inside a name is not a minus sign.
    assert latex_escape("Qwen2.5-VL-7B\u2192R1") == r"Qwen2.5-VL-7B$\rightarrow$R1"
    assert latex_escape("\u2013") == "--"


def test_table_rejects_unformatted_cells_and_bad_groups():
    with pytest.raises(TypeError, match="column 'x', row 0"):
        Table(data=pd.DataFrame({"x": [0.5]}, dtype=object))
    with pytest.raises(ValueError, match="row group sizes"):
        Table(data=pd.DataFrame({"x": ["a", "b"]}), row_groups=(("g", 1),))


# ---------------------------------------------------------------------------
# Table cells
# ---------------------------------------------------------------------------


def test_table1_cells_rows_and_footnotes():
    t = corruption_tables(make_metrics(), SPEC)["table1"]
    frame = t.to_frame()
    assert list(frame.columns) == [
        "Family",
        "Model",
        "Type",
        "Reasoning: Clean Acc. (%)",
        "Reasoning: Corrupted Acc. (%)",
        "Reasoning: RR (%)",
        "General: Clean Acc. (%)",
        "General: Corrupted Acc. (%)",
        "General: RR (%)",
    ]
    # Grouped by family, base first, in run order within the family.
    assert frame["Model"].tolist() == [
        "Qwen2.5-VL-7B",
        "R1-OneVision",
        "mm_eureka",
        "Qwen3-VL-8B",
        "Qwen3-VL-8B-Thinking (T&R)",
    ]
    assert frame["Family"].tolist() == ["Qwen2.5-VL family"] * 3 + ["Qwen3-VL family"] * 2
    assert frame["Type"].tolist() == ["Base", "Reas.", "Reas.", "Base", "Reas."]
    assert t.row_groups == (("Qwen2.5-VL family", 3), ("Qwen3-VL family", 2))
    assert cell(t, "Qwen2.5-VL-7B", "Reasoning: Clean Acc. (%)") == "46.6"
    assert cell(t, "Qwen2.5-VL-7B", "Reasoning: Corrupted Acc. (%)") == "40.2"
    assert cell(t, "Qwen2.5-VL-7B", "Reasoning: RR (%)") == "89.9"
    assert cell(t, "Qwen2.5-VL-7B", "General: RR (%)") == "84.5"
    assert cell(t, "R1-OneVision", "Reasoning: Clean Acc. (%)") == "0.0"
    assert cell(t, "R1-OneVision", "Reasoning: RR (%)") == "\u2013"
    assert cell(t, "Qwen3-VL-8B-Thinking (T&R)", "General: Clean Acc. (%)") == "\u2013"
    assert t.footnotes == (
        "\u2013 R1-OneVision, Reasoning RR (%): clean accuracy 0.",
        "\u2013 Qwen3-VL-8B-Thinking (T&R), General Clean Acc. (%), General Corrupted Acc. "
        "(%), General RR (%): missing: chartqa.",
    )
    assert t.header_groups == [("", 1), ("", 1), ("Reasoning", 3), ("General", 3)]


def test_a_note_on_a_cell_with_a_value_is_a_footnote_without_dash():
    metrics = make_metrics()
    hit = (
        (metrics["metric"] == "accuracy")
        & (metrics["model"] == "q3i")
        & (metrics["benchmark"] == "general")
        & (metrics["condition"] == "clean")
    )
    metrics.loc[hit, "note"] = "missing: infovqa"
    t = corruption_tables(metrics, SPEC)["table1"]
    assert cell(t, "Qwen3-VL-8B", "General: Clean Acc. (%)") == "74.9"
    assert "Qwen3-VL-8B, General Clean Acc. (%): missing: infovqa." in t.footnotes


def test_table2_pairs_gap_ci_and_mean_row():
    t = corruption_tables(make_metrics(), SPEC)["table2"]
    frame = t.to_frame()
    assert list(frame.columns) == [
        "Pair",
        "N",
        "Agreement (%)",
        "Retention gap @ 90% CI",
        "Error overlap (Jaccard)",
    ]
    assert frame.values.tolist() == [
        ["Qwen2.5-VL-7B\u2192R1-OneVision", "10.1k", "86.4", "+5.8 [+5.2, +6.4]", ".566"],
        ["Qwen2.5-VL-7B\u2192mm_eureka", "11.4k", "96.9", "-0.1 [-0.4, +0.1]", ".870"],
        [
            "Qwen3-VL-8B\u2192Qwen3-VL-8B-Thinking (T&R)",
            "11.2k",
            "89.2",
            "+2.7 [+2.2, +3.2]",
            ".578",
        ],
        # By hand: (86.4 + 96.9 + 89.2) / 3 = 90.83; (5.8 - 0.1 + 2.7) / 3 = 2.8;
        # (.566 + .870 + .578) / 3 = .6713.
        ["Mean", "\u2013", "90.8", "+2.8", ".671"],
    ]
    # The Mean row sits below a rule of its own.
    assert t.row_groups == (("", 3), ("", 1))


def test_table2_mean_skips_a_pair_without_values():
    pairs = dict(PAIRS)
    metrics = make_metrics(pairs=pairs)
    keep = ~((metrics["metric"] == "error_jaccard") & (metrics["model"] == "q3t"))
    t = corruption_tables(metrics[keep], SPEC)["table2"]
    frame = t.to_frame()
    assert frame.iloc[2]["Error overlap (Jaccard)"] == "\u2013"
    assert frame.iloc[3]["Error overlap (Jaccard)"] == ".718"  # (.566 + .870) / 2
    assert any("error overlap: not in the metrics table" in f for f in t.footnotes)


def test_tables_8_9_10_models_by_benchmark_with_missing_cell():
    tables = corruption_tables(make_metrics(), SPEC)
    t8, t9, t10 = tables["table8"], tables["table9"], tables["table10"]
    for t in (t8, t9, t10):
        # Config order (chartqa before mathvista), not alphabetical nor by group.
        assert list(t.to_frame().columns) == ["Family", "Model", "Type", "ChartQA", "MathVista"]
    assert cell(t8, "Qwen2.5-VL-7B", "MathVista") == "46.6"
    assert cell(t9, "Qwen2.5-VL-7B", "ChartQA") == "60.7"
    assert cell(t10, "Qwen3-VL-8B", "MathVista") == "92.4"
    assert cell(t10, "R1-OneVision", "MathVista") == "\u2013"
    for t in (t8, t9, t10):
        assert cell(t, "Qwen3-VL-8B-Thinking (T&R)", "ChartQA") == "\u2013"
        assert "\u2013 Qwen3-VL-8B-Thinking (T&R) on ChartQA: no scored outputs." in t.footnotes
    assert "\u2013 R1-OneVision on MathVista: clean accuracy 0." in t10.footnotes
    assert len(t8.footnotes) == 1


def test_benchmark_order_and_labels_for_prompt_variants():
    spec = dict(SPEC)
    spec["datasets"] = {
        "mathvista": {
            "group": "reasoning",
            "display": "MathVista",
            "prompts": ["mathvista-format", "mathvista-cot"],
        },
        "chartqa": {"group": "general"},
    }
    rows = [
        row("accuracy", "q25", b, "clean", 0.5)
        for b in ("chartqa", "mathvista:mathvista-cot", "mathvista:mathvista-format", "extra")
    ]
    from vlmrobust.metrics.index import MetricsIndex

    index = MetricsIndex(pd.DataFrame(rows, columns=list(METRIC_COLUMNS)))
    assert benchmark_order(index, spec) == [
        "mathvista:mathvista-format",
        "mathvista:mathvista-cot",
        "chartqa",
        "extra",
    ]
    assert benchmark_label("mathvista:mathvista-cot", spec) == "MathVista (cot)"
    assert benchmark_label("chartqa", spec) == "chartqa"


# ---------------------------------------------------------------------------
# Files: CSV, Markdown, LaTeX
# ---------------------------------------------------------------------------


def _strip_escaped_braces(tex: str) -> str:
    return tex.replace(r"\{", "").replace(r"\}", "")


def test_written_files_csv_round_trip_markdown_and_latex(tmp_path):
    metrics = make_metrics()
    paths = write_corruption_tables(metrics, SPEC, tmp_path)
    stems = ["table1", "table2", "table8", "table9", "table10"]
    assert corruption_table_names(SPEC) == stems
    assert [p.name for p in paths] == [f"{s}.{ext}" for s in stems for ext in ("csv", "md", "tex")]
    assert all(p.is_file() for p in paths)
    assert not list(tmp_path.glob(".*.tmp"))
    tables = corruption_tables(metrics, SPEC)

    for stem in stems:
        back = pd.read_csv(tmp_path / f"{stem}.csv", dtype=str, keep_default_na=False)
        pd.testing.assert_frame_equal(back, tables[stem].to_frame().astype(str))

        tex = (tmp_path / f"{stem}.tex").read_text(encoding="utf-8")
        body = "\n".join(line for line in tex.splitlines() if not line.startswith("%"))
        for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}"):
            assert rule in body
        stripped = _strip_escaped_braces(body)
        depth = 0
        for ch in stripped:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0
        assert depth == 0
        assert not re.search(r"(?<!\\)[_%&#]", body.replace(" & ", " ")), stem
        assert not re.search(r"[^\x00-\x7f]", body), "non-ASCII left in LaTeX"

    tex1 = (tmp_path / "table1.tex").read_text(encoding="utf-8")
    assert r"\multicolumn{3}{c}{Reasoning} & \multicolumn{3}{c}{General} \\" in tex1
    assert r"\cmidrule(lr){3-5} \cmidrule(lr){6-8}" in tex1
    assert r"\multicolumn{8}{l}{\textit{Qwen2.5-VL family}} \\" in tex1
    assert r"mm\_eureka & Reas. & 50.4 & 45.2 & 91.6 & 72.4 & 60.4 & 84.9 \\" in tex1
    assert r"Qwen3-VL-8B-Thinking (T\&R)" in tex1
    assert r"Clean Acc. (\%)" in tex1
    assert r"\begin{tabular}{llrrrrrr}" in tex1
    assert "R1-OneVision, Reasoning RR (\\%): clean accuracy 0.\\par" in tex1
    tex2 = (tmp_path / "table2.tex").read_text(encoding="utf-8")
    assert (
        r"Qwen2.5-VL-7B$\rightarrow$R1-OneVision & 10.1k & 86.4 & $+$5.8 [$+$5.2, $+$6.4] & .566 \\"
        in tex2
    )
    assert "\\midrule\nMean & -- & 90.8 & $+$2.8 & .671 \\\\\n\\bottomrule" in tex2

    md1 = (tmp_path / "table1.md").read_text(encoding="utf-8")
    lines = md1.splitlines()
    header = next(line for line in lines if line.startswith("| Model"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Model",
        "Type",
        "Reasoning: Clean Acc. (%)",
        "Reasoning: Corrupted Acc. (%)",
        "Reasoning: RR (%)",
        "General: Clean Acc. (%)",
        "General: Corrupted Acc. (%)",
        "General: RR (%)",
    ]
    rule = lines[lines.index(header) + 1]
    assert re.fullmatch(r"\| :-+ \| :-+( \| -+:){6} \|", rule)
    assert any(line.startswith("| **Qwen3-VL family**") for line in lines)
    row = next(line for line in lines if line.startswith("| Qwen2.5-VL-7B "))
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "Qwen2.5-VL-7B", "Base", "46.6", "40.2", "89.9", "73.0", "60.7", "84.5"
    ]  # fmt: skip
    notes = lines[lines.index("Notes:") :]
    assert "- \u2013 R1-OneVision, Reasoning RR (%): clean accuracy 0." in notes
    md8 = (tmp_path / "table8.md").read_text(encoding="utf-8")
    assert "- \u2013 Qwen3-VL-8B-Thinking (T&R) on ChartQA: no scored outputs." in md8


def test_markdown_escapes_pipes_and_latex_guards_leading_bracket():
    t = Table(data=pd.DataFrame({"a|b": ["x|y"], "c": ["[1, 2]"]}), footnotes=("n",))
    md = to_markdown(t)
    assert "a\\|b" in md and "x\\|y" in md
    assert "{}[1, 2] \\\\" in to_latex(t)


def test_several_perturbed_conditions_get_one_file_each(tmp_path):
    spec = dict(SPEC, perturbed_conditions=[COND, "blur"])
    assert corruption_table_names(spec) == [
        "table1_corrupt",
        "table1_blur",
        "table2_corrupt",
        "table2_blur",
        "table8",
        "table9_corrupt",
        "table9_blur",
        "table10_corrupt",
        "table10_blur",
    ]
    tables = corruption_tables(make_metrics(), spec)
    assert cell(tables["table1_corrupt"], "Qwen2.5-VL-7B", "Reasoning: RR (%)") == "89.9"
    # Nothing was computed for "blur": dashes with a footnote, no crash.
    assert cell(tables["table1_blur"], "Qwen2.5-VL-7B", "Reasoning: blur Acc. (%)") == "\u2013"
    assert tables["table1_blur"].footnotes


def test_bad_metrics_tables_are_errors_that_say_what_is_wrong():
    metrics = make_metrics()
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['note'\]"):
        corruption_tables(metrics.drop(columns=["note"]), SPEC)
    dup = pd.concat([metrics, metrics.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match="2 rows for metric='accuracy', model='q25'"):
        corruption_tables(dup, SPEC)
    bad = metrics.astype({"value": object})
    bad.loc[0, "value"] = "high"
    with pytest.raises(ValueError, match="column 'value' holds a non-number"):
        corruption_tables(bad, SPEC)


def test_reads_the_csv_as_written_by_pandas(tmp_path):
    """Empty text cells come back as NaN from read_csv: they must read as ''."""
    path = tmp_path / "metrics.csv"
    make_metrics().to_csv(path, index=False)
    metrics = pd.read_csv(path)
    direct = corruption_tables(make_metrics(), SPEC)
    again = corruption_tables(metrics, SPEC)
    for name, table in direct.items():
        pd.testing.assert_frame_equal(again[name].to_frame(), table.to_frame())
        assert again[name].footnotes == table.footnotes

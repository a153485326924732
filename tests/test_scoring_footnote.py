"""Every table's scoring footnote is read from the scored rows it is built from (their
``mode``, ``method``, ``rule``, ``other_correct``), through the study's metrics, never
from the configuration's ``scoring`` section (docs/scoring.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from vlmrobust.core.scored import SCORED_COLUMNS
from vlmrobust.metrics.core import read_metrics
from vlmrobust.metrics.scoring import recorded_scoring, scoring_rows
from vlmrobust.plan import RunPlan
from vlmrobust.studies import STUDIES
from vlmrobust.studies.base import scoring_note

RELEASE = "lmms-eval 0.7.2 (= 13fd645a)"
MODELS = ("demo-base", "demo-reasoning")
DATASETS = ("demo-chart", "demo-yesno")


def scored_rows(dataset: str, model: str, condition: str, how: dict) -> list[dict]:
    """Three scored rows (two right) of one model, dataset and condition, with the
    scoring columns ``how`` gives."""
    return [
        {
            "key": f"{dataset}-{i}#0",
            "variant_id": f"{dataset}-{i}",
            "sample_id": f"{dataset}-{i}",
            "dataset": dataset,
            "condition": condition,
            "prompt": "default",
            "model": model,
            "draw": 0,
            "correct": int(i < 2),
            "score": float(i < 2),
            "method": "rule",
            **how,
        }
        for i in range(3)
    ]


def corruption_tables(tmp_path: Path, plan: RunPlan, how: dict, columns=SCORED_COLUMNS):
    """The corruption study of the default run's spec on two datasets whose scored files
    (written with ``columns``) were scored as ``how`` says per dataset: its table 1's
    last footnote, its metrics and its warnings."""
    study = STUDIES["corruption"]
    spec = study.run_spec(plan, "")
    assert "scoring" not in spec  # the configuration's scoring is not the tables'
    spec["datasets"] = {d: spec["datasets"][d] for d in DATASETS}
    scored = []
    for dataset in DATASETS:
        for model in MODELS:
            for condition in ("clean", "corrupt"):
                path = tmp_path / "scored" / model / dataset / condition / "default.csv"
                path.parent.mkdir(parents=True, exist_ok=True)
                rows = scored_rows(dataset, model, condition, how[dataset])
                frame = pd.DataFrame(rows).reindex(columns=list(columns))
                frame.to_csv(path, index=False)
                scored.append(str(path))
    metrics, warnings = tmp_path / "metrics.csv", tmp_path / "warnings.txt"
    study.write_metrics({"scored": scored}, spec, metrics, warnings)
    study.write_table("table1", metrics, {}, spec, tmp_path / "tables")
    md = (tmp_path / "tables" / "table1.md").read_text(encoding="utf-8")
    footnote = md.rstrip("\n").splitlines()[-1]
    return footnote, read_metrics(metrics), warnings.read_text(encoding="utf-8")


def test_the_footnote_follows_the_rows_where_the_config_says_otherwise(tmp_path, plan):
    """The default configuration says extract, without the other mode; the rows were
    scored by the harness (one dataset) with the other mode's verdicts: the footnote
    says what the rows say."""
    assert plan.config["scoring"]["mode"] == "extract"
    assert not plan.config["scoring"]["compare_modes"]
    rule = f"{RELEASE} tasks/chartqa/utils.py chartqa_process_results"
    how = {
        "demo-chart": {"mode": "harness", "rule": rule, "other_correct": 1},
        "demo-yesno": {"mode": "extract"},
    }
    footnote, metrics, warnings = corruption_tables(tmp_path, plan, how)
    assert footnote == (
        f"- Scoring: the papers' harness, {RELEASE} task code (scoring.mode harness) on "
        "demo-chart; the project's answer extraction on demo-yesno (no harness scorer); the "
        "other mode's differing verdicts are counted in the notes."
    )
    rows = metrics[metrics["metric"].str.startswith("scoring_")]
    assert rows[["metric", "benchmark", "method", "n", "note"]].values.tolist() == [
        ["scoring_mode", "demo-chart", "harness", 12, RELEASE],
        ["scoring_compared", "demo-chart", "", 12, ""],
        ["scoring_mode", "demo-yesno", "extract", 12, ""],
    ]
    assert "do not record their scoring mode" not in warnings


def test_rows_that_agree_with_the_config_give_the_footnote_it_gave(tmp_path, plan):
    """The default run: extract rows, no other mode: the footnote the configuration
    wrote before (the default run's tables are unchanged)."""
    how = {d: {"mode": "extract"} for d in DATASETS}
    footnote, _, _ = corruption_tables(tmp_path, plan, how)
    old = {"mode": "extract", "harness": [], "extract": list(DATASETS), "offline": []}
    assert footnote == "- " + scoring_note({**old, "compare": False})
    assert footnote == "- Scoring: the project's answer extraction (scoring.mode extract)."


def test_rows_without_a_mode_column_say_it_is_not_recorded(tmp_path, plan):
    """Files of an older version (no scoring columns): the footnote says the rows do not
    record the mode, and warnings.txt says which dataset; never the config's mode."""
    old_columns = [c for c in SCORED_COLUMNS if c not in ("mode", "harness_bug", "corrected")]
    old_columns.remove("other_correct")
    how = {d: {} for d in DATASETS}
    footnote, _, warnings = corruption_tables(tmp_path, plan, how, old_columns)
    assert footnote == (
        "- Scoring: the mode is not recorded in the scored rows (no mode column: files of "
        "an older version, or released verdicts)."
    )
    for dataset in DATASETS:
        assert f"dataset {dataset}: 12 scored row(s) do not record their scoring mode" in warnings


def test_some_rows_without_a_mode_are_named():
    df = pd.DataFrame(
        {
            "dataset": ["b", "b", "a", "c"],
            "mode": ["extract", "extract", None, "extract"],
            "method": ["rule"] * 4,
        }
    )
    warnings: list[str] = []
    rows = pd.DataFrame(scoring_rows(df, ["a", "b"], warnings))
    assert rows["benchmark"].tolist() == ["a", "b", "c"]  # the spec's order, then sorted
    assert scoring_note(recorded_scoring(rows)) == (
        "Scoring: the project's answer extraction (scoring.mode extract) on b, c; the mode "
        "is not recorded in the scored rows of a."
    )
    assert warnings == [
        "dataset a: 1 scored row(s) do not record their scoring mode (no mode column: files "
        "of an older version or released verdicts); the tables' scoring footnote says so"
    ]


def test_the_paper_runs_footnote_from_its_rows():
    """The paper's harness mode without a judge: the footnote the configuration gave,
    now from the rows (the release too: the one the rows name, not the installed one)."""
    other = "lmms-eval 0.6 (not checked against 13fd645a)"
    df = pd.DataFrame(
        {
            "dataset": ["mmmu", "hallusionbench", "distract-bench", "mmmu"],
            "mode": ["harness", "harness", "extract", "harness"],
            "method": ["random", "offline-rule", "rule", "rule"],
            "rule": [f"{RELEASE} tasks/mmmu", f"{RELEASE} tasks/hb", "", f"{other} tasks/mmmu"],
            "other_correct": [1, 0, None, 1],
        }
    )
    order = ["mmmu", "hallusionbench", "distract-bench"]
    found = recorded_scoring(pd.DataFrame(scoring_rows(df, order, [])))
    assert found == {
        "mode": "harness",
        "harness": ["mmmu", "hallusionbench"],
        "extract": ["distract-bench"],
        "unrecorded": [],
        "offline": ["hallusionbench"],
        "compare": True,
        "version": f"{RELEASE} and {other}",
    }
    config = {k: found[k] for k in ("mode", "harness", "extract", "offline", "compare")}
    assert scoring_note(found) == scoring_note({**config, "version": f"{RELEASE} and {other}"})
    assert scoring_note(found).startswith(
        f"Scoring: the papers' harness, {RELEASE} and {other} task code (scoring.mode harness) "
        "on mmmu, hallusionbench; the project's answer extraction on distract-bench"
    )


def test_a_study_without_scoring_rows_has_no_scoring_footnote():
    """Metrics without scoring rows (a study whose numbers rest on no scored verdict)."""
    metrics = pd.DataFrame({"metric": ["accuracy"], "benchmark": ["x"], "method": [""]})
    assert recorded_scoring(metrics) is None and scoring_note(None) == ""


def test_the_views_read_the_metrics_without_their_scoring_rows(tmp_path):
    """A scoring row's ``benchmark`` is a dataset: a dataset under two prompt settings
    (``ds2:p1``, ``ds2:p2``) gets no column of its own; the tables change by their
    footnote alone."""
    from vlmrobust.metrics import compute_corruption_metrics, write_metrics
    from vlmrobust.metrics.scoring import add_scoring_rows

    from .test_metrics_corruption import make_rows, make_spec, make_variants

    rows, spec = make_rows().assign(mode="extract"), make_spec()
    metrics, warnings = compute_corruption_metrics(rows, make_variants(), spec)
    recorded = add_scoring_rows(metrics, rows, spec, warnings)
    assert recorded["benchmark"].iloc[len(metrics) :].tolist() == ["ds1", "ds2"]
    study = STUDIES["corruption"]
    for name, frame in (("plain", metrics), ("recorded", recorded)):
        write_metrics(frame, tmp_path / name / "metrics.csv")
        for table in study.table_names(spec):
            study.write_table(table, tmp_path / name / "metrics.csv", {}, spec, tmp_path / name)
    tables = sorted((tmp_path / "plain").glob("table*.csv"))
    assert {t.stem for t in tables} == {"table1", "table2", "table8", "table9", "table10"}
    header = (tmp_path / "recorded" / "table8.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "Family,Model,Type,ds1,ds2 (p1),ds2 (p2)"
    for plain in tables:
        assert (tmp_path / "recorded" / plain.name).read_bytes() == plain.read_bytes()
        md = (tmp_path / "recorded" / plain.with_suffix(".md").name).read_text(encoding="utf-8")
        assert md.endswith("\n- Scoring: the project's answer extraction (scoring.mode extract).\n")

"""Reviewers: released outputs -> scored -> metrics -> tables and figures, with no model
run (config `imports`), on the real released Distract-Bench slice."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image

from .conftest import BIN, FIXTURES, copy_repo, run

# Whole workflow runs (the reviewers' runs from released files):
# `pytest -m "not workflow"` leaves them out.
pytestmark = pytest.mark.workflow

DB = FIXTURES / "distract-bench"
QWEN = DB / "model_outputs" / "Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl"
EUREKA = DB / "model_outputs" / "FanqingM__MM-Eureka-Qwen-7B.samples.jsonl"


def _local_distract_bench(root: Path) -> Path:
    """The fixture's rows with tiny stand-in images (the released images live on the hub)."""
    folder = root / "distract-bench"
    (folder / "images").mkdir(parents=True)
    (folder / "original_images").mkdir()
    shutil.copy(DB / "questions.jsonl", folder)
    shutil.copy(DB / "edit_instructions.jsonl", folder)
    for line in (DB / "questions.jsonl").read_text().splitlines():
        fid = json.loads(line)["final_id"]
        Image.new("RGB", (48, 40), "white").save(folder / "original_images" / f"{fid}.png")
        Image.new("RGB", (48, 40), "red").save(folder / "images" / f"{fid}.png")
    return folder


def _blank_answers(src: Path, dst: Path, doc_ids: set[int]) -> None:
    """A copy of a released file where some responses are replaced by a non-answer."""
    with open(src) as fin, open(dst, "w") as fout:
        for line in fin:
            rec = json.loads(line)
            if rec["doc_id"] in doc_ids:
                rec["filtered_resps"] = "The image is too degraded to tell."
                rec.pop("resps", None)
            fout.write(json.dumps(rec) + "\n")


@pytest.fixture(scope="module")
def reviewer_run(tmp_path_factory) -> Path:
    workdir = copy_repo(tmp_path_factory.mktemp("rev") / "repo")
    data = _local_distract_bench(workdir / "released")
    # Stand-in "corrupted" outputs: two of Eureka's correct answers (docs 1 and 3) and
    # one of Qwen's (doc 1) become non-answers.
    _blank_answers(EUREKA, workdir / "released" / "eureka-corrupt.jsonl", {1, 3})
    _blank_answers(QWEN, workdir / "released" / "qwen-corrupt.jsonl", {1})
    config = {
        "models": ["qwen2.5-vl-7b", "mm-eureka-qwen-7b"],
        "conditions": {
            "clean": {"perturbation": "none"},
            "corrupt": {"perturbation": "corruption"},
            "distracted": {"perturbation": "distraction"},
        },
        "datasets": {
            "distract-bench": {
                "source": "local",
                "path": str(data),
                "group": "reasoning",
                "conditions": ["clean", "corrupt", "distracted"],
            }
        },
        "metrics": {"bootstrap_resamples": 200},
        "imports": [
            {
                "model": "qwen2.5-vl-7b",
                "dataset": "distract-bench",
                "condition": "clean",
                "path": str(QWEN),
            },
            {
                "model": "mm-eureka-qwen-7b",
                "dataset": "distract-bench",
                "condition": "clean",
                "path": str(EUREKA),
            },
            {
                "model": "qwen2.5-vl-7b",
                "dataset": "distract-bench",
                "condition": "corrupt",
                "path": "released/qwen-corrupt.jsonl",
            },
            {
                "model": "mm-eureka-qwen-7b",
                "dataset": "distract-bench",
                "condition": "corrupt",
                "path": "released/eureka-corrupt.jsonl",
            },
            # The released files really answer the distracted images.
            {
                "model": "qwen2.5-vl-7b",
                "dataset": "distract-bench",
                "condition": "distracted",
                "path": str(QWEN),
            },
            {
                "model": "mm-eureka-qwen-7b",
                "dataset": "distract-bench",
                "condition": "distracted",
                "path": str(EUREKA),
            },
        ],
    }
    (workdir / "config" / "reviewer-test.yaml").write_text(yaml.safe_dump(config))
    dry = run(
        [str(BIN / "snakemake"), "-n", "--cores", "2", "--configfile", "config/reviewer-test.yaml"],
        workdir,
    )
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout + dry.stderr, flags=re.M))
    assert "infer" not in jobs and "demo_model" not in jobs  # no model runs
    assert jobs["import_outputs"] == "6"
    assert jobs["judge_reference"] == "2"
    run(
        [str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/reviewer-test.yaml"],
        workdir,
    )
    return workdir


def _table(workdir: Path, name: str) -> list[dict[str, str]]:
    with open(workdir / f"results/tables/corruption/{name}.csv") as fh:
        return list(csv.DictReader(fh))


def test_released_answers_are_rescored_with_our_rules(reviewer_run):
    with open(reviewer_run / "results/scored/summary.csv") as fh:
        summary = {(r["model"], r["condition"]): r for r in csv.DictReader(fh)}
    # Hand-checked: Eureka 10/12, Qwen2.5-VL 8/12 on the released rows; the corrupted
    # stand-ins lose two and one correct answers.
    assert summary[("mm-eureka-qwen-7b", "clean")]["correct"] == "10"
    assert summary[("qwen2.5-vl-7b", "clean")]["correct"] == "8"
    assert summary[("mm-eureka-qwen-7b", "corrupt")]["correct"] == "8"
    assert summary[("qwen2.5-vl-7b", "corrupt")]["correct"] == "7"


def test_tables_and_figures_from_released_outputs(reviewer_run):
    for name in ("table1", "table2", "table8", "table9", "table10"):
        for ext in ("csv", "md", "tex", "html"):
            assert (reviewer_run / f"results/tables/corruption/{name}.{ext}").stat().st_size > 0
    for name in ("figure4", "rr_heatmap"):
        for ext in ("png", "pdf"):
            assert (reviewer_run / f"figures/corruption/{name}.{ext}").stat().st_size > 0
    table10 = (reviewer_run / "results/tables/corruption/table10.md").read_text()
    assert "80.0" in table10  # Eureka RR = 8/12 / 10/12
    assert "87.5" in table10  # Qwen2.5-VL RR = 7/12 / 8/12


def test_the_explorer_of_released_outputs(reviewer_run):
    """The reviewer's run builds the explorer from the released answers: one cell per
    imported file, its verdicts the rescored ones (Eureka 10 and 8 of 12 right, clean and
    corrupted; Qwen2.5-VL 8 and 7), each corrupted unit paired with its clean one."""
    import json

    text = (reviewer_run / "results/explorer/index.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index(",") + 1 : text.rindex(")")])
    cells = {(c["model"], c["condition"]): c for c in index["cells"]}
    assert cells[("mm-eureka-qwen-7b", "clean")]["correct"] == 10
    assert cells[("qwen2.5-vl-7b", "clean")]["correct"] == 8
    for model, right in (("mm-eureka-qwen-7b", 8), ("qwen2.5-vl-7b", 7)):
        counts = cells[(model, "corrupt")]["counts"]
        assert sum(counts.values()) == 12 and counts["unpaired"] == counts["failed"] == 0
        assert counts["right"] + counts["gained"] == right
        assert cells[(model, "corrupt")]["studies"] == ["corruption", "distraction/distract-bench"]
    assert (reviewer_run / "results/explorer/index.html").is_file()


def test_distractor_reference_labels_for_the_distracted_outputs(reviewer_run):
    from vlmrobust.core.io import read_jsonl

    for model in ("qwen2.5-vl-7b", "mm-eureka-qwen-7b"):
        rows = read_jsonl(
            reviewer_run / f"results/judged/{model}/distract-bench/distracted/default.jsonl"
        )
        assert len(rows) == 12
        assert {r["verdict"] for r in rows} <= {"yes", "no"}
        assert all(r["judge"] and r["prompt_version"] for r in rows)


def test_distraction_tables_and_figures_from_released_outputs(reviewer_run):
    folder = reviewer_run / "results/tables/distraction/distract-bench"
    for name in ("table3", "table4", "table5"):
        for ext in ("csv", "md", "tex"):
            assert (folder / f"{name}.{ext}").stat().st_size > 0
    for name in ("figure5", "figure6"):
        assert (reviewer_run / f"figures/distraction/distract-bench/{name}.png").is_file()
    table3 = (folder / "table3.md").read_text()
    # The same released file stands for clean and distracted here: Eureka 10/12 both.
    assert "83.3" in table3 and "100.0" in table3


def test_released_labels_are_used_only_when_the_config_says_so(tmp_path):
    from vlmrobust.core.io import read_jsonl

    workdir = copy_repo(tmp_path / "repo")
    data = _local_distract_bench(workdir / "released")
    reference = DB / "model_outputs" / "FanqingM__MM-Eureka-Qwen-7B.reference.jsonl"
    config = {
        "models": ["mm-eureka-qwen-7b"],
        "conditions": {
            "clean": {"perturbation": "none"},
            "distracted": {"perturbation": "distraction"},
        },
        "datasets": {
            "distract-bench": {
                "source": "local",
                "path": str(data),
                "conditions": ["clean", "distracted"],
            }
        },
        "imports": [
            {
                "model": "mm-eureka-qwen-7b",
                "dataset": "distract-bench",
                "condition": "clean",
                "path": str(EUREKA),
            },
            {
                "model": "mm-eureka-qwen-7b",
                "dataset": "distract-bench",
                "condition": "distracted",
                "path": str(EUREKA),
                "released_labels": True,
                "references": str(reference),
            },
        ],
    }
    (workdir / "config" / "released-labels.yaml").write_text(yaml.safe_dump(config))
    run(
        [str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/released-labels.yaml"],
        workdir,
    )
    with open(workdir / "results/scored/summary.csv") as fh:
        summary = {r["condition"]: r for r in csv.DictReader(fh)}
    assert summary["clean"]["correct"] == "10"  # rescored with our rules
    assert summary["distracted"]["correct"] == "0"  # the released true_false, all False
    judged = read_jsonl(
        workdir / "results/judged/mm-eureka-qwen-7b/distract-bench/distracted/default.jsonl"
    )
    released = [json.loads(line)["verdict"] for line in reference.read_text().splitlines()]
    assert [j["verdict"] for j in judged] == released
    assert {j["judge"] for j in judged} == {"released"}


def test_agreement_of_our_judge_with_the_released_verdicts(reviewer_run):
    judged = "results/judged/mm-eureka-qwen-7b/distract-bench/distracted/default.jsonl"
    released = str(DB / "model_outputs" / "FanqingM__MM-Eureka-Qwen-7B.reference.jsonl")
    proc = run([str(BIN / "vlmrobust"), "judge-agreement", judged, released], reviewer_run)
    result = json.loads(proc.stdout)
    assert result["samples_in_both"] == 12 and result["n"] == 12
    assert 0.0 <= result["percent"] <= 1.0


# --- the reviewers' example of docs/reviewers.md, run exactly as written ----------------


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory) -> Path:
    """The reviewers' configuration of docs/reviewers.md ("The Distract-Bench release"),
    copied verbatim, run in a copy of the repository as the page says: released
    distracted outputs of two models, the released verdicts of a third model without
    outputs, no images."""
    from .test_readme_snippets import REVIEWERS, yaml_snippets

    workdir = copy_repo(tmp_path_factory.mktemp("readme") / "repo")
    page = (workdir / REVIEWERS).read_text(encoding="utf-8")
    _, block, _ = yaml_snippets(page[page.index("## The Distract-Bench release") :])[0]
    (workdir / "config" / "reviewers.yaml").write_text(block)
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/reviewers.yaml"]
    dry = run([*cmd, "-n"], workdir)
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout + dry.stderr, flags=re.M))
    assert "infer" not in jobs and "infer_api" not in jobs and "demo_model" not in jobs
    assert (jobs["import_outputs"], jobs["import_verdicts"], jobs["judge_reference"]) == (
        "2",
        "1",
        "2",
    )
    run(cmd, workdir)
    return workdir


def _csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {r["Model"]: r for r in csv.DictReader(fh)}


def test_readme_example_needs_no_images(readme_run):
    from vlmrobust.core.io import read_json, read_jsonl

    report = read_json(readme_run / "results/samples/distract-bench/report.json")
    assert report["without_images"] is True and report["images_written"] == 0
    samples = read_jsonl(readme_run / "results/samples/distract-bench/samples.jsonl")
    assert len(samples) == 12
    assert all(s["images"] == [] and s["meta"]["without_images"] for s in samples)
    manifest = read_jsonl(readme_run / "results/variants/distract-bench/distracted/manifest.jsonl")
    assert all(v["images"] == [] and v["params"]["without_images"] for v in manifest)
    # no image of the benchmark was written (the studies' own figures are rendered
    # under results/views/ before they are copied to figures/)
    views = readme_run / "results" / "views"
    assert not [p for p in (readme_run / "results").rglob("*.png") if views not in p.parents]


def test_readme_example_table3_has_the_distracted_accuracy_only(readme_run):
    table = readme_run / "results/tables/distraction/distract-bench/table3"
    rows = _csv(table.with_suffix(".csv"))
    # rescored with our rules (tests/test_released.py): Qwen 8/12, Eureka 10/12
    assert rows["Qwen2.5-VL-7B-Instruct"]["Distracted Acc. (%)"] == "66.7"
    assert rows["MM-Eureka-Qwen-7B"]["Distracted Acc. (%)"] == "83.3"
    for name in ("Qwen2.5-VL-7B-Instruct", "MM-Eureka-Qwen-7B"):
        assert [rows[name][c] for c in ("Clean Acc. (%)", "Drop (pp)", "RR (%)")] == ["–"] * 3
    assert rows["R1-OneVision-7B"]["Distracted Acc. (%)"] == "–"
    md = table.with_suffix(".md").read_text()
    assert "no clean outputs in this run" in md
    assert "released verdicts only, no outputs" in md


def test_readme_example_table5_drr_for_every_model_with_verdicts(readme_run):
    from vlmrobust.core.io import read_jsonl

    table = readme_run / "results/tables/distraction/distract-bench/table5"
    rows = _csv(table.with_suffix(".csv"))
    # released verdicts: Qwen "yes" on final_id 3 only, Eureka never, R1-OneVision on 4
    assert [rows[m]["DRR (%)"] for m in rows] == ["8.3", "0.0", "8.3"]
    assert rows["Qwen2.5-VL-7B-Instruct"]["HFR (%)"] == "8.3"  # doc 3 is wrong
    assert [
        rows["R1-OneVision-7B"][c] for c in ("HFR (%)", "Ref_correct (%)", "Ref_wrong (%)")
    ] == ["–"] * 3
    assert "R1-OneVision-7B, HFR, Ref_correct, Ref_wrong: no outputs: correctness unknown" in (
        table.with_suffix(".md").read_text()
    )
    judged = read_jsonl(
        readme_run / "results/judged/r1-onevision-7b/distract-bench/distracted/distract-open.jsonl"
    )
    assert [j["key"] for j in judged] == [f"distract-bench-{i}#0" for i in range(1, 13)]
    assert {j["judge"] for j in judged} == {"released"}
    assert not (readme_run / "results/scored/r1-onevision-7b").exists()  # no outputs
    with open(readme_run / "results/scored/summary.csv") as fh:
        assert {r["model"] for r in csv.DictReader(fh)} == {"qwen2.5-vl-7b", "mm-eureka-qwen-7b"}

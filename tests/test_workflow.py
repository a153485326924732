"""The default workflow end to end on a small demo: datasets -> samples -> variants."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from vlmrobust.core.io import read_jsonl, sha256_file
from vlmrobust.core.paths import real_data

from .conftest import (
    BIN,
    QUICK_TRAIN,
    REPO,
    SMALL_CONFIGS,
    copy_repo,
    job_processes,
    run,
    run_files,
)

# Whole workflow runs (the default run, small, and what reruns after it):
# `pytest -m "not workflow"` leaves them out.
pytestmark = pytest.mark.workflow

# Small demo data and a short training (the models learn little; the DAG is the point).
#: the default run, small (config/test/small.yaml: 3 samples a family, a short training)
SMALL = ["--configfile", *SMALL_CONFIGS]
FAMILIES = ["diagram", "chart", "yesno", "text", "objects", "geometry", "premises"]
IDIS_PERCEPTION = ["clean", "idis-objects", "idis-typographic", "idis-size", "idis-res"]
IDIS_MATH = ["clean", "idis-diagram", "idis-handwritten", "idis-mathwriting", "idis-textual"]


def snakemake(workdir: Path, *args: str, check: bool = True):
    return run([str(BIN / "snakemake"), "--cores", "2", *args], workdir, check=check)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    workdir = copy_repo(tmp_path_factory.mktemp("wf") / "repo")
    snakemake(workdir, *SMALL)
    return workdir


def test_default_run_writes_every_manifest(demo_run):
    manifests = sorted(demo_run.glob("results/variants/*/*/manifest.jsonl"))
    # seven demo families x (clean, corrupt) + the constructed demo-distract x 3 + the
    # demo's VisArgs-like images x (clean, mask-specific, mask-random) + the Idis slice:
    # perception x 5, math x 5, the budget slice x 2, the figure and table pools and
    # Waterbirds x clean
    assert len(manifests) == 7 * 2 + 3 + 3 + 5 + 5 + 2 + 3
    for manifest in manifests:
        dataset = manifest.parent.parent.name
        samples = read_jsonl(demo_run / f"results/samples/{dataset}/samples.jsonl")
        rows = read_jsonl(manifest)
        if dataset.startswith("demo-idis") and manifest.parent.name != "clean":
            continue  # several variants per sample (test_idis_conditions)
        assert [r["sample_id"] for r in rows] == [s["sample_id"] for s in samples]
        for row in rows:
            assert row["condition"] == manifest.parent.name
            assert len(row["images"]) == len(row["sha256"]) >= 1
            for image, digest in zip(row["images"], row["sha256"], strict=True):
                assert sha256_file(demo_run / image) == digest
            sample = next(s for s in samples if s["sample_id"] == row["sample_id"])
            if row["condition"] == "corrupt":
                assert row["params"]["method"] is not None
                assert not row["images"][0].startswith("results/samples/")
            elif row["condition"] == "distracted":
                assert row["images"] == sample["meta"]["distracted_images"]
            elif row["condition"].startswith("mask-"):
                assert row["perturbation"] == "mask" and len(row["masks"]) == 1
            else:
                assert row["images"] == next(
                    s["images"] for s in samples if s["sample_id"] == row["sample_id"]
                )


def test_every_answer_is_scored(demo_run):
    import csv

    with open(demo_run / "results/scored/summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    assert {r["model"] for r in summary} == {"demo-base", "demo-reasoning"}
    assert {(r["dataset"], r["condition"]) for r in summary} == {
        (f"demo-{f}", c) for f in FAMILIES for c in ("clean", "corrupt")
    } | {("demo-distract", c) for c in ("clean", "distracted", "corrupt")} | {
        ("demo-visargs", c) for c in ("clean", "mask-specific", "mask-random")
    } | {("demo-idis-perception", c) for c in IDIS_PERCEPTION} | {
        ("demo-idis-math", c) for c in IDIS_MATH
    } | {("demo-idis-waterbirds", "clean")} | {
        ("demo-idis-budget", c) for c in ("clean", "idis-objects")
    }
    summary = [r for r in summary if not r["dataset"].startswith("demo-idis")]
    per_model = {}
    for r in summary:
        per_model[(r["model"], r["dataset"], r["condition"])] = per_model.get(
            (r["model"], r["dataset"], r["condition"]), 0
        ) + int(r["n"])
    # every sample answered once, under its prompt; demo-distract keeps the 7 accepted
    # of its 9 candidates (resources/distraction/demo-decisions.csv)
    assert {k: v for k, v in per_model.items() if k[1] == "demo-distract"} == {
        (m, "demo-distract", c): 7
        for m in ("demo-base", "demo-reasoning")
        for c in ("clean", "distracted", "corrupt")
    }
    # demo-visargs: one sample per (image, premise) of its 3 images (8), in two stages
    assert {k: v for k, v in per_model.items() if k[1] == "demo-visargs"} == {
        (m, "demo-visargs", c): 16
        for m in ("demo-base", "demo-reasoning")
        for c in ("clean", "mask-specific", "mask-random")
    }
    others = {v for k, v in per_model.items() if k[1] not in ("demo-distract", "demo-visargs")}
    assert others == {3}
    outputs = read_jsonl(demo_run / "results/outputs/demo-base/demo-chart/corrupt/default.jsonl")
    manifest = read_jsonl(demo_run / "results/variants/demo-chart/corrupt/manifest.jsonl")
    assert [o["image_sha256"] for o in outputs] == [m["sha256"] for m in manifest]
    assert all(o["backend"] == "hf" and o["max_new_tokens"] == 64 for o in outputs)


def test_samples_reports(demo_run):
    report = json.loads((demo_run / "results/samples/demo-objects/report.json").read_text())
    assert report["samples_written"] == 3
    assert report["skipped"] == 0


def test_rerun_has_nothing_to_do(demo_run):
    proc = snakemake(demo_run, "-n", *SMALL)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_an_input_edited_in_place_reruns_its_jobs(demo_run):
    """Every byte that makes an output is an input of its job: a demo image edited in
    place reruns its family's samples job, an edited prompt file its condition's
    variants jobs; put back (bytes and time), nothing is left to do."""
    from PIL import Image

    image = demo_run / "results/raw/demo/chart/images/0001.png"
    prompt = demo_run / "resources/idis/textual-distractor-prompt.txt"
    for path, pattern in (
        (image, r"wildcards: dataset=demo-chart\n"),
        (prompt, r"wildcards: dataset=demo-idis-math, condition=idis-textual\n"),
    ):
        data, st = path.read_bytes(), path.stat()
        try:
            if path.suffix == ".png":
                with Image.open(path) as im:
                    edited = im.convert("RGB")
                edited.putpixel((0, 0), (255, 0, 255))
                edited.save(path)
            else:
                path.write_bytes(data + b"\n")
            out = snakemake(demo_run, "-n", *SMALL)
            text = out.stdout + out.stderr
            assert re.search(pattern, text), path
        finally:
            path.write_bytes(data)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    proc = snakemake(demo_run, "-n", *SMALL)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_changed_condition_reruns_only_its_jobs(demo_run):
    from vlmrobust.core.config import load_yaml

    conditions = load_yaml(demo_run / "config/config.yaml")["conditions"]
    conditions["corrupt"]["severities"] = [5]
    proc = snakemake(demo_run, "-n", *SMALL, "--config", f"conditions={json.dumps(conditions)}")
    out = proc.stdout + proc.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    # Only the corrupt variants and what reads them: 8 datasets (the seven demo families
    # and demo-distract) x 2 models downstream, then the two studies that read them:
    # corruption (metrics, Tables 1, 2, 8-10, Figure 4 and the heat map) and
    # distraction (metrics, Tables 3-5, Figures 5-6); the masking study does not rerun.
    # Each study's views job draws them; each model's first-phase engine answers its
    # cells again (the unchanged ones from their resume caches: only the corrupt cells'
    # requests are asked), and only the corrupt cells are gathered again.
    assert jobs == {
        "variants": "8",
        "engine_demo_base_phase0_0": "1",
        "engine_demo_reasoning_phase0_0": "1",
        "gather_outputs": "16",
        "score": "16",
        "score_summary": "1",
        "metrics": "2",
        "views": "2",
        "table": "8",
        "figure": "4",
        # the explorer: the 8 corrupt variant sets, the cells of those 8 datasets (one job
        # per model and dataset) and the index
        "explorer_variants": "8",
        "explorer_cells": "16",
        "explorer_index": "1",
        "check_requests": "1",
        "all": "1",
        "total": "86",
    }
    rerun = re.findall(r"wildcards: dataset=([\w-]+), condition=(\w+)", out)
    expected = [(f"demo-{f}", "corrupt") for f in FAMILIES] + [("demo-distract", "corrupt")]
    # each once for its variants and once for the explorer's variant set
    assert sorted(rerun) == sorted(expected * 2)


def test_a_changed_scoring_mode_reruns_scoring_never_inference(demo_run):
    """scoring.mode (and compare_modes) are parameters of the score jobs: switching to
    harness reruns every score job and what reads them, and no variants, inference or
    engine job."""
    scoring = json.dumps({"mode": "harness", "compare_modes": True})
    proc = snakemake(demo_run, "-n", *SMALL, "--config", f"scoring={scoring}")
    out = proc.stdout + proc.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    scored = list(demo_run.glob("results/scored/*/*/*/*.csv"))
    assert int(jobs["score"]) == len(scored) > 0
    assert not {"variants", "infer", "engine_plan", "gather_outputs", "samples"} & set(jobs)
    assert not [rule for rule in jobs if rule.startswith("engine")]
    assert {"score_summary", "metrics"} <= set(jobs)


def test_bad_config_stops_before_any_job(demo_run, tmp_path):
    proc = snakemake(demo_run, "--config", "seed=-1", check=False)
    assert proc.returncode != 0
    assert "key 'seed': -1 is less than the minimum of 0" in proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def paper_dry(tmp_path_factory):
    """``snakemake -n -p`` of config/paper.yaml in a copy without the vLLM environment:
    its text, its jobs by rule and the plan it was made from."""
    import time

    from vlmrobust.plan import RunPlan

    workdir = copy_repo(tmp_path_factory.mktemp("paper") / "repo")
    # the local datasets' folders (ImageNet-9, LogicVista, Waterbirds): empty stand-ins
    for folder in ("bg_challenge", "LogicVista/data", "waterbird_complete95_forest2water2"):
        (workdir / "data" / folder).mkdir(parents=True)
    # no vLLM environment (.venv-vllm, envs/vllm-env.sh): a dry run needs none
    assert not (workdir / ".venv-vllm").exists()
    t0 = time.perf_counter()
    proc = snakemake(workdir, "-n", "-p", "--configfile", "config/paper.yaml")
    print(f"paper DAG: {time.perf_counter() - t0:.1f} s")
    text = proc.stdout + proc.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", text, flags=re.M))
    print(f"paper DAG: {jobs.get('total')} jobs")
    with contextlib.chdir(workdir):
        plan = RunPlan.load("config/paper.yaml")
    return text, jobs, plan


def test_paper_dag_has_one_job_per_dataset_and_condition(paper_dry):
    _, jobs, _ = paper_dry
    assert jobs["samples"] == "16"
    # 9 x (clean, corrupt) + Distract-Bench's distracted + VisArgs x (clean, 2 masks) +
    # Idis: ImageNet-9 x 3, its 64-draw copy x 1, its Gemini (App. G) copy x 2,
    # MathVerse x 4, LogicVista and Waterbirds x clean
    assert jobs["variants"] == "34"
    # 8 open models x (7 benchmarks x 2 conditions + MathVista x 3 prompts x 2) = 160,
    # plus Distract-Bench x 3 conditions for the 8 (24) and GPT-4o/GPT-5 (6, API), plus
    # CRM: VisArgs x 3 conditions x 2 stages for Qwen2.5-VL and Llama (12) and for
    # Gemini and GPT-4o (12, API), plus Idis for its 4 models: ImageNet-9 x 3
    # conditions x 5 prompts (60), MathVerse x 4 (16), Waterbirds x 2 prompts (8), and
    # Qwen3-VL-Thinking's 64 draws of the visual distractors (1); App. G: Gemini 3 Flash
    # low and high x ImageNet-9 (clean, visual) (4, API).
    # the 281 cells of the local models are answered by their engines (one job each,
    # one model load each; each cell split over all its model's engines:
    # service.split_cells), the 22 of the API models by one job each
    assert jobs["infer"] == "22"
    assert jobs["score"] == "303"
    assert "judge_mathverse" not in jobs
    # the Idis outputs a table or figure reads (judge.attributes.scope: read) of the
    # datasets the paper analyses (judge.attributes.datasets: ImageNet-9, MathVerse,
    # Waterbirds): the main extractor on ImageNet-9's base and mitigation prompts (24),
    # MathVerse's 16 and Waterbirds' 8 (48); the alternative prompt on ImageNet-9's base
    # prompt, the clean images left out (8); the lexical matcher on the base prompt:
    # ImageNet-9 8, MathVerse 16, Waterbirds 4 (28; Qwen3.5-27B's 28 are written by its
    # LLM engines, not by this rule); areas of the released visual and typographic
    # conditions; attention blocking for Qwen3-VL-Thinking
    assert jobs["judge_attributes"] == str(48 + 8 + 28)
    assert jobs["idis_areas"] == "6" and jobs["block_attention"] == "1"
    assert jobs["compare_masking"] == "8"  # 4 models x 2 mask conditions
    assert jobs["judge_hallucination"] == "8"  # each compared file judged once
    assert "demo_data" not in jobs


def test_paper_dag_answers_the_local_models_and_judges_with_engine_jobs(paper_dry):
    text, jobs, plan = paper_dry
    from vlmrobust.plan import engines as plan_engines

    engines = plan_engines.engines(plan)
    assert len(engines) == 32  # the balance block's engines (config/paper.yaml)
    cells = {(e[0], *c[:3]) for e in engines for c in plan_engines.engine_cells(plan, *e)}
    assert len(cells) == 281
    engine_jobs = {k: v for k, v in jobs.items() if k.startswith("engine_") and k != "engine_plan"}
    assert len(engine_jobs) == len(engines) and set(engine_jobs.values()) == {"1"}
    # the vLLM engines are listed, to run with the (missing) environment's Python
    blocks = re.split(r"\n(?=rule \w+:)", text)
    vllm_engines = [
        e for e in engines if plan_engines.engine_backend(plan, e[0], e[2])[0] == "vllm"
    ]
    assert vllm_engines
    for model, phase, label in vllm_engines:
        slug = "".join(ch if ch.isalnum() else "_" for ch in model)
        block = next(b for b in blocks if b.startswith(f"rule engine_{slug}_phase{phase}_{label}:"))
        assert ".venv-vllm/bin/python -m vlmrobust infer-engine" in block
    # the judges' local LLMs: gpt-oss-120b (the MathVerse judge's 16 files) on 5 LLM
    # engines, Qwen3.5-27B (an extractor's 28 files) on 2; no judge job of their own
    llm_jobs = {k: v for k, v in jobs.items() if k.startswith("llm_engine_")}
    assert sorted(llm_jobs) == [f"llm_engine_gpt_oss_120b_{k}" for k in range(5)] + [
        f"llm_engine_qwen3_5_27b_{k}" for k in range(2)
    ]
    assert plan_engines.llm_engines(plan) == [("gpt-oss-120b", str(k)) for k in range(5)] + [
        ("qwen3.5-27b", "0"),
        ("qwen3.5-27b", "1"),
    ]
    judged = [
        c
        for m, k in plan_engines.llm_engines(plan)
        for c in plan_engines.llm_engine_cells(plan, m, k)
    ]
    assert sum(c.step == "mathverse" for c in judged) == 16 and len(judged) == 16 + 28
    assert int(jobs["engine_plan"]) == len(engines) + len(llm_jobs)


def test_adding_a_model_runs_only_its_jobs_and_the_aggregation(demo_run):
    proc = snakemake(
        demo_run,
        "-n",
        *SMALL,
        "--config",
        "models=[demo-base, demo-reasoning, demo-extra]",
    )
    out = proc.stdout + proc.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    jobs.pop("total")
    # 7 demo families x 2 conditions + demo-distract x 3 + demo-visargs x 3 conditions x
    # 2 stages; its distracted outputs judged, its masked chains compared and
    # judged for hallucination.
    # ... and the Idis slice: perception x 5 conditions x 2 prompts, math x 5 (each
    # judged by the MathVerse judge), Waterbirds x 2 prompts: 17 more outputs.
    per_model = {
        "demo_model": "1",
        # its engines: one per phase (the CRM answers are built on its own chains), each
        # with its plan
        "engine_plan": "2",
        "engine_demo_extra_phase0_0": "1",
        "engine_demo_extra_phase1_0": "1",
        "gather_outputs": "40",
        "score": "40",
        "judge_reference": "1",
        "judge_mathverse": "5",
        "compare_masking": "2",
        "judge_hallucination": "2",
        # its 17 Idis outputs labelled by the main extractor, and by the other one the
        # base prompt's (judge.attributes.scope: read; not the clean perception images)
        "judge_attributes": str(17 + 4 + 5 + 1),
        # its explorer cells: one job per dataset it answers, writing each scored file's
        "explorer_cells": "12",
    }
    # Every study reruns where demo-extra answers (not the Idis budget slice, which is
    # demo-reasoning's only): 3 + 3 Idis metrics; 5 + 3 + 4 tables and 6 + 3 + 3 Idis
    # ones (perception, math, Waterbirds); 2 + 2 + 2 figures and 12 + 7 + 5 Idis ones;
    # 2 pages.
    aggregation = {
        "score_summary": "1",
        "metrics": "6",
        "views": "6",
        "table": "24",
        "figure": "30",
        "page": "2",
        # the explorer's index (no variant set changes: they are every model's)
        "explorer_index": "1",
        "check_requests": "1",
        "all": "1",
    }
    assert jobs == {**per_model, **aggregation}
    # Every per-model job is demo-extra's; nothing of the models already there reruns.
    models = re.findall(r"wildcards: model=([\w.-]+)", out)
    assert len(models) == 1 + 40 * 2 + 12 + 1 + 5 + 2 + 2 + 2 and set(models) == {"demo-extra"}
    labelled = re.findall(r"wildcards: extractor=[\w.-]+, model=([\w.-]+)", out)
    assert len(labelled) == 17 + 4 + 5 + 1 and set(labelled) == {"demo-extra"}


def test_report_shows_every_table_and_figure(demo_run):
    snakemake(demo_run, "--report", "report.html", *SMALL)
    html = (demo_run / "report.html").read_text(errors="replace")
    for name in (
        "figure4.png",
        "rr_heatmap.png",
        "table1.csv",
        "table2.csv",
        "table10.csv",
        "example1.png",
        "attr_accuracy.png",
        "attention_blocking.png",
        "extractor_agreement.csv",
    ):
        assert name in html
    assert "Vision-corruption study" in html
    # each table's caption links its HTML copy, whose cells link to the explorer
    assert "results/tables/corruption/table1.html</a>" in html
    assert "Region-masking study" in html
    assert "Idis: distractors and test-time scaling" in html


def test_every_linked_table_cell_is_its_rows_in_the_explorer(demo_run):
    """The default run builds the explorer; every accuracy and RR cell a Markdown table
    links is computed again in Chromium from the rows the explorer loads and equals the
    table's; no request leaves the file system; no page holds the run's absolute path."""
    from .test_review_browser import CHROMIUM, CHROMIUM_ARGS, _browser_or_skip

    explorer = demo_run / "results" / "explorer"
    assert (explorer / "index.html").is_file() and (explorer / "index.js").is_file()
    for page_file in explorer.rglob("*.js"):
        assert str(demo_run) not in page_file.read_text(encoding="utf-8"), page_file
    links = []
    for md in sorted((demo_run / "results" / "tables").glob("**/*.md")):
        for text, href in re.findall(r"\[([^\]]+)\]\(([^)\s]+)\)", md.read_text("utf-8")):
            target, fragment = href.split("#", 1)
            links.append((md, text, (md.parent / target).resolve().as_uri() + "#" + fragment))
    # Tables 1, 3, 8-10 and the Idis summary and sizes tables of the demo (58 cells with
    # a value at 3 samples a family; a dash has no link)
    assert len(links) >= 40
    assert {md.parent.parent.name for md, _, _ in links} >= {"tables", "distraction", "idis"}
    sync_playwright = _browser_or_skip()
    requests, errors, wrong = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        for md, text, url in links:
            page.goto("about:blank")
            page.goto(url)
            page.wait_for_selector("#cell-check[data-ready]")
            shown = page.inner_text("#cell-shown")
            computed = page.inner_text("#cell-computed")
            if "match" not in page.get_attribute("#cell-check", "class").split():
                wrong.append((md.name, text, shown, computed))
            assert shown == text
        browser.close()
    assert wrong == []
    assert errors == []
    assert [u for u in requests if not u.startswith(("file:", "data:", "about:"))] == []


def test_constructed_benchmark_follows_the_decisions_file(demo_run):
    from vlmrobust.review import write_decision

    report = json.loads((demo_run / "results/samples/demo-distract/report.json").read_text())
    assert report["verification"]["generated"] == 9
    assert report["verification"]["accepted"] == 7
    assert report["verification"]["rejected_by_criterion"]["obvious"] == 1
    assert (demo_run / "results/construct/demo-distract/review.html").is_file()
    for name in ("table3", "table4", "table5"):
        assert (demo_run / f"results/tables/distraction/demo-distract/{name}.md").is_file()
    # A reviewer accepts a rejected sample: the next run rebuilds the benchmark's samples
    # and what depends on them, nothing of the other datasets.
    decisions = demo_run / "resources/distraction/demo-decisions.csv"
    original = decisions.read_text()
    try:
        write_decision(decisions, "demo-geometry-0001", "accept", note="fine after all")
        out = snakemake(demo_run, "-n", *SMALL).stdout
        rerun = set(re.findall(r"wildcards: .*?dataset=([\w-]+)", out))
        assert rerun == {"demo-distract"}
        assert re.search(r"^samples\s+1$", out, flags=re.M)
    finally:
        decisions.write_text(original)


# --------------------------------------------------------------------------- CRM


def test_masking_study_end_to_end(demo_run):
    """The demo's VisArgs-like images: masked, answered in two stages, compared, and
    Tables 2-5 and the example figures written; the numbers agree with the rows."""
    import csv

    import numpy as np
    from PIL import Image

    samples = read_jsonl(demo_run / "results/samples/demo-visargs/samples.jsonl")
    by_id = {s["sample_id"]: s for s in samples}
    assert len(samples) == 8
    for condition in ("mask-specific", "mask-random"):
        for row in read_jsonl(
            demo_run / f"results/variants/demo-visargs/{condition}/manifest.jsonl"
        ):
            p = row["params"]
            sample = by_id[row["sample_id"]]
            b = sample["meta"]["b_box"][sample["meta"]["premise_index"]]
            assert p["target_box"] == [
                b["startX"],
                b["startY"],
                b["startX"] + b["w"],
                b["startY"] + b["h"],
            ]
            x0, y0, x1, y1 = p["box"]
            assert (x1 - x0, y1 - y0) == (b["w"], b["h"])
            if condition == "mask-specific":
                assert p["box"] == p["target_box"]
            elif p["placement"] == "ok":
                assert p["gap"] >= 0.05 and p["overlap_px"] == 0
            mask = np.asarray(Image.open(demo_run / row["masks"][0]))
            assert int((mask == 255).sum()) == b["w"] * b["h"]
            masked = np.asarray(Image.open(demo_run / row["images"][0]).convert("RGB"))
            assert masked[y0:y1, x0:x1].max() == 0  # fill: black
    # the two stages: chain at 0.2 and 64 tokens, answer greedy after the chain
    out = demo_run / "results/outputs/demo-base/demo-visargs/mask-random"
    cot, answer = read_jsonl(out / "crm-cot.jsonl"), read_jsonl(out / "crm-answer.jsonl")
    assert {(r["temperature"], r["max_new_tokens"]) for r in cot} == {(0.2, 64)}
    assert {(r["temperature"], r["max_new_tokens"]) for r in answer} == {(0.0, 24)}
    assert all(len(r["context_sha256"]) == 64 for r in answer)
    assert all(r["error"] is None for r in cot + answer)
    # compared rows -> metrics: the rates are the rows' shares
    metrics = {}
    with open(demo_run / "results/metrics/masking/demo-visargs/metrics.csv") as fh:
        for m in csv.DictReader(fh):
            metrics[(m["model"], m["condition"], m["metric"])] = float(m["value"] or "nan")
    for model in ("demo-base", "demo-reasoning"):
        for condition in ("mask-specific", "mask-random"):
            rows = read_jsonl(demo_run / f"results/compared/{model}/demo-visargs/{condition}.jsonl")
            assert len(rows) == 8 and all(r["error"] is None for r in rows)
            for r in rows:
                statuses = {a["status"] for a in r["alignment"]}
                assert statuses <= {"unchanged", "modified", "disappeared", "new"}
                assert r["region_attribution"] in ("correct", "partial", "incorrect")
            flip = sum(r["answer_flipped"] for r in rows) / 8
            assert metrics[(model, condition, "answer_flip_rate")] == pytest.approx(flip)
            se = (flip * (1 - flip) / 8) ** 0.5
            assert metrics[(model, condition, "answer_flip_rate_se")] == pytest.approx(se)
            disrupted = sum(r["step_disrupted"] for r in rows) / 8
            assert metrics[(model, condition, "step_disruption_rate")] == pytest.approx(disrupted)
    tables = demo_run / "results/tables/masking/demo-visargs"
    for name in ("table2", "table3", "table4", "table5"):
        for ext in ("csv", "md", "tex"):
            assert (tables / f"{name}.{ext}").is_file()
    with open(tables / "table2.csv") as fh:
        table2 = list(csv.reader(fh))
    assert table2[0] == ["Metric", "Demo-Base", "Demo-Reasoning"]
    assert [r[0] for r in table2[1:4]] == ["Answer flip rate", "Step disruption", "Hallucination"]
    figures = demo_run / "figures/masking/demo-visargs"
    for i in (1, 2):
        assert Image.open(figures / f"example{i}.png").size[0] >= 1000
        assert (figures / f"example{i}.pdf").read_bytes().startswith(b"%PDF")
        assert "data:image/png;base64," in (figures / f"example{i}.html").read_text()


# --------------------------------------------------------------------------- by hand


def test_a_newcomer_reruns_metrics_and_a_table_by_hand(demo_run, tmp_path):
    """`vlmrobust metrics|table|figure --config`: the run plan names the same inputs and
    spec as the workflow's job, so the files come out byte-identical, without Snakemake."""
    cli = str(BIN / "vlmrobust")
    cfg = ["--config", "config/config.yaml"]
    run([cli, "metrics", "--study", "corruption", *cfg, "--out", str(tmp_path / "m.csv"),
         "--warnings", str(tmp_path / "w.txt")], demo_run)  # fmt: skip
    made = demo_run / "results/metrics/corruption/metrics.csv"
    assert (tmp_path / "m.csv").read_bytes() == made.read_bytes()
    for study, scope, name in (
        ("corruption", "", "table1"),
        ("distraction", "demo-distract", "table5"),
        ("masking", "demo-visargs", "table3"),
    ):
        out = tmp_path / study
        run([cli, "table", name, "--study", study, f"--scope={scope}", *cfg,
             "--out-dir", str(out)], demo_run)  # fmt: skip
        folder = f"{study}/{scope}" if scope else study
        for ext in ("csv", "md", "tex", "html"):
            made = demo_run / f"results/tables/{folder}/{name}.{ext}"
            assert (out / f"{name}.{ext}").read_bytes() == made.read_bytes(), (study, ext)
    proc = run([cli, "table", "table9", "--study", "masking", "--scope=demo-visargs", *cfg],
               demo_run, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert "study masking: no table 'table9' (its tables: table2, table3, table4, table5)" in (
        proc.stderr
    )
    proc = run([cli, "metrics", "--study", "masking", "--scope=demo-chart", *cfg], demo_run,
               check=False)  # fmt: skip
    assert "study masking has no scope 'demo-chart' (scopes: 'demo-visargs')" in proc.stderr


def test_a_job_by_hand_is_the_command_snakemake_prints(demo_run, tmp_path):
    """One job by hand: `snakemake -n -p --forcerun FILE FILE` prints the rule's command
    (every file and parameter resolved); run with another --out, it writes what the
    workflow wrote."""
    target = "results/scored/demo-base/demo-chart/corrupt/default.csv"
    proc = snakemake(demo_run, *SMALL, "-n", "-p", "--forcerun", target, "--", target)
    (command,) = re.findall(r"^Shell command: (.*)$", proc.stdout + proc.stderr, flags=re.M)
    assert command.startswith("vlmrobust score --outputs ") and f"--out {target}" in command
    command = command.replace(f"--out {target}", f"--out {tmp_path / 's.csv'}")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", command], cwd=demo_run, env=env, check=True)
    assert (tmp_path / "s.csv").read_bytes() == (demo_run / target).read_bytes()


def test_idis_analyses_from_the_demo(demo_run):
    """Attributes, areas, attention blocking and every Idis view of the default run."""
    import csv

    from vlmrobust.plan import RunPlan
    from vlmrobust.studies import STUDIES

    perception = "demo-idis-perception"
    # two extractors (the full and the minimal vocabulary) on every Idis output
    for extractor in ("lexical", "lexical-minimal"):
        rows = read_jsonl(
            demo_run
            / f"results/judged-attributes/{extractor}/demo-reasoning/{perception}/idis-objects/idis-perception.jsonl"
        )
        outputs = read_jsonl(
            demo_run
            / f"results/outputs/demo-reasoning/{perception}/idis-objects/idis-perception.jsonl"
        )
        assert [r["key"] for r in rows] == [o["key"] for o in outputs]
        assert all(r["method"] in ("lexical", "empty") and r["error"] is None for r in rows)
        assert all(
            sum(r["counts"].values()) == sum(map(len, r["attributes"].values())) for r in rows
        )
    # composited objects: exact areas, r_area = A_dist / (A_dist + A_target)
    for area in read_jsonl(demo_run / f"results/areas/{perception}/idis-objects.jsonl"):
        if area["r_area"] is not None:
            assert area["method"] == "exact"
            total = area["distractor_area"] + area["target_area"]
            assert area["r_area"] == pytest.approx(area["distractor_area"] / total)
    # attention blocking: one row per re-answered output and setting, scored
    blocked = read_jsonl(
        demo_run / f"results/blocked/demo-reasoning/{perception}/idis-objects/idis-perception.jsonl"
    )
    assert blocked and {r["block"] for r in blocked} == {"none", "distractor", "target"}
    assert all(r["correct"] in (0, 1) for r in blocked if r["error"] is None)
    with open(demo_run / f"results/metrics/idis/{perception}/metrics.csv") as fh:
        metrics = list(csv.DictReader(fh))
    found = {r["metric"] for r in metrics}
    for metric in (
        "accuracy",
        "rank_accuracy",
        "attributes_total",
        "r_target",
        "extractor_pearson",
        "r_area",
        "sampling_delta",
        "blocked_accuracy",
        "length_quantile",
    ):
        assert metric in found, metric
    # every Idis table and figure of every scope, and the report lists them
    cwd = Path.cwd()
    os.chdir(demo_run)
    try:
        files = STUDIES["idis"].targets(RunPlan.load("config/config.yaml"))
    finally:
        os.chdir(cwd)
    assert len(files) > 100
    for path in files:
        assert (demo_run / path).is_file(), path


def test_a_new_demo_generator_version_reruns_the_demo_data(tmp_path):
    """DEMO_VERSION is a param of the demo data jobs: bumping it (the generator's bytes
    changed) reruns them, where a changed generator alone would leave stale data."""
    workdir = copy_repo(tmp_path / "repo")
    env = {"PYTHONPATH": str(workdir / "workflow")}  # the copy's package, edited below
    target = "results/raw/demo/summary.json"
    run([str(BIN / "snakemake"), target, "--cores", "1", *SMALL], workdir, env=env)
    dry = [str(BIN / "snakemake"), target, "-n", "--cores", "1", *SMALL]
    first = run(dry, workdir, env=env)
    assert "Nothing to be done" in first.stdout + first.stderr
    source = workdir / "workflow/vlmrobust_demo/data.py"
    text = source.read_text(encoding="utf-8")
    old = re.search(r'^DEMO_VERSION = "(\d+)"$', text, flags=re.M)
    source.write_text(text.replace(old.group(0), f'DEMO_VERSION = "{int(old.group(1)) + 1}"'))
    proc = run(dry, workdir, env=env)
    out = proc.stdout + proc.stderr
    assert re.search(r"^demo_data\s+1$", out, flags=re.M), out[-2000:]
    assert "Params have changed" in out, out[-2000:]


def dry_run_jobs(text: str) -> list[tuple[str, str]]:
    """(rule, its text) of every job a dry run prints: from its ``rule <name>:`` line to
    the next job's time stamp (or the job statistics)."""
    return re.findall(r"^rule (\w+):\n(.*?)(?=^\[|^Job stats|\Z)", text, flags=re.M | re.S)


def dry_run(workdir: Path, configfile: Path, *targets: str) -> str:
    """The text of ``snakemake -n`` with ``configfile`` (the package of ``workdir``)."""
    cmd = [str(BIN / "snakemake"), "-n", "--cores", "1", f"--configfile={configfile}", *targets]
    proc = run(cmd, workdir, env={"PYTHONPATH": str(workdir / "workflow")})
    return proc.stdout + proc.stderr


def test_dag_of_two_corruption_conditions_with_hyphens_has_their_tables(tmp_path):
    """Condition names are what the schema allows (letters, digits, `.`, `_`, `-`): with
    two corruption conditions every table and figure is named after its condition
    (table1_corrupt-s3) and is a target of the DAG, built by the table / figure rules."""
    import yaml

    from vlmrobust.plan import RunPlan
    from vlmrobust.report.figures.corruption import corruption_figure_names
    from vlmrobust.report.tables.corruption import corruption_table_names
    from vlmrobust.studies import STUDIES

    workdir = copy_repo(tmp_path / "repo")
    conditions = ["clean", "corrupt-s3", "corrupt-s5.v2"]
    config = {
        "model_registry": "config/models.yaml",
        "models": ["demo-base"],
        "demo": {"n_per_family": 3, "families": ["diagram", "chart"], "train": QUICK_TRAIN},
        "conditions": {
            "clean": {"perturbation": "none"},
            "corrupt-s3": {"perturbation": "corruption", "severities": [3]},
            "corrupt-s5.v2": {"perturbation": "corruption", "severities": [5]},
        },
        "datasets": {
            f"demo-{family}": {
                "adapter": "demo",
                "source": "local",
                "path": f"results/raw/demo/{family}",
                "group": group,
                "conditions": conditions,
            }
            for family, group in (("diagram", "reasoning"), ("chart", "general"))
        },
    }
    configfile = tmp_path / "two-corruptions.yaml"
    configfile.write_text(yaml.safe_dump(config), encoding="utf-8")
    spec = STUDIES["corruption"].spec(RunPlan.from_config(copy.deepcopy(config)), "")
    tables, figures = corruption_table_names(spec), corruption_figure_names(spec)
    assert "table1_corrupt-s3" in tables and "figure4_corrupt-s5.v2" in figures
    made: dict[str, list[str]] = {"table": [], "figure": []}
    for rule, block in dry_run_jobs(dry_run(workdir, configfile)):
        first = re.search(r"^    output: (\S+?)(?:,|$)", block, flags=re.M)
        if rule in made:
            made[rule].append(Path(first.group(1)).with_suffix("").as_posix())
    assert sorted(made["table"]) == sorted(f"results/tables/corruption/{n}" for n in tables)
    assert sorted(made["figure"]) == sorted(f"figures/corruption/{n}" for n in figures)


def _local_mathvision(root: Path, n_images: int) -> None:
    """A MathVision folder in the hub's JSONL layout: 3 questions on the first images of
    ``n_images`` small PNGs (the others are in the folder but no row names them)."""
    from PIL import Image

    (root / "images").mkdir(parents=True)
    for i in range(1, n_images + 1):
        Image.new("RGB", (16, 16), (i % 256, 0, 0)).save(root / "images" / f"{i}.png")
    rows = [
        {
            "id": str(i),
            "question": f"How many? {i}",
            "options": [],
            "answer": str(i),
            "level": 1,
            "subject": "counting",
            "solution": None,
            "image": f"images/{i}.png",
        }
        for i in (1, 2, 3)
    ]
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _samples_job(text: str) -> str:
    """The text of the one samples job of a dry run ('' when there is none)."""
    jobs = [block for rule, block in dry_run_jobs(text) if rule == "samples"]
    assert len(jobs) <= 1, text[-3000:]
    return jobs[0] if jobs else ""


def test_dry_run_of_a_local_folder_names_no_image_and_an_edited_image_reruns_samples(tmp_path):
    """A local folder's images are the samples job's inputs through one listing (path,
    size, modification time of each, brought up to date when the DAG is built): the dry
    run names the listing, never the images; an image edited, added or removed reruns
    the samples job, and put back (bytes and time) leaves nothing to do."""
    workdir = copy_repo(tmp_path / "repo")
    root = tmp_path / "mathvision"
    _local_mathvision(root, n_images=300)
    config = {
        "model_registry": "config/models.yaml",
        "models": [],
        "datasets": {
            "mv": {"adapter": "mathvision", "source": "local", "path": str(root), "split": "test"}
        },
    }
    configfile = tmp_path / "local.yaml"
    configfile.write_text(json.dumps(config), encoding="utf-8")
    target = "results/samples/mv/samples.jsonl"
    job = _samples_job(dry_run(workdir, configfile, target))
    assert "input: " + ", ".join([str(root / "test.jsonl"), "results/listings/mv.tsv"]) in job
    assert ".png" not in job and len(job) < 1500, job
    run(
        [str(BIN / "snakemake"), "--cores", "1", f"--configfile={configfile}", target],
        workdir,
        env={"PYTHONPATH": str(workdir / "workflow")},
    )
    assert _samples_job(dry_run(workdir, configfile, target)) == ""
    image, extra, unused = root / "images/2.png", root / "images/new.png", root / "images/300.png"
    data, st = image.read_bytes(), image.stat()
    for change, undo in (
        (lambda: image.write_bytes(data + b"\0"), lambda: image.write_bytes(data)),
        (lambda: extra.write_bytes(data), extra.unlink),
        (lambda: unused.rename(root / "300.bak"), lambda: (root / "300.bak").rename(unused)),
    ):
        change()
        job = _samples_job(dry_run(workdir, configfile, target))
        assert "reason: Updated input files: results/listings/mv.tsv" in job, job
        undo()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _samples_job(dry_run(workdir, configfile, target)) == ""


def test_dry_run_of_the_real_mathvision_samples_job_is_small(tmp_path):
    """MATH-V test at full size (3,040 images): the samples job's text in the dry run is
    a few lines, not every image (115 KB before the listing)."""
    folder = real_data(REPO) / "mathvision"
    if not (folder / "data" / "test.jsonl").is_file():
        pytest.skip(f"the real MATH-V data is not at {folder} (docs/real-data.md)")
    workdir = copy_repo(tmp_path / "repo")
    config = {
        "model_registry": "config/models.yaml",
        "models": [],
        "datasets": {"mathvision": {"source": "local", "path": str(folder)}},
    }
    configfile = tmp_path / "mathvision.yaml"
    configfile.write_text(json.dumps(config), encoding="utf-8")
    job = _samples_job(dry_run(workdir, configfile, "results/samples/mathvision/samples.jsonl"))
    assert "results/listings/mathvision.tsv" in job and ".jpg" not in job, job[:2000]
    assert len(job) < 1500, len(job)
    listing = (workdir / "results/listings/mathvision.tsv").read_text().splitlines()
    assert len(listing) == 1 + len(list((folder / "images").glob("*.jpg")))


def test_each_model_is_loaded_once_per_engine(demo_run):
    """A local model's cells of one phase are answered by one engine job that loads the
    model once (its log), and no job of the run outlives snakemake."""
    for model in ("demo-base", "demo-reasoning"):
        logs = sorted(
            p
            for p in (demo_run / "logs" / "engines" / model).rglob("*.log")
            if ".plan" not in p.name
        )
        assert [p.parent.name for p in logs] == ["phase0", "phase1"]
        for log in logs:
            text = log.read_text()
            assert text.count("loaded once for this engine") == 1, text[-2000:]
    # no local model answers in an inference job of its own
    infer_logs = demo_run / "logs" / "infer"
    assert not infer_logs.exists() or not any(
        model in str(p)
        for p in infer_logs.rglob("*.log")
        for model in ("demo-base", "demo-reasoning")
    )
    assert job_processes(demo_run) == []


def test_a_killed_engine_resumes_and_ends_byte_identical(demo_run, tmp_path):
    """kill -9 of an engine job half-way through its cells: snakemake fails; the next
    snakemake answers only what was not written yet (the resume caches keep the rest)
    and every output, scored file and table equals the uninterrupted run's. (The last
    test of the module: it reruns demo-base's first phase.)"""
    import signal
    import subprocess
    import time

    from .conftest import tool_env

    before = run_files(demo_run)
    # demo-base's first-phase cells as a fresh model finds them: no answers, no shards,
    # no gathered outputs (what a run that has not answered them yet sees)
    plan = "results/engines/demo-base/phase0/engine0.json"
    cells = json.loads((demo_run / plan).read_text())["cells"]
    for c in cells:
        shard = demo_run / c["out"]
        for gone in (
            shard,
            shard.with_name(shard.name + ".partial"),
            shard.parent.with_suffix(".jsonl"),
        ):
            gone.unlink(missing_ok=True)
    caches = [demo_run / f"{c['out']}.partial" for c in cells]
    # asked for by name: Snakemake rebuilds no missing intermediate file whose final
    # targets exist (the scored files, the tables)
    targets = sorted({str(Path(c["out"]).parent.with_suffix(".jsonl")) for c in cells})
    cmd = [str(BIN / "snakemake"), "--cores", "1", *SMALL, "--", *targets]
    proc = subprocess.Popen(cmd, cwd=demo_run, env=tool_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    log = demo_run / "logs/engines/demo-base/phase0/engine0.log"
    end = time.monotonic() + 600
    killed = False
    while time.monotonic() < end and proc.poll() is None and not killed:
        written = [c for c in caches if c.exists() and c.stat().st_size]
        engines = [
            pid
            for pid in job_processes(demo_run)
            if b"infer-engine" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        if len(written) >= 2 and engines:
            for pid in engines:
                os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    assert killed, "the engine was not caught half-way"
    assert proc.wait(timeout=300) != 0
    done_before = sum(len(read_jsonl(c)) for c in caches if c.exists())
    assert done_before > 0
    again = snakemake(demo_run, "--rerun-incomplete", *SMALL, "--", *targets)
    assert again.returncode == 0
    generated = [
        int(n)
        for n in re.findall(r"'generated': (\d+)", log.read_text().split("models.demo-base, ")[-1])
    ]
    total = sum(len(read_jsonl(demo_run / c["out"])) for c in cells)
    assert sum(generated) == total - done_before  # only what was not written before
    assert run_files(demo_run) == before

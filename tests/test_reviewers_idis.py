"""Reviewers of the Idis study: released outputs (a JSONL of responses, five draws per
question) -> scored -> attributes, areas -> metrics -> every Idis table and figure, with
no model run (config `imports`, format jsonl), on the demo's Idis slice."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from vlmrobust.core.io import read_jsonl

from .conftest import BIN, copy_repo, run

# Whole workflow runs (the reviewers' Idis run from released files):
# `pytest -m "not workflow"` leaves them out.
pytestmark = pytest.mark.workflow

MODELS = ["qwen3-vl-8b-thinking", "r1-onevision-7b-rl"]
PERCEPTION = "imagenet9-released"
WATERBIRDS = "waterbirds-released"
CONDITIONS = {
    "clean": {"perturbation": "none"},
    "idis-objects": {"perturbation": "objects", "segments": "results/raw/demo-idis/segments"},
    "idis-typographic": {"perturbation": "typographic", "classes": 1},
    "idis-size": {
        "perturbation": "size",
        "segments": "results/raw/demo-idis/segments",
        "avoid": "pixels",
        "sizes": {"small": 0.01, "medium": 0.025, "large": 0.05},
    },
    "idis-res": {"perturbation": "resize", "resolutions": [128, 512]},
}
PERCEPTION_PROMPTS = ["idis-perception", "idis-perception-mitigate", "idis-perception-budget-1024"]
WATERBIRDS_PROMPTS = ["waterbirds", "waterbirds-mitigate"]
DRAWS = 5
#: draw d of every question: its reasoning length, and whether it answers right
#: (the short ones do: the length-rank curve is 1, 1, 1, 0, 0)
LENGTHS = [50, 40, 30, 60, 70]
RIGHT = [True, True, True, False, False]


def _config(data: Path) -> dict:
    imports = []
    for model in MODELS:
        for dataset, conditions, prompts in (
            (PERCEPTION, list(CONDITIONS), PERCEPTION_PROMPTS),
            (WATERBIRDS, ["clean"], WATERBIRDS_PROMPTS),
        ):
            for condition in conditions:
                for prompt in prompts:
                    imports.append(
                        {
                            "model": model,
                            "dataset": dataset,
                            "condition": condition,
                            "prompt": prompt,
                            "format": "jsonl",
                            "path": f"released/{model}/{dataset}/{condition}/{prompt}.jsonl",
                            "thinking_field": "reasoning",
                            "tokens_field": "reasoning_tokens",
                        }
                    )
    common = {"source": "local", "group": "idis", "temperature": 0.7, "n": DRAWS}
    return {
        "models": MODELS,
        "conditions": CONDITIONS,
        "datasets": {
            PERCEPTION: {
                **common,
                "adapter": "imagenet9",
                "path": "results/raw/demo-idis/imagenet9",
                "limit": 2,
                "conditions": list(CONDITIONS),
                "prompts": PERCEPTION_PROMPTS,
            },
            WATERBIRDS: {
                **common,
                "adapter": "waterbirds",
                "path": "results/raw/demo-idis/waterbirds",
                "limit": 4,
                "conditions": ["clean"],
                "prompts": WATERBIRDS_PROMPTS,
            },
        },
        "metrics": {"bootstrap_resamples": 200},
        "judge": {
            "attributes": {
                "extractors": {
                    "lexical": {"backend": "offline"},
                    "lexical-minimal": {
                        "backend": "offline",
                        "vocabulary": "resources/idis/attribute-vocabulary-minimal.yaml",
                    },
                }
            }
        },
        "imports": imports,
    }


def _response(sample: dict, variant: dict, draw: int) -> dict:
    """A released row: the trace names the target's class and, for a distracted image,
    the distractor objects; the answer is right on the short draws."""
    meta = sample["meta"]
    params = variant.get("params") or {}
    if "label" in meta:  # perception
        truth = meta["label"]
        wrong = "Fish" if truth != "Fish" else "Dog"
        objects = " and ".join(params.get("distractors") or [])
        trace = f"The main object looks like a {truth.lower()}."
        if objects:
            trace += f" There is also a {objects} in the picture."
        answer = f"<answer>{truth if RIGHT[draw] else wrong}</answer>"
    else:  # waterbirds: the background is the distractor
        truth = sample["answer"]
        wrong = "Landbird" if truth == "Waterbird" else "Waterbird"
        trace = "The bird has long legs and a long neck, standing near the water."
        answer = f"<answer>{truth if RIGHT[draw] else wrong}</answer>"
    return {
        "question_id": variant["variant_id"],
        "reasoning": trace,
        "response": answer,
        "reasoning_tokens": LENGTHS[draw],
    }


def _write_released(workdir: Path, config: dict) -> None:
    for entry in config["imports"]:
        dataset, condition = entry["dataset"], entry["condition"]
        samples = {
            s["sample_id"]: s
            for s in read_jsonl(workdir / f"results/samples/{dataset}/samples.jsonl")
        }
        variants = read_jsonl(workdir / f"results/variants/{dataset}/{condition}/manifest.jsonl")
        path = workdir / entry["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as fh:
            for v in variants:
                for draw in range(DRAWS):
                    fh.write(json.dumps(_response(samples[v["sample_id"]], v, draw)) + "\n")


def _snakemake(workdir: Path, *args: str):
    cmd = [str(BIN / "snakemake"), "--cores", "2", *args]
    return run([*cmd, "--configfile", "config/idis-review.yaml"], workdir)


@pytest.fixture(scope="module")
def idis_review(tmp_path_factory) -> Path:
    workdir = copy_repo(tmp_path_factory.mktemp("idis-rev") / "repo")
    config = _config(workdir)
    (workdir / "config" / "idis-review.yaml").write_text(yaml.safe_dump(config))
    # the variants first (the released rows name them), then the released files
    manifests = [
        f"results/variants/{d}/{c}/manifest.jsonl"
        for d, spec in config["datasets"].items()
        for c in spec["conditions"]
    ]
    _snakemake(workdir, *manifests)
    _write_released(workdir, config)
    dry = _snakemake(workdir, "-n")
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout + dry.stderr, flags=re.M))
    assert "infer" not in jobs and "demo_model" not in jobs  # no model runs
    assert "block_attention" not in jobs
    assert jobs["import_outputs"] == str(len(config["imports"]))
    # what the views read (judge.attributes.scope: read): the main extractor on the
    # base and the mitigation prompts and on the budget prompt's size condition, the
    # other one on the base prompt (not the clean perception images)
    assert jobs["judge_attributes"] == str(2 * (5 * 2 + 1 + 2) + 2 * (4 + 1))
    _snakemake(workdir)
    return workdir


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_every_idis_table_and_figure_is_rebuilt(idis_review):
    for dataset, tables, figures in (
        (
            PERCEPTION,
            ["summary", "extractor_agreement", "sizes", "mitigation", "sampling"],
            [
                "length_accuracy",
                "length_accuracy_semantics",
                "length_accuracy_modality",
                "budget_accuracy",
                "budget_length",
                "attributes",
                "attr_accuracy",
                "length_attributes",
                "attr_area",
                "size_attributes",
                "mitigation",
                "visual_tokens",
                "length_distribution",
            ],
        ),
        (WATERBIRDS, ["summary", "extractor_agreement", "mitigation"], ["mitigation"]),
    ):
        for name in tables:
            for ext in ("csv", "md", "tex"):
                assert (idis_review / f"results/tables/idis/{dataset}/{name}.{ext}").is_file()
        for name in figures:
            for ext in ("png", "pdf"):
                assert (idis_review / f"figures/idis/{dataset}/{name}.{ext}").stat().st_size > 0


def test_rank_curve_and_accuracy_from_the_released_draws(idis_review):
    rows = _csv(idis_review / f"results/metrics/idis/{PERCEPTION}/metrics.csv")
    clean = [
        r
        for r in rows
        if r["model"] == MODELS[0]
        and r["prompt"] == "idis-perception"
        and r["condition"] == "clean"
        and r["subset"] == ""
    ]
    acc = next(r for r in clean if r["metric"] == "accuracy")
    assert float(acc["value"]) == pytest.approx(0.6) and acc["n"] == str(2 * DRAWS)
    curve = {r["rank"]: float(r["value"]) for r in clean if r["metric"] == "rank_accuracy"}
    # ranked by length (30, 40, 50, 60, 70): the three right draws come first
    assert curve == {"1": 1.0, "2": 1.0, "3": 1.0, "4": 0.0, "5": 0.0}
    lengths = {r["rank"]: float(r["value"]) for r in clean if r["metric"] == "rank_length"}
    assert lengths == {"1": 30.0, "2": 40.0, "3": 50.0, "4": 60.0, "5": 70.0}


def test_attribute_ratios_from_the_traces(idis_review):
    rows = _csv(idis_review / f"results/metrics/idis/{PERCEPTION}/metrics.csv")

    def value(metric, **match):
        hits = [
            r
            for r in rows
            if r["metric"] == metric
            and r["model"] == MODELS[0]
            and r["prompt"] == "idis-perception"
            and r["extractor"] == "lexical"
            and all(r[k] == v for k, v in match.items())
        ]
        assert len(hits) == 1, (metric, match, len(hits))
        return float(hits[0]["value"])

    # a conflicting n=2 trace names the target's class once and two objects of one
    # other class: r_attr = 2 / 3
    assert value(
        "r_attr", condition="idis-objects", semantics="conflicting", distractors="2"
    ) == pytest.approx(2 / 3)
    # irrelevant objects count as "other", the distractor category of irrelevant
    assert value(
        "r_attr", condition="idis-objects", semantics="irrelevant", distractors="4"
    ) == pytest.approx(4 / 5)
    # a clean trace names only the target
    assert value("r_target", condition="clean") == pytest.approx(1.0)
    # the composited objects' areas are exact
    areas = read_jsonl(idis_review / f"results/areas/{PERCEPTION}/idis-objects.jsonl")
    assert {a["method"] for a in areas} == {"exact"}
    assert all(0 < a["r_area"] < 1 for a in areas)


def test_mitigation_table_on_waterbirds(idis_review):
    table = _csv(idis_review / f"results/tables/idis/{WATERBIRDS}/mitigation.csv")
    assert len(table) == 2 * len(MODELS)  # each model with and without the prompt
    # every model is right on 3 of 5 draws everywhere, and its traces are 50 tokens on
    # average
    for row in table:
        overall = [v for k, v in row.items() if k.startswith("Overall")]
        assert overall == ["60.0", "50.0"]


def test_sizes_table_has_every_size(idis_review):
    # the cut-outs keep clear of the target's pixels (avoid: pixels): every size fits
    report = json.loads(
        (idis_review / f"results/variants/{PERCEPTION}/idis-size/report.json").read_text()
    )
    assert report["variants"] == 2 * 3 and report["excluded"] == 0
    text = (idis_review / f"results/tables/idis/{PERCEPTION}/sizes.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| idis-perception "))
    # accuracy 60.0 at each size; r_attr 50.0 (one object of one class, the target once);
    # an accuracy cell links to the explorer's rows of its size group
    cells = [c.strip() for c in row.split("|")[3:-1]]
    assert [re.sub(r"^\[(.*)\]\(.*\)$", r"\1", c) for c in cells] == ["60.0", "50.0"] * 3
    assert all(
        c.startswith("[60.0](../../../explorer/index.html#cell=1&") and "filter.size=" in c
        for c in cells[::2]
    )

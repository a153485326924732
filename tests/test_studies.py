"""The studies as objects (vlmrobust.studies): discovery, scopes, files and specs from the
run plan, and the shape every study must have."""

from __future__ import annotations

import subprocess

import pytest

from vlmrobust.plan import RunPlan
from vlmrobust.studies import STUDIES, get_study, study_folders
from vlmrobust.studies.base import Study


def test_every_study_module_is_found():
    assert list(STUDIES) == ["corruption", "distraction", "idis", "masking"]
    assert all(isinstance(s, Study) for s in STUDIES.values())
    with pytest.raises(ValueError, match="unknown study 'crm' \\(known: corruption, "):
        get_study("crm")


def test_demo_folders_and_files(plan):
    folders = study_folders(plan)
    assert list(folders) == [
        "corruption",
        "distraction/demo-distract",
        "idis/demo-idis-perception",
        "idis/demo-idis-math",
        "idis/demo-idis-budget",
        "idis/demo-idis-waterbirds",
        "masking/demo-visargs",
    ]
    idis = STUDIES["idis"]
    assert idis.figure_files(plan, "demo-idis-math")[:4] == [
        "figures/idis/demo-idis-math/length_accuracy.png",
        "figures/idis/demo-idis-math/length_accuracy.pdf",
        "figures/idis/demo-idis-math/length_accuracy_semantics.png",
        "figures/idis/demo-idis-math/length_accuracy_semantics.pdf",
    ]
    # the MathVerse judge's verdicts are the study's correctness on a mathverse dataset
    math_inputs = idis.inputs(plan, "demo-idis-math")
    assert len(math_inputs["math_judged"]) == 2 * 5 and len(math_inputs["manifests"]) == 4
    assert idis.spec(plan, "demo-idis-perception")["draws"] == 5
    corruption = STUDIES["corruption"]
    assert corruption.scopes(plan) == [""]
    assert corruption.table_files(plan, "")[:3] == [
        "results/tables/corruption/table1.csv",
        "results/tables/corruption/table1.md",
        "results/tables/corruption/table1.tex",
    ]
    masking = STUDIES["masking"]
    assert masking.page_files(plan, "demo-visargs") == [
        "figures/masking/demo-visargs/example1.html",
        "figures/masking/demo-visargs/example2.html",
    ]
    # 2 models x 2 mask conditions: compared rows and the hallucination judge's rows
    inputs = masking.inputs(plan, "demo-visargs")
    assert inputs["compared"][0] == "results/compared/demo-base/demo-visargs/mask-specific.jsonl"
    assert inputs["hallucination"][3] == (
        "results/judged-hallucination/demo-reasoning/demo-visargs/mask-random.jsonl"
    )


def test_specs_carry_what_the_views_read(plan):
    spec = STUDIES["corruption"].spec(plan, "")
    assert spec["clean_condition"] == "clean" and spec["perturbed_conditions"] == ["corrupt"]
    assert "conditions" not in spec  # one key per fact: the metrics and the views read the same
    assert spec["datasets"]["demo-chart"]["display"] == "demo-chart"  # no display name set
    assert spec["datasets"]["demo-chart"]["group"] == "reasoning"
    inputs = STUDIES["corruption"].inputs(plan, "")
    # 8 datasets with clean + corrupt x 2 models, and one manifest per corrupt condition
    assert len(inputs["scored"]) == 8 * 2 * 2 and len(inputs["manifests"]) == 8
    distraction = STUDIES["distraction"].spec(plan, "demo-distract")
    assert (distraction["distracted_condition"], distraction["corruption_condition"]) == (
        "distracted",
        "corrupt",
    )


def test_a_study_without_its_conditions_has_no_scope(plan):
    config = dict(plan.config, models=[])
    empty = RunPlan(config, plan.registry)
    assert all(s.scopes(empty) == [] for s in STUDIES.values())


TOY_STUDY = '''
"""A toy study: clean accuracy per model, pooled over the demo datasets."""

import pandas as pd

from ..core import paths
from ..metrics.core import metric_row, read_inputs
from ..report.tables.render import Table
from .base import Study


class ToyStudy(Study):
    name = "toy"
    title = "Toy study"

    def scopes(self, plan):
        return [""] if plan.models else []

    def spec(self, plan, scope):
        return {"clean": plan.clean, "models": list(plan.models)}

    def inputs(self, plan, scope):
        return {
            "scored": [
                key.path(paths.SCORED)
                for key in plan.cells(conditions=[plan.clean], outputs=False)
            ]
        }

    def compute(self, inputs, spec):
        scored, _ = read_inputs(inputs["scored"], [])
        rows = [
            metric_row("accuracy", model=m, value=float(g["correct"].mean()), n=len(g))
            for m, g in scored.groupby("model")
        ]
        return pd.DataFrame(rows), []

    def table_names(self, spec):
        return ["accuracy"]

    def tables(self, metrics, inputs, spec):
        rows = [[r.model, f"{100 * r.value:.1f}"] for r in metrics.itertuples()]
        return {"accuracy": Table("Toy", pd.DataFrame(rows, columns=["Model", "Acc."]))}


STUDY = ToyStudy()
'''


def test_adding_a_study_is_one_module(tmp_path):
    """A new module under vlmrobust/studies/ joins the DAG through the generic rules:
    no edit to common.smk, the rules or the CLI."""
    import os
    import re

    from .conftest import BIN, copy_repo

    repo = copy_repo(tmp_path / "repo")
    (repo / "workflow/vlmrobust/studies/toy.py").write_text(TOY_STUDY)
    env = {**os.environ, "PYTHONPATH": str(repo / "workflow")}
    proc = subprocess.run(
        [str(BIN / "snakemake"), "-n", "--cores", "1", "results/tables/toy/accuracy.csv"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    assert jobs["metrics"] == "1" and jobs["table"] == "1"
    assert "wildcards: folder=toy, name=accuracy" in out
    assert "vlmrobust metrics --study toy --scope=" in out


def test_a_models_checkpoint_or_resources_do_not_touch_the_study_specs(plan):
    """The specs carry only the registry fields the views and pairs read, so editing a
    model's checkpoint, resources or studies reruns no metrics, table or figure."""
    import copy

    before = {s.name: [s.spec(plan, sc) for sc in s.scopes(plan)] for s in STUDIES.values()}
    registry = copy.deepcopy(plan.registry)
    registry["demo-base"].update(resources={"gpu": 2, "mem_mb": 1, "runtime": 1}, studies=["x"])
    registry["demo-base"]["options"] = {"batch_size": 1}
    edited = RunPlan(plan.config, registry)
    after = {s.name: [s.spec(edited, sc) for sc in s.scopes(edited)] for s in STUDIES.values()}
    assert after == before
    assert before["corruption"][0]["models"]["demo-reasoning"] == {
        "name": "Demo-Reasoning",
        "family": "demo",
        "role": "reasoning",
        "base": "demo-base",
    }

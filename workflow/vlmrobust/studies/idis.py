"""The Idis study: how distractors change the test-time scaling of reasoning VLMs.

Per dataset with an Idis condition (objects, typographic, diagram, handwritten,
textual, size, resize, or the released benchmark) or an Idis base benchmark
(ImageNet-9, MathVerse, Waterbirds): accuracy and reasoning length per group of
responses (clean; each distractor kind x semantics x count; sizes; resolutions; each
prompt setting, e.g. the mitigation prompt) and the length-rank curves of the paper's §4.

Definitions: docs/studies/idis.md and :mod:`vlmrobust.metrics.idis`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..core import paths
from ..core.paths import path
from ..core.prompts import prompt_role
from ..metrics.core import read_inputs
from ..metrics.idis import (
    EXTRA_COLUMNS,
    IDIS_PERTURBATIONS,
    compute_idis_metrics,
    read_areas,
    read_attributes,
    read_blocked,
    read_idis_variants,
    read_math_judged,
    read_sample_meta,
)
from ..metrics.scoring import add_scoring_rows
from ..plan import RunPlan, inference, judges, scoring
from ..plan import idis as idis_plan
from ..report.figures.idis import FIGURE_CAPTIONS, idis_figure_names, idis_figures, idis_view
from ..report.tables.idis import TABLE_CAPTIONS, idis_table_names, idis_tables
from .base import Inputs, Study, model_fields

#: base benchmarks of the study: their datasets belong to it even without a distractor
#: condition (Waterbirds: the mitigation prompt only)
IDIS_ADAPTERS = ("imagenet9", "mathverse", "waterbirds")
#: the kind of distractor each perturbation adds (the released benchmark: its ``kind``)
PERTURBATION_KINDS = {
    "objects": "visual",
    "diagram": "visual",
    "typographic": "typographic",
    "handwritten": "typographic",
    "textual": "textual",
    "size": "size",
    "resize": "resolution",
}


class IdisStudy(Study):
    name = "idis"
    title = "Idis: distractors and test-time scaling"
    extra_columns = EXTRA_COLUMNS
    table_caption = (
        "Idis: per model and prompt setting, accuracy (every draw of every question; "
        "question-bootstrap interval) and mean reasoning length (tokens of the thinking "
        "part, the model's own tokenizer) for the clean images and each distractor kind, "
        "semantics and number of distractors."
    )
    figure_caption = (
        "Idis length-accuracy curves (the paper's Figure 3 layout): the sampled "
        "responses of each question ranked by reasoning length; per rank, the accuracy "
        "against the mean length of that rank, one curve per number of distractors "
        "(0 = clean), with a question-bootstrap band."
    )

    def conditions(self, plan: RunPlan) -> list[str]:
        return [
            c
            for c, spec in plan.conditions.items()
            if spec.get("perturbation") in IDIS_PERTURBATIONS
        ]

    def scopes(self, plan: RunPlan) -> list[str]:
        if not plan.models:
            return []
        idis = set(self.conditions(plan))
        return [
            d
            for d, spec in plan.datasets.items()
            if (idis & set(spec["conditions"]) or spec["adapter"] in IDIS_ADAPTERS)
            and plan.models_of(d)
        ]

    def kinds(self, plan: RunPlan, scope: str) -> list[str]:
        """The distractor kinds among a dataset's Idis conditions, in a fixed order."""
        found = set()
        for c in plan.datasets[scope]["conditions"]:
            spec = plan.conditions[c]
            kind = PERTURBATION_KINDS.get(spec["perturbation"])
            if spec["perturbation"] == "idis-release":
                kind = spec.get("kind")
            if kind:
                found.add(kind)
        return [k for k in ("visual", "typographic", "textual", "size", "resolution") if k in found]

    def spec(self, plan: RunPlan, scope: str) -> dict[str, Any]:
        models = plan.models_of(scope)
        prompts = plan.prompts_of(scope)
        roles = {p: prompt_role(p) for p in prompts}
        return {
            "models": model_fields(plan, models),
            "model_order": models,
            "dataset": scope,
            "adapter": plan.datasets[scope]["adapter"],
            "task": idis_plan.idis_task(plan, scope),
            "kinds": self.kinds(plan, scope),
            "clean_condition": plan.clean,
            "draws": inference.draws(plan, scope)[0],
            # a prompt's own draws (datasets.<d>.prompt_decoding): the greedy mitigation
            # prompt answers once where the base prompt samples 5
            "prompt_draws": {p: inference.draws(plan, scope, p)[0] for p in prompts},
            "main_prompt": prompts[0],
            "prompts": prompts,
            "mitigation_prompts": [p for p, (role, _) in roles.items() if role == "mitigation"],
            "budget_prompts": {p: n for p, (role, n) in roles.items() if role == "budget"},
            "extractors": judges.attribute_extractors_of(plan, scope),
            "blocking": bool(idis_plan.blocked_files(plan, scope)),
            "bootstrap": plan.bootstrap,
        }

    def inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        conditions = plan.datasets[scope]["conditions"]
        models = plan.models_of(scope)
        idis = set(self.conditions(plan))
        return {
            "scored": scoring.scored_of(plan, scope, models, conditions),
            "manifests": [
                path(paths.MANIFEST, dataset=scope, condition=c) for c in conditions if c in idis
            ],
            "samples": [path(paths.SAMPLES, dataset=scope)],
            "math_judged": judges.math_judged_files(plan, scope),
            "attributes": judges.attribute_files(plan, scope),
            "areas": idis_plan.area_files(plan, scope),
            "blocked": idis_plan.blocked_files(plan, scope),
        }

    def compute(self, inputs: Inputs, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, list[str]]:
        scored, _ = read_inputs(inputs["scored"], [])
        variants = read_idis_variants(inputs.get("manifests") or [])
        judged_paths = inputs.get("math_judged") or []
        judged = read_math_judged(judged_paths) if judged_paths else None
        samples = inputs.get("samples") or []
        attributes = inputs.get("attributes") or []
        areas = inputs.get("areas") or []
        blocked = inputs.get("blocked") or []
        metrics, warnings = compute_idis_metrics(
            scored,
            variants,
            spec,
            judged,
            samples=read_sample_meta(samples) if samples else None,
            attributes=read_attributes(attributes) if attributes else None,
            areas=read_areas(areas) if areas else None,
            blocked=read_blocked(blocked) if blocked else None,
        )
        return add_scoring_rows(metrics, scored, spec, warnings), warnings

    def table_names(self, spec: Mapping[str, Any]) -> list[str]:
        return idis_table_names(spec)

    def figure_names(self, spec: Mapping[str, Any]) -> list[str]:
        return idis_figure_names(spec)

    def view_caption(self, kind: str, name: str) -> str:
        captions = {"table": TABLE_CAPTIONS, "figure": FIGURE_CAPTIONS}.get(kind, {})
        return captions.get(name) or super().view_caption(kind, name)

    def view(self, kind: str, name: str, metrics, inputs, spec):
        # one job writes one file: build only the view asked for
        return idis_view(kind, name, metrics, spec)

    def tables(self, metrics, inputs, spec):
        return idis_tables(metrics, spec)

    def figures(self, metrics, inputs, spec):
        return idis_figures(metrics, spec)


STUDY = IdisStudy()

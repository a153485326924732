"""The region-masking study (Contrastive Region Masking): per dataset with mask
conditions, the chains and answers on the clean and the masked image compared step by
step (answer flips, step disruption, hallucination, region attribution; Tables 2-5) and
example figures with HTML pages.

Definitions: docs/studies/masking.md and :mod:`vlmrobust.metrics.masking`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..core import paths
from ..core.paths import path
from ..metrics.core import read_inputs
from ..metrics.masking import compute_masking_metrics, read_compared
from ..metrics.scoring import add_scoring_rows
from ..plan import RunPlan, scoring
from ..report.figures.masking import masking_examples_views, masking_figure_names
from ..report.tables.masking import masking_table_names, masking_tables
from .base import Inputs, Study, model_fields


def _rows(inputs: Inputs) -> list[dict[str, Any]]:
    """The compared rows with the hallucination judge's verdicts joined."""
    return read_compared(inputs["compared"], inputs.get("hallucination") or [])


class MaskingStudy(Study):
    name = "masking"
    title = "Region-masking study"
    table_caption = (
        "Tables of the Contrastive Region Masking study. Table 2: answer flip rate, step "
        "disruption rate and hallucination rate per model under specific masking (the "
        "premise's box filled), each +/- its binomial standard error. Table 4: the same "
        "three rates under random masking (a box of the same size elsewhere); Table 5: "
        "under specific masking. Table 3: per example and model, the masked region, "
        "whether a step was disrupted, the answer flipped, the step similarity, region "
        "attribution and hallucination."
    )
    figure_caption = (
        "Examples of the Contrastive Region Masking study: the original and the masked "
        "image with the masked box drawn, beside each model's aligned chain-of-thought "
        "steps (unchanged, modified, disappeared, new) and their all-MiniLM-L6-v2 "
        "similarity."
    )
    page_caption = figure_caption + " The HTML page shows every step in full."

    def mask_conditions(self, plan: RunPlan) -> dict[str, str]:
        """Mask condition -> its region (``specific`` or ``random``)."""
        return {
            c: spec.get("region", "specific")
            for c, spec in plan.conditions.items()
            if spec["perturbation"] == "mask"
        }

    def scopes(self, plan: RunPlan) -> list[str]:
        if not plan.models:
            return []
        return [
            d for d in plan.datasets_with(list(self.mask_conditions(plan))) if plan.models_of(d)
        ]

    def spec(self, plan: RunPlan, scope: str) -> dict[str, Any]:
        masks = self.mask_conditions(plan)
        models = plan.models_of(scope)
        return {
            "dataset": scope,
            "models": model_fields(plan, models),
            "model_order": models,
            "clean_condition": plan.clean,
            "masked_conditions": {
                c: masks[c] for c in plan.datasets[scope]["conditions"] if c in masks
            },
            "examples": plan.config["masking"]["examples"],
        }

    def inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        spec = self.spec(plan, scope)
        pairs = [(m, c) for m in spec["model_order"] for c in spec["masked_conditions"]]
        return {
            "compared": [
                path(paths.COMPARED, model=m, dataset=scope, condition=c) for m, c in pairs
            ],
            "hallucination": [
                path(paths.HALLUCINATION, model=m, dataset=scope, condition=c) for m, c in pairs
            ],
        }

    def metrics_inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        """Besides the compared chains: the scored files of the answers they compare (the
        clean and masked conditions, every prompt), whose record of how they were scored
        is the tables' scoring footnote (:mod:`vlmrobust.metrics.scoring`)."""
        spec = self.spec(plan, scope)
        conditions = [plan.clean, *spec["masked_conditions"]]
        scored = scoring.scored_of(plan, scope, spec["model_order"], conditions)
        return {**super().metrics_inputs(plan, scope), "scored": scored}

    def view_inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        return self.inputs(plan, scope)

    def compute(self, inputs: Inputs, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, list[str]]:
        warnings: list[str] = []
        scored, _ = read_inputs(inputs.get("scored") or [], [])
        metrics = compute_masking_metrics(_rows(inputs), spec)
        return add_scoring_rows(metrics, scored, spec, warnings), warnings

    def table_names(self, spec: Mapping[str, Any]) -> list[str]:
        return masking_table_names(spec)

    def figure_names(self, spec: Mapping[str, Any]) -> list[str]:
        return masking_figure_names(spec)

    def page_names(self, spec: Mapping[str, Any]) -> list[str]:
        return masking_figure_names(spec)

    def tables(self, metrics, inputs, spec):
        return masking_tables(metrics, _rows(inputs), spec)

    def figures(self, metrics, inputs, spec):
        views = masking_examples_views(_rows(inputs), spec)
        return {name: fig for name, (fig, _) in views.items()}

    def pages(self, metrics, inputs, spec):
        views = masking_examples_views(_rows(inputs), spec)
        return {name: page for name, (_, page) in views.items()}

    def view(self, kind, name, metrics, inputs, spec):
        """An example figure or page: only that example is drawn."""
        if kind == "table":
            return super().view(kind, name, metrics, inputs, spec)
        fig, page = masking_examples_views(_rows(inputs), spec, only=name)[name]
        return fig if kind == "figure" else page


STUDY = MaskingStudy()

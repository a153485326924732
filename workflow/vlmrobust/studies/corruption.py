"""The vision-corruption study: every benchmark answered clean and under the 20 vision
corruptions, pooled over all datasets (Tables 1, 2, 8-10, Figure 4 and an RR heat map).

Definitions: docs/studies/corruption.md and :mod:`vlmrobust.metrics.core`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..core import paths
from ..core.paths import path
from ..metrics.core import read_inputs
from ..metrics.corruption import compute_corruption_metrics
from ..metrics.scoring import add_scoring_rows
from ..plan import RunPlan
from ..report.figures.corruption import corruption_figure_names, corruption_figures
from ..report.tables.corruption import corruption_table_names, corruption_tables
from .base import Inputs, Study, model_fields


class CorruptionStudy(Study):
    name = "corruption"
    title = "Vision-corruption study"
    table_caption = (
        "Tables of the vision-corruption study, as CSV (Markdown and LaTeX with booktabs "
        "beside them). Table 1: clean and corrupted accuracy and relative robustness "
        "RR = P_corrupted / P_clean, macro-averaged over the reasoning benchmarks and the "
        "general ones. Table 2: matched base -> reasoning pairs pooled over benchmarks: N "
        "shared clean-correct samples, sample-wise agreement on retain/lose, "
        "base-minus-reasoning retention gap with a 90% confidence interval (paired "
        "bootstrap over samples) and the Jaccard overlap of corruption-induced errors. "
        "Tables 8-10: accuracy clean, corrupted and RR per model and benchmark. An en dash "
        "marks an undefined value (zero clean accuracy) or a missing benchmark; the "
        "footnotes say which."
    )
    figure_caption = (
        "Figure 4: per-benchmark relative robustness (RR) fingerprints, the base and "
        "reasoning models of each family side by side; the legend gives the Pearson "
        "correlation of each reasoning model's fingerprint with its base model's. RR heat "
        "map (not in the paper): RR per corruption method and severity for each model, "
        "pooled over benchmarks; grey cells have no variant or an undefined RR."
    )

    def conditions(self, plan: RunPlan) -> list[str]:
        return plan.conditions_with("corruption")

    def datasets(self, plan: RunPlan) -> list[str]:
        return plan.datasets_with(self.conditions(plan))

    def scopes(self, plan: RunPlan) -> list[str]:
        return [""] if plan.models and self.datasets(plan) else []

    def spec(self, plan: RunPlan, scope: str) -> dict[str, Any]:
        datasets = self.datasets(plan)
        studied = [m for m in plan.models if any(m in plan.models_of(d) for d in datasets)]
        return {
            "models": model_fields(plan, studied),
            "model_order": studied,
            "datasets": {
                d: {
                    "group": plan.datasets[d]["group"],
                    "display": plan.datasets[d]["display"] or d,
                    "prompts": plan.prompts_of(d),
                    "models": plan.models_of(d),
                    "conditions": plan.datasets[d]["conditions"],
                }
                for d in datasets
            },
            "clean_condition": plan.clean,
            "perturbed_conditions": self.conditions(plan),
            "bootstrap": plan.bootstrap,
        }

    def inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        corrupt, datasets = self.conditions(plan), self.datasets(plan)
        cells = plan.cells(datasets, [plan.clean, *corrupt], outputs=False)
        manifests = [
            path(paths.MANIFEST, dataset=d, condition=c)
            for d in datasets
            for c in plan.datasets[d]["conditions"]
            if c != plan.clean and c in corrupt
        ]
        return {"scored": [key.path(paths.SCORED) for key in cells], "manifests": manifests}

    def compute(self, inputs: Inputs, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, list[str]]:
        scored, variants = read_inputs(inputs["scored"], inputs.get("manifests") or [])
        metrics, warnings = compute_corruption_metrics(scored, variants, spec)
        return add_scoring_rows(metrics, scored, spec, warnings), warnings

    def table_names(self, spec: Mapping[str, Any]) -> list[str]:
        return corruption_table_names(spec)

    def figure_names(self, spec: Mapping[str, Any]) -> list[str]:
        return corruption_figure_names(spec)

    def tables(self, metrics, inputs, spec):
        return corruption_tables(metrics, spec)

    def figures(self, metrics, inputs, spec):
        return corruption_figures(metrics, spec)


STUDY = CorruptionStudy()

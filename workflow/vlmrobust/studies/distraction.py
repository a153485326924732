"""The semantic-distraction study: a benchmark with a distracted condition (an edited
image, same sample ids as the clean one), per dataset: accuracy drop and RR (Table 3),
corruption vs distraction on the same samples (Table 4), distractor reference (Table 5),
Figures 5 and 6.

Definitions: docs/studies/distraction.md and :mod:`vlmrobust.metrics.distraction`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..core import paths
from ..core.paths import path
from ..metrics.core import read_inputs
from ..metrics.distraction import compute_distraction_metrics, read_judged
from ..metrics.scoring import add_scoring_rows
from ..plan import RunPlan, scoring
from ..report.figures.distraction import distraction_figure_names, distraction_figures
from ..report.tables.distraction import distraction_table_names, distraction_tables
from .base import Inputs, Study, model_fields


class DistractionStudy(Study):
    name = "distraction"
    title = "Semantic-distraction study"
    table_caption = (
        "Tables of the semantic-distraction study. Table 3: clean and distracted accuracy, "
        "drop in percentage points and relative robustness. Table 4: the same sample ids "
        "under vision corruption and under semantic distraction, per base -> reasoning "
        "pair: RR gap (base minus reasoning), agreement, retention gap, error Jaccard. "
        "Table 5: distractor reference - DRR (share of outputs that refer to the "
        "distractor), HFR (share that refer to it and are wrong), and the reference ratios "
        "among correct and among wrong outputs; rows without a judge verdict are excluded "
        "and counted in the notes."
    )
    figure_caption = (
        "Figure 5: relative robustness under semantic distraction per model, each family's "
        "base model as a dashed line. Figure 6: (A) distractor-reference ratios among "
        "correct and among wrong outputs; (B) harmful reference rate (HFR) of each "
        "reasoning model relative to its base model (1.0 = the same)."
    )

    def scopes(self, plan: RunPlan) -> list[str]:
        """Every dataset with a distraction condition. Without the clean condition (a
        reviewer's run on released distracted outputs alone) the tables say what is
        missing: clean accuracy, drop, RR and Table 4 are NaN with a note."""
        if not plan.models:
            return []
        distraction = plan.conditions_with("distraction")
        return [
            d
            for d, spec in plan.datasets.items()
            if any(c in distraction for c in spec["conditions"])
        ]

    def spec(self, plan: RunPlan, scope: str) -> dict[str, Any]:
        conditions = plan.datasets[scope]["conditions"]
        distracted = next(c for c in conditions if c in plan.conditions_with("distraction"))
        corrupt = next((c for c in conditions if c in plan.conditions_with("corruption")), None)
        models = plan.models_of(scope)
        spec = {
            "models": model_fields(plan, models),
            "model_order": models,
            "dataset": scope,
            "clean_condition": plan.clean,
            "distracted_condition": distracted,
            "corruption_condition": corrupt,
            "bootstrap": plan.bootstrap,
        }
        verdicts_only = plan.verdicts_only(scope, distracted)
        if verdicts_only:  # released verdicts, no outputs: DRR only
            spec["verdicts_only"] = verdicts_only
        return spec

    def inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        spec = self.spec(plan, scope)
        keys = ("clean_condition", "distracted_condition", "corruption_condition")
        answered = plan.datasets[scope]["conditions"]
        conditions = [spec[k] for k in keys if spec[k] and spec[k] in answered]
        models, prompts = spec["model_order"], plan.prompts_of(scope)
        return {
            "scored": scoring.scored_of(plan, scope, models, conditions),
            "judged": [
                path(
                    paths.JUDGED,
                    model=m,
                    dataset=scope,
                    condition=spec["distracted_condition"],
                    prompt=p,
                )
                for m in models
                for p in prompts
            ],
        }

    def compute(self, inputs: Inputs, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, list[str]]:
        scored, _ = read_inputs(inputs["scored"], [])
        judged = read_judged(inputs.get("judged") or [])
        metrics, warnings = compute_distraction_metrics(scored, judged, spec)
        return add_scoring_rows(metrics, scored, spec, warnings), warnings

    def table_names(self, spec: Mapping[str, Any]) -> list[str]:
        return distraction_table_names(spec)

    def figure_names(self, spec: Mapping[str, Any]) -> list[str]:
        return distraction_figure_names(spec)

    def tables(self, metrics, inputs, spec):
        return distraction_tables(metrics, spec)

    def figures(self, metrics, inputs, spec):
        return distraction_figures(metrics, spec)


STUDY = DistractionStudy()

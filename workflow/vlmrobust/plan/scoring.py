"""The scoring side of the run plan: the scored files, how a dataset's outputs are scored
(its scorer, the scoring mode, what an unparsed choice becomes, the LLM fallback: rules
``score``, ``score_summary``). The tables state the mode from the scored rows
(:mod:`vlmrobust.metrics.scoring`), not from here.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import paths
from .scope import RunPlan


def scored_files(plan: RunPlan) -> list[str]:
    """The scored file of every cell with outputs, model by model."""
    return [key.path(paths.SCORED) for model in plan.models for key in plan.cells(models=[model])]


def scored_of(plan: RunPlan, dataset: str, models: list[str], conditions: list[str]) -> list[str]:
    """The scored files of ``models`` on one dataset under ``conditions`` and every
    prompt setting, in that order (a verdicts-only import has none)."""
    return [
        key.path(paths.SCORED)
        for m in models
        for c in conditions
        for key in plan.cells(datasets=[dataset], conditions=[c], models=[m])
    ]


def unparsed_choice(plan: RunPlan, dataset: str) -> str:
    """What an unparsed multiple-choice answer of a dataset becomes when scored
    (``wrong`` | ``most-similar``): the dataset's ``unparsed_choice``, else the run's
    ``scoring.unparsed_choice``."""
    return plan.datasets[dataset]["unparsed_choice"] or plan.config["scoring"]["unparsed_choice"]


def score_params(plan: RunPlan, dataset: str) -> dict[str, Any]:
    """What scoring a dataset's outputs needs: its scorer, the LLM extraction fallback
    (``scoring.llm_fallback``, None: none), what an unparsed choice becomes, the LLM
    cache, and the scoring mode (``scoring.mode``, ``compare_modes``, the run's
    seed for the harness's random guesses, ``scoring.harness_judge``)."""
    scoring = plan.config["scoring"]
    return {
        "scorer": plan.datasets[dataset]["scorer"],
        "fallback": scoring["llm_fallback"],
        "unparsed_choice": unparsed_choice(plan, dataset),
        "cache_dir": plan.llm_cache_dir,
        "mode": scoring["mode"],
        "compare_modes": "--compare-modes" if scoring["compare_modes"] else "",
        "seed": plan.config["seed"],
        "judge": scoring["harness_judge"],
    }


def score_param(plan: RunPlan, dataset: str, name: str) -> str:
    """One of :func:`score_params` as the ``score`` rule passes it: a text as it is,
    anything else as sorted JSON (``null`` for None)."""
    value = score_params(plan, dataset)[name]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def use_released(plan: RunPlan, model: str, dataset: str, condition: str, prompt: str) -> str:
    """``--use-released`` where an ``imports`` entry of this cell asks for the released
    labels (or carries released references), else nothing."""
    spec = plan.output_imports.get(f"{model}/{dataset}/{condition}/{prompt}")
    wanted = spec is not None and (spec["released_labels"] or spec["references"])
    return "--use-released" if wanted else ""

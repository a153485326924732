"""The Idis analyses of the run plan (docs/studies/idis.md): a dataset's attribute task
and the run's attribute extractors, the distractor areas of the conditions that place
distractors, and the attention-blocking re-answers (rules ``idis_areas``,
``block_attention``; the extractors' own files are in :mod:`vlmrobust.plan.judges`).
"""

from __future__ import annotations

from typing import Any

from ..core import paths
from ..core.config import switch_backend
from ..core.idis import AREA_PERTURBATIONS, IDIS_TASKS
from ..core.paths import path
from ..core.registry import LOCAL_BACKENDS
from .inference import infer_spec, model_files
from .scope import CellKey, RunPlan
from .scoring import unparsed_choice


def idis_task(plan: RunPlan, dataset: str) -> str | None:
    """The attribute-analysis task of a dataset (``perception``, ``math``,
    ``waterbirds``) from its adapter, or None."""
    return IDIS_TASKS.get(plan.datasets[dataset]["adapter"])


def attribute_extractors(plan: RunPlan) -> list[str]:
    """The attribute extractors (config ``judge.attributes.extractors``), main first."""
    return list(plan.config["judge"]["attributes"]["extractors"])


# ---------------------------------------------------------------------- areas


def area_files(plan: RunPlan, dataset: str) -> list[str]:
    """Distractor areas of an Idis dataset's conditions that place distractors."""
    if idis_task(plan, dataset) is None:
        return []
    return [
        path(paths.AREAS, dataset=dataset, condition=c)
        for c in plan.datasets[dataset]["conditions"]
        if plan.conditions[c]["perturbation"] in AREA_PERTURBATIONS
        and plan.conditions[c].get("kind") != "textual"  # released textual: no image
    ]


def areas_spec(plan: RunPlan) -> dict[str, Any]:
    """The distractor-area step's setting (config ``idis.areas``)."""
    return dict(plan.config["idis"]["areas"])


# ---------------------------------------------------------------------- attention blocking


def blocking_prompt(plan: RunPlan, dataset: str) -> str:
    """The prompt setting whose outputs the attention-blocking step re-answers."""
    chosen = plan.config["idis"]["blocking"]["prompt"]
    return chosen if chosen is not None else plan.prompts_of(dataset)[0]


def blocked_files(plan: RunPlan, dataset: str) -> list[str]:
    """Attention-blocking re-answers (config ``idis.blocking``): its models that run
    locally (``hf``, ``vllm``: the checkpoint is loaded through transformers) x its
    conditions the dataset has, under the blocking prompt; only for a dataset with an
    attribute task and an attribute extractor."""
    blocking = plan.config["idis"]["blocking"]
    if idis_task(plan, dataset) is None or not attribute_extractors(plan):
        return []
    if blocking["datasets"] is not None and dataset not in blocking["datasets"]:
        return []
    prompt = blocking_prompt(plan, dataset)
    if prompt not in plan.prompts_of(dataset):
        return []
    return [
        path(paths.BLOCKED, model=model, dataset=dataset, condition=condition, prompt=prompt)
        for model in plan.models_of(dataset)
        if model in blocking["models"] and plan.registry[model]["backend"] in LOCAL_BACKENDS
        for condition in blocking["conditions"]
        if condition in plan.datasets[dataset]["conditions"]
        and plan.has_outputs(model, dataset, condition, prompt)
    ]


def blocking_spec(plan: RunPlan, model: str, dataset: str, prompt: str) -> dict[str, Any]:
    """One attention-blocking job besides its files: the model's inference job (one
    shard), what is blocked, and how the re-answers are scored."""
    blocking = plan.config["idis"]["blocking"]
    infer = infer_spec(plan, model, dataset, prompt, 0, 1)
    # blocking swaps transformers' attention kernel: the checkpoint through hf,
    # whichever engine answered the outputs
    if infer["model_spec"]["backend"] != "hf":
        infer["model_spec"] = switch_backend(infer["model_spec"], "hf")
    return {
        "infer": infer,
        "settings": list(blocking["settings"]),
        "max_new_tokens": int(blocking["max_new_tokens"]),
        "limit": blocking["limit"],
        "scorer": plan.datasets[dataset]["scorer"],
        "unparsed_choice": unparsed_choice(plan, dataset),
    }


def blocking_inputs(
    plan: RunPlan, model: str, dataset: str, condition: str, prompt: str
) -> dict[str, Any]:
    """What one attention-blocking job reads: the outputs, their main extractor's
    attribute labels, the variants, the samples and the model's own files."""
    key = CellKey(model, dataset, condition, prompt)
    return {
        "outputs": key.path(paths.OUTPUTS),
        "attributes": key.path(paths.ATTRIBUTES, extractor=attribute_extractors(plan)[0]),
        "manifest": path(paths.MANIFEST, dataset=dataset, condition=condition),
        "samples": path(paths.SAMPLES, dataset=dataset),
        "model": model_files(plan, model),
    }

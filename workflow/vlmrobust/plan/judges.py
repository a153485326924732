"""The judges of the run plan: the files each judge writes and its setting — the
distractor-reference judge, the CRM comparison and hallucination judge, the MathVerse
judge and the Idis attribute extractors (their scope and validation samples) — and
:class:`JudgeCell`, one judged file of a judge whose LLM may be local (rules
``judge_*``, ``compare_masking``; the LLM engines that answer those: docs/judges.md).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from ..core import paths
from ..core.paths import path
from ..core.prompts import prompt_role
from ..judges.crm import SPEC_KEYS as COMPARE_SPEC_KEYS
from .idis import attribute_extractors, blocked_files, idis_task
from .scope import CellKey, RunPlan


@dataclass(frozen=True)
class JudgeCell:
    """One judged file of the MathVerse judge or an attribute extractor: the step, its
    setting (``where``: the config key; ``spec``: resolved, :mod:`vlmrobust.core.llms`),
    the registry LLM answering it (``llm``, None for an offline or inline setting), the
    VLM outputs it reads, the file it writes and, for a validation extractor, the most
    traces it judges (``sample``; None = all)."""

    step: str
    where: str
    spec: dict[str, Any]
    llm: str | None
    model: str
    dataset: str
    condition: str
    prompt: str
    extractor: str | None
    outputs: str
    out: str
    sample: int | None


# ---------------------------------------------------------------------- reference, CRM


def judged_files(plan: RunPlan) -> list[str]:
    """Distractor-reference labels of every output under a distraction condition."""
    distraction = plan.conditions_with("distraction")
    return [key.path(paths.JUDGED) for key in plan.cells(conditions=distraction, outputs=False)]


def reference_judge_spec(plan: RunPlan) -> dict[str, Any]:
    """The distractor-reference judge (config ``judge.reference``)."""
    return plan.config["judge"]["reference"]


def compare_spec(plan: RunPlan) -> dict[str, Any]:
    """What the CRM comparison of one (model, dataset, mask condition) needs."""
    return {k: plan.config["masking"][k] for k in COMPARE_SPEC_KEYS}


def compare_inputs(plan: RunPlan, model: str, dataset: str, condition: str) -> dict[str, str]:
    """The CRM comparison's files: both stages' outputs on the clean and the masked
    images, the variants and the samples."""
    masking = plan.config["masking"]
    cot, answer = masking["cot_prompt"], masking["answer_prompt"]
    return {
        "clean_cot": CellKey(model, dataset, plan.clean, cot).path(paths.OUTPUTS),
        "clean_answer": CellKey(model, dataset, plan.clean, answer).path(paths.OUTPUTS),
        "masked_cot": CellKey(model, dataset, condition, cot).path(paths.OUTPUTS),
        "masked_answer": CellKey(model, dataset, condition, answer).path(paths.OUTPUTS),
        "manifest": path(paths.MANIFEST, dataset=dataset, condition=condition),
        "samples": path(paths.SAMPLES, dataset=dataset),
    }


def hallucination_judge_spec(plan: RunPlan) -> dict[str, Any]:
    """The hallucination judge (config ``masking.hallucination``; the offline judge's
    embedding model from ``masking.model_dir`` unless it names its own)."""
    masking = plan.config["masking"]
    spec = dict(masking["hallucination"])
    if spec.get("backend", "offline") == "offline" and spec.get("model_dir") is None:
        spec["model_dir"] = masking["model_dir"]
    return spec


# ---------------------------------------------------------------------- MathVerse judge


def math_judged_keys(plan: RunPlan, only: str | None = None) -> list[CellKey]:
    """The cells of every ``mathverse`` dataset (of the dataset ``only`` when given),
    each judged by the MathVerse judge."""
    chosen = [
        d
        for d, spec in plan.datasets.items()
        if spec["adapter"] == "mathverse" and only in (None, d)
    ]
    return list(plan.cells(datasets=chosen))


def math_judged_files(plan: RunPlan, only: str | None = None) -> list[str]:
    """MathVerse judge verdicts of every output of a ``mathverse`` dataset (of the
    dataset ``only`` when given)."""
    return [key.path(paths.MATH_JUDGED) for key in math_judged_keys(plan, only)]


def math_judge_spec(plan: RunPlan) -> dict[str, Any]:
    """The MathVerse judge (config ``judge.mathverse``), its cache under the run's."""
    spec = dict(plan.config["judge"]["mathverse"])
    if spec.get("backend", "offline") != "offline" and spec.get("cache_dir") is None:
        spec["cache_dir"] = plan.llm_cache_dir
    return spec


# ---------------------------------------------------------------------- attribute extractors


def attribute_files(plan: RunPlan, dataset: str, extractors: list[str] | None = None) -> list[str]:
    """Attribute labels of an Idis dataset (a dataset whose adapter has an attribute
    task) by every extractor (or those given): the outputs each one labels
    (:func:`attribute_keys`, config ``judge.attributes.scope``)."""
    return [
        key.path(paths.ATTRIBUTES, extractor=e)
        for e in (attribute_extractors(plan) if extractors is None else extractors)
        for key in attribute_keys(plan, e, dataset)
    ]


def attribute_spec(
    plan: RunPlan,
    extractor: str,
    dataset: str | None = None,
    model: str | None = None,
    condition: str | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    """One extractor's setting, an LLM's cache under the run's. Given one labels
    file's dataset, model, condition and prompt, also its validation sample
    ``sample: {n, seed}`` where it has one (:func:`attribute_sample`; the main
    extractor's setting never has one)."""
    spec = dict(plan.config["judge"]["attributes"]["extractors"][extractor])
    if spec.get("backend", "offline") != "offline" and spec.get("cache_dir") is None:
        spec["cache_dir"] = plan.llm_cache_dir
    if dataset is not None and model is not None and condition and prompt:
        n = attribute_sample(plan, extractor, dataset, model, condition, prompt)
        if n is not None:
            seed = int(plan.config["judge"]["attributes"]["validation_seed"])
            spec["sample"] = {"n": n, "seed": seed}
    return spec


def attribute_resources(plan: RunPlan, extractor: str, dataset: str) -> list[str]:
    """The vocabulary or prompt files an extractor's labels on ``dataset`` depend on."""
    from ..judges.attributes import resource_files

    spec = attribute_spec(plan, extractor)
    return [os.path.relpath(p) for p in resource_files(spec, idis_task(plan, dataset))]


def attribute_keys(plan: RunPlan, extractor: str, dataset: str) -> list[CellKey]:
    """The cells whose outputs ``extractor`` labels on ``dataset`` (condition, then
    model, then prompt order). None on a dataset without an attribute task, none for an
    extractor whose prompt does not exist for the task (``prompt: alternative`` is a
    perception prompt). Config ``judge.attributes``: on a dataset of ``datasets``
    (null = all), ``scope: all`` labels every output; ``scope: read`` only what a table
    or figure reads (docs/studies/idis.md, "Which traces are judged"): the main
    extractor every condition of the main prompt and of each mitigation prompt and the
    size conditions of every prompt; the others the main prompt, without the clean
    perception images (no distractor ratio: no Pearson r) when there are others.
    Wherever they are, the main extractor labels the attention-blocking outputs."""
    from ..judges.attributes import PROMPT_FILES

    task = idis_task(plan, dataset)
    settings = plan.config["judge"]["attributes"]
    prompt_of = settings["extractors"][extractor].get("prompt") or "standard"
    if task is None or (task, prompt_of) not in PROMPT_FILES:
        return []
    main = extractor == attribute_extractors(plan)[0]
    blocked = set(blocked_files(plan, dataset)) if main else set()
    analysed = settings["datasets"] is None or dataset in settings["datasets"]
    return [
        k
        for k in plan.cells(datasets=[dataset])
        if (analysed and (settings["scope"] == "all" or _attributes_read(plan, main, task, k)))
        or k.path(paths.BLOCKED) in blocked
    ]


def _attributes_read(plan: RunPlan, main: bool, task: str, key: CellKey) -> bool:
    """Whether a table or figure of the Idis study reads the labels of the outputs
    ``key`` by the main extractor (``main``) or by another one (its Table 4 row)."""
    _, dataset, condition, prompt = key
    first = plan.prompts_of(dataset)[0]
    if not main:
        alone = plan.datasets[dataset]["conditions"] == [condition]
        return prompt == first and (task != "perception" or condition != plan.clean or alone)
    return (
        prompt == first
        or prompt_role(prompt)[0] == "mitigation"
        or plan.conditions[condition]["perturbation"] == "size"
    )


def attribute_sample(
    plan: RunPlan, extractor: str, dataset: str, model: str, condition: str, prompt: str
) -> int | None:
    """How many traces of one outputs file ``extractor`` labels: None (every one) for
    the main extractor or with ``judge.attributes.validation_sample`` null; else
    ceil(validation_sample / the number of condition files the extractor labels for
    this dataset, model and prompt; the file itself counted when it is not one)."""
    n = plan.config["judge"]["attributes"]["validation_sample"]
    if n is None or extractor == attribute_extractors(plan)[0]:
        return None
    conditions = {
        k.condition
        for k in attribute_keys(plan, extractor, dataset)
        if (k.model, k.prompt) == (model, prompt)
    }
    return math.ceil(int(n) / len(conditions | {condition}))


def attribute_extractors_of(plan: RunPlan, dataset: str) -> list[str]:
    """The extractors whose labels the Idis views of ``dataset`` show, main first:
    none on a dataset without an attribute task or outside
    ``judge.attributes.datasets``; else those that label an output there."""
    chosen = plan.config["judge"]["attributes"]["datasets"]
    if idis_task(plan, dataset) is None or (chosen is not None and dataset not in chosen):
        return []
    return [e for e in attribute_extractors(plan) if attribute_keys(plan, e, dataset)]


# ---------------------------------------------------------------------- judged files


def judge_cells(plan: RunPlan) -> list[JudgeCell]:
    """Every judged file of the MathVerse judge and the attribute extractors (the
    steps whose LLM may be local: :data:`vlmrobust.core.llms.ENGINE_STEPS`), in a
    fixed order: the VLM, then dataset, condition, prompt (and extractor)."""
    judge = math_judge_spec(plan)
    cells = [
        _judge_cell("judge.mathverse", judge, key, key.path(paths.MATH_JUDGED))
        for key in math_judged_keys(plan)
    ]
    for dataset in plan.datasets:
        for e in attribute_extractors(plan):
            for key in attribute_keys(plan, e, dataset):
                spec = attribute_spec(plan, e, key.dataset, key.model, key.condition, key.prompt)
                out = key.path(paths.ATTRIBUTES, extractor=e)
                cells.append(_judge_cell(f"judge.attributes.extractors.{e}", spec, key, out, e))
    return sorted(cells, key=lambda c: (c.model, c.dataset, c.condition, c.prompt, c.out))


def _judge_cell(
    where: str, spec: dict[str, Any], key: CellKey, out: str, extractor: str | None = None
) -> JudgeCell:
    """One judged file: the outputs of ``key`` judged by the setting at ``where`` into
    ``out``; an extractor's validation sample is the one its setting carries
    (:func:`attribute_spec`)."""
    return JudgeCell(
        step="attributes" if extractor else "mathverse",
        where=where,
        spec=spec,
        llm=spec.get("llm"),
        model=key.model,
        dataset=key.dataset,
        condition=key.condition,
        prompt=key.prompt,
        extractor=extractor,
        outputs=key.path(paths.OUTPUTS),
        out=out,
        sample=(spec.get("sample") or {}).get("n"),
    )

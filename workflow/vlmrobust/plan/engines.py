"""The engines of the run plan: a local model's cells (backends hf, vllm) dealt to its
engine jobs, each the model loaded once (:mod:`vlmrobust.infer.engine`), with their
plans, inputs, runtimes and rule names; the shard files they write and the gathering of
each cell's shards into its outputs file (rules ``engine_plan``, ``engine_*``,
``gather_outputs``; docs/architecture.md, "Engines").
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any

from ..core import paths
from ..core.paths import path
from ..core.registry import LOCAL_BACKENDS, model_resources
from .idis import attribute_extractors, idis_task
from .inference import cell_backend, infer_context, infer_spec, model_backends, model_files
from .judges import JudgeCell, attribute_spec, judge_cells, math_judged_keys
from .scope import CellKey, RunPlan

#: a cell of one engine job: (dataset, condition, prompt, shard, shards)
Job = tuple[str, str, str, int, int]


def model_cells(plan: RunPlan, model: str, phase: int, backend: str) -> list[tuple[str, str, str]]:
    """``model``'s cells (dataset, condition, prompt) of one phase (0: prompts on the
    images alone; 1: prompts built on the model's own first-stage outputs, which run
    after them) answered with ``backend``, in the plan's order; imported ones left out."""
    cache = plan._cache.setdefault("model_cells", {})
    if (model, phase, backend) not in cache:
        cache[(model, phase, backend)] = [
            (k.dataset, k.condition, k.prompt)
            for k in plan.cells(models=[model], imported=False)
            if cell_backend(plan, model, k.dataset) == backend
            and bool(infer_context(plan, *k)) == bool(phase)
        ]
    return cache[(model, phase, backend)]


def split_cells(plan: RunPlan, model: str) -> bool:
    """Config ``service.split_cells``, for a local model."""
    local = plan.registry[model]["backend"] in LOCAL_BACKENDS
    return local and bool(plan.config["service"]["split_cells"])


def cell_shards(plan: RunPlan, model: str, dataset: str) -> int:
    """The shards of ``model``'s cells of ``dataset``: the dataset's ``shards``, times
    the model's engines with ``service.split_cells`` (each engine answers the same
    share of every cell)."""
    shards = int(plan.datasets[dataset]["shards"])
    if split_cells(plan, model):
        shards *= engines_of(plan, model, cell_backend(plan, model, dataset))
    return shards


def engines_of(plan: RunPlan, model: str, backend: str | None = None) -> int:
    """How many engine jobs (each the model loaded once, on the model's own GPUs)
    answer ``model``'s cells of one phase and backend (config ``service.engines``),
    and at least as many as keep each engine within config ``cluster.max_runtime``: an
    engine answers its cells one after another, so it asks for their registry runtimes
    added up (a partition refuses more than its MaxTime; :func:`engine_weight`)."""
    service = plan.config["service"]
    count = int(service["engines"].get(model, service["default_engines"]))
    cap = plan.config["cluster"]["max_runtime"]
    if cap:
        backend = backend or plan.registry[model]["backend"]
        runtime = model_resources(plan.registry[model])["runtime"]
        shards = [
            sum(
                int(plan.datasets[d]["shards"]) for d, _, _ in model_cells(plan, model, ph, backend)
            )
            for ph in (0, 1)
        ]
        if split_cells(plan, model):  # every engine: its share of every cell
            count = max(count, -(-runtime * max(shards) // cap))
        else:
            count = max(count, -(-max(shards) // max(1, cap // runtime)))
    return count


def engine_jobs(plan: RunPlan, model: str, phase: int, backend: str | None = None) -> list[Job]:
    """The inference jobs (dataset, condition, prompt, shard, shards) of ``model`` in
    ``phase`` answered with ``backend`` (None: the registry's), in a fixed order:
    each cell's shards one after another."""
    backend = backend or plan.registry[model]["backend"]
    return [
        (d, c, p, i, n)
        for d, c, p in model_cells(plan, model, phase, backend)
        for n in [cell_shards(plan, model, d)]
        for i in range(n)
    ]


def engine_weight(plan: RunPlan, model: str, dataset: str) -> Fraction:
    """The share of the registry runtime one job of ``model`` on ``dataset`` asks for:
    a whole cell's (1) or, with ``service.split_cells``, one engine's share of it."""
    if not split_cells(plan, model):
        return Fraction(1)
    return Fraction(1, engines_of(plan, model, cell_backend(plan, model, dataset)))


# ---------------------------------------------------------------------- the engines


def engine_label(plan: RunPlan, model: str, backend: str, index: int) -> str:
    """An engine's name within its model and phase: its index for the registry's
    backend, else the backend and the index (``hf0``: config ``engines: papers``)."""
    own = backend == plan.registry[model]["backend"]
    return str(index) if own else f"{backend}{index}"


def engine_backend(plan: RunPlan, model: str, label: str | int) -> tuple[str, int]:
    """The backend and index of the engine ``label`` (:func:`engine_label`)."""
    text = str(label)
    found = re.fullmatch(r"(hf|vllm)?(\d+)", text)
    if found is None:
        raise ValueError(f"models.{model}: no engine named {text!r}")
    return found.group(1) or plan.registry[model]["backend"], int(found.group(2))


def engines(plan: RunPlan) -> list[tuple[str, int, str]]:
    """Every engine of the run: (model, phase, label) of each local model (backends
    hf, vllm), phase and backend that has cells."""
    return [
        (model, phase, engine_label(plan, model, backend, k))
        for model, spec in plan.models.items()
        if spec["backend"] in LOCAL_BACKENDS
        for backend in model_backends(plan, model)
        for phase in (0, 1)
        for k in range(
            min(
                engines_of(plan, model, backend),
                len(engine_jobs(plan, model, phase, backend)),
            )
        )
    ]


def engine_rule_name(model: str, phase: int | str, engine: str | int) -> str:
    """The name of one engine's rule, ``engine_<model>_phase<p>_<e>`` (the model id with
    every character a rule name cannot hold as ``_``)."""
    slug = "".join(ch if ch.isalnum() else "_" for ch in model)
    return f"engine_{slug}_phase{phase}_{engine}"


def engine_files(plan: RunPlan) -> list[str]:
    """The plan file of every engine (rule ``engine_plan``)."""
    return [path(paths.ENGINE, model=m, phase=p, engine=k) for m, p, k in engines(plan)]


def engine_cells(plan: RunPlan, model: str, phase: int, engine: str | int) -> list[Job]:
    """The cells (dataset, condition, prompt, shard, shards) engine ``engine``
    answers: the model's jobs of one phase and backend, dealt to its engines in turn
    (with ``service.split_cells``: shard k of every cell to engine k)."""
    backend, index = engine_backend(plan, model, engine)
    count = engines_of(plan, model, backend)
    jobs = engine_jobs(plan, model, phase, backend)
    return [c for k, c in enumerate(jobs) if k % count == index]


def engine_runtime(plan: RunPlan, model: str, phase: int, engine: str | int) -> int:
    """The minutes an engine asks for: its jobs' registry runtimes added up, each
    job's by its :func:`engine_weight`."""
    runtime = model_resources(plan.registry[model])["runtime"]
    cells = engine_cells(plan, model, phase, engine)
    return math.ceil(runtime * sum(engine_weight(plan, model, d) for d, *_ in cells))


def engine_clients(plan: RunPlan, model: str, phase: int, engine: str | int) -> list[str]:
    """The shard files engine ``engine`` writes (its outputs)."""
    return [
        CellKey(model, d, c, p).path(paths.SHARD, shard=i, shards=n)
        for d, c, p, i, n in engine_cells(plan, model, phase, engine)
    ]


def engine_plan(plan: RunPlan, model: str, phase: int, engine: str | int) -> dict[str, Any]:
    """What an engine job answers (:mod:`vlmrobust.infer.engine`): each cell's job
    spec (what changes its outputs) and files."""
    cells = []
    for d, c, p, i, n in engine_cells(plan, model, phase, engine):
        context = infer_context(plan, model, d, c, p)
        cells.append(
            {
                "spec": infer_spec(plan, model, d, p, i, n),
                "manifest": path(paths.MANIFEST, dataset=d, condition=c),
                "samples": path(paths.SAMPLES, dataset=d),
                "context": context[0] if context else None,
                "out": CellKey(model, d, c, p).path(paths.SHARD, shard=i, shards=n),
            }
        )
    label = str(engine)
    index: int | str = int(label) if label.isdigit() else label
    return {"model": model, "phase": phase, "engine": index, "cells": cells}


def engine_inputs(plan: RunPlan, model: str, phase: int, engine: str | int) -> list[str]:
    """Every file an engine's cells read: manifests, samples, first-stage outputs and
    the model's own files (its build record or checkpoint)."""
    files: dict[str, None] = {}
    for d, c, p, _, _ in engine_cells(plan, model, phase, engine):
        files[path(paths.MANIFEST, dataset=d, condition=c)] = None
        files[path(paths.SAMPLES, dataset=d)] = None
        files.update(dict.fromkeys(infer_context(plan, model, d, c, p)))
    files.update(dict.fromkeys(model_files(plan, model)))
    return list(files)


# ---------------------------------------------------------------------- shards


def shard_files(plan: RunPlan, model: str, dataset: str, condition: str, prompt: str) -> list[str]:
    """The shard files of one cell, gathered into its outputs file."""
    n = cell_shards(plan, model, dataset)
    key = CellKey(model, dataset, condition, prompt)
    return [key.path(paths.SHARD, shard=i, shards=n) for i in range(n)]


def cell_specs(plan: RunPlan, model: str, dataset: str, prompt: str) -> list[dict[str, Any]]:
    """The job specs of one cell's shards: a change reruns its gathering."""
    n = cell_shards(plan, model, dataset)
    return [infer_spec(plan, model, dataset, prompt, i, n) for i in range(n)]


def gathered_cells(plan: RunPlan) -> list[tuple[str, list[str]]]:
    """Every outputs file rule ``gather_outputs`` writes (a model's answers, not an
    import), with its shard files."""
    return [
        (key.path(paths.OUTPUTS), shard_files(plan, *key))
        for model in plan.models
        for key in plan.cells(models=[model], imported=False)
    ]


# ---------------------------------------------------------------------- LLM engines

#: registry keys an LLM engine loads its model from (the VLMs' inference keys)
INFERENCE_KEYS_LLM = (
    "kind",
    "backend",
    "hf_repo",
    "local_path",
    "revision",
    "demo_seed",
    "options",
)


def engine_judge_cells(plan: RunPlan) -> list[JudgeCell]:
    """The judged files whose LLM is local (backends hf, vllm): the LLM engines'."""
    if "engine_judge_cells" not in plan._cache:
        plan._cache["engine_judge_cells"] = [
            c for c in judge_cells(plan) if c.spec.get("backend") in LOCAL_BACKENDS
        ]
    return plan._cache["engine_judge_cells"]


def llm_models(plan: RunPlan) -> list[str]:
    """The local registry LLMs the run's judges name (answered by LLM engines)."""
    found = {c.llm for c in engine_judge_cells(plan)}
    return sorted(m for m in found if m is not None)


def engine_judged_files(plan: RunPlan) -> set[str]:
    """The judged files LLM engines write (no judge job of their own)."""
    return {c.out for c in engine_judge_cells(plan)}


def judge_rule_datasets(plan: RunPlan) -> list[str]:
    """The datasets with MathVerse judge verdicts that rule ``judge_mathverse`` writes
    (an offline or API LLM), sorted."""
    by_engines = engine_judged_files(plan)
    return sorted(
        {k.dataset for k in math_judged_keys(plan) if k.path(paths.MATH_JUDGED) not in by_engines}
    )


def judge_rule_extractors(plan: RunPlan) -> list[str]:
    """The attribute extractors whose labels rule ``judge_attributes`` writes (an
    offline or API LLM)."""
    return [
        e
        for e in attribute_extractors(plan)
        if attribute_spec(plan, e).get("backend") not in LOCAL_BACKENDS
    ]


def llm_engine_count(plan: RunPlan, model: str) -> int:
    """How many LLM engines judge ``model``'s files: ``service.engines.<model>``, and
    at least as many as keep each within ``cluster.max_runtime`` (an engine asks for
    the registry runtime of each of its files); at most one per judged file."""
    files = sum(c.llm == model for c in engine_judge_cells(plan))
    count = engines_of(plan, model)
    cap = plan.config["cluster"]["max_runtime"]
    if cap:
        per_engine = max(1, cap // model_resources(plan.registry[model])["runtime"])
        count = max(count, -(-files // per_engine))
    return min(count, files)


def llm_engines(plan: RunPlan) -> list[tuple[str, str]]:
    """(model, label) of every LLM engine (:func:`llm_engine_count` per local LLM)."""
    return [
        (model, str(k)) for model in llm_models(plan) for k in range(llm_engine_count(plan, model))
    ]


def llm_engine_rule_name(model: str, engine: str | int) -> str:
    """The name of one LLM engine's rule, ``llm_engine_<model>_<e>``."""
    slug = "".join(ch if ch.isalnum() else "_" for ch in model)
    return f"llm_engine_{slug}_{engine}"


def llm_engine_cells(plan: RunPlan, model: str, label: str | int) -> list[JudgeCell]:
    """The judged files LLM engine ``label`` of ``model`` writes: the model's files
    dealt to its engines in turn."""
    cells = [c for c in engine_judge_cells(plan) if c.llm == model]
    count = llm_engine_count(plan, model)
    return [c for k, c in enumerate(cells) if k % count == int(label)]


def llm_engine_plan(plan: RunPlan, model: str, label: str | int) -> dict[str, Any]:
    """What an LLM engine job answers (:mod:`vlmrobust.jobs.llm_engine`): the model's
    registry entry and, per judged file, the step, its setting and its files."""
    cells = []
    for c in llm_engine_cells(plan, model, label):
        cell = {"step": c.step, "spec": c.spec, "outputs": c.outputs, "out": c.out}
        cell["samples"] = path(paths.SAMPLES, dataset=c.dataset)
        if c.step == "attributes":
            cell["manifest"] = path(paths.MANIFEST, dataset=c.dataset, condition=c.condition)
            cell["task"] = idis_task(plan, c.dataset)
            cell["extractor"] = c.extractor
        cells.append(cell)
    spec = {k: v for k, v in plan.registry[model].items() if v is not None}
    spec = {k: spec[k] for k in INFERENCE_KEYS_LLM if k in spec}
    return {"model": model, "phase": 0, "engine": int(label), "spec": spec, "cells": cells}


def llm_engine_inputs(plan: RunPlan, model: str, label: str | int) -> list[str]:
    """Every file an LLM engine's cells read: outputs, samples, manifests, the
    extractors' word lists, and the model's own files (a built checkpoint)."""
    from ..judges.attributes import resource_files

    files: dict[str, None] = {}
    for c in llm_engine_cells(plan, model, label):
        names = [c.outputs, path(paths.SAMPLES, dataset=c.dataset)]
        if c.step == "attributes":
            names.append(path(paths.MANIFEST, dataset=c.dataset, condition=c.condition))
            names += [str(f) for f in resource_files(c.spec, idis_task(plan, c.dataset))]
        files.update(dict.fromkeys(names))
    files.update(dict.fromkeys(model_files(plan, model)))
    return list(files)


def llm_engine_runtime(plan: RunPlan, model: str, label: str | int) -> int:
    """The minutes an LLM engine asks for: the registry runtime per judged file."""
    runtime = model_resources(plan.registry[model])["runtime"]
    return runtime * len(llm_engine_cells(plan, model, label))


def engine_plan_text(plan: RunPlan, model: str, phase: int | str, engine: str | int) -> str:
    """The text of an engine's plan file (rule ``engine_plan``): an LLM engine's plan
    (:func:`llm_engine_plan`) or a VLM engine's (:func:`engine_plan`)."""
    if model in llm_models(plan):
        found = llm_engine_plan(plan, model, engine)
    else:
        found = engine_plan(plan, model, int(phase), engine)
    return json.dumps(found, sort_keys=True, indent=1)

"""The explorer's plan: which cells and variant sets a run's explorer shows, what each
job reads, and the index's specification (docs/explorer.md).

Not a study (no ``STUDY``): it sits beside them because the index says which study each
cell belongs to, read from the studies' own inputs. A *cell* is one scored file: a
model's answers to one dataset x condition x prompt; a perturbed cell is paired with the
clean cell of the same model, dataset and prompt. A *variant set* is one dataset x
condition (its manifest): thumbnails and parameters, shared by every model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import paths
from ..core.paths import path
from ..plan import CellKey, RunPlan, judges
from ..plan import idis as idis_plan

__all__ = [
    "cell_dir",
    "cell_groups",
    "cell_inputs",
    "cells",
    "cells_dir",
    "group_cells",
    "group_inputs",
    "index_inputs",
    "index_spec",
    "targets",
    "variant_sets",
    "variants_dir",
    "variants_inputs",
]

Cell = tuple[str, str, str, str]


def enabled(plan: RunPlan) -> bool:
    return bool(plan.config.get("explorer", {}).get("build", True)) and bool(plan.models)


def cells(plan: RunPlan) -> list[Cell]:
    """(model, dataset, condition, prompt) of every scored file of the run."""
    return [key for model in plan.models for key in plan.cells(models=[model])]


def cell_dir(model: str, dataset: str, condition: str, prompt: str) -> str:
    return path(
        paths.EXPLORER_CELL, model=model, dataset=dataset, condition=condition, prompt=prompt
    )


def cells_dir(model: str, dataset: str) -> str:
    return path(paths.EXPLORER_CELLS, model=model, dataset=dataset)


def cell_groups(plan: RunPlan) -> list[tuple[str, str]]:
    """(model, dataset) of every cell, in first-seen order: one job each."""
    return list(dict.fromkeys((m, d) for m, d, _, _ in cells(plan)))


def group_cells(plan: RunPlan, model: str, dataset: str) -> list[dict[str, Any]]:
    """The cells one job writes (a model's on one dataset): each one's files (see
    :func:`cell_inputs`) and its folder, as the job's ``--spec`` lists them."""
    return [
        {**cell_inputs(plan, *key), "out_dir": cell_dir(*key)}
        for key in cells(plan)
        if key[:2] == (model, dataset)
    ]


def group_inputs(plan: RunPlan, model: str, dataset: str) -> list[str]:
    """Every file the job of a (model, dataset) reads."""
    files: list[str] = []
    for cell in group_cells(plan, model, dataset):
        files += [cell["scored"], cell["outputs"], *cell["judges"].values()]
        files += [cell["clean_scored"]] if "clean_scored" in cell else []
    return list(dict.fromkeys(files))


def variants_dir(dataset: str, condition: str) -> str:
    return path(paths.EXPLORER_VARIANTS, dataset=dataset, condition=condition)


def variant_sets(plan: RunPlan) -> list[tuple[str, str]]:
    """(dataset, condition) of every cell, in first-seen order."""
    return list(dict.fromkeys((d, c) for _, d, c, _ in cells(plan)))


def _studies() -> dict[str, Any]:
    """Every study (imported here: this module is one of the package's, which the
    package's own discovery imports)."""
    from . import STUDIES

    return STUDIES


def _hallucination_files(plan: RunPlan) -> set[str]:
    study = _studies().get("masking")
    if study is None:
        return set()
    return {f for s in study.scopes(plan) for f in study.inputs(plan, s).get("hallucination", [])}


#: the judge files of a plan, listed once (a cell's job asks for them per cell; the lists
#: are the whole run's): id(plan) -> (plan, every judge file of the run)
_JUDGE_FILES: dict[int, tuple[RunPlan, frozenset[str]]] = {}


def _judge_files(plan: RunPlan) -> frozenset[str]:
    found = _JUDGE_FILES.get(id(plan))
    if found is None or found[0] is not plan:
        files = set(judges.judged_files(plan)) | set(judges.math_judged_files(plan))
        for dataset in plan.datasets:
            if idis_plan.idis_task(plan, dataset):
                files |= set(judges.attribute_files(plan, dataset))
        found = (plan, frozenset(files | _hallucination_files(plan)))
        _JUDGE_FILES[id(plan)] = found
    return found[1]


def cell_inputs(plan: RunPlan, model: str, dataset: str, condition: str, prompt: str) -> dict:
    """What one cell's job reads: its scored and outputs files, the clean cell's scored
    file (a perturbed cell), and every judge file of these outputs, by kind."""
    key = CellKey(model, dataset, condition, prompt)
    out: dict[str, Any] = {
        "scored": key.path(paths.SCORED),
        "outputs": key.path(paths.OUTPUTS),
    }
    clean = plan.clean
    answered = plan.datasets[dataset]["conditions"]
    if condition != clean and clean in answered and plan.has_outputs(model, dataset, clean, prompt):
        out["clean_scored"] = path(
            paths.SCORED, model=model, dataset=dataset, condition=clean, prompt=prompt
        )
    candidates = {
        "reference": key.path(paths.JUDGED),
        "mathverse": key.path(paths.MATH_JUDGED),
    }
    # the hallucination judge reads the masked chain: the chain-of-thought stage's cell
    if prompt == plan.config["masking"]["cot_prompt"]:
        candidates["hallucination"] = path(
            paths.HALLUCINATION, model=model, dataset=dataset, condition=condition
        )
    for extractor in (
        judges.attribute_extractors_of(plan, dataset) if idis_plan.idis_task(plan, dataset) else []
    ):
        candidates[f"attributes:{extractor}"] = key.path(paths.ATTRIBUTES, extractor=extractor)
    files = _judge_files(plan)
    out["judges"] = {kind: file for kind, file in sorted(candidates.items()) if file in files}
    return out


def variants_inputs(plan: RunPlan, dataset: str, condition: str) -> dict[str, str]:
    return {
        "manifest": path(paths.MANIFEST, dataset=dataset, condition=condition),
        "samples": path(paths.SAMPLES, dataset=dataset),
    }


def _study_cells(plan: RunPlan, study: Any, scope: str) -> list[Cell]:
    """The cells a study's numbers rest on: its scored files, or (the masking study, which
    reads compared chains) every prompt of its compared (model, dataset, condition)."""
    files = study.inputs(plan, scope)
    found: list[Cell] = []
    for scored in files.get("scored") or []:
        model, dataset, condition, prompt = Path(scored).with_suffix("").parts[-4:]
        found.append((model, dataset, condition, prompt))
    for compared in files.get("compared") or []:
        model, dataset, condition = Path(compared).with_suffix("").parts[-3:]
        for cond in (plan.clean, condition):
            found += [(model, dataset, cond, p) for p in plan.prompts_of(dataset)]
    known = set(cells(plan))
    return [c for c in dict.fromkeys(found) if c in known]


def _scope_datasets(plan: RunPlan, study: Any, scope: str, datasets: list[str]) -> dict:
    """What the browser needs to compute a table cell again: each dataset's group and
    prompt settings, and where its verdicts come from (``correct_from: mathverse``: a
    study that reads MathVerse judge verdicts takes correctness from them, as the Idis
    metrics do, and leaves out the answers the judge has no verdict for)."""
    judged = {Path(f).parts[-3] for f in study.inputs(plan, scope).get("math_judged") or []}
    out = {}
    for d in datasets:
        entry = {"group": plan.datasets[d].get("group") or "", "prompts": plan.prompts_of(d)}
        if d in judged:
            entry["correct_from"] = "mathverse"
        out[d] = entry
    return out


def _study_line(plan: RunPlan, study: Any, scope: str) -> dict[str, Any]:
    folder = study.folder(scope)
    found = _study_cells(plan, study, scope)
    datasets = list(dict.fromkeys(d for _, d, _, _ in found))
    return {
        "folder": folder,
        "study": study.name,
        # a per-dataset study's scopes share its title: the scope tells them apart
        "title": f"{study.title} ({scope})" if scope else study.title,
        "clean_condition": plan.clean,
        "models": list(dict.fromkeys(m for m, _, _, _ in found)),
        "datasets": datasets,
        "conditions": [c for c in dict.fromkeys(c for _, _, c, _ in found) if c != plan.clean],
        "tables": [
            {"name": name, "href": f"../tables/{folder}/{name}.html"}
            for name in study.table_names(study.spec(plan, scope))
        ],
        "scope": {
            "clean_condition": plan.clean,
            "datasets": _scope_datasets(plan, study, scope, datasets),
        },
    }


def index_spec(plan: RunPlan) -> dict[str, Any]:
    """What the index says besides the cells: models, datasets, conditions, studies."""
    found = cells(plan)
    models = list(dict.fromkeys(m for m, _, _, _ in found))
    datasets = list(dict.fromkeys(d for _, d, _, _ in found))
    conditions = list(dict.fromkeys(c for _, _, c, _ in found))
    return {
        "clean": plan.clean,
        "model_order": models,
        "models": {
            m: {k: plan.models[m].get(k) for k in ("name", "family", "role", "base")}
            for m in models
        },
        "datasets": {
            d: {
                "display": plan.datasets[d].get("display") or d,
                "group": plan.datasets[d].get("group") or "",
                "prompts": plan.prompts_of(d),
            }
            for d in datasets
        },
        "conditions": {c: {"perturbation": plan.conditions[c]["perturbation"]} for c in conditions},
        "studies": [
            _study_line(plan, study, scope)
            for study in _studies().values()
            for scope in study.scopes(plan)
        ],
    }


def index_inputs(plan: RunPlan) -> dict[str, list[str]]:
    """The index's inputs: the cells' jobs' folders and every variant set's folder."""
    return {
        "cells": [cells_dir(m, d) for m, d in cell_groups(plan)],
        "variants": [variants_dir(d, c) for d, c in variant_sets(plan)],
    }


def targets(plan: RunPlan) -> list[str]:
    """The explorer's final files (none when ``explorer.build`` is false or the run has
    no model)."""
    return [paths.EXPLORER_INDEX, paths.EXPLORER_PAGE] if enabled(plan) else []

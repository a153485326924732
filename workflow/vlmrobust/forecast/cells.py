"""The forecast's unit: one inference cell, (model, dataset, condition, prompt) — one
outputs file of the run plan — with its requests, tokens and engine time.

The cells are the plan's own (:meth:`RunPlan.cells`, less the outputs imported from a
release): the same planning code that makes the inference jobs. A cell's
requests are its variants x the dataset's draws per question (``n``: Idis' 5 sampled
responses); a second stage (CRM's final answer) is a cell of its own. The studies a
cell serves are those whose inputs are its files or files made from them
(:func:`cell_studies`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..core import paths
from ..core.paths import path
from ..core.prompts import PROMPTS
from ..core.registry import model_kind, model_resources
from ..plan import CellKey, RunPlan, idis, inference, judges
from ..studies import STUDIES
from .counts import ConditionFacts, DatasetFacts
from .tables import MissingEntry, Throughput, throughput_class
from .tokens import (
    IMAGE_MARKER_TOKENS,
    Pilot,
    generated_tokens,
    prompt_texts,
    text_tokens,
    vision_tokens,
)


@dataclass
class Cell:
    """One outputs file's worth of requests (module docstring). Token figures are means
    per request; ``engine_s`` is the time of the model's engine for all of them (None:
    an API model, or unknown: ``unknown`` says why)."""

    model: str
    dataset: str
    condition: str
    prompt: str
    studies: list[str]
    requests: float
    requests_how: str
    text_tokens: float
    vision_tokens: float | None
    context_tokens: float
    generated: float | None
    generated_how: str
    generated_source: str
    text_how: str
    sizes_how: str
    kind: str = "local"
    backend: str = ""
    gpus: int = 0
    engine_s: float | None = None
    throughput: str | None = None
    unknown: list[str] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> float | None:
        if self.vision_tokens is None:
            return None
        return self.text_tokens + self.vision_tokens + self.context_tokens

    @property
    def engine_hours(self) -> float | None:
        return None if self.engine_s is None else self.engine_s / 3600

    @property
    def gpu_hours(self) -> float | None:
        """Engine-hours x the GPUs an engine holds (0 for a CPU demo model)."""
        return None if self.engine_s is None else self.engine_s * self.gpus / 3600


def inference_keys(plan: RunPlan) -> list[tuple[str, str, str, str]]:
    """Every (model, dataset, condition, prompt) the run answers itself."""
    return [key for model in plan.models for key in plan.cells(models=[model], imported=False)]


def _derived_files(plan: RunPlan, keys: list[tuple[str, str, str, str]]) -> dict[str, set]:
    """Each file made from a cell's outputs (scored, judged, labelled, compared, ...),
    with the cells it is made from."""
    files: dict[str, set] = defaultdict(set)
    by_output = {CellKey(*k).path(paths.OUTPUTS): k for k in keys}
    for k in keys:
        key = CellKey(*k)
        m, d, c, _ = key
        for file in (
            key.path(paths.OUTPUTS),
            key.path(paths.SCORED),
            key.path(paths.JUDGED),
            key.path(paths.MATH_JUDGED),
            key.path(paths.BLOCKED),
            *(key.path(paths.ATTRIBUTES, extractor=e) for e in idis.attribute_extractors(plan)),
        ):
            files[file].add(k)
        if plan.conditions[c]["perturbation"] == "mask":
            made_from = {
                by_output[f]
                for f in judges.compare_inputs(plan, m, d, c).values()
                if f in by_output
            }
            files[path(paths.COMPARED, model=m, dataset=d, condition=c)] |= made_from
            files[path(paths.HALLUCINATION, model=m, dataset=d, condition=c)] |= made_from
    return files


def cell_studies(plan: RunPlan, keys: list[tuple[str, str, str, str]]) -> dict[tuple, list[str]]:
    """The studies whose inputs (metrics or views) are a cell's files or made from them."""
    files = _derived_files(plan, keys)
    found: dict[tuple, list[str]] = {k: [] for k in keys}
    for name, study in STUDIES.items():
        for scope in study.scopes(plan):
            inputs = {**study.inputs(plan, scope), **study.view_inputs(plan, scope)}
            for named in inputs.values():
                for file in named:
                    for key in files.get(file, ()):
                        if name not in found[key]:
                            found[key].append(name)
    return found


def build_cell(
    plan: RunPlan,
    key: tuple[str, str, str, str],
    facts: DatasetFacts,
    cond: ConditionFacts,
    pilot: Pilot | None,
    studies: list[str],
) -> Cell:
    """A cell's requests and tokens (its engine time: :func:`time_cell`)."""
    model, dataset, condition, prompt = key
    draws = inference.draws(plan, dataset, prompt)[0]
    texts, text_how = prompt_texts(plan, facts, cond, prompt)
    counted, counter = text_tokens(plan, model, texts)
    images = cond.images_per_variant
    text = counted + IMAGE_MARKER_TOKENS * images
    needs = PROMPTS[prompt].needs if prompt in PROMPTS else None
    context = 0.0
    if needs is not None:  # the first stage's answer, at its own generated length
        context = generated_tokens(plan, model, dataset, condition, needs, pilot)[0]
    cell = Cell(
        model, dataset, condition, prompt, studies,
        cond.variants.value * draws,
        f"{cond.variants.note}; x {draws} draws" if draws > 1 else cond.variants.note,
        text, None, context, None, "", "", f"{text_how}; {counter}", cond.sizes_how,
    )  # fmt: skip
    if cond.variants.how == "assumed" or facts.samples.how == "assumed":
        cell.requests_how = f"assumed: {cell.requests_how}"
    try:
        cell.vision_tokens = vision_tokens(plan, model, cond)
    except MissingEntry as exc:
        cell.unknown.append(str(exc))
    try:
        cell.generated, cell.generated_how, cell.generated_source = generated_tokens(
            plan, model, dataset, condition, prompt, pilot
        )
    except MissingEntry as exc:
        cell.unknown.append(str(exc))
    return cell


def time_cell(plan: RunPlan, cell: Cell, gpu_type: str | None) -> Throughput | None:
    """Fill in a cell's engine time from its model's throughput class (an API model
    has none; a model in no class is ``unknown``, never zero)."""
    entry = plan.registry[cell.model]
    cell.kind, cell.backend = (
        model_kind(entry),
        inference.cell_backend(plan, cell.model, cell.dataset),
    )
    if cell.kind == "api":
        return None
    cell.gpus = int(model_resources(entry)["gpu"] or 0)  # a demo model: none (CPU)
    try:
        rates = throughput_class(cell.model, entry, gpu_type, cell.backend)
    except MissingEntry as exc:
        cell.unknown.append(str(exc))
        return None
    cell.throughput = f"{rates.name} ({rates.gpu})"
    if cell.vision_tokens is None or cell.generated is None:
        return rates
    prompt = cell.text_tokens + cell.context_tokens + cell.vision_tokens * rates.vision_factor
    per_request = cell.generated / rates.gen_tok_s
    if rates.prompt_tok_s:
        per_request += prompt / rates.prompt_tok_s
    cell.engine_s = cell.requests * per_request
    return rates

"""The forecast of a run before it runs (``vlmrobust forecast``, docs/forecast.md).

For any configuration, per model and study: the requests, the prompt tokens (text,
vision from the images' sizes under the model's pixel limits, a first stage's answer)
and generated tokens per request, the GPU-hours at the throughput table's rates, the
wall time on N GPUs (the plan's engines, list-scheduled), the variants' disk
(in the configuration's ``variants.format``) and the explorer's files. Pure:
it reads the configuration, the registry, the forecast tables (``*.yaml`` here) and
whatever of the run's files and local data already exist (image headers, not pixels);
it loads no model and opens no connection.

- :mod:`.tables`: the stated numbers and their sources;
- :mod:`.counts`: samples, variants and image sizes, each measured or assumed;
- :mod:`.tokens`: prompt and generated tokens (``--pilot``: measured ones);
- :mod:`.cells`: one cell per outputs file, its requests, tokens, studies, engine time;
- :mod:`.calls`: every LLM call of the judges, extractors and writers, and the local
  LLMs' engine time;
- :mod:`.money`: every model in every role, its GPU-hours or money (the registry's
  prices), and what the attribute scoping saves;
- :mod:`.cost`: the engines' schedule on N GPUs (the LLM engines after the VLMs they
  read), the variants' disk and the explorer's;
- :mod:`.render`: the printed tables and the JSON.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..plan import RunPlan, judges
from .calls import Calls, all_calls, time_calls
from .cells import Cell, build_cell, cell_studies, inference_keys, time_cell
from .cost import (
    Disk,
    Engine,
    ExplorerDisk,
    disk_of,
    engines_of_run,
    explorer_disk,
    llm_engines_of_run,
    schedule,
)
from .counts import condition_facts, dataset_facts
from .money import Usage, api_models, prices_of, totals, usage
from .tables import MissingEntry, Throughput, check_gpu_type
from .tokens import Pilot, read_pilot

__all__ = ["Forecast", "MissingEntry", "build_forecast", "read_pilot"]


@dataclass
class Forecast:
    """Everything ``vlmrobust forecast`` prints (:mod:`.render`)."""

    config: str
    gpus: int
    gpu_type: str | None
    engines_per_model: int | None
    cells: list[Cell]
    disk: list[Disk]
    engines: list[Engine]
    makespan_s: float | None
    left_out: list[str]
    rates: dict[str, Throughput]
    pilot: str | None = None
    notes: list[str] = field(default_factory=list)
    #: ``variants.format``: the encoding the variants' disk is forecast for
    disk_format: str = "png"
    #: every LLM call of the judges, extractors and writers (:mod:`.calls`)
    calls: list[Calls] = field(default_factory=list)
    #: every model in every role with its GPU-hours or money (:mod:`.money`)
    usage: list[Usage] = field(default_factory=list)
    #: what ``judge.attributes.scope: all`` without a validation sample would add
    #: (requests, tokens, GPU-hours, USD; None: the configuration scopes nothing)
    savings: dict | None = None
    #: the registry's prices of every API model of the run (None: it has none)
    prices: dict = field(default_factory=dict)
    #: the API models of the run (whose prices the sources list)
    price_models: list[str] = field(default_factory=list)
    #: the explorer's files (None: ``explorer.build`` is false or the run has no model)
    explorer: ExplorerDisk | None = None


def build_forecast(
    plan: RunPlan,
    config: str = "",
    gpus: int = 8,
    pilot: Pilot | None = None,
    gpu_type: str | None = None,
    engines: int | None = None,
) -> Forecast:
    """The forecast of ``plan``'s run on ``gpus`` GPUs of ``gpu_type`` (module docstring);
    ``engines`` replaces ``service.engines`` for every model (what if each model had
    that many engines: the plan's ``config`` is changed in place)."""
    check_gpu_type(gpu_type)
    if engines is not None:
        if engines < 1:
            raise ValueError(f"--engines must be at least 1, got {engines}")
        plan.config["service"]["default_engines"] = engines
        plan.config["service"]["engines"] = {}
    keys = inference_keys(plan)
    studies = cell_studies(plan, keys)
    # every dataset: one no model answers (a pool of figures) still has its variants
    facts = {d: dataset_facts(plan, d) for d in plan.datasets}
    conds = {
        (d, c): condition_facts(plan, facts[d], c)
        for d in facts
        for c in plan.datasets[d]["conditions"]
    }
    cells: dict[tuple, Cell] = {}
    rates: dict[str, Throughput] = {}
    for key in keys:
        _, d, c, _ = key
        cell = build_cell(plan, key, facts[d], conds[(d, c)], pilot, studies[key])
        found = time_cell(plan, cell, gpu_type)
        if found is not None and (
            cell.model not in rates or cell.backend == plan.registry[cell.model]["backend"]
        ):
            rates[cell.model] = found
        cells[key] = cell
    calls = all_calls(plan, cells, conds, facts, judges.judge_cells(plan))
    time_calls(plan, calls, gpu_type, rates)
    placed, left_out = engines_of_run(plan, cells, rates)
    llm_placed, llm_left_out = llm_engines_of_run(plan, calls, placed, rates)
    placed, left_out = placed + llm_placed, left_out + llm_left_out
    makespan = schedule(placed, gpus) if placed else None
    disk = [found for cond in conds.values() if (found := disk_of(plan, cond)) is not None]
    found = Forecast(
        config, gpus, gpu_type, engines, list(cells.values()), disk, placed, makespan, left_out,
        rates, pilot.folder if pilot else None, disk_format=plan.config["variants"]["format"],
        calls=calls, usage=usage(plan, list(cells.values()), calls),
    )  # fmt: skip
    found.explorer = explorer_disk(plan, conds, cells, pilot)
    found.savings = scoping_savings(plan, found, cells, conds, facts, gpu_type)
    found.price_models = api_models(plan, found.usage)
    found.prices = {m: prices_of(plan, m) for m in found.price_models}
    return found


def scoping_savings(
    plan: RunPlan, forecast: Forecast, cells: dict, conds: dict, facts: dict, gpu_type: str | None
) -> dict | None:
    """What the attribute scoping saves: the calls of ``judge.attributes.scope: all``
    without a validation sample minus the configured run's (the plan built a second time
    with those two keys changed; the VLM cells are the same). None when the configuration
    already labels every trace."""
    attributes = plan.config["judge"]["attributes"]
    if attributes.get("scope", "all") == "all" and attributes.get("validation_sample") is None:
        return None
    config = copy.deepcopy(plan.config)
    config["judge"]["attributes"].update(scope="all", validation_sample=None)
    unscoped = RunPlan.from_config(config)
    calls = all_calls(unscoped, cells, conds, facts, judges.judge_cells(unscoped))
    time_calls(unscoped, calls, gpu_type, dict(forecast.rates))
    full = totals(usage(unscoped, forecast.cells, calls))
    run = totals(forecast.usage)
    saved = {k: None if full[k] is None or run[k] is None else full[k] - run[k] for k in full}
    setting = (f"judge.attributes.scope: {attributes.get('scope')}, validation_sample: "
               f"{attributes.get('validation_sample')}")  # fmt: skip
    return {"setting": setting, "unscoped": full, "run": run, "saved": saved}

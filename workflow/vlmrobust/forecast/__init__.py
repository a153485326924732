"""The forecast of a run before it runs (``vlmrobust forecast``, docs/forecast.md).

For any configuration, per model and study: the requests, the prompt tokens (text,
vision from the images' sizes under the model's pixel limits, a first stage's answer)
and generated tokens per request, the GPU-hours at the throughput table's rates, the
wall time on N GPUs (the plan's engines, list-scheduled) and the variants' disk
(in the configuration's ``variants.format``). Pure:
it reads the configuration, the registry, the forecast tables (``*.yaml`` here) and
whatever of the run's files and local data already exist (image headers, not pixels);
it loads no model and opens no connection.

- :mod:`.tables`: the stated numbers and their sources;
- :mod:`.counts`: samples, variants and image sizes, each measured or assumed;
- :mod:`.tokens`: prompt and generated tokens (``--pilot``: measured ones);
- :mod:`.cells`: one cell per outputs file, its requests, tokens, studies, engine time;
- :mod:`.cost`: the engines' schedule on N GPUs and the variants' disk;
- :mod:`.render`: the printed tables and the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..plan import RunPlan
from .cells import Cell, build_cell, cell_studies, inference_keys, time_cell
from .cost import Disk, Engine, disk_of, engines_of_run, schedule
from .counts import condition_facts, dataset_facts
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
    placed, left_out = engines_of_run(plan, cells, rates)
    makespan = schedule(placed, gpus) if placed else None
    disk = [found for cond in conds.values() if (found := disk_of(plan, cond)) is not None]
    return Forecast(
        config, gpus, gpu_type, engines, list(cells.values()), disk, placed, makespan, left_out,
        rates, pilot.folder if pilot else None, disk_format=plan.config["variants"]["format"],
    )  # fmt: skip

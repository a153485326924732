"""Engines per model sized from the forecast, so that no engine holds the run back.

With ``service.split_cells`` every engine of a model answers the same share of every
cell of the model (:meth:`RunPlan.cell_shards`), so a model's engines last about the
same, its work over its engines plus a start-up each. What remains is how many engines
each model gets: :func:`balance` tries engines per model proportional to each model's
forecast engine time (its cells' ``engine_s``; a model on several GPUs counts them),
for a target engine length from GPU-hours / GPUs down to a tenth of it, schedules each
candidate as the forecast does (:func:`~vlmrobust.forecast.cost.schedule`) and keeps the
first whose makespan is within ``tolerance`` of the engines' GPU-hours / GPUs (their
start-ups included), else the shortest makespan found. Fewer, longer engines come first:
each costs a start-up and a SLURM job. The local LLMs' engines (``service.engines.<llm>``:
the judges' and extractors', :mod:`.calls`) are sized the same way, at most one per judged
file (an LLM engine answers whole files, dealt in turn).

:func:`write_block` puts the result into the configuration file between two marker
lines, so the choice is written down with the numbers it came from and a rerun replaces
it; the rest of the file is left as it was.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..plan import RunPlan
from . import Forecast
from .cost import engines_of_run, llm_engines_of_run, schedule

BEGIN = "# >>> vlmrobust balance"
END = "# <<< vlmrobust balance"


@dataclass
class Balance:
    """Engines per model and what the forecast makes of them."""

    gpus: int
    tolerance: float
    engines: dict[str, int]
    makespan_s: float
    bound_s: float  # the engines' GPU-hours (start-ups included) / GPUs

    @property
    def ratio(self) -> float:
        return self.makespan_s / self.bound_s

    @property
    def within(self) -> bool:
        return self.ratio <= 1 + self.tolerance


def model_work(forecast: Forecast, plan: RunPlan) -> dict[str, float]:
    """GPU-seconds of each local model's longer phase (its cells' engine times x its
    GPUs): what its engines share."""
    phases: dict[tuple[str, int], float] = {}
    for cell in forecast.cells:
        if cell.engine_s is None or cell.kind == "api":
            continue
        phase = int(bool(plan.infer_context(cell.model, cell.dataset, cell.condition, cell.prompt)))
        key = (cell.model, phase)
        phases[key] = phases.get(key, 0.0) + cell.engine_s * max(1, cell.gpus)
    work: dict[str, float] = {}
    for (model, _), seconds in phases.items():
        work[model] = max(work.get(model, 0.0), seconds)
    for call in forecast.calls:  # the local LLMs: their judged files' calls
        if call.kind == "local" and call.engine_s is not None:
            work[call.model] = work.get(call.model, 0.0) + call.engine_s * max(1, call.gpus)
    return work


def most_engines(forecast: Forecast) -> dict[str, int]:
    """The most engines worth giving each local LLM: one per judged file it answers."""
    files: dict[str, int] = {}
    for call in forecast.calls:
        if call.kind == "local":
            files[call.model] = files.get(call.model, 0) + 1
    return files


def _try(plan: RunPlan, forecast: Forecast, cells: dict, engines: dict[str, int], gpus: int):
    plan.config["service"]["engines"] = dict(engines)
    placed, _ = engines_of_run(plan, cells, forecast.rates)
    placed += llm_engines_of_run(plan, forecast.calls, placed, forecast.rates)[0]
    makespan = schedule(placed, gpus)
    bound = sum(e.seconds * e.gpus for e in placed) / gpus
    return makespan, bound


def balance(
    plan: RunPlan, forecast: Forecast, gpus: int, tolerance: float = 0.15, steps: int = 40
) -> Balance:
    """Engines per local model for ``gpus`` GPUs (module docstring). ``plan``'s
    configuration is changed in place (``service.split_cells`` on, ``service.engines``
    the result); ``forecast`` is the plan's forecast (its cells' engine times)."""
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    plan.config["service"]["split_cells"] = True
    work = model_work(forecast, plan)
    if not work:
        raise ValueError("no local model with a known engine time: nothing to balance")
    total = sum(work.values()) / gpus
    cells = {(c.model, c.dataset, c.condition, c.prompt): c for c in forecast.cells}
    cap = most_engines(forecast)
    best: Balance | None = None
    for k in range(steps):
        target = total / (1 + k * 9 / max(1, steps - 1))  # GPU-hours / GPUs .. a tenth
        engines = {
            m: min(max(1, math.ceil(w / target)), cap.get(m, math.inf)) for m, w in work.items()
        }
        makespan, bound = _try(plan, forecast, cells, engines, gpus)
        found = Balance(gpus, tolerance, engines, makespan, bound)
        if found.within:
            best = found
            break
        if best is None or makespan < best.makespan_s:
            best = found
    assert best is not None
    plan.config["service"]["engines"] = dict(best.engines)
    return best


def block_text(result: Balance, command: str) -> str:
    """The configuration lines :func:`write_block` writes."""
    lines = [
        f"{BEGIN}: written by `{command}` from the forecast; rerun it",
        f"# after a change to the run. On {result.gpus} GPUs: makespan "
        f"{result.makespan_s / 3600:,.1f} h, engines' GPU-hours / GPUs "
        f"{result.bound_s / 3600:,.1f} h ({(result.ratio - 1) * 100:+.1f} %).",
        "service:",
        "  split_cells: true",
        "  engines:",
        *(f"    {m}: {n}" for m, n in result.engines.items()),
        END,
    ]
    return "\n".join(lines) + "\n"


def write_block(config_file: str | Path, text: str) -> None:
    """Replace the lines between the markers of ``config_file`` with ``text`` (appended
    where there are none). A ``service:`` key outside them is an error: the file would
    hold two."""
    path = Path(config_file)
    old = path.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(BEGIN)}.*?^{re.escape(END)}\n?", re.S | re.M)
    outside = pattern.sub("", old)
    if re.search(r"^service:", outside, re.M):
        raise ValueError(
            f"{config_file}: has a `service:` key outside the `{BEGIN}` block; remove it "
            "(the block sets service.split_cells and service.engines)"
        )
    if pattern.search(old):
        new = pattern.sub(lambda _: text, old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.write_text(new, encoding="utf-8")

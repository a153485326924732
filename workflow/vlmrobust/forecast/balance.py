"""Engines per model sized from the forecast, so that no engine holds the run back.

With ``service.split_cells`` every engine of a model answers the same share of every
cell of the model (:func:`vlmrobust.plan.engines.cell_shards`), so a model's engines last about the
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
it; the rest of the file is left as it was. A damaged marker (not at the start of its
line, text after the end marker, one missing, twice, out of order) or a block that
would not read back as the same configuration is refused, with nothing written.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.config import ConfigError, load_yaml
from ..core.io import atomic_write_text
from ..plan import RunPlan, inference
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
        phase = int(
            bool(
                inference.infer_context(plan, cell.model, cell.dataset, cell.condition, cell.prompt)
            )
        )
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


def block_text(result: Balance, command: str, keep: dict[str, Any] | None = None) -> str:
    """The configuration lines :func:`write_block` writes; ``keep``: the other keys of
    the configuration's own ``service`` (``wait_log_s``, ...), written as they were."""
    kept = [
        f"  {line}"
        for key, value in (keep or {}).items()
        if key not in ("split_cells", "engines")
        for line in yaml.safe_dump({key: value}, default_flow_style=False).splitlines()
    ]
    lines = [
        f"{BEGIN}: written by `{command}` from the forecast; rerun it",
        f"# after a change to the run. On {result.gpus} GPUs: makespan "
        f"{result.makespan_s / 3600:,.1f} h, engines' GPU-hours / GPUs "
        f"{result.bound_s / 3600:,.1f} h ({(result.ratio - 1) * 100:+.1f} %).",
        "service:",
        *kept,
        "  split_cells: true",
        "  engines:",
        *(f"    {m}: {n}" for m, n in result.engines.items()),
        END,
    ]
    return "\n".join(lines) + "\n"


def _marker_error(config_file: str | Path, number: int, marker: str, what: str) -> ConfigError:
    return ConfigError(
        f"{config_file}: line {number}: the balance marker `{marker}` {what}; nothing "
        f"was written (`vlmrobust balance --write` replaces the lines from `{BEGIN}` "
        f"to `{END}`, each marker at the start of a line of its own)"
    )


def find_block(config_file: str | Path, text: str) -> tuple[int, int] | None:
    """The 0-based numbers of the begin and end marker lines of ``text`` (the content
    of ``config_file``), None where it has neither; a damaged marker is a
    :class:`ConfigError` naming the file, the line and what is wrong: a marker not at
    the start of its line, text after the end marker, a second begin or end marker, an
    end marker without a begin marker before it or a begin marker without an end."""
    found: dict[str, list[int]] = {BEGIN: [], END: []}
    for number, line in enumerate(text.splitlines(), 1):
        for marker in (BEGIN, END):
            at = line.find(marker)
            if at > 0:
                before = line[:at].strip()
                what = f"has text before it on its line ({before!r})" if before else "is indented"
                raise _marker_error(config_file, number, marker, what)
            after = line[len(marker) :].strip() if at == 0 else ""
            if marker == END and after:
                what = f"has text after it on its line ({after!r}): the rewrite would drop it"
                raise _marker_error(config_file, number, marker, what)
            if at == 0 and found[marker]:
                what = f"appears a second time (first on line {found[marker][0]})"
                raise _marker_error(config_file, number, marker, what)
            if at == 0:
                found[marker].append(number)
    begin = found[BEGIN][0] if found[BEGIN] else None
    end = found[END][0] if found[END] else None
    if begin is None and end is None:
        return None
    if begin is None:
        raise _marker_error(config_file, end, END, f"has no begin marker `{BEGIN}` before it")
    if end is None:
        raise _marker_error(config_file, begin, BEGIN, f"has no end marker `{END}` after it")
    if end < begin:
        what = f"comes before the begin marker (line {begin}): the block is upside down"
        raise _marker_error(config_file, end, END, what)
    return begin - 1, end - 1


def _parsed(config_file: str | Path, text: str) -> Any:
    """``text``, the rewritten ``config_file``, as the project's YAML reader reads it
    (:func:`load_yaml`)."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / Path(config_file).name
        copy.write_text(text, encoding="utf-8")
        try:
            return load_yaml(copy)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(str(copy), f"{config_file} as rewritten")) from None


def write_block(
    config_file: str | Path, text: str, check: Callable[[dict], Any] | None = None
) -> None:
    """Replace the lines from the begin to the end marker of ``config_file`` with
    ``text`` (appended where there are none). Refused, with nothing written: a damaged
    marker (:func:`find_block`), a ``service:`` key outside them (the file would hold
    two), a rewrite that does not read back with :func:`load_yaml` as the same
    configuration but for its ``service`` (a block inside another key), and a result
    ``check`` (e.g. :func:`~vlmrobust.core.config.validate_config`) refuses."""
    path = Path(config_file)
    old = path.read_text(encoding="utf-8")
    lines = old.splitlines(keepends=True)
    block = find_block(config_file, old)
    outside = lines if block is None else lines[: block[0]] + lines[block[1] + 1 :]
    if re.search(r"^service:", "".join(outside), re.M):
        raise ConfigError(
            f"{config_file}: has a `service:` key outside the `{BEGIN}` block; remove it "
            "(the block sets service.split_cells and service.engines)"
        )
    if block is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        new = "".join(lines[: block[0]]) + text + "".join(lines[block[1] + 1 :])
    before = load_yaml(path) or {}
    try:
        after = _parsed(config_file, new)
        why = "it reads back as another configuration"
    except ConfigError as exc:
        after, why = None, f"it would not read back: {exc}"
    service = yaml.safe_load(text)["service"]
    if (
        not isinstance(before, dict)
        or not isinstance(after, dict)
        or _but_service(before) != _but_service(after)
        or after.get("service") != service
    ):
        where = "appended" if block is None else f"on lines {block[0] + 1}-{block[1] + 1}"
        raise ConfigError(
            f"{config_file}: the balance block {where} would not stand at the top level "
            f"of the file ({why}); nothing was written: keep `{BEGIN}` and its block "
            "between two top-level keys, outside any other key's value"
        )
    try:
        if check is not None:
            check(after)
    except ConfigError as exc:
        raise ConfigError(
            f"{config_file} as rewritten would not validate, so nothing was written: {exc}"
        ) from None
    atomic_write_text(path, new)


def _but_service(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "service"}

"""Every model of the run in every role, with what it costs: GPU-hours for a local model,
money for an API model.

A row per (model, role): the VLMs' own answers (the inference cells, :mod:`.cells`) and
the judges', extractors' and writers' calls (:mod:`.calls`). An API model's money is its
tokens x the registry's ``prices`` (USD per million tokens, each price with its
``source`` and ``date``): ``usd`` at the standard prices with no prompt cache (an upper
bound), ``usd_batch`` at the provider's batch prices (where it has them: the same
calls sent through its batch API instead), ``usd_cached`` with every call's repeated
prefix at the ``cached_input`` price where the provider caches prefixes that long
(``calls.yaml`` ``caching``; the VLMs' prompts are assumed to repeat none). A model
without ``prices`` is ``unknown`` naming the key to add, and every total that rests on it
prints ``unknown``, never a silent zero.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..core.registry import API_BACKENDS
from ..plan import RunPlan
from .calls import Calls
from .cells import Cell
from .tables import load_table


@dataclass
class Usage:
    """One model in one role: its requests, token totals, GPU-hours and money."""

    model: str
    role: str  # VLM | judge | extractor | writer | editor
    kind: str  # local | api | demo | offline | inline
    steps: list[str] = field(default_factory=list)
    requests: float = 0.0
    prompt_tokens: float | None = 0.0
    cached_tokens: float = 0.0
    generated_tokens: float | None = 0.0
    gpu_hours: float | None = 0.0
    usd: float | None = None
    usd_batch: float | None = None
    usd_cached: float | None = None
    assumed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def priced(self) -> bool:
        return self.kind in ("api", "inline")


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def prices_of(plan: RunPlan, model: str) -> dict[str, Any] | None:
    entry = plan.registry.get(model)
    return None if entry is None else entry.get("prices")


def cache_floor(plan: RunPlan, model: str) -> float | None:
    """The shortest repeated prefix ``model``'s provider caches (None: no cache)."""
    family = plan.registry[model].get("family") or model
    entry = load_table("calls")["caching"].get(family)
    return None if entry is None or entry["min_tokens"] is None else float(entry["min_tokens"])


def price(prices: dict[str, Any], prompt: float, cached: float, generated: float,
          floor: float | None) -> tuple[float, float | None, float]:  # fmt: skip
    """(standard, batch or None, with the repeated prefix cached) USD of the token totals
    (``cached``: the part of ``prompt`` a provider whose cache takes prefixes of
    ``floor`` tokens or more bills at ``cached_input``)."""
    standard = (prompt * prices["input"] + generated * prices["output"]) / 1e6
    batch = None
    if prices.get("batch_input") is not None and prices.get("batch_output") is not None:
        batch = (prompt * prices["batch_input"] + generated * prices["batch_output"]) / 1e6
    with_cache = standard
    if floor is not None and prices.get("cached_input") is not None and cached:
        with_cache -= cached * (prices["input"] - prices["cached_input"]) / 1e6
    return standard, batch, with_cache


def _vlm_rows(plan: RunPlan, cells: list[Cell]) -> dict[tuple[str, str], Usage]:
    rows: dict[tuple[str, str], Usage] = {}
    for c in cells:
        row = rows.setdefault((c.model, "VLM"), Usage(c.model, "VLM", c.kind))
        if "inference" not in row.steps:
            row.steps.append("inference")
        row.requests += c.requests
        row.prompt_tokens = _add(row.prompt_tokens, _times(c.prompt_tokens, c.requests))
        row.generated_tokens = _add(row.generated_tokens, _times(c.generated, c.requests))
        row.gpu_hours = _add(row.gpu_hours, 0.0 if c.kind == "api" else c.gpu_hours)
        if c.generated_how == "assumed" and "generated length" not in row.assumed:
            row.assumed.append("generated length")
        row.unknown += [u for u in c.unknown if u not in row.unknown]
    return rows


def _times(a: float | None, n: float) -> float | None:
    return None if a is None else a * n


def _call_rows(calls: list[Calls]) -> dict[tuple[str, str], Usage]:
    rows: dict[tuple[str, str], Usage] = {}
    for c in calls:
        row = rows.setdefault((c.model, c.role), Usage(c.model, c.role, c.kind))
        if c.step not in row.steps:
            row.steps.append(c.step)
        row.requests += c.requests
        row.prompt_tokens = _add(row.prompt_tokens, c.total(c.prompt))
        row.cached_tokens += c.cached * c.requests
        row.generated_tokens = _add(row.generated_tokens, c.total(c.generated))
        row.gpu_hours = _add(row.gpu_hours, c.gpu_hours)
        row.assumed += [a for a in c.assumed if a not in row.assumed]
        row.unknown += [u for u in c.unknown if u not in row.unknown]
    return rows


def usage(plan: RunPlan, cells: list[Cell], calls: list[Calls]) -> list[Usage]:
    """A :class:`Usage` per (model, role) of the run (module docstring), priced."""
    rows = list(_vlm_rows(plan, cells).values()) + list(_call_rows(calls).values())
    for row in rows:
        if row.kind == "offline":
            row.gpu_hours = 0.0
        if not row.priced:
            continue
        row.gpu_hours = 0.0
        prices = prices_of(plan, row.model) if row.kind == "api" else None
        if prices is None:
            key = (f"models.{row.model}.prices" if row.kind == "api" else
                   f"an `llm:` setting naming a registry entry with prices ({row.model})")  # fmt: skip
            row.unknown.append(f"money: no prices for {row.model}; add {key} "
                               "(input, output, source, date)")  # fmt: skip
            continue
        if row.prompt_tokens is None or row.generated_tokens is None:
            continue
        row.usd, row.usd_batch, row.usd_cached = price(
            prices, row.prompt_tokens, row.cached_tokens, row.generated_tokens,
            cache_floor(plan, row.model),
        )  # fmt: skip
    return rows


def totals(rows: list[Usage]) -> dict[str, Any]:
    """Requests, tokens, GPU-hours (local models) and USD (API models) of ``rows``; a
    total that rests on an unknown is None. ``usd_batch`` counts each model at its batch
    prices where it has them, else its standard ones."""
    out: dict[str, Any] = {"requests": sum(r.requests for r in rows)}
    out["prompt_tokens"] = _sum(r.prompt_tokens for r in rows)
    out["generated_tokens"] = _sum(r.generated_tokens for r in rows)
    out["gpu_hours"] = _sum(r.gpu_hours for r in rows)
    priced = [r for r in rows if r.priced and r.requests]
    out["usd"] = _sum(r.usd for r in priced)
    out["usd_batch"] = _sum(r.usd if r.usd_batch is None else r.usd_batch for r in priced)
    out["usd_cached"] = _sum(r.usd_cached for r in priced)
    return out


def _sum(values: Any) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else float(sum(values))


def by_role(rows: list[Usage]) -> dict[str, list[Usage]]:
    found: dict[str, list[Usage]] = defaultdict(list)
    for r in rows:
        found[r.role].append(r)
    return dict(found)


def api_models(plan: RunPlan, rows: list[Usage]) -> list[str]:
    """The registry API models among ``rows`` (whose prices the sources list prints)."""
    return sorted({r.model for r in rows if r.model in plan.registry
                   and plan.registry[r.model]["backend"] in API_BACKENDS})  # fmt: skip

"""The forecast as readable tables (:func:`render_text`) and as JSON (:func:`to_json`).

Rows are per (model, study) — a cell shared by several studies (a clean condition
that the corruption and the distraction study both read) is counted once, under the
studies joined by ``+`` — then per study, the totals; then every model of the run in
every role (the VLMs' answers and the judges', extractors' and writers' calls) with its
GPU-hours or money, the LLM calls per step, the totals and what the attribute scoping
saves; the engines' schedule, the variants' disk (with the explorer's files while
``explorer.build`` is true) and every number's source. Token
figures per request are means weighted by requests; a total that rests on an unknown is
printed as ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from typing import Any

from . import Forecast
from . import calls as calls_module
from .calls import Calls
from .cells import Cell
from .money import Usage, totals
from .tables import load_table


def study_label(cell: Cell) -> str:
    return "+".join(cell.studies) or "(no study)"


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def summarize(cells: list[Cell]) -> dict[str, Any]:
    """Requests, mean tokens per request, token totals and GPU-hours of ``cells``."""
    requests = sum(c.requests for c in cells)

    def total(attr: str) -> float | None:
        return _sum([None if getattr(c, attr) is None else getattr(c, attr) * c.requests
                     for c in cells])  # fmt: skip

    prompt, gen, vision = total("prompt_tokens"), total("generated"), total("vision_tokens")
    local = [c for c in cells if c.kind != "api"]
    return {
        "requests": requests,
        "prompt_tokens": prompt,
        "vision_tokens": vision,
        "generated_tokens": gen,
        "prompt_per_request": None if prompt is None or not requests else prompt / requests,
        "vision_per_request": None if vision is None or not requests else vision / requests,
        "generated_per_request": None if gen is None or not requests else gen / requests,
        "engine_hours": _sum([c.engine_hours for c in local]) if local else 0.0,
        "gpu_hours": _sum([c.gpu_hours for c in local]) if local else 0.0,
        "api": not local,
        "unknown": sorted({u for c in cells for u in c.unknown}),
    }


def groups(forecast: Forecast) -> dict[tuple[str, str], list[Cell]]:
    by: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for cell in forecast.cells:
        by[(cell.model, study_label(cell))].append(cell)
    return dict(by)


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "unknown"
    return f"{value:,.{digits}f}"


def hours(seconds: float | None) -> str:
    """Hours, or seconds below six minutes (a demo run)."""
    if seconds is None:
        return "unknown"
    return f"{seconds:,.0f} s" if seconds < 360 else f"{seconds / 3600:,.1f} h"


def _m(value: float | None) -> str:
    return "unknown" if value is None else f"{value / 1e6:,.2f}"


def _row(label: list[str], s: dict[str, Any]) -> str:
    if s["api"]:
        gpu = "API"
    elif s["gpu_hours"] == 0 and s["engine_hours"]:
        gpu = f"CPU {hours(s['engine_hours'] * 3600)}"
    else:
        gpu = _n(s["gpu_hours"], 1)
    cells = [
        *label,
        _n(s["requests"]),
        _n(s["prompt_per_request"]),
        _n(s["vision_per_request"]),
        _n(s["generated_per_request"]),
        _m(s["prompt_tokens"]),
        _m(s["generated_tokens"]),
        gpu,
    ]
    return "| " + " | ".join(cells) + " |"


#: what each ``variants.format`` stores (vlmrobust/perturb/storage.py)
DISK_FORMATS = {
    "png": "PNG",
    "webp": "lossless WebP (PNG where WebP cannot hold the image; masks PNG)",
}

HEAD = ("requests | prompt tok/req | of it vision | generated tok/req | prompt Mtok | "
        "generated Mtok | GPU-h")  # fmt: skip


def model_table(forecast: Forecast) -> list[str]:
    lines = [f"| model | study | {HEAD} |", "|---|---|" + "---:|" * 7]
    for (model, study), cells in groups(forecast).items():
        lines.append(_row([model, study], summarize(cells)))
    return lines


def study_table(forecast: Forecast) -> list[str]:
    by: dict[str, list[Cell]] = defaultdict(list)
    for cell in forecast.cells:
        by[study_label(cell)].append(cell)
    lines = [f"| study | {HEAD} |", "|---|" + "---:|" * 7]
    lines += [_row([study], summarize(cells)) for study, cells in sorted(by.items())]
    lines.append(_row(["**all**"], summarize(forecast.cells)))
    return lines


def _usd(value: float | None) -> str:
    """Dollars: cents below $10 (a small run), whole dollars above."""
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if abs(value) < 10 else f"${value:,.0f}"


def _cost(u: Usage) -> list[str]:
    """GPU-h, USD, USD batch, USD with the repeated prefix cached of one usage row."""
    if u.kind == "offline":
        return ["0", "", "", ""]
    if not u.priced:
        gpu = u.gpu_hours
        return ["CPU" if u.kind == "demo" else _n(gpu, 1), "", "", ""]
    batch = "no batch API" if u.usd is not None and u.usd_batch is None else _usd(u.usd_batch)
    return ["API", _usd(u.usd), batch, _usd(u.usd_cached)]


def usage_table(forecast: Forecast) -> list[str]:
    """Every model of the run in every role: requests, tokens, GPU-hours or money."""
    lines = [
        "| model | kind | role | steps | requests | prompt Mtok | of it a repeated prefix | "
        "generated Mtok | GPU-h | USD | USD batch | USD prefix cached | assumed |",
        "|---|---|---|---|" + "---:|" * 8 + "---|",
    ]
    for u in forecast.usage:
        model = "(no LLM)" if u.kind == "offline" else u.model
        lines.append("| " + " | ".join([
            model, u.kind, u.role, ", ".join(u.steps), _n(u.requests), _m(u.prompt_tokens),
            _m(u.cached_tokens), _m(u.generated_tokens), *_cost(u), ", ".join(u.assumed),
        ]) + " |")  # fmt: skip
    return lines


def calls_table(forecast: Forecast) -> list[str]:
    """The LLM calls per (model, step, setting): files, requests, tokens per request."""
    by: dict[tuple[str, str, str], list[Calls]] = defaultdict(list)
    for c in forecast.calls:
        by[(c.model, c.step, c.where)].append(c)
    lines = [
        "| LLM | step | setting | files | requests | prompt tok/req | of it a repeated prefix "
        "| generated tok/req | GPU-h | how (one file) | assumed |",
        "|---|---|---|" + "---:|" * 6 + "---|---|",
    ]
    for (model, step, where), calls in by.items():
        n = sum(c.requests for c in calls)
        prompt = _sum([c.total(c.prompt) for c in calls])
        gen = _sum([c.total(c.generated) for c in calls])
        cached = sum(c.cached * c.requests for c in calls)
        gpu = _sum([c.gpu_hours for c in calls]) if calls[0].kind == "local" else None
        assumed = sorted({a for c in calls for a in c.assumed})
        per = [_per(t, n) for t in (prompt, cached, gen)]
        lines.append("| " + " | ".join([
            "(no LLM)" if calls[0].kind == "offline" else model, step, where, str(len(calls)),
            _n(n), *per,
            _n(gpu, 1) if calls[0].kind == "local" else calls[0].kind,
            max(calls, key=lambda c: c.requests).how, ", ".join(assumed),
        ]) + " |")  # fmt: skip
    return lines


def _per(total: float | None, n: float) -> str:
    """A per-request mean; empty without a request."""
    return "" if not n else _n(None if total is None else total / n)


def totals_lines(forecast: Forecast) -> list[str]:
    """Every call of the run, GPU-hours all and USD all, and what the scoping saves."""
    t = totals(forecast.usage)
    vlm = totals([u for u in forecast.usage if u.role == "VLM"])
    llm = totals([u for u in forecast.usage if u.role != "VLM"])

    def g(v: float | None) -> str:
        return "unknown" if v is None else f"{v / 1e9:,.2f} G"

    lines = [
        f"All models' calls: **{_n(t['requests'])} requests** (VLMs {_n(vlm['requests'])}, "
        f"judges, extractors and writers {_n(llm['requests'])}), {g(t['prompt_tokens'])} "
        f"prompt and {g(t['generated_tokens'])} generated tokens; **GPU-hours all "
        f"{_n(t['gpu_hours'], 1)}** (VLMs {_n(vlm['gpu_hours'], 1)}, LLMs "
        f"{_n(llm['gpu_hours'], 1)}); **USD all {_usd(t['usd'])}** at standard prices "
        f"(VLMs {_usd(vlm['usd'])}, LLMs {_usd(llm['usd'])}), {_usd(t['usd_batch'])} "
        f"through the batch APIs where there are any, {_usd(t['usd_cached'])} with every "
        "repeated prompt prefix at the cached-input price.",
    ]
    saved = forecast.savings
    if saved is not None:
        a = saved["saved"]
        attrs = forecast_scope(forecast)
        lines += ["", f"The attribute scoping ({attrs}) saves {_n(a['requests'])} requests, "
                  f"{_n(a['gpu_hours'], 1)} GPU-hours and {_usd(a['usd'])} "
                  f"({_usd(a['usd_cached'])} with cached prefixes) against `scope: all` "
                  f"without a validation sample (which would make "
                  f"{_n(saved['unscoped']['requests'])} requests, "
                  f"{_n(saved['unscoped']['gpu_hours'], 1)} GPU-hours, "
                  f"{_usd(saved['unscoped']['usd'])})."]  # fmt: skip
    return lines


def forecast_scope(forecast: Forecast) -> str:
    return str(forecast.savings.get("setting", "judge.attributes")) if forecast.savings else ""


def schedule_lines(forecast: Forecast) -> list[str]:
    if forecast.makespan_s is None:
        return ["No local model with a known engine time: nothing to schedule."]
    busy = sum(e.seconds * e.gpus for e in forecast.engines)
    longest = max(e.seconds for e in forecast.engines)
    what_if = forecast.engines_per_model
    engines = f"{what_if} per model and phase (--engines)" if what_if else "service.engines"
    bound = busy / forecast.gpus
    lines = [
        f"Wall time on {forecast.gpus} GPUs, engines as {engines}: "
        f"**{hours(forecast.makespan_s)}** "
        f"({len(forecast.engines)} engines; lower bounds: GPU-hours / GPUs "
        f"{hours(bound)}, the longest engine {hours(longest)}).",
        "",
        f"Engines' GPU-hours (start-ups included) {busy / 3600:,.1f} / {forecast.gpus} GPUs = "
        f"{hours(bound)}; the makespan is {forecast.makespan_s / bound:.3f} x that "
        f"({(forecast.makespan_s / bound - 1) * 100:+.1f} %).",
        "",
        "| model | engines (phase 0 + 1) | GPUs each | engine time | starts at | ends at |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    by: dict[str, list] = defaultdict(list)
    for e in forecast.engines:
        by[e.model].append(e)
    for model, engines in by.items():
        phases = f"{sum(e.phase == 0 for e in engines)} + {sum(e.phase == 1 for e in engines)}"
        if engines[0].after:  # an LLM engine: after the VLMs it reads
            phases = f"{len(engines)} (after {len(engines[0].after)} VLMs)"
        lines.append(
            f"| {model} | {phases} | {engines[0].gpus} | "
            f"{hours(sum(e.seconds for e in engines))} | "
            f"{hours(min(e.start for e in engines))} | "
            f"{hours(max(e.end for e in engines))} |"
        )
    if forecast.left_out:
        lines.append(f"\nNot scheduled (unknown engine time): {', '.join(forecast.left_out)}.")
    return lines


def disk_lines(forecast: Forecast) -> list[str]:
    lines = ["| dataset | condition | perturbation | images | MP/image | GB | how |",
             "|---|---|---|---:|---:|---:|---|"]  # fmt: skip
    for d in forecast.disk:
        gb = "unknown" if d.bytes is None else f"{d.bytes / 1e9:,.2f}"
        lines.append(f"| {d.dataset} | {d.condition} | {d.perturbation} | {d.images:,.0f} | "
                     f"{d.megapixels:.3f} | {gb} | {d.how} |")  # fmt: skip
    total = _sum([d.bytes for d in forecast.disk])
    lines.append(f"| **all** | | | {sum(d.images for d in forecast.disk):,.0f} | | "
                 f"{'unknown' if total is None else f'{total / 1e9:,.2f}'} | |")  # fmt: skip
    return lines + explorer_disk_lines(forecast, total)


def _gb(value: float | None) -> str:
    return "unknown" if value is None else f"{value / 1e9:,.2f}"


def explorer_disk_lines(forecast: Forecast, variants: float | None) -> list[str]:
    """The explorer's lines of the disk table (none while ``explorer.build`` is false),
    and the variants' and the explorer's bytes together."""
    found = forecast.explorer
    if found is None:
        return []
    lines = []
    for e in found.lines:
        images = f"{e.items:,.0f}" if e.unit == "thumbnails" else ""
        cells = [e.what, f"{e.items:,.0f} {e.unit}", "", images, "", _gb(e.bytes), e.how]
        lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
    both = _sum([variants, found.bytes])
    lines.append(f"| **explorer** | | | | | {_gb(found.bytes)} | results/explorer/ |")
    lines.append(f"| **all with the explorer** | | | | | {_gb(both)} | |")
    return lines


def source_lines(forecast: Forecast) -> list[str]:
    """Where every number comes from: per dataset x condition the requests and the image
    sizes; the generation rules used; each throughput class's sources."""
    lines = ["Requests and image sizes (per dataset, condition):", ""]
    seen = set()
    for c in forecast.cells:
        if (c.dataset, c.condition) not in seen:
            seen.add((c.dataset, c.condition))
            lines.append(f"- {c.dataset} / {c.condition}: {c.requests_how}; sizes {c.sizes_how}")
    lines += ["", "Generated tokens per request (per model, dataset and prompt):", ""]
    seen = set()
    for c in forecast.cells:
        item = (c.model, c.dataset, c.prompt, c.generated_source)
        if item not in seen and c.generated is not None:
            seen.add(item)
            lines.append(f"- {c.model} / {c.dataset} / {c.prompt}: {c.generated:,.0f} "
                         f"({c.generated_source})")  # fmt: skip
    lines += ["", *price_lines(forecast)]
    lines += ["", "Throughput classes:", ""]
    for rates in {r.name: r for r in forecast.rates.values()}.values():
        lines.append(f"- {rates.name} on {rates.gpu}: prompt {rates.prompt_tok_s} tok/s, "
                     f"generated {rates.gen_tok_s:g} tok/s, vision x{rates.vision_factor:g}, "
                     f"start-up {rates.startup_s:g} s")  # fmt: skip
        lines += [f"  - {k}: {v}" for k, v in rates.sources.items()]
    return lines


def price_lines(forecast: Forecast) -> list[str]:
    """The registry's prices of every API model of the run, each with its source and
    date, and the stated numbers the LLM calls rest on (``calls.yaml``)."""
    lines = ["Prices (config/models.yaml `prices`, USD per million tokens):", ""]
    for model in forecast.price_models:
        p = forecast.prices.get(model)
        if p is None:
            lines.append(f"- {model}: none (add models.{model}.prices)")
            continue
        batch = (f", batch {p['batch_input']:g} / {p['batch_output']:g}"
                 if p.get("batch_input") is not None else ", no batch API")  # fmt: skip
        cached = f", cached input {p['cached_input']:g}" if p.get("cached_input") else ""
        lines.append(f"- {model}: input {p['input']:g}{cached}, output {p['output']:g}{batch} "
                     f"({p['source']}, read {p['date']})")  # fmt: skip
    table = calls_module.load_table("calls")
    lines += ["", "LLM calls (forecast/calls.yaml; each flagged `assumed` in the tables):", ""]
    for step, entries in table.items():
        for key, entry in entries.items():
            if isinstance(entry, dict) and "source" in entry:
                value = entry.get("tokens", entry.get("value", entry.get("min_tokens")))
                lines.append(f"- {step}.{key}: {value} ({entry['source']})")
            elif isinstance(entry, dict):
                lines += [f"- {step}.{key}.{k}: {e.get('tokens')} ({e['source']})"
                          for k, e in entry.items()]  # fmt: skip
    return lines


def render_text(forecast: Forecast, sources: bool = True) -> str:
    unknown = sorted({u for c in forecast.cells for u in c.unknown}
                     | {u for r in forecast.usage for u in r.unknown})  # fmt: skip
    parts = [
        f"Forecast of {forecast.config or 'the run'}: {len(forecast.cells)} outputs files, "
        f"rates for {forecast.gpu_type or load_table('throughput')['gpu']} (vLLM)"
        + (f", generated tokens measured in {forecast.pilot}" if forecast.pilot else ""),
        "",
        *model_table(forecast),
        "",
        *study_table(forecast),
        "",
        "Every model of the run in every role (the VLMs' answers; the judges', extractors' "
        "and writers' calls):",
        "",
        *usage_table(forecast),
        "",
        "The LLM calls per step (a count flagged `assumed` rests on forecast/calls.yaml):",
        "",
        *calls_table(forecast),
        "",
        *totals_lines(forecast),
        "",
        *schedule_lines(forecast),
        "",
        f"Variants' disk (perturbations that write images), stored as "
        f"{DISK_FORMATS.get(forecast.disk_format, forecast.disk_format)} (variants.format: "
        f"{forecast.disk_format}):",
        "",
        *disk_lines(forecast),
    ]
    hf = sorted({c.model for c in forecast.cells if c.backend == "hf" and c.gpus > 0})
    if hf:
        parts += ["", f"Backend hf (transformers' padded batches) for {', '.join(hf)}: "
                  "vLLM's GPU rates scaled by forecast/throughput.yaml `backends.hf` (an "
                  "assumption until benchmarks/gpu_check.py measures both)."]  # fmt: skip
    if unknown:
        parts += ["", "Unknown (no silent zero; add the entry named):", ""]
        parts += [f"- {u}" for u in unknown]
    if sources:
        parts += ["", *source_lines(forecast)]
    return "\n".join(parts) + "\n"


def to_json(forecast: Forecast) -> dict[str, Any]:
    cells = []
    for c in forecast.cells:
        row = asdict(c)
        row.update(prompt_tokens=c.prompt_tokens, engine_hours=c.engine_hours,
                   gpu_hours=c.gpu_hours)  # fmt: skip
        cells.append(row)
    by_study: dict[str, list[Cell]] = defaultdict(list)
    for c in forecast.cells:
        by_study[study_label(c)].append(c)
    return {
        "config": forecast.config,
        "gpus": forecast.gpus,
        "gpu_type": forecast.gpu_type,
        "pilot": forecast.pilot,
        "totals": summarize(forecast.cells),
        "by_model_study": [
            {"model": m, "study": s, **summarize(cs)} for (m, s), cs in groups(forecast).items()
        ],
        "by_study": {s: summarize(cs) for s, cs in sorted(by_study.items())},
        "makespan_hours": None if forecast.makespan_s is None else forecast.makespan_s / 3600,
        "engines": [asdict(e) | {"end": e.end} for e in forecast.engines],
        "not_scheduled": forecast.left_out,
        "disk_format": forecast.disk_format,
        "disk": [asdict(d) for d in forecast.disk],
        "disk_bytes": _sum([d.bytes for d in forecast.disk]),
        "explorer_disk": explorer_json(forecast),
        "throughput": {m: asdict(r) for m, r in forecast.rates.items()},
        "cells": cells,
        "calls": [asdict(c) | {"gpu_hours": c.gpu_hours} for c in forecast.calls],
        "usage": [asdict(u) for u in forecast.usage],
        "usage_totals": totals(forecast.usage),
        "savings": forecast.savings,
        "prices": {m: forecast.prices.get(m) for m in forecast.price_models},
    }


def explorer_json(forecast: Forecast) -> dict[str, Any] | None:
    """The explorer's disk: per variant set, per cell, the table's lines and the bytes."""
    found = forecast.explorer
    if found is None:
        return None
    return {
        "sets": found.sets,
        "cells": found.cells,
        "lines": [asdict(e) for e in found.lines],
        "bytes": found.bytes,
    }

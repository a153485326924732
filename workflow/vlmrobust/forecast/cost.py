"""Wall time on N GPUs and the variants' disk.

**Wall time.** The run's engines as the plan makes them (docs/architecture.md, one
loaded model per device): per local model and phase (0: prompts on the images alone; 1:
prompts built on the model's own first-stage answers, after its phase 0) at most
``service.engines.<model>`` engines, the phase's jobs dealt to them in turn
(:func:`vlmrobust.plan.engines.engine_cells`), each engine holding the model's
``resources.gpu`` GPUs for its start-up plus its jobs' time (a job's time: its cell's
engine time over the dataset's shards). :func:`schedule` places the engines on ``gpus``
GPUs by list scheduling, longest first, an engine starting as soon as enough GPUs are
free and its model's phase 0 is done (a CPU demo engine takes one slot). The local LLMs'
engines (the judges' and extractors': :func:`vlmrobust.plan.llm_engines.llm_engines`,
each holding its judged files' calls, :mod:`.calls`) are engines of the same schedule,
each starting only when every engine of the VLMs whose outputs its files read has ended
(an API VLM's jobs hold no GPU and take no forecast time: they do not delay it). That is
a greedy bound, not the cluster's queue: it takes no other users, no queueing delay and
no failed jobs into account, and within an engine its jobs run one after another at the
engine's full rate.

**Disk.** A perturbation that writes images (its registered ``apply``; ``none``,
``distraction``, ``idis-release`` and ``textual`` only name existing files) takes, per
written image, its pixels at the made size x ``disk.yaml``'s bytes per pixel for the
configuration's ``variants.format`` (``png`` or lossless ``webp``); a condition whose
images folder is there is measured instead.

**The explorer's disk** (``results/explorer/``, only while ``explorer.build`` is true:
:func:`explorer_disk`). Per variant set (a dataset x condition the run answers,
:func:`vlmrobust.studies.explorer.variant_sets`): one WebP thumbnail per variant image
(longest side 320 px, quality 80) x ``disk.yaml``'s ``explorer.thumbnail`` bytes, and
one entry per variant in its ``part<k>.js`` x ``explorer.variant``. Per cell (one scored
file, :func:`vlmrobust.studies.explorer.cells`): its rows (the cell's requests) x
``explorer.row`` for ``rows.js``, and per row a text entry in the ``text<k>.js`` chunks:
``explorer.text`` plus the cell's generated tokens per request (the forecast's own, at
most the explorer's clip of one text) x ``explorer.token`` (a reasoning model's:
``explorer.reasoning_token``, its raw text kept beside the thinking), plus
``explorer.judge`` per judge file of the cell. The index, the agreement files and the summaries are a few bytes per cell and
are not counted.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from statistics import fmean

from ..plan import RunPlan, inference
from ..plan import engines as plan_engines
from ..studies import explorer as explorer_plan
from .calls import Calls
from .cells import Cell
from .counts import ConditionFacts
from .tables import (
    MissingEntry,
    Throughput,
    bytes_per_pixel,
    explorer_bytes,
    explorer_clip_tokens,
)
from .tokens import Pilot, generated_tokens


@dataclass
class Engine:
    """One engine of the schedule: a model's phase and index, its GPUs and seconds."""

    model: str
    phase: int
    index: str  # the engine's label (vlmrobust.plan.engines.engine_label)
    gpus: int
    seconds: float
    start: float = 0.0
    #: models whose every engine must have ended before this one starts (an LLM engine:
    #: the VLMs whose outputs it reads)
    after: tuple[str, ...] = ()

    @property
    def end(self) -> float:
        return self.start + self.seconds


def engines_of_run(
    plan: RunPlan, cells: dict[tuple, Cell], rates: dict[str, Throughput]
) -> tuple[list[Engine], list[str]]:
    """The engines of every local model with a known time
    (:func:`vlmrobust.plan.engines.engines`, each with the cells
    :func:`~vlmrobust.plan.engines.engine_cells` deals it), and the models left out
    (unknown time) with the reason."""
    engines = []
    known = {
        model
        for model, entry in plan.models.items()
        if entry["backend"] in ("hf", "vllm")
        and model in rates
        and all(c.engine_s is not None for k, c in cells.items() if k[0] == model)
    }
    left_out = [
        m for m, e in plan.models.items() if e["backend"] in ("hf", "vllm") and m not in known
    ]
    for model, phase, label in plan_engines.engines(plan):
        if model not in known:
            continue
        seconds = rates[model].startup_s + sum(
            cells[(model, d, c, p)].engine_s / shards
            for d, c, p, _i, shards in plan_engines.engine_cells(plan, model, phase, label)
            if (model, d, c, p) in cells
        )
        gpus = max(1, cells_gpus(cells, model))
        engines.append(Engine(model, phase, label, gpus, seconds))
    return engines, left_out


def llm_engines_of_run(
    plan: RunPlan, calls: list[Calls], engines: list[Engine], rates: dict[str, Throughput]
) -> tuple[list[Engine], list[str]]:
    """The engines of every local LLM with a known time (:func:`~vlmrobust.plan.llm_engines.llm_engines`,
    each with the judged files :func:`~vlmrobust.plan.engines.llm_engine_cells` deals it), each after the
    scheduled VLMs (``engines``) whose outputs it reads; and the LLMs left out."""
    by_file = {c.file: c for c in calls if c.kind == "local"}
    scheduled = {e.model for e in engines}
    out, left_out = [], []
    for model, label in plan_engines.llm_engines(plan):
        files = [by_file.get(jc.out) for jc in plan_engines.llm_engine_cells(plan, model, label)]
        if model not in rates or any(f is None or f.engine_s is None for f in files):
            if model not in left_out:
                left_out.append(model)
            continue
        seconds = rates[model].startup_s + sum(f.engine_s for f in files if f is not None)
        after = sorted({f.reads[0] for f in files if f is not None and f.reads} & scheduled)
        gpus = max(1, files[0].gpus if files and files[0] is not None else 1)
        out.append(Engine(model, 0, label, gpus, seconds, after=tuple(after)))
    return out, left_out


def cells_gpus(cells: dict[tuple, Cell], model: str) -> int:
    return next((c.gpus for k, c in cells.items() if k[0] == model), 1)


def schedule(engines: list[Engine], gpus: int) -> float:
    """The makespan (s) of ``engines`` on ``gpus`` GPUs (module docstring); sets each
    engine's ``start``. An engine that needs more GPUs than there are is an error."""
    too_big = [e for e in engines if e.gpus > gpus]
    if too_big:
        e = too_big[0]
        raise ValueError(f"--gpus {gpus}: an engine of {e.model} holds {e.gpus} GPUs")
    waiting = sorted(engines, key=lambda e: -e.seconds)
    phase0_left = {e.model: 0 for e in engines}
    left = {e.model: 0 for e in engines}  # engines not ended yet, every phase
    for e in engines:
        phase0_left[e.model] += e.phase == 0
        left[e.model] += 1
    running: list[tuple[float, int, Engine]] = []
    now, free = 0.0, gpus
    while waiting or running:
        for e in list(waiting):
            ready = e.phase == 0 or phase0_left[e.model] == 0
            if e.gpus <= free and ready and not any(left.get(m) for m in e.after):
                e.start, free = now, free - e.gpus
                heapq.heappush(running, (e.end, id(e), e))
                waiting.remove(e)
        if not running:  # pragma: no cover - every engine fits (checked above)
            break
        now, _, done = heapq.heappop(running)
        free += done.gpus
        phase0_left[done.model] -= done.phase == 0
        left[done.model] -= 1
    return now


@dataclass
class Disk:
    """The images one (dataset, condition) writes and the bytes they take."""

    dataset: str
    condition: str
    perturbation: str
    images: float
    megapixels: float
    bytes: float | None
    how: str
    format: str = "png"  # variants.format, the encoding the bytes per pixel are for


def writes_images(perturbation: str) -> bool:
    """Whether a perturbation writes image files (its registered ``apply``)."""
    from ..perturb import PERTURBATIONS  # the registry of the perturbation stage

    return PERTURBATIONS[perturbation].apply is not None


def disk_of(plan: RunPlan, cond: ConditionFacts) -> Disk | None:
    """The variants' images of one condition (None: it writes none)."""
    perturbation = plan.conditions[cond.condition]["perturbation"]
    if not writes_images(perturbation):
        return None
    fmt = plan.config["variants"]["format"]
    mp = fmean(w * h for w, h in cond.sizes) / 1e6 if cond.sizes else 0.0
    images = cond.written_images or cond.variants.value * cond.images_per_variant
    if cond.disk_bytes is not None:
        return Disk(cond.dataset, cond.condition, perturbation, images, mp, cond.disk_bytes,
                    "measured: the images folder", fmt)  # fmt: skip
    try:
        rate, source = bytes_per_pixel(perturbation, plan.datasets[cond.dataset]["adapter"], fmt)
    except MissingEntry as exc:
        return Disk(cond.dataset, cond.condition, perturbation, images, mp, None, str(exc), fmt)
    how = (f"{images:g} images ({cond.variants.how}) x {mp:.3g} MP x {rate:g} B/px as {fmt} "
           f"({source})")  # fmt: skip
    return Disk(cond.dataset, cond.condition, perturbation, images, mp,
                images * mp * 1e6 * rate, how, fmt)  # fmt: skip


# --------------------------------------------------------------------------- explorer


@dataclass
class ExplorerLine:
    """One line of the explorer's disk: what, how many items, their bytes (None:
    unknown, ``how`` says why) and how they are computed."""

    what: str
    items: float
    unit: str
    bytes: float | None
    how: str


@dataclass
class ExplorerDisk:
    """The explorer's files: per variant set and per cell (dicts, the JSON's), and the
    disk table's lines (thumbnails, variant parts, cell rows, cell texts)."""

    sets: list[dict]
    cells: list[dict]
    lines: list[ExplorerLine]

    @property
    def bytes(self) -> float | None:
        found = [line.bytes for line in self.lines]
        return None if any(b is None for b in found) else sum(b for b in found if b is not None)


def _rate(name: str, benchmark: str | None = None) -> tuple[float | None, str]:
    """An explorer constant (None and the missing key when ``disk.yaml`` lacks it)."""
    try:
        return explorer_bytes(name, benchmark)
    except MissingEntry as exc:
        return None, str(exc)


def _times(n: float, rate: float | None) -> float | None:
    return None if rate is None else n * rate


def explorer_set(plan: RunPlan, cond: ConditionFacts) -> dict:
    """One variant set's thumbnails (one per variant image) and variant entries."""
    variants = cond.variants.value
    thumbs = variants * cond.images_per_variant
    clean = plan.conditions[cond.condition]["perturbation"] == "none"
    try:
        thumb, thumb_src = explorer_bytes(
            "thumbnail", plan.datasets[cond.dataset]["adapter"], clean
        )
    except MissingEntry as exc:
        thumb, thumb_src = None, str(exc)
    if clean:
        thumb_src = f"clean: {thumb_src}"
    entry, entry_src = _rate("variant")
    return {
        "dataset": cond.dataset, "condition": cond.condition, "variants": variants,
        "thumbnails": thumbs, "thumbnail_bytes": thumb, "thumbnail_source": thumb_src,
        "variant_bytes": entry, "variant_source": entry_src,
        "thumbs_bytes": _times(thumbs, thumb), "parts_bytes": _times(variants, entry),
    }  # fmt: skip


def explorer_cell(
    plan: RunPlan, key: tuple[str, str, str, str], cell: Cell | None, cond: ConditionFacts,
    pilot: Pilot | None,
) -> dict:  # fmt: skip
    """One cell's ``rows.js`` and text chunks: its rows (the forecast cell's requests;
    an imported cell: its variants x draws) and generated tokens per row."""
    model, dataset, condition, prompt = key
    if cell is not None:
        rows, generated = cell.requests, cell.generated
    else:  # outputs imported from a release: answered by no engine of the run
        rows = cond.variants.value * inference.draws(plan, dataset, prompt)[0]
        try:
            generated = generated_tokens(plan, model, dataset, condition, prompt, pilot)[0]
        except MissingEntry:
            generated = None
    judges = len(explorer_plan.cell_inputs(plan, *key)["judges"])
    row, text, token, judge = (_rate(n)[0] for n in ("row", "text", "token", "judge"))
    if plan.registry[model].get("role") == "reasoning":
        token = _rate("reasoning_token")[0] or token
    try:
        clip = explorer_clip_tokens()[0]
    except MissingEntry:
        clip = None
    shown = None if generated is None or clip is None else min(generated, clip)
    per_text = None
    if None not in (text, token, shown) and (judge is not None or not judges):
        per_text = text + shown * token + judges * (judge or 0.0)  # type: ignore[operator]
    return {
        "model": model, "dataset": dataset, "condition": condition, "prompt": prompt,
        "rows": rows, "generated": generated, "shown_tokens": shown, "judges": judges,
        "rows_bytes": _times(rows, row), "texts_bytes": _times(rows, per_text),
    }  # fmt: skip


def explorer_disk(
    plan: RunPlan,
    conds: dict[tuple[str, str], ConditionFacts],
    cells: dict[tuple, Cell],
    pilot: Pilot | None = None,
) -> ExplorerDisk | None:
    """The explorer's files (module docstring); None when ``explorer.build`` is false or
    the run has no model."""
    if not explorer_plan.enabled(plan):
        return None
    sets = [explorer_set(plan, conds[s]) for s in explorer_plan.variant_sets(plan)]
    found = [
        explorer_cell(plan, key, cells.get(key), conds[(key[1], key[2])], pilot)
        for key in explorer_plan.cells(plan)
    ]
    return ExplorerDisk(sets, found, explorer_lines(sets, found))


def _sum_of(items: list[dict], key: str) -> float | None:
    values = [i[key] for i in items]
    return None if any(v is None for v in values) else float(sum(values))


def _rates_how(sets: list[dict], what: str) -> str:
    """``N x B`` per distinct rate of ``sets`` (its items and bytes under ``what``)."""
    by: dict[tuple, float] = {}
    for s in sets:
        key = (s[f"{what}_bytes"], s[f"{what}_source"])
        by[key] = by.get(key, 0.0) + (s["thumbnails"] if what == "thumbnail" else s["variants"])
    return "; ".join(
        f"{n:,.0f} x {'unknown' if b is None else f'{b:,.0f}'} B ({src})"
        for (b, src), n in by.items()
    )


def explorer_lines(sets: list[dict], cells: list[dict]) -> list[ExplorerLine]:
    """The disk table's explorer lines: thumbnails, variant parts, cell rows, cell texts."""
    rows = sum(c["rows"] for c in cells)
    row, row_src = _rate("row")
    text, text_src = _rate("text")
    token, token_src = _rate("token")
    reasoning, reasoning_src = _rate("reasoning_token")
    judge, judge_src = _rate("judge")
    clip = _clip_how()
    texts = rows and sum(c["rows"] * (c["generated"] or 0) for c in cells) / rows
    judged = sum(c["rows"] * c["judges"] for c in cells)
    text_how = (f"{rows:,.0f} texts x ({_b(text)} B ({text_src}) + {texts:,.0f} generated "
                f"tok/row, at most {clip}, x {_b(token)} B/token ({token_src}); a reasoning "
                f"model's x {_b(reasoning)} B/token ({reasoning_src}))")  # fmt: skip
    if judged:
        text_how += f" + {judged:,.0f} judge records x {_b(judge)} B ({judge_src})"
    unknown = [f"{c['model']}/{c['dataset']}/{c['condition']}/{c['prompt']}"
               for c in cells if c["generated"] is None]  # fmt: skip
    if unknown:
        text_how += f"; generated tokens unknown for {', '.join(unknown[:3])}"
    return [
        ExplorerLine("explorer: thumbnails", sum(s["thumbnails"] for s in sets), "thumbnails",
                     _sum_of(sets, "thumbs_bytes"), _rates_how(sets, "thumbnail")),
        ExplorerLine("explorer: variant parts", sum(s["variants"] for s in sets), "variants",
                     _sum_of(sets, "parts_bytes"), _rates_how(sets, "variant")),
        ExplorerLine("explorer: cell rows", rows, "rows", _sum_of(cells, "rows_bytes"),
                     f"{len(cells)} cells, {rows:,.0f} rows x {_b(row)} B ({row_src})"),
        ExplorerLine("explorer: cell texts", rows, "texts", _sum_of(cells, "texts_bytes"),
                     text_how),
    ]  # fmt: skip


def _b(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.1f}".removesuffix(".0")


def _clip_how() -> str:
    try:
        tokens, how = explorer_clip_tokens()
    except MissingEntry as exc:
        return str(exc)
    return f"{tokens:,.0f} ({how})"

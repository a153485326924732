"""Wall time on N GPUs and the variants' disk.

**Wall time.** The run's engines as the plan makes them (docs/architecture.md, one
loaded model per device): per local model and phase (0: prompts on the images alone;
1: prompts built on the model's own first-stage answers, after its phase 0) at most
``service.engines.<model>`` engines, the phase's jobs dealt to them in turn
(:meth:`RunPlan.engine_clients`), each engine holding the model's ``resources.gpu``
GPUs for its start-up plus its jobs' time (a job's time: its cell's engine time over
the dataset's shards). :func:`schedule` places the engines on ``gpus`` GPUs by list
scheduling, longest first, an engine starting as soon as enough GPUs are free and its
model's phase 0 is done (a CPU demo engine takes one slot). The local LLMs' engines
(the judges' and extractors': :meth:`RunPlan.llm_engines`, each holding its judged files'
calls, :mod:`.calls`) are engines of the same schedule, each starting only when every
engine of the VLMs whose outputs its files read has ended (an API VLM's jobs hold no GPU
and take no forecast time: they do not delay it). That is a greedy bound,
not the cluster's queue: it takes no other users, no queueing delay and no failed
jobs into account, and within an engine its jobs run one after another at the
engine's full rate.

**Disk.** A perturbation that writes images (its registered ``apply``; ``none``,
``distraction``, ``idis-release`` and ``textual`` only name existing files) takes, per
written image, its pixels at the made size x ``disk.yaml``'s bytes per pixel for the
configuration's ``variants.format`` (``png`` or lossless ``webp``); a condition whose
images folder is there is measured instead.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from statistics import fmean

from ..plan import RunPlan
from .calls import Calls
from .cells import Cell
from .counts import ConditionFacts
from .tables import MissingEntry, Throughput, bytes_per_pixel


@dataclass
class Engine:
    """One engine of the schedule: a model's phase and index, its GPUs and seconds."""

    model: str
    phase: int
    index: str  # the engine's label (RunPlan.engine_label)
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
    """The engines of every local model with a known time (:meth:`RunPlan.engines`, each
    with the cells :meth:`RunPlan.engine_cells` deals it), and the models left out
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
    for model, phase, label in plan.engines():
        if model not in known:
            continue
        seconds = rates[model].startup_s + sum(
            cells[(model, d, c, p)].engine_s / shards
            for d, c, p, _i, shards in plan.engine_cells(model, phase, label)
            if (model, d, c, p) in cells
        )
        gpus = max(1, cells_gpus(cells, model))
        engines.append(Engine(model, phase, label, gpus, seconds))
    return engines, left_out


def llm_engines_of_run(
    plan: RunPlan, calls: list[Calls], engines: list[Engine], rates: dict[str, Throughput]
) -> tuple[list[Engine], list[str]]:
    """The engines of every local LLM with a known time (:meth:`RunPlan.llm_engines`,
    each with the judged files :meth:`RunPlan.llm_engine_cells` deals it), each after the
    scheduled VLMs (``engines``) whose outputs it reads; and the LLMs left out."""
    by_file = {c.file: c for c in calls if c.kind == "local"}
    scheduled = {e.model for e in engines}
    out, left_out = [], []
    for model, label in plan.llm_engines():
        files = [by_file.get(jc.out) for jc in plan.llm_engine_cells(model, label)]
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

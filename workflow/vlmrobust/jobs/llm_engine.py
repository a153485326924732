"""The LLM engine job: one local LLM (a judge's or an extractor's), loaded once, answers
every judged file dealt to it (docs/judges.md).

A step whose setting names a local registry LLM (the MathVerse judge, an attribute
extractor: ``llm: gpt-oss-120b``) does not run as a job per file beside Snakemake: its
files are dealt to the model's engines (``service.engines.<model>``,
:func:`vlmrobust.plan.engines.llm_engine_cells`), each one job on the model's own GPUs, as a VLM's engines
are. The plan file (``results/engines/<model>/phase0/engine<k>.json``, rule
``engine_plan``) names the model, its registry entry and the cells: per judged file the
step, its resolved setting and its files. The engine:

- opens the model in its process (:func:`vlmrobust.clients.llm.local.serving`), loaded by
  the first cell with something to ask and closed at the end;
- runs ``options.pool_cells`` cells (default 32) at once, in threads, each exactly the
  step's own job function on its files (:mod:`vlmrobust.jobs.judges`): the same prompts,
  parsing and cache keys as the job beside Snakemake would use;
- pools their calls: each ``complete_many`` of a cell waits for the round in which every
  live cell has asked (:class:`~vlmrobust.clients.pool.RoundPool`), then one engine call
  answers them all, so a two-stage judge's stages are two rounds of the same loaded model;
- resumes: every response is written to the LLM cache when its round returns, so a
  killed engine's rerun asks only what no cache entry holds.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..clients.pool import RoundPool
from ..core import watchdog
from ..core.commands import Command, required
from . import log, set_threads
from .args import THREADS, WAIT_LOG

#: judged files answered at once (their calls pooled), unless options.pool_cells says
POOL_CELLS = 32
#: the steps an LLM engine runs, and the job function of each
STEPS = ("mathverse", "attributes")


def read_llm_plan(path: str | Path) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """The model, its registry entry and the cells of an LLM engine plan file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        model, spec, cells = str(data["model"]), dict(data["spec"]), list(data["cells"])
        for cell in cells:
            if cell["step"] not in STEPS or not cell["out"]:
                raise ValueError(f"a cell of step {cell['step']!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not an LLM engine plan ({type(exc).__name__}: {exc})") from exc
    return model, spec, cells


class _Model:
    """The engine's loaded model, loaded on first use under a lock (cells are threads)."""

    def __init__(self, model: str, spec: dict[str, Any]):
        self.model, self.spec = model, spec
        self.engine: Any = None
        self.lock = threading.Lock()
        self.calls = 0

    def __call__(self) -> Any:
        with self.lock:
            if self.engine is None:
                from ..clients.llm.engines import load_text_engine

                watchdog.waiting(f"loading models.{self.model}")
                t0 = time.perf_counter()
                self.engine = load_text_engine(self.model, self.spec)
                log.info(
                    "models.%s: loaded once for this engine (%.1f s)",
                    self.model,
                    time.perf_counter() - t0,
                )
        return self.engine

    def answer(self, asks: list[list[Any]]) -> list[list[Any]]:
        """One round of the pool: every waiting cell's requests in one engine call."""
        flat = [r for ask in asks for r in ask]
        engine = self()
        watchdog.waiting(
            f"models.{self.model}'s answers to {len(flat)} request(s) of {len(asks)} judged file(s)"
        )
        t0 = time.perf_counter()
        results = engine.generate(flat)
        watchdog.answered(len(flat))
        log.info("generated %d requests in %.1f s", len(flat), time.perf_counter() - t0)
        out, start = [], 0
        for ask in asks:
            out.append(results[start : start + len(ask)])
            start += len(ask)
        return out

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


def run_cell(cell: dict[str, Any]) -> None:
    """One judged file: the step's own job function on the cell's files."""
    from .judges import judge_attributes, judge_mathverse

    spec = json.dumps(cell["spec"], sort_keys=True)
    t0 = time.perf_counter()
    if cell["step"] == "mathverse":
        judge_mathverse(spec, cell["outputs"], cell["samples"], cell["out"])
    else:
        judge_attributes(
            spec,
            cell["extractor"],
            cell["task"],
            cell["outputs"],
            cell["samples"],
            cell["manifest"],
            cell["out"],
        )
    log.info("%s: judged (%.1f s)", cell["out"], time.perf_counter() - t0)


def run_llm_engine(model: str, spec: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    """Answer every cell with one model, ``options.pool_cells`` cells at a time."""
    from ..clients.llm.local import serving
    from ..clients.vlm.checkpoint import import_transformers

    loaded = _Model(model, spec)
    size = int((spec.get("options") or {}).get("pool_cells", POOL_CELLS))
    import_transformers()  # before the cells' threads
    try:
        for start in range(0, len(cells), size):
            window = cells[start : start + size]
            pool = RoundPool(loaded.answer, len(window))

            def one(cell: dict[str, Any], pool: RoundPool = pool) -> None:
                try:
                    run_cell(cell)
                finally:
                    pool.leave()

            with serving(model, pool.ask), ThreadPoolExecutor(len(window)) as ex:
                for future in [ex.submit(one, c) for c in window]:
                    future.result()
    finally:
        loaded.close()


def llm_engine(plan: str, threads: int, wait_log_s: float = 600.0) -> None:
    """One local LLM, loaded once, answers every judged file of an LLM engine plan; a
    watcher logs what it waits on when it has answered nothing for ``wait_log_s`` s."""
    from ..core import watchdog
    from .infer import announce_engine

    model, spec, cells = read_llm_plan(plan)
    announce_engine(plan, model, len(cells))
    set_threads(threads)
    t0 = time.perf_counter()
    watcher = watchdog.start(plan, wait_log_s)
    try:
        run_llm_engine(model, spec, cells)
    finally:
        watchdog.stop(watcher)
    log.info("engine %s: %d cell(s) judged (%.1f s)", plan, len(cells), time.perf_counter() - t0)


#: the LLM engine's command
COMMANDS: dict[str, Command] = {
    "llm-engine": Command(
        llm_engine,
        "one local LLM (a judge's, an extractor's), loaded once, judges every file of an "
        "LLM engine plan (resumable through the LLM cache)",
        (
            required("--plan", help="LLM engine plan JSON (rule engine_plan)"),
            THREADS,
            WAIT_LOG,
        ),
    ),
}

"""The engine job: one local model, loaded once, answers every cell dealt to it.

A *cell* is one (dataset, condition, prompt, shard) of the model: what an inference job
of an API model answers alone (:func:`vlmrobust.infer.run.run_inference`). A local
checkpoint (backends ``hf`` and ``vllm``) would pay its load for every cell, so its
cells of one phase are dealt to ``service.engines`` engines (``vlmrobust.plan.engines.engine_cells``)
and each engine is one job, as Snakemake runs any job: its own process, the model loaded
in it, its cells answered one after another (each with its own lock, resume cache, image
hashes and seeds, exactly as a job of its own), its shard files its outputs. There is no
server: nothing to start, find, trust, time out or stop, and on a cluster the engine is
one SLURM job on the model's GPUs (docs/architecture.md, "Engines").

Backends that batch requests across prompts of any length (``vllm``: one engine call
takes what waits) answer ``window`` cells together (``options.pool_cells``, default
32): their requests are pooled into each generate call, so one engine batches across
conditions; each request keeps its own seed and decoding, and its key is made unique
per cell for the call (two prompt settings share variant ids). ``hf`` answers each
cell's batches as that cell alone forms them, so a table does not depend on which cells
share an engine.

The plan file (rule ``engine_plan``, ``results/engines/<model>/phase<p>/engine<e>.json``)
names the model and the cells: each cell's job spec (what changes its outputs), manifest,
samples, first-stage context and shard file.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..clients.pool import RoundPool
from ..clients.vlm.base import Backend, Request, Result
from ..clients.vlm.checkpoint import import_transformers
from ..core import watchdog
from ..core.registry import INFERENCE_KEYS
from .run import Job, run_inference

log = logging.getLogger(__name__)

#: cells answered together by a backend that pools requests (options.pool_cells)
POOL_CELLS = 32


@dataclass(frozen=True)
class Cell:
    """One shard file of the engine: the job that answers it, and its inputs."""

    spec: dict[str, Any]
    manifest: str
    samples: str
    out: str
    context: str | None = None

    @property
    def job(self) -> Job:
        return Job(**self.spec)


def read_plan(path: str | Path) -> tuple[str, list[Cell]]:
    """The model and the cells of an engine plan file (module docstring)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        return str(data["model"]), [Cell(**cell) for cell in data["cells"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not an engine plan ({type(exc).__name__}: {exc})") from exc


def load_spec(model: str, cells: list[Cell]) -> dict[str, Any]:
    """The registry fields the backend loads the model from (``INFERENCE_KEYS``): the
    same for every cell (a prompt setting adds only what its prompt builder reads)."""
    specs = [{k: v for k, v in c.spec["model_spec"].items() if k in INFERENCE_KEYS} for c in cells]
    for cell, spec in zip(cells, specs, strict=True):
        if spec != specs[0]:
            raise ValueError(
                f"models.{model}: cell {cell.out} has another model spec than {cells[0].out}; "
                "an engine answers one registry entry"
            )
    return specs[0]


class _Shared:
    """The engine's model: loaded by the first cell that has something to generate. The
    cells run in threads, so loading holds a lock: the others wait for that one load
    (two threads had each started a load, or raced in transformers' lazy imports)."""

    def __init__(self, model: str, spec: dict[str, Any], backend: Backend | None = None):
        import threading

        self.model, self.spec, self.backend = model, spec, backend
        self.owned = backend is None
        self.lock = threading.Lock()

    def __call__(self) -> Backend:
        with self.lock:
            if self.backend is None:
                from ..clients.vlm import make_backend

                watchdog.waiting(f"loading models.{self.model}")
                t0 = time.perf_counter()
                self.backend = make_backend(self.model, self.spec)
                log.info(
                    "models.%s: loaded once for this engine (%.1f s)",
                    self.model,
                    time.perf_counter() - t0,
                )
        return self.backend

    def close(self) -> None:
        if self.owned and self.backend is not None:
            self.backend.close()


def run_engine(
    model: str,
    cells: list[Cell],
    backend: Backend | None = None,
    window: int | None = None,
) -> dict[str, dict[str, int]]:
    """Answer every cell with one model (module docstring); return each cell's counts
    by shard file. ``backend``: a loaded model to use (tests), else it is loaded here on
    the first cell with something to generate and closed at the end."""
    if not cells:
        return {}
    shared = _Shared(model, load_spec(model, cells), backend)
    stats: dict[str, dict[str, int]] = {}
    if backend is None:  # before the cells' threads (clients.vlm.checkpoint)
        import_transformers()
    try:
        from ..clients.vlm import backend_class

        owner = backend if backend is not None else backend_class(model, shared.spec)
        if getattr(owner, "pools_requests", False):
            size = window or int(shared.spec.get("options", {}).get("pool_cells", POOL_CELLS))
            for start in range(0, len(cells), size):
                stats.update(_pooled(cells[start : start + size], shared))
        else:
            for cell in cells:
                stats[cell.out] = _answer(cell, shared)
    finally:
        shared.close()
    return stats


def _answer(cell: Cell, opener: Any) -> dict[str, int]:
    t0 = time.perf_counter()
    out = run_inference(
        cell.job,
        Path(cell.manifest),
        Path(cell.samples),
        Path(cell.out),
        context=Path(cell.context) if cell.context else None,
        opener=opener,
    )
    log.info("%s: %s (%.1f s)", cell.out, out, time.perf_counter() - t0)
    return out


# --------------------------------------------------------------------------- pooling


class _Pool:
    """The cells of one window as threads (:class:`~vlmrobust.clients.pool.RoundPool`):
    each generate call of a cell waits until every live cell has asked (or finished),
    then one call of the model answers them all, in the order the cells asked."""

    def __init__(self, shared: _Shared, n: int):
        self.shared = shared
        self.rounds = RoundPool(self._generate, n)

    @property
    def backend(self) -> Backend:
        """The engine's model, loaded when a cell first has something to ask."""
        return self.shared()

    def client(self, index: int) -> _PoolClient:
        return _PoolClient(self, index)

    def ask(self, index: int, requests: list[Request]) -> dict[str, Result]:
        return self.rounds.ask([(index, r) for r in requests])

    def leave(self) -> None:
        self.rounds.leave()

    def _generate(self, asks: list[list[tuple[int, Request]]]) -> list[dict[str, Result]]:
        """One model call for a round: each request's key made unique per cell for the
        call (two prompt settings share variant ids), the results split back by cell."""
        pooled = [replace(r, key=f"{i}|{r.key}") for ask in asks for i, r in ask]
        got: dict[int, dict[str, Result]] = {i: {} for ask in asks for i, _ in ask}
        backend = self.backend
        watchdog.waiting(
            f"the model's answers to {len(pooled)} pooled request(s) of {len(asks)} cell(s)"
        )
        for result in backend.generate(pooled):
            i, key = result.key.split("|", 1)
            got[int(i)][key] = replace(result, key=key)
        return [got[ask[0][0]] if ask else {} for ask in asks]


class _PoolClient:
    """What a cell's run sees as its backend: the shared model, asked through the pool."""

    def __init__(self, pool: _Pool, index: int):
        self._pool, self._index = pool, index

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool.backend, name)

    def generate(self, requests: list[Request]) -> Iterator[Result]:
        got = self._pool.ask(self._index, list(requests))
        for r in requests:
            if r.key in got:
                yield got[r.key]

    def close(self) -> None:  # the engine closes the model
        return None


def _pooled(cells: list[Cell], shared: _Shared) -> dict[str, dict[str, int]]:
    """Answer ``cells`` together: one thread each, their requests pooled (``_Pool``)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = _Pool(shared, len(cells))

    def one(index: int, cell: Cell) -> dict[str, int]:
        try:
            return _answer(cell, lambda: pool.client(index))
        finally:
            pool.leave()

    with ThreadPoolExecutor(max_workers=len(cells)) as ex:
        futures = [ex.submit(one, i, c) for i, c in enumerate(cells)]
        return {c.out: f.result() for c, f in zip(cells, futures, strict=True)}

"""The engine job (vlmrobust.infer.engine): one model load for every cell dealt to it,
each cell resumable and checked as a job of its own, pooled requests that starve no
cell, and images checked against their manifest before the model sees them."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.clients.vlm.base import Backend, Request, Result
from vlmrobust.core.io import read_jsonl, sha256_file, write_jsonl
from vlmrobust.infer.engine import Cell, _Pool, _Shared, read_plan, run_engine

MODEL_SPEC = {"backend": "hf", "demo_seed": 1, "options": {"batch_size": 2}}


class Echo(Backend):
    """Answers every request with its key; records each generate call."""

    name = "echo"
    default_batch_size = 2

    def __init__(self, pools: bool = False):
        super().__init__("m", MODEL_SPEC)
        self.calls: list[list[str]] = []
        self.pools_requests = pools
        self.lock = threading.Lock()

    def generate(self, requests: list[Request]):
        with self.lock:
            self.calls.append([r.key for r in requests])
        for r in requests:
            yield Result(r.key, f"answer {r.key}", "stop")


def cell(tmp_path: Path, name: str, n: int, prompt: str = "default") -> Cell:
    """A cell of ``n`` one-image demo variants under ``tmp_path/name``."""
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    samples, variants = [], []
    for i in range(n):
        image = folder / f"{i}.png"
        Image.new("RGB", (8, 8), (i, 0, 0)).save(image)
        sid = f"s{i}"
        samples.append({"sample_id": sid, "dataset": "demo-x", "images": [str(image)],
                        "question": f"q{i}?", "answer": "yes", "answer_type": "yes/no"})  # fmt: skip
        variants.append({"variant_id": f"v{i}", "sample_id": sid, "dataset": "demo-x",
                         "condition": "clean", "perturbation": "none", "question": f"q{i}?",
                         "images": [str(image)],
                         "sha256": [sha256_file(image)], "params": {}})  # fmt: skip
    write_jsonl(folder / "samples.jsonl", samples)
    write_jsonl(folder / "manifest.jsonl", variants)
    spec = {"model": "m", "model_spec": MODEL_SPEC, "prompt": prompt, "adapter": "demo",
            "max_new_tokens": 8}  # fmt: skip
    return Cell(spec, str(folder / "manifest.jsonl"), str(folder / "samples.jsonl"),
                str(folder / "out" / "shard0of1.jsonl"))  # fmt: skip


def test_one_load_answers_every_cell_and_a_rerun_asks_nothing(tmp_path):
    cells = [cell(tmp_path, "a", 3), cell(tmp_path, "b", 2)]
    backend = Echo()
    stats = run_engine("m", cells, backend=backend)
    assert [s["generated"] for s in stats.values()] == [3, 2]
    # each cell's own batches (batch size 2): hf's numbers do not depend on the engine
    assert backend.calls == [["v0#0", "v1#0"], ["v2#0"], ["v0#0", "v1#0"]]
    for c in cells:
        rows = read_jsonl(c.out)
        assert [r["raw_text"] for r in rows] == [f"answer v{i}#0" for i in range(len(rows))]
        # the resume cache holds the same rows
        assert Path(c.out + ".partial").read_bytes() == Path(c.out).read_bytes()
    # Snakemake deletes an engine's outputs before it reruns it: the caches answer
    for c in cells:
        Path(c.out).unlink()
    again = Echo()
    stats = run_engine("m", cells, backend=again)
    assert again.calls == [] and [s["reused"] for s in stats.values()] == [3, 2]


def test_pooled_cells_share_each_call_and_none_starves(tmp_path):
    """A backend that pools (vLLM) answers the waiting cells in one call each round: a
    cell of 1 request is answered in the first call, not after a cell of 40."""
    big, small = cell(tmp_path, "big", 40), cell(tmp_path, "small", 1)
    backend = Echo(pools=True)
    run_engine("m", [big, small], backend=backend, window=2)
    first = backend.calls[0]
    assert "1|v0#0" in first  # the small cell's request, keyed by its cell for the call
    assert len(backend.calls) == 20  # the big cell's 40 in batches of 2
    assert len(read_jsonl(big.out)) == 40 and len(read_jsonl(small.out)) == 1
    # two prompt settings on the same variants: the same keys, kept apart in the call
    a, b = cell(tmp_path, "same", 2), cell(tmp_path, "same", 2, prompt="mcq")
    b = Cell(b.spec, b.manifest, b.samples, str(tmp_path / "same" / "mcq" / "shard0of1.jsonl"))
    backend = Echo(pools=True)
    run_engine("m", [a, b], backend=backend, window=2)
    assert sorted(backend.calls[0]) == ["0|v0#0", "0|v1#0", "1|v0#0", "1|v1#0"]


def test_a_changed_image_stops_the_cell_before_the_model_sees_it(tmp_path):
    c = cell(tmp_path, "a", 2)
    Image.new("RGB", (8, 8), (0, 0, 255)).save(tmp_path / "a" / "1.png")  # after its manifest
    backend = Echo()
    with pytest.raises(
        ValueError, match=r"variant 'v1': image .*1\.png has sha256 .* its manifest says"
    ):
        run_engine("m", [c], backend=backend)
    assert backend.calls == []


def test_nothing_to_generate_loads_no_model(tmp_path, monkeypatch):
    c = cell(tmp_path, "a", 2)
    run_engine("m", [c], backend=Echo())
    Path(c.out).unlink()
    loads = []
    monkeypatch.setattr(_Shared, "__call__", lambda self: loads.append(1))
    stats = run_engine("m", [c])
    assert loads == [] and stats[c.out]["reused"] == 2


def test_a_failed_pooled_call_fails_every_waiting_cell(tmp_path):
    class Broken(Echo):
        def generate(self, requests):
            raise RuntimeError("CUDA out of memory")

    a, b = cell(tmp_path, "a", 1), cell(tmp_path, "b", 1)
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        run_engine("m", [a, b], backend=Broken(pools=True), window=2)


def test_read_plan_names_a_bad_file(tmp_path):
    good = {"model": "m", "cells": [{"spec": {}, "manifest": "x", "samples": "y", "out": "z"}]}
    (tmp_path / "p.json").write_text(json.dumps(good))
    model, cells = read_plan(tmp_path / "p.json")
    assert model == "m" and cells[0].out == "z" and cells[0].context is None
    (tmp_path / "q.json").write_text(json.dumps({"cells": []}))
    with pytest.raises(ValueError, match=r"q\.json: not an engine plan \(KeyError"):
        read_plan(tmp_path / "q.json")


def test_pool_without_cells_asking_calls_nothing():
    backend = Echo(pools=True)
    pool = _Pool(_Shared("m", MODEL_SPEC, backend), 2)
    pool.leave()
    pool.leave()
    assert backend.calls == []


def test_cells_asking_at_once_load_the_model_once(monkeypatch):
    """Eight cell threads reaching the model together (each asks the backend for its
    revision first): one load, the others wait for it and get the same backend."""
    import time

    loads = []

    def slow_load(model, spec):
        loads.append(model)
        time.sleep(0.2)
        return object()

    monkeypatch.setattr("vlmrobust.clients.vlm.make_backend", slow_load)
    shared = _Shared("m", {"backend": "hf"})
    got, start = [], threading.Barrier(8)

    def cell():
        start.wait()
        got.append(shared())

    threads = [threading.Thread(target=cell) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == ["m"] and len(got) == 8 and len({id(b) for b in got}) == 1

"""Engines on a cluster (docs/architecture.md, "On a cluster"): which inference jobs each
engine answers, and how many engines a model gets when the cluster limits allocations."""

from __future__ import annotations

import contextlib
import os
from collections import Counter

import pytest

from vlmrobust.core.registry import model_resources
from vlmrobust.plan import RunPlan

from .conftest import REPO


@pytest.fixture(scope="module")
def paper() -> RunPlan:
    with contextlib.chdir(REPO):
        return RunPlan.load("config/paper.yaml")


def _engines(plan: RunPlan) -> dict[tuple[str, int, int], list[str]]:
    return {
        (model, phase, k): plan.engine_clients(model, phase, k)
        for model, spec in plan.models.items()
        if spec["backend"] in ("hf", "vllm")
        for phase in (0, 1)
        for k in range(min(plan.engines_of(model), len(plan.engine_jobs(model, phase))))
    }


def test_each_local_job_is_answered_by_exactly_one_engine(paper):
    engines = _engines(paper)
    assert len(engines) == len(paper.engine_files()) == 14  # 12 models, 2 with CRM's 2nd stage
    shards = Counter(s for clients in engines.values() for s in clients)
    local = [m for m, spec in paper.models.items() if spec["backend"] == "hf"]
    expected = {
        paper.shard_path(m, d, c, p, i, n)
        for m in local
        for phase in (0, 1)
        for d, c, p, i, n in paper.engine_jobs(m, phase)
    }
    assert set(shards) == expected and set(shards.values()) == {1}


def test_a_runtime_limit_splits_a_model_into_engines_that_fit(paper):
    """With cluster.max_runtime, no engine asks for more than the limit (its jobs'
    registry runtimes added up), and every job still has exactly one engine."""
    before = _engines(paper)
    paper.config["cluster"]["max_runtime"] = 2880  # two days
    try:
        after = _engines(paper)
        for (model, _, _), clients in after.items():
            runtime = model_resources(paper.registry[model])["runtime"]
            assert len(clients) * runtime <= 2880, (model, len(clients))
        assert sorted(s for c in after.values() for s in c) == sorted(
            s for c in before.values() for s in c
        )
        assert paper.engines_of("qwen3-vl-8b-thinking") == 12  # 45 jobs of 12 h
        assert paper.engines_of("llama-3.2-90b-vision") == 2  # 3 jobs a phase, 24 h each
    finally:
        paper.config["cluster"]["max_runtime"] = None


def test_jobs_a_killed_snakemake_left_are_cancelled_and_waited_for(tmp_path, monkeypatch):
    """core.workflow.cancel_orphans, with stand-in squeue and scancel: every live job
    started in the run's folder (8: a group job whose inner Snakemake rewrote its
    markers without the id, as seen on the test cluster) and every recorded one SLURM
    still runs (5, 7) is cancelled; another folder's job (9) is not; it returns once
    they are gone."""
    from vlmrobust.core.workflow import cancel_orphans

    run, other = tmp_path / "run", tmp_path / "other"
    run.mkdir()
    other.mkdir()
    queue = tmp_path / "queue"
    queue.write_text(f"5|{run}\n7|{run}\n8|{run}\n9|{other}\n")
    (tmp_path / "squeue").write_text(f"#!/bin/sh\ncat {queue}\n")
    (tmp_path / "scancel").write_text(
        f'#!/bin/sh\necho "$@" > {tmp_path}/cancelled\necho "9|{other}" > {queue}\n'
    )
    for tool in ("squeue", "scancel"):
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert cancel_orphans(run, ["7", "5", "3"], timeout=10) == ["5", "7", "8"]  # 3: gone
    assert (tmp_path / "cancelled").read_text().split() == ["5", "7", "8"]
    assert cancel_orphans(run, ["5", "7"]) == []  # nothing left to cancel

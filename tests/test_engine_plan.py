"""Engines on a cluster (docs/architecture.md, "On a cluster"): which inference jobs each
engine answers, and how many engines a model gets when the cluster limits allocations."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections import Counter

import pytest

from vlmrobust.core import paths
from vlmrobust.core.config import ConfigError, load_yaml
from vlmrobust.core.paths import path
from vlmrobust.plan import RunPlan, idis, inference
from vlmrobust.plan import engines as plan_engines

from .conftest import BIN, REPO, run


@pytest.fixture(scope="module")
def paper() -> RunPlan:
    with contextlib.chdir(REPO):
        return RunPlan.load("config/paper.yaml")


def _engines(plan: RunPlan) -> dict[tuple[str, int, str], list[str]]:
    return {
        (m, phase, k): plan_engines.engine_clients(plan, m, phase, k)
        for m, phase, k in plan_engines.engines(plan)
    }


def test_each_local_job_is_answered_by_exactly_one_engine(paper):
    """config/paper.yaml's balance block (every call of the run, judges included): 12
    local models, 30 engines of the first stage (Qwen3-VL-8B-Thinking 9, Intern-S1-mini
    5, GLM-4.1V and R1-OneVision-RL 4 each; the others 1) and 2 of CRM's second stage;
    the judges' LLM engines are planned apart (plan.engines.llm_engines)."""
    engines = _engines(paper)
    assert len(engines) == len(plan_engines.engine_files(paper)) == 32
    assert sum(1 for m, _, _ in engines if m == "qwen3-vl-8b-thinking") == 9
    shards = Counter(s for clients in engines.values() for s in clients)
    local = [m for m, spec in paper.models.items() if spec["backend"] in ("hf", "vllm")]
    expected = {
        path(paths.SHARD, model=m, dataset=d, condition=c, prompt=p, shard=i, shards=n)
        for m in local
        for phase in (0, 1)
        for d, c, p, i, n in plan_engines.engine_jobs(paper, m, phase)
    }
    assert set(shards) == expected and set(shards.values()) == {1}


def test_split_cells_give_every_engine_one_share_of_every_cell(paper):
    """service.split_cells: a cell of a model with 9 engines has 9 shards (the dataset's 1
    x 9), engine k answers shard k of each, so the engines' shares are equal; an API
    model's cells keep the dataset's shards."""
    model = "qwen3-vl-8b-thinking"
    cells = plan_engines.model_cells(paper, model, 0, "vllm")
    assert len(cells) == 45
    for k in range(9):
        mine = plan_engines.engine_cells(paper, model, 0, k)
        assert [(d, c, p) for d, c, p, _, _ in mine] == cells
        assert {(i, n) for *_, i, n in mine} == {(k, 9)}
    assert plan_engines.cell_shards(paper, "gpt-4o", "distract-bench") == 1
    assert plan_engines.shard_files(paper, model, "mathverse", "clean", "idis-math")[-1].endswith(
        "/mathverse/clean/idis-math/shard8of9.jsonl"
    )
    # each engine asks for its share of its cells' registry runtimes: 45 x 720 / 9
    assert plan_engines.engine_runtime(paper, model, 0, 0) == 45 * 720 // 9


def test_a_runtime_limit_splits_a_model_into_engines_that_fit(paper):
    """With cluster.max_runtime, no engine asks for more than the limit (its share of
    its cells' registry runtimes), and every job still has exactly one engine."""
    paper.config["cluster"]["max_runtime"] = 2880  # two days
    try:
        after = _engines(paper)
        for model, phase, k in after:
            assert plan_engines.engine_runtime(paper, model, phase, k) <= 2880, (model, phase, k)
        shards = Counter(s for c in after.values() for s in c)
        assert set(shards.values()) == {1}
        assert plan_engines.engines_of(paper, "qwen3-vl-8b-thinking") == 12  # 45 cells of 12 h
        assert (
            plan_engines.engines_of(paper, "llama-3.2-90b-vision") == 2
        )  # 3 cells a phase, 24 h each
    finally:
        paper.config["cluster"]["max_runtime"] = None


def test_engines_papers_answers_each_dataset_with_its_papers_engine(paper):
    """config `engines: papers`: Qwen3-VL-8B-Thinking (registry vllm) answers the
    corruption study, Distract-Bench and Idis-perception with transformers (engines hf0,
    hf1, ...) and Idis-math with vLLM; the job spec records the backend; VisArgs (no
    papers_engine) keeps the registry's; attention blocking loads hf either way."""
    papers = dataclasses.replace(paper, config={**paper.config, "engines": "papers"})
    model = "qwen3-vl-8b-thinking"
    assert inference.model_backends(papers, model) == ["vllm", "hf"]
    labels = {k for m, _, k in plan_engines.engines(papers) if m == model}
    assert labels == {str(k) for k in range(9)} | {f"hf{k}" for k in range(9)}
    hf_cells = {d for d, _, _ in plan_engines.model_cells(papers, model, 0, "hf")}
    assert "mathverse" not in hf_cells and {"imagenet9", "mmmu", "distract-bench"} <= hf_cells
    assert {d for d, _, _ in plan_engines.model_cells(papers, model, 0, "vllm")} == {"mathverse"}
    on_hf = inference.infer_spec(papers, model, "imagenet9", "idis-perception")["model_spec"]
    # the options transformers reads, less vLLM's requests per call (256)
    assert on_hf["backend"] == "hf" and on_hf["options"] == {
        "min_pixels": 65536,
        "max_pixels": 4194304,
        "generation_config": "checkpoint",
    }
    assert (
        inference.infer_spec(papers, model, "mathverse", "idis-math")["model_spec"]["backend"]
        == "vllm"
    )
    assert plan_engines.engine_plan(papers, model, 0, "hf2")["engine"] == "hf2"
    assert inference.cell_backend(papers, "llama-3.2-90b-vision", "visargs") == "hf"
    assert inference.cell_backend(papers, "qwen2.5-vl-7b", "visargs") == "vllm"
    with pytest.raises(ValueError, match="no engine named 'tpu1'"):
        plan_engines.engine_backend(papers, model, "tpu1")
    spec = idis.blocking_spec(paper, "qwen3-vl-8b-thinking", "imagenet9", "idis-perception")
    assert spec["infer"]["model_spec"]["backend"] == "hf"
    assert "max_model_len" not in spec["infer"]["model_spec"]["options"]


def _refused(config: dict) -> str:
    with contextlib.chdir(REPO), pytest.raises(ConfigError) as error:
        RunPlan.from_config(config)
    return str(error.value)


def test_engines_of_a_model_outside_the_run_are_refused_naming_the_key():
    """config/paper.yaml's balance block with a typo: before, the misspelt model was
    ignored and the real one silently got service.default_engines."""
    config = load_yaml(REPO / "config/paper.yaml")
    engines = config["service"]["engines"]
    engines["qwen2.5-vl-7b-instuct"] = engines.pop("qwen2.5-vl-7b")
    message = _refused(config)
    assert message.startswith(
        "config: service.engines.qwen2.5-vl-7b-instuct: 'qwen2.5-vl-7b-instuct' is not a "
        "model of the run (nor of config/models.yaml), so this count would be ignored. "
        "The run's models with engines (its `models` answered by a local checkpoint, "
        "backends hf and vllm): qwen2.5-vl-7b, r1-onevision-7b, "
    )
    assert message.endswith(
        "llama-3.2-90b-vision; the local LLMs its judges name: gpt-oss-120b, qwen3.5-27b"
    )
    assert "gpt-4o" not in message and "deepseek" not in message  # API models: no engines


def test_snakemake_refuses_a_misspelt_engine_count_before_any_job(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text((REPO / "config/config.yaml").read_text() + "service:\n  engines:\n"
                      "    demo-base: 2\n    demo-reasoing: 2\n")  # fmt: skip
    cmd = [str(BIN / "snakemake"), "-n", "--cores", "1", "--configfile", str(config)]
    proc = run(cmd, REPO, check=False, timeout=600)
    assert proc.returncode != 0
    assert (
        "config: service.engines.demo-reasoing: 'demo-reasoing' is not a model of the run "
        "(nor of config/models.yaml), so this count would be ignored. The run's models with "
        "engines (its `models` answered by a local checkpoint, backends hf and vllm): "
        "demo-base, demo-reasoning; the local LLMs its judges name: none"
    ) in proc.stdout + proc.stderr


@pytest.mark.parametrize("model", ["gpt-4o", "deepseek-v3.2"])
def test_engines_of_a_model_answered_through_an_api_are_refused(model):
    """An API model of the run (a VLM of `models`, an extractor's LLM) has no engine: its
    count would change nothing."""
    config = load_yaml(REPO / "config/paper.yaml")
    config["service"]["engines"][model] = 2
    assert _refused(config).startswith(
        f"config: service.engines.{model}: {model!r} is answered through an API (backend "
        "openai), which has no engine jobs, so this count would change nothing; remove it."
    )


def test_a_judges_local_llm_has_engines_only_while_a_judge_names_it():
    config = load_yaml(REPO / "config/paper.yaml")
    config["judge"]["mathverse"] = {"backend": "offline"}
    assert _refused(config).startswith(
        "config: service.engines.gpt-oss-120b: 'gpt-oss-120b' is not a model of the run "
        "(it is in config/models.yaml, but neither in `models` nor named by a judge)"
    )


def test_the_stand_in_runs_of_paper_yaml_keep_valid_engines(tmp_path):
    """The stand-ins (vlmrobust demo-standins) keep every model of config/paper.yaml and
    its judges' local LLMs, so its balance block stays valid: whole, and cut to one Idis
    dataset, where gpt-oss-120b (the MathVerse judge) has no file to judge but is still
    named by the judge."""
    from vlmrobust_demo.standins import SHARED_FOLDER, write_stand_ins

    for folder in SHARED_FOLDER.values():
        (tmp_path / "shared" / folder).mkdir(parents=True, exist_ok=True)
    paper = load_yaml(REPO / "config/paper.yaml")["service"]["engines"]
    with contextlib.chdir(REPO):
        for only in (None, ["imagenet9"]):
            out = tmp_path / f"standins-{only}"
            config, _ = write_stand_ins("config/paper.yaml", out, tmp_path / "shared", only=only)
            plan = RunPlan.load(config)
            assert plan.config["service"]["engines"] == paper
    assert plan_engines.llm_models(plan) == ["qwen3.5-27b"]


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

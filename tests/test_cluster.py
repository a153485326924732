"""The papers' run, reduced, on a real one-node SLURM cluster that declares 2 GPUs.

config/paper.yaml's stand-ins (tests/cluster_run.py: a demo checkpoint per model with
the model's registry resources, `rows` samples per dataset) cut down to two models
(Qwen2.5-VL-7B and R1-OneVision-7B: both answer ChartQA, so their engines run at once;
Qwen2.5-VL-7B also answers VisArgs, whose second CRM stage is a second engine) and two
datasets (ChartQA: the corruption study; VisArgs: the masking study), through the
project's `--profile slurm` with GPU requests kept (tests/slurm-gpu). What the
scheduler recorded while it ran, and the run's own logs, must show: one SLURM job per
engine, the GPUs each asked for and got, distinct CUDA_VISIBLE_DEVICES for engines that
ran at once, every cell answered inside its engine's allocation by the model loaded
there once, every table and figure of the two studies, nothing left running.
benchmarks/bench_cluster.py runs the whole stand-in run, with faults, and measures it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from .cluster_run import (
    CONFIG,
    engine_jobs,
    engine_runs,
    load_records,
    missing_data,
    prepare,
    start,
    study_targets,
    submissions,
)
from .conftest import BIN, job_processes, run
from .slurm_cluster import (
    JobRecorder,
)
from .test_slurm import running_cluster
from .vllm_env import require_vllm, vllm_cli, vllm_env_vars

pytestmark = [pytest.mark.slurm, pytest.mark.vllm]

MODELS = ["qwen2.5-vl-7b", "r1-onevision-7b"]
# MathVerse (clean, answered by R1-OneVision-7B) brings the judges' local LLMs: the
# MathVerse judge and the Qwen3.5-27B attribute extractor, each an LLM engine job
DATASETS = ["chartqa", "visargs", "mathverse"]
JUDGE_MODEL = "r1-onevision-7b"
# (model, engine) of the LLM engines: config/paper.yaml's local judges, as text twins
LLM_ENGINES = [("gpt-oss-120b", 0), ("qwen3.5-27b", 0)]
# Qwen2.5-VL-7B on 2 engines: config/paper.yaml's service.split_cells splits each of its
# cells in 2, engine k answering shard k of every cell
ENGINE_COUNTS = {"qwen2.5-vl-7b": 2}
# (model, phase, engine): the engines of the cut-down run
ENGINES = [
    ("qwen2.5-vl-7b", 0, 0),
    ("qwen2.5-vl-7b", 0, 1),
    ("qwen2.5-vl-7b", 1, 0),
    ("qwen2.5-vl-7b", 1, 1),
    ("r1-onevision-7b", 0, 0),
]


@pytest.fixture(scope="module")
def gpu_cluster():
    """A private one-node cluster declaring 2 stand-in GPUs (and room for two 64 GB
    engines beside the data jobs)."""
    yield from running_cluster(gpus=2, cpus=8, memory_mb=300_000)


@pytest.fixture(scope="module")
def cluster_run(gpu_cluster, tmp_path_factory):
    """The reduced stand-in run, start to end, with the scheduler's records."""
    reason = missing_data(DATASETS)
    if reason:
        pytest.skip(reason)
    require_vllm()  # the paper's Qwen2.5-VL models answer through vLLM (their twins here)
    root = tmp_path_factory.mktemp("cluster")
    workdir = root / "repo"
    sizes = {"rows": 2, "max_new_tokens": 16, "max_draws": 2}
    prepare(
        workdir, sizes, models=MODELS, datasets=DATASETS, engines=ENGINE_COUNTS,
        judged_by=JUDGE_MODEL,
    )  # fmt: skip
    records, log = root / "records.jsonl", root / "snakemake.log"
    with JobRecorder(gpu_cluster, records, interval=0.5):
        proc = start(gpu_cluster, workdir, log)
        try:
            code = proc.wait(timeout=1200)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    text = log.read_text(errors="replace")
    assert code == 0, text[-6000:] + gpu_cluster.log_tail()
    return workdir, text, load_records(records), gpu_cluster


def test_one_slurm_job_per_engine_with_the_models_gpus(cluster_run):
    workdir, log, records, _ = cluster_run
    engines = engine_jobs(log, records, workdir)
    assert sorted(e for job in engines.values() for e in job.engines) == ENGINES
    assert all(len(job.engines) == 1 for job in engines.values())  # one engine each
    registry = yaml.safe_load((workdir / "standins" / "models.yaml").read_text())["models"]
    for job in engines.values():
        model = job.engines[0][0]
        gpus = registry[model]["resources"]["gpu"]
        assert gpus == 1  # the paper's 7B models: one GPU each
        assert registry[model]["demo_twin"] == "qwen2.5-vl"  # the family's own classes
        assert registry[model]["backend"] == "vllm"
        assert job.asked_gpus == gpus, job.records[-1]
        assert len(job.got_gpus) == gpus, job.records
        assert job.last("JobState") == "COMPLETED"


def test_engines_at_once_hold_distinct_devices(cluster_run):
    workdir, log, records, _ = cluster_run
    engines = engine_jobs(log, records, workdir)
    for job in engines.values():  # the devices the engine saw are the ones SLURM gave
        assert job.devices == ",".join(map(str, job.got_gpus))
    overlapping = [
        (a, b)
        for a, b in itertools.combinations(engines.values(), 2)
        if a.span()[0] < b.span()[1] and b.span()[0] < a.span()[1]
    ]
    assert overlapping, "no two engines ran at once (the two phase-0 engines should)"
    for a, b in overlapping:
        assert not set(a.got_gpus) & set(b.got_gpus), (a.job_id, b.job_id)


def test_every_cell_was_answered_inside_its_engines_allocation(cluster_run):
    """Each engine's log: its SLURM job, one model load, and every cell of its plan
    written there (the shard files its rule declares)."""
    workdir, log, records, _ = cluster_run
    engines = engine_jobs(log, records, workdir)
    runs = [r for r in engine_runs(workdir) if r["engine"][0] in MODELS]
    assert sorted(r["engine"] for r in runs) == ENGINES  # each ran once
    for job in engines.values():
        model, phase, k = job.engines[0]
        plan = json.loads(
            (workdir / f"results/engines/{model}/phase{phase}/engine{k}.json").read_text()
        )
        cells = sorted(c["out"] for c in plan["cells"])
        assert job.inner == cells and cells, job
        assert job.loads == 1, job  # the model loaded once, in the allocation
        for shard in cells:
            assert (workdir / shard).is_file()


def test_every_job_went_through_slurm_or_beside_snakemake(cluster_run):
    """The data steps, the checkpoints and one job per engine were submitted; the short
    steps (config cluster.local_rules) ran beside Snakemake."""
    _, log, records, cluster = cluster_run
    submitted = submissions(log)
    folders = [next(p for p in path.parts if p.startswith("rule_")) for _, path in submitted]
    rules = Counter("rule_engine" if f.startswith("rule_engine_") else f for f in folders)
    rules = Counter(
        "rule_llm_engine" if f.startswith("rule_llm_engine_") else f for f in rules.elements()
    )
    assert rules == {
        "rule_demo_data": 1,
        "rule_demo_idis": 1,  # MathVerse's demo slice
        "rule_demo_model": len(MODELS) + len(LLM_ENGINES),  # the judges' twins too
        "rule_samples": len(DATASETS),
        # ChartQA clean, corrupt; VisArgs clean and two masks; MathVerse clean
        "rule_variants": 6,
        "rule_engine": len(ENGINES),
        "rule_llm_engine": len(LLM_ENGINES),
    }
    states = cluster.job_states([job_id for job_id, _ in submitted])
    assert set(states.values()) == {"COMPLETED"}, states
    assert set(records["jobs"]) == {job_id for job_id, _ in submitted}  # nothing else ran
    assert "localrule score:" in log and "localrule table:" in log


def test_every_table_and_figure_is_made_and_nothing_is_left(cluster_run):
    workdir, _, _, cluster = cluster_run
    targets = study_targets(workdir)
    assert any("/corruption/" in t for t in targets) and any("/masking/" in t for t in targets)
    missing = [t for t in targets if not (workdir / t).is_file()]
    assert missing == []
    assert not cluster.run("squeue", "--noheader").strip()
    end = time.monotonic() + 15
    while job_processes(workdir) and time.monotonic() < end:
        time.sleep(0.2)
    assert job_processes(workdir) == []
    # each shard's resume cache holds exactly its rows
    for shard in Path(workdir, "results/outputs").rglob("shard*.jsonl"):
        partial = shard.with_name(shard.name + ".partial")
        assert partial.read_bytes() == shard.read_bytes(), shard
    assert (workdir / CONFIG).is_file()


def test_a_local_dry_run_after_the_cluster_run_has_nothing_to_do(cluster_run):
    """The files the cluster made are the ones a local run makes: nothing to redo."""
    workdir = cluster_run[0]
    cmd = [str(BIN / "snakemake"), "--cores", "2", "-n", "--configfile", CONFIG]
    dry = run(cmd, workdir, env={"PYTHONPATH": str(workdir / "workflow")})
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]


def test_one_cell_split_over_two_engines_gives_a_single_engines_rows(cluster_run, tmp_path):
    """Qwen2.5-VL-7B's two engines each answered one shard of each of its cells (the
    ChartQA corrupt cell among them); one engine answering the whole cells afterwards,
    outside the cluster, gives the same rows as the gathered outputs (the latency
    aside)."""
    from vlmrobust.plan import RunPlan
    from vlmrobust.plan import engines as plan_engines

    workdir = cluster_run[0]
    model = "qwen2.5-vl-7b"
    plans = [
        json.loads((workdir / f"results/engines/{model}/phase0/engine{k}.json").read_text())
        for k in (0, 1)
    ]
    for k, plan in enumerate(plans):
        shards = {(c["spec"]["shard"], c["spec"]["shards"]) for c in plan["cells"]}
        assert shards == {(k, 2)}
        assert any("/chartqa/corrupt/" in c["out"] for c in plan["cells"])
    with contextlib.chdir(workdir):
        run_plan = RunPlan.load(CONFIG)
        run_plan.config["service"]["engines"][model] = 1  # one engine, whole cells
        single = plan_engines.engine_plan(run_plan, model, 0, 0)
    outputs = {}
    for i, cell in enumerate(single["cells"]):
        assert (cell["spec"]["shard"], cell["spec"]["shards"]) == (0, 1)
        gathered = cell["out"].replace("/shard0of1.jsonl", ".jsonl")
        cell["out"] = outputs[gathered] = str(tmp_path / f"cell{i}.jsonl")
    plan_file = tmp_path / "single.json"
    plan_file.write_text(json.dumps(single))
    env = {**vllm_env_vars(), "PYTHONPATH": str(workdir / "workflow")}
    done = subprocess.run(
        [*vllm_cli(), "infer-engine", "--plan", str(plan_file), "--threads", "2"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]

    def rows(path):
        lines = Path(path).read_text().splitlines()
        found = [json.loads(line) for line in lines if line.strip()]
        return sorted(({**r, "latency_s": None} for r in found), key=lambda r: r["key"])

    assert any("/chartqa/corrupt/" in g for g in outputs)
    for gathered, alone in outputs.items():
        assert rows(workdir / gathered) == rows(alone), gathered


def test_the_judges_local_llms_ran_as_engine_jobs_on_their_gpus(cluster_run):
    """config/paper.yaml's local judges (the MathVerse judge, the Qwen3.5-27B extractor):
    one SLURM job per LLM engine, on the GPU its registry entry asks for, the model loaded
    once there, every judged file of its plan written."""
    workdir, log, records, _ = cluster_run
    runs = {r["engine"][0]: r for r in engine_runs(workdir) if r["engine"][0] not in MODELS}
    assert sorted((m, r["engine"][2]) for m, r in runs.items()) == LLM_ENGINES
    jobs = dict(submissions(log))
    registry = yaml.safe_load((workdir / "standins" / "models.yaml").read_text())["models"]
    for model, got in runs.items():
        assert registry[model]["kind"] == "llm" and registry[model]["resources"]["gpu"] == 1
        assert got["job"] in jobs and "rule_llm_engine_" in str(jobs[got["job"]])
        assert got["loads"] == 1 and got["calls"], got  # loaded once; pooled calls made
        states = [r.get("JobState") for r in records["jobs"].get(got["job"], [])]
        assert states and states[-1] == "COMPLETED", states
        plan = json.loads((workdir / f"results/engines/{model}/phase0/engine0.json").read_text())
        assert plan["cells"] and all((workdir / c["out"]).is_file() for c in plan["cells"])
    steps = {json.loads((workdir / f"results/engines/{m}/phase0/engine0.json").read_text())
             ["cells"][0]["step"] for m, _ in LLM_ENGINES}  # fmt: skip
    assert steps == {"mathverse", "attributes"}


def test_a_judge_engines_rows_equal_the_same_model_served(cluster_run, tmp_path):
    """The MathVerse judge's rows from its LLM engine equal those of the same twin served
    by `vlmrobust vllm-serve` and asked through `backend: openai` (a fresh cache, no
    retries), every field but what names the transport: `judge` (vllm/… against
    openai/…) and, in a failed call's `error`, the backend, the cache key and the
    attempts before the reason (the reason itself is compared)."""
    import socket

    workdir = cluster_run[0]
    model = "gpt-oss-120b"
    plan = json.loads((workdir / f"results/engines/{model}/phase0/engine0.json").read_text())
    cell = next(c for c in plan["cells"] if c["step"] == "mathverse")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**vllm_env_vars(), "PYTHONPATH": str(workdir / "workflow")}
    serve = [*vllm_cli(), "vllm-serve", "--config", CONFIG, "--model", model, "--port", str(port)]
    serve_log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - kept by the server
    server = subprocess.Popen(
        serve,
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=serve_log,
        start_new_session=True,
    )
    serve_log.close()
    try:
        _wait_for(port, server, tmp_path / "serve.log")
        served = {
            "backend": "openai", "model": model, "base_url": f"http://127.0.0.1:{port}/v1",
            "api_key_env": None, "temperature": cell["spec"]["temperature"],
            "max_tokens": cell["spec"]["max_tokens"], "cache_dir": str(tmp_path / "cache"),
            "options": {"max_retries": 0},
        }  # fmt: skip
        out = tmp_path / "served.jsonl"
        cmd = [str(BIN / "vlmrobust"), "judge-mathverse", "--spec", json.dumps(served),
               "--outputs", cell["outputs"], "--samples", cell["samples"], "--out", str(out)]  # fmt: skip
        done = subprocess.run(cmd, cwd=workdir, env={**env, "PATH": f"{BIN}:/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)

    transport = re.compile(r"\w+ \S+ call [0-9a-f]{12} failed after 1 attempt \([^)]*\): ")

    def rows(path):
        found = [json.loads(line) for line in Path(path).read_text().splitlines()]
        for r in found:
            r["judge"] = None
            r["error"] = transport.sub("", r["error"]) if r["error"] else None
        return found

    engine_rows = rows(workdir / cell["out"])
    assert engine_rows and rows(out) == engine_rows
    print("judged rows compared:", [(r["method"], r["error"]) for r in engine_rows])
    assert {json.loads(x)["judge"] for x in (workdir / cell["out"]).read_text().splitlines()} == {
        f"vllm/{model}"
    }


def _wait_for(port: int, server, log: Path, timeout: float = 240) -> None:
    """Until the server answers /v1/models (or it died: its log in the message)."""
    import urllib.request

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.poll() is not None:
            raise AssertionError(f"the server ended: {log.read_text()[-3000:]}")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return
        time.sleep(1)
    raise AssertionError(f"the server did not start: {log.read_text()[-3000:]}")

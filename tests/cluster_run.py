"""The papers' run on the test cluster, and what the scheduler and the run's logs say.

Shared by tests/test_cluster.py (a reduced run in CI) and benchmarks/bench_cluster.py
(the whole of config/paper.yaml at small size, with faults):

- :func:`prepare` copies the working tree to a folder and writes there the stand-ins of
  config/paper.yaml (``vlmrobust demo-standins``: a demo checkpoint per model with the
  model's registry resources, data from the demo and the real-data folder
  (docs/real-data.md), ``rows`` samples
  per dataset), optionally cut down to some models and datasets;
- :func:`start` runs Snakemake there as a cluster user types it, ``--profile slurm``
  plus the test cluster's overlay ``tests/slurm-gpu`` (GPU requests kept), against a
  cluster of tests/slurm_cluster.py that declares stand-in GPUs;
- the evidence functions read back what happened: the SLURM jobs Snakemake submitted
  (its log), the scheduler's records (tests/slurm_cluster.py ``JobRecorder``), and from
  each engine's own log (``logs/engines/<model>/phase<p>/engine<e>.log``) the SLURM job
  it ran in, its ``CUDA_VISIBLE_DEVICES``, its model loads and its cells.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from vlmrobust.core.paths import real_data

from .conftest import BIN, REPO, copy_repo
from .slurm_cluster import SlurmCluster, gpu_indices, read_records
from .vllm_env import VLLM_ENV

SHARED_DATA = real_data(REPO)
GPU_PROFILE = REPO / "tests" / "slurm-gpu"
CONFIG = "standins/config.yaml"
# "Job 3 has been submitted with SLURM jobid 7 (log: /.../slurm_logs/<rule or group>/7.log)."
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (.+?)\)\.?$")
# "engine results/engines/<model>/phase<p>/engine<e>.json: models.<model>, N cell(s),
#  runs in SLURM job J on HOST, CUDA_VISIBLE_DEVICES='0'" (an engine job's first line)
ENGINE_START = re.compile(
    r"engine results/engines/([^/\s]+)/phase(\d+)/engine(\d+)\.json: models\.\S+, (\d+) "
    r"cell\(s\)(?:, runs in SLURM job (\d+)(?: step \S+)? on \S+, CUDA_VISIBLE_DEVICES='([^']*)')?"
)
LOADED = re.compile(
    r"^(\S+ \S+) INFO \S+: models\.(\S+): loaded once for this engine \(([\d.]+) s\)", re.M
)
GENERATED = re.compile(r"^(\S+ \S+) INFO \S+: generated (\d+) requests in ([\d.]+) s", re.M)
CELL_DONE = re.compile(r"^\S+ \S+ INFO \S+: (results/outputs/\S+\.jsonl): \{", re.M)


#: the stand-ins' datasets read from the real-data folder, and the folder each needs
SHARED_NEEDS = {"mathvision": "mathvision/data", "logicvista": "logicvista/data"}


def missing_data(datasets: list[str] | None = None) -> str | None:
    """Why the real MATH-V and LogicVista that ``datasets`` (None: every dataset of the
    stand-ins) read are not here; None when they are, or when none is read."""
    for name, folder in SHARED_NEEDS.items():
        if datasets is not None and name not in datasets:
            continue
        if not (SHARED_DATA / folder).is_dir():
            return f"the real data is not at {SHARED_DATA / folder} (docs/real-data.md)"
    return None


def cut_down(
    config: dict, models: list[str], datasets: list[str], engines: dict[str, int] | None = None
) -> dict:
    """The stand-in run with only these models and datasets (the reduced CI run), each
    model with ``engines`` engines where given (the configuration's otherwise)."""
    config["models"] = list(models)
    service = config.setdefault("service", {})
    service["engines"] = {
        m: (engines or {}).get(m, service.get("engines", {}).get(m, 1)) for m in models
    }
    config["datasets"] = {d: config["datasets"][d] for d in datasets}
    for spec in config["datasets"].values():
        if spec.get("models"):
            spec["models"] = [m for m in spec["models"] if m in models]
    used = {c for spec in config["datasets"].values() for c in spec["conditions"]}
    config["conditions"] = {c: v for c, v in config["conditions"].items() if c in used}
    if not any(spec.get("adapter") == "constructed" for spec in config["datasets"].values()):
        config.pop("construct", None)
    attributes = config.get("judge", {}).get("attributes") or {}
    if attributes.get("datasets") is not None:
        attributes["datasets"] = [d for d in attributes["datasets"] if d in datasets]
    blocking = config.get("idis", {}).get("blocking")
    if blocking:
        blocking["models"] = [m for m in blocking["models"] if m in models]
        blocking["conditions"] = [c for c in blocking["conditions"] if c in used]
        if blocking.get("datasets"):
            blocking["datasets"] = [d for d in blocking["datasets"] if d in datasets]
    return config


def with_judged_math(config: dict, model: str) -> dict:
    """The reduced run's Idis-math: MathVerse's clean condition answered by ``model`` (the
    stand-ins' Idis models are not in the reduced run), judged by the stand-in twins of
    config/paper.yaml's local LLMs: the MathVerse judge (gpt-oss-120b) and the attribute
    extractor qwen3.5-27b, each answered by an LLM engine job of its own."""
    spec = config["datasets"]["mathverse"]
    spec["models"], spec["conditions"] = [model], ["clean"]
    used = {c for ds in config["datasets"].values() for c in ds["conditions"]}
    config["conditions"] = {c: v for c, v in config["conditions"].items() if c in used}
    return config


def prepare(
    workdir: Path,
    sizes: dict[str, int],
    models: list[str] | None = None,
    datasets: list[str] | None = None,
    engines: dict[str, int] | None = None,
    judged_by: str | None = None,
) -> Path:
    """A copy of the working tree in ``workdir`` with the stand-in run at CONFIG
    (``sizes``: rows, max_new_tokens, max_draws of ``vlmrobust demo-standins``; ``engines``:
    engines per model of a cut-down run), its vLLM engines in the test's vLLM
    environment (tests/vllm_env.py)."""
    copy_repo(workdir)
    cmd = [str(BIN / "vlmrobust"), "demo-standins", "--out", "standins"]
    cmd += ["--shared", str(SHARED_DATA)]
    if datasets is not None:
        cmd += ["--datasets", *datasets]
    for key, value in sizes.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    env = {**os.environ, "PYTHONPATH": str(workdir / "workflow")}
    subprocess.run(cmd, cwd=workdir, env=env, check=True, capture_output=True, timeout=120)
    path = workdir / CONFIG
    config = yaml.safe_load(path.read_text())
    if models is not None:
        config = cut_down(config, models, datasets or list(config["datasets"]), engines)
    if judged_by is not None:  # (``judged_by``: the model answering Idis-math)
        config = with_judged_math(config, judged_by)
    config["environments"] = {"vllm": str(VLLM_ENV)}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return workdir / CONFIG


def run_env(cluster: SlurmCluster, workdir: Path) -> dict[str, str]:
    """The environment of a Snakemake run in ``workdir`` on ``cluster``: the SLURM tools,
    this interpreter's scripts, the copy's own package."""
    env = cluster.env
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(workdir / "workflow")
    return env


def snakemake_cmd(*args: str, cores: int = 2) -> list[str]:
    """Snakemake as a cluster user types it, on the test cluster with stand-in GPUs."""
    cmd = [str(BIN / "snakemake"), "--cores", str(cores), "--profile", "slurm"]
    return [*cmd, "--profile", str(GPU_PROFILE), "--configfile", CONFIG, *args]


def start(cluster: SlurmCluster, workdir: Path, log: Path, *args: str) -> subprocess.Popen:
    """Start Snakemake (its stdout and stderr to ``log``, appended) in its own session."""
    out = open(log, "ab")  # noqa: SIM115 - kept by the child
    try:
        return subprocess.Popen(
            snakemake_cmd(*args),
            cwd=workdir,
            env=run_env(cluster, workdir),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        out.close()


def unlock(cluster: SlurmCluster, workdir: Path) -> None:
    """`snakemake --unlock`: what a Snakemake killed with -9 leaves for the next one."""
    subprocess.run(
        snakemake_cmd("--unlock"), cwd=workdir, env=run_env(cluster, workdir), check=True,
        capture_output=True, timeout=300,
    )  # fmt: skip


def study_targets(workdir: Path) -> list[str]:
    """Every table, figure and page (and metrics file) the run's studies make."""
    sys.path.insert(0, str(workdir / "workflow"))
    from vlmrobust.plan import RunPlan
    from vlmrobust.studies import STUDIES

    with contextlib.chdir(workdir):
        plan = RunPlan.load(CONFIG)
        return [p for study in STUDIES.values() for p in study.targets(plan)]


# --------------------------------------------------------------------- evidence


@dataclass
class Engine:
    """One engine job as the scheduler and its own log show it."""

    job_id: str
    engines: list[tuple[str, int, int]]  # the (model, phase, engine) it answered
    inner: list[str]  # the shard files it wrote (its log)
    loads: int = 0  # model loads in it (its log)
    devices: str | None = None  # its CUDA_VISIBLE_DEVICES (its log)
    records: list[dict] = field(default_factory=list)  # the scheduler's, in time order

    @property
    def asked_gpus(self) -> int:
        m = re.search(r"gpu:(\d+)", self.last("TresPerJob"))
        return int(m.group(1)) if m else 0

    @property
    def got_gpus(self) -> list[int]:
        """The GPU indices the job held (from its records while it ran)."""
        for rec in reversed(self.records):
            if gpu_indices(rec.get("GRES", "")):
                return gpu_indices(rec["GRES"])
        return []

    def last(self, key: str) -> str:
        return next((r[key] for r in reversed(self.records) if r.get(key)), "")

    def span(self) -> tuple[float, float]:
        """(start, end) in unix time from the scheduler's last record."""
        return _time(self.last("StartTime")), _time(self.last("EndTime"))


def _time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() if text and text[0].isdigit() else 0.0


def submissions(log_text: str) -> list[tuple[str, Path]]:
    """(SLURM job id, SLURM log) of every job a Snakemake log says it submitted."""
    return [
        (m.group(1), Path(m.group(2))) for m in map(SUBMITTED.search, log_text.splitlines()) if m
    ]


def engine_runs(workdir: Path) -> list[dict]:
    """Each run of an engine job its log records (a rerun appends): the engine, the
    SLURM job and devices, its cells, the model loads and the shard files it wrote."""
    out = []
    for log in sorted((workdir / "logs" / "engines").rglob("*.log")):
        text = log.read_text(errors="replace")
        starts = list(ENGINE_START.finditer(text))
        for i, m in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
            out.append(
                {
                    "engine": (m.group(1), int(m.group(2)), int(m.group(3))),
                    "cells": int(m.group(4)),
                    "job": m.group(5),
                    "devices": m.group(6),
                    "loads": len(LOADED.findall(text, m.end(), end)),
                    "load_s": [float(x[2]) for x in LOADED.findall(text, m.end(), end)],
                    "calls": [
                        (_stamp(g.group(1)), int(g.group(2)), float(g.group(3)))
                        for g in GENERATED.finditer(text, m.end(), end)
                    ],
                    "written": CELL_DONE.findall(text, m.end(), end),
                }
            )
    return out


def engine_jobs(log_text: str, records: dict, workdir: Path) -> dict[str, Engine]:
    """The submitted engine jobs, by SLURM job id, with what their logs say."""
    runs = {r["job"]: r for r in engine_runs(workdir) if r["job"]}
    out = {}
    for job_id, slurm_log in submissions(log_text):
        if not any(part.startswith("rule_engine_") for part in slurm_log.parts):
            continue
        run = runs.get(job_id, {})
        engines = [run["engine"]] if run else []
        out[job_id] = Engine(
            job_id,
            engines,
            sorted(run.get("written", [])),
            run.get("loads", 0),
            run.get("devices"),
            records["jobs"].get(job_id, []),
        )
    return out


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def load_records(path: Path) -> dict:
    return read_records(path) if path.exists() else {"jobs": {}, "node": []}

"""Jobs of the inference stage: one model on one manifest, the gathering of its shards,
a vLLM server for a registry entry, and the attention-blocking re-answers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..core.commands import Command, arg, required
from . import json_object, log, set_threads
from .args import MANIFEST, OUT_OUTPUTS, SAMPLES, THREADS, WAIT_LOG, spec


def infer(
    spec: str,
    manifest: str,
    samples: str,
    context: str | None,
    threads: int,
    out: str,
) -> None:
    """One model (the job ``spec``) on one variant manifest, resumable (an API model's
    cell; a local model's cells are answered by its engine job, :func:`infer_engine`)."""
    from ..core.workflow import allocation
    from ..infer.run import Job, run_inference

    job = Job(**json_object(spec))
    where = allocation()
    if where:
        log.info("%s: runs in %s", out, where)
    set_threads(threads)
    t0 = time.perf_counter()
    stats = run_inference(
        job,
        Path(manifest),
        Path(samples),
        Path(out),
        context=Path(context) if context else None,
    )
    log.info("%s: %s (%.1f s)", out, stats, time.perf_counter() - t0)


def infer_engine(plan: str, threads: int, wait_log_s: float = 600.0) -> None:
    """One local model, loaded once, answers every cell of an engine plan; a watcher
    logs what it waits on when it has answered nothing for ``wait_log_s`` seconds."""
    from ..core import watchdog
    from ..infer.engine import read_plan, run_engine

    model, cells = read_plan(plan)
    announce_engine(plan, model, len(cells))
    set_threads(threads)
    t0 = time.perf_counter()
    watcher = watchdog.start(plan, wait_log_s)
    try:
        stats = run_engine(model, cells)
    finally:
        watchdog.stop(watcher)
    generated = sum(s["generated"] for s in stats.values())
    errors = sum(s["errors"] for s in stats.values())
    log.info(
        "engine %s: %d cell(s), %d answers generated, %d failed requests (%.1f s)",
        plan,
        len(stats),
        generated,
        errors,
        time.perf_counter() - t0,
    )


def announce_engine(plan: str, model: str, cells: int) -> None:
    """An engine job's first line: its plan, model and cells, and where it runs (a SLURM
    job, its node and devices; the evidence tests/cluster_run.py reads)."""
    from ..core.workflow import allocation

    where = allocation()
    log.info(
        "engine %s: models.%s, %d cell(s)%s",
        plan,
        model,
        cells,
        f", runs in {where}" if where else "",
    )


def gather(manifest: str, out: str, shards: list[str]) -> None:
    """Concatenate the shards of one output in manifest order."""
    from ..infer.run import gather_outputs

    n = gather_outputs([Path(p) for p in shards], Path(manifest), Path(out))
    log.info("%s: %d rows gathered from %d shards", out, n, len(shards))


def vllm_serve(config: str, model: str, host: str, port: int, print_only: bool) -> None:
    """Serve a backend-vllm registry entry through vLLM's OpenAI-compatible server, in
    the vLLM environment (config `environments.vllm`), on 127.0.0.1 by default."""
    import os
    import shlex
    import sys

    from ..clients.vlm.vllm import serve_command
    from ..core.config import ConfigError
    from ..core.workflow import environment_python
    from ..plan import RunPlan

    plan = RunPlan.load(config)
    entry = plan.registry.get(model)
    if entry is None or entry["backend"] != "vllm":
        raise ConfigError(
            f"vllm-serve: --model {model!r} is not a registry entry with backend vllm"
        )
    python = environment_python(
        plan.config["environments"]["vllm"],
        who=f"models.{model} (backend vllm)",
        setting="environments.vllm",
        make="bash envs/vllm-env.sh",
    )
    cmd = serve_command(model, entry, python=python, host=host, port=port, check=not print_only)
    if print_only:
        print(shlex.join(cmd))
        return
    log.info("serving %s: %s", model, shlex.join(cmd))
    sys.stdout.flush()
    os.execv(cmd[0], cmd) if os.sep in cmd[0] else os.execvp(cmd[0], cmd)


def block_attention(
    spec: str,
    outputs: str,
    attributes: str,
    manifest: str,
    samples: str,
    threads: int,
    out: str,
) -> None:
    """Final answers re-generated with attention to the attribute phrases blocked, each
    scored as the outputs are (the dataset's scorer, no LLM fallback)."""
    from ..clients.vlm import make_backend
    from ..infer.blocking import block_attention as block
    from ..infer.run import Job
    from ..score import score_outputs

    set_threads(threads)
    job_spec = json_object(spec)
    job = Job(**job_spec["infer"])
    unparsed = job_spec.get("unparsed_choice") or "wrong"

    def score(row: dict[str, Any], sample: Any) -> int | None:
        scored = score_outputs(
            {sample.sample_id: sample}, [row], job_spec["scorer"], unparsed_choice=unparsed
        )
        return int(scored[0]["correct"])

    backend = make_backend(job.model, job.model_spec)
    try:
        summary = block(
            Path(outputs),
            Path(samples),
            Path(manifest),
            Path(attributes),
            backend,
            Path(out),
            settings=tuple(job_spec["settings"]),
            max_new_tokens=int(job_spec["max_new_tokens"]),
            limit=job_spec.get("limit"),
            score=score,
        )
    finally:
        backend.close()
    log.info("%s: %s", out, json.dumps(summary, sort_keys=True, default=str))


#: inference's commands
COMMANDS: dict[str, Command] = {
    "infer": Command(
        infer,
        "variants -> outputs: one model on one manifest (resumable)",
        (
            spec("the inference job (model, prompt, decoding, shard)"),
            MANIFEST,
            SAMPLES,
            arg("--context", help="a second-stage prompt's first-stage outputs (CRM)"),
            THREADS,
            required("--out", help="outputs JSONL (progress goes to <out>.partial)"),
        ),
    ),
    "infer-engine": Command(
        infer_engine,
        "one local model, loaded once, answers every cell of an engine plan (resumable)",
        (
            required("--plan", help="engine plan JSON (rule engine_plan)"),
            THREADS,
            WAIT_LOG,
        ),
    ),
    "vllm-serve": Command(
        vllm_serve,
        "serve a backend-vllm model through vLLM's OpenAI-compatible server (the openai "
        "backend answers through it)",
        (
            required("--config", help="the run's configuration (registry, environments)"),
            required("--model", help="the registry id of a backend-vllm model"),
            arg("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)"),
            arg("--port", type=int, default=8000, help="port (default 8000)"),
            arg(
                "--print",
                dest="print_only",
                action="store_true",
                help="print the command instead of running it",
            ),
        ),
    ),
    "gather": Command(
        gather,
        "concatenate the shards of one output in manifest order",
        (
            MANIFEST,
            OUT_OUTPUTS,
            arg("shards", nargs="+", help="shard files"),
        ),
    ),
    "block-attention": Command(
        block_attention,
        "outputs -> final answers re-generated with attention to attribute phrases blocked",
        (
            spec("the blocking job (its inference job, settings, scorer)"),
            required("--outputs", help="outputs JSONL of a local model"),
            required("--attributes", help="the main extractor's attributes of those outputs"),
            MANIFEST,
            SAMPLES,
            THREADS,
            required("--out", help="blocked JSONL (one row per output and setting)"),
        ),
    ),
}

"""What the Snakefile does besides declaring rules, kept here so that
``workflow/rules/common.smk`` stays thin glue: the targets of rule ``all``, the image
listings brought up to date when the Snakefile is read, the cluster's local rules, the
engines' commands and environments, and the checks around the DAG — a killed run's
SLURM jobs cancelled, the shards of outputs never gathered reopened, a vLLM engine
without its environment and a job the DAG would skip refused (docs/architecture.md,
"The run plan and the rules").

Each function takes Snakemake's ``workflow`` object (or the parts it needs) as an
argument; Snakemake is imported only inside them, where one is running.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..core import paths
from ..core.config import ConfigError
from ..core.workflow import update_listing
from .data import construct_targets, image_listing, variant_manifests
from .engines import (
    engine_backend,
    engine_rule_name,
    engines,
    gathered_cells,
    llm_engine_rule_name,
    llm_engines,
    shard_files,
)
from .judges import judged_files, math_judged_files
from .scope import RunPlan


def _workflow_error(message: str) -> Exception:
    from snakemake.exceptions import WorkflowError

    return WorkflowError(message)


def targets(plan: RunPlan) -> list[str]:
    """What rule ``all`` asks for of the plan (the studies' files and the explorer's
    come after): every variant set, the scored summary and the failed-requests check
    when the run has models, the review pages, the judged files."""
    found = variant_manifests(plan)
    if plan.models:
        found += [paths.SCORE_SUMMARY, paths.REQUESTS]
    return found + construct_targets(plan) + judged_files(plan) + math_judged_files(plan)


def update_listings(plan: RunPlan) -> None:
    """Bring the image listing of every dataset read from a local folder up to date
    (:func:`vlmrobust.plan.data.image_listing`), so the dry run names one listing file
    instead of every image. Done once, when the Snakefile is read and before the DAG is
    built: Snakemake caches what a folder holds the first time it looks into it, so a
    listing written while the DAG is being built (in an input function) is missed by
    the next dataset's job."""
    for dataset in plan.datasets:
        try:
            listing = image_listing(plan, dataset)
        except ConfigError as exc:
            raise _workflow_error(str(exc)) from None
        if listing is not None:
            update_listing(*listing)


def local_rules(names: Iterable[str], workflow: Any) -> list[str]:
    """The rules of config ``cluster.local_rules`` (run beside Snakemake on a cluster),
    after checking that each one is a rule of the workflow."""
    rules = {r.name for r in workflow.rules}
    unknown = sorted(set(names) - rules)
    if unknown:
        raise _workflow_error(
            f"cluster.local_rules: no rule named {', '.join(unknown)} "
            f"(rules: {', '.join(sorted(rules))})"
        )
    return list(names)


# ---------------------------------------------------------------------- engines


def vllm_environment(plan: RunPlan, workflow: Any) -> str | None:
    """The environment the engines of backend vllm run in: config
    ``environments.vllm``, or None (the python on PATH) with
    ``--software-deployment-method conda``, where their rules' envs/vllm.yaml is that
    environment."""
    from snakemake.settings.types import DeploymentMethod

    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
        return None
    return plan.config["environments"]["vllm"]


def engine_cli(plan: RunPlan, model: str, engine: str | int, workflow: Any) -> str:
    """The ``vlmrobust`` command of an engine: this environment's, or for an engine of
    backend vllm the vLLM environment's (:func:`vllm_environment`): this repository's
    package run by that environment's Python. Built without the environment (a dry
    run, a forecast or a look at the DAG never needs it): :func:`check_vllm_environment`
    checks it before such an engine starts."""
    if engine_backend(plan, model, engine)[0] != "vllm":
        return "vlmrobust"
    from ..core.workflow import environment_cli

    env = vllm_environment(plan, workflow)
    return environment_cli(env, Path(workflow.basedir) / "workflow")


def write_engine_plan(out: str, log: str, text: str) -> None:
    """Rule ``engine_plan``: the plan's text to its file (beside Snakemake: no job)."""
    for file, content in ((out, f"{text}\n"), (log, f"wrote {out}\n")):
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        Path(file).write_text(content, encoding="utf-8")


def check_vllm_environment(plan: RunPlan, workflow: Any) -> None:
    """``onstart`` (a run, never a dry run): when an engine of backend vllm (an LLM
    engine too) is to run and its environment (:func:`vllm_environment`) is a folder
    without bin/python, the run fails before any job starts, naming the models,
    ``environments.vllm`` and how to make it (docs/vllm.md)."""
    from ..core.workflow import environment_python

    env = vllm_environment(plan, workflow)
    if env is None:
        return
    rules = {
        engine_rule_name(m, p, e): m
        for m, p, e in engines(plan)
        if engine_backend(plan, m, e)[0] == "vllm"
    }
    rules.update(
        {
            llm_engine_rule_name(m, e): m
            for m, e in llm_engines(plan)
            if engine_backend(plan, m, e)[0] == "vllm"
        }
    )
    jobs = workflow.dag.needrun_jobs()
    models = sorted({rules[j.rule.name] for j in jobs if j.rule.name in rules})
    if not models:
        return
    try:
        environment_python(
            env,
            who=", ".join(f"models.{m}" for m in models) + " (backend vllm)",
            setting="environments.vllm",
            make="bash envs/vllm-env.sh (or --cuda on a GPU machine)",
        )
    except ConfigError as exc:
        raise _workflow_error(str(exc)) from None


# ---------------------------------------------------------------------- around the DAG


def orphan_canceller(workflow: Any) -> Callable[..., list[str]]:
    """The function that cancels, on a cluster, the SLURM jobs an earlier, killed
    Snakemake of this folder left (started here, or recorded by its incomplete-output
    markers) before this run submits anything (:func:`vlmrobust.core.workflow.cancel_orphans`),
    once per run.

    Called first as an input function of rule ``all``, while the DAG is being built and
    before any file is looked at: a cancelled job removes the outputs it was making, so
    the DAG must see the folder after them. A run of other targets gets there only from
    ``onstart`` (no wildcards), after its DAG: there only the jobs that never started
    are cancelled (they remove nothing); those still running are named and left to
    finish (this run's job for the same shard waits for them, then resumes from their
    rows). Returns no files."""
    done: list[bool] = []

    def cancel_orphaned_jobs(wildcards: Any = None) -> list[str]:
        if done or not workflow.non_local_exec or workflow.dryrun:
            return []
        if workflow.remote_exec:  # a job's own Snakemake inside SLURM
            return []
        done.append(True)
        _cancel_orphans(workflow, before_dag=wildcards is not None)
        return []

    return cancel_orphaned_jobs


def _cancel_orphans(workflow: Any, before_dag: bool) -> None:
    from ..core.workflow import LIVE_STATES, cancel_orphans, live_slurm_jobs

    recorded: set[str] = set()
    if not before_dag:
        for job in workflow.dag.needrun_jobs():
            recorded.update(workflow.persistence.external_jobids(job))
    states = LIVE_STATES if before_dag else "PENDING"
    cancelled = cancel_orphans(os.getcwd(), recorded, states=states)
    if cancelled:
        print(
            f"cancelled {len(cancelled)} SLURM job(s) an earlier Snakemake left in this "
            f"folder: {', '.join(cancelled)} (their partial rows are kept)",
            file=sys.stderr,
        )
    running = [] if before_dag else sorted(live_slurm_jobs(os.getcwd()), key=int)
    if running:
        print(
            f"SLURM job(s) {', '.join(running)} of an earlier Snakemake of this folder "
            "still run: they finish on their own (scancel them to stop them)",
            file=sys.stderr,
        )


def shard_reopener(plan: RunPlan, workflow: Any) -> Callable[..., list[str]]:
    """The function that reopens, once per run, the shards of outputs never gathered.
    Snakemake drops the gathering of a cell whose outputs file is missing when the
    job that writes its shards reruns (the shards are ``ancient`` to it), and the run
    then ends "done" with that work left (snakemake/snakemake#4166: after a killed
    Snakemake, whose engines finished as orphans). So before the DAG is built (an input
    function of rule ``all``, after :func:`orphan_canceller`'s) every shard of a cell
    whose outputs file is missing is turned back into its resume cache
    (:func:`vlmrobust.infer.run.reopen_shard`): its job reruns, asks the model nothing,
    and the gathering runs after it. A dry run only says so. Returns no files
    (docs/architecture.md, "Engines")."""
    done: list[bool] = []

    def reopen_ungathered_shards(wildcards: Any = None) -> list[str]:
        if done or workflow.remote_exec:
            return []
        done.append(True)
        _reopen_shards(plan, workflow)
        return []

    return reopen_ungathered_shards


def _reopen_shards(plan: RunPlan, workflow: Any) -> None:
    from ..infer.run import reopen_shard

    shards = [
        shard
        for out, files in gathered_cells(plan)
        if not os.path.exists(out)
        for shard in files
        if os.path.exists(shard)
    ]
    if not shards:
        return
    if workflow.dryrun:
        print(
            f"{len(shards)} shard file(s) of outputs not gathered yet (e.g. {shards[0]}): "
            "a run turns them back into resume caches first, so their jobs run again "
            "(asking nothing) and the outputs are gathered; this dry run lists neither",
            file=sys.stderr,
        )
        return
    reopened = [s for s in shards if reopen_shard(Path(s))]
    if reopened:
        print(
            f"reopened {len(reopened)} shard file(s) whose outputs were never gathered "
            f"(e.g. {reopened[0]}): their jobs rerun from their resume caches",
            file=sys.stderr,
        )


def check_dropped_jobs(plan: RunPlan, workflow: Any) -> None:
    """After the DAG is built (``onstart``): a job Snakemake will not run although one
    of its outputs is missing and a job it reads from runs (the hole
    :func:`shard_reopener` closes for rule ``all``; a run of other targets can still
    meet it) fails the run before anything runs, naming the jobs, so it never ends
    "done" with work left; the shards of a dropped gathering are reopened first, so the
    next run of the same command completes."""
    from ..infer.run import reopen_shard

    dag = workflow.dag
    dropped = [
        job
        for job in dag.jobs
        if not dag.needrun(job)
        and any(dag.needrun(dep) for dep in dag.dependencies[job])
        and any(not os.path.exists(f) for f in job.output)
    ]
    if not dropped:
        return
    for job in dropped:
        if job.rule.name == "gather_outputs":
            w = job.wildcards
            for shard in shard_files(plan, w.model, w.dataset, w.condition, w.prompt):
                reopen_shard(Path(shard))
    names = ", ".join(f"{job.rule.name} ({job.output[0]})" for job in dropped[:5])
    raise _workflow_error(
        f"Snakemake would skip {len(dropped)} job(s) whose outputs are missing, e.g. "
        f"{names} (snakemake/snakemake#4166); nothing was run: run the same command again"
    )

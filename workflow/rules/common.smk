# Helpers shared by the workflow steps (validation of the configuration, input functions).
import json
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from vlmrobust.core import paths
from vlmrobust.core.config import ConfigError, demo_image_files, load_yaml
from vlmrobust.core.paths import path
from vlmrobust.core.prompts import DEFAULT_PROMPT, PROMPTS
from vlmrobust.plan import RunPlan
from vlmrobust.core.workflow import alternation, ensure_cli_on_path, update_listing
from vlmrobust_demo.data import DEMO_VERSION
from vlmrobust_demo.idis import IDIS_DEMO_VERSION
from vlmrobust.report.explorer.site import assets_fingerprint
from vlmrobust.studies import STUDIES, study_folders
from vlmrobust.studies import explorer as EXPLORER_PLAN
from vlmrobust.studies.base import TABLE_EXTS, spec_json

ensure_cli_on_path()

try:
    # Snakemake's own YAML reader keeps the last of a key given twice: read the config
    # files again with ours, which refuses it (naming the key and its line).
    for _configfile in workflow.configfiles:
        load_yaml(_configfile)
    PLAN = RunPlan.from_config(config)  # validates the configuration and the registry
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration:\n{exc}") from None

REGISTRY = PLAN.registry
# every prompt setting a dataset may name ({prompt} of the output paths)
PROMPT_SETTINGS = [DEFAULT_PROMPT, *PROMPTS]
DATASETS = PLAN.datasets
CONDITIONS = PLAN.conditions
MODELS = PLAN.models
DEMO_MODELS = [m for m, spec in REGISTRY.items() if spec["demo_seed"] is not None]
# Models answered by a local checkpoint (an engine job per share of their cells, with
# transformers or vLLM; GPU) or through an API (rule infer, one job per cell).
HF_MODELS = [m for m, spec in REGISTRY.items() if spec["backend"] == "hf"]
VLLM_MODELS = [m for m, spec in REGISTRY.items() if spec["backend"] == "vllm"]
LOCAL_MODELS = HF_MODELS + VLLM_MODELS
API_MODELS = [
    m for m, spec in REGISTRY.items() if spec["backend"] not in ("hf", "vllm")
]
# The local LLMs the judges name (config `llm: <id>`): engine jobs of their own write
# the judged files of those judges (docs/judges.md); the judge rules make the others.
LLM_MODELS = PLAN.llm_models
ENGINE_JUDGED = PLAN.engine_judged_files()
# the judges whose own rules run (an offline or API LLM), by the wildcard that tells
MATH_JUDGED_BESIDE = sorted(
    {f.split("/")[-3] for f in PLAN.math_judged_files() if f not in ENGINE_JUDGED}
)
EXTRACTORS_BESIDE = [
    e
    for e in PLAN.attribute_extractors
    if PLAN.attribute_spec(e).get("backend") not in ("hf", "vllm")
]


def dataset_spec(wildcards):
    """The dataset's configuration as JSON: the `samples` rule's parameter."""
    return json.dumps(PLAN.samples_spec(wildcards.dataset), sort_keys=True)


def update_listings():
    """Bring the image listing of every dataset read from a local folder up to date
    (RunPlan.image_listing), so the dry run names one listing file instead of every image.
    Done once, when the Snakefile is read and before the DAG is built: Snakemake caches
    what a folder holds the first time it looks into it, so a listing written while the
    DAG is being built (in an input function) is missed by the next dataset's job."""
    for dataset in DATASETS:
        try:
            listing = PLAN.image_listing(dataset)
        except ConfigError as exc:
            raise WorkflowError(str(exc)) from None
        if listing is not None:
            update_listing(*listing)


# inside a cluster job its Snakemake reads what the run's own one wrote
if not workflow.remote_exec:
    update_listings()


def samples_input(wildcards, questions=True):
    """What the samples of a dataset are read from (RunPlan.samples_sources); the
    `questions` rule reads the same files but not its own output (questions=False)."""
    try:
        return PLAN.samples_sources(wildcards.dataset, questions=questions)
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None


def condition_spec(wildcards):
    """The condition's configuration as JSON: the `variants` rule's parameter."""
    return json.dumps(CONDITIONS[wildcards.condition], sort_keys=True)


def max_pixels(wildcards):
    """The dataset's max_pixels (filled in from samples.max_pixels): the variants' bound."""
    return PLAN.datasets[wildcards.dataset]["max_pixels"]


def condition_inputs(wildcards):
    """What a condition's variants job reads besides the samples (RunPlan.condition_inputs)."""
    return PLAN.condition_inputs(wildcards.condition)


def math_judge_spec(wildcards):
    """The MathVerse judge's configuration as JSON (config judge.mathverse)."""
    return json.dumps(PLAN.math_judge_spec(), sort_keys=True)


def attribute_spec(wildcards):
    """One attribute extractor's setting as JSON (config judge.attributes.extractors),
    with this file's validation sample where it has one (validation_sample)."""
    w = wildcards
    spec = PLAN.attribute_spec(w.extractor, w.dataset, w.model, w.condition, w.prompt)
    return json.dumps(spec, sort_keys=True)


def attribute_resources(wildcards):
    """The vocabulary or prompt file an extractor's labels depend on."""
    from vlmrobust.judges.attributes import resource_files

    spec = PLAN.attribute_spec(wildcards.extractor)
    task = PLAN.idis_task(wildcards.dataset)
    return [os.path.relpath(p) for p in resource_files(spec, task)]


def idis_task(wildcards):
    """The attribute task of a dataset (perception, math, waterbirds)."""
    return PLAN.idis_task(wildcards.dataset)


def areas_spec(wildcards):
    """The distractor-area setting as JSON (config idis.areas)."""
    return json.dumps(PLAN.areas_spec(), sort_keys=True)


def blocking_inputs(wildcards):
    """What one attention-blocking job reads: the outputs, their main attribute labels,
    the variants, the samples and (a demo model) the checkpoint."""
    w = wildcards
    extractor = PLAN.attribute_extractors[0]
    return {
        "outputs": PLAN.output_path(w.model, w.dataset, w.condition, w.prompt),
        "attributes": PLAN.attributes_path(
            extractor, w.model, w.dataset, w.condition, w.prompt
        ),
        "manifest": PLAN.manifest_path(w.dataset, w.condition),
        "samples": PLAN.samples_path(w.dataset),
        "model": model_input(w),
    }


def blocking_spec(wildcards):
    """The attention-blocking job as JSON (RunPlan.blocking_spec)."""
    w = wildcards
    return json.dumps(PLAN.blocking_spec(w.model, w.dataset, w.prompt), sort_keys=True)


def all_targets():
    targets = PLAN.variant_manifests()
    if MODELS:
        targets += [paths.SCORE_SUMMARY, paths.REQUESTS]
    return (
        targets
        + construct_targets()
        + judged_files()
        + PLAN.math_judged_files()
        + study_targets()
        + explorer_targets()
    )


prompts_of = PLAN.prompts_of
models_of = PLAN.models_of
output_files = PLAN.output_files
scored_files = PLAN.scored_files


def model_input(wildcards):
    """A demo model's build record, or a local checkpoint's files (RunPlan.model_files)."""
    return PLAN.model_files(wildcards.model)


def infer_context(wildcards):
    """A second-stage prompt's input: the same model's first-stage outputs (CRM)."""
    w = wildcards
    return PLAN.infer_context(w.model, w.dataset, w.condition, w.prompt)


def context_arg(wildcards, input):
    return f"--context {input.context}" if input.context else ""


def infer_spec(wildcards):
    """The inference job as JSON: only what changes its outputs (RunPlan.infer_spec)."""
    w = wildcards
    spec = PLAN.infer_spec(w.model, w.dataset, w.prompt, int(w.shard), int(w.shards))
    return json.dumps(spec, sort_keys=True)


def engine_backend(model, engine):
    """The backend an engine answers with (RunPlan.engine_label)."""
    return PLAN.engine_backend(model, engine)[0]


def vllm_environment():
    """The environment the engines of backend vllm run in: config `environments.vllm`,
    or None (the python on PATH) with --software-deployment-method conda, where their
    rules' envs/vllm.yaml is that environment."""
    from snakemake.settings.types import DeploymentMethod

    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
        return None
    return config["environments"]["vllm"]


def engine_cli(model, engine):
    """The `vlmrobust` command of an engine: this environment's, or for an engine of
    backend vllm the vLLM environment's (vllm_environment): this repository's package
    run by that environment's Python. Built without the environment (a dry run, a
    forecast or a look at the DAG never needs it): check_vllm_environment checks it
    before such an engine starts."""
    if engine_backend(model, engine) != "vllm":
        return "vlmrobust"
    from vlmrobust.core.workflow import environment_cli

    return environment_cli(vllm_environment(), Path(workflow.basedir) / "workflow")


def check_vllm_environment():
    """onstart (a run, never a dry run): when an engine of backend vllm (an LLM engine
    too) is to run and its environment (vllm_environment) is a folder without
    bin/python, the run fails before any job starts, naming the models,
    `environments.vllm` and how to make it (docs/vllm.md)."""
    from vlmrobust.core.workflow import environment_python

    env = vllm_environment()
    if env is None:
        return
    rules = {
        engine_rule_name(m, p, e): m
        for m, p, e in PLAN.engines()
        if engine_backend(m, e) == "vllm"
    }
    rules.update(
        {
            llm_engine_rule_name(m, e): m
            for m, e in PLAN.llm_engines()
            if engine_backend(m, e) == "vllm"
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
        raise WorkflowError(str(exc)) from None


def engine_rule_name(model, phase, engine):
    """The name of one engine's rule, engine_<model>_phase<p>_<e> (the model id with
    every character a rule name cannot hold as `_`)."""
    slug = "".join(ch if ch.isalnum() else "_" for ch in model)
    return f"engine_{slug}_phase{phase}_{engine}"


def engine_plan_json(wildcards):
    """An engine's plan (RunPlan.engine_plan; an LLM's: RunPlan.llm_engine_plan) as the
    text of its file."""
    w = wildcards
    if w.model in LLM_MODELS:
        plan = PLAN.llm_engine_plan(w.model, w.engine)
    else:
        plan = PLAN.engine_plan(w.model, int(w.phase), w.engine)
    return json.dumps(plan, sort_keys=True, indent=1)


def llm_engine_rule_name(model, engine):
    """The name of one LLM engine's rule, llm_engine_<model>_<e>."""
    slug = "".join(ch if ch.isalnum() else "_" for ch in model)
    return f"llm_engine_{slug}_{engine}"


def write_engine_plan(out, log, plan):
    """Rule engine_plan: the plan's text to its file (beside Snakemake: no job)."""
    for file, text in ((out, f"{plan}\n"), (log, f"wrote {out}\n")):
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        Path(file).write_text(text, encoding="utf-8")


def engine_resource(model, name):
    """A resource of a model's engine (gpu, mem_mb) from its registry entry."""
    from vlmrobust.core.registry import model_resources

    return model_resources(REGISTRY[model])[name]


def local_rules(names, workflow):
    """The rules of config `cluster.local_rules` (run beside Snakemake on a cluster),
    after checking that each one is a rule of the workflow."""
    rules = {r.name for r in workflow.rules}
    unknown = sorted(set(names) - rules)
    if unknown:
        raise WorkflowError(
            f"cluster.local_rules: no rule named {', '.join(unknown)} "
            f"(rules: {', '.join(sorted(rules))})"
        )
    return list(names)


ORPHANS = {"checked": False}


def cancel_orphaned_jobs(wildcards=None):
    """On a cluster, the SLURM jobs an earlier, killed Snakemake of this folder left
    (started here, or recorded by its incomplete-output markers) are cancelled before
    this run submits anything (core.workflow.cancel_orphans).

    Called first as an input function of rule `all`, while the DAG is being built and
    before any file is looked at: a cancelled job removes the outputs it was making, so
    the DAG must see the folder after them. A run of other targets gets here only from
    `onstart`, after its DAG: there only the jobs that never started are cancelled (they
    remove nothing); those still running are named and left to finish (this run's job
    for the same shard waits for them, then resumes from their rows). Returns no files.
    """
    if ORPHANS["checked"] or not workflow.non_local_exec or workflow.dryrun:
        return []
    if workflow.remote_exec:  # a job's own Snakemake inside SLURM
        return []
    from vlmrobust.core.workflow import LIVE_STATES, cancel_orphans, live_slurm_jobs

    before_dag = wildcards is not None
    ORPHANS["checked"] = True
    recorded = set()
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
    return []


REOPENED = {"checked": False}


def reopen_ungathered_shards(wildcards=None):
    """Snakemake drops the gathering of a cell whose outputs file is missing when the
    job that writes its shards reruns (the shards are `ancient` to it), and the run then
    ends "done" with that work left (snakemake/snakemake#4166: after a killed Snakemake,
    whose engines finished as orphans). So before the DAG is built (an input function
    of rule all, after cancel_orphaned_jobs) every shard of a cell whose outputs file is
    missing is turned back into its resume cache (vlmrobust.infer.run.reopen_shard):
    its job reruns, asks the model nothing, and the gathering runs after it. A dry run
    only says so. Returns no files (docs/architecture.md, "Engines")."""
    if REOPENED["checked"] or workflow.remote_exec:
        return []
    REOPENED["checked"] = True
    from vlmrobust.infer.run import reopen_shard

    shards = [
        shard
        for out, files in PLAN.gathered_cells()
        if not os.path.exists(out)
        for shard in files
        if os.path.exists(shard)
    ]
    if not shards:
        return []
    if workflow.dryrun:
        print(
            f"{len(shards)} shard file(s) of outputs not gathered yet (e.g. {shards[0]}): "
            "a run turns them back into resume caches first, so their jobs run again "
            "(asking nothing) and the outputs are gathered; this dry run lists neither",
            file=sys.stderr,
        )
        return []
    reopened = [s for s in shards if reopen_shard(Path(s))]
    if reopened:
        print(
            f"reopened {len(reopened)} shard file(s) whose outputs were never gathered "
            f"(e.g. {reopened[0]}): their jobs rerun from their resume caches",
            file=sys.stderr,
        )
    return []


def check_dropped_jobs():
    """After the DAG is built (onstart): a job Snakemake will not run although one of
    its outputs is missing and a job it reads from runs (the hole
    reopen_ungathered_shards closes for rule all; a run of other targets can still meet
    it) fails the run before anything runs, naming the jobs, so it never ends "done"
    with work left; the shards of a dropped gathering are reopened first, so the next
    run of the same command completes."""
    from vlmrobust.infer.run import reopen_shard

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
            for shard in shard_files(job.wildcards):
                reopen_shard(Path(shard))
    names = ", ".join(f"{job.rule.name} ({job.output[0]})" for job in dropped[:5])
    raise WorkflowError(
        f"Snakemake would skip {len(dropped)} job(s) whose outputs are missing, e.g. "
        f"{names} (snakemake/snakemake#4166); nothing was run: run the same command again"
    )


def infer_resource(name):
    """A resource of an inference job (gpu, mem_mb, runtime) from the model's registry
    entry (`resources`; null: the kind's default, vlmrobust.core.registry)."""
    from vlmrobust.core.registry import model_resources

    def resource(wildcards):
        return model_resources(REGISTRY[wildcards.model])[name]

    return resource


def shard_files(wildcards):
    w = wildcards
    return PLAN.shard_files(w.model, w.dataset, w.condition, w.prompt)


def ancient_shards(wildcards):
    """The shards of one output, by presence only (rule gather_outputs)."""
    return [ancient(f) for f in shard_files(wildcards)]


def cell_specs(wildcards):
    """The job specs of one output's shards: a change reruns its gathering."""
    w = wildcards
    n = PLAN.cell_shards(w.model, w.dataset)
    specs = [PLAN.infer_spec(w.model, w.dataset, w.prompt, i, n) for i in range(n)]
    return json.dumps(specs, sort_keys=True)


def demo_images():
    """Every image the demo_data job writes (demo_image_files per family)."""
    n = config["demo"]["n_per_family"]
    return [
        f for family in config["demo"]["families"] for f in demo_image_files(family, n)
    ]


def demo_model_spec(wildcards):
    """How a demo model is built and trained, as JSON (RunPlan.demo_model_spec)."""
    return json.dumps(PLAN.demo_model_spec(wildcards.model), sort_keys=True)


def demo_model_inputs(wildcards):
    """The training split and, for a fine-tuned model, its base's checkpoint."""
    return PLAN.demo_model_inputs(wildcards.model)


def score_param(name):
    """One of the `score` rule's parameters (RunPlan.score_params), as text."""

    def param(wildcards):
        value = PLAN.score_params(wildcards.dataset)[name]
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    return param


# --- released outputs (reviewers) ----------------------------------------------------

# entries with a released outputs file (rule import_outputs) ...
IMPORTS = PLAN.output_imports
# ... and verdicts-only entries: released verdicts, no outputs (rule import_verdicts)
VERDICT_IMPORTS = PLAN.verdict_imports


def import_input(wildcards):
    spec = IMPORTS[wildcards.imported]
    files = {
        "released": spec["path"],
        "samples": PLAN.samples_path(spec["dataset"]),
        # its skipped bad rows: their released answers are left out, counted
        "samples_report": PLAN.samples_report_path(spec["dataset"]),
    }
    if spec["references"]:
        files["references"] = spec["references"]
    if spec["format"] == "jsonl":  # question ids name the condition's variants
        files["manifest"] = PLAN.manifest_path(spec["dataset"], spec["condition"])
    return files


def import_manifest_arg(wildcards, input):
    """`--manifest` for a jsonl import (its question ids name variants)."""
    return f"--manifest {input.manifest}" if "manifest" in input.keys() else ""


def import_spec(wildcards):
    spec = IMPORTS[wildcards.imported]
    markers = (REGISTRY[spec["model"]].get("options") or {}).get("thinking_markers")
    return json.dumps(
        {
            **spec,
            "adapter": DATASETS[spec["dataset"]]["adapter"],
            "thinking_markers": markers,
        },
        sort_keys=True,
    )


def verdicts_input(wildcards):
    spec = VERDICT_IMPORTS[wildcards.imported]
    return {
        "references": spec["references"],
        "samples": PLAN.samples_path(spec["dataset"]),
    }


def verdicts_spec(wildcards):
    return json.dumps(VERDICT_IMPORTS[wildcards.imported], sort_keys=True)


# --- judges --------------------------------------------------------------------------

judged_files = PLAN.judged_files


def reference_judge_spec(wildcards):
    return json.dumps(PLAN.reference_judge_spec(), sort_keys=True)


# --- construction of distraction benchmarks ------------------------------------------

CONSTRUCT = config["construct"]


def construct_input(wildcards):
    return PLAN.construct_inputs(wildcards.construction)


def construct_spec(wildcards):
    return json.dumps(CONSTRUCT[wildcards.construction], sort_keys=True)


def review_decisions(wildcards):
    """The decisions file of the constructed dataset built from this construction."""
    for spec in DATASETS.values():
        if spec["adapter"] == "constructed" and spec["path"] == (
            path(paths.CONSTRUCTION, construction=wildcards.construction)
        ):
            return spec["decisions"]
    return f"resources/distraction/decisions-{wildcards.construction}.csv"


def existing_decisions(wildcards):
    path = review_decisions(wildcards)
    return [path] if Path(path).exists() else []


def construct_targets():
    return [path(paths.REVIEW_PAGE, construction=name) for name in CONSTRUCT]


def use_released(wildcards):
    """`--use-released` where an `imports` entry asks for the released labels."""
    key = f"{wildcards.model}/{wildcards.dataset}/{wildcards.condition}/{wildcards.prompt}"
    spec = IMPORTS.get(key)
    wanted = spec is not None and (spec["released_labels"] or spec["references"])
    return "--use-released" if wanted else ""


# --- Contrastive Region Masking (CRM) ------------------------------------------------

MASK_CONDITIONS = PLAN.conditions_with("mask")


def compare_spec(wildcards):
    """What the comparison of one (model, dataset, mask condition) needs."""
    return json.dumps(PLAN.compare_spec(), sort_keys=True)


def hallucination_judge_spec(wildcards):
    return json.dumps(PLAN.hallucination_judge_spec(), sort_keys=True)


def compare_input(wildcards):
    return PLAN.compare_inputs(wildcards.model, wildcards.dataset, wildcards.condition)


# --- the studies (vlmrobust.studies): generic metrics / table / figure / page rules ----

STUDY_FOLDERS = study_folders(PLAN)


def explorer_targets():
    """The explorer's index and page (config explorer.build), after every study."""
    return EXPLORER_PLAN.targets(PLAN)


def study_targets():
    """Every study's metrics, tables, figures and pages in this run."""
    return [path for study in STUDIES.values() for path in study.targets(PLAN)]


def study_name(wildcards):
    return STUDY_FOLDERS[wildcards.folder][0].name


def study_scope(wildcards):
    return STUDY_FOLDERS[wildcards.folder][1]


def study_title(wildcards):
    """The report category of a study's file."""
    return STUDY_FOLDERS[wildcards.folder][0].title


def study_spec(wildcards):
    study, scope = STUDY_FOLDERS[wildcards.folder]
    return spec_json(study.run_spec(PLAN, scope))


def study_inputs(wildcards):
    """The study's input files, and the samples reports of its datasets (warnings)."""
    study, scope = STUDY_FOLDERS[wildcards.folder]
    return study.metrics_inputs(PLAN, scope)


def study_inputs_json(wildcards):
    return json.dumps(study_inputs(wildcards), sort_keys=True)


def view_inputs(wildcards):
    """A view's inputs: the study's metrics and the stage files its views read."""
    study, scope = STUDY_FOLDERS[wildcards.folder]
    return {"metrics": study.metrics_path(scope), **study.view_inputs(PLAN, scope)}


def view_inputs_json(wildcards):
    study, scope = STUDY_FOLDERS[wildcards.folder]
    return json.dumps(study.view_inputs(PLAN, scope), sort_keys=True)


def study_caption(kind):
    """The report caption of a study's tables, figures or pages (a params function)."""

    def caption(wildcards):
        study = STUDY_FOLDERS[wildcards.folder][0]
        return study.view_caption(kind, wildcards.name)

    return caption


# The explorer (explorer.smk): what its jobs read.


def explorer_variants_inputs(wildcards):
    return EXPLORER_PLAN.variants_inputs(PLAN, wildcards.dataset, wildcards.condition)


def explorer_cells_inputs(wildcards):
    """What the job of a model's cells on one dataset reads: their scored and outputs
    files, the clean cells' scored files, the judges' files."""
    return EXPLORER_PLAN.group_inputs(PLAN, wildcards.model, wildcards.dataset)


def explorer_cells_spec(wildcards):
    """Those cells as JSON: each one's files and folder (explorer-cells --spec)."""
    cells = EXPLORER_PLAN.group_cells(PLAN, wildcards.model, wildcards.dataset)
    return json.dumps(cells, sort_keys=True)

# Glue between the rules and the run plan (vlmrobust.plan; docs/architecture.md, "The run
# plan and the rules"): the plan of the configuration, the adapter the rules call its
# functions through, and the hooks Snakemake runs before and after the DAG.
import inspect
import json
import os
from pathlib import Path

from snakemake.exceptions import WorkflowError

from vlmrobust.core import paths
from vlmrobust.core.config import ConfigError, load_yaml
from vlmrobust.core.paths import path
from vlmrobust.core.prompts import DEFAULT_PROMPT, PROMPTS
from vlmrobust.core.workflow import alternation, ensure_cli_on_path
from vlmrobust.plan import (
    RunPlan,
    data,
    engines,
    hooks,
    idis,
    inference,
    judges,
    scoring,
)
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

# every prompt setting a dataset may name ({prompt} of the output paths)
PROMPT_SETTINGS = [DEFAULT_PROMPT, *PROMPTS]
# each study folder of the run -> (study, scope): the {folder} of studies.smk
STUDY_FOLDERS = study_folders(PLAN)

# The image listings of the local datasets, once, before the DAG (hooks.update_listings);
# inside a cluster job its Snakemake reads what the run's own one wrote.
if not workflow.remote_exec:
    hooks.update_listings(PLAN)


def wild(fn, as_json=False, each=None, **fixed):
    """An input, params or resources function calling a plan function: fn(PLAN, the
    job's wildcards that fn names as parameters, **fixed); a ConfigError becomes the
    run's error. Its value as sorted JSON (as_json), or each item through `each`."""
    names = [p for p in list(inspect.signature(fn).parameters)[1:] if p not in fixed]

    def call(wildcards):
        values = {n: v for n, v in wildcards.items() if n in names}
        try:
            value = fn(PLAN, **values, **fixed)
        except ConfigError as exc:
            raise WorkflowError(str(exc)) from None
        if each is not None:
            value = [each(v) for v in value]
        return json.dumps(value, sort_keys=True) if as_json else value

    return call


def by_study(get, as_json=False):
    """A rule's function of {folder}: get(study, scope) of that folder's study."""

    def call(wildcards):
        value = get(*STUDY_FOLDERS[wildcards.folder])
        return json.dumps(value, sort_keys=True) if as_json else value

    return call


def study_targets():
    """Every study's metrics, tables, figures and pages in this run."""
    return [f for study in STUDIES.values() for f in study.targets(PLAN)]


def all_targets():
    """Rule all's inputs: the plan's (hooks.targets), the studies', the explorer's."""
    return hooks.targets(PLAN) + study_targets() + EXPLORER_PLAN.targets(PLAN)


# The first two inputs of rule all, before the DAG is built (docs/architecture.md, "On a
# cluster" and "Engines"); the Snakefile's onstart calls the first again after it.
cancel_orphaned_jobs = hooks.orphan_canceller(workflow)
reopen_ungathered_shards = hooks.shard_reopener(PLAN, workflow)

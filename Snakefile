# vlmrobust: robustness of (reasoning) vision-language models to perturbed images.
# Data flow (docs/architecture.md): datasets -> samples -> variants -> outputs -> scored -> metrics
# -> tables, figures. Logic lives in the `vlmrobust` package (workflow/vlmrobust).
#
#   snakemake --cores 2                                  # embedded demo (config/config.yaml)
#   snakemake --cores 8 --configfile config/paper.yaml   # the papers' full reproduction
#   snakemake --cores 8 --profile slurm                  # on a SLURM cluster


from snakemake.utils import min_version

min_version("9.0")


# config/config.yaml is the default; a --configfile on the command line replaces it
# (it is not merged into it, so a paper run carries no demo dataset).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


report: "workflow/report/workflow.rst"


# The run's names, and the names a schema allows (a table's name carries a condition's:
# table1_corrupt-s3), never a pattern of their own that could refuse one of them.
wildcard_constraints:
    dataset=alternation(PLAN.datasets),
    condition=alternation(PLAN.conditions),
    model=alternation(set(PLAN.models) | set(inference.demo_models(PLAN))),
    prompt=alternation(PROMPT_SETTINGS),
    shard=r"\d+",
    shards=r"\d+",
    construction=alternation(config["construct"]),
    folder=alternation(STUDY_FOLDERS),
    name=paths.NAME,


include: "workflow/rules/datasets.smk"
include: "workflow/rules/questions.smk"
include: "workflow/rules/variants.smk"
include: "workflow/rules/construct.smk"
include: "workflow/rules/inference.smk"
include: "workflow/rules/scoring.smk"
include: "workflow/rules/masking.smk"
include: "workflow/rules/judges.smk"
include: "workflow/rules/idis.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/explorer.smk"


# On a cluster: the short steps run beside Snakemake (config cluster.local_rules).
workflow.localrules(*hooks.local_rules(config["cluster"]["local_rules"], workflow))


# On a cluster: jobs a killed Snakemake left are cancelled before anything is submitted
# (rule all does it before the DAG is built; other targets get it here, after the DAG:
# docs/architecture.md, "On a cluster"). Then a vLLM engine to run without its
# environment (docs/vllm.md) and a job the DAG skips although its output is missing
# (docs/architecture.md, "Engines") fail the run before it starts.
onstart:
    cancel_orphaned_jobs()
    hooks.check_vllm_environment(PLAN, workflow)
    hooks.check_dropped_jobs(PLAN, workflow)


rule all:
    default_target: True
    input:
        # first, before any file is looked at: a killed run's jobs (on a cluster)
        cancel_orphaned_jobs,
        # then the shards of outputs never gathered (Snakemake would skip the gathering)
        reopen_ungathered_shards,
        all_targets(),

# Helpers shared by the workflow steps (validation of the configuration, input functions).
import json
from pathlib import Path

from snakemake.exceptions import WorkflowError

from vlmrobust.core.config import (
    ConfigError,
    DEMO_ROOT,
    demo_folder_family,
    load_yaml,
    validate_config,
    validate_registry,
)
from vlmrobust.report.figures import corruption_figure_names, distraction_figure_names
from vlmrobust.report.figures.masking import masking_figure_names
from vlmrobust.masking import SPEC_KEYS as MASKING_SPEC_KEYS
from vlmrobust.core.prompts import PROMPTS
from vlmrobust.report.tables import corruption_table_names, distraction_table_names
from vlmrobust.report.tables.masking import masking_table_names
from vlmrobust.core.workflow import alternation, ensure_cli_on_path

ensure_cli_on_path()

try:
    _registry_file = (config or {}).get("model_registry", "config/models.yaml")
    REGISTRY = validate_registry(load_yaml(_registry_file), _registry_file)["models"]
    validate_config(config, {"models": REGISTRY})
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration:\n{exc}") from None

DATASETS = config["datasets"]
CONDITIONS = config["conditions"]
MODELS = {m: REGISTRY[m] for m in config["models"]}
DEMO_MODELS = [m for m, spec in REGISTRY.items() if spec["demo_seed"] is not None]
# Models answered by a local checkpoint (rule infer, GPU) or through an API (infer_api).
LOCAL_MODELS = [m for m, spec in REGISTRY.items() if spec["backend"] in ("hf", "vllm")]
API_MODELS = [
    m for m, spec in REGISTRY.items() if spec["backend"] not in ("hf", "vllm")
]


# Keys of a dataset's configuration that do not change its samples (they must not
# trigger a rebuild of the samples when edited).
_NOT_SAMPLE_KEYS = {
    "conditions",
    "group",
    "prompts",
    "max_new_tokens",
    "shards",
    "scorer",
}


def dataset_spec(wildcards):
    """The dataset's configuration as JSON: the `samples` rule's parameter."""
    spec = DATASETS[wildcards.dataset]
    return json.dumps(
        {k: v for k, v in spec.items() if k not in _NOT_SAMPLE_KEYS}, sort_keys=True
    )


def samples_input(wildcards):
    """What the samples of a dataset are read from: the demo rows (also for another
    adapter reading a demo family's folder, e.g. VisArgs), the constructed candidates
    and their decisions file, or the local files."""
    spec = DATASETS[wildcards.dataset]
    family = demo_folder_family(spec["path"])
    if family is not None:  # written by the demo_data job
        return [f"{DEMO_ROOT}/{family}/rows.jsonl"]
    if spec["adapter"] == "constructed":
        decisions = [spec["decisions"]] if spec["decisions"] else []
        return [f"{spec['path']}/candidates.jsonl"] + decisions
    if spec["source"] == "local":
        root = Path(spec["path"])
        if not root.exists():
            raise WorkflowError(
                f"datasets.{wildcards.dataset}.path: folder {root} does not exist"
            )
        return sorted(
            str(p)
            for p in root.rglob("*")
            if p.suffix in (".jsonl", ".json", ".parquet") and p.is_file()
        )
    return []


def condition_spec(wildcards):
    """The condition's configuration as JSON: the `variants` rule's parameter."""
    return json.dumps(CONDITIONS[wildcards.condition], sort_keys=True)


def variant_manifests():
    return [
        f"results/variants/{dataset}/{condition}/manifest.jsonl"
        for dataset, spec in DATASETS.items()
        for condition in spec["conditions"]
    ]


def all_targets():
    targets = variant_manifests()
    if MODELS:
        targets.append("results/scored/summary.csv")
    return (
        targets
        + construct_targets()
        + corruption_targets()
        + judged_files()
        + distraction_targets()
        + masking_targets()
    )


def prompts_of(dataset):
    """Prompt settings a dataset is answered under ("default" = the dataset's own)."""
    return DATASETS[dataset]["prompts"] or ["default"]


def models_of(dataset):
    """The run's models evaluated on a dataset."""
    chosen = DATASETS[dataset]["models"]
    return [m for m in MODELS if chosen is None or m in chosen]


def output_files(model):
    """Gathered outputs of one model: every dataset x condition x prompt it answers."""
    return [
        f"results/outputs/{model}/{dataset}/{condition}/{prompt}.jsonl"
        for dataset, spec in DATASETS.items()
        if model in models_of(dataset)
        for condition in spec["conditions"]
        for prompt in prompts_of(dataset)
    ]


def scored_files():
    return [
        path.replace("results/outputs/", "results/scored/").replace(".jsonl", ".csv")
        for model in MODELS
        for path in output_files(model)
    ]


def model_input(wildcards):
    """A demo model's checkpoint is built by a job; other models load by name."""
    if REGISTRY[wildcards.model]["demo_seed"] is not None:
        return [f"results/models/{wildcards.model}/vlmrobust_demo.json"]
    return []


def stage_decoding(prompt, dataset):
    """(temperature, max_new_tokens) of a prompt on a dataset: the CRM stages have
    their own (config `masking`), every other prompt the run's `decoding`."""
    decoding, masking = config["decoding"], config["masking"]
    tokens = DATASETS[dataset]["max_new_tokens"] or decoding["max_new_tokens"]
    if prompt == masking["cot_prompt"]:
        return masking["cot_temperature"], masking["cot_max_new_tokens"] or tokens
    if prompt == masking["answer_prompt"]:
        return masking["answer_temperature"], masking["answer_max_new_tokens"] or tokens
    return decoding["temperature"], tokens


def infer_context(wildcards):
    """A second-stage prompt's input: the same model's first-stage outputs (CRM)."""
    needs = PROMPTS[wildcards.prompt].needs if wildcards.prompt in PROMPTS else None
    if needs is None:
        return []
    return [
        f"results/outputs/{wildcards.model}/{wildcards.dataset}/{wildcards.condition}/{needs}.jsonl"
    ]


def context_arg(wildcards, input):
    return f"--context {input.context}" if input.context else ""


def infer_spec(wildcards):
    """The inference job (vlmrobust.infer.run.Job) as JSON."""
    dataset = DATASETS[wildcards.dataset]
    decoding = config["decoding"]
    temperature, max_new_tokens = stage_decoding(wildcards.prompt, wildcards.dataset)
    return json.dumps(
        {
            "model": wildcards.model,
            "model_spec": REGISTRY[wildcards.model],
            "prompt": wildcards.prompt,
            "adapter": dataset["adapter"],
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": decoding["top_p"],
            "n": decoding["n"],
            "seed": config["seed"],
            "shard": int(wildcards.shard),
            "shards": int(wildcards.shards),
        },
        sort_keys=True,
    )


def infer_gpus(wildcards):
    """GPUs of a local-checkpoint inference job: one, except for the CPU demo models."""
    return int(REGISTRY[wildcards.model]["demo_seed"] is None)


def shard_files(wildcards):
    n = DATASETS[wildcards.dataset]["shards"]
    return [
        f"results/outputs/{wildcards.model}/{wildcards.dataset}/{wildcards.condition}/"
        f"{wildcards.prompt}/shard{i}of{n}.jsonl"
        for i in range(n)
    ]


def demo_seed(wildcards):
    return REGISTRY[wildcards.model]["demo_seed"]


def scorer_of(wildcards):
    return DATASETS[wildcards.dataset]["scorer"]


def llm_fallback(wildcards):
    return json.dumps(config["scoring"]["llm_fallback"], sort_keys=True)


# --- metrics, tables, figures: the vision-corruption study ---------------------------

CLEAN = config["metrics"]["clean_condition"]
CORRUPTION_CONDITIONS = [
    c for c, spec in CONDITIONS.items() if spec["perturbation"] == "corruption"
]


def corruption_datasets():
    """Datasets with the clean condition and at least one corruption condition."""
    return [
        d
        for d, spec in DATASETS.items()
        if CLEAN in spec["conditions"]
        and any(c in spec["conditions"] for c in CORRUPTION_CONDITIONS)
    ]


def corruption_study_inputs():
    """Scored files and corruption manifests the corruption metrics read."""
    scored, manifests = [], []
    for dataset in corruption_datasets():
        conditions = [
            c
            for c in DATASETS[dataset]["conditions"]
            if c == CLEAN or c in CORRUPTION_CONDITIONS
        ]
        for condition in conditions:
            if condition != CLEAN:
                manifests.append(
                    f"results/variants/{dataset}/{condition}/manifest.jsonl"
                )
            for model in models_of(dataset):
                for prompt in prompts_of(dataset):
                    scored.append(
                        f"results/scored/{model}/{dataset}/{condition}/{prompt}.csv"
                    )
    return {"scored": scored, "manifests": manifests}


def corruption_spec():
    """What the corruption metrics, tables and figures need from the configuration
    and the registry (vlmrobust.metrics / tables / figures)."""
    studied = [
        m for m in MODELS if any(m in models_of(d) for d in corruption_datasets())
    ]
    return {
        "models": {m: MODELS[m] for m in studied},
        "model_order": studied,
        "datasets": {
            d: {
                "group": DATASETS[d]["group"],
                "prompts": prompts_of(d),
                "models": models_of(d),
                "conditions": DATASETS[d]["conditions"],
            }
            for d in corruption_datasets()
        },
        "clean_condition": CLEAN,
        "perturbed_conditions": CORRUPTION_CONDITIONS,
        "conditions": {"clean": CLEAN, "perturbed": CORRUPTION_CONDITIONS},
        "bootstrap": {
            "resamples": config["metrics"]["bootstrap_resamples"],
            "seed": config["seed"],
            "level": config["metrics"]["ci_level"],
        },
    }


def corruption_metrics_spec(wildcards):
    return json.dumps(corruption_spec(), sort_keys=True)


def corruption_targets():
    """The study's final files (none when no model or no corruption condition runs)."""
    if not MODELS or not corruption_datasets():
        return []
    return (
        ["results/metrics/corruption/metrics.csv"]
        + corruption_tables()
        + corruption_figures()
    )


def corruption_tables():
    return [
        f"results/tables/corruption/{t}.{ext}"
        for t in corruption_table_names(corruption_spec())
        for ext in ("csv", "md", "tex")
    ]


def corruption_figures(ext=("png", "pdf")):
    return [
        f"figures/corruption/{f}.{e}"
        for f in corruption_figure_names(corruption_spec())
        for e in ext
    ]


# --- released outputs (reviewers) ----------------------------------------------------

IMPORTS = {
    f"{i['model']}/{i['dataset']}/{i['condition']}/{i['prompt']}": i
    for i in config["imports"]
}


def import_input(wildcards):
    spec = IMPORTS[wildcards.imported]
    files = {
        "released": spec["path"],
        "samples": f"results/samples/{spec['dataset']}/samples.jsonl",
    }
    if spec["references"]:
        files["references"] = spec["references"]
    return files


def import_spec(wildcards):
    spec = IMPORTS[wildcards.imported]
    return json.dumps(
        {**spec, "adapter": DATASETS[spec["dataset"]]["adapter"]}, sort_keys=True
    )


# --- judges --------------------------------------------------------------------------

DISTRACTION_CONDITIONS = [
    c for c, spec in CONDITIONS.items() if spec["perturbation"] == "distraction"
]


def judged_files():
    """Distractor-reference labels of every output under a distraction condition."""
    return [
        f"results/judged/{model}/{dataset}/{condition}/{prompt}.jsonl"
        for dataset, spec in DATASETS.items()
        for condition in spec["conditions"]
        if condition in DISTRACTION_CONDITIONS
        for model in models_of(dataset)
        for prompt in prompts_of(dataset)
    ]


def reference_judge_spec(wildcards):
    return json.dumps(config["judge"]["reference"], sort_keys=True)


# --- metrics, tables, figures: the semantic-distraction study -----------------------


def distraction_datasets():
    """Datasets answered under the clean condition and a distraction condition."""
    return [
        d
        for d, spec in DATASETS.items()
        if CLEAN in spec["conditions"]
        and any(c in DISTRACTION_CONDITIONS for c in spec["conditions"])
    ]


def distraction_spec(dataset):
    conditions = DATASETS[dataset]["conditions"]
    distracted = next(c for c in conditions if c in DISTRACTION_CONDITIONS)
    corrupt = next((c for c in conditions if c in CORRUPTION_CONDITIONS), None)
    return {
        "models": {m: MODELS[m] for m in models_of(dataset)},
        "model_order": models_of(dataset),
        "dataset": dataset,
        "clean_condition": CLEAN,
        "distracted_condition": distracted,
        "corruption_condition": corrupt,
        "bootstrap": {
            "resamples": config["metrics"]["bootstrap_resamples"],
            "seed": config["seed"],
            "level": config["metrics"]["ci_level"],
        },
    }


def distraction_spec_json(wildcards):
    return json.dumps(distraction_spec(wildcards.dataset), sort_keys=True)


def distraction_inputs(wildcards):
    spec = distraction_spec(wildcards.dataset)
    conditions = [
        c
        for c in (
            spec["clean_condition"],
            spec["distracted_condition"],
            spec["corruption_condition"],
        )
        if c
    ]
    scored = [
        f"results/scored/{model}/{wildcards.dataset}/{condition}/{prompt}.csv"
        for model in spec["model_order"]
        for condition in conditions
        for prompt in prompts_of(wildcards.dataset)
    ]
    judged = [
        f"results/judged/{model}/{wildcards.dataset}/{spec['distracted_condition']}/{prompt}.jsonl"
        for model in spec["model_order"]
        for prompt in prompts_of(wildcards.dataset)
    ]
    return {"scored": scored, "judged": judged}


def distraction_tables(dataset):
    return [
        f"results/tables/distraction/{dataset}/{t}.{ext}"
        for t in distraction_table_names(distraction_spec(dataset))
        for ext in ("csv", "md", "tex")
    ]


def distraction_figures(dataset, ext=("png", "pdf")):
    return [
        f"figures/distraction/{dataset}/{f}.{e}"
        for f in distraction_figure_names(distraction_spec(dataset))
        for e in ext
    ]


def distraction_targets():
    if not MODELS:
        return []
    return [
        path
        for d in distraction_datasets()
        for path in [f"results/metrics/distraction/{d}/metrics.csv"]
        + distraction_tables(d)
        + distraction_figures(d)
    ]


# --- construction of distraction benchmarks ------------------------------------------

CONSTRUCT = config["construct"]


def construct_input(wildcards):
    sources = CONSTRUCT[wildcards.construction]["from"]
    seeds = (
        CONSTRUCT[wildcards.construction]["seeds"]
        or "resources/distraction/seeds/seeds.jsonl"
    )
    return {
        "samples": [f"results/samples/{d}/samples.jsonl" for d in sources],
        "seeds": seeds,
    }


def construct_spec(wildcards):
    return json.dumps(CONSTRUCT[wildcards.construction], sort_keys=True)


def review_decisions(wildcards):
    """The decisions file of the constructed dataset built from this construction."""
    for spec in DATASETS.values():
        if spec["adapter"] == "constructed" and spec["path"] == (
            f"results/construct/{wildcards.construction}"
        ):
            return spec["decisions"]
    return f"resources/distraction/decisions-{wildcards.construction}.csv"


def existing_decisions(wildcards):
    path = review_decisions(wildcards)
    return [path] if Path(path).exists() else []


def construct_targets():
    return [f"results/construct/{name}/review.html" for name in CONSTRUCT]


def use_released(wildcards):
    """`--use-released` where an `imports` entry asks for the released labels."""
    key = f"{wildcards.model}/{wildcards.dataset}/{wildcards.condition}/{wildcards.prompt}"
    spec = IMPORTS.get(key)
    wanted = spec is not None and (spec["released_labels"] or spec["references"])
    return "--use-released" if wanted else ""


# --- Contrastive Region Masking (CRM) ------------------------------------------------

MASKING = config["masking"]
MASK_CONDITIONS = {
    c: spec.get("region", "specific")
    for c, spec in CONDITIONS.items()
    if spec["perturbation"] == "mask"
}


def masking_datasets():
    """Datasets answered clean and under at least one mask condition."""
    return [
        d
        for d, spec in DATASETS.items()
        if CLEAN in spec["conditions"]
        and any(c in MASK_CONDITIONS for c in spec["conditions"])
    ]


def masking_spec(dataset):
    return {
        "dataset": dataset,
        "models": {m: MODELS[m] for m in models_of(dataset)},
        "model_order": models_of(dataset),
        "clean_condition": CLEAN,
        "masked_conditions": {
            c: MASK_CONDITIONS[c]
            for c in DATASETS[dataset]["conditions"]
            if c in MASK_CONDITIONS
        },
        "examples": MASKING["examples"],
    }


def masking_spec_json(wildcards):
    return json.dumps(masking_spec(wildcards.dataset), sort_keys=True)


def compare_spec(wildcards):
    """What the comparison of one (model, dataset, mask condition) needs."""
    return json.dumps({k: MASKING[k] for k in MASKING_SPEC_KEYS}, sort_keys=True)


def compare_input(wildcards):
    out = f"results/outputs/{wildcards.model}/{wildcards.dataset}"
    cot, answer = MASKING["cot_prompt"], MASKING["answer_prompt"]
    return {
        "clean_cot": f"{out}/{CLEAN}/{cot}.jsonl",
        "clean_answer": f"{out}/{CLEAN}/{answer}.jsonl",
        "masked_cot": f"{out}/{wildcards.condition}/{cot}.jsonl",
        "masked_answer": f"{out}/{wildcards.condition}/{answer}.jsonl",
        "manifest": f"results/variants/{wildcards.dataset}/{wildcards.condition}/manifest.jsonl",
        "samples": f"results/samples/{wildcards.dataset}/samples.jsonl",
    }


def compared_files(dataset):
    spec = masking_spec(dataset)
    return [
        f"results/compared/{model}/{dataset}/{condition}.jsonl"
        for model in spec["model_order"]
        for condition in spec["masked_conditions"]
    ]


def compared_input(wildcards):
    return compared_files(wildcards.dataset)


def masking_tables(dataset):
    return [
        f"results/tables/masking/{dataset}/{t}.{ext}"
        for t in masking_table_names(masking_spec(dataset))
        for ext in ("csv", "md", "tex")
    ]


def masking_figures(dataset, ext=("png", "pdf", "html")):
    return [
        f"figures/masking/{dataset}/{f}.{e}"
        for f in masking_figure_names(masking_spec(dataset))
        for e in ext
    ]


def masking_targets():
    if not MODELS:
        return []
    return [
        path
        for d in masking_datasets()
        if models_of(d)
        for path in [f"results/metrics/masking/{d}/metrics.csv"]
        + masking_tables(d)
        + masking_figures(d)
    ]

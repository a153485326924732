# Helpers shared by the workflow steps (validation of the configuration, input functions).
import json
from pathlib import Path

from snakemake.exceptions import WorkflowError

from vlmrobust.config import (
    ConfigError,
    DEMO_ROOT,
    demo_family,
    load_yaml,
    validate_config,
    validate_registry,
)
from vlmrobust.workflow import alternation, ensure_cli_on_path

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
    """What the samples of a dataset are read from: the demo rows, or the local files."""
    spec = DATASETS[wildcards.dataset]
    if spec["adapter"] == "demo":
        return [f"{DEMO_ROOT}/{demo_family(spec['path'])}/rows.jsonl"]
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
    return targets


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


def infer_spec(wildcards):
    """The inference job (vlmrobust.infer.run.Job) as JSON."""
    dataset = DATASETS[wildcards.dataset]
    decoding = config["decoding"]
    return json.dumps(
        {
            "model": wildcards.model,
            "model_spec": REGISTRY[wildcards.model],
            "prompt": wildcards.prompt,
            "adapter": dataset["adapter"],
            "max_new_tokens": dataset["max_new_tokens"] or decoding["max_new_tokens"],
            "temperature": decoding["temperature"],
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

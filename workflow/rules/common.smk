# Helpers shared by the workflow steps (validation of the configuration, input functions).
import json
from pathlib import Path

from snakemake.exceptions import WorkflowError

from vlmrobust.config import ConfigError, DEMO_ROOT, demo_family, validate_config
from vlmrobust.workflow import alternation, ensure_cli_on_path

ensure_cli_on_path()

try:
    validate_config(config)
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration:\n{exc}") from None

DATASETS = config["datasets"]
CONDITIONS = config["conditions"]


# Keys of a dataset's configuration that do not change its samples (they must not
# trigger a rebuild of the samples when edited).
_NOT_SAMPLE_KEYS = {"conditions", "group"}


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
    return variant_manifests()

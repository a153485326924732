"""The run plan: a validated configuration and model registry, and the one place that
says which files a run has and where they live.

The Snakefile builds one :class:`RunPlan` and its input functions ask it; the CLI's
``--config`` builds the same plan, so a step run by hand reads and writes exactly the
files the workflow would. Paths are relative to the working directory (the repository
root in a normal run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import load_yaml, validate_config, validate_registry

#: ``prompts`` of a dataset answered with each sample's own prompt
DEFAULT_PROMPT = "default"


@dataclass
class RunPlan:
    """What one run answers: datasets, conditions, models and their files."""

    config: dict[str, Any]
    registry: dict[str, dict[str, Any]]
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> RunPlan:
        """Validate ``config`` (in place, defaults filled) and the registry it names."""
        registry_file = (config or {}).get("model_registry", "config/models.yaml")
        registry = validate_registry(load_yaml(registry_file), registry_file)["models"]
        return cls(validate_config(config, {"models": registry}), registry)

    @classmethod
    def load(cls, path: str | Path) -> RunPlan:
        """The plan of a configuration file (``config/config.yaml``, ``config/paper.yaml``)."""
        return cls.from_config(load_yaml(path))

    # ------------------------------------------------------------------ the run

    @property
    def datasets(self) -> dict[str, dict[str, Any]]:
        return self.config["datasets"]

    @property
    def conditions(self) -> dict[str, dict[str, Any]]:
        return self.config["conditions"]

    @property
    def models(self) -> dict[str, dict[str, Any]]:
        """The run's models (config ``models``) with their registry entries, in order."""
        return {m: self.registry[m] for m in self.config["models"]}

    @property
    def clean(self) -> str:
        """The condition every perturbed one is compared with."""
        return self.config["metrics"]["clean_condition"]

    @property
    def bootstrap(self) -> dict[str, Any]:
        """The paired bootstrap's settings as the metrics read them."""
        metrics = self.config["metrics"]
        return {
            "resamples": metrics["bootstrap_resamples"],
            "seed": self.config["seed"],
            "level": metrics["ci_level"],
        }

    def conditions_with(self, perturbation: str) -> list[str]:
        """The run's conditions applying one perturbation (``corruption``, ``mask``, ...)."""
        return [c for c, spec in self.conditions.items() if spec["perturbation"] == perturbation]

    def prompts_of(self, dataset: str) -> list[str]:
        """Prompt settings a dataset is answered under (``default`` = the dataset's own)."""
        return self.datasets[dataset]["prompts"] or [DEFAULT_PROMPT]

    def models_of(self, dataset: str) -> list[str]:
        """The run's models evaluated on a dataset (its ``models`` list, else all)."""
        chosen = self.datasets[dataset]["models"]
        return [m for m in self.models if chosen is None or m in chosen]

    def datasets_with(self, conditions: list[str]) -> list[str]:
        """Datasets answered clean and under at least one of ``conditions``."""
        return [
            d
            for d, spec in self.datasets.items()
            if self.clean in spec["conditions"] and any(c in spec["conditions"] for c in conditions)
        ]

    # ------------------------------------------------------------------ files

    @staticmethod
    def samples_path(dataset: str) -> str:
        return f"results/samples/{dataset}/samples.jsonl"

    @staticmethod
    def manifest_path(dataset: str, condition: str) -> str:
        return f"results/variants/{dataset}/{condition}/manifest.jsonl"

    @staticmethod
    def output_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return f"results/outputs/{model}/{dataset}/{condition}/{prompt}.jsonl"

    @staticmethod
    def scored_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return f"results/scored/{model}/{dataset}/{condition}/{prompt}.csv"

    @staticmethod
    def judged_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return f"results/judged/{model}/{dataset}/{condition}/{prompt}.jsonl"

    @staticmethod
    def compared_path(model: str, dataset: str, condition: str) -> str:
        return f"results/compared/{model}/{dataset}/{condition}.jsonl"

    def variant_manifests(self) -> list[str]:
        return [
            self.manifest_path(d, c) for d, spec in self.datasets.items() for c in spec["conditions"]
        ]

    def output_files(self, model: str) -> list[str]:
        """Gathered outputs of one model: every dataset x condition x prompt it answers."""
        return [
            self.output_path(model, d, c, p)
            for d, spec in self.datasets.items()
            if model in self.models_of(d)
            for c in spec["conditions"]
            for p in self.prompts_of(d)
        ]

    def scored_files(self) -> list[str]:
        return [
            path.replace("results/outputs/", "results/scored/").replace(".jsonl", ".csv")
            for model in self.models
            for path in self.output_files(model)
        ]

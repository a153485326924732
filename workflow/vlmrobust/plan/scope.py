"""The run's scope: the validated configuration and model registry, and what the run
answers (its datasets, conditions, models, prompt settings) as one frozen value,
:class:`RunPlan`. Its one iterator, :meth:`RunPlan.cells`, walks every cell (model,
dataset, condition, prompt) the other modules of :mod:`vlmrobust.plan` list files of.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..core.config import load_yaml, validate_config, validate_registry
from ..core.paths import path
from ..core.prompts import DEFAULT_PROMPT


class CellKey(NamedTuple):
    """One cell of the run: a model's answers to one dataset x condition under one prompt
    setting (an outputs file, its scored file, its judges' files)."""

    model: str
    dataset: str
    condition: str
    prompt: str

    @property
    def name(self) -> str:
        """``<model>/<dataset>/<condition>/<prompt>``: how ``imports`` entries are keyed."""
        return "/".join(self)

    def path(self, template: str, **names: object) -> str:
        """``template`` (:mod:`vlmrobust.core.paths`) filled in with this cell's names and
        ``names`` (e.g. ``extractor``)."""
        return path(template, **self._asdict(), **names)


def _import_key(entry: dict[str, Any]) -> str:
    return f"{entry['model']}/{entry['dataset']}/{entry['condition']}/{entry['prompt']}"


def _within(name: str, chosen: Collection[str] | None) -> bool:
    return chosen is None or name in chosen


@dataclass(frozen=True)
class RunPlan:
    """What one run answers: the configuration (``config``, validated, defaults filled)
    and the model registry (``registry``), their selections, and :meth:`cells`."""

    config: dict[str, Any]
    registry: dict[str, dict[str, Any]]
    #: what the plan's modules computed once for this plan (engine cells, judged files)
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

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

    @property
    def llm_cache_dir(self) -> str:
        """The content-addressed cache of every LLM call (judges, writers, fallback)."""
        return self.config["scoring"]["cache_dir"]

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

    # ------------------------------------------------------------------ released files

    @property
    def output_imports(self) -> dict[str, dict[str, Any]]:
        """``imports`` entries with a released outputs file, by output key
        ``<model>/<dataset>/<condition>/<prompt>`` (rule ``import_outputs``)."""
        return {_import_key(i): i for i in self.config["imports"] if i["path"]}

    @property
    def verdict_imports(self) -> dict[str, dict[str, Any]]:
        """Verdicts-only ``imports`` entries (``references``, no ``path``), by the same
        key: no output, no scored file; the judged file comes from the verdicts (rule
        ``import_verdicts``)."""
        return {_import_key(i): i for i in self.config["imports"] if not i["path"]}

    def has_outputs(self, model: str, dataset: str, condition: str, prompt: str) -> bool:
        """False for a verdicts-only import: released verdicts, no outputs."""
        return f"{model}/{dataset}/{condition}/{prompt}" not in self.verdict_imports

    def verdicts_only(self, dataset: str, condition: str) -> list[str]:
        """Models of a dataset whose ``condition`` has released verdicts but no outputs
        under every prompt setting (their correctness is unknown)."""
        return [
            m
            for m in self.models_of(dataset)
            if not any(self.has_outputs(m, dataset, condition, p) for p in self.prompts_of(dataset))
        ]

    # ------------------------------------------------------------------ the cells

    def cells(
        self,
        datasets: Collection[str] | None = None,
        conditions: Collection[str] | None = None,
        models: Collection[str] | None = None,
        prompts: Collection[str] | None = None,
        *,
        outputs: bool = True,
        imported: bool = True,
    ) -> Iterator[CellKey]:
        """Every cell of the run in the plan's order: each dataset (config order), its
        conditions (the dataset's order), its models (:meth:`models_of`), its prompt
        settings (:meth:`prompts_of`). Each filter keeps the cells whose name is among
        the given ones (None: every one; their order is not the order walked);
        ``outputs`` keeps only the cells with outputs (not a verdicts-only import) and
        ``imported=False`` leaves out the cells whose outputs are imported (no model
        answers them)."""
        skipped = set(self.verdict_imports) if outputs else set()
        if not imported:
            skipped |= set(self.output_imports)
        for dataset, spec in self.datasets.items():
            if not _within(dataset, datasets):
                continue
            for condition in spec["conditions"]:
                if not _within(condition, conditions):
                    continue
                for model in self.models_of(dataset):
                    if not _within(model, models):
                        continue
                    for prompt in self.prompts_of(dataset):
                        key = CellKey(model, dataset, condition, prompt)
                        if _within(prompt, prompts) and key.name not in skipped:
                            yield key

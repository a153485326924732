"""The run plan: a validated configuration and model registry, and what a run has:
its datasets, conditions and models, every file of every job (the templates of
:mod:`vlmrobust.core.paths` filled in) and each job's parameters.

The Snakefile builds one :class:`RunPlan` and its input functions and parameters ask it;
the study commands' ``--config`` builds the same plan. It sits above the stages (it
reads their settings' keys) and below the studies and the CLI.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from .core import paths
from .core.config import (
    ConfigError,
    demo_folder_family,
    demo_image_files,
    load_yaml,
    switch_backend,
    under_demo_idis,
    validate_config,
    validate_registry,
)
from .core.idis import AREA_PERTURBATIONS, IDIS_TASKS
from .core.paths import path
from .core.prompts import DEFAULT_PROMPT, PROMPTS, prompt_versions
from .core.registry import LOCAL_BACKENDS, inference_fields, model_resources
from .judges.crm import SPEC_KEYS as COMPARE_SPEC_KEYS

#: keys of a dataset's configuration that do not change its samples
NOT_SAMPLE_KEYS = frozenset(
    {
        "conditions",
        "group",
        "display",
        "prompts",
        "max_new_tokens",
        "temperature",
        "top_p",
        "n",
        "prompt_decoding",
        "image_size",
        "generation_config",
        "pixels",
        "fit",
        "shards",
        "scorer",
        "unparsed_choice",
    }
)
#: files of a local dataset folder the samples are read from: the rows ...
ROW_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
#: ... and the images they name (an edited image must rebuild the samples)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")
#: keys of a condition naming a samples file its perturbation draws figures from
POOL_KEYS = ("irrelevant_samples", "figure_samples")
#: keys of a condition naming a folder whose files its perturbation reads
FOLDER_KEYS = ("segments", "path")


def files_under(folder: str | Path, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """The files under ``folder`` as it is now (sorted; any case of ``suffixes``, None =
    every file), so that editing one in place reruns the job that reads them; [] for a
    folder that is not there (yet: a job writes it)."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file() and (suffixes is None or p.suffix.lower() in suffixes)
    )


def _import_key(entry: dict[str, Any]) -> str:
    return f"{entry['model']}/{entry['dataset']}/{entry['condition']}/{entry['prompt']}"


class JudgePlan:
    """The part of the run plan about the judges whose LLM may be local: the MathVerse
    judge's and the attribute extractors' files (their scope, validation samples and
    settings) and the LLM engines that write them where the LLM is local
    (docs/judges.md). A base of :class:`RunPlan`, whose scope (configuration, registry,
    datasets, outputs) it reads."""

    config: dict[str, Any]
    registry: dict[str, dict[str, Any]]

    @staticmethod
    def math_judged_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return path(
            paths.MATH_JUDGED, model=model, dataset=dataset, condition=condition, prompt=prompt
        )

    def math_judged_keys(self, only: str | None = None) -> list[tuple[str, str, str, str]]:
        """The outputs (model, dataset, condition, prompt) of every ``mathverse`` dataset
        (of the dataset ``only`` when given), each judged by the MathVerse judge."""
        return [
            (model, dataset, condition, prompt)
            for dataset, spec in self.datasets.items()
            if spec["adapter"] == "mathverse" and only in (None, dataset)
            for condition in spec["conditions"]
            for model in self.models_of(dataset)
            for prompt in self.prompts_of(dataset)
            if self.has_outputs(model, dataset, condition, prompt)
        ]

    def math_judged_files(self, only: str | None = None) -> list[str]:
        """MathVerse judge verdicts of every output of a ``mathverse`` dataset (of the
        dataset ``only`` when given)."""
        return [self.math_judged_path(*key) for key in self.math_judged_keys(only)]

    def math_judge_spec(self) -> dict[str, Any]:
        """The MathVerse judge (config ``judge.mathverse``), its cache under the run's."""
        spec = dict(self.config["judge"]["mathverse"])
        if spec.get("backend", "offline") != "offline" and spec.get("cache_dir") is None:
            spec["cache_dir"] = self.llm_cache_dir
        return spec

    # ------------------------------------------------------------------ Idis analyses

    def idis_task(self, dataset: str) -> str | None:
        """The attribute-analysis task of a dataset (``perception``, ``math``,
        ``waterbirds``) from its adapter, or None."""
        return IDIS_TASKS.get(self.datasets[dataset]["adapter"])

    @property
    def attribute_extractors(self) -> list[str]:
        """The attribute extractors (config ``judge.attributes.extractors``), main first."""
        return list(self.config["judge"]["attributes"]["extractors"])

    @staticmethod
    def attributes_path(extractor: str, model: str, dataset: str, condition: str, prompt: str):
        return path(
            paths.ATTRIBUTES,
            extractor=extractor,
            model=model,
            dataset=dataset,
            condition=condition,
            prompt=prompt,
        )

    def attribute_files(self, dataset: str, extractors: list[str] | None = None) -> list[str]:
        """Attribute labels of an Idis dataset (a dataset whose adapter has an attribute
        task) by every extractor (or those given): the outputs each one labels
        (:meth:`attribute_keys`, config ``judge.attributes.scope``)."""
        return [
            self.attributes_path(e, *key)
            for e in (self.attribute_extractors if extractors is None else extractors)
            for key in self.attribute_keys(e, dataset)
        ]

    def attribute_spec(
        self,
        extractor: str,
        dataset: str | None = None,
        model: str | None = None,
        condition: str | None = None,
        prompt: str | None = None,
    ) -> dict[str, Any]:
        """One extractor's setting, an LLM's cache under the run's. Given one labels
        file's dataset, model, condition and prompt, also its validation sample
        ``sample: {n, seed}`` where it has one (:meth:`attribute_sample`; the main
        extractor's setting never has one)."""
        spec = dict(self.config["judge"]["attributes"]["extractors"][extractor])
        if spec.get("backend", "offline") != "offline" and spec.get("cache_dir") is None:
            spec["cache_dir"] = self.llm_cache_dir
        if dataset is not None and model is not None and condition and prompt:
            n = self.attribute_sample(extractor, dataset, model, condition, prompt)
            if n is not None:
                seed = int(self.config["judge"]["attributes"]["validation_seed"])
                spec["sample"] = {"n": n, "seed": seed}
        return spec

    def attribute_keys(self, extractor: str, dataset: str) -> list[tuple[str, str, str, str]]:
        """(model, dataset, condition, prompt) of each outputs file ``extractor`` labels
        on ``dataset`` (condition, then model, then prompt order). None on a dataset
        without an attribute task, none for an extractor whose prompt does not exist
        for the task (``prompt: alternative`` is a perception prompt). Config
        ``judge.attributes``: on a dataset of ``datasets`` (null = all), ``scope: all``
        labels every output; ``scope: read`` only what a table or figure reads
        (docs/studies/idis.md, "Which traces are judged"): the main extractor every
        condition of the main prompt and of each mitigation prompt and the size
        conditions of every prompt; the others the main prompt, without the clean
        perception images (no distractor ratio: no Pearson r) when there are others.
        Wherever they are, the main extractor labels the attention-blocking outputs."""
        from .judges.attributes import PROMPT_FILES

        task = self.idis_task(dataset)
        settings = self.config["judge"]["attributes"]
        prompt_of = settings["extractors"][extractor].get("prompt") or "standard"
        if task is None or (task, prompt_of) not in PROMPT_FILES:
            return []
        keys = [
            (model, dataset, condition, prompt)
            for condition in self.datasets[dataset]["conditions"]
            for model in self.models_of(dataset)
            for prompt in self.prompts_of(dataset)
            if self.has_outputs(model, dataset, condition, prompt)
        ]
        main = extractor == self.attribute_extractors[0]
        blocked = set(self.blocked_files(dataset)) if main else set()
        analysed = settings["datasets"] is None or dataset in settings["datasets"]
        return [
            k
            for k in keys
            if (analysed and (settings["scope"] == "all" or self._attributes_read(main, task, k)))
            or self.blocked_path(*k) in blocked
        ]

    def _attributes_read(self, main: bool, task: str, key: tuple[str, str, str, str]) -> bool:
        """Whether a table or figure of the Idis study reads the labels of the outputs
        ``key`` by the main extractor (``main``) or by another one (its Table 4 row)."""
        from .core.prompts import prompt_role

        _, dataset, condition, prompt = key
        first = self.prompts_of(dataset)[0]
        if not main:
            alone = self.datasets[dataset]["conditions"] == [condition]
            return prompt == first and (task != "perception" or condition != self.clean or alone)
        return (
            prompt == first
            or prompt_role(prompt)[0] == "mitigation"
            or self.conditions[condition]["perturbation"] == "size"
        )

    def attribute_sample(
        self, extractor: str, dataset: str, model: str, condition: str, prompt: str
    ) -> int | None:
        """How many traces of one outputs file ``extractor`` labels: None (every one) for
        the main extractor or with ``judge.attributes.validation_sample`` null; else
        ceil(validation_sample / the number of condition files the extractor labels for
        this dataset, model and prompt; the file itself counted when it is not one)."""
        n = self.config["judge"]["attributes"]["validation_sample"]
        if n is None or extractor == self.attribute_extractors[0]:
            return None
        conditions = {
            c for m, _, c, p in self.attribute_keys(extractor, dataset) if (m, p) == (model, prompt)
        }
        return math.ceil(int(n) / len(conditions | {condition}))

    def attribute_extractors_of(self, dataset: str) -> list[str]:
        """The extractors whose labels the Idis views of ``dataset`` show, main first:
        none on a dataset without an attribute task or outside
        ``judge.attributes.datasets``; else those that label an output there."""
        chosen = self.config["judge"]["attributes"]["datasets"]
        if self.idis_task(dataset) is None or (chosen is not None and dataset not in chosen):
            return []
        return [e for e in self.attribute_extractors if self.attribute_keys(e, dataset)]

    # ------------------------------------------------------------------ LLM engines

    def judge_cells(self) -> list[JudgeCell]:
        """Every judged file of the MathVerse judge and the attribute extractors (the
        steps whose LLM may be local: :data:`vlmrobust.core.llms.ENGINE_STEPS`), in a
        fixed order: the VLM, then dataset, condition, prompt (and extractor)."""
        judge = self.math_judge_spec()
        cells = [
            self._judge_cell("judge.mathverse", judge, key, self.math_judged_path(*key))
            for key in self.math_judged_keys()
        ]
        for dataset in self.datasets:
            for e in self.attribute_extractors:
                for key in self.attribute_keys(e, dataset):
                    spec = self.attribute_spec(e, key[1], key[0], key[2], key[3])
                    out = self.attributes_path(e, *key)
                    cells.append(
                        self._judge_cell(f"judge.attributes.extractors.{e}", spec, key, out, e)
                    )
        return sorted(cells, key=lambda c: (c.model, c.dataset, c.condition, c.prompt, c.out))

    def _judge_cell(
        self,
        where: str,
        spec: dict[str, Any],
        key: tuple[str, str, str, str],
        out: str,
        extractor: str | None = None,
    ) -> JudgeCell:
        """One judged file: the outputs of ``key`` (model, dataset, condition, prompt)
        judged by the setting at ``where`` into ``out``; an extractor's validation
        sample is the one its setting carries (:meth:`attribute_spec`)."""
        return JudgeCell(
            step="attributes" if extractor else "mathverse",
            where=where,
            spec=spec,
            llm=spec.get("llm"),
            model=key[0],
            dataset=key[1],
            condition=key[2],
            prompt=key[3],
            extractor=extractor,
            outputs=self.output_path(*key),
            out=out,
            sample=(spec.get("sample") or {}).get("n"),
        )

    @property
    def llm_models(self) -> list[str]:
        """The local registry LLMs the run's judges name (answered by LLM engines)."""
        found = {c.llm for c in self._engine_judge_cells()}
        return sorted(m for m in found if m is not None)

    def _engine_judge_cells(self) -> list[JudgeCell]:
        cache = self.__dict__
        if "_engine_judge_cells_cache" not in cache:
            cache["_engine_judge_cells_cache"] = [
                c for c in self.judge_cells() if c.spec.get("backend") in LOCAL_BACKENDS
            ]
        return cache["_engine_judge_cells_cache"]

    def engine_judged_files(self) -> set[str]:
        """The judged files LLM engines write (no judge job of their own)."""
        return {c.out for c in self._engine_judge_cells()}

    def llm_engine_count(self, model: str) -> int:
        """How many LLM engines judge ``model``'s files: ``service.engines.<model>``, and
        at least as many as keep each within ``cluster.max_runtime`` (an engine asks for
        the registry runtime of each of its files); at most one per judged file."""
        files = sum(c.llm == model for c in self._engine_judge_cells())
        engines = self.engines_of(model)
        cap = self.config["cluster"]["max_runtime"]
        if cap:
            per_engine = max(1, cap // model_resources(self.registry[model])["runtime"])
            engines = max(engines, -(-files // per_engine))
        return min(engines, files)

    def llm_engines(self) -> list[tuple[str, str]]:
        """(model, label) of every LLM engine (:meth:`llm_engine_count` per local LLM)."""
        return [
            (model, str(k))
            for model in self.llm_models
            for k in range(self.llm_engine_count(model))
        ]

    def llm_engine_cells(self, model: str, label: str | int) -> list[JudgeCell]:
        """The judged files LLM engine ``label`` of ``model`` writes: the model's files
        dealt to its engines in turn."""
        cells = [c for c in self._engine_judge_cells() if c.llm == model]
        engines = self.llm_engine_count(model)
        return [c for k, c in enumerate(cells) if k % engines == int(label)]

    def llm_engine_plan(self, model: str, label: str | int) -> dict[str, Any]:
        """What an LLM engine job answers (:mod:`vlmrobust.jobs.llm_engine`): the model's
        registry entry and, per judged file, the step, its setting and its files."""
        cells = []
        for c in self.llm_engine_cells(model, label):
            cell = {"step": c.step, "spec": c.spec, "outputs": c.outputs, "out": c.out}
            cell["samples"] = self.samples_path(c.dataset)
            if c.step == "attributes":
                cell["manifest"] = self.manifest_path(c.dataset, c.condition)
                cell["task"] = self.idis_task(c.dataset)
                cell["extractor"] = c.extractor
            cells.append(cell)
        spec = {k: v for k, v in self.registry[model].items() if v is not None}
        spec = {k: spec[k] for k in (*INFERENCE_KEYS_LLM,) if k in spec}
        return {"model": model, "phase": 0, "engine": int(label), "spec": spec, "cells": cells}

    def llm_engine_inputs(self, model: str, label: str | int) -> list[str]:
        """Every file an LLM engine's cells read: outputs, samples, manifests, the
        extractors' word lists, and the model's own files (a built checkpoint)."""
        from .judges.attributes import resource_files

        files: dict[str, None] = {}
        for c in self.llm_engine_cells(model, label):
            names = [c.outputs, self.samples_path(c.dataset)]
            if c.step == "attributes":
                names.append(self.manifest_path(c.dataset, c.condition))
                names += [str(f) for f in resource_files(c.spec, self.idis_task(c.dataset))]
            files.update(dict.fromkeys(names))
        files.update(dict.fromkeys(self.model_files(model)))
        return list(files)

    def llm_engine_runtime(self, model: str, label: str | int) -> int:
        """The minutes an LLM engine asks for: the registry runtime per judged file."""
        runtime = model_resources(self.registry[model])["runtime"]
        return runtime * len(self.llm_engine_cells(model, label))


@dataclass
class RunPlan(JudgePlan):
    """What one run answers: datasets, conditions, models and their files."""

    config: dict[str, Any]
    registry: dict[str, dict[str, Any]]

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
        return path(paths.SAMPLES, dataset=dataset)

    @staticmethod
    def samples_report_path(dataset: str) -> str:
        """The samples stage's report (counts, skipped rows) beside its samples."""
        return path(paths.SAMPLES_REPORT, dataset=dataset)

    @staticmethod
    def manifest_path(dataset: str, condition: str) -> str:
        return path(paths.MANIFEST, dataset=dataset, condition=condition)

    @staticmethod
    def output_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return path(paths.OUTPUTS, model=model, dataset=dataset, condition=condition, prompt=prompt)

    @staticmethod
    def scored_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return path(paths.SCORED, model=model, dataset=dataset, condition=condition, prompt=prompt)

    @staticmethod
    def judged_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return path(paths.JUDGED, model=model, dataset=dataset, condition=condition, prompt=prompt)

    @staticmethod
    def compared_path(model: str, dataset: str, condition: str) -> str:
        return path(paths.COMPARED, model=model, dataset=dataset, condition=condition)

    @staticmethod
    def hallucination_path(model: str, dataset: str, condition: str) -> str:
        return path(paths.HALLUCINATION, model=model, dataset=dataset, condition=condition)

    def variant_manifests(self) -> list[str]:
        return [
            self.manifest_path(d, c)
            for d, spec in self.datasets.items()
            for c in spec["conditions"]
        ]

    def output_keys(self, model: str) -> list[tuple[str, str, str, str]]:
        """(model, dataset, condition, prompt) of every outputs file of one model: each
        dataset x condition x prompt it answers (a verdicts-only import has none)."""
        return [
            (model, d, c, p)
            for d, spec in self.datasets.items()
            if model in self.models_of(d)
            for c in spec["conditions"]
            for p in self.prompts_of(d)
            if self.has_outputs(model, d, c, p)
        ]

    def output_files(self, model: str) -> list[str]:
        """Gathered outputs of one model (:meth:`output_keys`)."""
        return [self.output_path(*key) for key in self.output_keys(model)]

    def scored_files(self) -> list[str]:
        return [self.scored_path(*key) for model in self.models for key in self.output_keys(model)]

    def scored_of(self, dataset: str, models: list[str], conditions: list[str]) -> list[str]:
        """The scored files of ``models`` on one dataset under ``conditions`` and every
        prompt setting (a verdicts-only import has none)."""
        return [
            self.scored_path(m, dataset, c, p)
            for m in models
            for c in conditions
            for p in self.prompts_of(dataset)
            if self.has_outputs(m, dataset, c, p)
        ]

    # ------------------------------------------------------------------ jobs
    # What one job of a per-job stage reads and its parameters: the Snakefile's input
    # functions and parameters ask these.

    def samples_spec(self, dataset: str) -> dict[str, Any]:
        """The dataset's configuration without the keys that do not change its samples
        (editing those must not rebuild the samples)."""
        spec = self.datasets[dataset]
        return {k: v for k, v in spec.items() if k not in NOT_SAMPLE_KEYS}

    def samples_sources(self, dataset: str, questions: bool = True) -> list[str]:
        """What the samples of a dataset are read from: the demo rows (also for another
        adapter reading a demo family's folder, e.g. VisArgs), the constructed candidates
        and their decisions file, or the local files; plus, for a VisArgs dataset whose
        ``question_writer`` is an LLM, the questions file of the ``questions`` step.
        A local folder lists its row files (:data:`ROW_SUFFIXES`, any case) and, for its
        image files, their listing (:meth:`image_listing`), so fixing an image reruns
        the samples job."""
        spec = self.datasets[dataset]
        writer = (spec.get("question_writer") or {}).get("backend", "template")
        extra = []
        if questions and spec["adapter"] == "visargs" and writer != "template":
            extra = [path(paths.QUESTIONS, dataset=dataset)]
        if under_demo_idis(spec["path"]):  # written by the demo_idis job
            return [paths.DEMO_IDIS_SUMMARY, *extra]
        family = demo_folder_family(spec["path"])
        if family is not None:  # written by the demo_data job, images declared one by one
            n = self.config["demo"]["n_per_family"]
            rows = path(paths.DEMO_ROWS, family=family)
            return [rows, *demo_image_files(family, n), *extra]
        if spec["adapter"] == "constructed":
            decisions = [spec["decisions"]] if spec["decisions"] else []
            return [f"{spec['path']}/candidates.jsonl", *decisions]
        if spec["source"] == "local":
            rows = files_under(self._local_folder(dataset), ROW_SUFFIXES)
            images = self._reads_local_images(dataset)
            return rows + ([path(paths.IMAGE_LISTING, dataset=dataset)] if images else []) + extra
        return extra

    def _local_folder(self, dataset: str) -> Path:
        """The folder of a dataset read from ``source: local``; a missing one is an error."""
        root = Path(self.datasets[dataset]["path"])
        if not root.exists():
            raise ConfigError(f"datasets.{dataset}.path: folder {root} does not exist")
        return root

    def image_listing(self, dataset: str) -> tuple[str, list[str]] | None:
        """The image files (:data:`IMAGE_SUFFIXES`, any case) of a dataset's local folder
        as it is now, and the listing that stands for them among the samples job's
        inputs (``paths.IMAGE_LISTING``; the rules bring it up to date when the DAG is
        built, :func:`vlmrobust.core.workflow.update_listing`); None where the samples
        read no image of a local folder: the hub's datasets, the demo's (its images
        are the outputs of the demo jobs), a constructed one, and ``images: false``
        (reviewers without the images)."""
        if not self._reads_local_images(dataset):
            return None
        files = files_under(self._local_folder(dataset), IMAGE_SUFFIXES)
        return path(paths.IMAGE_LISTING, dataset=dataset), files

    def _reads_local_images(self, dataset: str) -> bool:
        spec = self.datasets[dataset]
        local = spec["source"] == "local" and spec["adapter"] != "constructed"
        demo = under_demo_idis(spec["path"]) or demo_folder_family(spec["path"]) is not None
        return local and not demo and spec.get("images", True)

    def condition_inputs(self, condition: str) -> list[str]:
        """Files a condition's variants job reads besides the samples: the samples files
        it draws figures from (:data:`POOL_KEYS`), its verification decisions, every
        file a ``*_file`` key names (a prompt, an object list) where it exists, the
        files of the folders it names (:data:`FOLDER_KEYS`: cut-outs, expression
        images), and the demo's Idis assets when a folder lies where the ``demo_idis``
        job writes. Editing any of them in place reruns the condition."""
        spec = self.conditions[condition]
        found = [spec[k] for k in POOL_KEYS if spec.get(k)]
        if spec.get("verification"):
            found.append(spec["verification"]["decisions"])
        for key, value in sorted(spec.items()):
            if key.endswith("_file") and isinstance(value, str) and Path(value).is_file():
                found.append(value)
        if any(under_demo_idis(v) for v in spec.values() if isinstance(v, str)):
            found.append(paths.DEMO_IDIS_SUMMARY)
        for key in FOLDER_KEYS:
            value = spec.get(key)
            if isinstance(value, str) and not under_demo_idis(value):
                found += files_under(value)
        return found

    def model_files(self, model: str) -> list[str]:
        """What a model's answers depend on besides its registry entry: a demo model's
        build record (its job builds the checkpoint), else every file of a local
        checkpoint folder (``local_path``) as it is now, so that weights replaced at the
        same path rerun the model's jobs; [] for a model loaded by name."""
        entry = self.registry[model]
        if entry.get("demo_seed") is not None:
            return [path(paths.MODEL_RECORD, model=model)]
        if entry.get("local_path"):
            return files_under(entry["local_path"])
        return []

    def unparsed_choice(self, dataset: str) -> str:
        """What an unparsed multiple-choice answer of a dataset becomes when scored
        (``wrong`` | ``most-similar``): the dataset's ``unparsed_choice``, else the run's
        ``scoring.unparsed_choice``."""
        return (
            self.datasets[dataset]["unparsed_choice"] or self.config["scoring"]["unparsed_choice"]
        )

    def scoring_modes(self, datasets: list[str]) -> dict[str, Any]:
        """How ``datasets`` are scored (``scoring.mode``): the mode, the datasets scored
        by the harness and by the project's extraction, those of the harness's that its
        LLM judge would score and that are scored by offline rules instead (no
        ``scoring.harness_judge``), and whether the other mode is compared."""
        from .core.harness import HARNESS_JUDGED, HARNESS_SCORED

        scoring = self.config["scoring"]
        harness = scoring["mode"] == "harness"
        known = [d for d in datasets if d in self.datasets]
        by_harness = [d for d in known if harness and self.datasets[d]["scorer"] in HARNESS_SCORED]
        offline = [
            d
            for d in by_harness
            if self.datasets[d]["scorer"] in HARNESS_JUDGED and not scoring["harness_judge"]
        ]
        return {
            "mode": scoring["mode"],
            "harness": by_harness,
            "extract": [d for d in known if d not in by_harness],
            "offline": offline,
            "compare": bool(scoring["compare_modes"]),
        }

    def score_params(self, dataset: str) -> dict[str, Any]:
        """What scoring a dataset's outputs needs: its scorer, the LLM extraction fallback
        (``scoring.llm_fallback``, None: none), what an unparsed choice becomes, the LLM
        cache, and the scoring mode (``scoring.mode``, ``compare_modes``, the run's
        seed for the harness's random guesses, ``scoring.harness_judge``)."""
        return {
            "scorer": self.datasets[dataset]["scorer"],
            "fallback": self.config["scoring"]["llm_fallback"],
            "unparsed_choice": self.unparsed_choice(dataset),
            "cache_dir": self.llm_cache_dir,
            "mode": self.config["scoring"]["mode"],
            "compare_modes": "--compare-modes" if self.config["scoring"]["compare_modes"] else "",
            "seed": self.config["seed"],
            "judge": self.config["scoring"]["harness_judge"],
        }

    def reference_judge_spec(self) -> dict[str, Any]:
        """The distractor-reference judge (config ``judge.reference``)."""
        return self.config["judge"]["reference"]

    def construct_inputs(self, name: str) -> dict[str, Any]:
        """A construction's source samples and seed distractors (``construct.<name>``)."""
        spec = self.config["construct"][name]
        return {
            "samples": [self.samples_path(d) for d in spec["from"]],
            "seeds": spec["seeds"] or "resources/distraction/seeds/seeds.jsonl",
        }

    def stage_decoding(self, prompt: str, dataset: str) -> tuple[float, int]:
        """(temperature, max_new_tokens) of a prompt on a dataset: the prompt's own on
        that dataset (``datasets.<d>.prompt_decoding.<prompt>``) first; then the CRM
        stages have their own (config ``masking``), every other prompt the dataset's own
        settings (``datasets.<d>.temperature``, ``max_new_tokens``), else the run's
        ``decoding``."""
        decoding, masking = self.config["decoding"], self.config["masking"]
        ds = self.datasets[dataset]
        tokens = ds["max_new_tokens"] or decoding["max_new_tokens"]
        own = self.prompt_decoding(prompt, dataset)
        if prompt == masking["cot_prompt"]:
            temperature = masking["cot_temperature"]
            tokens = masking["cot_max_new_tokens"] or tokens
        elif prompt == masking["answer_prompt"]:
            temperature = masking["answer_temperature"]
            tokens = masking["answer_max_new_tokens"] or tokens
        else:
            temperature = (
                decoding["temperature"] if ds["temperature"] is None else ds["temperature"]
            )
        return own.get("temperature", temperature), int(own.get("max_new_tokens", tokens))

    def prompt_decoding(self, prompt: str, dataset: str) -> dict[str, Any]:
        """What ``datasets.<d>.prompt_decoding`` sets for ``prompt`` ({} = nothing)."""
        own = (self.datasets[dataset].get("prompt_decoding") or {}).get(prompt) or {}
        return {k: v for k, v in own.items() if v is not None}

    def draws(self, dataset: str, prompt: str | None = None) -> tuple[int, float]:
        """(draws per question, top-p) of a dataset, or of one prompt on it: the prompt's
        own (``prompt_decoding``), else the dataset's, else the run's ``decoding``."""
        decoding, ds = self.config["decoding"], self.datasets[dataset]
        own = self.prompt_decoding(prompt, dataset) if prompt is not None else {}
        n = ds["n"] if ds["n"] is not None else decoding["n"]
        top_p = ds["top_p"] if ds["top_p"] is not None else decoding["top_p"]
        return int(own.get("n", n)), float(own.get("top_p", top_p))

    # ------------------------------------------------------------------ demo models

    def demo_init(self, model: str) -> str | None:
        """The checkpoint a demo model starts training from: a reasoning demo model whose
        base is a demo model is fine-tuned from the base's trained weights."""
        spec = self.registry[model]
        base = spec.get("base")
        if (
            spec.get("role") == "reasoning"
            and base
            and self.registry[base]["demo_seed"] is not None
        ):
            return str(self.registry[base]["local_path"])
        return None

    def demo_model_spec(self, model: str) -> dict[str, Any]:
        """How the demo model ``model`` is built (the ``demo_model`` job, ``vlmrobust
        demo-model --spec``): its seed, the pixel limits it is evaluated with, and
        unless ``demo.train.enabled`` is false the training split, the training
        settings (``direct`` answers for a base model, ``think`` traces for a reasoning
        one) and the checkpoint it starts from."""
        spec = self.registry[model]
        if spec["demo_seed"] is None:
            raise ValueError(f"models.{model}: not a demo model (it has no demo_seed)")
        options = spec.get("options") or {}
        out: dict[str, Any] = {
            "seed": spec["demo_seed"],
            "options": {k: options[k] for k in ("min_pixels", "max_pixels") if k in options},
            "train_dir": None,
            "train": None,
            "init": None,
        }
        if spec.get("demo_sizes"):  # only where set: the default models' spec is unchanged
            out["sizes"] = dict(spec["demo_sizes"])
        if spec.get("demo_twin"):  # a family's twin: random weights, never trained
            out["twin"] = spec["demo_twin"]
            return out
        train = self.config["demo"]["train"]
        if not train["enabled"]:
            return out
        init = self.demo_init(model)
        out["train_dir"] = paths.DEMO_TRAIN_ROOT
        out["init"] = init
        out["train"] = {
            "steps": train["reasoning_steps"] if init else train["steps"],
            "pretrain_steps": 0 if init else train["pretrain_steps"],
            "schedule": train["schedule"],
            "batch_size": train["batch_size"],
            "lr": train["lr"],
            "warmup": 0 if init else train["warmup"],
            "threads": train["threads"],
            "style": "think" if spec.get("role") == "reasoning" else "direct",
            "weights": dict(train["weights"]),
        }
        return out

    def demo_model_inputs(self, model: str) -> list[str]:
        """What the ``demo_model`` job reads: the training split and the initial checkpoint."""
        spec = self.demo_model_spec(model)
        inputs = []
        if spec["train"] is not None:
            inputs.append(paths.DEMO_TRAIN_SUMMARY)
        if spec["init"] is not None:
            inputs.append(f"{spec['init']}/vlmrobust_demo.json")
        return inputs

    def infer_context(self, model: str, dataset: str, condition: str, prompt: str) -> list[str]:
        """A second-stage prompt's input: the same model's first-stage outputs (CRM)."""
        needs = PROMPTS[prompt].needs if prompt in PROMPTS else None
        return [] if needs is None else [self.output_path(model, dataset, condition, needs)]

    def infer_spec(
        self, model: str, dataset: str, prompt: str, shard: int = 0, shards: int = 1
    ) -> dict[str, Any]:
        """The inference job (:class:`vlmrobust.infer.run.Job`): only what changes its
        outputs, so editing a model's display name, family, role, base or studies reruns
        no inference (:func:`vlmrobust.core.registry.inference_fields`)."""
        adapter = self.datasets[dataset]["adapter"]
        temperature, max_new_tokens = self.stage_decoding(prompt, dataset)
        n, top_p = self.draws(dataset, prompt)
        model_spec = inference_fields(self.registry[model], prompt)
        backend = self.cell_backend(model, dataset)
        if backend != model_spec["backend"]:  # config `engines: papers`
            model_spec = switch_backend(model_spec, backend)
        spec = {
            "model": model,
            "model_spec": model_spec,
            "prompt": prompt,
            "prompt_versions": prompt_versions(prompt, adapter),
            "adapter": adapter,
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "n": n,
            "seed": self.config["seed"],
            "shard": int(shard),
            "shards": int(shards),
        }
        if self.datasets[dataset]["image_size"] is not None:
            spec["image_size"] = int(self.datasets[dataset]["image_size"])
        # only where the dataset chooses: a job of the model's own choice (the
        # registry's options.generation_config, part of model_spec) keeps its spec
        if self.datasets[dataset].get("generation_config") is not None:
            spec["generation_config"] = str(self.datasets[dataset]["generation_config"])
        # only where the dataset sets limits for this model: the others keep their spec
        pixels = self.pixel_limits(model, dataset)
        if pixels is not None:
            spec["pixels"] = pixels
        return spec

    def pixel_limits(self, model: str, dataset: str) -> dict[str, Any] | None:
        """The pixel limits a dataset shows ``model``'s images at instead of the
        registry's ``options.min_pixels`` / ``max_pixels``: with ``datasets.<d>.pixels:
        harness``, the defaults of the lmms-eval chat wrapper the model was run through
        (``harness.lmms_eval``; :func:`vlmrobust.core.harness.harness_pixels`; None for a
        model without one); with ``datasets.<d>.fit: qwen-vl-utils``, only the resize
        before the processor (``fit``: :func:`vlmrobust.core.harness.vision_utils_fit`,
        the registry's limits kept) for a model whose images the workflow hands a
        processor (backends hf, vllm; openai with a ``base_url``); None (the model's
        own) otherwise."""
        spec = self.datasets[dataset]
        if spec.get("pixels") == "harness":
            from .core.harness import harness_pixels

            return harness_pixels(self.registry[model])
        backend = self.cell_backend(model, dataset)
        served = backend == "openai" and bool(self.registry[model].get("base_url"))
        if spec.get("fit") != "qwen-vl-utils" or not (backend in LOCAL_BACKENDS or served):
            return None
        from .core.harness import vision_utils_fit

        return {"fit": vision_utils_fit()}

    def shard_path(
        self, model: str, dataset: str, condition: str, prompt: str, shard: int, shards: int
    ) -> str:
        names = {"model": model, "dataset": dataset, "condition": condition, "prompt": prompt}
        return path(paths.SHARD, **names, shard=shard, shards=shards)

    # ------------------------------------------------------------------ engines

    def cell_backend(self, model: str, dataset: str) -> str:
        """The backend ``model`` answers ``dataset`` with: the registry's, or with config
        ``engines: papers`` the engine the dataset's paper ran (``papers_engine``) for a
        local model (backends hf, vllm) where the dataset names one."""
        backend = self.registry[model]["backend"]
        if backend in LOCAL_BACKENDS and self.config["engines"] == "papers":
            return self.datasets[dataset].get("papers_engine") or backend
        return backend

    def model_backends(self, model: str) -> list[str]:
        """The backends ``model``'s cells are answered with, the registry's first."""
        own = self.registry[model]["backend"]
        found = {self.cell_backend(model, d) for d in self.datasets if model in self.models_of(d)}
        return [own] + sorted(found - {own})

    def _cells(self, model: str, phase: int, backend: str) -> list[tuple[str, str, str]]:
        """``model``'s cells (dataset, condition, prompt) of one phase (0: prompts on the
        images alone; 1: prompts built on the model's own first-stage outputs, which run
        after them) answered with ``backend``, in a fixed order; imported ones left out."""
        cache = self.__dict__.setdefault("_cells_cache", {})
        if (model, phase, backend) not in cache:
            cache[(model, phase, backend)] = [
                (d, c, p)
                for d, spec in self.datasets.items()
                if model in self.models_of(d) and self.cell_backend(model, d) == backend
                for c in spec["conditions"]
                for p in self.prompts_of(d)
                if self.has_outputs(model, d, c, p)
                and f"{model}/{d}/{c}/{p}" not in self.output_imports
                and bool(self.infer_context(model, d, c, p)) == bool(phase)
            ]
        return cache[(model, phase, backend)]

    def split_cells(self, model: str) -> bool:
        """Config ``service.split_cells``, for a local model."""
        local = self.registry[model]["backend"] in LOCAL_BACKENDS
        return local and bool(self.config["service"]["split_cells"])

    def cell_shards(self, model: str, dataset: str) -> int:
        """The shards of ``model``'s cells of ``dataset``: the dataset's ``shards``, times
        the model's engines with ``service.split_cells`` (each engine answers the same
        share of every cell)."""
        shards = int(self.datasets[dataset]["shards"])
        if self.split_cells(model):
            shards *= self.engines_of(model, self.cell_backend(model, dataset))
        return shards

    def engines_of(self, model: str, backend: str | None = None) -> int:
        """How many engine jobs (each the model loaded once, on the model's own GPUs:
        :mod:`vlmrobust.infer.engine`) answer ``model``'s cells of one phase and backend
        (config ``service.engines``), and at least as many as keep each engine within
        config ``cluster.max_runtime``: an engine answers its cells one after another, so
        it asks for their registry runtimes added up (a partition refuses more than its
        MaxTime; :meth:`engine_weight`)."""
        service = self.config["service"]
        engines = int(service["engines"].get(model, service["default_engines"]))
        cap = self.config["cluster"]["max_runtime"]
        if cap:
            backend = backend or self.registry[model]["backend"]
            runtime = model_resources(self.registry[model])["runtime"]
            shards = [
                sum(int(self.datasets[d]["shards"]) for d, _, _ in self._cells(model, ph, backend))
                for ph in (0, 1)
            ]
            if self.split_cells(model):  # every engine: its share of every cell
                engines = max(engines, -(-runtime * max(shards) // cap))
            else:
                engines = max(engines, -(-max(shards) // max(1, cap // runtime)))
        return engines

    def engine_jobs(
        self, model: str, phase: int, backend: str | None = None
    ) -> list[tuple[str, str, str, int, int]]:
        """The inference jobs (dataset, condition, prompt, shard, shards) of ``model`` in
        ``phase`` answered with ``backend`` (None: the registry's), in a fixed order:
        each cell's shards one after another."""
        backend = backend or self.registry[model]["backend"]
        return [
            (d, c, p, i, n)
            for d, c, p in self._cells(model, phase, backend)
            for n in [self.cell_shards(model, d)]
            for i in range(n)
        ]

    def engine_weight(self, model: str, dataset: str) -> Fraction:
        """The share of the registry runtime one job of ``model`` on ``dataset`` asks for:
        a whole cell's (1) or, with ``service.split_cells``, one engine's share of it."""
        if not self.split_cells(model):
            return Fraction(1)
        return Fraction(1, self.engines_of(model, self.cell_backend(model, dataset)))

    def engine_label(self, model: str, backend: str, index: int) -> str:
        """An engine's name within its model and phase: its index for the registry's
        backend, else the backend and the index (``hf0``: config ``engines: papers``)."""
        own = backend == self.registry[model]["backend"]
        return str(index) if own else f"{backend}{index}"

    def engine_backend(self, model: str, label: str | int) -> tuple[str, int]:
        """The backend and index of the engine ``label`` (:meth:`engine_label`)."""
        text = str(label)
        found = re.fullmatch(r"(hf|vllm)?(\d+)", text)
        if found is None:
            raise ValueError(f"models.{model}: no engine named {text!r}")
        return found.group(1) or self.registry[model]["backend"], int(found.group(2))

    def engines(self) -> list[tuple[str, int, str]]:
        """Every engine of the run: (model, phase, label) of each local model (backends
        hf, vllm), phase and backend that has cells."""
        return [
            (model, phase, self.engine_label(model, backend, k))
            for model, spec in self.models.items()
            if spec["backend"] in LOCAL_BACKENDS
            for backend in self.model_backends(model)
            for phase in (0, 1)
            for k in range(
                min(self.engines_of(model, backend), len(self.engine_jobs(model, phase, backend)))
            )
        ]

    def engine_files(self) -> list[str]:
        """The plan file of every engine (rule ``engine_plan``)."""
        return [path(paths.ENGINE, model=m, phase=p, engine=k) for m, p, k in self.engines()]

    def engine_cells(
        self, model: str, phase: int, engine: str | int
    ) -> list[tuple[str, str, str, int, int]]:
        """The cells (dataset, condition, prompt, shard, shards) engine ``engine``
        answers: the model's jobs of one phase and backend, dealt to its engines in turn
        (with ``service.split_cells``: shard k of every cell to engine k)."""
        backend, index = self.engine_backend(model, engine)
        engines = self.engines_of(model, backend)
        jobs = self.engine_jobs(model, phase, backend)
        return [c for k, c in enumerate(jobs) if k % engines == index]

    def engine_runtime(self, model: str, phase: int, engine: str | int) -> int:
        """The minutes an engine asks for: its jobs' registry runtimes added up, each
        job's by its :meth:`engine_weight`."""
        runtime = model_resources(self.registry[model])["runtime"]
        cells = self.engine_cells(model, phase, engine)
        return math.ceil(runtime * sum(self.engine_weight(model, d) for d, *_ in cells))

    def engine_clients(self, model: str, phase: int, engine: str | int) -> list[str]:
        """The shard files engine ``engine`` writes (its outputs)."""
        return [self.shard_path(model, *cell) for cell in self.engine_cells(model, phase, engine)]

    def engine_plan(self, model: str, phase: int, engine: str | int) -> dict[str, Any]:
        """What an engine job answers (:mod:`vlmrobust.infer.engine`): each cell's job
        spec (what changes its outputs) and files."""
        cells = []
        for d, c, p, i, n in self.engine_cells(model, phase, engine):
            context = self.infer_context(model, d, c, p)
            cells.append(
                {
                    "spec": self.infer_spec(model, d, p, i, n),
                    "manifest": self.manifest_path(d, c),
                    "samples": self.samples_path(d),
                    "context": context[0] if context else None,
                    "out": self.shard_path(model, d, c, p, i, n),
                }
            )
        label = str(engine)
        index: int | str = int(label) if label.isdigit() else label
        return {"model": model, "phase": phase, "engine": index, "cells": cells}

    def engine_inputs(self, model: str, phase: int, engine: str | int) -> list[str]:
        """Every file an engine's cells read: manifests, samples, first-stage outputs and
        the model's own files (its build record or checkpoint)."""
        files: dict[str, None] = {}
        for d, c, p, _, _ in self.engine_cells(model, phase, engine):
            for f in (
                self.manifest_path(d, c),
                self.samples_path(d),
                *self.infer_context(model, d, c, p),
            ):
                files[f] = None
        for f in self.model_files(model):
            files[f] = None
        return list(files)

    def shard_files(self, model: str, dataset: str, condition: str, prompt: str) -> list[str]:
        n = self.cell_shards(model, dataset)
        return [self.shard_path(model, dataset, condition, prompt, i, n) for i in range(n)]

    def gathered_cells(self) -> list[tuple[str, list[str]]]:
        """Every outputs file rule ``gather_outputs`` writes (a model's answers, not an
        import), with its shard files."""
        return [
            (self.output_path(*key), self.shard_files(*key))
            for model in self.models
            for key in self.output_keys(model)
            if "/".join(key) not in self.output_imports
        ]

    @staticmethod
    def area_path(dataset: str, condition: str) -> str:
        return path(paths.AREAS, dataset=dataset, condition=condition)

    def area_files(self, dataset: str) -> list[str]:
        """Distractor areas of an Idis dataset's conditions that place distractors."""
        if self.idis_task(dataset) is None:
            return []
        return [
            self.area_path(dataset, c)
            for c in self.datasets[dataset]["conditions"]
            if self.conditions[c]["perturbation"] in AREA_PERTURBATIONS
            and self.conditions[c].get("kind") != "textual"  # released textual: no image
        ]

    @staticmethod
    def blocked_path(model: str, dataset: str, condition: str, prompt: str) -> str:
        return path(paths.BLOCKED, model=model, dataset=dataset, condition=condition, prompt=prompt)

    def blocking_prompt(self, dataset: str) -> str:
        """The prompt setting whose outputs the attention-blocking step re-answers."""
        chosen = self.config["idis"]["blocking"]["prompt"]
        return chosen if chosen is not None else self.prompts_of(dataset)[0]

    def blocked_files(self, dataset: str) -> list[str]:
        """Attention-blocking re-answers (config ``idis.blocking``): its models that run
        locally (``hf``, ``vllm``: the checkpoint is loaded through transformers) x its conditions the dataset has, under the blocking prompt;
        only for a dataset with an attribute task and an attribute extractor."""
        blocking = self.config["idis"]["blocking"]
        if self.idis_task(dataset) is None or not self.attribute_extractors:
            return []
        if blocking["datasets"] is not None and dataset not in blocking["datasets"]:
            return []
        prompt = self.blocking_prompt(dataset)
        if prompt not in self.prompts_of(dataset):
            return []
        return [
            self.blocked_path(model, dataset, condition, prompt)
            for model in self.models_of(dataset)
            if model in blocking["models"] and self.registry[model]["backend"] in LOCAL_BACKENDS
            for condition in blocking["conditions"]
            if condition in self.datasets[dataset]["conditions"]
            and self.has_outputs(model, dataset, condition, prompt)
        ]

    def blocking_spec(self, model: str, dataset: str, prompt: str) -> dict[str, Any]:
        """One attention-blocking job besides its files: the model's inference job (one
        shard), what is blocked, and how the re-answers are scored."""
        blocking = self.config["idis"]["blocking"]
        infer = self.infer_spec(model, dataset, prompt, 0, 1)
        # blocking swaps transformers' attention kernel: the checkpoint through hf,
        # whichever engine answered the outputs
        if infer["model_spec"]["backend"] != "hf":
            infer["model_spec"] = switch_backend(infer["model_spec"], "hf")
        return {
            "infer": infer,
            "settings": list(blocking["settings"]),
            "max_new_tokens": int(blocking["max_new_tokens"]),
            "limit": blocking["limit"],
            "scorer": self.datasets[dataset]["scorer"],
            "unparsed_choice": self.unparsed_choice(dataset),
        }

    def areas_spec(self) -> dict[str, Any]:
        """The distractor-area step's setting (config ``idis.areas``)."""
        return dict(self.config["idis"]["areas"])

    def judged_files(self) -> list[str]:
        """Distractor-reference labels of every output under a distraction condition."""
        distraction = self.conditions_with("distraction")
        return [
            self.judged_path(model, dataset, condition, prompt)
            for dataset, spec in self.datasets.items()
            for condition in spec["conditions"]
            if condition in distraction
            for model in self.models_of(dataset)
            for prompt in self.prompts_of(dataset)
        ]

    def compare_spec(self) -> dict[str, Any]:
        """What the CRM comparison of one (model, dataset, mask condition) needs."""
        return {k: self.config["masking"][k] for k in COMPARE_SPEC_KEYS}

    def compare_inputs(self, model: str, dataset: str, condition: str) -> dict[str, str]:
        masking = self.config["masking"]
        cot, answer = masking["cot_prompt"], masking["answer_prompt"]
        return {
            "clean_cot": self.output_path(model, dataset, self.clean, cot),
            "clean_answer": self.output_path(model, dataset, self.clean, answer),
            "masked_cot": self.output_path(model, dataset, condition, cot),
            "masked_answer": self.output_path(model, dataset, condition, answer),
            "manifest": self.manifest_path(dataset, condition),
            "samples": self.samples_path(dataset),
        }

    def hallucination_judge_spec(self) -> dict[str, Any]:
        """The hallucination judge (config ``masking.hallucination``; the offline judge's
        embedding model from ``masking.model_dir`` unless it names its own)."""
        masking = self.config["masking"]
        spec = dict(masking["hallucination"])
        if spec.get("backend", "offline") == "offline" and spec.get("model_dir") is None:
            spec["model_dir"] = masking["model_dir"]
        return spec

    @property
    def llm_cache_dir(self) -> str:
        """The content-addressed cache of every LLM call (judges, writers, fallback)."""
        return self.config["scoring"]["cache_dir"]


#: registry keys an LLM engine loads its model from (the VLMs' inference keys)
INFERENCE_KEYS_LLM = (
    "kind",
    "backend",
    "hf_repo",
    "local_path",
    "revision",
    "demo_seed",
    "options",
)


@dataclass(frozen=True)
class JudgeCell:
    """One judged file of the MathVerse judge or an attribute extractor: the step, its
    setting (``where``: the config key; ``spec``: resolved, :mod:`vlmrobust.core.llms`),
    the registry LLM answering it (``llm``, None for an offline or inline setting), the
    VLM outputs it reads, the file it writes and, for a validation extractor, the most
    traces it judges (``sample``; None = all)."""

    step: str
    where: str
    spec: dict[str, Any]
    llm: str | None
    model: str
    dataset: str
    condition: str
    prompt: str
    extractor: str | None
    outputs: str
    out: str
    sample: int | None

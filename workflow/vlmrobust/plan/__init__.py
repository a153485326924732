"""The run plan: a validated configuration and model registry (:class:`RunPlan`, the
run's frozen scope), and, as functions of it, every file of every job (the templates of
:mod:`vlmrobust.core.paths` filled in) and each job's parameters, one module per topic
of the rules:

- :mod:`.scope`: :class:`RunPlan` (datasets, conditions, models, prompt settings,
  imports) and its iterator over the run's cells;
- :mod:`.data`: samples, variants, local folders' files and listings, constructions,
  imports of released files;
- :mod:`.inference`: backends, inference job specs, decoding and draws, a model's own
  files and resources, outputs, the demo models;
- :mod:`.engines`: the engine jobs of the local VLMs and of the judges' local LLMs
  (their cells, plans, inputs, runtimes, rule names), the shards and their gathering;
- :mod:`.scoring`: scored files, scoring parameters and modes;
- :mod:`.judges`: the judges' files and settings (:class:`JudgeCell`);
- :mod:`.idis`: the Idis analyses (attribute task, distractor areas, attention blocking);
- :mod:`.hooks`: what the Snakefile does besides its rules (rule ``all``'s targets,
  listings, checks around the DAG).

The Snakefile builds one :class:`RunPlan` and its rules call these functions through
one wildcard adapter (``workflow/rules/common.smk``); the study commands' ``--config``
builds the same plan. The package sits above the stages (it reads their settings' keys)
and below the studies and the CLI.
"""

from __future__ import annotations

from .data import IMAGE_SUFFIXES, files_under
from .judges import JudgeCell
from .scope import CellKey, RunPlan

__all__ = ["IMAGE_SUFFIXES", "CellKey", "JudgeCell", "RunPlan", "files_under"]

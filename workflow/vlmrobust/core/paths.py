"""Where a run's files live: every result path template, written once.

The Snakemake rules use these templates as their inputs and outputs (the ``{names}``
are the rules' wildcards) and the run plan (:mod:`vlmrobust.plan`) fills them in with
:func:`path` to list a run's files. Paths are relative to the working directory, the
repository root in a normal run.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the environment variable naming the folder of real benchmark copies that the tests
#: and benchmarks on real files read (docs/real-data.md: its layout and how to make it)
REAL_DATA_ENV = "VLMROBUST_REAL_DATA"
#: where that folder is when the variable is not set (relative to the repository root)
REAL_DATA_DEFAULT = "data/real"


def real_data(root: str | os.PathLike = ".") -> Path:
    """The real-data folder: ``$VLMROBUST_REAL_DATA``, else ``data/real`` under ``root``
    (the repository); it need not exist (what reads it skips or says so)."""
    return Path(os.environ.get(REAL_DATA_ENV) or Path(root) / REAL_DATA_DEFAULT)


#: what a name of the run that fills a template may be (a dataset, a condition, a model,
#: a construction, an attribute extractor): the config and registry schemas allow only
#: these (:func:`vlmrobust.core.config.load_schema` puts it into their ``$defs/name``),
#: and it is the Snakefile's constraint of ``{name}``, a study's table or figure, whose
#: name carries a condition's when the study has several (``table1_corrupt-s3``); the
#: other wildcards are constrained to the run's own names
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"

#: one dataset in the sample schema, and the samples stage's report beside it
SAMPLES = "results/samples/{dataset}/samples.jsonl"
SAMPLES_REPORT = "results/samples/{dataset}/report.json"
#: the images of a local dataset folder, one line each with its size and modification
#: time: the samples job's input in their place, rewritten when the DAG is built if one
#: of them was edited, added or removed (:func:`vlmrobust.core.workflow.update_listing`)
IMAGE_LISTING = "results/listings/{dataset}.tsv"
#: a VisArgs dataset's questions, written by its LLM question writer
QUESTIONS = "results/questions/{dataset}/questions.jsonl"
#: VisArgs' images downloaded from their URLs (a cache shared by the datasets)
VISARGS_IMAGES = "results/raw/visargs/images"
#: one condition applied to one dataset: the variant manifest (images beside it)
MANIFEST = "results/variants/{dataset}/{condition}/manifest.jsonl"
#: one model's answers to one manifest under one prompt setting, and its shards
OUTPUTS = "results/outputs/{model}/{dataset}/{condition}/{prompt}.jsonl"
SHARD = "results/outputs/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.jsonl"
#: released outputs and released verdicts, by ``<model>/<dataset>/<condition>/<prompt>``
IMPORTED_OUTPUTS = "results/outputs/{imported}.jsonl"
IMPORTED_VERDICTS = "results/judged/{imported}.jsonl"
#: the plan of one engine of a local model (the cells it answers), and a demo model's build record
ENGINE = "results/engines/{model}/phase{phase}/engine{engine}.json"
MODEL_DIR = "results/models/{model}"
MODEL_RECORD = "results/models/{model}/vlmrobust_demo.json"
#: where the embedded demo datasets are written (one folder per family)
DEMO_ROOT = "results/raw/demo"
DEMO_ROWS = "results/raw/demo/{family}/rows.jsonl"
DEMO_SUMMARY = "results/raw/demo/summary.json"
#: where the demo's Idis slice is written (ImageNet-9, MathVerse, LogicVista and
#: Waterbirds layouts, distractor cut-outs, handwritten expressions)
DEMO_IDIS_ROOT = "results/raw/demo-idis"
DEMO_IDIS_SUMMARY = "results/raw/demo-idis/summary.json"
#: where the demo models' training split is written (never evaluated)
DEMO_TRAIN_ROOT = "results/raw/demo-train"
DEMO_TRAIN_SUMMARY = "results/raw/demo-train/summary.json"
#: the scored outputs, their summary, and the run's last check of failed requests
SCORED = "results/scored/{model}/{dataset}/{condition}/{prompt}.csv"
SCORE_SUMMARY = "results/scored/summary.csv"
REQUESTS = "results/requests.txt"
#: the judges' labels of one outputs file
JUDGED = "results/judged/{model}/{dataset}/{condition}/{prompt}.jsonl"
MATH_JUDGED = "results/judged-mathverse/{model}/{dataset}/{condition}/{prompt}.jsonl"
ATTRIBUTES = "results/judged-attributes/{extractor}/{model}/{dataset}/{condition}/{prompt}.jsonl"
#: Idis: distractor areas of a condition, attention-blocking re-answers
AREAS = "results/areas/{dataset}/{condition}.jsonl"
BLOCKED = "results/blocked/{model}/{dataset}/{condition}/{prompt}.jsonl"
#: region masking: the CRM comparison of one mask condition, and its hallucination labels
COMPARED = "results/compared/{model}/{dataset}/{condition}.jsonl"
HALLUCINATION = "results/judged-hallucination/{model}/{dataset}/{condition}.jsonl"
#: a construction's candidates and its review page
CONSTRUCTION = "results/construct/{construction}"
CANDIDATES = "results/construct/{construction}/candidates.jsonl"
REVIEW_PAGE = "results/construct/{construction}/review.html"
#: a study's metrics, warnings, views, tables and figures, by the study's folder
METRICS = "results/metrics/{folder}/metrics.csv"
WARNINGS = "results/metrics/{folder}/warnings.txt"
VIEWS = "results/views/{folder}"
TABLES = "results/tables/{folder}"
FIGURES = "figures/{folder}"
#: one table or figure of a folder, without its extension (.csv .md .tex; .png .pdf .html)
TABLE = "results/tables/{folder}/{name}"
FIGURE = "figures/{folder}/{name}"
#: the explorer (docs/explorer.md): a static site; one folder per cell (a model's answers
#: to one dataset x condition x prompt, paired with its clean ones) and per variant set
#: (thumbnails, parameters), then the index and the app
EXPLORER = "results/explorer"
EXPLORER_CELL = "results/explorer/cells/{model}/{dataset}/{condition}/{prompt}"
#: the cells of one model on one dataset: one job writes them (a job per cell would
#: spend most of its time starting)
EXPLORER_CELLS = "results/explorer/cells/{model}/{dataset}"
EXPLORER_VARIANTS = "results/explorer/variants/{dataset}/{condition}"
EXPLORER_INDEX = "results/explorer/index.js"
EXPLORER_PAGE = "results/explorer/index.html"
#: the content-addressed cache of every LLM call (config ``scoring.cache_dir``)
LLM_CACHE = "results/cache/llm"


def path(template: str, **names: object) -> str:
    """``template`` with its ``{names}`` filled in (every one must be given)."""
    return template.format(**names)

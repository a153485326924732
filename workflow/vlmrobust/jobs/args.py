"""The argument declarations that more than one command shares, each declared once here.

The command tables of the jobs modules (``COMMANDS`` in each ``jobs/<stage>.py``) take
these; an argument only one command has is declared in its entry.
"""

from __future__ import annotations

from ..core.commands import Arg, arg, required


def spec(what: str) -> Arg:
    """``--spec``: ``what`` (a job's part of the configuration) as the rule passes it."""
    return required("--spec", help=f"{what} as JSON (as the rule passes it)")


SAMPLES = required("--samples", help="samples JSONL of the dataset")
MANIFEST = required("--manifest", help="variant manifest JSONL")
OUTPUTS = required("--outputs", help="outputs JSONL")
OUT_OUTPUTS = required("--out", help="outputs JSONL")
OUT_SCORED = required("--out", help="scored CSV")
SEED = arg("--seed", type=int, default=0, help="global seed (default 0)")
CACHE = arg("--cache-dir", help="LLM cache folder (default results/cache/llm)")
THREADS = arg("--threads", type=int, default=0, help="torch CPU threads (0: torch's)")
WAIT_LOG = arg(
    "--wait-log-s",
    type=float,
    default=600.0,
    help="log what the engine waits on after this many seconds without an answer, and "
    "again every as many (config service.wait_log_s; 0: never)",
)
UNPARSED_CHOICE = arg(
    "--unparsed-choice",
    choices=["wrong", "most-similar"],
    help="a multiple-choice answer no rule reads: wrong, an extraction failure (default), "
    "or the most similar option, MathVista's official convention (the rule passes the "
    "dataset's unparsed_choice, else scoring.unparsed_choice)",
)
# A run configuration (forecast, balance).
RUN_CONFIG = arg("config", help="run configuration YAML, e.g. config/paper.yaml")
# One dataset of the configuration (samples, write-questions).
DATASET_NAME = required("--name", help="the dataset's name (key under `datasets`)")
DATASET_SPEC = spec("the dataset's configuration")
# A local review server (review, idis-review, concepts-review).
SERVE = (
    arg("--host", default="127.0.0.1", help="bind address"),
    arg("--port", type=int, default=0, help="port (0: any free port)"),
    arg("--image-base", help="folder relative image paths start from (default: .)"),
)
# The decisions file and what review / idis-review do with it.
DECIDE = (
    required("--decisions", help="decisions CSV (created when first used)"),
    *SERVE,
    arg("--reviewer", help="name written with each decision"),
    arg("--page", help="write a static, read-only page here instead of serving"),
    arg("--report", action="store_true", help="print the verification report"),
)
# The study commands (metrics, table, figure, page, views): the study and scope, its spec
# and inputs (or --config), and what they write.
STUDY_VIEW = arg("name", help="table1, figure4, ...")
STUDY = (
    required("--study", help="corruption, distraction, masking, ..."),
    arg("--scope", default="", help="the dataset of a per-dataset study ('' if pooled)"),
    arg("--config", help="a run configuration YAML: the plan gives the spec and inputs"),
    arg("--spec", help="or: the study's specification as JSON (as the rule passes it)"),
    arg("--inputs", help="and its input files as JSON {name: [paths]}"),
)
STUDY_METRICS_OUT = (
    arg("--out", help="metrics CSV (default: the study's)"),
    arg("--warnings", help="warnings text file (default: the study's)"),
)
STUDY_VIEWS_OUT = (
    arg("--metrics", help="the study's metrics CSV (default: the study's)"),
    arg("--out-dir", help="output folder (default: the study's)"),
)


def study_args(command: str) -> tuple[Arg, ...]:
    """The arguments of the study command ``command``."""
    if command == "metrics":
        return STUDY + STUDY_METRICS_OUT
    named = () if command == "views" else (STUDY_VIEW,)
    return named + STUDY + STUDY_VIEWS_OUT

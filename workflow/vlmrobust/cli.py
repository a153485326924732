"""``vlmrobust``: one subcommand per job of the workflow, so every step runs without
Snakemake.

The CLI is a table (:data:`COMMANDS`) from subcommand to the function that runs it, its
help and its arguments; the functions are in :mod:`vlmrobust.jobs` (one module per stage,
imported only when its command runs) and take the parsed options as keyword arguments.
A job is given every file it reads and writes and its part of the configuration (the
``--spec`` JSON the rule passes): the rules are the one place that resolves them from a
configuration. To run one job by hand, let Snakemake print or rerun it::

    snakemake -n -p --forcerun results/scored/demo-base/demo-chart/corrupt/default.csv
    snakemake --cores 1 --forcerun results/scored/demo-base/demo-chart/corrupt/default.csv

The study commands (``metrics``, ``table``, ``figure``, ``page``, ``views``) also take
``--config FILE``, the reviewers' route from released files to the tables and figures::

    vlmrobust table table1 --study corruption --config config/config.yaml
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from vlmrobust_demo.commands import DEMO_COMMANDS

from . import __version__
from .core.commands import Arg, Command, arg, required
from .core.config import ConfigError, load_yaml, validate_config
from .core.pixels import DEFAULT_MAX_PIXELS

log = logging.getLogger("vlmrobust")

# ------------------------------------------------------ commands of the CLI's own


def check_config(config: str, show: bool) -> None:
    """Validate a run configuration and print what it holds (``--show``: all of it)."""
    valid = validate_config(load_yaml(config))
    n_variants = sum(len(d["conditions"]) for d in valid["datasets"].values())
    print(
        f"{config}: valid ({len(valid['datasets'])} datasets, "
        f"{len(valid['conditions'])} conditions, {n_variants} dataset x condition pairs, "
        f"{len(valid['models'])} models)"
    )
    if show:
        print(json.dumps(valid, indent=2))


# --------------------------------------------------------------------------- the table


def spec(what: str) -> Arg:
    return required("--spec", help=f"{what} as JSON (as the rule passes it)")


SAMPLES = required("--samples", help="samples JSONL of the dataset")
MANIFEST = required("--manifest", help="variant manifest JSONL")
OUTPUTS = required("--outputs", help="outputs JSONL")
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


def study_args(command: str) -> tuple[Arg, ...]:
    """The arguments of a study command: the study and scope, its spec and inputs (or
    --config), and what it writes."""
    named = () if command in ("metrics", "views") else (arg("name", help="table1, figure4, ..."),)
    common = (
        required("--study", help="corruption, distraction, masking, ..."),
        arg("--scope", default="", help="the dataset of a per-dataset study ('' if pooled)"),
        arg("--config", help="a run configuration YAML: the plan gives the spec and inputs"),
        arg("--spec", help="or: the study's specification as JSON (as the rule passes it)"),
        arg("--inputs", help="and its input files as JSON {name: [paths]}"),
    )
    if command == "metrics":
        return common + (
            arg("--out", help="metrics CSV (default: the study's)"),
            arg("--warnings", help="warnings text file (default: the study's)"),
        )
    return (
        named
        + common
        + (
            arg("--metrics", help="the study's metrics CSV (default: the study's)"),
            arg("--out-dir", help="output folder (default: the study's)"),
        )
    )


#: subcommand -> (function, help, arguments): the whole command line in one place
COMMANDS: dict[str, Command] = {
    "check-config": Command(
        check_config,
        "validate a run configuration (and the model registry)",
        (
            arg("config", help="run configuration YAML, e.g. config/config.yaml"),
            arg("--show", action="store_true", help="print it with every default filled in"),
        ),
    ),
    **DEMO_COMMANDS,
    "forecast": Command(
        ".forecast:forecast",
        "forecast a run before it runs: every model call's requests and tokens (VLMs, "
        "judges, extractors, writers), GPU-hours, money, wall time, disk",
        (
            arg("config", help="run configuration YAML, e.g. config/paper.yaml"),
            arg("--gpus", type=int, default=8, help="GPUs for the wall time (default 8)"),
            arg(
                "--gpu-type",
                help="scale the rates to this GPU (a gpu_types key of forecast/throughput.yaml: "
                "H100, A100, H200; default the table's own)",
            ),
            arg(
                "--engines",
                type=int,
                help="what if every local model and LLM had this many engines "
                "(service.engines; default the configuration's)",
            ),
            arg(
                "--pilot",
                help="an outputs folder of a pilot run (results/outputs): its measured mean "
                "generated tokens replace the assumed ones where it has them",
            ),
            arg("--json", dest="as_json", action="store_true", help="print JSON instead"),
            arg("--json-out", help="also write the JSON to this file"),
            arg("--no-sources", action="store_true", help="leave out the list of sources"),
        ),
    ),
    "balance": Command(
        ".forecast:balance",
        "size every local model's engines from the forecast (service.split_cells, "
        "service.engines) so the run's makespan on N GPUs nears GPU-hours / N",
        (
            arg("config", help="run configuration YAML, e.g. config/paper.yaml"),
            arg("--gpus", type=int, default=8, help="GPUs of the run (default 8)"),
            arg("--gpu-type", help="as for `forecast` (default the table's own)"),
            arg(
                "--tolerance",
                type=float,
                default=0.15,
                help="the makespan may exceed GPU-hours / GPUs by this share (default 0.15)",
            ),
            arg("--write", action="store_true", help="write the choice into the config file"),
        ),
    ),
    "samples": Command(
        ".data:samples",
        "datasets -> samples: load one dataset into the sample schema",
        (
            required("--name", help="the dataset's name (key under `datasets`)"),
            spec("the dataset's configuration"),
            required("--out", help="samples JSONL (images go beside it)"),
            required("--report", help="report JSON (counts, skipped rows)"),
        ),
    ),
    "write-questions": Command(
        ".data:write_questions",
        "VisArgs: write the questions of one dataset with its LLM question writer",
        (
            required("--name", help="the dataset's name (key under `datasets`)"),
            spec("the dataset's configuration"),
            arg(
                "--cache-dir", help="LLM cache (default: question_writer.cache_dir, else the run's)"
            ),
            required("--out", help="questions JSONL (results/questions/<dataset>/questions.jsonl)"),
        ),
    ),
    "variants": Command(
        ".perturb:variants",
        "samples -> variants: apply one condition",
        (
            required("--condition", help="the condition (key under `conditions`)"),
            spec("the condition's configuration"),
            SAMPLES,
            arg("--seed", type=int, default=0, help="global seed (default 0)"),
            arg("--threads", type=int, default=1, help="worker processes"),
            arg(
                "--max-pixels",
                type=int,
                default=DEFAULT_MAX_PIXELS,
                help="the dataset's max_pixels: no image beyond it (default "
                f"{DEFAULT_MAX_PIXELS}, samples.max_pixels' default)",
            ),
            arg(
                "--image-format",
                choices=["png", "webp"],
                default="png",
                help="how written images are stored (config variants.format; default png)",
            ),
            required("--out", help="variant manifest JSONL (images go beside it)"),
        ),
    ),
    "infer": Command(
        ".infer:infer",
        "variants -> outputs: one model on one manifest (resumable)",
        (
            spec("the inference job (model, prompt, decoding, shard)"),
            MANIFEST,
            SAMPLES,
            arg("--context", help="a second-stage prompt's first-stage outputs (CRM)"),
            THREADS,
            required("--out", help="outputs JSONL (progress goes to <out>.partial)"),
        ),
    ),
    "infer-engine": Command(
        ".infer:infer_engine",
        "one local model, loaded once, answers every cell of an engine plan (resumable)",
        (
            required("--plan", help="engine plan JSON (rule engine_plan)"),
            THREADS,
            WAIT_LOG,
        ),
    ),
    "llm-engine": Command(
        ".llm_engine:llm_engine",
        "one local LLM (a judge's, an extractor's), loaded once, judges every file of an "
        "LLM engine plan (resumable through the LLM cache)",
        (
            required("--plan", help="LLM engine plan JSON (rule engine_plan)"),
            THREADS,
            WAIT_LOG,
        ),
    ),
    "vllm-serve": Command(
        ".infer:vllm_serve",
        "serve a backend-vllm model through vLLM's OpenAI-compatible server (the openai "
        "backend answers through it)",
        (
            required("--config", help="the run's configuration (registry, environments)"),
            required("--model", help="the registry id of a backend-vllm model"),
            arg("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)"),
            arg("--port", type=int, default=8000, help="port (default 8000)"),
            arg(
                "--print",
                dest="print_only",
                action="store_true",
                help="print the command instead of running it",
            ),
        ),
    ),
    "preflight": Command(
        ".preflight:preflight",
        "before the run: replay N released rows per model through the configured engine and "
        "compare responses (identical share, first differing token), accuracy and time "
        "(docs/preflight.md)",
        (
            required("--config", help="run configuration YAML, e.g. config/paper.yaml"),
            required(
                "--release",
                help="the release folder: <hub id with / as __>.samples.jsonl per model "
                "(lmms-eval samples), there or under model_outputs/",
            ),
            arg("--rows", type=int, default=50, help="rows replayed per model (default 50)"),
            arg("--seed", type=int, default=0, help="seed of the rows drawn (default 0)"),
            arg(
                "--min-identical",
                type=float,
                default=0.9,
                help="fail (exit 1, naming the model) when a model's share of identical "
                "responses is below this (default 0.9)",
            ),
            arg("--models", nargs="+", help="these models (default: every model of the dataset)"),
            arg("--dataset", default="distract-bench", help="the dataset (default distract-bench)"),
            arg(
                "--condition",
                help="the condition the release answered (default: the dataset's distraction "
                "condition, else the clean one)",
            ),
            arg("--prompt", help="the prompt setting (default: the dataset's only one)"),
            arg("--samples", help="the dataset's samples file, if built (default: built here)"),
            arg(
                "--work",
                help="work folder, kept (a rerun reuses its answers); default a temporary one",
            ),
            arg("--diffs", type=int, default=3, help="differing rows printed per model (3)"),
            THREADS,
            arg("--out", help="the JSON report"),
        ),
    ),
    "gather": Command(
        ".infer:gather",
        "concatenate the shards of one output in manifest order",
        (
            MANIFEST,
            required("--out", help="outputs JSONL"),
            arg("shards", nargs="+", help="shard files"),
        ),
    ),
    "import-outputs": Command(
        ".score:import_outputs",
        "released results as the outputs of one job (config `imports`)",
        (
            spec("the `imports` entry"),
            SAMPLES,
            arg(
                "--samples-report",
                help="the samples stage's report.json: the ids it skipped as bad rows, "
                "whose released answers are left out (counted)",
            ),
            required("--released", help="the released file"),
            arg("--manifest", help="the condition's variant manifest JSONL (format jsonl)"),
            required("--out", help="outputs JSONL"),
        ),
    ),
    "import-verdicts": Command(
        ".score:import_verdicts",
        "released distractor-reference verdicts alone as the judged file of one job",
        (
            arg("--spec", help="the `imports` entry as JSON (recorded; not needed)"),
            SAMPLES,
            required("--references", help="the released verdicts file"),
            required("--out", help="judged JSONL"),
        ),
    ),
    "score": Command(
        ".score:score",
        "outputs -> scored: the benchmark's rules on every answer",
        (
            OUTPUTS,
            SAMPLES,
            required("--scorer", help="scoring rules (a benchmark's name or generic)"),
            arg("--fallback", help="scoring.llm_fallback as JSON (LLM answer extraction)"),
            UNPARSED_CHOICE,
            CACHE,
            arg("--use-released", action="store_true", help="keep released correctness"),
            required("--out", help="scored CSV"),
            arg(
                "--mode",
                choices=["extract", "harness"],
                default="extract",
                help="scoring.mode: the project's extraction, or the papers' harness",
            ),
            arg(
                "--compare-modes",
                action="store_true",
                help="scoring.compare_modes: also the other mode's verdict",
            ),
            arg("--seed", type=int, default=0, help="seed of the harness's random guesses"),
            arg("--judge", help="scoring.harness_judge as JSON (null: offline rules)"),
        ),
    ),
    "score-summary": Command(
        ".score:score_summary",
        "accuracy and extraction failures per model x dataset",
        (
            required("--out", help="summary CSV"),
            arg("scored", nargs="*", help="scored CSV files"),
        ),
    ),
    "check-requests": Command(
        ".score:check_requests",
        "the run's last check: requests that failed after every retry",
        (
            required("--on-error", choices=["fail", "exclude"], help="scoring.on_request_error"),
            required("--out", help="report of the failed requests (results/requests.txt)"),
            arg("--log", dest="log_file", help="also write the message here"),
            arg("outputs", nargs="*", help="outputs JSONL files"),
        ),
    ),
    "score-released": Command(
        ".score:score_released",
        "score released lmms-eval / VLMEvalKit results with this project's rules",
        (
            arg(
                "--format",
                required=True,
                help="lmms-eval (samples JSONL), vlmevalkit (predictions), mathvista "
                "(MathVista's output_<model>.json), logicvista (LogicVista's "
                "<model>-answers.json)",
            ),
            arg("--dataset", required=True, help="benchmark: mathvista, mmmu, ..."),
            arg("--questions", required=True, help="the dataset's rows (JSON, JSONL, parquet)"),
            arg("--samples", required=True, help="released samples / predictions file"),
            arg("--id-field", default=None, help="the released rows' id field (dotted)"),
            arg(
                "--on-bad-row",
                choices=["skip", "error"],
                default="skip",
                help="a question row that cannot be a sample: skip it and count it and its "
                "released rows (default), or stop",
            ),
            UNPARSED_CHOICE,
            arg(
                "--extraction-field",
                default=None,
                help="score this released field (e.g. extraction: MathVista's official "
                "GPT-4 extraction) instead of the response",
            ),
            arg(
                "--response-field",
                default=None,
                help="mathvista/logicvista: the field holding the response (default: the "
                "format's: response / answer)",
            ),
            arg("--model", default="released", help="model id recorded in the rows"),
            arg("--condition", default="clean", help="condition recorded in the rows"),
            arg("--out", required=True, help="scored CSV"),
            arg(
                "--mode",
                choices=["extract", "harness"],
                default="extract",
                help="the project's extraction (default), or the papers' harness "
                "(lmms-eval's task code; docs/scoring.md)",
            ),
            arg(
                "--compare-modes",
                action="store_true",
                help="also the other mode's verdict (column other_correct)",
            ),
        ),
    ),
    "judge-reference": Command(
        ".judges:judge_reference",
        "outputs -> does each output refer to the distractor?",
        (
            spec("the reference judge (judge.reference)"),
            required("--outputs", help="outputs JSONL of a distraction condition"),
            required("--samples", help="samples JSONL (meta.edit: the distractor)"),
            CACHE,
            arg("--use-released", action="store_true", help="keep released verdicts"),
            required("--out", help="judged JSONL (one row per output)"),
        ),
    ),
    "judge-mathverse": Command(
        ".judges:judge_mathverse",
        "outputs -> MathVerse two-stage judge verdicts (extract, then judge)",
        (
            spec("the MathVerse judge (judge.mathverse)"),
            required("--outputs", help="outputs JSONL of a mathverse dataset"),
            required("--samples", help="samples JSONL (meta.question_for_eval)"),
            required("--out", help="judged JSONL (one row per output: extracted, verdict)"),
        ),
    ),
    "judge-attributes": Command(
        ".judges:judge_attributes",
        "outputs -> Idis attribute labels of each reasoning trace (one extractor)",
        (
            spec("the extractor's setting"),
            required("--extractor", help="extractor name (judge.attributes.extractors)"),
            required("--task", choices=["perception", "math", "waterbirds"], help="attribute task"),
            required("--outputs", help="outputs JSONL of an Idis dataset"),
            required("--samples", help="samples JSONL (the target's label or concept family)"),
            required("--manifest", help="variant manifest JSONL (the distractors' classes)"),
            required("--out", help="attributes JSONL (one row per output)"),
        ),
    ),
    "idis-areas": Command(
        ".perturb:idis_areas",
        "variants -> distractor and target areas and r_area per variant",
        (
            spec("the area setting (idis.areas)"),
            MANIFEST,
            required("--samples", help="samples JSONL (target masks, original images)"),
            required("--out", help="areas JSONL (one row per variant)"),
        ),
    ),
    "block-attention": Command(
        ".infer:block_attention",
        "outputs -> final answers re-generated with attention to attribute phrases blocked",
        (
            spec("the blocking job (its inference job, settings, scorer)"),
            required("--outputs", help="outputs JSONL of a local model"),
            required("--attributes", help="the main extractor's attributes of those outputs"),
            MANIFEST,
            SAMPLES,
            THREADS,
            required("--out", help="blocked JSONL (one row per output and setting)"),
        ),
    ),
    "judge-agreement": Command(
        ".judges:judge_agreement",
        "agreement (percent, Cohen's kappa) of two judges on the same rows",
        (
            arg("a", help="judged JSONL or released reference JSONL"),
            arg("b", help="judged JSONL or released reference JSONL"),
        ),
    ),
    "compare-masking": Command(
        ".judges:compare_masking",
        "outputs -> compared: CRM chains and answers, clean vs one mask condition",
        (
            spec("the comparison's setting (masking)"),
            required("--clean-cot", help="clean chain-of-thought outputs"),
            required("--clean-answer", help="clean final-answer outputs"),
            required("--masked-cot", help="masked chain-of-thought outputs"),
            required("--masked-answer", help="masked final-answer outputs"),
            required("--manifest", help="the mask condition's variant manifest"),
            SAMPLES,
            required("--out", help="compared rows JSONL"),
        ),
    ),
    "judge-hallucination": Command(
        ".judges:judge_hallucination",
        "compared -> does each masked chain hallucinate the hidden content? (CRM)",
        (
            arg("--spec", help="the hallucination judge as JSON (default: the offline one)"),
            required("--compared", help="compared rows JSONL of one mask condition"),
            CACHE,
            required("--out", help="judged rows JSONL"),
        ),
    ),
    "construct": Command(
        ".construct:construct",
        "samples -> distraction candidates (writer + editor)",
        (
            spec("the construction (construct.<name>)"),
            required("--samples", nargs="+", help="samples JSONL of the source datasets"),
            arg("--seed", type=int, default=0, help="global seed (default 0)"),
            CACHE,
            required("--out-dir", help="folder of candidates.jsonl and images"),
        ),
    ),
    "review": Command(
        ".review:review",
        "human verification: serve the review page that writes the decisions file",
        (required("--candidates", help="candidates JSONL"), *DECIDE),
    ),
    "idis-review": Command(
        ".review:idis_review",
        "human verification of an Idis condition's images (A.3 criteria) -> decisions file",
        (
            required("--manifest", help="variant manifest of an Idis image condition"),
            required("--samples", help="samples JSONL the variants were built from"),
            required(
                "--set",
                choices=["idis-perception", "idis-math"],  # IDIS_CRITERIA_SETS (lazy import)
                help="criteria set the page shows and the decisions are checked against",
            ),
            *DECIDE,
        ),
    ),
    "concepts": Command(
        ".construct:concepts",
        "MathVerse samples -> proposed concept-family labels (a person confirms them)",
        (
            required("--samples", help="samples JSONL of a mathverse dataset"),
            arg("--spec", help="labeler spec JSON (default offline rules; or an LLM spec)"),
            required("--out", help="labels CSV (confirmed rows are kept)"),
        ),
    ),
    "concepts-review": Command(
        ".review:concepts_review",
        "confirm the proposed concept family of each MathVerse problem -> labels CSV",
        (
            required("--labels", help="concept-family labels CSV (rewritten in place)"),
            required("--samples", help="MathVerse samples JSONL (the diagrams)"),
            *SERVE,
            arg("--report", action="store_true", help="print the label counts"),
        ),
    ),
    "explorer-variants": Command(
        ".explorer:variants",
        "a condition's manifest -> the explorer's variants folder (thumbnails, boxes, data)",
        (
            MANIFEST,
            SAMPLES,
            required("--out-dir", help="results/explorer/variants/<dataset>/<condition>"),
        ),
    ),
    "explorer-cell": Command(
        ".explorer:cell",
        "a scored file (vs the clean condition's), its outputs and judges -> the "
        "explorer's cell folder (rows with flips, full texts)",
        (
            required("--scored", help="scored CSV of the cell"),
            arg("--clean-scored", help="the clean condition's scored CSV (same model, prompt)"),
            OUTPUTS,
            arg(
                "--judge",
                action="append",
                default=[],
                metavar="KIND=PATH",
                help="a judge file (reference, mathverse, hallucination, "
                "attributes:<extractor>); repeatable",
            ),
            required(
                "--out-dir", help="results/explorer/cells/<model>/<dataset>/<condition>/<prompt>"
            ),
        ),
    ),
    "explorer-cells": Command(
        ".explorer:cells",
        "a model's cells on one dataset, one after the other (the workflow's job: "
        "--spec lists each cell's files and folder as explorer-cell takes them)",
        (
            spec("the cells: a JSON list of {scored, clean_scored, outputs, judges, out_dir}"),
            required("--out-dir", help="results/explorer/cells/<model>/<dataset>"),
        ),
    ),
    "explorer-index": Command(
        ".explorer:index",
        "every cell and variants folder -> the explorer's index and app (index.html)",
        (
            spec("the explorer's specification (models, datasets, studies)"),
            arg("--cells", nargs="*", default=[], metavar="DIR", help="cell folders"),
            arg("--variants", nargs="*", default=[], metavar="DIR", help="variants folders"),
            required("--out-dir", help="results/explorer"),
        ),
    ),
    **{
        command: Command(f".study:{command}", what, study_args(command))
        for command, what in (
            ("metrics", "stage files -> a study's tidy metrics (and warnings)"),
            ("table", "metrics -> one table of a study (csv, md, tex)"),
            ("figure", "metrics -> one figure of a study (png, pdf)"),
            ("page", "metrics -> one HTML page of a study"),
            (
                "views",
                "metrics -> every table, figure and page of a study's scope, in one "
                "process (OUT_DIR/tables/, OUT_DIR/figures/)",
            ),
        )
    },
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vlmrobust",
        description="Stages of the vlmrobust workflow (each one is a Snakemake rule).",
    )
    p.add_argument("--version", action="version", version=f"vlmrobust {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        s = sub.add_parser(name, help=command.help, description=command.help)
        for a in command.args:
            s.add_argument(*a.flags, **a.kwargs)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    options = {k: v for k, v in vars(args).items() if k not in ("command", "verbose")}
    try:
        return COMMANDS[args.command].function()(**options) or 0
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        print(f"vlmrobust {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

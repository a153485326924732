"""Jobs of the score stage: released files as outputs or verdicts, scoring, the score
summary, the run's check of failed requests, and scoring a released file directly."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.commands import Command, arg, required
from ..core.config import ConfigError
from ..core.paths import LLM_CACHE
from . import json_arg, json_object, log
from .args import CACHE, OUT_OUTPUTS, OUT_SCORED, OUTPUTS, SAMPLES, UNPARSED_CHOICE, spec


def import_outputs(
    spec: str,
    samples: str,
    samples_report: str | None,
    released: str,
    manifest: str | None,
    out: str,
) -> None:
    """A released lmms-eval / VLMEvalKit / JSONL file as the outputs of one job (config
    `imports`); format jsonl needs --manifest (its question ids name variants)."""
    from ..core.io import write_jsonl
    from ..core.records import read_samples, read_variants
    from ..score.released import import_outputs as read_released

    entry = json_object(spec)
    jsonl = entry.get("format") == "jsonl"
    if jsonl and not manifest:
        raise ConfigError(
            "import-outputs: format jsonl needs --manifest (the condition's variant "
            "manifest, results/variants/<dataset>/<condition>/manifest.jsonl)"
        )
    variants = read_variants(manifest) if manifest else None
    skipped = []
    if samples_report:
        report = json.loads(Path(samples_report).read_text(encoding="utf-8"))
        skipped = [str(r["id"]) for r in report.get("skipped_rows") or [] if r.get("id")]
    rows, missing = read_released(
        entry, read_samples(samples), released, variants, skipped_ids=skipped
    )
    if missing:
        what = "variants" if jsonl else "samples"
        log.warning("%s: %d %s have no released answer", released, missing, what)
    failed = sum(1 for r in rows if r.released and r.released.get("verdict_error"))
    if failed:
        log.warning(
            "%s: %d released verdict(s) are failed judgments (e.g. parse_error): kept as "
            "failures, excluded from DRR and HFR",
            entry.get("references"),
            failed,
        )
    n = write_jsonl(out, (r.to_dict() for r in rows))
    log.info("%s: %d rows imported from %s", out, n, released)


def import_verdicts(spec: str | None, samples: str, references: str, out: str) -> None:
    """Released distractor-reference verdicts alone as the judged file of one job (an
    `imports` entry with `references` and no `path`): no outputs, so no correctness."""
    from ..core.io import write_jsonl
    from ..core.records import read_samples
    from ..judges.reference import released_verdict_rows

    rows, missing = released_verdict_rows(read_samples(samples), references)
    if missing:
        log.warning("%s: %d samples have no released verdict", references, len(missing))
    failed = sum(1 for r in rows if r["verdict"] is None)
    n = write_jsonl(out, rows)
    log.info("%s: %d released verdicts (%d failed judgments) from %s", out, n, failed, references)


def score(
    outputs: str,
    samples: str,
    scorer: str,
    fallback: str | None,
    unparsed_choice: str | None,
    cache_dir: str | None,
    use_released: bool,
    out: str,
    mode: str = "extract",
    compare_modes: bool = False,
    seed: int = 0,
    judge: str | None = None,
) -> None:
    """Score every answer of one outputs file with the benchmark's rules (``mode``
    extract) or as the papers' harness did (``mode`` harness)."""
    from ..core.io import read_jsonl
    from ..core.records import OutputRow, read_samples
    from ..score import score_outputs, write_scored
    from ..score.released import use_released_correctness

    extractor = None
    fallback_spec = json_arg(fallback, "--fallback") if fallback else None
    if fallback_spec is not None:
        from ..clients.llm import LLMCache, make_llm
        from ..score import llm_extractor

        extractor = llm_extractor(make_llm(fallback_spec, LLMCache(Path(cache_dir or LLM_CACHE))))
    judge_spec = json_arg(judge, "--judge") if judge else None
    by_id = {s.sample_id: s for s in read_samples(samples)}
    rows = [OutputRow.from_dict(r) for r in read_jsonl(outputs)]
    scored = score_outputs(
        by_id,
        rows,
        scorer,
        fallback=extractor,
        unparsed_choice=unparsed_choice or "wrong",
        mode=mode,
        compare=compare_modes,
        seed=seed,
        judge=harness_judge(judge_spec, cache_dir) if judge_spec else None,
    )
    if use_released:
        use_released_correctness(scored, rows)
    write_scored(Path(out), scored)
    log.info("%s: %d rows, %d correct", out, len(scored), sum(r["correct"] for r in scored))


def harness_judge(spec: dict, cache_dir: str | None):
    """``scoring.harness_judge`` as the harness's judge: (prompt, max_tokens) -> the
    reply, at temperature 0, through the cached LLM client; a failed call raises
    :class:`~vlmrobust.score.harness.HarnessJudgeError`."""
    from ..clients.llm import LLMCache, make_llm
    from ..score.harness import HarnessJudgeError

    llm = make_llm(spec, LLMCache(Path(cache_dir or LLM_CACHE)))

    def ask(prompt: str, max_tokens: int) -> str:
        response = llm.complete(prompt, temperature=0.0, max_tokens=max_tokens)
        if getattr(response, "error", None):
            raise HarnessJudgeError(str(response.error))
        return getattr(response, "text", "") or ""

    return ask


def score_summary(out: str, scored: list[str]) -> None:
    """Accuracy and extraction failures per model x dataset."""
    from ..score import read_scored, summarize, write_summary

    rows = [r for path in scored for r in read_scored(Path(path))]
    summary = summarize(rows)
    write_summary(Path(out), summary)
    for line in summary:
        log.info("%s", line)


def check_requests(on_error: str, out: str, log_file: str | None, outputs: list[str]) -> int:
    """The run's last check: requests that failed after every retry."""
    from ..score.requests import check_requests as check

    status, message = check(outputs, on_error, Path(out))
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        Path(log_file).write_text(message + "\n", encoding="utf-8")
    (log.error if status else log.info)("%s", message)
    return status


def score_released(
    format: str,  # noqa: A002 (the option's name)
    dataset: str,
    questions: str,
    samples: str,
    id_field: str | None,
    on_bad_row: str,
    unparsed_choice: str | None,
    extraction_field: str | None,
    response_field: str | None,
    model: str,
    condition: str,
    out: str,
    mode: str = "extract",
    compare_modes: bool = False,
) -> None:
    """Score a released lmms-eval / VLMEvalKit / MathVista / LogicVista file with this
    project's rules (or as the papers' harness did: ``mode`` harness); prints what was
    scored."""
    from ..data.released import load_questions
    from ..score.released import format_released_summary, released_summary
    from ..score.released import score_released as score_file

    rows = score_file(
        format,
        dataset,
        load_questions(dataset, Path(questions), on_bad_row=on_bad_row),
        Path(samples),
        Path(out),
        model=model,
        condition=condition,
        id_field=id_field,
        unparsed_choice=unparsed_choice or "wrong",
        response_field=response_field,
        extraction_field=extraction_field,
        mode=mode,
        compare=compare_modes,
    )
    print(f"{out}: {format_released_summary(released_summary(rows))}")


#: the score stage's commands
COMMANDS: dict[str, Command] = {
    "import-outputs": Command(
        import_outputs,
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
            OUT_OUTPUTS,
        ),
    ),
    "import-verdicts": Command(
        import_verdicts,
        "released distractor-reference verdicts alone as the judged file of one job",
        (
            arg("--spec", help="the `imports` entry as JSON (recorded; not needed)"),
            SAMPLES,
            required("--references", help="the released verdicts file"),
            required("--out", help="judged JSONL"),
        ),
    ),
    "score": Command(
        score,
        "outputs -> scored: the benchmark's rules on every answer",
        (
            OUTPUTS,
            SAMPLES,
            required("--scorer", help="scoring rules (a benchmark's name or generic)"),
            arg("--fallback", help="scoring.llm_fallback as JSON (LLM answer extraction)"),
            UNPARSED_CHOICE,
            CACHE,
            arg("--use-released", action="store_true", help="keep released correctness"),
            OUT_SCORED,
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
        score_summary,
        "accuracy and extraction failures per model x dataset",
        (
            required("--out", help="summary CSV"),
            arg("scored", nargs="*", help="scored CSV files"),
        ),
    ),
    "check-requests": Command(
        check_requests,
        "the run's last check: requests that failed after every retry",
        (
            required("--on-error", choices=["fail", "exclude"], help="scoring.on_request_error"),
            required("--out", help="report of the failed requests (results/requests.txt)"),
            arg("--log", dest="log_file", help="also write the message here"),
            arg("outputs", nargs="*", help="outputs JSONL files"),
        ),
    ),
    "score-released": Command(
        score_released,
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
            OUT_SCORED,
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
}

"""Jobs of the judges: distractor reference, MathVerse verdicts, Idis attributes, the
agreement of two judges, and the region-masking comparison and hallucination labels."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.commands import Command, arg, required
from ..core.paths import LLM_CACHE
from . import json_object, log
from .args import CACHE, SAMPLES, spec


def judge_reference(
    spec: str, outputs: str, samples: str, cache_dir: str | None, use_released: bool, out: str
) -> None:
    """Does each output under a distraction condition refer to the distractor?"""
    from ..clients.llm import LLMCache
    from ..core.io import read_jsonl, write_jsonl
    from ..core.records import OutputRow, read_samples
    from ..judges.reference import judge_outputs, make_reference_judge

    by_id = {s.sample_id: s for s in read_samples(samples)}
    rows = [OutputRow.from_dict(r) for r in read_jsonl(outputs)]
    judge = make_reference_judge(json_object(spec), LLMCache(Path(cache_dir or LLM_CACHE)))
    judged = judge_outputs(rows, judge, by_id, use_released=use_released)
    write_jsonl(out, judged)
    log.info(
        "%s: %d outputs judged, %d refer to the distractor, %d without a verdict",
        out,
        len(judged),
        sum(r["verdict"] == "yes" for r in judged),
        sum(r["verdict"] is None for r in judged),
    )


def judge_mathverse(spec: str, outputs: str, samples: str, out: str) -> None:
    """MathVerse's two-stage judge (extract, then judge) on one outputs file."""
    from ..judges.mathverse import judge_mathverse as judge

    summary = judge(outputs, samples, json_object(spec), out)
    log.info(
        "%s: %d outputs judged (%s), %d correct, %d without a verdict",
        out,
        summary["rows"],
        summary.get("judge"),
        summary["correct"],
        summary["failed"],
    )


def judge_attributes(
    spec: str, extractor: str, task: str, outputs: str, samples: str, manifest: str, out: str
) -> None:
    """The Idis attribute labels of each reasoning trace, by one extractor."""
    from ..judges.attributes import judge_attributes as judge

    summary = judge(outputs, samples, manifest, json_object(spec), task, extractor, out)
    sample = summary.get("sample")
    if sample:
        log.info(
            "%s: a validation sample: %d of %d output(s) labelled (n %s, seed %s)",
            out,
            sample["labelled"],
            sample["of"],
            sample["n"],
            sample["seed"],
        )
    log.info("%s: %s", out, summary)


def judge_agreement(a: str, b: str) -> None:
    """Agreement (percent, Cohen's kappa) of two judges on the same rows, printed."""
    from ..judges.reference import agreement_of_files

    print(json.dumps(agreement_of_files(a, b), indent=2, default=str))


def compare_masking(
    spec: str,
    clean_cot: str,
    clean_answer: str,
    masked_cot: str,
    masked_answer: str,
    manifest: str,
    samples: str,
    out: str,
) -> None:
    """CRM: chains and answers on the clean image against one mask condition."""
    from ..judges.crm.stage import compare_masking as compare

    counts = compare(
        clean_cot=Path(clean_cot),
        clean_answer=Path(clean_answer),
        masked_cot=Path(masked_cot),
        masked_answer=Path(masked_answer),
        manifest=Path(manifest),
        samples=Path(samples),
        out=Path(out),
        spec=json_object(spec),
    )
    log.info("%s: %s", out, counts)


def judge_hallucination(spec: str | None, compared: str, cache_dir: str | None, out: str) -> None:
    """CRM: does each masked chain hallucinate the hidden content?"""
    from ..judges.hallucination import judge_compared

    judge_spec = json_object(spec) if spec else None
    counts = judge_compared(Path(compared), Path(out), judge_spec, Path(cache_dir or LLM_CACHE))
    log.info("%s: %s", out, counts)


#: the judges' commands
COMMANDS: dict[str, Command] = {
    "judge-reference": Command(
        judge_reference,
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
        judge_mathverse,
        "outputs -> MathVerse two-stage judge verdicts (extract, then judge)",
        (
            spec("the MathVerse judge (judge.mathverse)"),
            required("--outputs", help="outputs JSONL of a mathverse dataset"),
            required("--samples", help="samples JSONL (meta.question_for_eval)"),
            required("--out", help="judged JSONL (one row per output: extracted, verdict)"),
        ),
    ),
    "judge-attributes": Command(
        judge_attributes,
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
    "judge-agreement": Command(
        judge_agreement,
        "agreement (percent, Cohen's kappa) of two judges on the same rows",
        (
            arg("a", help="judged JSONL or released reference JSONL"),
            arg("b", help="judged JSONL or released reference JSONL"),
        ),
    ),
    "compare-masking": Command(
        compare_masking,
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
        judge_hallucination,
        "compared -> does each masked chain hallucinate the hidden content? (CRM)",
        (
            arg("--spec", help="the hallucination judge as JSON (default: the offline one)"),
            required("--compared", help="compared rows JSONL of one mask condition"),
            CACHE,
            required("--out", help="judged rows JSONL"),
        ),
    ),
}

"""Jobs of the judges: distractor reference, MathVerse verdicts, Idis attributes, the
agreement of two judges, and the region-masking comparison and hallucination labels."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.paths import LLM_CACHE
from . import json_object, log


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

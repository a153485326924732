"""How many Distract-Bench prompts equal the released runs' inputs, row for row.

    git -C <Distract-Bench clone> show HEAD:data/questions.jsonl > questions.jsonl
    git -C <Distract-Bench clone> show "HEAD:model_outputs/corrupt_results/\
Qwen__Qwen2.5-VL-7B-Instruct/20260511_084134_samples_logical_robustness_bench.jsonl" \
        > samples.jsonl
    python benchmarks/distract_prompts.py questions.jsonl samples.jsonl [--show 3]

Every question row of the release (``data/questions.jsonl``) becomes a sample through
the ``distract-bench`` adapter (``vlmrobust.data.released.samples_from_rows``, no image
read), and its prompt through ``build_prompt(..., "distract-open")`` (the text parts,
in order). A released samples file (lmms-eval's ``*_samples_*.jsonl``) holds the prompt
each run sent in ``input``, keyed by ``doc_id`` (the row's ``final_id``). Printed: the
rows compared, how many are equal, the ``final_id`` of each one that differs and, with
``--show N``, the first N of them side by side. The exit status is 1 when a row
differs or a released row has no question (or the other way round).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.prompts import build_prompt  # noqa: E402
from vlmrobust.core.records import Sample, Variant  # noqa: E402
from vlmrobust.data.released import samples_from_rows  # noqa: E402

PROMPT = "distract-open"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def prompt_text(sample: Sample) -> str:
    """The text of the ``distract-open`` prompt of ``sample`` (its text parts, joined)."""
    variant = Variant(
        variant_id=sample.sample_id,
        sample_id=sample.sample_id,
        dataset=sample.dataset,
        condition="distracted",
        perturbation="none",
        images=[],
        sha256=[],
        question=sample.question,
    )
    built = build_prompt(sample, variant, PROMPT)
    return "".join(p["text"] for p in built.content if p["type"] == "text")


def compare(questions: Path, released: Path) -> tuple[int, list[tuple[str, str, str]], list[str]]:
    """(rows compared, [(final_id, ours, released) that differ], ids in one file only)."""
    samples = samples_from_rows("distract-bench", read_jsonl(questions))
    inputs = {str(r["doc_id"]): r["input"] for r in read_jsonl(released)}
    unmatched = sorted(set(samples) ^ set(inputs), key=lambda k: (len(k), k))
    differ = []
    for source_id, sample in samples.items():
        if source_id not in inputs:
            continue
        ours = prompt_text(sample)
        if ours != inputs[source_id]:
            differ.append((source_id, ours, inputs[source_id]))
    return len(set(samples) & set(inputs)), differ, unmatched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("questions", type=Path, help="the release's data/questions.jsonl")
    parser.add_argument("samples", type=Path, help="a released *_samples_*.jsonl")
    parser.add_argument("--show", type=int, default=0, help="print the first N that differ")
    args = parser.parse_args(argv)
    compared, differ, unmatched = compare(args.questions, args.samples)
    print(f"{PROMPT}: {compared - len(differ)}/{compared} prompts equal the released input")
    if differ:
        print("differ (final_id):", ", ".join(fid for fid, _, _ in differ))
    for fid, ours, theirs in differ[: args.show]:
        print(f"--- final_id {fid}\nours:     {ours!r}\nreleased: {theirs!r}")
    if unmatched:
        shown = ", ".join(unmatched[:10]) + (", ..." if len(unmatched) > 10 else "")
        print(f"in one file only: {len(unmatched)} final_id(s): {shown}")
    return 1 if differ or unmatched else 0


if __name__ == "__main__":
    sys.exit(main())

"""How often each scoring mode agrees with a benchmark's official scorer on released outputs.

    python benchmarks/official_verdicts.py mmmu --repo <MMMU clone> --model qwen_vl \\
        --out verdicts/mmmu_qwen_vl.jsonl                  # the official verdicts
    python benchmarks/scorer_agreement.py verdicts/*.jsonl [--show 5]

Each input is a JSONL of released responses with the official scorer's per-row verdict
(``official_correct``), as ``benchmarks/official_verdicts.py`` writes it; the file name
says the benchmark (``mmmu_*``, ``mmmu_pro_*``, ``mmstar_*``, ``chartqa_*``). Every row
becomes a sample (the gold answer and the fields the scorers read) and its response an
output, scored twice by ``vlmrobust.score.score_outputs``: ``scoring.mode: harness``
(lmms-eval's task code: MMMU-Pro is scored as lmms-eval scores it, with MMMU's parser)
and ``extract`` (the project's own reading of the final answer, no LLM fallback).

Printed per file: the rows; the rows the official scorer or the harness answered with a
random option (left out of the agreement: each side draws its own); the agreement of the
harness mode as run, of the harness without its reproduced bugs (the ``corrected``
verdict: MMMU's open questions), and of the extract mode. ``--show N`` prints the first N
disagreements of the corrected harness. The numbers of docs/scoring.md were made so.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.records import OutputRow, Sample  # noqa: E402
from vlmrobust.data.base import number_or_text  # noqa: E402
from vlmrobust.score import score_outputs  # noqa: E402

LETTERS = "ABCDEFGHIJ"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def benchmark_of(path: Path) -> str:
    for prefix, name in (
        ("mmmu_pro", "mmmu-pro"),
        ("mmmu", "mmmu"),
        ("mmstar", "mmstar"),
        ("chartqa", "chartqa"),
    ):
        if path.name.startswith(prefix):
            return name
    raise SystemExit(
        f"{path}: the file name names no known benchmark (mmmu_, mmmu_pro_, mmstar_, chartqa_)"
    )


def _sample(sid, dataset, question, answer, answer_type, choices, meta) -> Sample:
    return Sample(
        sample_id=sid,
        dataset=dataset,
        images=[],
        question=question,
        answer=answer,
        answer_type=answer_type,
        choices=list(choices),
        meta=meta,
    )


def _mmmu_sample(row: dict[str, Any], sid: str) -> Sample:
    qtype = row.get("question_type", "multiple-choice")
    if qtype != "multiple-choice":
        options = []
    elif "index2ans" in row:
        options = [row["index2ans"][k] for k in sorted(row["index2ans"])]
    else:  # MMMU-Pro: the options as the hub's string
        options = ast.literal_eval(row["options"])
    gold = row["gold"]
    gold_text = gold if isinstance(gold, str) else str(gold)
    meta = {"question_type": qtype, "options": str(options), "source_id": str(row["id"])}
    if qtype == "multiple-choice":
        return _sample(sid, "mmmu", "", gold_text, "letter", options, meta)
    return _sample(sid, "mmmu", "", gold_text, number_or_text(gold_text), [], meta)


def _mmstar_sample(row: dict[str, Any], sid: str) -> Sample:
    from vlmrobust.data.adapters import parse_inline_options

    parsed = parse_inline_options(str(row["question"]))
    question, choices = parsed if parsed is not None else (str(row["question"]), [])
    meta = {
        "category": row.get("category"),
        "l2_category": row.get("l2_category"),
        "index": row["id"],
    }
    return _sample(sid, "mmstar", question, str(row["gold"]), "letter", choices, meta)


def _chartqa_sample(row: dict[str, Any], sid: str) -> Sample:
    gold = str(row["gold"])
    meta = {"type": "human_test" if row.get("split") == "test_human" else "augmented"}
    return _sample(
        sid, "chartqa", str(row.get("question", "")), gold, number_or_text(gold), [], meta
    )


SAMPLES = {
    "mmmu": _mmmu_sample,
    "mmmu-pro": _mmmu_sample,
    "mmstar": _mmstar_sample,
    "chartqa": _chartqa_sample,
}
SCORER = {"mmmu": "mmmu", "mmmu-pro": "mmmu", "mmstar": "mmstar", "chartqa": "chartqa"}


def _output(sid: str, text: str, dataset: str) -> OutputRow:
    return OutputRow.from_dict(
        {
            "key": f"{sid}#0",
            "variant_id": sid,
            "sample_id": sid,
            "dataset": dataset,
            "condition": "released",
            "prompt": "released",
            "model": "released",
            "draw": 0,
            "raw_text": text,
            "answer_text": text,
            "prompt_version": "released",
            "backend": "released",
            "model_revision": "released",
        }
    )


def agreement(path: Path, show: int) -> dict[str, Any]:
    """The counts printed for one verdicts file (module docstring)."""
    bench = benchmark_of(path)
    rows = [r for r in read_jsonl(path) if r.get("official_correct") is not None]
    samples = {f"r{i}": SAMPLES[bench](r, f"r{i}") for i, r in enumerate(rows)}
    outputs = [_output(f"r{i}", str(r["response"]), SCORER[bench]) for i, r in enumerate(rows)]
    harness = score_outputs(samples, outputs, SCORER[bench], mode="harness")
    extract = score_outputs(samples, outputs, SCORER[bench], mode="extract")
    kept = [
        i for i, r in enumerate(rows) if not r.get("random") and harness[i]["method"] != "random"
    ]
    official = {i: int(rows[i]["official_correct"]) for i in kept}

    def agree(verdicts: dict[int, int]) -> int:
        return sum(verdicts[i] == official[i] for i in kept)

    raw = {i: int(harness[i]["correct"]) for i in kept}
    fixed = {
        i: int(
            harness[i]["correct"] if harness[i]["corrected"] is None else harness[i]["corrected"]
        )
        for i in kept
    }
    own = {i: int(extract[i]["correct"]) for i in kept}
    result = {
        "file": path.name,
        "rows": len(rows),
        "random_left_out": len(rows) - len(kept),
        "compared": len(kept),
        "harness": agree(raw),
        "harness_corrected": agree(fixed),
        "extract": agree(own),
        "official_accuracy": sum(int(r["official_correct"]) for r in rows) / len(rows),
    }
    for i in [i for i in kept if fixed[i] != official[i]][:show]:
        print(
            f"  {rows[i]['id']}: official {official[i]}, harness {fixed[i]} "
            f"(read {harness[i]['prediction']!r}), gold {rows[i]['gold']!r}: "
            f"{str(rows[i]['response'])[-160:]!r}"
        )
    return result


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.2f}%)" if d else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("verdicts", nargs="+", type=Path, help="official verdicts JSONL files")
    ap.add_argument("--show", type=int, default=0, help="print the first N disagreements")
    args = ap.parse_args(argv)
    print("file | rows | random left out | harness | harness w/o its bugs | extract | official acc")
    for path in args.verdicts:
        r = agreement(path, args.show)
        c = r["compared"]
        print(
            f"{r['file']} | {r['rows']} | {r['random_left_out']} | {_pct(r['harness'], c)} | "
            f"{_pct(r['harness_corrected'], c)} | {_pct(r['extract'], c)} | "
            f"{100 * r['official_accuracy']:.2f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

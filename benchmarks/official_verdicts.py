"""Per-row official verdicts on released model outputs: each benchmark's own scorer, unchanged.

Every subcommand reads the scorer's source from a checkout of the benchmark's public
repository that you supply, runs it on outputs that the authors (or, for ChartQA, a third
party) released, and writes one JSONL line per item. Every line has ``id``, ``response``,
``gold``, ``official_correct`` (0/1) and ``random`` (true where the official scorer drew a
random answer for that row), plus the fields that the scorer reads. The script imports no
project code, and it edits no official file: where a scorer imports heavy packages that it
does not use for the verdict, only those imports are stubbed (said per set below).

Getting the files: clone the repository and either check out the commit
(``git -C REPO checkout COMMIT``) and pass the clone, or extract only the paths needed with
the ``git archive`` / ``git show`` commands below and pass the extracted folder.

mmmu: MMMU validation, LLaVA-1.5-13B and Qwen-VL (900 rows each)
    Repository MMMU-Benchmark/MMMU, commit bb0b95a945998d91dfef37e969e07d49d1139438.
    Outputs: ``mmmu/example_outputs/<model>/<Subject>/output.json`` (raw responses, 30
    subjects) and ``mmmu/example_outputs/<model>/total_val_output.json`` (the released parsed
    predictions), with ``<model>`` = ``llava1.5_13b`` or ``qwen_vl``. Gold:
    ``mmmu/answer_dict_val.json``. Scorer: ``mmmu/utils/eval_utils.py``, driven as
    ``mmmu/main_parse_and_eval.py`` drives it (subjects in ``CAT_SHORT2LONG`` order of
    ``mmmu/utils/data_utils.py``, a missing subject folder skipped); ``random`` is seeded
    with 42 before the first row, as eval_utils' module-level ``random.seed(42)`` seeds a
    fresh official process.

        git clone https://github.com/MMMU-Benchmark/MMMU.git
        mkdir MMMU@bb0b95a
        git -C MMMU archive bb0b95a945998d91dfef37e969e07d49d1139438 mmmu mmmu-pro/evaluate.py \\
            mmmu-pro/output | tar -x -C MMMU@bb0b95a
        .venv/bin/python benchmarks/official_verdicts.py mmmu --repo MMMU@bb0b95a \\
            --model llava1.5_13b --out mmmu_llava1.5_13b.jsonl
        .venv/bin/python benchmarks/official_verdicts.py mmmu --repo MMMU@bb0b95a \\
            --model qwen_vl --out mmmu_qwen_vl.jsonl

    Fields: id, subject, question_type, response, all_choices, index2ans, gold (``answer`` of
    output.json), gold_answer_dict_val, parsed_pred, official_correct (eval_utils.evaluate on
    the row), random (``random.choice`` was called: nothing parsed; the call goes to the real
    ``random.choice``, so the stream is the official one), total_val_output_pred and
    eval_only_correct (the main_eval_only.py verdict on the released parsed prediction).
    For open questions ``parsed_pred`` is parse_open_response's ``list(set(...))``, whose
    order follows Python's per-process string hashing: set ``PYTHONHASHSEED`` for a file
    that is the same from run to run (no verdict depends on that order).
    Expected: 330/900 (0.3667) with 2 random rows; 325/900 (0.3611) with 48 random rows.

mmmu-pro: MMMU-Pro, GPT-4o (1730 rows a file)
    Same repository and commit. Outputs: ``mmmu-pro/output/gpt-4o_standard(10 options)_cot.jsonl``,
    ``gpt-4o_standard(10 options)_direct.jsonl``, ``gpt-4o_vision_cot.jsonl`` and
    ``gpt-4o_vision_direct.jsonl`` (the gold letter is the ``answer`` field; the released
    parse and verdict are ``pred_indexs`` and ``if_right``). Scorer:
    ``mmmu-pro/evaluate.py::mmmu_process_results``, called on a copy of each row (the
    official ``check_files`` overwrites its inputs, and its file-name pattern skips the
    "standard(10 options)" files). Its ``random.choice`` is unseeded, so the verdict of a row
    flagged ``random`` can change from run to run. ``--file`` is the path of the JSONL (a
    relative path that does not exist is looked up under ``--repo``).

        .venv/bin/python benchmarks/official_verdicts.py mmmu-pro --repo MMMU@bb0b95a \\
            --file 'mmmu-pro/output/gpt-4o_standard(10 options)_cot.jsonl' \\
            --out mmmu_pro_gpt4o_standard10_cot.jsonl
        (likewise ``gpt-4o_vision_cot.jsonl`` -> mmmu_pro_gpt4o_vision_cot.jsonl,
        ``gpt-4o_standard(10 options)_direct.jsonl`` -> mmmu_pro_gpt4o_standard10_direct.jsonl,
        ``gpt-4o_vision_direct.jsonl`` -> mmmu_pro_gpt4o_vision_direct.jsonl)

    Fields: id, subject, response, options, gold, parsed_pred, official_correct, random,
    released_pred_indexs, released_if_right. Random rows: 0, 7, 3 and 48 (in the order
    standard10 CoT, standard10 direct, vision CoT, vision direct).

mmstar: MMStar, LLaVA-NeXT-Yi-34B (1500 rows)
    Repository MMStar-Benchmark/MMStar, commit 88f243ab4a39cb339530085c33aecb22819881a1.
    Output: ``eval/submits/llava_next_yi_34b_MMStar.xlsx`` (gold in its ``answer`` column;
    reading it needs openpyxl). Scorer: ``eval/vlmeval/evaluate/mmstar.py::MMStar_eval``. The
    module's source is run unchanged except its ``from vlmeval.smp import *`` line, whose
    four helpers are stubbed (``load`` returns the sheet, ``dump`` keeps the score dict,
    ``get_logger`` is ``logging.getLogger``, ``tqdm`` the identity), so that vlmeval's
    torch/matplotlib imports are not needed. The per-row verdict is MMStar_eval's final
    score on the sheet with every other row's prediction blanked (a blank prediction raises
    IndexError inside the scorer, which catches it: that row counts as wrong); the verdicts
    sum to the official aggregate, which ``--score-out`` writes.

        git clone https://github.com/MMStar-Benchmark/MMStar.git
        mkdir MMStar@88f243a
        git -C MMStar archive 88f243ab4a39cb339530085c33aecb22819881a1 \\
            eval/vlmeval/evaluate/mmstar.py eval/submits/llava_next_yi_34b_MMStar.xlsx \\
            | tar -x -C MMStar@88f243a
        .venv/bin/python benchmarks/official_verdicts.py mmstar --repo MMStar@88f243a \\
            --out mmstar_llava_next_yi_34b.jsonl --score-out mmstar_llava_next_yi_34b_score.json

    Fields: id (the sheet's ``index``), response, gold, official_correct, question,
    category, l2_category, bench, random (always false). Expected: 781/1500 (0.5207).

chartqa: ChartQA test, Qwen2.5-VL-7B-Instruct (2500 rows, third-party release)
    Outputs: repository moured/qwen-vl2.5-chartqa, commit
    00576c87644b0e873fb4b4e170f9c91030af8712, ``output/results.json`` (``answer`` is the
    ChartQA label, ``split`` is test_human or test_augmented), written by its ``demo.py``.
    Scorer: repository google-research/pix2struct, commit
    945f27e936c9464d9d7c133f1bd1f4f383be9e99, ``pix2struct/metrics.py::relaxed_correctness``
    (target, prediction), applied as ``aggregate_metrics`` applies it (one target, no
    normalisation). The module is loaded unchanged from the file; ``pycocoevalcap`` and
    ``editdistance``, which only its other metrics use, are stubbed while it loads.
    ``--demo`` (optional) is the releaser's ``demo.py``: its own ``relaxed_correctness``
    (which strips whitespace) is taken out of the file by its syntax tree, since the file
    imports torch, and its verdict is written as ``releaser_demo_correct``. Without
    ``--demo`` that field is left out of every row.

        git clone https://github.com/google-research/pix2struct.git
        mkdir pix2struct@945f27e
        git -C pix2struct archive 945f27e936c9464d9d7c133f1bd1f4f383be9e99 \\
            pix2struct/metrics.py | tar -x -C pix2struct@945f27e
        git clone https://github.com/moured/qwen-vl2.5-chartqa.git
        git -C qwen-vl2.5-chartqa show \\
            00576c87644b0e873fb4b4e170f9c91030af8712:output/results.json > results.json
        git -C qwen-vl2.5-chartqa show \\
            00576c87644b0e873fb4b4e170f9c91030af8712:demo.py > demo.py
        .venv/bin/python benchmarks/official_verdicts.py chartqa --pix2struct pix2struct@945f27e \\
            --results results.json --demo demo.py --out chartqa_qwen2.5_vl_7b.jsonl

    Fields: id (``<split>_<index within the split>``), imgname, question, split, response,
    gold, official_correct, releaser_demo_correct (only with ``--demo``), random (always
    false). Expected: 0.8784 (human 0.8072, augmented 0.9496); the two functions disagree
    on no row.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib.util
import json
import logging
import random
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

Row = dict[str, Any]

MMSTAR_SUBMISSION = "eval/submits/llava_next_yi_34b_MMStar.xlsx"
MMSTAR_SCORER = "eval/vlmeval/evaluate/mmstar.py"
MMSTAR_STAR_IMPORT = "from vlmeval.smp import *\n"

#: Modules that pix2struct/metrics.py imports for its other metrics (CIDEr, ANLS), with
#: the names it takes from them.
PIX2STRUCT_UNUSED_IMPORTS: dict[str, dict[str, Any]] = {
    "pycocoevalcap": {},
    "pycocoevalcap.tokenizer": {},
    "pycocoevalcap.tokenizer.ptbtokenizer": {"PTBTokenizer": None},
    "pycocoevalcap.cider": {},
    "pycocoevalcap.cider.cider": {"Cider": None},
    "editdistance": {},
}


# ----------------------------------------------------------------- shared helpers


def load_module(name: str, path: Path) -> types.ModuleType:
    """The Python file ``path`` as a module named ``name`` (not put in ``sys.modules``)."""
    if not path.is_file():
        raise SystemExit(f"official_verdicts: no such file: {path}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)


def read_jsonl(path: Path) -> list[Row]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(path: Path, rows: Iterable[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def existing(path: Path, base: Path | None = None) -> Path:
    """``path`` if it exists, else (relative only) ``base / path``; exits if neither does."""
    if path.exists():
        return path
    if base is not None and not path.is_absolute() and (base / path).exists():
        return base / path
    raise SystemExit(f"official_verdicts: no such file: {path}")


def accuracy(rows: list[Row]) -> str:
    right = sum(row["official_correct"] for row in rows)
    return f"{right}/{len(rows)} = {right / len(rows):.4f}" if rows else "no rows"


class RandomChoiceFlag:
    """Marks the rows where a scorer called ``random.choice``.

    While active, ``random.choice`` is a wrapper that sets :attr:`hit` and returns what
    the original function returns, so the random stream is the one the scorer would use.
    """

    def __init__(self) -> None:
        self.hit = False
        self._original: Callable[..., Any] | None = None

    def _choice(self, seq: Any) -> Any:
        self.hit = True
        assert self._original is not None
        return self._original(seq)

    @contextlib.contextmanager
    def active(self) -> Iterator[RandomChoiceFlag]:
        self._original = random.choice
        random.choice = self._choice
        try:
            yield self
        finally:
            random.choice = self._original
            self._original = None


@contextlib.contextmanager
def stubbed_modules(stubs: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Empty modules (with the given attributes) in ``sys.modules``; restored afterwards."""
    saved = {name: sys.modules.get(name) for name in stubs}
    for name, attributes in stubs.items():
        module = types.ModuleType(name)
        for attribute, value in attributes.items():
            setattr(module, attribute, value)
        sys.modules[name] = module
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


# ----------------------------------------------------------------- MMMU


def _mmmu_row(
    eval_utils: types.ModuleType,
    output: Row,
    subject: str,
    answers: dict[str, Row],
    released: dict[str, Any],
) -> Row:
    """One output.json row scored as main_parse_and_eval.py scores it (``random`` is filled
    in by the caller)."""
    response = output["response"]
    if output["question_type"] == "multiple-choice":
        parsed = eval_utils.parse_multi_choice_response(
            response, output["all_choices"], output["index2ans"]
        )
    else:
        parsed = eval_utils.parse_open_response(response)
    sample = {
        "id": output["id"],
        "question_type": output["question_type"],
        "answer": output["answer"],
        "response": response,
        "parsed_pred": parsed,
    }
    judge, _ = eval_utils.evaluate([sample])
    gold = answers[output["id"]]
    released_pred = released.get(output["id"])
    # main_eval_only.py's verdict on the released parsed prediction
    if gold["question_type"] != "multiple-choice":
        eval_only = eval_utils.eval_open(
            gold["ground_truth"], eval_utils.parse_open_response(released_pred)
        )
    else:
        eval_only = eval_utils.eval_multi_choice(gold["ground_truth"], released_pred)
    if isinstance(parsed, list):  # open answers: numbers as JSON floats
        parsed = [x if isinstance(x, str) else float(x) for x in parsed]
    return {
        "id": output["id"],
        "subject": subject,
        "question_type": output["question_type"],
        "response": response,
        "all_choices": output.get("all_choices"),
        "index2ans": output.get("index2ans"),
        "gold": output["answer"],
        "gold_answer_dict_val": gold["ground_truth"],
        "parsed_pred": parsed,
        "official_correct": int(judge[output["id"]] == "Correct"),
        "random": False,
        "total_val_output_pred": released_pred,
        "eval_only_correct": int(eval_only),
    }


def mmmu_rows(repo: Path, model: str) -> list[Row]:
    root = repo / "mmmu"
    data_utils = load_module("mmmu_data_utils", root / "utils" / "data_utils.py")
    eval_utils = load_module("mmmu_eval_utils", root / "utils" / "eval_utils.py")
    answers = read_json(root / "answer_dict_val.json")
    outputs = root / "example_outputs" / model
    released = read_json(existing(outputs / "total_val_output.json"))
    rows: list[Row] = []
    random.seed(42)  # eval_utils' module-level seed, as at the start of an official run
    with RandomChoiceFlag().active() as flag:
        for subject in data_utils.CAT_SHORT2LONG.values():
            if not (outputs / subject).is_dir():
                print(f"Skipping {subject} for not found", file=sys.stderr)
                continue
            for output in read_json(outputs / subject / "output.json"):
                flag.hit = False
                row = _mmmu_row(eval_utils, output, subject, answers, released)
                row["random"] = flag.hit
                rows.append(row)
    return rows


def cmd_mmmu(args: argparse.Namespace) -> list[Row]:
    rows = mmmu_rows(args.repo, args.model)
    agree = sum(row["official_correct"] == row["eval_only_correct"] for row in rows)
    print(
        f"mmmu {args.model}: {accuracy(rows)}; random rows {sum(r['random'] for r in rows)}; "
        f"main_eval_only verdict agrees on {agree}/{len(rows)}"
    )
    return rows


# ----------------------------------------------------------------- MMMU-Pro


def mmmu_pro_rows(repo: Path, path: Path) -> list[Row]:
    evaluate = load_module("mmmu_pro_evaluate", repo / "mmmu-pro" / "evaluate.py")
    rows: list[Row] = []
    with RandomChoiceFlag().active() as flag:
        for released in read_jsonl(path):
            flag.hit = False
            result = evaluate.mmmu_process_results(copy.deepcopy(released))
            rows.append(
                {
                    "id": released["id"],
                    "subject": released["subject"],
                    "response": released["response"],
                    "options": released["options"],
                    "gold": released["answer"],
                    "parsed_pred": result["pred_indexs"],
                    "official_correct": int(result["if_right"]),
                    "random": flag.hit,
                    "released_pred_indexs": released["pred_indexs"],
                    "released_if_right": released["if_right"],
                }
            )
    return rows


def cmd_mmmu_pro(args: argparse.Namespace) -> list[Row]:
    path = existing(args.file, args.repo)
    rows = mmmu_pro_rows(args.repo, path)
    steady = [row for row in rows if not row["random"]]
    agree = sum(
        str(bool(row["official_correct"])) == str(row["released_if_right"]) for row in steady
    )
    print(
        f"mmmu-pro {path.name}: {accuracy(rows)}; random rows {len(rows) - len(steady)} "
        f"(unseeded); released verdict agrees on {agree}/{len(steady)} non-random rows"
    )
    return rows


# ----------------------------------------------------------------- MMStar


class MMStarScorer:
    """MMStar_eval from the checkout's mmstar.py, with vlmeval.smp's helpers stubbed."""

    def __init__(self, repo: Path, frame: Any) -> None:
        path = repo / MMSTAR_SCORER
        if not path.is_file():
            raise SystemExit(f"official_verdicts: no such file: {path}")
        source = path.read_text(encoding="utf-8")
        if MMSTAR_STAR_IMPORT not in source:
            raise SystemExit(f"official_verdicts: {path} has no line {MMSTAR_STAR_IMPORT!r}")
        self.frame = frame
        self.score: dict[str, float] = {}
        namespace: dict[str, Any] = {
            "__name__": "mmstar",
            "load": lambda eval_file: self.frame,
            "dump": lambda data, path: self.score.update(data),
            "get_logger": logging.getLogger,
            "tqdm": lambda iterable: iterable,
        }
        # the import line becomes an empty line: the line numbers stay the file's
        exec(compile(source.replace(MMSTAR_STAR_IMPORT, "\n", 1), str(path), "exec"), namespace)
        self._eval: Callable[[str], None] = namespace["MMStar_eval"]

    def __call__(self, frame: Any, eval_file: str) -> dict[str, float]:
        self.frame, self.score = frame, {}
        self._eval(eval_file)
        return self.score


def mmstar_rows(repo: Path, submission: Path) -> tuple[list[Row], dict[str, float]]:
    import pandas as pd  # only this set reads a spreadsheet

    sheet = pd.read_excel(submission)
    scorer = MMStarScorer(repo, sheet)
    full = dict(scorer(sheet, str(submission)))
    rows: list[Row] = []
    for i in range(len(sheet)):
        alone = sheet.copy()
        alone["prediction"] = ""
        alone.loc[i, "prediction"] = sheet.loc[i, "prediction"]
        correct = int(scorer(alone, str(submission))["final score"] > 0)
        line = sheet.iloc[i]
        rows.append(
            {
                "id": int(line["index"]),
                "response": str(line["prediction"]),
                "gold": str(line["answer"]),
                "official_correct": correct,
                "question": line["question"],
                "category": line["category"],
                "l2_category": line["l2_category"],
                "bench": line["bench"],
                "random": False,
            }
        )
    return rows, full


def cmd_mmstar(args: argparse.Namespace) -> list[Row]:
    submission = existing(args.submission, args.repo)
    rows, full = mmstar_rows(args.repo, submission)
    print(f"mmstar {submission.name}: official final score {full['final score']:.5f}")
    print(f"mmstar per-row verdicts: {accuracy(rows)}")
    if args.score_out is not None:
        args.score_out.parent.mkdir(parents=True, exist_ok=True)
        with args.score_out.open("w", encoding="utf-8") as handle:
            json.dump(full, handle, indent=1)
    return rows


# ----------------------------------------------------------------- ChartQA


def load_relaxed_correctness(pix2struct: Path) -> Callable[[str, str], bool]:
    with stubbed_modules(PIX2STRUCT_UNUSED_IMPORTS):
        metrics = load_module("pix2struct_metrics", pix2struct / "pix2struct" / "metrics.py")
    return metrics.relaxed_correctness


def load_demo_relaxed_correctness(demo: Path) -> Callable[[str, str], bool]:
    """The releaser's ``relaxed_correctness``, compiled alone from demo.py's syntax tree
    (the file imports torch and transformers at the top)."""
    source = demo.read_text(encoding="utf-8")
    tree = ast.parse(source, str(demo))
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "relaxed_correctness"
    ]
    if not found:
        raise SystemExit(f"official_verdicts: {demo} defines no relaxed_correctness")
    module = ast.Module(body=[found[0]], type_ignores=[])
    namespace: dict[str, Any] = {"__name__": "demo"}
    # compile() inherits this file's `from __future__ import annotations`: the function's
    # annotations are not evaluated, so the names demo.py imports for them are not needed
    exec(compile(module, str(demo), "exec"), namespace)
    return namespace["relaxed_correctness"]


def chartqa_rows(
    results: list[Row],
    official: Callable[[str, str], bool],
    demo: Callable[[str, str], bool] | None,
) -> list[Row]:
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for result in results:
        split = result["split"]
        index = seen.get(split, 0)
        seen[split] = index + 1
        row: Row = {
            "id": f"{split}_{index}",
            "imgname": result["imgname"],
            "question": result["query"],
            "split": split,
            "response": result["prediction"],
            "gold": result["answer"],
            "official_correct": int(official(result["answer"], result["prediction"])),
        }
        if demo is not None:
            row["releaser_demo_correct"] = int(demo(result["answer"], result["prediction"]))
        row["random"] = False
        rows.append(row)
    return rows


def cmd_chartqa(args: argparse.Namespace) -> list[Row]:
    official = load_relaxed_correctness(args.pix2struct)
    demo = None if args.demo is None else load_demo_relaxed_correctness(existing(args.demo))
    rows = chartqa_rows(read_json(existing(args.results)), official, demo)
    for split in sorted({row["split"] for row in rows}):
        print(f"chartqa {split}: {accuracy([r for r in rows if r['split'] == split])}")
    print(f"chartqa overall: {accuracy(rows)}")
    if demo is not None:
        differ = sum(r["official_correct"] != r["releaser_demo_correct"] for r in rows)
        print(f"chartqa: the releaser's demo.py verdict differs on {differ} rows")
    return rows


# ----------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="official_verdicts.py",
        description="Per-row verdicts of a benchmark's official scorer, run unchanged from "
        "a checkout of its repository, on released model outputs (one JSONL line per item).",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="SET")
    out_help = "the JSONL to write"

    mmmu = sub.add_parser("mmmu", help="MMMU validation (mmmu/utils/eval_utils.py)")
    mmmu.add_argument("--repo", type=Path, required=True, help="MMMU-Benchmark/MMMU checkout")
    mmmu.add_argument(
        "--model",
        required=True,
        help="folder under mmmu/example_outputs: llava1.5_13b or qwen_vl",
    )
    mmmu.add_argument("--out", type=Path, required=True, help=out_help)
    mmmu.set_defaults(handler=cmd_mmmu)

    pro = sub.add_parser("mmmu-pro", help="MMMU-Pro (mmmu-pro/evaluate.py)")
    pro.add_argument("--repo", type=Path, required=True, help="MMMU-Benchmark/MMMU checkout")
    pro.add_argument(
        "--file",
        type=Path,
        required=True,
        help="released outputs, e.g. 'mmmu-pro/output/gpt-4o_vision_cot.jsonl' "
        "(a relative path is also looked up under --repo)",
    )
    pro.add_argument("--out", type=Path, required=True, help=out_help)
    pro.set_defaults(handler=cmd_mmmu_pro)

    star = sub.add_parser("mmstar", help=f"MMStar ({MMSTAR_SCORER})")
    star.add_argument("--repo", type=Path, required=True, help="MMStar-Benchmark/MMStar checkout")
    star.add_argument(
        "--submission",
        type=Path,
        default=Path(MMSTAR_SUBMISSION),
        help=f"released sheet (default: {MMSTAR_SUBMISSION}, under --repo)",
    )
    star.add_argument("--out", type=Path, required=True, help=out_help)
    star.add_argument("--score-out", type=Path, help="also write MMStar_eval's score dict (JSON)")
    star.set_defaults(handler=cmd_mmstar)

    chart = sub.add_parser("chartqa", help="ChartQA (pix2struct/metrics.py)")
    chart.add_argument(
        "--pix2struct", type=Path, required=True, help="google-research/pix2struct checkout"
    )
    chart.add_argument("--results", type=Path, required=True, help="released results.json")
    chart.add_argument(
        "--demo",
        type=Path,
        help="the releaser's demo.py: adds releaser_demo_correct (left out without it)",
    )
    chart.add_argument("--out", type=Path, required=True, help=out_help)
    chart.set_defaults(handler=cmd_chartqa)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    rows = args.handler(args)
    write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The demo models answer real MATH-V images: samples -> variants -> infer -> scored ->
the corruption study's tables and figures, at the run's real sizes.

    .venv/bin/python benchmarks/bench_real_answers.py --data DATA [--rows 200]
        [--cores 2] [--dir DIR] [--json out.json]

Writes a run configuration (``DIR/config.yaml``) and runs the repository's Snakefile
there (``snakemake --cores N``, its default target: every study output of the run):

- models: the default run's two demo checkpoints (``demo-base``, ``demo-reasoning``,
  trained as the default run trains them, or for ``--train-steps`` steps), with their
  registry pixel limits
  (``min_pixels`` 3,136, ``max_pixels`` 50,176: at most 64 vision tokens an image);
- ``mathvision``: the first ``--rows`` rows of the MATH-V test split, read in place from
  ``--data`` (never copied), ``samples.max_pixels`` at its default (2048 x 2048);
- conditions: ``clean``, ``corrupt`` (config/paper.yaml's: one seeded random method and
  severity of the 20 x 5 per sample) and ``idis-diagram`` (the Idis-math visual
  distractor: LogicVista's table images as irrelevant figures around the diagram; its
  answers are scored by the Idis study where the run has one, else by ``score``);
- ``logicvista-pool``: LogicVista's samples, the figures of ``idis-diagram``.

Reports: per rule the jobs, their summed seconds (``benchmark:`` files) and the peak RSS
(of the job's client under the warm job runner); per (model, condition) the rows, the
failed requests, the unparsed answers and accuracy from the scored files; the prompt
tokens per image condition (the model's ``max_pixels`` bounds the vision part: at most
64 tokens above the text's); and the tables and figures written.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.io import read_jsonl  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_real import POOL, add_data_arg, idis_condition, pool_dataset  # noqa: E402

CONDITIONS = ("clean", "corrupt", "idis-diagram")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arg(p)
    p.add_argument("--rows", type=int, default=200, help="MATH-V test rows")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--dir", type=Path, default=None, help="where to run (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    p.add_argument("--train-steps", type=int, default=None,
                   help="a short demo training (the models' accuracy is not under test: "
                   "they are random on MATH-V either way); default: the default run's")  # fmt: skip
    return p.parse_args(argv)


def make_config(args: argparse.Namespace) -> dict:
    data = args.data.resolve()
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return {
        "run_name": "bench-real-answers",
        "seed": 0,
        "model_registry": str(REPO / "config" / "models.yaml"),
        "models": ["demo-base", "demo-reasoning"],
        "decoding": base["decoding"],
        "threads": base["threads"],
        "demo": base["demo"]
        | (
            {
                "train": {
                    "n_per_family": 8,
                    "steps": args.train_steps,
                    "pretrain_steps": 2,
                    "reasoning_steps": 2,
                    "batch_size": 4,
                }
            }
            if args.train_steps
            else {}
        ),  # fmt: skip
        "conditions": {
            "clean": {"perturbation": "none"},
            "corrupt": {"perturbation": "corruption", "assignment": "random"},
            "idis-diagram": idis_condition(),
        },
        "datasets": {
            "mathvision": {
                "adapter": "mathvision",
                "source": "local",
                "split": "test",
                "path": str(data / "mathvision"),
                "display": "MathVision",
                "group": "reasoning",
                "limit": args.rows,
                "conditions": list(CONDITIONS),
            },
            POOL: pool_dataset(data),
        },
    }


def snakemake(work: Path, cores: int, *args: str) -> tuple[int, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work),
           *args, "--cores", str(cores), "--configfile", str(work / "config.yaml")]  # fmt: skip
    t0 = time.perf_counter()
    with open(work / "snakemake.log", "a") as log:
        code = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    return code, time.perf_counter() - t0


def rule_times(work: Path) -> dict[str, dict]:
    """rule -> jobs, summed seconds, the largest max_rss (MB) of its benchmark files."""
    out: dict[str, dict] = defaultdict(lambda: {"jobs": 0, "s": 0.0, "max_rss_mb": 0.0})
    root = work / "logs" / "benchmarks"
    for tsv in root.rglob("*.tsv"):
        rule = tsv.relative_to(root).parts[0].removesuffix(".tsv")
        with open(tsv) as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        entry = out[rule]
        entry["jobs"] += 1
        entry["s"] += float(row["s"])
        if row.get("max_rss") not in (None, "", "NA", "-"):
            entry["max_rss_mb"] = max(entry["max_rss_mb"], float(row["max_rss"]))
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["s"]))


def answers(work: Path) -> list[dict]:
    """Per MATH-V scored file (model, condition, prompt): rows, failed requests
    (``error``), unparsed answers (no ``prediction``, no error), accuracy, and the
    prompt tokens (median, max) of its outputs file."""
    rows = []
    root = work / "results" / "scored"
    for scored in sorted(root.glob("*/*/*/*.csv")):  # not summary.csv
        model, dataset, condition, prompt = scored.relative_to(root).with_suffix("").parts
        if dataset != "mathvision":
            continue
        with open(scored, newline="") as fh:
            table = list(csv.DictReader(fh))
        outputs = work / "results" / "outputs" / model / dataset / condition / f"{prompt}.jsonl"
        tokens = sorted(r["prompt_tokens"] for r in read_jsonl(outputs) if r.get("prompt_tokens"))
        rows.append({
            "file": f"{model}/{condition}/{prompt}",
            "rows": len(table),
            "errors": sum(1 for r in table if r["error"]),
            "unparsed": sum(1 for r in table if not r["error"] and not r["prediction"]),
            "correct": sum(int(r["correct"] or 0) for r in table),
            "prompt_tokens_p50": tokens[len(tokens) // 2] if tokens else None,
            "prompt_tokens_max": tokens[-1] if tokens else None,
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="vlmrobust-bench-answers-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(yaml.safe_dump(make_config(args), sort_keys=False))
    load0 = os.getloadavg()
    code, wall = snakemake(work, args.cores)
    load1 = os.getloadavg()
    print(f"# {args.rows} MATH-V rows, --cores {args.cores}: snakemake exit {code}, wall "
          f"{wall:.0f} s, load {load0[0]:.1f} -> {load1[0]:.1f}; folder {work}")  # fmt: skip
    if code:
        print(f"snakemake failed; see {work / 'snakemake.log'}", file=sys.stderr)
        return code
    times = rule_times(work)
    print(f"{'rule':<22} {'jobs':>5} {'s':>8} {'max rss MB':>11}")
    for rule, t in times.items():
        print(f"{rule:<22} {t['jobs']:>5} {t['s']:>8.1f} {t['max_rss_mb']:>11.0f}")
    table = answers(work)
    print(
        f"{'model/condition/prompt':<44} {'rows':>5} {'err':>4} {'unp':>4} {'acc':>6} {'tok50':>6} {'tokmax':>6}"
    )
    for r in table:
        acc = r["correct"] / r["rows"] if r["rows"] else 0.0
        print(f"{r['file']:<44} {r['rows']:>5} {r['errors']:>4} {r['unparsed']:>4} {acc:>6.3f} "
              f"{r['prompt_tokens_p50']!s:>6} {r['prompt_tokens_max']!s:>6}")  # fmt: skip
    made = [
        str(p.relative_to(work))
        for folder in ("results/tables", "figures")
        for p in sorted((work / folder).rglob("*"))
        if p.is_file()
    ]
    print(f"tables and figures ({len(made)}):")
    for name in made:
        print(f"  {name}")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "rules": times, "answers": table,
                                         "made": made}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time `snakemake -n` (building the DAG without running anything).

    python benchmarks/bench_dag.py                       # paper configuration, best of 3
    python benchmarks/bench_dag.py --configfile config/config.yaml

Prints the wall time of each try, the job counts of the last one and, per local model,
its cells, the engines (model loads, one job each) that answer them (config
`service.engines`; one per phase and engine, not one per cell) and the GPUs they hold at
once. The paper's
local-only datasets (ImageNet-9, LogicVista, Waterbirds) must exist as folders for the
DAG to build; a missing one is created empty for the timing and removed afterwards
(said on the output), so the DAG builds on a machine without the data.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def stand_ins(configfile: str):
    """Create the missing folders of the configuration's local datasets; remove them after."""
    sys.path.insert(0, str(REPO / "workflow"))
    from vlmrobust.core.config import load_yaml

    config = load_yaml(REPO / configfile)
    made: list[Path] = []  # the topmost folder created for each stand-in
    for name, dataset in (config.get("datasets") or {}).items():
        path = (dataset or {}).get("path")
        if (dataset or {}).get("source") != "local" or not path or (REPO / path).exists():
            continue
        folder = REPO / path
        made.append(next(p for p in reversed([folder, *folder.parents]) if not p.exists()))
        folder.mkdir(parents=True)
        print(f"stand-in (empty) for datasets.{name}.path: {path}")
    try:
        yield
    finally:
        for top in made:
            shutil.rmtree(top, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", default="config/paper.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    snakemake = str(Path(sys.executable).parent / "snakemake")
    times, out = [], ""
    with stand_ins(args.configfile):
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [snakemake, "-n", "--cores", "1", "--configfile", args.configfile],
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            times.append(time.perf_counter() - t0)
            out = proc.stdout + proc.stderr
            if proc.returncode != 0:
                print(out[-3000:], file=sys.stderr)
                return proc.returncode
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    print(f"snakemake -n --configfile {args.configfile}")
    print("tries (s): " + ", ".join(f"{t:.2f}" for t in times) + f"; best {min(times):.2f} s")
    print("jobs: " + ", ".join(f"{name} {n}" for name, n in jobs.items()))
    engines = sum(
        int(n) for name, n in jobs.items() if name.startswith("engine_") and name != "engine_plan"
    )
    print_engines(args.configfile, engines)
    return 0


def print_engines(configfile: str, engine_jobs: int) -> None:
    """Per local model: its cells, the engines (model loads) that answer them and the
    GPUs those engines hold; a model load per cell would be one per cell."""
    from vlmrobust.core.registry import model_resources
    from vlmrobust.plan import RunPlan
    from vlmrobust.plan import engines as plan_engines

    with contextlib.chdir(REPO):
        plan = RunPlan.load(configfile)
    print(f"model loads (engine jobs, rules `engine_*`): {engine_jobs} in the DAG")
    print(f"{'model':<28} {'cells':>5} {'engine starts':>14} {'GPUs given':>11}")
    total_jobs = total_engines = 0
    for model, spec in plan.models.items():
        if spec["backend"] not in ("hf", "vllm"):
            continue
        n_jobs = engines = at_once = 0
        for phase in (0, 1):  # phase 1 starts after phase 0 is answered
            jobs = len(plan_engines.engine_jobs(plan, model, phase))
            n_jobs += jobs
            engines += min(jobs, plan_engines.engines_of(plan, model))
            at_once = max(at_once, min(jobs, plan_engines.engines_of(plan, model)))
        gpus = at_once * model_resources(spec)["gpu"]
        print(f"{model:<28} {n_jobs:>5} {engines:>14} {gpus:>11}")
        total_jobs, total_engines = total_jobs + n_jobs, total_engines + engines
    print(f"{'all local models':<28} {total_jobs:>5} {total_engines:>14}")


if __name__ == "__main__":
    raise SystemExit(main())

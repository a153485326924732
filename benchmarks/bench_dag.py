"""Time `snakemake -n` (building the DAG without running anything).

    python benchmarks/bench_dag.py                       # paper configuration, best of 3
    python benchmarks/bench_dag.py --configfile config/config.yaml

Prints the wall time of each try and the job counts of the last one. The paper's
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
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)).items()
    print(f"snakemake -n --configfile {args.configfile}")
    print("tries (s): " + ", ".join(f"{t:.2f}" for t in times) + f"; best {min(times):.2f} s")
    print("jobs: " + ", ".join(f"{name} {n}" for name, n in jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time `snakemake -n` (building the DAG without running anything).

    python benchmarks/bench_dag.py                       # paper configuration, best of 3
    python benchmarks/bench_dag.py --configfile config/config.yaml

Prints the wall time of each try and the job counts of the last one.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", default="config/paper.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    snakemake = str(Path(sys.executable).parent / "snakemake")
    times, out = [], ""
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [snakemake, "-n", "--cores", "1", "--configfile", args.configfile],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(time.perf_counter() - t0)
        out = proc.stdout + proc.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)).items()
    print(f"snakemake -n --configfile {args.configfile}")
    print("tries (s): " + ", ".join(f"{t:.2f}" for t in times) + f"; best {min(times):.2f} s")
    print("jobs: " + ", ".join(f"{name} {n}" for name, n in jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time of a whole workflow run, per rule, from Snakemake's own log.

    python benchmarks/bench_run.py --log snakemake.log [--logs-dir logs]
    python benchmarks/bench_run.py --run [--dir COPY] [-- SNAKEMAKE_ARGS...]

With ``--log``: reads a finished run's terminal output (``snakemake --cores 2 >
snakemake.log 2>&1``) and prints its wall time (first job start to last job end), the
jobs per rule with the sum and the mean of their durations (whole seconds, as the log
stamps them), and the model loads: engine jobs that loaded their model (``logs/
engines/**/*.log``: a line ``loaded once for this engine``) and inference jobs that
loaded one themselves (a line ``loading the model in this job``).

With ``--run``: copies the working tree (without results) to ``--dir`` (default a
temporary folder), runs ``snakemake --cores 2`` there under ``/usr/bin/time -v`` and
then prints the same report plus the peak memory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")


def parse(log: Path) -> tuple[dict[str, list[float]], float]:
    """Durations (s) of every job by rule, and the wall time of the run."""
    stamp = None
    pending_rule = None
    started: dict[str, tuple[str, dt.datetime]] = {}
    durations: dict[str, list[float]] = defaultdict(list)
    first = last = None
    for line in log.read_text(errors="replace").splitlines():
        if m := STAMP.match(line):
            stamp = dt.datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
            first = first or stamp
            last = stamp
        elif m := START.match(line):
            pending_rule = m.group(1)
        elif (m := JOBID.match(line)) and pending_rule:
            started[m.group(1)] = (pending_rule, stamp)
            pending_rule = None
        elif m := FINISHED.match(line):
            rule, t0 = started.pop(m.group(1), (m.group(2), stamp))
            durations[rule].append((stamp - t0).total_seconds())
    wall = (last - first).total_seconds() if first and last else 0.0
    return durations, wall


def model_loads(logs: Path) -> tuple[int, int]:
    """(inference jobs that loaded their own model, engine jobs that loaded theirs)."""
    own = sum(
        "loading the model in this job" in p.read_text(errors="replace")
        for p in (logs / "infer").rglob("*.log")
    )
    engines = sum(
        p.read_text(errors="replace").count("loaded once for this engine")
        for p in (logs / "engines").rglob("*.log")
    )
    return own, engines


def report(log: Path, logs: Path) -> None:
    durations, wall = parse(log)
    total = sum(len(v) for v in durations.values())
    print(f"wall {wall:.0f} s ({wall / 60:.1f} min), {total} jobs")
    print(f"{'rule':<22} {'jobs':>5} {'sum s':>7} {'mean s':>7}")
    for rule, times in sorted(durations.items(), key=lambda kv: -sum(kv[1])):
        print(f"{rule:<22} {len(times):>5} {sum(times):>7.0f} {sum(times) / len(times):>7.1f}")
    own, engines = model_loads(logs)
    print(f"model loads: {engines} by engine jobs, {own} by inference jobs themselves")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", type=Path, help="a finished run's Snakemake output")
    ap.add_argument("--logs-dir", type=Path, help="its logs/ folder (default: beside --log)")
    ap.add_argument("--run", action="store_true", help="run the default workflow first")
    ap.add_argument("--dir", type=Path, help="with --run: the copy to run in")
    ap.add_argument("snakemake_args", nargs="*", help="with --run: more snakemake arguments")
    args = ap.parse_args(argv)
    if args.run:
        repo = Path(__file__).resolve().parents[1]
        where = args.dir or Path(tempfile.mkdtemp(prefix="vlmrobust-run-"))
        if not (where / "Snakefile").exists():
            generated = {".git", ".venv", ".venv-vllm", "results", "figures", "logs", ".snakemake"}

            def ignore(folder: str, names: list[str]) -> set[str]:
                top = generated if Path(folder).resolve() == repo else set()
                return {n for n in names if n in top or n == "__pycache__"}

            shutil.copytree(repo, where, ignore=ignore, symlinks=True, dirs_exist_ok=True)
        log = where / "snakemake.log"
        cmd = ["/usr/bin/time", "-v", "snakemake", "--cores", "2", *args.snakemake_args]
        with open(log, "w") as fh:
            code = subprocess.run(cmd, cwd=where, stdout=fh, stderr=subprocess.STDOUT).returncode
        text = log.read_text(errors="replace")
        peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        elapsed = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", text)
        print(
            f"# {where}: snakemake exit {code}, elapsed {elapsed and elapsed.group(1)}, "
            f"peak RSS of one process {peak and int(peak.group(1)) // 1024} MB"
        )
        args.log = log
    if args.log is None:
        ap.error("give --log FILE or --run")
    report(args.log, args.logs_dir or args.log.parent / "logs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The papers' run end to end on a real SLURM cluster, at small size, and with faults.

    python benchmarks/bench_cluster.py                      # uninterrupted, then faulted
    python benchmarks/bench_cluster.py --no-faults          # the uninterrupted run only
    python benchmarks/bench_cluster.py --models qwen2.5-vl-7b r1-onevision-7b \\
        --datasets chartqa visargs --gpus 2                 # a cut-down run (as CI's)

Needs root, slurm-wlm and munge (`.ci/install-slurm.sh`) and the real MATH-V and
LogicVista in the real-data folder (docs/real-data.md). Starts the one-node cluster of tests/slurm_cluster.py
declaring `--gpus` stand-in GPUs (GRES) and a node the size of a GPU server (config
overrides), writes config/paper.yaml's stand-ins (vlmrobust demo-standins: a demo
checkpoint per model with the model's registry resources, `--rows` samples per
dataset) into a copy of the working tree, and runs `snakemake --profile slurm
--profile tests/slurm-gpu` there while the scheduler's records are kept (JobRecorder).

The faulted run (a second copy, the same configuration) gets, in this order: `scancel`
of an engine job with a shard half written; `kill -9` of Snakemake once
another engine generates, then `snakemake --unlock` and the same command again
(`--rerun-incomplete`); a slurmctld restart (down `--down-s` seconds) while jobs run;
the node drained while jobs run, resumed `--drain-s` seconds later. Then every table and
figure must be byte-identical to the uninterrupted run's, every output file hold the
same rows (no key lost, none twice), no job left and no shard unfinished.

Measured (printed, and written as JSON to --out): the makespan; the SLURM jobs
submitted; the engines started (model loads inside SLURM jobs) against the GPUs
declared; the GPU-seconds allocated to engine jobs (their run time times their GPUs)
against busy (the engine generating, summed from its own log, times its GPUs); the
jobs that waited on the scheduler (submit to start, and the reasons recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "workflow"))

from tests import cluster_run as cr  # noqa: E402
from tests.conftest import job_processes  # noqa: E402
from tests.slurm_cluster import (  # noqa: E402
    JobRecorder,
    SlurmCluster,
    restart_slurmctld,
    set_node_state,
    start_cluster,
    stop_cluster,
)

ENGINE = "rule_engine_"  # how the plugin's comment on an engine job starts


def wait_for(predicate, timeout: float, interval: float = 1.0, proc=None):
    """Poll ``predicate`` until it returns something true; that value (None: timed out,
    or the run ``proc`` ended first)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and (proc is None or proc.poll() is None):
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def running_groups(cluster: SlurmCluster) -> list[str]:
    out = cluster.run("squeue", "--noheader", "--states=RUNNING", "--format=%i|%k", check=False)
    return [line.split("|")[0] for line in out.split() if "|" + ENGINE in line]


def generating(workdir: Path, cluster: SlurmCluster, exclude: set[str]) -> str | None:
    """A running engine job whose model has answered a batch."""
    running = set(running_groups(cluster)) - exclude
    for run in cr.engine_runs(workdir):
        if run["job"] in running and run["calls"]:
            return run["job"]
    return None


def mid_shard(workdir: Path, cluster: SlurmCluster, log: Path) -> tuple[str, int] | None:
    """A running engine job with a shard half written (rows in its resume cache, the
    shard itself not written yet): the job and those rows."""
    running = set(running_groups(cluster))
    for run in cr.engine_runs(workdir):
        if run["job"] not in running:
            continue
        model, phase, k = run["engine"]
        plan = json.loads(
            (workdir / f"results/engines/{model}/phase{phase}/engine{k}.json").read_text()
        )
        for cell in plan["cells"]:
            partial = workdir / f"{cell['out']}.partial"
            rows = len(partial.read_text().splitlines()) if partial.exists() else 0
            if rows and not (workdir / cell["out"]).exists():
                return run["job"], rows
    return None


def resubmitted(log: Path, cancelled: str, workdir: Path) -> str | None:
    """The job Snakemake submitted again for the engine job ``cancelled`` (its retry)."""
    text = log.read_text(errors="replace")
    engines = cr.engine_jobs(text, {"jobs": {}}, workdir)
    if cancelled not in engines:
        return None
    again = [j for j, e in engines.items() if e.engines == engines[cancelled].engines]
    later = [j for j in again if int(j) > int(cancelled)]
    return later[0] if later else None


def inject_faults(cluster, workdir, log, proc, args, notes: list[str]) -> subprocess.Popen:
    """The four faults, in order, on the run ``proc``; the Snakemake that finishes it.
    A fault whose moment does not come before the run ends is noted as not injected."""
    say = lambda text: notes.append(f"{time.strftime('%H:%M:%S')} {text}")  # noqa: E731
    found = wait_for(lambda: mid_shard(workdir, cluster, log), 3600, 0.2, proc)
    if found:
        cluster.run("scancel", found[0])
        say(f"scancel {found[0]}: an engine job mid-shard ({found[1]} rows in a partial)")
        retry = wait_for(lambda: resubmitted(log, found[0], workdir), 600, 1.0, proc)
        say(f"Snakemake submitted it again (job {retry or 'not seen yet'})")
    else:
        say("scancel: not injected (no engine was mid-shard before the run ended)")
    busy = wait_for(
        lambda: generating(workdir, cluster, {found[0]} if found else set()), 3600, 0.5, proc
    )
    if busy is None:
        say("kill -9: not injected (no engine generating before the run ended)")
        return proc
    proc.send_signal(signal.SIGKILL)  # kill -9 snakemake (its jobs go on)
    proc.wait()
    say(f"kill -9 snakemake (pid {proc.pid}) while engine job {busy} generates")
    cr.unlock(cluster, workdir)
    proc = cr.start(cluster, workdir, log, "--rerun-incomplete")
    say(f"snakemake --unlock; started again (pid {proc.pid}, --rerun-incomplete)")
    if wait_for(lambda: running_groups(cluster), 3600, 0.5, proc):
        restart_slurmctld(cluster, down_s=args.down_s)
        say(f"slurmctld restarted (down {args.down_s:.0f} s) with jobs running")
    if wait_for(lambda: running_groups(cluster), 3600, 0.5, proc):
        set_node_state(cluster, "DRAIN", reason="bench_cluster")
        say("node drained with jobs running")
        time.sleep(args.drain_s)
        set_node_state(cluster, "RESUME")
        say(f"node resumed after {args.drain_s:.0f} s")
    return proc


def one_run(cluster, root: Path, name: str, args, faults: bool) -> dict:
    """Prepare, run (with the faults), and measure one run in ``root/name``."""
    workdir = root / name
    sizes = {"rows": args.rows, "max_new_tokens": args.max_new_tokens, "max_draws": args.max_draws}
    cr.prepare(workdir, sizes, args.models, args.datasets)
    log, records = root / f"{name}.snakemake.log", root / f"{name}.records.jsonl"
    notes: list[str] = []
    t0 = time.time()
    with JobRecorder(cluster, records, interval=1.0) as recorder:
        proc = cr.start(cluster, workdir, log)
        if faults:
            proc = inject_faults(cluster, workdir, log, proc, args, notes)
        code = proc.wait()
        # jobs an earlier Snakemake left finish on their own: wait for them
        wait_for(lambda: not cluster.run("squeue", "--noheader", check=False).strip(), 1800)
    makespan = time.time() - t0
    result = {"name": name, "exit": code, "makespan_s": round(makespan, 1), "faults": notes}
    result["record_failures"] = recorder.failures
    result.update(measure(cluster, workdir, log.read_text(errors="replace"), records, args))
    return result


def measure(cluster, workdir: Path, log: str, records_file: Path, args) -> dict:
    """Jobs, engines, GPU-seconds and waits of a finished run, from its records and logs
    (the scheduler's records of the jobs submitted from ``workdir``)."""
    records = cr.load_records(records_file)
    records["jobs"] = {
        j: recs for j, recs in records["jobs"].items() if recs[-1].get("WorkDir") == str(workdir)
    }
    engines = cr.engine_jobs(log, records, workdir)
    runs = cr.engine_runs(workdir)
    allocated = busy = 0.0
    idle = {"startup": 0.0, "gaps": 0.0, "tail": 0.0}
    per_engine = []
    for job in engines.values():
        start, end = job.span()
        gpus = len(job.got_gpus)
        loads = [r for r in runs if r["job"] == job.job_id]
        entry = engine_times(job, loads, start, end)
        allocated += entry["seconds"] * gpus
        busy += entry["generating_s"] * gpus
        for part in idle:
            idle[part] += entry[f"{part}_s"] * gpus
        per_engine.append(entry)
    waits = waiting(records)
    return {
        "slurm_jobs": len(records["jobs"]),
        "submissions": len(cr.submissions(log)),
        "engine_jobs": len(engines),
        "engines_started": sum(len(e["load_s"]) for e in per_engine),
        "gpus_declared": args.gpus,
        "gpu_s_allocated": round(allocated, 1),
        "gpu_s_busy": round(busy, 1),
        "busy_fraction": round(busy / allocated, 3) if allocated else None,
        # the allocated GPU time that was not generating: before the first answer (the
        # job's Snakemake start, the model's load, the first cell's plan), between
        # answers, and after the last one
        **{f"gpu_s_{part}": round(v, 1) for part, v in idle.items()},
        "per_engine": per_engine,
        **waits,
    }


def engine_times(job, loads: list[dict], start: float, end: float) -> dict:
    """One engine job's allocation split into generating, before the first answer,
    between answers and after the last (seconds, from its records and its log)."""
    calls = sorted(c for s in loads for c in s["calls"])
    gen = sum(c[2] for c in calls)
    first = calls[0][0] - calls[0][2] if calls else end
    last = calls[-1][0] if calls else end
    return {
        "job": job.job_id,
        "engines": job.engines,
        "state": job.last("JobState"),
        "gpus": job.got_gpus,
        "devices": [s["devices"] for s in loads],
        "seconds": max(0.0, end - start),
        "generating_s": round(gen, 1),
        "startup_s": round(max(0.0, first - start), 1),
        "gaps_s": round(max(0.0, last - first - gen), 1),
        "tail_s": round(max(0.0, end - last), 1),
        "load_s": [x for s in loads for x in s["load_s"]],
    }


def waiting(records: dict) -> dict:
    """Jobs that waited on the scheduler: submit-to-start per job, reasons seen."""
    waits, reasons = [], {}
    for recs in records["jobs"].values():
        last = recs[-1]
        start, submit = cr._time(last.get("StartTime", "")), cr._time(last.get("SubmitTime", ""))
        if start and submit:
            waits.append(start - submit)
        for rec in recs:
            if rec.get("JobState") == "PENDING" and rec.get("Reason") not in (None, "None"):
                reasons[rec["Reason"]] = reasons.get(rec["Reason"], 0) + 1
    waited = [w for w in waits if w >= 1]
    return {
        "jobs_waited": len(waited),
        "wait_s_total": round(sum(waits), 1),
        "wait_s_max": round(max(waits, default=0), 1),
        "pending_reasons": reasons,
    }


def compare(a: Path, b: Path) -> dict:
    """Tables and figures byte for byte; output rows key by key."""
    from tools.compare_runs import compare as compare_files

    globs = ["results/tables/**/*", "figures/**/*", "results/metrics/**/*.csv"]
    differences = compare_files(a, b, globs)
    lost = duplicated = files = 0
    for out in sorted((a / "results/outputs").rglob("*.jsonl")):
        if "shard" in out.name:
            continue
        other = b / out.relative_to(a)
        keys_a = [json.loads(line)["key"] for line in out.read_text().splitlines()]
        keys_b = (
            [json.loads(x)["key"] for x in other.read_text().splitlines()] if other.exists() else []
        )
        files += 1
        lost += len(set(keys_a) - set(keys_b))
        duplicated += len(keys_b) - len(set(keys_b))
    return {
        "differences": differences,
        "output_files": files,
        "rows_lost": lost,
        "rows_duplicated": duplicated,
    }


def left_behind(cluster: SlurmCluster, *workdirs: Path) -> dict:
    """Jobs still queued, job processes still alive, shards whose resume cache holds
    other rows than the shard (an unfinished shard)."""
    time.sleep(5)
    unfinished = [
        str(p)
        for w in workdirs
        for p in (w / "results/outputs").rglob("*.partial")
        if not p.with_suffix("").exists() or p.read_bytes() != p.with_suffix("").read_bytes()
    ]
    return {
        "queued": cluster.run("squeue", "--noheader", check=False).split("\n")[:-1],
        "processes": [pid for w in workdirs for pid in job_processes(w)],
        "partials": unfinished,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2, help="samples per dataset")
    ap.add_argument("--max-new-tokens", type=int, default=16, help="longest answer")
    ap.add_argument("--max-draws", type=int, default=2, help="sampled draws per question")
    ap.add_argument("--gpus", type=int, default=4, help="stand-in GPUs of the node")
    ap.add_argument("--cpus", type=int, default=32, help="CPUs the node declares")
    ap.add_argument("--memory-mb", type=int, default=1_500_000, help="memory it declares")
    ap.add_argument("--models", nargs="+", default=None, help="default: every paper model")
    ap.add_argument("--datasets", nargs="+", default=None, help="default: every dataset")
    ap.add_argument("--no-faults", action="store_true", help="the uninterrupted run only")
    ap.add_argument("--only-faults", action="store_true", help="the faulted run only")
    ap.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("UNINTERRUPTED", "FAULTED"),
        help="only compare two finished runs' folders (tables, figures, rows)",
    )
    ap.add_argument("--down-s", type=float, default=10.0, help="slurmctld down this long")
    ap.add_argument("--drain-s", type=float, default=20.0, help="node drained this long")
    ap.add_argument(
        "--root", type=Path, default=None, help="work folder (default: a temporary one)"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    if args.compare:
        comparison = compare(*args.compare)
        report({"runs": [], "comparison": comparison, "left": {}}, args)
        return 1 if comparison["differences"] or comparison["rows_lost"] else 0
    reason = cr.missing_data(args.datasets)
    if reason:
        print(f"skipped: {reason}", file=sys.stderr)
        return 2
    root = args.root or Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    root.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(gpus=args.gpus, cpus=args.cpus, memory_mb=args.memory_mb)
    try:
        results = {"runs": []}
        if not args.only_faults:
            results["runs"].append(one_run(cluster, root, "uninterrupted", args, faults=False))
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))
        if not args.no_faults and all(r["exit"] == 0 for r in results["runs"]):
            results["runs"].append(one_run(cluster, root, "faulted", args, faults=True))
        if len(results["runs"]) == 2:
            results["comparison"] = compare(root / "uninterrupted", root / "faulted")
        results["left"] = left_behind(cluster, *(root / r["name"] for r in results["runs"]))
    finally:
        stop_cluster(cluster)
    report(results, args)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    if os.environ.get("BENCH_CLUSTER_KEEP") != "1" and args.root is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def report(results: dict, args) -> None:
    for run in results["runs"]:
        print(f"== {run['name']} run (exit {run['exit']}): makespan {run['makespan_s']:.0f} s")
        for note in run["faults"]:
            print(f"   fault: {note}")
        print(
            f"   SLURM jobs {run['slurm_jobs']} ({run['submissions']} submissions); engine jobs "
            f"{run['engine_jobs']}, engines started {run['engines_started']} on {args.gpus} GPUs"
        )
        print(
            f"   GPU-seconds allocated {run['gpu_s_allocated']:.0f}, busy {run['gpu_s_busy']:.0f}"
            f" ({100 * (run['busy_fraction'] or 0):.0f} %); idle: before the first answer "
            f"{run['gpu_s_startup']:.0f}, between answers {run['gpu_s_gaps']:.0f}, after "
            f"the last {run['gpu_s_tail']:.0f}"
        )
        print(
            f"   jobs that waited >= 1 s: {run['jobs_waited']} (total {run['wait_s_total']:.0f} s, "
            f"longest {run['wait_s_max']:.0f} s); pending reasons {run['pending_reasons']}"
        )
    if "comparison" in results:
        c = results["comparison"]
        print(
            f"== faulted vs uninterrupted: {len(c['differences'])} differing tables/figures, "
            f"{c['output_files']} output files, {c['rows_lost']} rows lost, "
            f"{c['rows_duplicated']} duplicated"
        )
        for line in c["differences"][:20]:
            print("   " + line)
    print(f"== left behind: {results['left']}")


if __name__ == "__main__":
    raise SystemExit(main())

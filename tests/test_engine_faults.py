"""Faults of the engine design on real processes (Snakemake, engine jobs), each run
compared with one uninterrupted run: every gathered answer (but its latency), scored
file and table equal.

- Snakemake killed (kill -9) while its engines run, the orphaned engines finishing: the
  first rerun completes (Snakemake alone would skip the gathering: snakemake#4166);
- a target whose gathering Snakemake would skip: the run fails naming it, the next one
  completes;
- a changed split (engines 1 -> 2 with split_cells, then back): no answer asked again,
  no file of the earlier split left;
- damaged resume caches (a line that is JSON but no row, a line that is not UTF-8, a
  last line torn inside a multi-byte character): dropped with a warning naming file and
  line, only their requests asked again;
- a stopped engine (SIGSTOP): its log says so, again and again, until it continues.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from vlmrobust.core.io import read_jsonl

from .conftest import BIN, QUICK_TRAIN, copy_repo, job_processes, run, tool_env

# Whole workflow runs (engine runs killed, stopped and resumed):
# `pytest -m "not workflow"` leaves them out.
pytestmark = pytest.mark.workflow

MODEL = "demo-base"
CONFIG = "config/test-faults.yaml"
# the answers of the run: demo-chart 6 samples x 3 draws, demo-yesno 6, each x 2 conditions
TOTAL = 6 * 3 * 2 + 6 * 2
# one engine's plan and log (service.engines 1)
PLAN = f"results/engines/{MODEL}/phase0/engine0.json"
LOG = f"logs/engines/{MODEL}/phase0/engine0.log"


def _config(**service) -> dict:
    """Two demo datasets, one sampled (3 draws at temperature 0.7), clean and corrupted:
    48 answers of one demo model."""
    return {
        "models": [MODEL],
        "demo": {"n_per_family": 6, "families": ["chart", "yesno"], "train": QUICK_TRAIN},
        "decoding": {"max_new_tokens": 32},
        "conditions": {
            "clean": {"perturbation": "none"},
            "corrupt": {"perturbation": "corruption"},
        },
        "datasets": {
            "demo-chart": {
                "adapter": "demo",
                "source": "local",
                "path": "results/raw/demo/chart",
                "conditions": ["clean", "corrupt"],
                "temperature": 0.7,
                "n": 3,
            },
            "demo-yesno": {
                "adapter": "demo",
                "source": "local",
                "path": "results/raw/demo/yesno",
                "conditions": ["clean", "corrupt"],
            },
        },
        "service": service,
    }


def _write_config(workdir: Path, **service) -> None:
    (workdir / CONFIG).write_text(yaml.safe_dump(_config(**service)), encoding="utf-8")


def _cmd(*args: str, cores: int = 2) -> list[str]:
    return [str(BIN / "snakemake"), "--cores", str(cores), "--configfile", CONFIG, *args]


def _snakemake(workdir: Path, *args: str, check: bool = True):
    return run(_cmd(*args), workdir, check=check)


def _nothing_left(workdir: Path) -> None:
    dry = _snakemake(workdir, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]


def answers(workdir: Path) -> dict[str, object]:
    """What a run must reproduce: every gathered answer (but its latency), every scored
    file and table."""
    found: dict[str, object] = {}
    outputs = workdir / "results/outputs" / MODEL
    for path in sorted(outputs.glob("*/*/*.jsonl")):
        rows = [{k: v for k, v in r.items() if k != "latency_s"} for r in read_jsonl(path)]
        found[str(path.relative_to(workdir))] = rows
    for path in sorted((workdir / "results").rglob("*")):
        rel = str(path.relative_to(workdir))
        if path.is_file() and ("/tables/" in rel or rel.startswith("results/scored/")):
            found[rel] = path.read_bytes()
    return found


def generated(workdir: Path, log: str = LOG) -> int:
    """Answers the engine asked its model for in its last run (its log)."""
    text = (workdir / log).read_text()
    return sum(int(n) for n in re.findall(r"'generated': (\d+)", text))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """One uninterrupted run: the reference, and the folder every case starts from."""
    workdir = copy_repo(tmp_path_factory.mktemp("faults") / "repo")
    _write_config(workdir)
    _snakemake(workdir)
    assert generated(workdir) == TOTAL
    return workdir


def _fresh(baseline: Path, dest: Path, keep_outputs: bool = False) -> Path:
    """A copy of the baseline run (its trained model, variants, metadata); without its
    answers unless ``keep_outputs``."""
    shutil.copytree(baseline, dest, symlinks=True)
    if not keep_outputs:  # the answers and all that reads them
        for name in ("outputs", "scored", "metrics", "tables", "views", "requests.txt"):
            gone = dest / "results" / name
            shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
    return dest


def _engine_pids(workdir: Path) -> list[int]:
    return [
        pid
        for pid in job_processes(workdir)
        if b"infer-engine" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def _watched(workdir: Path) -> bool:
    """An engine's watcher runs (core.watchdog)."""
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and Path(os.readlink(entry / "cwd")) == workdir
                and b"vlmrobust.core.watchdog" in (entry / "cmdline").read_bytes()
            ):
                return True
        except OSError:
            continue
    return False


def _wait_for(check, what: str, seconds: float = 300):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _partials(workdir: Path) -> list[Path]:
    return sorted((workdir / "results/outputs").rglob("*.partial"))


def _answered_rows(workdir: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in _partials(workdir))


def test_a_killed_snakemake_whose_engines_finish_is_completed_by_the_first_rerun(
    baseline, tmp_path
):
    """kill -9 of Snakemake (the login node's shell dies) while its engine answers; the
    orphaned engine finishes; after --unlock the first plain rerun completes the run
    (Snakemake alone reruns the engine and ends "done" without gathering, scoring or
    tables), then nothing is left and every answer equals the uninterrupted run's."""
    workdir = _fresh(baseline, tmp_path / "repo")
    proc = subprocess.Popen(_cmd(), cwd=workdir, env=tool_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    _wait_for(lambda: _engine_pids(workdir) and _answered_rows(workdir) >= 2, "the engine")
    os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone: its engine goes on
    proc.wait()
    _wait_for(lambda: not job_processes(workdir), "the orphaned engine to finish")
    assert generated(workdir) == TOTAL  # the orphan answered everything
    run([str(BIN / "snakemake"), "--unlock", "--configfile", CONFIG], workdir)
    again = _snakemake(workdir)
    text = again.stdout + again.stderr
    assert "reopened" in text and "gather_outputs" in text, text[-3000:]
    assert generated(workdir) == 0  # the rerun engine asked nothing
    _nothing_left(workdir)
    assert answers(workdir) == answers(baseline)


def test_a_target_whose_gathering_snakemake_would_skip_fails_naming_it(baseline, tmp_path):
    """The same hole reached another way, for a target other than rule all: the engine
    must rerun (forced, as an incomplete marker forces it) while a cell's outputs and
    scored files are missing. Snakemake alone runs the engine and exits 0 without the
    scored file; the run fails before running anything, naming the job it would skip,
    and the same command again completes."""
    workdir = _fresh(baseline, tmp_path / "repo", keep_outputs=True)
    cell = f"{MODEL}/demo-chart/corrupt/default"
    gathered, target = (workdir / f"results/outputs/{cell}.jsonl"), f"results/scored/{cell}.csv"
    gathered.unlink()
    (workdir / target).unlink()
    cmd = ("--forcerun", "engine_demo_base_phase0_0", "--", target)
    first = _snakemake(workdir, *cmd, check=False)
    text = first.stdout + first.stderr
    assert first.returncode != 0
    assert "Snakemake would skip 1 job(s) whose outputs are missing" in text, text[-3000:]
    assert f"gather_outputs (results/outputs/{cell}.jsonl)" in text
    assert not gathered.exists() and generated(workdir) == TOTAL  # nothing ran
    _snakemake(workdir, *cmd)
    assert gathered.exists() and (workdir / target).exists() and generated(workdir) == 0
    _snakemake(workdir)
    _nothing_left(workdir)
    assert answers(workdir) == answers(baseline)


def _split_files(workdir: Path, shards: int) -> list[Path]:
    return sorted((workdir / "results/outputs").rglob(f"shard*of{shards}.jsonl*"))


def test_a_changed_split_reuses_every_answer_and_leaves_no_old_cache(baseline, tmp_path):
    """engines 1 -> 2 with split_cells (every cell's shard count changes), then back to
    one unsplit engine: each time every row comes from the earlier split's resume caches
    (nothing asked), the earlier split's files are removed by the gathering, and every
    answer equals the uninterrupted run's."""
    workdir = _fresh(baseline, tmp_path / "repo", keep_outputs=True)
    assert _split_files(workdir, 1) and not _split_files(workdir, 2)
    _write_config(workdir, engines={MODEL: 2}, split_cells=True)
    _snakemake(workdir)
    for k in (0, 1):
        log = f"logs/engines/{MODEL}/phase0/engine{k}.log"
        assert generated(workdir, log) == 0
        assert "row(s) taken from the resume caches of another split" in (workdir / log).read_text()
    assert not _split_files(workdir, 1) and _split_files(workdir, 2)
    assert answers(workdir) == answers(baseline)
    _nothing_left(workdir)
    _write_config(workdir)
    _snakemake(workdir)
    assert generated(workdir) == 0
    assert _split_files(workdir, 1) and not _split_files(workdir, 2)
    assert answers(workdir) == answers(baseline)


def test_a_damaged_resume_cache_drops_the_line_and_asks_only_it_again(baseline, tmp_path):
    """Three damaged lines in the resume caches of an engine's cells (JSON that is no
    row, bytes that are not UTF-8, a last line torn inside a multi-byte character): each
    is dropped with a warning naming its file and line, its request asked again, and the
    run ends equal to the uninterrupted one."""
    workdir = _fresh(baseline, tmp_path / "repo", keep_outputs=True)
    cell = workdir / f"results/outputs/{MODEL}/demo-chart"
    shards = [cell / "clean/default/shard0of1.jsonl", cell / "corrupt/default/shard0of1.jsonl"]
    for shard in shards:  # the engine has to run; the gathered files go too
        shard.unlink()
        shard.parent.with_suffix(".jsonl").unlink()
    clean, corrupt = (Path(f"{s}.partial") for s in shards)
    lines = clean.read_bytes().splitlines(keepends=True)
    lines[1] = b"[1, 2]\n"  # JSON, not a row
    lines[3] = b'{"key": "caf\xe9"}\n'  # Latin-1, not UTF-8
    clean.write_bytes(b"".join(lines))
    lines = corrupt.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["raw_text"] = "réponse"  # a non-ASCII answer ...
    torn = json.dumps(last, ensure_ascii=False).encode()
    cut = torn.index("é".encode()) + 1  # ... cut inside its two bytes
    corrupt.write_bytes(b"".join(lines[:-1]) + torn[:cut])
    # asked for by name: Snakemake rebuilds no missing intermediate file whose final
    # targets exist (the scored files, the tables)
    rel = lambda p: str(p.relative_to(workdir))  # noqa: E731
    _snakemake(workdir, "--", *(rel(s.parent.with_suffix(".jsonl")) for s in shards))
    log = (workdir / LOG).read_text()
    assert f"{rel(clean)}:2: not an output row (a JSON list without a string key)" in log
    assert f"{rel(clean)}:4: not UTF-8 (byte 0xe9 at column 13)" in log
    assert f"{rel(corrupt)}:{len(lines)}: not UTF-8" in log and "cut short" in log
    assert generated(workdir) == 3
    _snakemake(workdir)  # the changed answers' scores and tables
    _nothing_left(workdir)
    assert answers(workdir) == answers(baseline)


def test_a_stopped_engine_says_so_in_its_log_until_it_continues(baseline, tmp_path):
    """SIGSTOP of an engine: after service.wait_log_s without an answer its watcher
    writes what the engine waits on and that its process is stopped, again every
    wait_log_s; after SIGCONT the run completes equal to the uninterrupted one."""
    workdir = _fresh(baseline, tmp_path / "repo")
    _write_config(workdir, wait_log_s=1)
    proc = subprocess.Popen(_cmd(), cwd=workdir, env=tool_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    pids = _wait_for(lambda: _watched(workdir) and _engine_pids(workdir), "a watched engine")
    log = workdir / LOG

    def reports() -> list[str]:
        return [line for line in log.read_text().splitlines() if "watchdog:" in line]

    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    before = len(reports()) + 1  # one may have been on its way
    try:
        said = _wait_for(lambda: len(reports()) >= before + 3 and reports(), "reports", 60)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    assert proc.wait(timeout=600) == 0, proc.stdout.read().decode()[-3000:]
    for line in said[before:]:
        assert f"engine {PLAN} (pid {pids[0]}) has answered nothing for" in line, line
        assert "it waits on: " in line and "the process is stopped (SIGSTOP" in line, line
    assert answers(workdir) == answers(baseline)

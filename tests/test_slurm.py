"""The SLURM profile on a real single-node cluster (started by tests/slurm_cluster.py).

Snakemake runs as users type it on a cluster, `--profile slurm` (the link to
profiles/slurm) plus `--profile tests/slurm-local` (what a cluster without accounting
and GPUs needs): the profile's default resources, a rule's threads and the no-GPU
overlay must reach sbatch, and each job run inside its own SLURM job. The workflow
itself on a cluster (config/paper.yaml's stand-ins, its data steps, engines and
studies, with GPUs declared) is tests/test_cluster.py. Skipped, with the reason, where
the machine has no SLURM or munge (`.ci/install-slurm.sh` installs them) or is not root.
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from .conftest import BIN, REPO
from .slurm_cluster import ClusterError, missing_requirements, start_cluster, stop_cluster

pytestmark = pytest.mark.slurm

LOCAL_PROFILE = REPO / "tests" / "slurm-local"
# "Job 3 has been submitted with SLURM jobid 7 (log: /.../slurm_logs/rule_samples/...)."
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (.+?)\)\.?$")


def _skip_or_fail(reason: str) -> None:
    # CI installs SLURM (.ci/install-slurm.sh) and sets VLMROBUST_REQUIRE_SLURM=1, so a
    # cluster that cannot start there is a failure, not a silent skip.
    if os.environ.get("VLMROBUST_REQUIRE_SLURM") == "1":
        pytest.fail(f"VLMROBUST_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


def running_cluster(**sizes):
    """A private one-node cluster (``start_cluster(timeout=30, **sizes)``) for a fixture
    to yield from; skipped (or failed, where SLURM is required) when it cannot start,
    stopped with no daemons left after."""
    problems = missing_requirements()
    if problems:
        _skip_or_fail("the SLURM test cluster needs " + "; ".join(problems))
    try:
        cluster = start_cluster(timeout=30, **sizes)
    except ClusterError as exc:
        _skip_or_fail(f"the SLURM test cluster did not start: {exc}")
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A private one-node cluster for the whole session."""
    yield from running_cluster()


def snakemake_on_slurm(cluster, workdir: Path, *args: str, profile: str | Path = "slurm"):
    """Run Snakemake in `workdir` with the SLURM profiles against the test cluster."""
    env = cluster.env
    env["PATH"] = f"{BIN}:{env['PATH']}"
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--profile", str(profile)]
    cmd += ["--profile", str(LOCAL_PROFILE), *args]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} failed ({proc.returncode})\n{proc.stderr[-8000:]}\n{cluster.log_tail()}"
    )
    return proc


def submissions(log: str) -> list[tuple[str, str, Path]]:
    """(rule, SLURM job id, SLURM log file) of every job Snakemake submitted."""
    found = []
    for line in log.splitlines():
        m = SUBMITTED.search(line)
        if m:
            logfile = Path(m.group(3))
            rule = next(p for p in logfile.parts if p.startswith("rule_"))[len("rule_") :]
            found.append((rule, m.group(2), logfile))
    return found


def test_profile_resources_reach_sbatch(slurm_cluster, tmp_path):
    """Default resources, threads and the no-GPU overlay arrive in the SLURM jobs."""
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(
            """\
            rule all:
                input: "light.txt"

            rule heavy:
                output: "heavy.txt"
                threads: 2
                shell: "echo $SLURM_JOB_ID > {output}"

            rule infer:
                input: "heavy.txt"
                output: "light.txt"
                resources: gpu=1, mem_mb=500, runtime=5
                shell: "cat {input} > {output}; echo $SLURM_JOB_ID >> {output}"
            """
        )
    )
    proc = snakemake_on_slurm(slurm_cluster, tmp_path, profile=REPO / "profiles" / "slurm")
    jobs = {rule: job_id for rule, job_id, _ in submissions(proc.stderr)}
    assert sorted(jobs) == ["heavy", "infer"]
    # Each shell command ran inside its own SLURM job.
    assert (tmp_path / "light.txt").read_text().split() == [jobs["heavy"], jobs["infer"]]

    heavy = slurm_cluster.job_info(jobs["heavy"])
    assert heavy["JobState"] == "COMPLETED"
    assert heavy["Partition"] == "debug"
    assert heavy["NumCPUs"] == "2"  # threads: 2 -> cpus_per_task: threads
    assert heavy["TimeLimit"] == "01:00:00"  # default-resources runtime: 60
    assert heavy["MinMemoryNode"] == "4000M"  # default-resources mem_mb: 4000

    infer = slurm_cluster.job_info(jobs["infer"])
    assert infer["JobState"] == "COMPLETED"
    assert infer["NumCPUs"] == "1"
    assert infer["TimeLimit"] == "00:05:00"
    assert infer["MinMemoryNode"] == "500M"
    assert "gpu" not in " ".join(infer.values())  # gpu=1 overridden by slurm-local

"""The tiny configurations the workflow tests and CI share (config/test/): each run they
make is valid, dry-runs to the jobs it should and passes Snakemake's linter, so a
workflow test never fails first on its own configuration."""

from __future__ import annotations

import re

import pytest

from .conftest import BIN, SMALL_CONFIGS, TEST_CONFIGS, copy_repo, run

QUICK = "config/test/quick-train.yaml"
#: each tiny run: its --configfile files (merged in order) and --config
RUNS = {
    "small": (SMALL_CONFIGS, ()),
    "two-datasets": (("config/test/two-datasets.yaml", QUICK), ("models=[demo-base]",)),
    "chart": (("config/test/chart.yaml", QUICK), ("models=[demo-base]",)),
}
#: jobs of each run's dry run (in a repository without results) by rule, hand-counted
JOBS = {
    # the default run's DAG, as tests/test_workflow.py runs it: 15 datasets, 35 dataset x
    # condition pairs (`vlmrobust check-config config/config.yaml`), two demo models
    "small": {"samples": 15, "variants": 35, "demo_data": 1, "demo_model": 2, "all": 1},
    # demo-chart clean + corrupt, demo-yesno clean: one engine of demo-base, 3 cells
    "two-datasets": {"samples": 2, "variants": 3, "gather_outputs": 3, "score": 3},
    # demo-chart clean: one cell
    "chart": {"samples": 1, "variants": 1, "gather_outputs": 1, "score": 1},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A copy of the repository without results: every job of a run is to be done."""
    return copy_repo(tmp_path_factory.mktemp("tiny") / "repo")


def _snakemake(workdir, *args: str):
    return run([str(BIN / "snakemake"), "--cores", "1", *args], workdir, check=False)


def _args(name: str) -> list[str]:
    files, config = RUNS[name]
    return ["--configfile", *files, *(["--config", *config] if config else [])]


def test_every_tiny_configuration_is_in_a_run():
    used = {f for files, _ in RUNS.values() for f in files if f.startswith("config/test/")}
    present = {f"config/test/{p.name}" for p in TEST_CONFIGS.glob("*.yaml")}
    assert present == used


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_tiny_run_dry_runs_to_its_jobs(workdir, name):
    proc = _snakemake(workdir, "-n", *_args(name))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    jobs = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    assert {rule: jobs.get(rule) for rule in JOBS[name]} == JOBS[name]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_tiny_run_passes_the_linter(workdir, name):
    proc = _snakemake(workdir, "--lint", "--workflow-profile", "none", *_args(name))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in out

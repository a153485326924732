"""Static checks CI enforces: ruff, snakefmt and snakemake's own linter."""

from __future__ import annotations

from .conftest import BIN, REPO, run


def test_ruff_clean():
    proc = run([str(BIN / "ruff"), "check", "workflow", "tests", "benchmarks"], REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakefmt_clean():
    proc = run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/rules"], REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakemake_lint_clean():
    proc = run([str(BIN / "snakemake"), "--lint", "--workflow-profile", "none"], REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr

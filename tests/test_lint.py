"""Static checks CI enforces: ruff, snakefmt, snakemake's own linter and the import
contracts of the package's layers (import-linter, configured in pyproject.toml)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess

import pytest

from .conftest import BIN, REPO, run


def test_ruff_clean():
    proc = run(
        [str(BIN / "ruff"), "check", "workflow", "tests", "benchmarks", "tools"], REPO, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakefmt_clean():
    proc = run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/rules"], REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakemake_lint_clean():
    proc = run([str(BIN / "snakemake"), "--lint", "--workflow-profile", "none"], REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr


def _lint_imports(package_parent, *extra):
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_import_contracts_kept():
    proc = _lint_imports(REPO / "workflow")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" not in proc.stdout.split("Contracts:")[-1].replace("0 broken", "")


# The packages under workflow/: the production package and the demo generators.
PACKAGES = ("vlmrobust", "vlmrobust_demo")

# Each arrow the wrong way that the layering forbids: (importing module, under workflow/;
# imported module; the contract that must catch it).
WRONG_ARROWS = [
    ("vlmrobust/data/adapters.py", "vlmrobust.review.server", "layers"),
    ("vlmrobust/data/visargs.py", "vlmrobust.clients.llm", "data-no-llm"),
    ("vlmrobust/metrics/distraction.py", "vlmrobust.judges.reference", "pure-metrics"),
    ("vlmrobust/clients/llm/backends.py", "vlmrobust.infer.run", "layers"),
    ("vlmrobust/construct/editor.py", "vlmrobust.infer.run", "layers"),
    ("vlmrobust/score/released/formats.py", "vlmrobust.data.adapters", "layers"),
    ("vlmrobust/judges/crm/stage.py", "vlmrobust.infer.run", "layers"),
    ("vlmrobust/core/config.py", "vlmrobust.data.adapters", "layers"),
    ("vlmrobust/clients/vlm/hf.py", "vlmrobust_demo.model", "demo"),
    ("vlmrobust/data/adapters.py", "vlmrobust_demo.data", "demo"),
    ("vlmrobust_demo/data.py", "vlmrobust.metrics.core", "demo-below"),
    ("vlmrobust_demo/model.py", "vlmrobust.cli", "demo-below"),
    ("vlmrobust/report/tables/render.py", "vlmrobust.studies", "layers"),
    ("vlmrobust/plan/scope.py", "vlmrobust.studies.base", "layers"),
    ("vlmrobust/plan/hooks.py", "vlmrobust.jobs.infer", "layers"),
    ("vlmrobust/core/paths.py", "vlmrobust.plan", "layers"),
    ("vlmrobust/jobs/score.py", "vlmrobust.cli", "layers"),
    ("vlmrobust/score/released/rescore.py", "vlmrobust.jobs.score", "layers"),
    ("vlmrobust/jobs/data.py", "vlmrobust_demo.data", "demo"),
    ("vlmrobust_demo/idis.py", "vlmrobust.plan", "demo-below"),
    ("vlmrobust_demo/commands.py", "vlmrobust.jobs", "demo-below"),
    ("vlmrobust/studies/base.py", "vlmrobust.forecast", "layers"),
    ("vlmrobust/forecast/cells.py", "vlmrobust.jobs.forecast", "layers"),
    ("vlmrobust/forecast/counts.py", "vlmrobust_demo.data", "demo"),
]


@pytest.mark.parametrize(("module", "target", "contract"), WRONG_ARROWS)
def test_import_contract_catches_wrong_arrow(tmp_path, module, target, contract):
    for package in PACKAGES:
        shutil.copytree(REPO / "workflow" / package, tmp_path / package)
    path = tmp_path / module
    path.write_text(path.read_text() + f"\nimport {target}  # noqa\n")
    proc = _lint_imports(tmp_path, "--contract", contract)
    assert proc.returncode != 0, proc.stdout
    importer = module.removesuffix(".py").replace("/", ".")
    assert f"{importer} -> {target}" in proc.stdout, proc.stdout


def test_the_architecture_doc_names_every_module():
    """docs/architecture.md's module map names every module of the package (relative to
    it) and of the demo package (as ``vlmrobust_demo/<module>``)."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = []
    for package, prefix in (("vlmrobust", ""), ("vlmrobust_demo", "vlmrobust_demo/")):
        root = REPO / "workflow" / package
        modules += [
            prefix + p.relative_to(root).as_posix()
            for p in root.rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py")
        ]
    missing = [m for m in sorted(modules) if f"`{m}`" not in doc]
    assert missing == []


#: the longest a function of the packages may be (lines from `def` to its last line)
MAX_FUNCTION_LINES = 80


def long_functions(root) -> list[str]:
    """``file:function (lines)`` of every function under ``root`` longer than the limit."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root)}:{node.name} ({lines})")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_longer_than_80_lines(package):
    """One function, one idea: none of the packages' functions runs over 80 lines."""
    assert long_functions(REPO / "workflow" / package) == []


def test_the_function_limit_catches_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == [f"m.py:long ({MAX_FUNCTION_LINES + 1})"]

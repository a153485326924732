"""Shared test helpers: the repository root, a runner for the workflow's CLIs and a fake LLM API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.api_server import FAKE_KEY_ENV, FakeAPIServer
from vlmrobust.core.io import read_jsonl

REPO = Path(__file__).resolve().parent.parent
# Small slices of real released data (copied from the project's shared/fixtures).
FIXTURES = REPO / "tests" / "fixtures"
BIN = Path(sys.executable).parent

# What a copy of the repository for a workflow run leaves out: generated folders at the
# top level, caches anywhere.
_TOP_LEVEL_GENERATED = {
    ".venv",
    ".venv-vllm",
    ".git",
    "results",
    "figures",
    "logs",
    ".snakemake",
    "report.html",
}
_CACHES = shutil.ignore_patterns(
    "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache", ".hypothesis"
)


def _copy_ignore(directory: str, names: list[str]) -> set[str]:
    ignored = set(_CACHES(directory, names))
    if Path(directory).resolve() == REPO:
        ignored |= _TOP_LEVEL_GENERATED & set(names)
    return ignored


#: The tiny configurations the workflow tests and CI share (config/test/: each is checked,
#: dry-run and linted by tests/test_test_configs.py).
TEST_CONFIGS = REPO / "config" / "test"
#: A short demo-model training for workflow tests (`demo.train`): the DAG is under test,
#: not what the models learn (tests/test_demo_train.py checks the training itself).
QUICK_TRAIN = yaml.safe_load((TEST_CONFIGS / "quick-train.yaml").read_text())["demo"]["train"]
#: ``--configfile`` of the default run, small (3 samples a family, the short training)
SMALL_CONFIGS = ("config/config.yaml", "config/test/quick-train.yaml", "config/test/small.yaml")


def tiny_config(name: str) -> dict:
    """config/test/<name>.yaml with the short training, as a dict a test may change and
    write (a copy: the file is shared)."""
    config = yaml.safe_load((TEST_CONFIGS / f"{name}.yaml").read_text())
    config["demo"]["train"] = dict(QUICK_TRAIN)
    return config


def tool_env() -> dict[str, str]:
    """The environment for subprocesses: this interpreter's scripts first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(
    cmd: list[str],
    cwd: Path,
    check: bool = True,
    timeout: float = 2400,  # a guard against hangs; a full demo run takes minutes
    env: dict[str, str] | None = None,
):
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env={**tool_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode})\nstdout:\n{proc.stdout[-4000:]}\n"
            f"stderr:\n{proc.stderr[-6000:]}"
        )
    return proc


def job_processes(cwd: Path) -> list[int]:
    """Pids of the ``vlmrobust`` commands (a run's jobs) alive now in ``cwd``: none may
    outlive the Snakemake that started them."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            where = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if where == cwd and any(a.endswith(b"vlmrobust") for a in argv[:2]):
            pids.append(int(entry.name))
    return pids


def copy_repo(dest: Path) -> Path:
    """A copy of the working tree (without generated files) to run the workflow in."""
    shutil.copytree(REPO, dest, ignore=_copy_ignore, symlinks=True)
    return dest


#: the test files that take minutes, longest first (measured: docs/development.md). They
#: run first, so that the two processes of `pytest -n 2` share them instead of one
#: process starting the longest last (`--dist loadfile --no-loadscope-reorder`, in
#: pyproject.toml, keeps each file in one process and this order).
LONG_FILES = (
    "test_workflow.py",
    "test_cluster.py",
    "test_vllm_engine.py",
    "test_engine_faults.py",
    "test_inference_workflow.py",
    "test_llm_engines.py",
    "test_twins.py",
    "test_reviewers_idis.py",
    "test_wrapper_tensors.py",
    "test_gpu_check.py",
    "test_real_slice.py",
    "test_reviewers.py",
    "test_models_registry.py",
    "test_preflight.py",
)


def pytest_collection_modifyitems(items):
    """A test on the SLURM cluster or the vLLM engine is as long as a whole workflow run:
    it is marked ``workflow`` too (`pytest -m "not workflow"`: the everyday loop). The
    files of :data:`LONG_FILES` go first, in that order (each file's own order kept)."""
    for item in items:
        if item.get_closest_marker("slurm") or item.get_closest_marker("vllm"):
            item.add_marker(pytest.mark.workflow)
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _truncated_images_fail():
    """After each test PIL's LOAD_TRUNCATED_IMAGES is off again: an lmms-eval module a
    test imports directly turns it on for the whole process, and a later test in the
    same process (with `-n 2`, whichever file comes next) would then load a truncated
    image where the workflow fails naming it."""
    yield
    from PIL import ImageFile

    ImageFile.LOAD_TRUNCATED_IMAGES = False


@pytest.fixture(scope="session")
def plan():
    """The default run's plan (config/config.yaml; its registry path is relative to the
    repository); a test module may define its own ``plan``."""
    from vlmrobust.plan import RunPlan

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return RunPlan.load("config/config.yaml")
    finally:
        os.chdir(cwd)


@pytest.fixture
def fake_api(monkeypatch):
    """A running fake OpenAI / Gemini API (tests/api_server.py) with a test key in
    ``FAKE_KEY_ENV``; build specs for it with ``tests.api_server.fake_llm_spec``."""
    monkeypatch.setenv(FAKE_KEY_ENV, "sk-test-fake-api")
    with FakeAPIServer() as server:
        yield server


def output_row(sample_id: str, text: str, dataset: str = "d", **kw):
    """An answered clean output row (:class:`vlmrobust.core.records.OutputRow`) whose
    visible answer is ``text``, for scoring tests."""
    from vlmrobust.core.records import OutputRow

    return OutputRow(
        key=f"{sample_id}#0",
        variant_id=sample_id,
        sample_id=sample_id,
        dataset=dataset,
        condition="clean",
        prompt="mcq",
        prompt_version="1",
        model="m",
        backend="hf",
        model_revision="r",
        draw=0,
        raw_text=text,
        answer_text=text,
        **kw,
    )


def run_files(workdir: Path) -> dict[str, bytes]:
    """Every table, scored file and output text of a run (the rows' timings aside)."""
    files = {}
    for path in sorted((workdir / "results").rglob("*")):
        rel = str(path.relative_to(workdir))
        if path.is_file() and ("/tables/" in rel or rel.startswith("results/scored/")):
            files[rel] = path.read_bytes()
    for path in sorted((workdir / "results/outputs").rglob("*.jsonl")):
        texts = [(r["key"], r["raw_text"], r["error"]) for r in read_jsonl(path)]
        files[str(path.relative_to(workdir))] = json.dumps(texts).encode()
    return files

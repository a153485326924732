"""Inference as the workflow runs it: API models against a local server (the key never
reaches a file), and a job killed half-way that resumes without losing or repeating."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from vlmrobust.core.io import read_jsonl

from .api_server import FakeAPIServer
from .conftest import BIN, REPO, copy_repo, run, run_files, tiny_config, tool_env

# Whole workflow runs (API and demo-model runs, interrupted and resumed):
# `pytest -m "not workflow"` leaves them out.
pytestmark = pytest.mark.workflow

SENTINEL = "vlmrobust-sentinel-key-0123456789abcdefXYZ"


def _registry_with(workdir: Path, name: str, entry: dict) -> str:
    registry = yaml.safe_load((REPO / "config/models.yaml").read_text())
    registry["models"][name] = entry
    path = workdir / "config" / "test-models.yaml"
    path.write_text(yaml.safe_dump(registry))
    return "config/test-models.yaml"


def _config(workdir: Path, registry: str, models: list[str], **extra) -> str:
    """config/test/two-datasets.yaml (demo charts clean and corrupted, yes/no questions
    clean: 4 samples each) answered by ``models`` of ``registry``."""
    config = {**tiny_config("two-datasets"), "model_registry": registry, "models": models}
    path = workdir / "config" / "test-run.yaml"
    path.write_text(yaml.safe_dump({**config, **extra}))
    return "config/test-run.yaml"


def test_api_run_retries_and_never_writes_the_key(tmp_path):
    workdir = copy_repo(tmp_path / "repo")
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: "The answer is yes."
        server.add_fault("429", retry_after="0")
        server.add_fault("500")
        server.add_fault("not_json")
        registry = _registry_with(
            workdir, "local-api", _api_entry(server, max_retries=4, concurrency=2)
        )
        configfile = _config(workdir, registry, ["local-api"])
        run(
            [str(BIN / "snakemake"), "--cores", "2", "--configfile", configfile],
            workdir,
            env={"VLMROBUST_TEST_KEY": SENTINEL},
        )
        auth = {
            r.headers.get("Authorization") or r.headers.get("authorization")
            for r in server.requests
        }
        assert auth == {f"Bearer {SENTINEL}"}  # the key was really used ...
        n_requests = server.count
    # ... but it appears in no file the run wrote.
    leaks = []
    for folder in ("results", "logs", ".snakemake"):
        for path in (workdir / folder).rglob("*"):
            if path.is_file() and SENTINEL.encode() in path.read_bytes():
                leaks.append(str(path.relative_to(workdir)))
    assert leaks == []
    rows = read_jsonl(workdir / "results/outputs/local-api/demo-yesno/clean/default.jsonl")
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert {r["answer_text"] for r in rows} == {"The answer is yes."}
    assert n_requests == 4 * 3 + 3  # 12 answers (chart clean+corrupt, yesno clean) + 3 faults
    summary = (workdir / "results/scored/summary.csv").read_text()
    assert "local-api" in summary


def _api_entry(server: FakeAPIServer, **options) -> dict:
    """A registry entry of the fake server's model (options over one retry, one at a time)."""
    return {
        "backend": "openai",
        "api_model": "fake-vlm",
        "base_url": f"{server.url}/v1",
        "api_key_env": "VLMROBUST_TEST_KEY",
        "family": "fake",
        "role": "base",
        "options": {"max_retries": 1, "base_delay": 0.01, "timeout_s": 5, "concurrency": 1}
        | options,
    }


@contextmanager
def _api_run(workdir: Path, faults: int, fault: str = "500"):
    """The API model's run in ``workdir``, its first request failing ``faults`` times
    with ``fault``: the running server, the command and its environment."""
    server = FakeAPIServer().start()
    server.reply_fn = lambda text, body: "The answer is yes."
    for _ in range(faults):  # both attempts of the first request (max_retries 1)
        server.add_fault(fault, seconds=3.0, interval=0.5)
    entry = _api_entry(server)
    entry["options"]["timeout_s"] = 1
    registry = _registry_with(workdir, "local-api", entry)
    configfile = _config(workdir, registry, ["local-api"])
    cmd = [str(BIN / "snakemake"), "--cores", "1", "--configfile", configfile]
    env = {"VLMROBUST_TEST_KEY": SENTINEL}
    try:
        yield server, cmd, env
    finally:
        server.stop()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, bytes]:
    """The files of the API model's run without a fault: built once, the reference of
    every interrupted run below."""
    workdir = copy_repo(tmp_path_factory.mktemp("uninterrupted") / "repo")
    with _api_run(workdir, faults=0) as (_, cmd, env):
        run(cmd, workdir, env=env)
    return run_files(workdir)


@pytest.mark.parametrize("fault", ["500", "timeout", "trickle"])
def test_a_rerun_after_failed_requests_asks_only_them_and_completes(tmp_path, fault, uninterrupted):
    """One request fails after every retry, with a server error, because the server
    holds it past the client's timeout (a stopped or silent server) or because it sends
    its headers and then trickles the body, a byte every 0.5 s, never done within
    timeout_s (each read is quick; the deadline of the whole attempt ends it): the job
    waits at most timeout_s per attempt, then records the failure, naming the model.
    The run writes every table, then fails at its last check; the next snakemake (the
    server healthy again) asks that request and no other, completes, and every table,
    scored file and answer equals an uninterrupted run's."""
    workdir = copy_repo(tmp_path / "failed")
    with _api_run(workdir, faults=2, fault=fault) as (server, cmd, env):
        first = run(cmd, workdir, env=env, check=False)
        assert first.returncode != 0
        text = first.stdout + first.stderr
        assert "1 request(s) failed after every retry" in text
        errors = {  # the failed rows wait in the shards' resume caches
            row["error"]
            for path in (workdir / "results/outputs").rglob("*.partial")
            for row in read_jsonl(path)
            if row.get("error")
        }
        (error,) = errors  # one request failed, the model named
        assert error.startswith("openai fake-vlm request ")
        assert "failed after 2 attempts (retries exhausted)" in error
        if fault == "trickle":
            assert "request's deadline of 1 s (timeout_s)" in error
        asked = server.count
        second = run(cmd, workdir, env=env)
        assert "Nothing to be done" not in second.stdout + second.stderr
        assert server.count - asked == 1  # exactly the failed request again
        third = run([*cmd, "-n"], workdir, env=env)
        assert "Nothing to be done" in third.stdout + third.stderr
    failed = run_files(workdir)
    assert failed.keys() == uninterrupted.keys()
    assert any("/tables/" in k for k in failed)
    assert failed == uninterrupted


@pytest.fixture(scope="module")
def demo_inputs(tmp_path_factory) -> Path:
    workdir = copy_repo(tmp_path_factory.mktemp("kill") / "repo")
    registry = "config/models.yaml"
    configfile = _config(workdir, registry, [])
    run(
        [
            str(BIN / "snakemake"),
            "results/variants/demo-chart/clean/manifest.jsonl",
            "--cores",
            "2",
            "--configfile",
            configfile,
        ],
        workdir,
    )
    run(
        [str(BIN / "vlmrobust"), "demo-model", "--out", "results/models/demo-base", "--seed", "1"],
        workdir,
    )
    return workdir


def _infer_cmd(workdir: Path, out: str) -> list[str]:
    spec = yaml.safe_load((REPO / "config/models.yaml").read_text())["models"]["demo-base"]
    spec = {**spec, "options": {**spec["options"], "batch_size": 1}}
    job = {
        "model": "demo-base",
        "model_spec": spec,
        "prompt": "default",
        "adapter": "demo",
        "max_new_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.95,
        "n": 3,
        "seed": 0,
    }
    return [
        str(BIN / "vlmrobust"),
        "infer",
        "--spec",
        json.dumps(job),
        "--threads",
        "1",
        "--manifest",
        "results/variants/demo-chart/clean/manifest.jsonl",
        "--samples",
        "results/samples/demo-chart/samples.jsonl",
        "--out",
        out,
    ]


def test_sigkill_halfway_then_resume(demo_inputs):
    workdir = demo_inputs
    out = workdir / "results/outputs/kill-test.jsonl"
    partial = Path(f"{out}.partial")
    proc = subprocess.Popen(
        _infer_cmd(workdir, str(out)),
        cwd=workdir,
        env=tool_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_text().count("\n") >= 4:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the job finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    before = [json.loads(line) for line in partial.read_text().splitlines() if line.endswith("}")]
    assert 4 <= len(before) < 12
    rerun = run(_infer_cmd(workdir, str(out)), workdir)
    assert f"{len(before)} already answered" in rerun.stderr
    rows = read_jsonl(out)
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == 4 * 3  # every (sample, draw) exactly once
    by_key = {r["key"]: r for r in rows}
    for row in before:  # finished rows were kept as they were, not generated again
        assert by_key[row["key"]] == row
    assert partial.read_bytes() == out.read_bytes()  # the resume cache holds the rows

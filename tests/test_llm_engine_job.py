"""LLM engines (vlmrobust.jobs.llm_engine): a local registry LLM answers the MathVerse
judge's files inside one job, its calls pooled across files, every response in the LLM
cache (so a killed engine resumes), and the settings that name registry LLMs
(vlmrobust.core.llms): resolved as the inline settings they stand for, or an error
naming the key. A fake text engine stands in for the model (the real vLLM engine:
tests/test_llm_engines.py)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from vlmrobust.clients.llm import LLMCache, make_llm
from vlmrobust.clients.llm.engines import TextResult
from vlmrobust.clients.llm.local import serving
from vlmrobust.core.config import ConfigError, load_yaml, validate_config, validate_registry
from vlmrobust.core.io import read_jsonl, write_jsonl
from vlmrobust.core.records import Sample, write_samples
from vlmrobust.jobs.llm_engine import read_llm_plan, run_llm_engine

REPO = Path(__file__).resolve().parents[1]
Q = "Find x.\nChoices:\nA:1\nB:2"
SAMPLES = [
    Sample("mv-1", "mathverse", [], Q, "B", "letter", meta={"question_for_eval": Q}),
    Sample("mv-2", "mathverse", [], "The radius is 3. Find L.", "14", "number"),
]


class FakeEngine:
    """Answers stage 1 with the response's last word, stage 2 with 1 when the extracted
    answer is "2"; records each generate call's size."""

    def __init__(self, fail_on_call: int | None = None):
        self.calls: list[int] = []
        self.fail_on_call = fail_on_call

    def generate(self, requests):
        self.calls.append(len(requests))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise RuntimeError("CUDA error: the engine died")
        out = []
        for r in requests:
            text = r.messages[-1]["content"]
            if "extracted" in json.dumps(r.json_schema):
                word = text.rsplit(">>>", 1)[0].split()[-1].strip(".")
                out.append(TextResult(json.dumps({"extracted": word}), "stop", 10, 5))
            else:
                verdict = 1 if text.rstrip().endswith("Model's answer: 2") else 0
                out.append(TextResult(json.dumps({"judgement": verdict}), "stop", 10, 3))
        return out

    def close(self):
        pass


def _cells(tmp_path: Path) -> list[dict]:
    samples = tmp_path / "samples.jsonl"
    write_samples(samples, SAMPLES)
    spec = {
        "backend": "vllm",
        "model": "tiny-judge",
        "llm": "tiny-judge",
        "temperature": 0.0,
        "max_tokens": 64,
        "cache_dir": str(tmp_path / "cache"),
    }
    cells = []
    for name, answers in (("a", ["so it is 2.", "L is 14."]), ("b", ["it is A.", "L = 12."])):
        outputs = tmp_path / f"{name}.outputs.jsonl"
        rows = [
            {
                "key": f"{name}{i}#0",
                "variant_id": f"{name}{i}",
                "sample_id": sid,
                "answer_text": text,
                "raw_text": text,
                "error": None,
            }
            for i, (sid, text) in enumerate(zip(["mv-1", "mv-2"], answers, strict=True))
        ]
        write_jsonl(outputs, rows)
        cells.append(
            {
                "step": "mathverse",
                "spec": spec,
                "outputs": str(outputs),
                "samples": str(samples),
                "out": str(tmp_path / f"{name}.judged.jsonl"),
            }
        )
    return cells


def _run(monkeypatch, cells, engine):
    monkeypatch.setattr(
        "vlmrobust.clients.llm.engines.load_text_engine", lambda model, spec: engine
    )
    run_llm_engine("tiny-judge", {"backend": "vllm", "local_path": "x"}, cells)


def _verdicts(cell):
    return [(r["key"], r["extracted"], r["verdict"], r["method"]) for r in read_jsonl(cell["out"])]


def test_one_engine_answers_both_stages_of_every_file_in_pooled_calls(tmp_path, monkeypatch):
    cells = _cells(tmp_path)
    engine = FakeEngine()
    _run(monkeypatch, cells, engine)
    # stage 1 of both files in one call (4 responses); stage 2 for those not exact:
    # a: "2" vs B (judged 1), "14" == 14 (exact); b: "A" vs B (judged 0), "12" vs 14 (0)
    assert engine.calls == [4, 3]
    assert _verdicts(cells[0]) == [("a0#0", "2", 1, "llm"), ("a1#0", "14", 1, "exact")]
    assert _verdicts(cells[1]) == [("b0#0", "A", 0, "llm"), ("b1#0", "12", 0, "llm")]
    rows = read_jsonl(cells[0]["out"])
    assert {r["judge"] for r in rows} == {"vllm/tiny-judge"} and rows[0]["cached"] == [False, False]


def test_a_killed_engine_resumes_from_the_cache(tmp_path, monkeypatch):
    """The engine dies in its second call (stage 2): every stage-1 answer is in the cache,
    so the rerun asks stage 2 alone, and the verdicts are the uninterrupted run's."""
    cells = _cells(tmp_path)
    with pytest.raises(RuntimeError, match="the engine died"):
        _run(monkeypatch, cells, FakeEngine(fail_on_call=2))
    assert not Path(cells[0]["out"]).exists()
    engine = FakeEngine()
    _run(monkeypatch, cells, engine)
    assert engine.calls == [3]
    assert _verdicts(cells[1]) == [("b0#0", "A", 0, "llm"), ("b1#0", "12", 0, "llm")]
    again = FakeEngine()
    _run(monkeypatch, cells, again)
    assert again.calls == []  # all cached: nothing asked


def test_a_local_llm_outside_its_engine_is_an_error_naming_it(tmp_path):
    spec = {"backend": "vllm", "model": "tiny-judge"}
    with pytest.raises(ValueError, match=r"models\.tiny-judge \(backend vllm\) is a local LLM"):
        make_llm(spec, LLMCache(tmp_path))
    with serving("tiny-judge", lambda requests: []):
        assert make_llm(spec, LLMCache(tmp_path)).name == "vllm"


def test_an_invalid_json_answer_is_an_error_response_not_cached(tmp_path):
    def transport(requests):
        return [TextResult('{"extracted": ', "length", 5, 64) for _ in requests]

    with serving("tiny-judge", transport):
        llm = make_llm({"backend": "vllm", "model": "tiny-judge"}, LLMCache(tmp_path))
        schema = {"type": "object", "properties": {"extracted": {"type": "string"}}}
        (resp,) = llm.complete_many([{"messages": "hi", "json_schema": schema}])
    assert re.fullmatch(
        r"vllm tiny-judge call [0-9a-f]{12} failed after 1 attempt \(not retried\): "
        r"malformed response: invalid JSON \(Expecting value at char 13; finish_reason=length\)",
        resp.error,
    ), resp.error
    assert list(tmp_path.rglob("*.json")) == []


def test_read_llm_plan_names_a_bad_file(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"model": "m", "spec": {}, "cells": [{"step": "nope", "out": "x"}]}))
    with pytest.raises(ValueError, match=r"p\.json: not an LLM engine plan"):
        read_llm_plan(bad)


# --- settings that name registry LLMs ----------------------------------------------------------


@pytest.fixture(scope="module")
def registry():
    return validate_registry(load_yaml(REPO / "config/models.yaml"), "config/models.yaml")


def _config(judge: dict, **extra) -> dict:
    return {
        "models": ["demo-base"],
        "datasets": {
            "demo-chart": {
                "adapter": "demo",
                "source": "local",
                "path": "results/raw/demo/chart",
                "conditions": ["clean"],
            }
        },
        "conditions": {"clean": {"perturbation": "none"}},
        "judge": judge,
        **extra,
    }


def test_a_registry_llm_setting_becomes_the_inline_setting_it_stands_for(registry):
    config = validate_config(
        _config(
            {
                "mathverse": {"llm": "gpt-oss-120b", "max_tokens": 512},
                "attributes": {"extractors": {"ds": {"llm": "deepseek-v3.2"}}},
            }
        ),
        copy.deepcopy(registry),
    )
    assert config["judge"]["mathverse"] == {
        "backend": "vllm",
        "model": "gpt-oss-120b",
        "llm": "gpt-oss-120b",
        "max_tokens": 512,
        "temperature": 0.0,
        "cache_dir": None,
    }
    ds = config["judge"]["attributes"]["extractors"]["ds"]
    assert (ds["backend"], ds["model"], ds["base_url"], ds["api_key_env"]) == (
        "openai",
        "deepseek-chat",
        "https://api.deepseek.com",
        "DEEPSEEK_API_KEY",
    )
    # validated twice (the Snakefile and a job): the same setting
    assert (
        validate_config(copy.deepcopy(config), copy.deepcopy(registry))["judge"] == config["judge"]
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"judge": {"mathverse": {"llm": "gpt-oss-12b"}}},
            r"judge\.mathverse\.llm: 'gpt-oss-12b' is not in the model registry",
        ),
        (
            {"masking": {"hallucination": {"llm": "qwen3.5-27b"}}},
            r"masking\.hallucination\.llm: models\.qwen3\.5-27b is a local model",
        ),
        (
            {"judge": {"mathverse": {"llm": "qwen2.5-vl-7b"}}},
            r"models\.qwen2\.5-vl-7b is a vision-language model",
        ),
        (
            {"judge": {"mathverse": {"llm": "gpt-oss-120b", "base_url": "http://x"}}},
            r"judge\.mathverse\.base_url: the registry entry models\.gpt-oss-120b decides it",
        ),
        ({"models": ["gpt-oss-120b"]}, r"models: 'gpt-oss-120b' is a `kind: llm` model"),
    ],
)
def test_a_bad_llm_setting_is_an_error_naming_the_key(registry, change, message):
    config = {**_config({}), **change}
    with pytest.raises(ConfigError, match=message):
        validate_config(config, copy.deepcopy(registry))


def test_a_local_llm_without_declared_gpus_is_an_error(registry):
    reg = copy.deepcopy(registry)
    reg["models"]["gpt-oss-120b"]["resources"]["gpu"] = None
    with pytest.raises(ConfigError, match=r"models\.gpt-oss-120b\.resources\.gpu is not declared"):
        validate_config(_config({"mathverse": {"llm": "gpt-oss-120b"}}), reg)


# --- a real engine process, killed -------------------------------------------------------------

#: an engine process whose model is :class:`FakeEngine` (its second call hangs when asked)
ENGINE_SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.test_llm_engine_job import FakeEngine

class Slow(FakeEngine):
    def generate(self, requests):
        if {hang} and len(self.calls) == 1:
            print("second call", flush=True)
            time.sleep(600)
        return super().generate(requests)

import vlmrobust.clients.llm.engines as engines
engines.load_text_engine = lambda model, spec: Slow()
from vlmrobust.cli import main
main(["llm-engine", "--plan", sys.argv[1]])
"""


def test_an_engine_process_killed_mid_run_resumes_from_the_cache(tmp_path):
    """`vlmrobust llm-engine` in a process of its own, killed with SIGKILL in its second
    round (the MathVerse judge's stage 2 of two files), then run again: the rerun asks
    stage 2 alone (stage 1 is in the cache), and its judged files equal an uninterrupted
    engine's in a fresh cache (but `cached`, which says where an answer came from)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    def plan(folder: Path) -> Path:
        folder.mkdir()
        path = folder / "plan.json"
        path.write_text(json.dumps({"model": "tiny-judge", "spec": {}, "cells": _cells(folder)}))
        return path

    def engine(path: Path, log: Path, hang: bool) -> subprocess.Popen:
        script = tmp_path / f"engine_{hang}.py"
        script.write_text(ENGINE_SCRIPT.format(repo=str(REPO), hang=hang))
        env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
        with open(log, "wb") as out:
            return subprocess.Popen(
                [sys.executable, str(script), str(path)], stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=tmp_path,
            )  # fmt: skip

    killed = plan(tmp_path / "killed")
    first = tmp_path / "first.log"
    proc = engine(killed, first, hang=True)
    end = time.monotonic() + 120
    while "second call" not in first.read_text() and time.monotonic() < end:
        assert proc.poll() is None, first.read_text()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert "generated 4 requests" in first.read_text()
    assert not (tmp_path / "killed/a.judged.jsonl").exists()
    assert len(list((tmp_path / "killed/cache").rglob("*.json"))) == 4  # stage 1's answers
    assert engine(killed, tmp_path / "second.log", hang=False).wait(timeout=120) == 0
    asked = re.findall(r"generated (\d+) requests", (tmp_path / "second.log").read_text())
    assert asked == ["3"]  # stage 2 alone
    fresh = plan(tmp_path / "fresh")
    assert engine(fresh, tmp_path / "fresh.log", hang=False).wait(timeout=120) == 0
    # stage 1 from the cache (True), stage 2 asked (False); a1's answer was exact: no stage 2
    cached = {"a": [[True, False], [True]], "b": [[True, False], [True, False]]}
    for name in ("a", "b"):
        resumed = read_jsonl(tmp_path / f"killed/{name}.judged.jsonl")
        alone = read_jsonl(tmp_path / f"fresh/{name}.judged.jsonl")
        assert [{**r, "cached": None} for r in resumed] == [{**r, "cached": None} for r in alone]
        assert [r["cached"] for r in resumed] == cached[name]


def test_llm_engines_deal_the_judged_files_and_keep_within_the_runtime_limit():
    """config/paper.yaml's MathVerse judge: its 16 files dealt in turn to gpt-oss-120b's
    engines (service.engines); a partition's MaxTime of 3 x the registry's 720 minutes
    asks for at least 16 / 3 -> 6 engines."""
    import contextlib

    from vlmrobust.plan import RunPlan, engines, judges

    with contextlib.chdir(REPO):
        plan = RunPlan.load("config/paper.yaml")
    n = engines.llm_engine_count(plan, "gpt-oss-120b")
    files = [c.out for k in range(n) for c in engines.llm_engine_cells(plan, "gpt-oss-120b", k)]
    assert len(files) == len(set(files)) == 16 == len(judges.math_judged_files(plan))
    assert engines.llm_engine_runtime(plan, "gpt-oss-120b", 0) == 720 * len(
        engines.llm_engine_cells(plan, "gpt-oss-120b", 0)
    )
    plan.config["cluster"]["max_runtime"] = 3 * 720
    plan.config["service"]["engines"]["gpt-oss-120b"] = 1
    assert engines.llm_engine_count(plan, "gpt-oss-120b") == 6
    assert max(engines.llm_engine_runtime(plan, "gpt-oss-120b", k) for k in range(6)) <= 3 * 720

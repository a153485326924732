"""The real vLLM engine (its CPU build, in the vLLM environment), offline and served.

A tiny Qwen2-VL built for the test with the demo recipe and attention heads of 32
(``demo_sizes: {head_dim: 32}``; vLLM's CPU attention refuses the demo's heads of 16)
answers the same variants through

- ``backend: vllm`` (vLLM's offline engine) in the vLLM environment, as rule
  infer_vllm runs it: once by the CLI (sampled draws), once by one loaded engine for
  two jobs (greedy, and the sampled draws again);
- ``backend: hf`` (transformers) in this environment, greedy;
- ``backend: openai`` against ``vlmrobust vllm-serve`` on 127.0.0.1, greedy and
  sampled, then a server killed mid-run and a rerun after a restart.

Every engine start takes 20-60 s on two cores, so the module starts five and shares
their outputs between the tests. Marked ``vllm``: skipped without the environment
(``bash envs/vllm-env.sh``), a failure in CI (VLMROBUST_REQUIRE_VLLM=1).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from tests.vllm_env import (
    CPU_ENGINE,
    REPO,
    free_port,
    require_vllm,
    served,
    vllm_cli,
    vllm_env_vars,
)
from vlmrobust.core.io import read_jsonl, sha256_file
from vlmrobust.core.records import Sample, Variant, write_samples, write_variants
from vlmrobust.core.seeding import derive_seed
from vlmrobust.infer.run import Job, run_inference

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PIXELS = {"min_pixels": 3136, "max_pixels": 50176}
MAX_NEW = 24
N_DRAWS = 5


def _images(root: Path) -> list[Path]:
    """Six small charts-like pictures (bars of seeded heights), drawn with PIL."""
    paths = []
    for i in range(6):
        img = Image.new("RGB", (168, 112), "white")
        draw = ImageDraw.Draw(img)
        for b in range(4):
            h = 10 + (i * 7 + b * 13) % 80
            draw.rectangle(
                [10 + b * 38, 100 - h, 36 + b * 38, 100], fill=(40 * b, 90, 200 - 30 * i)
            )
        path = root / f"chart{i}.png"
        img.save(path)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """The checkpoint, samples (six of one image, one of two images) and manifest."""
    require_vllm()
    from vlmrobust_demo.model import build_demo_model

    root = tmp_path_factory.mktemp("vllm")
    build_demo_model(root / "tiny32", seed=11, head_dim=32)
    images = _images(root)
    samples, variants = [], []
    for i in range(7):
        imgs = [images[i]] if i < 6 else [images[0], images[5]]
        sid = f"demo-chart-{i:04d}"
        question = "How tall is the second bar?" if i < 6 else "Which chart has taller bars?"
        samples.append(Sample(sid, "demo-chart", [str(p) for p in imgs], question, "1", "number"))
        variants.append(
            Variant(
                sid,
                sid,
                "demo-chart",
                "clean",
                "none",
                [str(p) for p in imgs],
                [sha256_file(p) for p in imgs],
                question,
            )
        )
    write_samples(root / "samples.jsonl", samples)
    write_variants(root / "manifest.jsonl", variants)
    return root


def _vllm_spec(case: Path) -> dict:
    return {
        "backend": "vllm",
        "local_path": str(case / "tiny32"),
        "options": {**CPU_ENGINE, **PIXELS, "batch_size": 64},
    }


def _job(spec: dict, model: str = "tiny32", sampled: bool = False) -> Job:
    extra = {"temperature": 0.7, "top_p": 0.95, "n": N_DRAWS} if sampled else {}
    return Job(
        model=model,
        model_spec=spec,
        prompt="default",
        adapter="demo",
        max_new_tokens=MAX_NEW,
        seed=3,
        **extra,
    )


def _cli_infer(case: Path, job: Job, out: Path, cli: list[str], env=None, check=True):
    cmd = [
        *cli,
        "infer",
        "--spec",
        json.dumps(dataclasses.asdict(job)),
        "--manifest",
        str(case / "manifest.jsonl"),
        "--samples",
        str(case / "samples.jsonl"),
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd[:3]} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc


# The driver that serves two jobs from one loaded engine (in the vLLM environment).
_ONE_ENGINE = """
import dataclasses, json, sys
from pathlib import Path
from vlmrobust.clients.vlm import make_backend
from vlmrobust.infer.run import Job, run_inference

def main():
    root = Path(sys.argv[1])
    jobs = json.loads(sys.argv[2])
    first = Job(**jobs[0][0])
    stats = {}
    with make_backend(first.model, first.model_spec) as backend:
        for spec, out in jobs:
            stats[out] = run_inference(
                Job(**spec), root / "manifest.jsonl", root / "samples.jsonl", root / out,
                backend=backend,
            )
        stats["count"] = backend.count_tokens("<think> the bar is tall </think>")
        stats["revision"] = backend.revision
    print(json.dumps(stats))

if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def offline(case):
    """vLLM offline: the sampled job by the CLI (engine 1), then greedy and the sampled
    job again from one engine (engine 2); hf greedy in this environment."""
    spec = _vllm_spec(case)
    t0 = time.monotonic()
    _cli_infer(
        case, _job(spec, sampled=True), case / "vllm-sampled-1.jsonl", vllm_cli(), vllm_env_vars()
    )
    t_cli = time.monotonic() - t0
    jobs = [
        [dataclasses.asdict(_job(spec)), "vllm-greedy.jsonl"],
        [dataclasses.asdict(_job(spec, sampled=True)), "vllm-sampled-2.jsonl"],
    ]
    proc = subprocess.run(
        [str(vllm_cli()[0]), "-c", _ONE_ENGINE, str(case), json.dumps(jobs)],
        cwd=REPO,
        env=vllm_env_vars(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    hf_spec = {
        "backend": "hf",
        "local_path": str(case / "tiny32"),
        "options": {**PIXELS, "dtype": "float32"},
    }
    run_inference(
        _job(hf_spec), case / "manifest.jsonl", case / "samples.jsonl", case / "hf-greedy.jsonl"
    )
    print(f"vllm CLI job (engine start + 35 sampled answers): {t_cli:.1f} s", file=sys.stderr)
    return stats


def _rows(case: Path, name: str) -> list[dict]:
    return read_jsonl(case / name)


def test_offline_engine_answers_every_request_with_images(case, offline):
    rows = _rows(case, "vllm-greedy.jsonl")
    assert len(rows) == 7 and all(r["error"] is None for r in rows)
    assert {r["backend"] for r in rows} == {"vllm"}
    # the two-image prompt holds both images' tokens: more prompt tokens than any other
    by_key = {r["sample_id"]: r for r in rows}
    two = by_key["demo-chart-0006"]["prompt_tokens"]
    assert two > max(r["prompt_tokens"] for r in rows if r["sample_id"] != "demo-chart-0006")
    for r in rows:
        assert 1 <= r["completion_tokens"] <= MAX_NEW
        assert r["finish_reason"] in ("stop", "length")
        if r["completion_tokens"] < MAX_NEW:
            assert r["finish_reason"] == "stop"
        assert r["image_sha256"] == [sha256_file(p) for p in _variant_images(case, r["sample_id"])]
        assert r["max_new_tokens"] == MAX_NEW and r["temperature"] == 0.0 and r["seed"] is None
    # the revision is the weights' hash, as the hf backend records it
    hf = _rows(case, "hf-greedy.jsonl")
    assert {r["model_revision"] for r in rows} == {hf[0]["model_revision"]} == {offline["revision"]}
    assert offline["revision"].startswith("sha256:")


def _variant_images(case: Path, sample_id: str) -> list[str]:
    return next(
        v["images"] for v in read_jsonl(case / "manifest.jsonl") if v["sample_id"] == sample_id
    )


def test_offline_engine_thinking_split_and_token_counts(case, offline):
    from transformers import AutoTokenizer

    from vlmrobust.clients.vlm.thinking import split_thinking

    tok = AutoTokenizer.from_pretrained(case / "tiny32")
    expected = len(tok("<think> the bar is tall </think>", add_special_tokens=False)["input_ids"])
    assert offline["count"] == expected
    for r in _rows(case, "vllm-greedy.jsonl") + _rows(case, "vllm-sampled-1.jsonl"):
        thinking, answer = split_thinking(r["raw_text"])
        assert (r["thinking"], r["answer_text"]) == (thinking, answer)
        if thinking is None:
            assert r["thinking_tokens"] is None
        else:
            assert r["thinking_tokens"] == len(tok(thinking, add_special_tokens=False)["input_ids"])


def test_greedy_vllm_agrees_with_transformers(case, offline):
    """Same checkpoint, float32, greedy: the same prompt tokens everywhere (same chat
    template, same image tokens) and the same generated tokens. The texts are equal
    but where an answer is cut inside a UTF-8 character (the byte-level tokenizer's
    tokens are bytes): transformers decodes the dangling bytes as U+FFFD, vLLM's
    incremental detokenizer holds them back."""
    vllm_rows = {r["key"]: r for r in _rows(case, "vllm-greedy.jsonl")}
    hf_rows = {r["key"]: r for r in _rows(case, "hf-greedy.jsonl")}
    assert vllm_rows.keys() == hf_rows.keys()
    same_text = cut_inside = 0
    for k, hf in hf_rows.items():
        got = vllm_rows[k]
        assert (got["prompt_tokens"], got["completion_tokens"]) == (
            hf["prompt_tokens"],
            hf["completion_tokens"],
        )
        if got["raw_text"] == hf["raw_text"]:
            same_text += 1
        else:
            assert hf["finish_reason"] == got["finish_reason"] == "length", k
            assert hf["raw_text"].endswith("\ufffd"), k
            assert hf["raw_text"].rstrip("\ufffd") == got["raw_text"].rstrip("\ufffd"), k
            cut_inside += 1
    print(
        f"greedy vllm vs hf: {same_text}/{len(hf_rows)} texts equal, {cut_inside} cut "
        "inside a UTF-8 character",
        file=sys.stderr,
    )
    assert same_text >= len(hf_rows) - 2


def test_sampled_draws_reproducible_run_to_run(case, offline):
    first = _rows(case, "vllm-sampled-1.jsonl")
    second = _rows(case, "vllm-sampled-2.jsonl")
    assert len(first) == 7 * N_DRAWS
    assert [r["key"] for r in first] == [r["key"] for r in second]
    assert [r["raw_text"] for r in first] == [r["raw_text"] for r in second]
    for r in first:
        assert r["seed"] == derive_seed(3, "tiny32", r["variant_id"], r["draw"])
        assert (r["temperature"], r["top_p"]) == (0.7, 0.95)
    # the five draws of a question are five samples, not one answer repeated
    for sid in {r["sample_id"] for r in first}:
        texts = {r["raw_text"] for r in first if r["sample_id"] == sid}
        assert len(texts) >= 2, sid


def _served_spec(port: int, case: Path, concurrency: int = 4) -> dict:
    return {
        "backend": "openai",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "api_model": "tiny32",
        "api_key_env": None,
        "options": {
            "tokenizer": str(case / "tiny32"),
            "extra_body": {"skip_special_tokens": False},
            "max_images_per_prompt": 8,
            "concurrency": concurrency,
            "max_retries": 1,
            "base_delay": 0.1,
            "timeout_s": 30,
        },
    }


def _serve_cmd(case: Path, port: int) -> list[str]:
    registry = case / "models.yaml"
    spec = {"tiny32": {**_vllm_spec(case)}}
    registry.write_text(json.dumps({"models": spec}))
    config = case / "serve.yaml"
    config.write_text(
        json.dumps(
            {
                "run_name": "vllm-test",
                "model_registry": str(registry),
                "models": ["tiny32"],
                "environments": {"vllm": str(Path(vllm_cli()[0]).parent.parent)},
            }
        )
    )
    return [
        sys.executable, "-m", "vlmrobust", "vllm-serve", "--config", str(config),
        "--model", "tiny32", "--port", str(port),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def serve(case, offline):
    """One server (engine 3): greedy and sampled jobs through the openai backend, then
    a job whose server is killed after a few answers; a second server (engine 4) for
    the rerun. Returns what the kill run and the rerun counted."""
    port = free_port()
    cmd = _serve_cmd(case, port)
    result = {}
    with served(cmd, port, case / "serve-1.log") as server:
        spec = _served_spec(port, case)
        for name, sampled in (("served-greedy.jsonl", False), ("served-sampled.jsonl", True)):
            run_inference(
                _job(spec, sampled=sampled), case / "manifest.jsonl", case / "samples.jsonl",
                case / name,
            )  # fmt: skip
        # one request at a time, killed once a few answers are written
        killed = _job(_served_spec(port, case, concurrency=1), sampled=True)
        out = case / "served-killed.jsonl"
        partial = out.with_name(out.name + ".partial")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vlmrobust", "infer", "--spec", json.dumps(dataclasses.asdict(killed)),
             "--manifest", str(case / "manifest.jsonl"), "--samples", str(case / "samples.jsonl"),
             "--out", str(out)],
            cwd=REPO, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if partial.exists() and len(partial.read_text().splitlines()) >= 5:
                break
            time.sleep(0.02)
        server.kill()
        result["orphans"] = server.alive_group()
        _, err = proc.communicate(timeout=600)
        result["killed_rc"], result["killed_log"] = proc.returncode, err
        result["killed_rows"] = read_jsonl(out)
    with served(cmd, port, case / "serve-2.log"):
        rerun = run_inference(
            _job(_served_spec(port, case, concurrency=1), sampled=True),
            case / "manifest.jsonl", case / "samples.jsonl", out,
        )  # fmt: skip
    result["rerun"] = rerun
    result["rerun_rows"] = read_jsonl(out)
    return result


_SAME = ("key", "raw_text", "answer_text", "thinking", "thinking_tokens", "prompt_tokens",
         "completion_tokens", "finish_reason", "image_sha256", "seed", "draw")  # fmt: skip


def test_served_rows_equal_offline_rows(case, serve):
    for served_file, offline_file in (
        ("served-greedy.jsonl", "vllm-greedy.jsonl"),
        ("served-sampled.jsonl", "vllm-sampled-1.jsonl"),
    ):
        got, want = _rows(case, served_file), _rows(case, offline_file)
        assert all(r["error"] is None and r["backend"] == "openai" for r in got)
        assert {r["model_revision"] for r in got} == {"tiny32"}  # the name the server reports
        assert [{k: r[k] for k in _SAME} for r in got] == [{k: r[k] for k in _SAME} for r in want]


def test_server_killed_mid_run_fails_requests_then_rerun_asks_only_them(case, serve):
    rows = serve["killed_rows"]
    assert serve["orphans"] is False  # the API server and its engine processes are gone
    assert serve["killed_rc"] == 0 and len(rows) == 7 * N_DRAWS
    failed = [r for r in rows if r["error"] is not None]
    answered = [r for r in rows if r["error"] is None]
    assert len(answered) >= 5 and failed, (len(answered), len(failed))
    for r in failed:  # a failure is no answer: empty text, the reason, never a guess
        assert r["finish_reason"] == "error" and r["raw_text"] == "" and r["answer_text"] == ""
        assert "connection" in r["error"].lower()
    assert f"{len(failed)} request(s) failed after every retry" in serve["killed_log"]
    # the rerun asks only the failed requests again, and then every answer is the one an
    # uninterrupted run gives
    assert serve["rerun"]["generated"] == len(failed)
    assert serve["rerun"]["reused"] == len(answered)
    assert serve["rerun"]["errors"] == 0
    want = _rows(case, "served-sampled.jsonl")
    assert [{k: r[k] for k in _SAME} for r in serve["rerun_rows"]] == [
        {k: r[k] for k in _SAME} for r in want
    ]
    killed = case / "served-killed.jsonl"
    assert killed.with_name(killed.name + ".partial").read_bytes() == killed.read_bytes()


def test_engine_that_cannot_load_stops_before_any_row(case):
    """The demo's own shape (heads of 16) is refused by vLLM's CPU attention; a config
    of an architecture vLLM does not know is refused too. Each stops the job with the
    model's name and what to change, and writes no row."""
    from vlmrobust_demo.model import build_demo_model

    build_demo_model(case / "tiny16", seed=12)  # the demo's default shape
    unknown = case / "unknown-arch"
    unknown.mkdir(exist_ok=True)
    config = json.loads((case / "tiny32" / "config.json").read_text())
    config["architectures"] = ["NoSuchModelForConditionalGeneration"]
    (unknown / "config.json").write_text(json.dumps(config))
    for path in (case / "tiny32").iterdir():
        if path.name != "config.json":
            (unknown / path.name).write_bytes(path.read_bytes())
    for model, folder, reason in (
        ("tiny16", case / "tiny16", "its attention head size is 16"),
        ("unknown-arch", unknown, "vLLM cannot load"),
    ):
        spec = {**_vllm_spec(case), "local_path": str(folder)}
        out = case / f"{model}.jsonl"
        proc = _cli_infer(
            case, _job(spec, model=model), out, vllm_cli(), vllm_env_vars(), check=False
        )
        assert proc.returncode != 0
        assert f"models.{model} (backend vllm): vLLM cannot load {folder}" in proc.stderr
        assert reason in proc.stderr
        assert not out.exists() and not out.with_name(out.name + ".partial").exists()


def test_workflow_runs_demo_vllm_through_its_engine(tmp_path):
    """The registry's demo-vllm in a small run: the demo_model job builds and trains it
    (heads of 32) in this environment, rule infer_vllm answers in the vLLM
    environment, and the rows are scored like any model's."""
    import yaml

    from tests.conftest import copy_repo, run, tiny_config

    require_vllm()
    workdir = copy_repo(tmp_path / "repo")
    config = {  # two demo charts, clean (config/test/chart.yaml)
        **tiny_config("chart"),
        "models": ["demo-vllm"],
        "environments": {"vllm": str(Path(vllm_cli()[0]).parent.parent)},
    }
    config["demo"]["n_per_family"] = 3
    (workdir / "config" / "vllm-run.yaml").write_text(yaml.safe_dump(config))
    cmd = [str(Path(sys.executable).parent / "snakemake"), "--cores", "2",
           "--configfile=config/vllm-run.yaml",
           "results/scored/demo-vllm/demo-chart/clean/default.csv"]  # fmt: skip
    proc = run(cmd, workdir)
    assert "rule engine_demo_vllm_phase0_0:" in proc.stdout + proc.stderr
    rows = read_jsonl(workdir / "results/outputs/demo-vllm/demo-chart/clean/default.jsonl")
    assert len(rows) == 3 and {r["backend"] for r in rows} == {"vllm"}
    assert all(r["error"] is None for r in rows)
    record = json.loads((workdir / "results/models/demo-vllm/vlmrobust_demo.json").read_text())
    assert record["sizes"]["head_dim"] == 32
    assert {r["model_revision"] for r in rows} == {f"sha256:{record['weights_sha256'][:16]}"}
    scored = (workdir / "results/scored/demo-vllm/demo-chart/clean/default.csv").read_text()
    assert len(scored.strip().splitlines()) == 4  # header + one row per sample
    # the model's engine job: vLLM loaded once, in the vLLM environment
    engine_log = (workdir / "logs/engines/demo-vllm/phase0/engine0.log").read_text()
    assert engine_log.count("loaded once for this engine") == 1, engine_log[-2000:]


def test_harness_prompts_build_the_same_in_the_vllm_environment(tmp_path):
    """A `backend: vllm` job builds its prompts in the vLLM environment: the `lmms-*`
    settings need lmms-eval there (envs/vllm-env.sh installs it with what its task code
    imports) and give what the project's environment gives, system prompt included."""
    require_vllm()
    img = tmp_path / "a.png"
    Image.new("RGB", (32, 32), "white").save(img)
    samples = {
        "lmms-mmstar": Sample(
            "mmstar-0", "mmstar", [str(img)], "Which color?", "A", "letter", ["red", "blue"],
            meta={"raw_question": "Which color?\nOptions: A: red, B: blue"},
        ),
        "lmms-textvqa": Sample(
            "textvqa-0", "textvqa", [str(img)], "what does the sign say?", "stop", "text",
            meta={"ocr_tokens": ["STOP"]},
        ),
        "distract-open": Sample("db-1", "distract-bench", [str(img)], "How many?", "3", "number"),
    }  # fmt: skip
    model = {"backend": "vllm", "harness": {"lmms_eval": "qwen3_vl"}}
    code = (
        "import json, sys\n"
        "from vlmrobust.core.prompts import build_prompt\n"
        "from vlmrobust.core.records import Sample, Variant\n"
        "out = {}\n"
        "for name, s in json.loads(sys.argv[1]).items():\n"
        "    s = Sample(**s)\n"
        "    v = Variant(s.sample_id, s.sample_id, s.dataset, 'clean', 'none', s.images, [], None)\n"
        "    b = build_prompt(s, v, name, model=json.loads(sys.argv[2]))\n"
        "    out[name] = [b.content, b.system, b.source]\n"
        "print(json.dumps(out))\n"
    )
    arg = json.dumps({k: dataclasses.asdict(s) for k, s in samples.items()})
    proc = subprocess.run(
        [*vllm_cli()[:1], "-c", code, arg, json.dumps(model)],
        capture_output=True, text=True, env=vllm_env_vars(), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    from vlmrobust.core.prompts import build_prompt

    for name, s in samples.items():
        v = Variant(s.sample_id, s.sample_id, s.dataset, "clean", "none", s.images, [], None)
        ours = build_prompt(s, v, name, model=model)
        assert theirs[name] == [ours.content, ours.system, ours.source], name
    assert theirs["lmms-mmstar"][1] == "You are a helpful assistant."

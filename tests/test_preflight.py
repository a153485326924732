"""``vlmrobust preflight``: a release with the exact inputs and outputs, replayed.

The "release" here is written by lmms-eval's own chat wrapper
(``lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL``, instantiated on a Qwen2.5-VL twin as
in tests/test_wrapper_tensors.py) running ``generate_until`` on Distract-Bench rows in
the dataset's real format: the first rows of the real release's questions
(tests/fixtures/distract-bench) with small images drawn with PIL, so the project's
adapter reads them. The Distract-Bench prompt is no lmms-eval task here (the project
builds the release's prompt text itself, docs/prompts.md), so the wrapper is given the
text and image order the project builds (``build_prompt`` of ``distract-open`` for the
model): the comparison isolates the tensors and the decoding. Its responses go into a
``<hub id>.samples.jsonl`` in lmms-eval's format (``doc_id``, ``target``,
``filtered_resps``, ``token_counts``, ``llm_as_judge_eval.true_false``).

Then ``vlmrobust preflight`` runs as a subprocess (the real CLI) with a configuration
whose model is that twin (``harness.lmms_eval: qwen2_5_vl``, ``pixels: harness``, the
checkpoint's generation config):

- backend ``hf``: every response identical, exit 0; a model without a release file is
  reported, naming the file looked for;
- one response altered in the release and a threshold above the share left: exit 1
  naming the model, the altered row's first differing token at its position;
- backend ``vllm`` (the vLLM environment; marked ``vllm``): the share is measured and
  reported.

The unit tests at the top (Wilson interval, the draw, the first differing token, the
release file's name) run without a model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from tests.conftest import FIXTURES, tool_env
from tests.vllm_env import CPU_ENGINE, REPO, VLLM_ENV, require_vllm
from vlmrobust.core.io import read_jsonl, write_jsonl
from vlmrobust.score.preflight import (
    draw_rows,
    first_difference,
    release_candidates,
    render_report,
    wilson,
)

DB = FIXTURES / "distract-bench"
#: the hub id the twin stands in for: its release file is named after it
HUB_ID = "Qwen/Qwen2.5-VL-7B-Instruct"
RELEASE_NAME = "Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl"
#: new tokens per response (the paper: 4,096)
N = 12
#: rows of the release and rows replayed per model
RELEASED, REPLAYED = 6, 5
#: the release's own verdicts (true_false), by row: not the scorer's, so the two
#: accuracies differ
LABELS = [True, True, False, True, False, False]
#: the registry entry of the twin (paper.yaml's Qwen2.5-VL options; batch size 1 as the
#: wrapper, so neither side pads)
OPTIONS = {
    "batch_size": 1, "min_pixels": 200704, "max_pixels": 1003520,
    "generation_config": "checkpoint",
}  # fmt: skip


# --------------------------------------------------------------------------- no model


def test_wilson_interval_known_values():
    """The Wilson score interval (95%) at values worked by hand."""
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-5)
    lo, hi = wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-5), pytest.approx(0.76341, abs=1e-5))
    lo, hi = wilson(50, 50)
    assert lo == pytest.approx(0.92865, abs=1e-5) and hi == 1.0
    assert wilson(0, 0) is None


def test_the_draw_is_seeded_and_the_same_for_every_model():
    ids = [f"d-{i}" for i in range(1, 101)]
    a = draw_rows(ids, 10, 0, "d")
    assert len(a) == 10 and set(a) <= set(ids)
    assert a == [i for i in ids if i in set(a)]  # in the release's order
    assert draw_rows(list(reversed(ids)), 10, 0, "d") == list(reversed(a))  # same rows
    assert draw_rows(ids, 10, 1, "d") != a
    assert draw_rows(ids[:4], 10, 0, "d") == ids[:4]


class _Chars:
    """A tokenizer of one token per character (ids: code points)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


def test_first_difference_position_and_tokens():
    d = first_difference("The answer is B.", "The answer is C.", _Chars())
    assert d["position"] == 14
    assert (d["released_token"], d["replayed_token"]) == ("B", "C")
    assert d["before"] == "swer is "
    assert d["kind"] == "token"
    end = first_difference("abc", "abcd", _Chars())
    assert end["position"] == 3 and end["released_token"] is None
    assert (end["replayed_token"], end["kind"]) == ("d", "ends first")
    cut = first_difference("abc\ufffd", "abc", _Chars())
    assert (cut["position"], cut["released_token"], cut["kind"]) == (3, "\ufffd", "tail")


def test_release_file_names():
    assert release_candidates("rel", "Qwen/Qwen2.5-VL-7B-Instruct") == [
        Path("rel/Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl"),
        Path("rel/model_outputs/Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl"),
    ]


def test_paper_models_find_their_release_files_by_hub_id():
    """config/paper.yaml's Distract-Bench models against the release slice of
    tests/fixtures/distract-bench (outputs of two models under model_outputs/): those two
    are replayed (greedy, the distracted condition, the released prompt), the other
    local models are reported without a release file, the API models skipped."""
    from vlmrobust.jobs.preflight import _cell, _entry, _models
    from vlmrobust.plan import RunPlan

    plan = RunPlan.load(REPO / "config/paper.yaml")
    cell = _cell(plan, "distract-bench", None, None)
    assert cell == ("distract-bench", "distracted", "distract-open")
    entries = {m: _entry(plan, m, cell, str(DB)) for m in _models(plan, "distract-bench", None)}
    found = {m: e["release_file"] for m, e in entries.items() if e["status"] == "pending"}
    assert found == {
        "qwen2.5-vl-7b": str(DB / "model_outputs" / RELEASE_NAME),
        "mm-eureka-qwen-7b": str(DB / "model_outputs/FanqingM__MM-Eureka-Qwen-7B.samples.jsonl"),
    }
    assert {m for m, e in entries.items() if e["status"] == "skipped"} == {"gpt-4o", "gpt-5"}
    r1 = entries["r1-onevision-7b"]
    assert (
        r1["status"] == "no release" and "Fancy-MLLM__R1-Onevision-7B.samples.jsonl" in r1["note"]
    )


def test_report_names_failed_models():
    report = {
        "config": "c.yaml", "dataset": "distract-bench", "condition": "distracted",
        "prompt": "distract-open", "rows_requested": 5, "seed": 0, "min_identical": 0.9,
        "failed": ["m"],
        "models": [{"model": "x", "backend": "hf", "status": "no release", "note": "no file"}],
    }  # fmt: skip
    text = render_report(report)
    assert "FAILED: m" in text and "x: no file" in text


# --------------------------------------------------------------------------- the dataset


def _picture(size: tuple[int, int], seed: int) -> Image.Image:
    """A diagram-like picture: a colour field with bars and a circle."""
    w, h = size
    img = Image.new("RGB", size, (250 - 20 * seed, 240, 220 + 5 * seed))
    draw = ImageDraw.Draw(img)
    for i in range(5):
        top = h // 4 + (i * 29 + seed * 17) % max(1, h // 2)
        draw.rectangle([w * i // 6 + 4, top, w * i // 6 + w // 10, h - 6], fill=(30 * i, 90, 160))
    draw.ellipse([w // 3, h // 5, w // 3 + h // 3, h // 5 + h // 3], outline=(200, 20, 20), width=3)
    return img


#: the images' sizes: below, inside and above the wrapper's pixel limits
SIZES = [(300, 200), (640, 480), (512, 384), (1400, 900), (420, 260), (800, 600)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """The first :data:`RELEASED` rows of the real release's questions (with their edit
    records), a distracted and a clean image each, in the release's local layout."""
    folder = tmp_path_factory.mktemp("preflight-data") / "distract-bench"
    (folder / "images").mkdir(parents=True)
    (folder / "original_images").mkdir()
    rows = read_jsonl(DB / "questions.jsonl")[:RELEASED]
    write_jsonl(folder / "questions.jsonl", rows)
    shutil.copy(DB / "edit_instructions.jsonl", folder)
    for i, row in enumerate(rows):
        name = Path(row["image"]).name
        _picture(SIZES[i], i).save(folder / "images" / name)
        _picture(SIZES[i], i + 7).save(folder / "original_images" / name)
    return folder


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> Path:
    """The Qwen2.5-VL twin, its generation config given the Qwen checkpoints' defaults
    and repetition penalty (tests/test_wrapper_tensors.py)."""
    from tests.test_wrapper_tensors import CHECKPOINT_GENERATION
    from vlmrobust_demo.twins import build_twin

    path = build_twin("qwen2.5-vl", tmp_path_factory.mktemp("preflight-twin") / "twin", seed=473)
    config = path / "generation_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **CHECKPOINT_GENERATION}))
    return path


def _config(root: Path, dataset: Path, models: dict[str, dict[str, Any]]) -> Path:
    """A run configuration of Distract-Bench (clean and distracted, the released
    prompt, the harness's pixels) with ``models`` as its registry."""
    registry = root / "models.yaml"
    registry.write_text(json.dumps({"models": models}))
    config = {
        "model_registry": str(registry),
        "models": list(models),
        "environments": {"vllm": str(VLLM_ENV)},
        "decoding": {"max_new_tokens": N, "temperature": 0.0},
        "conditions": {
            "clean": {"perturbation": "none"},
            "distracted": {"perturbation": "distraction"},
        },
        "datasets": {
            "distract-bench": {
                "adapter": "distract-bench", "source": "local", "path": str(dataset),
                "prompts": ["distract-open"], "pixels": "harness",
                "conditions": ["clean", "distracted"],
            }
        },
    }  # fmt: skip
    path = root / "run.yaml"
    path.write_text(json.dumps(config))
    return path


def _entry(twin: Path, backend: str, hub_id: str = HUB_ID) -> dict[str, Any]:
    options = dict(OPTIONS)
    if backend == "vllm":
        options.update({**CPU_ENGINE, "max_model_len": 4096})
    return {
        "name": f"Twin ({backend})", "hf_repo": hub_id, "local_path": str(twin),
        "backend": backend, "family": "qwen2.5-vl", "role": "base",
        "harness": {"lmms_eval": "qwen2_5_vl"}, "options": options,
    }  # fmt: skip


# --------------------------------------------------------------------------- the release


def _messages(built: Any) -> list[dict[str, Any]]:
    """The project's built prompt as lmms-eval chat messages: its text and image parts
    in its order, each image opened and converted to RGB as lmms-eval's task code does;
    the wrapper adds its own system message (none for Qwen2.5-VL)."""
    content = []
    for part in built.content:
        if part["type"] == "text":
            content.append({"type": "text", "text": part["text"]})
        else:
            with Image.open(part["path"]) as image:
                content.append({"type": "image", "url": image.convert("RGB")})
    return [{"role": "user", "content": content}]


def _generate(wrapper: Any, doc_id: int, messages: list[dict[str, Any]]) -> Any:
    """``generate_until`` of the chat wrapper on one Instance (greedy, :data:`N` new
    tokens), the document being the messages themselves."""
    from lmms_eval.api.instance import Instance

    task, split = "distract_bench", "test"
    gen_kwargs = {"max_new_tokens": N, "temperature": 0, "until": ["</s>"]}
    args = ("", lambda doc: doc, gen_kwargs, doc_id, task, split)
    meta = {"task": task, "doc_id": doc_id, "repeats": 1}
    wrapper.task_dict = {task: {split: {doc_id: messages}}}
    (result,) = wrapper.generate_until([Instance("generate_until", args, 0, meta)])
    return result


@pytest.fixture(scope="module")
def release(tmp_path_factory, dataset, twin) -> Path:
    """The twin's "release": lmms-eval's Qwen2.5-VL chat wrapper on every row, written
    as ``<hub id>.samples.jsonl`` (doc_id = final_id)."""
    from tests.test_wrapper_tensors import _load_wrapper
    from vlmrobust.core.prompts import build_prompt
    from vlmrobust.core.records import Variant, read_samples
    from vlmrobust.data import build_samples
    from vlmrobust.plan import RunPlan, data

    root = tmp_path_factory.mktemp("preflight-release")
    plan = RunPlan.load(_config(root, dataset, {"twin": _entry(twin, "hf")}))
    spec = data.samples_spec(plan, "distract-bench")
    build_samples("distract-bench", spec, root / "s.jsonl", root / "r.json")

    mp = pytest.MonkeyPatch()
    try:
        wrapper, _asked = _load_wrapper("qwen2_5_vl", twin, mp)
    finally:
        mp.undo()
    rows, t0 = [], time.perf_counter()
    for k, sample in enumerate(read_samples(root / "s.jsonl")):
        images = sample.meta["distracted_images"]
        variant = Variant(sample.sample_id, sample.sample_id, "distract-bench", "distracted",
                          "distraction", images, ["0" * 64] * len(images), sample.question)  # fmt: skip
        built = build_prompt(sample, variant, "distract-open", None, plan.registry["twin"])
        assert built.system is None  # the Qwen2.5-VL wrapper adds none either
        fid = int(sample.meta["source_id"])
        result = _generate(wrapper, fid, _messages(built))
        rows.append({
            "doc_id": fid, "target": sample.answer, "filtered_resps": result.text,
            "token_counts": [{"output_tokens": result.token_counts.output_tokens}],
            "input": built.text,
            "llm_as_judge_eval": {"question_id": str(fid), "true_false": LABELS[k]},
        })  # fmt: skip
    took = time.perf_counter() - t0
    print(f"release: {len(rows)} rows by the chat wrapper, {took:.1f} s", file=sys.stderr)
    folder = root / "release"
    folder.mkdir()
    write_jsonl(folder / RELEASE_NAME, rows)
    return folder


# --------------------------------------------------------------------------- the preflight


def preflight(config: Path, release: Path, *args: str, env: dict | None = None):
    """``vlmrobust preflight`` as a subprocess (this environment's CLI); the process and
    the JSON report."""
    out = config.parent / f"report-{time.monotonic_ns()}.json"
    cmd = [
        sys.executable, "-m", "vlmrobust", "preflight", "--config", str(config),
        "--release", str(release), "--rows", str(REPLAYED), "--seed", "0",
        "--out", str(out), *args,
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=REPO, env={**tool_env(), **(env or {})}, capture_output=True, text=True,
        timeout=1800,
    )  # fmt: skip
    took = time.perf_counter() - t0
    print(f"preflight {' '.join(args)}: exit {proc.returncode}, {took:.1f} s", file=sys.stderr)
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def _model(report: dict, name: str) -> dict:
    (entry,) = [m for m in report["models"] if m["model"] == name]
    return entry


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory, dataset, twin, release):
    """The preflight of the twin on backend hf, with a second model whose release file
    does not exist; its work folder is kept for the rerun on an altered release."""
    root = tmp_path_factory.mktemp("preflight-hf")
    models = {"twin": _entry(twin, "hf"), "absent": _entry(twin, "hf", "Nobody/Absent-VL")}
    config = _config(root, dataset, models)
    proc, report = preflight(config, release, "--min-identical", "1.0", "--work", str(root / "w"))
    return config, root, proc, report


@pytest.mark.slow
def test_hf_replay_is_identical(hf_run, release):
    """Backend hf: every replayed response is the wrapper's, exit 0; the accuracy of
    the replayed rows is the project's scorer on them, the release's its own
    verdicts on the same rows, each with its Wilson interval."""
    _config_path, _root, proc, report = hf_run
    assert proc.returncode == 0, proc.stderr[-4000:]
    twin = _model(report, "twin")
    assert (twin["status"], twin["backend"], twin["rows"]) == ("ok", "hf", REPLAYED)
    assert twin["identical"] == REPLAYED and twin["identical_share"] == 1.0
    assert twin["differing"] == [] and report["passed"] and report["failed"] == []
    released = {str(r["doc_id"]): r for r in read_jsonl(release / RELEASE_NAME)}
    ids = [sid.removeprefix("distract-bench-") for sid in twin["sample_ids"]]
    assert len(set(ids)) == REPLAYED and set(ids) <= set(released)
    acc = twin["accuracy"]
    labels = [released[i]["llm_as_judge_eval"]["true_false"] for i in ids]
    assert acc["released"]["correct"] == sum(labels) and acc["released"]["n"] == REPLAYED
    assert acc["released"]["ci95"] == pytest.approx(list(wilson(sum(labels), REPLAYED)))
    # identical texts: the project's scorer gives the replayed rows the release's rescoring
    assert acc["replayed"] == acc["released_rescored"]
    assert acc["difference"] == pytest.approx(
        acc["replayed"]["accuracy"] - acc["released"]["accuracy"]
    )
    assert twin["seconds_per_request"] > 0 and twin["engine_seconds"] > 0
    assert "twin" in proc.stdout and "100.0%" in proc.stdout
    print(f"hf: {twin['identical']}/{twin['rows']} identical, "
          f"{twin['seconds_per_request']:.2f} s/request", file=sys.stderr)  # fmt: skip


@pytest.mark.slow
def test_a_model_without_a_release_is_reported(hf_run, release):
    _config_path, _root, proc, report = hf_run
    absent = _model(report, "absent")
    assert absent["status"] == "no release" and "rows" not in absent
    looked = str(release / "Nobody__Absent-VL.samples.jsonl")
    assert looked in absent["note"] and looked in proc.stdout


def _alter(text: str, tokenizer: Any) -> tuple[str, int]:
    """``text`` with a word put in after about half its tokens, at a point where the
    decoded prefix is the text's own and tokenises back to the same tokens (not inside
    a character of several byte tokens); and that token position."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    for k in range(len(ids) // 2, 0, -1):
        prefix = tokenizer.decode(ids[:k])
        if (
            text.startswith(prefix)
            and tokenizer.encode(prefix, add_special_tokens=False) == ids[:k]
        ):
            return prefix + " ALTERED" + text[len(prefix) :], k
    return "ALTERED " + text, 0


@pytest.mark.slow
def test_an_altered_release_fails_naming_the_model_and_the_token(hf_run, release, twin):
    """One released response altered and a threshold above the share left: exit 1
    naming the model; the altered row's first differing token is reported where the
    two texts' tokens part. The work folder is the first run's: the replay is reused
    from its resume cache (no new generation)."""
    from transformers import AutoTokenizer

    config, root, first_proc, first = hf_run
    assert first_proc.returncode == 0
    tokenizer = AutoTokenizer.from_pretrained(twin)
    altered_release = root / "altered"
    altered_release.mkdir()
    rows = read_jsonl(release / RELEASE_NAME)
    target = _model(first, "twin")["sample_ids"][2].removeprefix("distract-bench-")
    (row,) = [r for r in rows if str(r["doc_id"]) == target]
    original = row["filtered_resps"]
    row["filtered_resps"], k = _alter(original, tokenizer)
    write_jsonl(altered_release / RELEASE_NAME, rows)
    share = (REPLAYED - 1) / REPLAYED
    proc, report = preflight(
        config, altered_release, "--min-identical", f"{share + 0.05:.2f}", "--work", str(root / "w")
    )
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert "twin" in proc.stderr and "below --min-identical" in proc.stderr
    assert report["failed"] == ["twin"] and "FAILED: twin" in proc.stdout
    twin_entry = _model(report, "twin")
    assert twin_entry["status"] == "below" and twin_entry["identical_share"] == share
    (diff,) = twin_entry["differing"]
    assert diff["sample_id"] == f"distract-bench-{target}" and diff["row"] == 2
    a = tokenizer.encode(row["filtered_resps"], add_special_tokens=False)
    b = tokenizer.encode(original, add_special_tokens=False)
    assert a[: diff["position"]] == b[: diff["position"]]
    assert a[diff["position"]] != b[diff["position"]]
    assert k - 1 <= diff["position"] <= k
    assert diff["released_token_id"] == a[diff["position"]]
    assert diff["replayed_token_id"] == b[diff["position"]]
    assert diff["released_token"] == tokenizer.decode([a[diff["position"]]])
    assert f"token {diff['position']} of" in proc.stdout


# --------------------------------------------------------------------------- vLLM


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_replay_share_is_measured(tmp_path, dataset, twin, release):
    """Backend vllm (the CPU build in the vLLM environment, float32): the engine the
    config names replays the release; the identical share is measured and reported
    (docs/preflight.md records it)."""
    require_vllm()
    config = _config(tmp_path, dataset, {"twin-vllm": _entry(twin, "vllm")})
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    proc, report = preflight(config, release, "--min-identical", "0", env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    entry = _model(report, "twin-vllm")
    assert entry["status"] == "ok" and entry["backend"] == "vllm" and entry["rows"] == REPLAYED
    assert entry["identical_share"] is not None and "twin-vllm" in proc.stdout
    # measured: 4 of 5; the one other row is the same 12 tokens, cut inside a character:
    # transformers' decode (the wrapper's) ends it with U+FFFD, vLLM holds the bytes back
    assert {d["kind"] for d in entry["differing"]} <= {"tail"}
    print(f"vLLM: {entry['identical']}/{entry['rows']} identical, "
          f"{entry['seconds_per_request']:.2f} s/request, engine {entry['engine_seconds']:.0f} s; "
          f"differing: {entry['differing']}", file=sys.stderr)  # fmt: skip

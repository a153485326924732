"""Attention blocking (the Idis paper, Fig. 7a) on the embedded demo model (CPU, float32):
the kernel wrapper, the prefill and span mapping, the attribute roles and the stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("transformers")
pytest.importorskip("torchvision")

import torch  # noqa: E402

from vlmrobust.clients.vlm.base import Request  # noqa: E402
from vlmrobust.clients.vlm.blocking import (  # noqa: E402
    active_state,
    blocked_attention,
    phrase_spans,
    token_positions,
)
from vlmrobust.clients.vlm.hf import HFBackend  # noqa: E402
from vlmrobust.clients.vlm.hf_blocking import prefilled_inputs  # noqa: E402
from vlmrobust.clients.vlm.thinking import split_thinking  # noqa: E402
from vlmrobust.core.idis import attribute_roles  # noqa: E402
from vlmrobust.core.prompts import build_prompt  # noqa: E402
from vlmrobust.core.records import Sample, Variant  # noqa: E402
from vlmrobust.infer.blocking import block_attention, trace_prefill  # noqa: E402
from vlmrobust_demo.model import build_demo_model  # noqa: E402

OPTIONS = {"min_pixels": 3136, "max_pixels": 50176}
PREFILL = "<think> the dog bowl is red and the dog bowl is big</think>"
DOG_BOWL = [(12, 20), (36, 44)]  # both occurrences of "dog bowl" in PREFILL


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("blocking")
    build_demo_model(root / "model", 11)
    image = root / "im.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(image)
    spec = {"local_path": str(root / "model"), "options": dict(OPTIONS)}
    eager = {
        "local_path": spec["local_path"],
        "options": {**OPTIONS, "attn_implementation": "eager"},
    }
    return {
        "root": root,
        "image": str(image),
        "sdpa": HFBackend("demo", spec),
        "eager": HFBackend("demo-eager", eager),
    }


def _request(image: str, n: int = 6) -> Request:
    content = [{"type": "image", "path": image}, {"type": "text", "text": "What is it?"}]
    return Request(key="v#0", content=content, max_new_tokens=n)


def _greedy(backend: HFBackend, inputs, n: int) -> list[int]:
    with torch.inference_mode():
        out = backend.model.generate(
            **inputs,
            max_new_tokens=n,
            do_sample=False,
            num_beams=1,
            repetition_penalty=1.0,
            eos_token_id=backend._eos_ids,
            pad_token_id=backend._pad_id,
        )
    return out[0, inputs["input_ids"].shape[1] :].tolist()


# -- character spans -> tokens -----------------------------------------------------------


def test_phrase_spans_are_case_insensitive_and_limited_to_the_region():
    text = "Dog bowl, a DOG BOWL; dog. outside: dog bowl"
    assert phrase_spans(text, ["dog bowl"], 0, 20) == [(0, 8), (12, 20)]
    assert phrase_spans(text, ["dog bowl", "Dog", ""], 0, 26) == [
        (0, 3),
        (0, 8),
        (12, 15),
        (12, 20),
        (22, 25),
    ]
    assert phrase_spans(text, ["dog bowl"], 5) == [(12, 20), (36, 44)]
    assert phrase_spans(text, []) == []
    assert phrase_spans(PREFILL, ["DOG BOWL"], 7, PREFILL.index("</think>")) == DOG_BOWL


def test_token_positions_by_hand():
    # "<think> the dog bowl</think>": tokens and their offsets, as a fast tokenizer gives
    offsets = [(0, 7), (7, 11), (11, 15), (15, 17), (17, 19), (19, 20), (20, 28), (0, 0)]
    # "dog bowl" = characters 12..20: " dog" (11-15) carries the leading space, "bowl"
    # is " b" + "ow" + "l"; "</think>" starts at 20 (end exclusive: no overlap)
    assert token_positions(offsets, [(12, 20)]) == [2, 3, 4, 5]
    assert token_positions(offsets, [(12, 20)], shift=100) == [102, 103, 104, 105]
    assert token_positions(offsets, [(8, 9), (27, 28)]) == [1, 6]
    assert token_positions(offsets, [(0, 0)]) == []  # zero-width tokens never overlap
    assert token_positions(offsets, []) == []


def test_prefill_tokens_match_the_phrases(env):
    backend = env["sdpa"]
    inputs, positions = prefilled_inputs(backend, _request(env["image"]), PREFILL, DOG_BOWL)
    ids = inputs["input_ids"][0]
    assert len(positions) == 8 and positions == sorted(positions)
    first, second = positions[:4], positions[4:]
    assert first == list(range(first[0], first[0] + 4))
    for group in (first, second):
        assert backend.tokenizer.decode(ids[group]) == " dog bowl"
    # the prefill ends the sequence; appending it equals processing the joint text
    joint = backend.processor(
        text=[backend.chat_prompt(_request(env["image"])) + PREFILL],
        images=[Image.open(env["image"]).convert("RGB")],
        return_tensors="pt",
        **backend.images_kwargs,
    )
    assert torch.equal(joint["input_ids"], inputs["input_ids"])
    assert torch.equal(joint["mm_token_type_ids"], inputs["mm_token_type_ids"])
    assert int(inputs["attention_mask"].sum()) == ids.shape[0]


# -- the kernel wrapper -------------------------------------------------------------------


def test_blocked_keys_get_zero_attention_weight(env):
    backend = env["eager"]
    inputs, positions = prefilled_inputs(backend, _request(env["image"]), PREFILL, DOG_BOWL)
    length = inputs["input_ids"].shape[1]
    first = length - 3
    with torch.no_grad(), blocked_attention(backend.model, positions, first) as state:
        assert backend.model.config.text_config._attn_implementation == "vlmrobust_blocked_eager"
        assert backend.model.config.vision_config._attn_implementation == "eager"
        out = backend.model(**inputs, output_attentions=True)
    assert state.calls == 2  # one per decoder layer
    assert backend.model.config.text_config._attn_implementation == "eager"
    assert active_state() is None
    assert len(out.attentions) == 2
    for layer in out.attentions:
        weights = layer[0]  # heads x queries x keys
        assert torch.all(weights[:, first:, positions] == 0)  # exactly zero
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:2]), atol=1e-5)
        # earlier queries still see them (and nothing after a query is seen: causal)
        assert torch.all(weights[:, first - 1, positions] > 0)
        assert torch.all(torch.triu(weights[:, :, :], diagonal=1) == 0)
    with torch.no_grad():
        plain = backend.model(**inputs, output_attentions=True)
    for a, b in zip(plain.attentions, out.attentions, strict=True):
        assert torch.equal(a[0, :, :first], b[0, :, :first])  # earlier queries unchanged
        assert not torch.allclose(a[0, :, first:], b[0, :, first:])


def test_blocking_changes_only_the_answer_positions(env):
    backend = env["sdpa"]
    inputs, positions = prefilled_inputs(backend, _request(env["image"]), PREFILL, DOG_BOWL)
    length = inputs["input_ids"].shape[1]
    with torch.no_grad():
        plain = backend.model(**inputs).logits[0]
        with blocked_attention(backend.model, [], length - 1) as state:
            empty = backend.model(**inputs).logits[0]
        with blocked_attention(backend.model, positions, length - 1) as state:
            blocked = backend.model(**inputs).logits[0]
    assert torch.equal(plain, empty)
    assert state.calls == 2
    assert torch.equal(plain[:-1], blocked[:-1])  # positions before the answer: unchanged
    assert (plain[-1] - blocked[-1]).abs().max() > 1e-3  # the first answer token's logits
    assert backend.model.config.text_config._attn_implementation == "sdpa"


def test_blocking_is_undone_after_an_error(env):
    backend = env["sdpa"]
    with pytest.raises(RuntimeError, match="boom"), blocked_attention(backend.model, [1], 0):
        raise RuntimeError("boom")
    assert backend.model.config.text_config._attn_implementation == "sdpa"
    assert active_state() is None
    with (
        blocked_attention(backend.model, [1], 0),
        pytest.raises(RuntimeError, match="re-entrant"),
        blocked_attention(backend.model, [2], 0),
    ):
        pass


def test_no_blocking_equals_plain_greedy_generation(env):
    backend = env["sdpa"]
    req = _request(env["image"], 8)
    inputs, _ = prefilled_inputs(backend, req, PREFILL)
    plain_ids = _greedy(backend, inputs, 8)
    text, blocked = backend.answer_with_blocked(req, PREFILL, [], 8)
    assert blocked == 0
    assert text == backend.decode_completion(plain_ids)[0]
    # the token ids too: the blocked kernel with nothing blocked generates the same ids
    with blocked_attention(backend.model, [], inputs["input_ids"].shape[1] - 1):
        assert _greedy(backend, inputs, 8) == plain_ids
    # blocking the phrases changes the greedy continuation of this prompt
    changed, blocked = backend.answer_with_blocked(req, PREFILL, DOG_BOWL, 8)
    assert blocked == 8
    with blocked_attention(backend.model, [50, 51], inputs["input_ids"].shape[1] - 1):
        other = _greedy(backend, inputs, 8)
    assert changed != text or other != plain_ids


# -- attribute roles ------------------------------------------------------------------------


def _judge(task: str, attributes: dict, error: str | None = None) -> dict:
    return {"key": "v#0", "task": task, "attributes": attributes, "error": error}


def test_attribute_roles_perception():
    attrs = {"dog": ["fur", "snout"], "fish": ["fishing rod"], "other": ["umbrella"]}
    row = _judge("perception", attrs)
    conflicting = attribute_roles(
        "perception", row, {"distractor_classes": ["Fish"]}, {"label": "Dog"}
    )
    assert conflicting == {"distractor": ["fishing rod"], "target": ["fur", "snout"]}
    irrelevant = attribute_roles(
        "perception", row, {"distractor_classes": ["irrelevant"]}, {"label": "Dog"}
    )
    assert irrelevant == {"distractor": ["umbrella"], "target": ["fur", "snout"]}
    # aligned: the distractor class is the target class -> no distractor phrases
    aligned = attribute_roles("perception", row, {"distractor_classes": ["Dog"]}, {"label": "Dog"})
    assert aligned == {"distractor": [], "target": ["fur", "snout"]}
    # a class name reads as its label; a category the row lacks has no phrases
    vehicle = attribute_roles(
        "perception",
        _judge("perception", {"vehicle": ["tire"], "fish": ["net"]}),
        {"distractor_classes": ["Fish"]},
        {"label": "Vehicle"},
    )
    assert vehicle == {"distractor": ["net"], "target": ["tire"]}
    typo = attribute_roles(
        "perception", row, {"distractor_classes": ["wheeled vehicle"]}, {"label": "Fish"}
    )
    assert typo == {"distractor": [], "target": ["fishing rod"]}
    assert attribute_roles("perception", row, {}, {"label": "Dog"})["distractor"] == []
    with pytest.raises(ValueError, match="meta.label"):
        attribute_roles("perception", row, {"distractor_classes": ["Fish"]}, {})
    with pytest.raises(ValueError, match="failed"):
        attribute_roles("perception", _judge("perception", {}, "timeout"), {}, {"label": "Dog"})


def test_attribute_roles_math_and_waterbirds():
    math = _judge(
        "math",
        {
            "target_related": ["angle ABC"],
            "distractor_related": ["circle", "radius"],
            "other": ["x"],
        },
    )
    assert attribute_roles("math", math, {"distractor_classes": ["circle"]}, {}) == {
        "distractor": ["circle", "radius"],
        "target": ["angle ABC"],
    }
    birds = _judge("waterbirds", {"bio": ["webbed feet"], "env": ["lake", "water"]})
    assert attribute_roles("waterbirds", birds, None, None) == {
        "distractor": ["lake", "water"],
        "target": ["webbed feet"],
    }
    with pytest.raises(ValueError, match="attribute task"):
        attribute_roles("audio", birds, None, None)


# -- the stage ----------------------------------------------------------------------------


def test_trace_prefill():
    assert trace_prefill("<think> a dog</think> Dog") == ("<think> a dog</think>", 7, 13)
    assert trace_prefill("a dog</think>Dog") == ("a dog</think>", 0, 5)  # opened by the template
    assert trace_prefill("<think> still thinking") == "unclosed-trace"
    assert trace_prefill("Dog") == "no-trace"
    assert trace_prefill("[a]x[/a] y", [("[a]", "[/a]")]) == ("[a]x[/a]", 3, 4)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


#: the two re-answered traces: s1 names the distractor twice and the target once
TRACES = {
    "s1": "<think> the fishing rod is near the dog, a Fishing Rod</think> Dog",
    "s2": "<think> a dog with fur; no rod here</think> Fish",
}
#: outputs the stage skips, by key, and the reason each is counted under
SKIP_REASONS = {
    "e#0": "generation-error",
    "nj#0": "no-judge-row",
    "je#0": "judge-error",
    "nt#0": "no-trace",
    "ut#0": "unclosed-trace",
}


def _blocking_inputs(image: str) -> tuple[list, list, list[dict], list[dict]]:
    """Samples, variants, outputs and their attribute labels: the two traces of
    :data:`TRACES`, then one output per reason of :data:`SKIP_REASONS`."""
    samples, variants, outputs, judged = [], [], [], []
    for sid, raw in TRACES.items():
        samples.append(
            Sample(sid, "inet", [image], "What is it?", "Dog", "label", meta={"label": "Dog"})
        )
        vid = f"{sid}__conflicting-n1"
        meta = {"kind": "visual", "semantics": "conflicting", "distractor_classes": ["Fish"]}
        variants.append(
            Variant(
                vid, sid, "inet", "objects", "objects", [image], ["0" * 64], "What is it?", meta
            )
        )
        row = {
            "key": f"{vid}#0",
            "variant_id": vid,
            "sample_id": sid,
            "draw": 0,
            "prompt": "label",
            "raw_text": raw,
            "answer_text": raw.rsplit("</think>", 1)[1].strip(),
            "thinking": raw.split("</think>")[0][7:].strip(),
            "error": None,
        }
        outputs.append(row)
        attrs = (
            {"fish": ["fishing rod"], "dog": ["dog"]} if sid == "s1" else {"dog": ["dog", "fur"]}
        )
        judged.append({**_judge("perception", attrs), "key": row["key"]})
    base = outputs[0]
    outputs += [
        {**base, "key": "e#0", "error": "timeout", "raw_text": ""},
        {**base, "key": "nj#0"},
        {**base, "key": "je#0"},
        {**base, "key": "nt#0", "raw_text": "Dog"},
        {**base, "key": "ut#0", "raw_text": "<think> the fishing rod"},
    ]
    judged += [
        {**_judge("perception", {}, "judge failed"), "key": "je#0"},
        {**_judge("perception", {"fish": ["fishing rod"]}), "key": "nt#0"},
        {**_judge("perception", {"fish": ["fishing rod"]}), "key": "ut#0"},
    ]
    return samples, variants, outputs, judged


def _check_blocked_rows(rows: list[dict], tokenizer) -> None:
    """The six re-answers (two outputs x none, distractor, target) and the tokens each
    setting blocked."""
    assert [(r["key"], r["block"]) for r in rows] == [
        (k, b)
        for k in ("s1__conflicting-n1#0", "s2__conflicting-n1#0")
        for b in ("none", "distractor", "target")
    ]
    assert set(rows[0]) == {
        "key", "variant_id", "sample_id", "draw", "block", "answer_text", "correct",
        "blocked_tokens", "phrases", "error",
    }  # fmt: skip
    by = {(r["sample_id"], r["block"]): r for r in rows}
    n_rod = len(tokenizer(" fishing rod", add_special_tokens=False)["input_ids"])
    n_dog = len(tokenizer(" dog", add_special_tokens=False)["input_ids"])
    assert by["s1", "none"]["blocked_tokens"] == 0 and by["s1", "none"]["phrases"] == 0
    # "fishing rod" twice (" fishing rod" and " Fishing Rod": case-insensitive)
    assert (
        by["s1", "distractor"]["blocked_tokens"] >= 2 * 2 and by["s1", "distractor"]["phrases"] == 1
    )
    assert by["s1", "distractor"]["blocked_tokens"] <= 2 * n_rod + 2
    assert by["s1", "target"]["blocked_tokens"] == n_dog and by["s1", "target"]["phrases"] == 1
    assert by["s2", "distractor"]["blocked_tokens"] == 0 and by["s2", "distractor"]["phrases"] == 0
    assert by["s2", "target"]["phrases"] == 2 and by["s2", "target"]["blocked_tokens"] >= 2
    assert all(r["error"] is None and r["correct"] in (0, 1) for r in rows)


def test_block_attention_end_to_end(env, tmp_path):
    samples, variants, outputs, judged = _blocking_inputs(env["image"])
    paths = {
        "samples": _write_jsonl(tmp_path / "samples.jsonl", [s.to_dict() for s in samples]),
        "manifest": _write_jsonl(tmp_path / "manifest.jsonl", [v.to_dict() for v in variants]),
        "outputs": _write_jsonl(tmp_path / "outputs.jsonl", outputs),
        "judged": _write_jsonl(tmp_path / "judged.jsonl", judged),
    }
    out = tmp_path / "blocked" / "label.jsonl"
    out.parent.mkdir()
    seen = []

    def score(row, sample):
        seen.append((row["key"], row["raw_text"].startswith("<think>")))
        return int(sample.answer.lower() in row["answer_text"].lower())

    summary = block_attention(
        paths["outputs"],
        paths["samples"],
        paths["manifest"],
        paths["judged"],
        env["sdpa"],
        out,
        max_new_tokens=4,
        score=score,
    )
    written = [json.loads(line) for line in out.read_text().splitlines()]
    # a skipped output has a row per setting with no answer and the reason
    assert [(r["key"], r["block"], r["error"], r["correct"]) for r in written[6:]] == [
        (k, b, f"skipped: {why}", None)
        for k, why in SKIP_REASONS.items()
        for b in ("none", "distractor", "target")
    ]
    rows = written[:6]
    _check_blocked_rows(rows, env["sdpa"].tokenizer)
    assert len(seen) == 6 and all(prefilled for _, prefilled in seen)
    # the "none" row is the plain greedy continuation of the row's prompt + its trace
    built = build_prompt(samples[0], variants[0], "label")
    req = Request("x", built.content, max_new_tokens=4, system=built.system)
    prefill = TRACES["s1"].rsplit(" Dog", 1)[0]
    inputs, _ = prefilled_inputs(env["sdpa"], req, prefill)
    text = env["sdpa"].decode_completion(_greedy(env["sdpa"], inputs, 4))[0]
    assert rows[0]["answer_text"] == split_thinking(prefill + text)[1]
    assert summary == {
        "outputs": 7,
        "reanswered": 2,
        "rows": 6 + 5 * 3,
        "errors": 0,
        "skipped": {why: 1 for why in SKIP_REASONS.values()},
        "blocked_tokens": summary["blocked_tokens"],
        "phrases": {"none": 0.0, "distractor": 0.5, "target": 1.5},
        "missing_phrases": {"none": 0, "distractor": 0, "target": 0},
        "accuracy": summary["accuracy"],
        "seconds_per_answer": summary["seconds_per_answer"],
    }
    assert summary["blocked_tokens"]["none"] == 0.0
    assert summary["seconds_per_answer"] > 0
    assert not (tmp_path / "blocked" / "label.jsonl.resized").exists()

"""The hf backend on the embedded demo model (CPU, float32), and the shared image loading."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("transformers")
pytest.importorskip("torchvision")

import torch  # noqa: E402

from vlmrobust.clients.vlm.base import Request  # noqa: E402
from vlmrobust.clients.vlm.hf import HFBackend, RowSampler  # noqa: E402
from vlmrobust.clients.vlm.hf_generation import (  # noqa: E402
    checkpoint_top_k,
    generation_settings,
)
from vlmrobust.clients.vlm.media import ImageLoadError, load_image  # noqa: E402
from vlmrobust_demo.model import build_demo_model  # noqa: E402

OPTIONS = {"batch_size": 8, "min_pixels": 3136, "max_pixels": 50176}
SIZES = [(224, 224), (300, 200), (120, 500), (64, 64), (50, 90), (640, 480)]
QUESTIONS = [
    "What is shown in the image?",
    "How many objects are in the picture? Answer with a number.",
    "Is the sky blue? Please answer yes or no.",
    "Which option is correct: A, B, C, D or E? Let's think step by step about the "
    "triangle, its angles and its area before answering.",
    "x",
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    record = build_demo_model(root / "model", 11)
    rng = np.random.default_rng(0)
    images = []
    for i, (w, h) in enumerate(SIZES):
        path = root / f"im{i}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        images.append(str(path))
    backend = HFBackend("demo", {"local_path": str(root / "model"), "options": dict(OPTIONS)})
    return {"root": root, "record": record, "images": images, "backend": backend}


def _one(img: str, text: str, key: str, n: int = 12, **kw) -> Request:
    content = [{"type": "image", "path": img}, {"type": "text", "text": text}]
    return Request(key=key, content=content, max_new_tokens=n, **kw)


def _mixed(images: list[str], n: int = 12) -> list[Request]:
    """Single-image, two-image interleaved and text-only requests of different lengths."""
    reqs = []
    for i in range(10):
        q = QUESTIONS[i % len(QUESTIONS)]
        if i % 3 == 0:
            content = [{"type": "image", "path": images[i % 6]}, {"type": "text", "text": q}]
        elif i % 3 == 1:
            content = [
                {"type": "text", "text": "Image 1:"},
                {"type": "image", "path": images[i % 6]},
                {"type": "text", "text": "Image 2:"},
                {"type": "image", "path": images[(i + 1) % 6]},
                {"type": "text", "text": q},
            ]
        else:
            content = [{"type": "text", "text": q * (1 + i % 4)}]
        reqs.append(Request(key=f"r{i}", content=content, max_new_tokens=n))
    return reqs


def _run(backend: HFBackend, reqs: list[Request], batch_size: int) -> dict:
    backend.default_batch_size = batch_size
    try:
        results = list(backend.generate(reqs))
    finally:
        backend.default_batch_size = OPTIONS["batch_size"]
    assert sorted(r.key for r in results) == sorted(r.key for r in reqs)
    return {r.key: r for r in results}


def test_revision_is_the_weights_hash(env):
    assert env["backend"].revision == "sha256:" + env["record"]["weights_sha256"][:16]
    assert env["backend"].default_batch_size == 8


def test_results_and_token_counts(env):
    backend, images = env["backend"], env["images"]
    reqs = [
        _one(images[0], "What is shown?", "with-image"),
        Request("text-only", [{"type": "text", "text": "What is shown?"}], 12),
        *_mixed(images)[:3],
    ]
    out = _run(backend, reqs, 8)
    for r in out.values():
        assert r.error is None and r.finish_reason in ("stop", "length")
        assert isinstance(r.text, str)
        assert 1 <= r.completion_tokens <= 12
        assert r.finish_reason == "stop" or r.completion_tokens == 12
        assert r.extra["batch_size"] == 5
        assert r.latency_s > 0
    # 224x224 is within [min_pixels, max_pixels]: 16x16 patches, 2x2-merged = 64 image
    # tokens, plus <|vision_start|> and <|vision_end|>.
    assert out["with-image"].prompt_tokens - out["text-only"].prompt_tokens == 64 + 2
    # Different prompts give different outputs (else batch invariance would be trivial).
    assert len({r.text for r in out.values()}) >= 3


def test_pixel_limits_change_image_tokens(env):
    backend, images = env["backend"], env["images"]
    small = HFBackend(
        "demo-small",
        {"local_path": backend.source, "options": {"min_pixels": 3136, "max_pixels": 28 * 28 * 16}},
    )
    req = _one(images[0], "What?", "a", n=2)
    big_prompt = next(iter(backend.generate([req]))).prompt_tokens
    small_prompt = next(iter(small.generate([req]))).prompt_tokens
    assert big_prompt - small_prompt == 64 - 16
    with pytest.raises(ValueError, match="min_pixels"):
        HFBackend(
            "x", {"local_path": backend.source, "options": {"min_pixels": 10**6, "max_pixels": 10}}
        )


def test_greedy_batch_of_8_equals_batch_of_1(env):
    reqs = _mixed(env["images"], n=16)
    one = _run(env["backend"], reqs, 1)
    eight = _run(env["backend"], reqs, 8)
    for key in one:
        a, b = one[key], eight[key]
        assert (a.text, a.prompt_tokens, a.completion_tokens, a.finish_reason) == (
            b.text,
            b.prompt_tokens,
            b.completion_tokens,
            b.finish_reason,
        ), key
        assert a.extra["batch_size"] == 1 and b.extra["batch_size"] in (8, 2)


def test_sampling_is_seeded_and_independent_of_the_batch(env):
    backend, images = env["backend"], env["images"]

    def sampled(key: str, seed: int) -> Request:
        return _one(images[1], "Describe it.", key, n=16, temperature=1.0, top_p=0.95, seed=seed)

    alone = _run(backend, [sampled("s", 7)], 8)["s"]
    others = [*_mixed(images, n=16)[:4], sampled("t", 8)]
    in_batch = _run(backend, [*others[:2], sampled("s", 7), *others[2:]], 8)
    assert in_batch["s"].text == alone.text and in_batch["s"].extra == {
        "batch_size": 6,
        "seed": 7,
        "generation": {
            "config": "explicit",
            "temperature": 1.0,
            "top_p": 0.95,
            "top_k": None,
            "repetition_penalty": 1.0,
        },
    }
    assert in_batch["t"].text != alone.text  # another seed, another draw
    greedy = _run(backend, [_one(images[1], "Describe it.", "g", n=16)], 8)["g"]
    assert alone.text != greedy.text


def test_unseeded_sampling_records_its_seed(env):
    backend, images = env["backend"], env["images"]
    req = _one(images[2], "Why?", "u", n=8, temperature=0.8)
    first = _run(backend, [req], 8)["u"]
    seed = first.extra["seed"]
    assert isinstance(seed, int)
    replay = _run(backend, [_one(images[2], "Why?", "u", n=8, temperature=0.8, seed=seed)], 8)
    assert replay["u"].text == first.text


def test_length_and_stop(env):
    backend, images = env["backend"], env["images"]
    r = _run(backend, [_one(images[3], "Is it red?", "short", n=3)], 8)["short"]
    assert (r.finish_reason, r.completion_tokens) == ("length", 3)
    # Make every token an end of sequence: generation stops after one, which is counted
    # and stripped from the text.
    saved = backend._eos_ids, backend._strip_ids
    backend._eos_ids = list(range(len(backend.tokenizer)))
    backend._strip_ids = set(backend._eos_ids)
    try:
        r = _run(backend, [_one(images[3], "Is it red?", "stop", n=3)], 8)["stop"]
    finally:
        backend._eos_ids, backend._strip_ids = saved
    assert (r.finish_reason, r.completion_tokens, r.text) == ("stop", 1, "")


def test_decode_keeps_think_tags_and_drops_end_tokens(env):
    backend = env["backend"]
    tok = backend.tokenizer
    body = tok.encode("<think> 2 + 3 = 5 </think> The answer is B.", add_special_tokens=False)
    im_end, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.pad_token_id
    text, n, finish = backend.decode_completion([*body, im_end, pad, pad])
    assert (text, n, finish) == (
        "<think> 2 + 3 = 5 </think> The answer is B.",
        len(body) + 1,
        "stop",
    )
    text, n, finish = backend.decode_completion(body[:4])
    assert (n, finish) == (4, "length") and text.startswith("<think>")
    # Kept also where a tokenizer marks the tags special (skip_special_tokens would drop
    # them): a fresh processor whose tokenizer makes them special.
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(backend.source)
    processor.tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<think>", "</think>"]},
        replace_extra_special_tokens=False,
    )
    other = HFBackend.from_loaded("special-think", backend.model, processor)
    tags = tok.convert_tokens_to_ids(["<think>", "</think>"])
    assert processor.tokenizer.convert_tokens_to_ids(["<think>", "</think>"]) == tags
    assert tok.decode(tags, skip_special_tokens=True) == "<think></think>"
    assert processor.tokenizer.decode(tags, skip_special_tokens=True) == ""
    assert other.decode_completion([*tags, im_end]) == ("<think></think>", 3, "stop")


def test_decoding_ignores_the_checkpoint_generation_defaults(env):
    """transformers merges generation_config.json into unset fields; Qwen2-VL's ship
    repetition_penalty 1.05 and top_k 1. Decoding must be what the request says."""
    import copy

    backend, images = env["backend"], env["images"]
    reqs = [
        _one(images[1], "What is shown?", "g", n=24),
        _one(images[2], "Why?", "s", n=24, temperature=0.9, seed=4),
    ]
    before = _run(backend, reqs, 8)
    saved = copy.deepcopy(backend.model.generation_config)
    gc = backend.model.generation_config
    gc.do_sample, gc.temperature, gc.top_k, gc.top_p = True, 0.01, 1, 0.001
    gc.repetition_penalty, gc.no_repeat_ngram_size = 1.5, 2
    try:
        after = _run(backend, reqs, 8)
    finally:
        backend.model.generation_config = saved
    assert {k: r.text for k, r in after.items()} == {k: r.text for k, r in before.items()}
    # A registry option does change decoding.
    penalised = HFBackend.from_loaded(
        "penalised", backend.model, backend.processor, {"generation": {"no_repeat_ngram_size": 1}}
    )
    out = _run(penalised, reqs[:1], 8)["g"]
    assert out.text != before["g"].text


def test_checkpoint_generation_config_applies_the_checkpoint_defaults(env):
    """generation_config: checkpoint = what model.generate does with only max_new_tokens /
    do_sample / temperature / top_p: the checkpoint's repetition penalty (and any other
    logits processor) applies to greedy rows too, a sampled row takes its top_k; the
    request's temperature and top-p stay the request's. Every row records it."""
    import copy

    backend, images = env["backend"], env["images"]

    def reqs(mode: str) -> list[Request]:
        return [
            _one(images[1], "What is shown?", "g", n=24, generation_config=mode),
            _one(
                images[1],
                "What is shown?",
                "s",
                n=24,
                temperature=0.9,
                seed=4,
                generation_config=mode,
            ),
        ]

    saved = copy.deepcopy(backend.model.generation_config)
    gc = backend.model.generation_config
    gc.do_sample, gc.temperature, gc.top_p = True, 0.01, 0.001
    gc.top_k, gc.repetition_penalty, gc.no_repeat_ngram_size = 1, 1.5, 2
    try:
        explicit = _run(backend, reqs("explicit"), 8)
        checkpoint = _run(backend, reqs("checkpoint"), 8)
        settings = {m: generation_settings(backend, m, 24) for m in ("explicit", "checkpoint")}
    finally:
        backend.model.generation_config = saved
    # the penalty bites: greedy tokens differ
    assert checkpoint["g"].text != explicit["g"].text
    # top_k 1 leaves one token to draw: the sampled row is the penalised greedy answer
    assert checkpoint["s"].text == checkpoint["g"].text != explicit["s"].text
    # what generate is given: greedy with one beam either way (RowSampler samples)
    ex, ck = settings["explicit"], settings["checkpoint"]
    assert (ex.repetition_penalty, ex.no_repeat_ngram_size) == (1.0, 0)
    assert (ck.repetition_penalty, ck.no_repeat_ngram_size) == (1.5, 2)
    assert (ck.do_sample, ck.num_beams, ck.max_new_tokens) == (False, 1, 24)
    assert (ck.temperature, ck.top_p) == (1.0, 1.0)  # the request's are RowSampler's
    assert explicit["g"].extra["generation"] == {
        "config": "explicit",
        "temperature": 0.0,
        "top_p": None,
        "top_k": None,
        "repetition_penalty": 1.0,
    }
    assert checkpoint["g"].extra["generation"] == {
        "config": "checkpoint",
        "temperature": 0.0,
        "top_p": None,
        "top_k": None,
        "repetition_penalty": 1.5,
        "no_repeat_ngram_size": 2,
    }
    assert checkpoint["s"].extra["generation"] == {
        "config": "checkpoint",
        "temperature": 0.9,
        "top_p": None,
        "top_k": 1,
        "repetition_penalty": 1.5,
        "no_repeat_ngram_size": 2,
    }


def test_checkpoint_top_k_defaults_to_transformers(env):
    backend = env["backend"]
    import copy

    saved = copy.deepcopy(backend.model.generation_config)
    try:
        backend.model.generation_config.top_k = None
        assert checkpoint_top_k(backend) == 50  # transformers' global default
        backend.model.generation_config.top_k = 20
        assert checkpoint_top_k(backend) == 20
        backend.model.generation_config.top_k = 0
        assert checkpoint_top_k(backend) is None
    finally:
        backend.model.generation_config = saved
    bad = _one(env["images"][0], "q", "bad", generation_config="neutral")
    (result,) = backend.generate([bad])
    assert result.finish_reason == "error"
    assert "generation_config must be one of explicit, checkpoint, got 'neutral'" in result.error


def test_missing_image_fails_alone(env):
    backend, images = env["backend"], env["images"]
    missing = str(env["root"] / "missing.png")
    reqs = [
        _one(images[0], "What is shown?", "ok1"),
        _one(missing, "What is shown?", "bad"),
        _one(images[4], "How many?", "ok2"),
    ]
    out = _run(backend, reqs, 8)
    assert out["bad"].finish_reason == "error" and out["bad"].text == ""
    assert "missing.png" in out["bad"].error
    single = _run(backend, [reqs[0], reqs[2]], 1)
    for key in ("ok1", "ok2"):
        assert out[key].error is None and out[key].text == single[key].text


def test_failed_batch_is_retried_one_by_one(env, monkeypatch):
    backend, images = env["backend"], env["images"]
    real = backend.model.generate

    def flaky(**kwargs):
        ids = kwargs["input_ids"]
        if ids.shape[0] > 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        if (ids == backend.tokenizer.convert_tokens_to_ids("<|vision_start|>")).sum() > 1:
            raise RuntimeError("this one always fails")
        return real(**kwargs)

    monkeypatch.setattr(backend.model, "generate", flaky)
    reqs = [_one(images[0], "a", "a"), _mixed(images)[1], _one(images[5], "b", "b")]
    out = _run(backend, reqs, 8)
    assert out["r1"].finish_reason == "error" and "always fails" in out["r1"].error
    for key in ("a", "b"):
        assert out[key].error is None and out[key].extra["batch_size"] == 1


def test_requests_with_different_max_new_tokens(env):
    backend, images = env["backend"], env["images"]
    reqs = [_one(images[0], "q", "n4", n=4), _one(images[1], "q", "n9", n=9)]
    out = _run(backend, reqs, 8)
    assert out["n4"].completion_tokens <= 4 and out["n9"].completion_tokens <= 9
    assert out["n4"].extra["batch_size"] == out["n9"].extra["batch_size"] == 1


def test_system_prompt_and_bad_spec(env, tmp_path):
    backend, images = env["backend"], env["images"]
    a = _run(backend, [_one(images[0], "q", "a", n=2)], 8)["a"]
    b = _run(backend, [_one(images[0], "q", "a", n=2, system="Be brief.")], 8)["a"]
    assert b.prompt_tokens != a.prompt_tokens
    with pytest.raises(ValueError, match="local_path"):
        HFBackend("nothing", {"options": {}})
    with pytest.raises(FileNotFoundError, match="no-such-dir"):
        HFBackend("gone", {"local_path": str(tmp_path / "no-such-dir")})
    with pytest.raises(ValueError, match="options.generation"):
        HFBackend("g", {"local_path": backend.source, "options": {"generation": {"top_k": 5}}})


def test_row_sampler_draws_from_the_tempered_nucleus():
    probs = torch.tensor([0.6, 0.25, 0.1, 0.05])
    logits = torch.log(probs).repeat(3, 1)
    # Row 0 greedy, row 1 plain sampling, row 2 top-p 0.8 (keeps 0.6 and 0.25).
    sampler = RowSampler([(0.0, 1.0, None), (1.0, 1.0, 1), (1.0, 0.8, 2)])
    counts = np.zeros((3, 4))
    for _ in range(4000):
        picks = sampler(None, logits).argmax(dim=-1)
        counts[np.arange(3), picks.numpy()] += 1
    assert counts[0].tolist() == [4000, 0, 0, 0]
    assert np.allclose(counts[1] / 4000, probs.numpy(), atol=0.03)
    assert counts[2][2:].sum() == 0
    assert abs(counts[2][0] / counts[2][:2].sum() - 0.6 / 0.85) < 0.03
    # Same seed, same draws.
    again = RowSampler([(0.0, 1.0, None), (1.0, 1.0, 1), (1.0, 0.8, 2)])
    first = RowSampler([(0.0, 1.0, None), (1.0, 1.0, 1), (1.0, 0.8, 2)])
    assert torch.equal(again(None, logits), first(None, logits))
    # top-k (the checkpoint's, under generation_config: checkpoint) before top-p:
    # row 1 keeps the two most likely tokens; row 2 only the first: top-p 0.7 of those
    # two (0.71 and 0.29 renormalised), where plain top-p 0.7 would keep two of four
    topk = RowSampler([(0.0, 1.0, None), (1.0, 1.0, 1), (1.0, 0.7, 2)], top_k=[None, 2, 2])
    counts = np.zeros((3, 4))
    for _ in range(4000):
        picks = topk(None, logits).argmax(dim=-1)
        counts[np.arange(3), picks.numpy()] += 1
    assert counts[0].tolist() == [4000, 0, 0, 0]
    assert counts[1][2:].sum() == 0
    assert abs(counts[1][0] / 4000 - 0.6 / 0.85) < 0.03
    assert counts[2].tolist() == [4000, 0, 0, 0]
    with pytest.raises(ValueError, match="3 rows but 1 top_k"):
        RowSampler([(0.0, 1.0, None)] * 3, top_k=[1])


# -- media ---------------------------------------------------------------------------------


def test_load_image_applies_exif_orientation(tmp_path):
    img = Image.new("RGB", (40, 20), (255, 0, 0))
    img.paste((0, 0, 255), (0, 0, 10, 20))  # blue left quarter
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to view
    path = tmp_path / "rot.jpg"
    img.save(path, exif=exif.tobytes(), quality=95)
    out = load_image(path)
    assert out.mode == "RGB" and out.size == (20, 40)
    r, g, b = out.getpixel((10, 3))  # the blue quarter is now at the top
    assert b > 200 and r < 60


def test_load_image_composites_transparency_on_white(tmp_path):
    rgba = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    rgba.putpixel((0, 0), (255, 0, 0, 255))
    path = tmp_path / "a.png"
    rgba.save(path)
    out = load_image(path)
    assert out.mode == "RGB"
    assert out.getpixel((1, 1)) == (255, 255, 255) and out.getpixel((0, 0)) == (255, 0, 0)
    gray = tmp_path / "g.png"
    Image.new("L", (3, 3), 77).save(gray)
    assert load_image(gray).getpixel((0, 0)) == (77, 77, 77)


def test_load_image_errors_name_the_file(tmp_path):
    with pytest.raises(ImageLoadError, match="nope.png"):
        load_image(tmp_path / "nope.png")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(ImageLoadError, match="bad.png"):
        load_image(bad)
    truncated = tmp_path / "cut.png"
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, format="PNG")
    truncated.write_bytes(buf.getvalue()[:60])
    with pytest.raises(ImageLoadError, match="cut.png"):
        load_image(truncated)


def test_demo_model_dir_is_reused(env):
    # The backend reads the checkpoint; it never writes into it.
    before = {p.name: p.stat().st_mtime_ns for p in Path(env["backend"].source).iterdir()}
    list(env["backend"].generate([_one(env["images"][0], "q", "x", n=2)]))
    after = {p.name: p.stat().st_mtime_ns for p in Path(env["backend"].source).iterdir()}
    assert before == after


def test_hub_checkpoint_reports_its_commit(env, tmp_path):
    """A hub repository (here: an offline Hugging Face cache) is loaded at the commit its
    revision points to, and that commit is the backend's revision."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = tmp_path / "cache" / "models--acme--demo-vl"
    shutil.copytree(env["backend"].source, repo_dir / "snapshots" / commit)
    (repo_dir / "snapshots" / commit / "vlmrobust_demo.json").unlink()
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    req = _one(env["images"][0], "What is shown?", "k", n=6)
    local = _run(env["backend"], [req], 8)["k"]
    script = (
        "import json, sys\n"
        "from vlmrobust.clients.vlm.base import Request\n"
        "from vlmrobust.clients.vlm.hf import HFBackend\n"
        "b = HFBackend('hub', {'hf_repo': 'acme/demo-vl', 'revision': 'main', 'options': "
        + repr(OPTIONS)
        + "})\n"
        f"req = Request(**json.loads({json.dumps(json.dumps(req.__dict__))}))\n"
        "r = next(iter(b.generate([req])))\n"
        "print(json.dumps({'revision': b.revision, 'text': r.text}))\n"
    )
    envvars = {
        **os.environ,
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], env=envvars, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"revision": commit, "text": local.text}


def test_media_placeholders_in_the_text_are_dropped(env):
    # CRM feeds a model's own chain back into the final-answer prompt; a random-weight
    # model can write "<|video_pad|>", which the processor would expand (and fail on).
    backend, images = env["backend"], env["images"]
    text = "Your reasoning: a <|video_pad|> b <|image_pad|> c"
    out = _run(
        backend,
        [_one(images[0], text, "fed-back"), _one(images[0], "Your reasoning: a  b  c", "clean")],
        2,
    )
    assert out["fed-back"].error is None
    assert out["fed-back"].prompt_tokens == out["clean"].prompt_tokens

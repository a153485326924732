"""Tiny twins of the local paper model families (vlmrobust_demo.twins) through the
project's code paths: pixel options -> vision tokens (transformers, vLLM, the forecast's
rule), chat-template image placement, thinking markers and the reasoning/answer split,
and greedy tokens in transformers vs vLLM (float32).

The vLLM side runs once, in the vLLM environment (tests/twins_vllm.py: one engine per
family, loaded by the project's ``VLLMBackend``), and its measurements are shared; the
tests that read them are marked ``vllm`` and skipped without that environment (a
failure with VLMROBUST_REQUIRE_VLLM=1). Llama-3.2-Vision (Mllama) has no vLLM side:
vLLM removed the architecture in 0.10.2, which the tests assert from vLLM's own
registry.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageDraw

from tests.vllm_env import CPU_ENGINE, REPO, require_vllm, vllm_cli, vllm_env_vars
from vlmrobust.clients.vlm.base import Request
from vlmrobust.clients.vlm.checkpoint import read_build_record
from vlmrobust.clients.vlm.thinking import split_thinking
from vlmrobust.core.vision_tokens import image_tokens, processor_of
from vlmrobust_demo.twins import FAMILIES, INTERN_THINKING_SYSTEM, TWIN_FAMILIES, build_twin

VLLM_FAMILIES = [f for f in TWIN_FAMILIES if FAMILIES[f].vllm]
SIZES = [(100, 60), (448, 448), (1000, 700)]
GREEDY = [((168, 112), "How tall is the second bar?"), ((224, 112), "What colour is it?"),
          ((120, 120), "Is there a red square?")]  # fmt: skip
MAX_NEW = 14
QUESTION = "What is it?"


def _entry(family: str) -> dict:
    """The first registry model of ``family`` (config/models.yaml)."""
    models = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["models"]
    return next(e for e in models.values() if e.get("family") == family)


def _image(root: Path, size: tuple[int, int]) -> Path:
    path = root / f"{size[0]}x{size[1]}.png"
    if not path.exists():
        img = Image.new("RGB", size, (size[0] % 256, 90, size[1] % 256))
        w, h = size
        ImageDraw.Draw(img).rectangle([w // 4, h // 4, w // 2, h // 2], fill=(200, 30, 30))
        img.save(path)
    return path


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("twins")
    for i, family in enumerate(TWIN_FAMILIES):
        build_twin(family, root / family, seed=100 + i)
    for size in SIZES + [s for s, _ in GREEDY]:
        _image(root, size)
    return root


@pytest.fixture(scope="module")
def backends(twins):
    """Each twin through the project's ``hf`` backend, with its registry options."""
    from vlmrobust.clients.vlm.hf import HFBackend

    out = {}
    for family in TWIN_FAMILIES:
        spec = {"backend": "hf", "local_path": str(twins / family),
                "options": dict(_entry(family).get("options") or {})}  # fmt: skip
        out[family] = HFBackend(family, spec)
    return out


def _request(key: str, image: Path | None, question: str, image_first: bool = True) -> Request:
    parts = [{"type": "text", "text": question}]
    if image is not None:
        img = {"type": "image", "path": str(image)}
        parts = [img, *parts] if image_first else [*parts, img]
    return Request(key, parts, max_new_tokens=MAX_NEW)


def _image_prompt_tokens(family: str, ids: list[int], tokenizer) -> int:
    """The prompt tokens an image became: its feature tokens and the boundary tokens
    the processor adds around them (InternVL's ``<img>``/``</img>``)."""
    spec = FAMILIES[family]
    wanted = [tokenizer.convert_tokens_to_ids(t) for t in (spec.image_token, *spec.image_bounds)]
    return sum(ids.count(t) for t in wanted)


def _hf_inputs(backend, req: Request):
    from vlmrobust.clients.vlm.media import load_images

    return backend.processor(
        text=[backend.chat_prompt(req)], images=load_images(req.image_paths), padding=True,
        return_tensors="pt", **backend.request_images_kwargs(req),
    )  # fmt: skip


# -- the builder -----------------------------------------------------------------------


def test_unknown_family_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match=r"'qwen9-vl'.*qwen2\.5-vl, qwen3-vl, glm-4\.1v"):
        build_twin("qwen9-vl", tmp_path / "x", seed=1)
    assert not (tmp_path / "x").exists()


def test_same_seed_same_weights_other_seed_other_weights(tmp_path, twins):
    again = build_twin("qwen3-vl", tmp_path / "again", seed=101)
    other = build_twin("qwen3-vl", tmp_path / "other", seed=102)
    first = read_build_record(twins / "qwen3-vl")
    assert read_build_record(again)["weights_sha256"] == first["weights_sha256"]
    assert read_build_record(other)["weights_sha256"] != first["weights_sha256"]
    assert (again / "tokenizer.json").read_bytes() == (
        twins / "qwen3-vl/tokenizer.json"
    ).read_bytes()


@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_twin_is_the_family_architecture_and_tiny(family, twins, backends):
    record = read_build_record(twins / family)
    assert (record["family"], record["seed"]) == (family, 100 + TWIN_FAMILIES.index(family))
    config = json.loads((twins / family / "config.json").read_text())
    assert config["architectures"] == [FAMILIES[family].model_class]
    assert type(backends[family].model).__name__ == FAMILIES[family].model_class
    text = config["text_config"]
    assert text["num_hidden_layers"] == 2
    assert text["hidden_size"] // text["num_attention_heads"] == 32  # vLLM's CPU kernels
    if family == "intern-s1":
        assert text["model_type"] == "qwen3"  # InternViT + MLP projector + Qwen3
    if family == "qwen3-vl":
        assert config["vision_config"]["deepstack_visual_indexes"] == [0, 1]
        assert text["rope_parameters"]["mrope_section"] == [4, 6, 6]
    size = sum(p.stat().st_size for p in (twins / family).iterdir())
    assert size < 10_000_000, size


# -- 1. processor pixel options -> vision tokens --------------------------------------


def _hf_vision_tokens(family: str, backend, image: Path) -> int:
    inputs = _hf_inputs(backend, _request("v", image, QUESTION))
    ids = inputs["input_ids"][0].tolist()
    if family == "llama-3.2-vision":
        # one <|image|> in the prompt; the tiles' positions enter through cross-attention
        assert ids.count(backend.tokenizer.convert_tokens_to_ids("<|image|>")) == 1
        vision = backend.model.config.vision_config
        per_tile = (vision.image_size // vision.patch_size) ** 2 + 1
        return int(inputs["aspect_ratio_mask"].sum()) * per_tile
    return _image_prompt_tokens(family, ids, backend.tokenizer)


@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_hf_vision_tokens_equal_the_forecast_rule(family, twins, backends):
    """transformers' processor of the twin, called the way clients/vlm/hf.py calls it
    (the registry's min/max pixels as ``size``), makes as many image tokens as
    core/vision_tokens.py forecasts for the registry entry."""
    rule = processor_of(_entry(family))
    got = {
        s: _hf_vision_tokens(family, backends[family], twins / f"{s[0]}x{s[1]}.png") for s in SIZES
    }
    want = {s: image_tokens(s, rule) for s in SIZES}
    assert got == want
    assert len(set(got.values())) >= 2  # the sizes are told apart


EXPECTED_HF_TOKENS = {
    # registry 200704 .. 1003520 pixels (Qwen2.5-VL entries), 28 px per token
    "qwen2.5-vl": {(100, 60): 273, (448, 448): 256, (1000, 700): 900},
    # registry 65536 .. 4194304 pixels, 32 px per token
    "qwen3-vl": {(100, 60): 77, (448, 448): 196, (1000, 700): 682},
    # processor defaults (12544 .. 11760000, temporal 2)
    "glm-4.1v": {(100, 60): 8, (448, 448): 256, (1000, 700): 900},
    # 3x2 tiles + thumbnail, or one tile; 256 tokens each, plus <img> and </img>
    "intern-s1": {(100, 60): 1794, (448, 448): 258, (1000, 700): 1794},
    # 1, 1 and 4 tiles of 1601 positions
    "llama-3.2-vision": {(100, 60): 1601, (448, 448): 1601, (1000, 700): 6404},
}


@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_hf_vision_tokens_are_the_registry_options(family, twins, backends):
    """The numbers themselves: the registry's pixel options are applied (a processor
    that ignored them would give its defaults: e.g. Qwen2.5-VL's 100x60 image is
    4 x 2 tokens without min_pixels 200704)."""
    got = {
        s: _hf_vision_tokens(family, backends[family], twins / f"{s[0]}x{s[1]}.png") for s in SIZES
    }
    assert got == EXPECTED_HF_TOKENS[family]


@pytest.fixture(scope="module")
def vllm_side(twins, tmp_path_factory):
    """One subprocess in the vLLM environment: every vLLM-side measurement of every
    family vLLM serves (tests/twins_vllm.py), and vLLM's registry facts."""
    require_vllm()
    root = tmp_path_factory.mktemp("twins-vllm")
    plan = []
    for family in VLLM_FAMILIES:
        options = {**(_entry(family).get("options") or {}), **CPU_ENGINE}
        plan.append({
            "family": family, "path": str(twins / family), "options": options,
            "max_new": MAX_NEW,
            "vision": [{"key": f"{w}x{h}", "image": str(twins / f"{w}x{h}.png"),
                        "question": QUESTION} for w, h in SIZES],
            "greedy": [{"key": f"{w}x{h}", "image": str(twins / f"{w}x{h}.png"),
                        "question": q} for (w, h), q in GREEDY],
        })  # fmt: skip
    (root / "plan.json").write_text(json.dumps(plan))
    archs = ",".join(FAMILIES[f].model_class for f in TWIN_FAMILIES)
    env = {**vllm_env_vars(), "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = subprocess.run(
        [vllm_cli()[0], str(REPO / "tests" / "twins_vllm.py"), str(root / "plan.json"),
         str(root / "out.json"), archs],
        capture_output=True, text=True, env=env, timeout=900, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((root / "out.json").read_text())


def _vllm_family(vllm_side: dict, family: str) -> dict:
    result = vllm_side[family]
    assert "error" not in result, result.get("error")
    return result


def _assert_removed_from_vllm(vllm_side: dict, family: str) -> None:
    """Llama-3.2-Vision: vLLM's own registry lists Mllama as removed (0.10.2) and does
    not serve it, so no vLLM-side check can hold."""
    facts = vllm_side["_registry"][FAMILIES[family].model_class]
    assert facts == {"supported": False, "removed_in": "0.10.2"}


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_vllm_vision_tokens_equal_hf_and_forecast(family, twins, backends, vllm_side):
    """vLLM, given the registry options the way clients/vlm/vllm.py passes them
    (``mm_processor_kwargs``), puts as many image tokens in the prompt as transformers'
    processor and the forecast's rule."""
    if not FAMILIES[family].vllm:
        _assert_removed_from_vllm(vllm_side, family)
        return
    assert vllm_side["_registry"][FAMILIES[family].model_class]["supported"] is True
    result = _vllm_family(vllm_side, family)
    tok = backends[family].tokenizer
    got = {s: _image_prompt_tokens(family, result["vision"][f"{s[0]}x{s[1]}"], tok) for s in SIZES}
    assert got == EXPECTED_HF_TOKENS[family]
    assert got == {s: image_tokens(s, processor_of(_entry(family))) for s in SIZES}


# -- 2. chat template image placement --------------------------------------------------

PLACEMENT = {
    "qwen2.5-vl": (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|im_end|>\n<|im_start|>assistant\n",
    ),
    "qwen3-vl": (
        "<|im_start|>user\n",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|im_end|>\n<|im_start|>assistant\n<think>\n",
    ),
    "glm-4.1v": (
        "[gMASK]<sop><|user|>\n",
        "<|begin_of_image|><|image|><|end_of_image|>",
        "<|assistant|>\n",
    ),
    "intern-s1": (
        f"<|im_start|>system\n{INTERN_THINKING_SYSTEM}<|im_end|>\n<|im_start|>user\n",
        "<IMG_CONTEXT>\n",
        "<|im_end|>\n<|im_start|>assistant\n",
    ),
    "llama-3.2-vision": (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n",
        "<|image|>",
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    ),
}


@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_chat_template_puts_the_image_where_it_stands(family, twins, backends):
    """The prompt the hf backend renders (the twin's template, the registry's
    chat_template_kwargs) for an image then a question, and a question then an image."""
    head, marker, tail = PLACEMENT[family]
    backend = backends[family]
    image = twins / "100x60.png"
    first = backend.chat_prompt(_request("a", image, QUESTION, image_first=True))
    last = backend.chat_prompt(_request("b", image, QUESTION, image_first=False))
    assert first == head + marker + QUESTION + tail
    assert last == head + QUESTION + marker + tail
    assert marker == FAMILIES[family].image_marker


# -- 3. thinking markers and the reasoning/answer split ---------------------------------

#: A decoded sample output of each family (as the model writes it after the prompt)
#: and the split the project must make of it.
SAMPLES = {
    "qwen2.5-vl": (
        "<think>The bar is tall.</think><answer>yes</answer>",
        ("The bar is tall.", "yes"),
    ),
    "qwen3-vl": ("The bar is tall.\n</think>\n\nyes", ("The bar is tall.", "yes")),
    "glm-4.1v": (
        "<think>The bar is tall.</think><answer>yes</answer>",
        ("The bar is tall.", "yes"),
    ),
    "intern-s1": ("<think>The bar is tall.</think>\n\nyes", ("The bar is tall.", "yes")),
    "llama-3.2-vision": ("The answer is yes.", (None, "The answer is yes.")),
}
#: The reasoning tags that are one token of their own in the real tokenizer.
SINGLE = {
    "qwen2.5-vl": [],
    "qwen3-vl": ["<think>", "</think>"],
    "glm-4.1v": ["<think>", "</think>", "<answer>", "</answer>"],
    "intern-s1": ["<think>", "</think>"],
    "llama-3.2-vision": [],
}


@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_thinking_tokens_template_and_split(family, backends):
    backend = backends[family]
    tok = backend.tokenizer
    for tag in ("<think>", "</think>", "<answer>", "</answer>"):
        ids = tok(tag, add_special_tokens=False)["input_ids"]
        assert (len(ids) == 1) == (tag in SINGLE[family]), (tag, ids)
        # single or not, a tag survives skip_special_tokens (the split needs it)
        assert tok.decode(ids, skip_special_tokens=True) == tag
    # the template opens the think block where the real one does
    prompt = backend.chat_prompt(_request("t", None, QUESTION))
    assert prompt.endswith("<think>\n") == (family == "qwen3-vl")
    # the project's decode (up to the end of turn) and split of a sample output
    text, answer = SAMPLES[family]
    eos = backend._eos_ids[0]
    decoded, n, finish = backend.decode_completion(
        tok(text, add_special_tokens=False)["input_ids"] + [eos]
    )
    assert (decoded, finish) == (text, "stop")
    assert split_thinking(decoded) == answer


def test_intern_s1_enable_thinking_switch(backends):
    """Intern-S1's template: thinking on by default and with enable_thinking (the
    registry sets it): a system message asks for <think>; off: no system message."""
    backend = backends["intern-s1"]
    messages = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    render = backend.processor.apply_chat_template
    on = render(messages, add_generation_prompt=True, tokenize=False, enable_thinking=True)
    default = render(messages, add_generation_prompt=True, tokenize=False)
    off = render(messages, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    assert (
        on
        == default
        == (
            f"<|im_start|>system\n{INTERN_THINKING_SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
        )
    )
    assert off == f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    assert backend._template_kwargs == {"enable_thinking": True}


# -- 4. greedy tokens, float32, transformers vs vLLM -----------------------------------


def _hf_greedy(backend, req: Request) -> tuple[list[int], list[int]]:
    """(prompt ids, MAX_NEW greedy ids) of ``req``: the hf backend's prompt and
    inputs, ``generate`` with no end-of-sequence stop (as vLLM's ``ignore_eos``)."""
    import torch
    from transformers import GenerationConfig

    inputs = _hf_inputs(backend, req)
    cfg = GenerationConfig(
        do_sample=False, max_new_tokens=MAX_NEW, min_new_tokens=0, eos_token_id=None,
        pad_token_id=backend._pad_id,
    )  # fmt: skip
    with torch.inference_mode():
        out = backend.model.generate(**inputs, generation_config=cfg)
    prompt = inputs["input_ids"][0].tolist()
    return prompt, out[0, len(prompt) :].tolist()


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("family", TWIN_FAMILIES)
def test_greedy_tokens_hf_equal_vllm(family, twins, backends, vllm_side):
    """The same image prompts, greedy, float32: transformers (the hf backend's prompt
    and inputs) and vLLM (the vllm backend's prompt, enforce_eager) see the same prompt
    token ids and generate the same MAX_NEW token ids; the project backends' texts
    (HFBackend.generate, VLLMBackend.generate, stopping at the end of turn) agree, but
    where a text is cut inside a UTF-8 character (the byte-level tokens are bytes):
    transformers decodes the dangling bytes as U+FFFD, vLLM's incremental detokenizer
    holds them back (as in tests/test_vllm_engine.py)."""
    if not FAMILIES[family].vllm:
        _assert_removed_from_vllm(vllm_side, family)
        return
    result = _vllm_family(vllm_side, family)
    backend = backends[family]
    reqs = [_request(f"{w}x{h}", twins / f"{w}x{h}.png", q) for (w, h), q in GREEDY]
    texts = {r.key: r.text for r in backend.generate(reqs)}
    agree = []
    for req in reqs:
        prompt, ids = _hf_greedy(backend, req)
        theirs = result["greedy"][req.key]
        assert theirs["prompt_ids"] == prompt, req.key
        agree.append(theirs["ids"] == ids)
        assert theirs["ids"] == ids, (req.key, ids, theirs["ids"])
        ours = texts[req.key]
        if theirs["text"] != ours:
            assert ours.endswith("\ufffd") and ours.rstrip("\ufffd") == theirs["text"], req.key
    print(
        f"{family}: greedy token ids equal for {sum(agree)}/{len(agree)} prompts", file=sys.stderr
    )
    assert len({tuple(result["greedy"][r.key]["ids"]) for r in reqs}) >= 2  # not one reply
    assert all(agree)

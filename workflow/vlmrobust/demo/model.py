"""The embedded demo model: a random-weight Qwen2-VL built locally in seconds.

The default configuration runs offline on two CPU cores, so it cannot download a
checkpoint. :func:`build_demo_model` writes a real Qwen2-VL checkpoint directory
(``Qwen2VLForConditionalGeneration`` with random weights, a byte-level BPE tokenizer
trained here on a small built-in English/maths corpus, a Qwen2-VL chat template, an
image and a video processor) that loads exactly like a downloaded one through
``AutoProcessor.from_pretrained`` + ``AutoModelForImageTextToText.from_pretrained``.
Its answers are noise, but they exercise every code path of the real backends:
chat templating, image placeholders, batching with left padding, M-RoPE, decoding.

The build is deterministic: the same seed gives byte-identical files (weights and
tokenizer); different seeds give different weights. The tokenizer does not depend
on the seed at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vlmrobust.clients.vlm.hf import BUILD_RECORD as DEMO_MARKER
from vlmrobust.clients.vlm.hf import read_build_record as read_demo_record  # noqa: F401
from vlmrobust.core.io import sha256_file

#: DEMO_MARKER (the build record file, defined with the hf backend that reads it) marks a
#: directory as a demo model and records how it was built.
#: Bump when the construction changes, so a cached demo model is rebuilt.
DEMO_FORMAT = 1

#: Special tokens (Qwen2-VL's names; ids follow the order, from 0).
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
#: Reasoning tags: single tokens, not special (as in Qwen3's tokenizers), so they
#: survive ``skip_special_tokens`` and the reasoning/answer split sees them.
THINK_TOKENS = ["<think>", "</think>"]

# Qwen2-VL-7B-Instruct's chat template: system message (a default one when absent),
# string or list content, images and videos interleaved with text in order.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Image sizes for the demo: at most 64 merged image tokens per image (28 px per token
# side), at least 4, so CPU inference stays fast whatever the input resolution.
DEMO_MIN_PIXELS = 4 * 28 * 28
DEMO_MAX_PIXELS = 64 * 28 * 28


def _corpus() -> list[str]:
    """A small fixed English/maths corpus: the words benchmark prompts and answers use."""
    lines = [
        "Answer the question with a single word or phrase.",
        "Answer with the option's letter from the given choices directly.",
        "Please answer yes or no.",
        "The answer is A. The answer is B. The answer is C. The answer is D. The answer is E.",
        "Options: A, B, C, D, E. Choices: (A) (B) (C) (D) (E)",
        "Question: What is shown in the image? Answer: a cat.",
        "Question: How many objects are in the picture? Answer: 3",
        "Which of the following is true? Who, what, where, when, why, how, how many?",
        "Is there a dog in the image? Yes. Is the sky blue? No.",
        "yes no yes no Yes No YES NO true false True False",
        "Let's think step by step. First, second, third, therefore, so, because.",
        "<think> reasoning </think> final answer",
        "Hint: Please answer the question and provide the final answer at the end.",
        "The value of x is 12. The area of the triangle is 24. The angle is 45 degrees.",
        "sum difference product quotient equals plus minus times divided by",
        "triangle circle square rectangle angle radius diameter area perimeter volume",
        "x + y = 10, 2x - 3 = 7, a^2 + b^2 = c^2, f(x) = 3x + 1, pi = 3.14",
        "chart table figure graph bar line value percent year total average maximum minimum",
        "the a an of in on at to for with from by is are was were be this that these those",
        "color red green blue yellow black white left right top bottom front back",
        "person man woman child car bus tree house animal bird fish dog cat horse",
    ]
    numbers = [" ".join(str(n) for n in range(k, k + 10)) for k in range(0, 100, 10)]
    sums = [f"{a} + {b} = {a + b}. {a} * {b} = {a * b}." for a in range(10) for b in range(10)]
    return (lines * 8) + numbers * 4 + sums


def _build_tokenizer(vocab: int):
    """A byte-level BPE trained on the built-in corpus, wrapped as Qwen2's tokenizer."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import Qwen2TokenizerFast

    from_qwen = pre_tokenizers.Split(
        Regex(
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
        ),
        behavior="isolated",
        invert=False,
    )
    tok = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [from_qwen, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    n_added = len(THINK_TOKENS)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab - n_added,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    qwen = Qwen2TokenizerFast(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        chat_template=CHAT_TEMPLATE,
    )
    qwen.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    if len(qwen) != vocab:
        raise RuntimeError(f"demo tokenizer has {len(qwen)} tokens, expected {vocab}")
    return qwen


def _build_config(tokenizer, *, text_layers, hidden, vision_depth, vision_embed, vocab):
    from transformers import Qwen2VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    heads = max(1, hidden // 16)
    head_dim = hidden // heads
    half = head_dim // 2
    # M-RoPE splits the rotary half-dimension into (temporal, height, width) sections.
    mrope = [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]
    return Qwen2VLConfig(
        text_config={
            "vocab_size": vocab,
            "hidden_size": hidden,
            "intermediate_size": hidden * 2,
            "num_hidden_layers": text_layers,
            "num_attention_heads": heads,
            "num_key_value_heads": max(1, heads // 2),
            "max_position_embeddings": 32768,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": mrope,
            },
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "tie_word_embeddings": False,
        },
        vision_config={
            "depth": vision_depth,
            "embed_dim": vision_embed,
            "hidden_size": hidden,
            "num_heads": max(1, vision_embed // 16),
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def _normalize_json(path: Path) -> None:
    """Rewrite a JSON file with sorted keys, so that dict order never shows in the bytes."""
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def build_demo_model(
    out_dir: Path,
    seed: int,
    *,
    text_layers: int = 2,
    hidden: int = 64,
    vision_depth: int = 2,
    vision_embed: int = 32,
    vocab: int = 600,
) -> dict[str, Any]:
    """Write a random-weight Qwen2-VL checkpoint directory to ``out_dir``; return its record.

    The record (also written to ``out_dir/vlmrobust_demo.json``) holds the seed, the
    sizes and the sha256 of ``model.safetensors``. The directory is built beside
    ``out_dir`` and renamed into place, so a killed build never leaves a half model.
    """
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    out_dir = Path(out_dir)
    if hidden % 16 or vision_embed % 16:
        raise ValueError(
            f"demo model: hidden ({hidden}) and vision_embed ({vision_embed}) must be "
            "multiples of 16 (the attention head size)"
        )
    tokenizer = _build_tokenizer(vocab)
    config = _build_config(
        tokenizer,
        text_layers=text_layers,
        hidden=hidden,
        vision_depth=vision_depth,
        vision_embed=vision_embed,
        vocab=vocab,
    )
    image_processor = Qwen2VLImageProcessor(
        min_pixels=DEMO_MIN_PIXELS, max_pixels=DEMO_MAX_PIXELS, patch_size=14, merge_size=2
    )
    video_processor = Qwen2VLVideoProcessor(
        min_pixels=DEMO_MIN_PIXELS, max_pixels=DEMO_MAX_PIXELS, patch_size=14, merge_size=2
    )
    processor = Qwen2VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )

    # Weights: a private generator state, so the caller's global RNG is left alone and
    # nothing drawn before changes what is built.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = Qwen2VLForConditionalGeneration(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.text_config.bos_token_id,
        pad_token_id=config.text_config.pad_token_id,
        eos_token_id=[
            tokenizer.convert_tokens_to_ids("<|im_end|>"),
            tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        ],
        do_sample=False,
    )

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        for path in sorted(tmp.glob("*.json")):
            _normalize_json(path)
        weights = tmp / "model.safetensors"
        record = {
            "format": DEMO_FORMAT,
            "seed": int(seed),
            "sizes": {
                "text_layers": text_layers,
                "hidden": hidden,
                "vision_depth": vision_depth,
                "vision_embed": vision_embed,
                "vocab": vocab,
            },
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "weights_sha256": sha256_file(weights),
        }
        (tmp / DEMO_MARKER).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        # mkdtemp and the weights writer create owner-only modes; a checkpoint is shared.
        tmp.chmod(0o755)
        for path in tmp.iterdir():
            path.chmod(0o644)
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def _replace_dir(src: Path, dst: Path) -> None:
    """Move directory ``src`` onto ``dst``, replacing an existing ``dst`` (near-)atomically."""
    if not dst.exists():
        os.replace(src, dst)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".old", dir=dst.parent))
    os.rmdir(trash)
    os.replace(dst, trash)
    try:
        os.replace(src, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.replace(trash, dst)
        raise
    shutil.rmtree(trash, ignore_errors=True)

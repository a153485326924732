"""The embedded demo models: tiny Qwen2-VL checkpoints built and trained locally.

The default configuration runs offline on two CPU cores, so it cannot download a
checkpoint. :func:`build_demo_model` writes a real Qwen2-VL checkpoint directory
(``Qwen2VLForConditionalGeneration``, a byte-level BPE tokenizer trained here on a
small built-in corpus of the demo's words, a Qwen2-VL chat template, an image and a
video processor) that loads exactly like a downloaded one through
``AutoProcessor.from_pretrained`` + ``AutoModelForImageTextToText.from_pretrained``.

Without training data the weights are random (fast builds for tests of the backends).
With a training split (``train_dir`` + ``train``) the model is then trained briefly on
the CPU (:mod:`vlmrobust_demo.train`), so that it answers the demo questions through
the unchanged ``hf`` path: toy models on synthetic data, but with accuracies that move
when the image is corrupted, distracted or masked. A thinking model may start from a
trained base model (``init``).

The build is deterministic: the same seed, training split and settings give
byte-identical files (weights and tokenizer) on the same machine and package versions;
different seeds give different weights. The tokenizer does not depend on the seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vlmrobust.clients.vlm.checkpoint import BUILD_RECORD as DEMO_MARKER
from vlmrobust.clients.vlm.checkpoint import read_build_record as read_demo_record
from vlmrobust.core.io import sha256_file

from .train import TrainSpec

#: DEMO_MARKER (the build record file, defined with the hf backend that reads it) marks a
#: directory as a demo model and records how it was built.
#: Bump when the construction changes, so a cached demo model is rebuilt.
DEMO_FORMAT = 2

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
#: Tokenizer size: the corpus's merges fit in this many tokens.
DEMO_VOCAB = 1024
#: The text attention head size of the default demo models (4 heads of 16 at width 64).
#: vLLM's CPU attention accepts head sizes 32, 64, 80, ... only: a demo model served by
#: vLLM is built with ``head_dim`` 32 (2 heads, 1 KV head; registry ``demo_sizes``).
DEMO_HEAD_DIM = 16


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
    return (lines * 8) + numbers * 4 + sums + _demo_lines() * 6


def _demo_lines() -> list[str]:
    """The demo's own words: its questions, labels, premises and the trace templates,
    so the demo models' prompts and answers are short in tokens."""
    from vlmrobust.core.prompts import (
        CRM_ANSWER_INSTRUCTION,
        CRM_COT_INSTRUCTION,
        LABEL_INSTRUCTION,
        MCQ_INSTRUCTION,
        SHORT_INSTRUCTION,
        YESNO_INSTRUCTION,
    )

    from . import data as demo

    lines = [
        demo.OBJECT_QUESTION,
        " ".join(demo.OBJECT_LABELS),
        " ".join(demo.OBJECT_CLASSES),
        " ".join(demo.NAMED_COLOURS) + " " + " ".join(demo.SHAPES),
        MCQ_INSTRUCTION,
        YESNO_INSTRUCTION,
        SHORT_INSTRUCTION,
        LABEL_INSTRUCTION,
        CRM_COT_INSTRUCTION,
        CRM_ANSWER_INSTRUCTION,
        "Is there a red circle in the image? Is the blue square to the left of the green "
        "triangle? Is the purple diamond above the orange square? Answer yes or no.",
        "Is Bar A taller than Bar B? Is Bar C the tallest bar in the chart?",
        "How many green shapes are there in the figure? Which segment is the longest?",
        "What is the value of Apples in the chart? What is the difference between the "
        "values? What is the highest value shown in the chart? What is the sum of all the "
        "values shown in the chart?",
        "What is written on the sign? What is shown in the left part of the image?",
        "What is shown in the top-left part of the image? right middle centre bottom",
        "The image shows a dog. It is in front of a meadow background. It faces left.",
        "So the category is Dog. I see 5 shapes: a red circle and a blue square.",
        "There are 4 bars. Bar A is 12. So the answer is yes. So the answer is no.",
        "The figure has 6 shapes. I count 3 green shapes. The matching option is B.",
        "The bar chart shows 5 values. The line chart shows 6 values. The answer is 12.",
        "The diagram shows a triangle problem. We know AB = 5 and BC = 12.",
        "The image has 3 parts. The part asked about shows a factory.",
        "Let me look at the image carefully. Let me check this again. I also notice",
        "Your reasoning: Conclusion: 1. 2. 3.",
        " ".join(demo._BACKGROUNDS),
    ]
    for scen in demo._SCENARIOS:
        lines.append(scen.conclusion)
        for prem in scen.premises:
            lines += [prem.visual.replace("{colour} ", ""), prem.commonsense, prem.intermediate]
    return lines


def train_bpe(specials: list[str], vocab_size: int) -> tuple[dict[str, int], list[tuple]]:
    """Vocabulary and merges of a byte-level BPE (Qwen2's pre-tokenizer) trained on the
    built-in corpus to ``vocab_size`` tokens, ``specials`` first (ids 0, 1, ...); the
    demo models' and the twins' tokenizers (:mod:`vlmrobust_demo.twins`)."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE

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
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return model["vocab"], merges


def _build_tokenizer(vocab: int):
    """A byte-level BPE trained on the built-in corpus, wrapped as Qwen2's tokenizer."""
    from tokenizers import AddedToken
    from transformers import Qwen2TokenizerFast

    vocab_map, merges = train_bpe(SPECIAL_TOKENS, vocab - len(THINK_TOKENS))
    qwen = Qwen2TokenizerFast(
        vocab=vocab_map,
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


def _build_config(
    tokenizer, *, text_layers, hidden, vision_depth, vision_embed, vocab, head_dim=16
):
    from transformers import Qwen2VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    heads = max(1, hidden // head_dim)
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
    vocab: int = DEMO_VOCAB,
    head_dim: int = DEMO_HEAD_DIM,
    train_dir: Path | None = None,
    train: TrainSpec | None = None,
    init: Path | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a demo Qwen2-VL checkpoint directory to ``out_dir``; return its record.

    Without ``train`` the weights are random (drawn from ``seed``). With ``train`` (a
    :class:`~vlmrobust_demo.train.TrainSpec`) and ``train_dir`` (a training split
    written by :func:`vlmrobust_demo.data.generate_demo`) the model is trained on it,
    starting from random weights or, with ``init``, from the weights of another demo
    checkpoint of the same sizes. ``options`` are the registry options the model is
    evaluated with (``min_pixels``/``max_pixels``), so training sees the same pixels.

    The record (also written to ``out_dir/vlmrobust_demo.json``) holds the seed, the
    sizes, the training record (spec, examples per task, first and last losses), the
    initial checkpoint's weights hash and the sha256 of ``model.safetensors``. The
    directory is built beside ``out_dir`` and renamed into place, so a killed build
    never leaves a half model.
    """
    out_dir = Path(out_dir)
    _check_arguments(hidden, head_dim, vision_embed, train_dir, train, init)
    sizes = {
        "text_layers": text_layers,
        "hidden": hidden,
        "vision_depth": vision_depth,
        "vision_embed": vision_embed,
        "vocab": vocab,
        "head_dim": head_dim,
    }
    tokenizer = _build_tokenizer(vocab)
    config = _build_config(tokenizer, **sizes)
    processor = _build_processor(tokenizer)
    recorded = _recorded_sizes(sizes)
    model, init_record = _initial_model(config, int(seed), init, recorded)
    model.generation_config = _generation_config(config, tokenizer)
    training = None
    if train is not None:
        training = _train(model, processor, Path(train_dir), train, int(seed), options)
    record = {
        "format": DEMO_FORMAT,
        "seed": int(seed),
        "sizes": recorded,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "training": training,
        "init_weights_sha256": None if init_record is None else init_record["weights_sha256"],
    }
    _write_checkpoint(out_dir, model, processor, record)
    return record


def _check_arguments(
    hidden: int,
    head_dim: int,
    vision_embed: int,
    train_dir: Path | None,
    train: TrainSpec | None,
    init: Path | None,
) -> None:
    """Refuse sizes the attention heads cannot split, and training data given by halves
    (``train_dir`` without ``train`` or the reverse, ``init`` without either)."""
    if hidden % head_dim or vision_embed % 16 or head_dim % 16:
        raise ValueError(
            f"demo model: head_dim ({head_dim}) must be a multiple of 16, hidden ({hidden}) "
            f"a multiple of head_dim and vision_embed ({vision_embed}) a multiple of 16 "
            "(the attention head sizes)"
        )
    if (train is None) != (train_dir is None):
        raise ValueError("demo model: give both train_dir and train, or neither")
    if init is not None and train is None:
        raise ValueError("demo model: init (a checkpoint to start from) needs training data")


def _build_processor(tokenizer: Any) -> Any:
    """The demo's Qwen2-VL processor: ``tokenizer``, the chat template, and image and
    video processors bounded to the demo's pixel range."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(
        min_pixels=DEMO_MIN_PIXELS, max_pixels=DEMO_MAX_PIXELS, patch_size=14, merge_size=2
    )
    video_processor = Qwen2VLVideoProcessor(
        min_pixels=DEMO_MIN_PIXELS, max_pixels=DEMO_MAX_PIXELS, patch_size=14, merge_size=2
    )
    return Qwen2VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def _recorded_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """The sizes as the build record holds them: ``head_dim`` only where it differs
    from the default (older records lack it)."""
    return {k: v for k, v in sizes.items() if k != "head_dim" or v != DEMO_HEAD_DIM}


def _initial_model(
    config: Any, seed: int, init: Path | None, sizes: dict[str, int]
) -> tuple[Any, dict[str, Any] | None]:
    """The model before training and the build record of the checkpoint it starts from:
    random weights drawn from ``seed`` or, with ``init``, that demo checkpoint's weights
    (of the same format and ``sizes``; else a ValueError)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    if init is None:
        # A private generator state, so the caller's global RNG is left alone and
        # nothing drawn before changes what is built.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen2VLForConditionalGeneration(config).to(torch.float32).eval()
        return model, None
    init_record = read_demo_record(Path(init))
    if init_record is None or init_record.get("format") != DEMO_FORMAT:
        raise ValueError(
            f"demo model: init {init} is not a demo checkpoint of format {DEMO_FORMAT} "
            "(build it first)"
        )
    if init_record.get("sizes") != sizes:
        raise ValueError(
            f"demo model: init {init} has sizes {init_record.get('sizes')}, not {sizes}"
        )
    model = Qwen2VLForConditionalGeneration.from_pretrained(Path(init), dtype=torch.float32).eval()
    return model, init_record


def _generation_config(config: Any, tokenizer: Any) -> Any:
    """Greedy decoding that stops at ``<|im_end|>`` or ``<|endoftext|>``."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=config.text_config.bos_token_id,
        pad_token_id=config.text_config.pad_token_id,
        eos_token_id=[
            tokenizer.convert_tokens_to_ids("<|im_end|>"),
            tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        ],
        do_sample=False,
    )


def _write_checkpoint(out_dir: Path, model: Any, processor: Any, record: dict[str, Any]) -> None:
    """Save ``model`` and ``processor`` (JSON files with sorted keys) and ``record``,
    completed with the weights' sha256, in a folder beside ``out_dir`` that then
    replaces it."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        for path in sorted(tmp.glob("*.json")):
            _normalize_json(path)
        record["weights_sha256"] = sha256_file(tmp / "model.safetensors")
        (tmp / DEMO_MARKER).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        # mkdtemp and the weights writer create owner-only modes; a checkpoint is shared.
        tmp.chmod(0o755)
        for path in tmp.iterdir():
            path.chmod(0o644)
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _train(
    model: Any,
    processor: Any,
    train_dir: Path,
    spec: TrainSpec,
    seed: int,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    """Train ``model`` on the training split (vlmrobust_demo.train); its record."""
    from vlmrobust.clients.vlm.hf import HFBackend

    from .train import deterministic_torch, load_examples, train_model

    opts = {"min_pixels": DEMO_MIN_PIXELS, "max_pixels": DEMO_MAX_PIXELS, **(options or {})}
    side = processor.tokenizer.padding_side
    with deterministic_torch(spec.threads):
        backend = HFBackend.from_loaded("demo-train", model, processor, options=opts)
        tasks = [t for t, w in spec.weights.items() if w > 0]
        if spec.pretrain_steps and "describe" not in tasks:
            tasks.append("describe")
        examples = load_examples(train_dir, backend, spec.style, seed, tasks=tasks)
        pad = processor.tokenizer.pad_token_id
        record = train_model(model, examples, spec, seed, pad)
    processor.tokenizer.padding_side = side  # as built (the backend sets it to left)
    record["pixels"] = {"min_pixels": opts["min_pixels"], "max_pixels": opts["max_pixels"]}
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

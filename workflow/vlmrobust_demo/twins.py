"""Tiny random-weight twins of the local paper model families, built offline.

A *twin* is a checkpoint directory of a family's real architecture, built from
transformers' own model, config and processor classes, with a tokenizer trained here
(the demo's byte-level BPE on the demo corpus, :mod:`vlmrobust_demo.model`) that carries
the family's special tokens, reasoning tags and chat template. Its weights are random
and tiny (2 text layers of attention heads of 32, so vLLM's CPU kernels accept them; 2
vision layers), so the project's code paths (processor pixel options, chat templates,
the reasoning/answer split, greedy decoding in transformers and vLLM) can be checked
per family without downloading a checkpoint:

- ``qwen2.5-vl``: ``Qwen2_5_VLForConditionalGeneration`` + ``Qwen2_5_VLProcessor``
  (Qwen2-VL image and video processors, patch 14, merge 2; M-RoPE sections; windowed
  vision attention with a full-attention block). Chat template: Qwen2.5-VL-Instruct's
  (a default system message). ``<think>`` is no token of its own (as in Qwen2.5-VL;
  its reasoning fine-tunes write the tags as text).
- ``qwen3-vl``: ``Qwen3VLForConditionalGeneration`` + ``Qwen3VLProcessor`` (patch 16,
  merge 2, interleaved M-RoPE, DeepStack features fed to the first text layers).
  Chat template: Qwen3-VL-Thinking's (no default system message; the generation
  prompt opens ``<think>\\n``); ``<think>``/``</think>`` single, non-special tokens.
- ``glm-4.1v``: ``Glm4vForConditionalGeneration`` + ``Glm4vProcessor`` (patch 14,
  merge 2, temporal 2; half-rotary M-RoPE). Chat template: GLM-4.1V-Thinking's
  (``[gMASK]<sop>``, ``<|user|>``, ``<|begin_of_image|><|image|><|end_of_image|>``);
  ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` single tokens.
- ``intern-s1``: Intern-S1-mini's hub repository is remote code (model_type
  ``interns1``) and transformers has no class of that name, but transformers'
  ``InternVLForConditionalGeneration`` + ``InternVLProcessor`` (GOT-OCR2 image
  processor: 448-px tiles plus a thumbnail, 256 tokens per tile) with a **Qwen3** text
  config is the same architecture (InternViT + MLP projector + Qwen3), and vLLM 0.32
  serves ``InternVLForConditionalGeneration`` with its ``interns1`` implementation.
  Chat template: Intern-S1-mini's thinking switch (``enable_thinking``, default on: a
  default system message asks for ``<think>...</think>``), images as ``<IMG_CONTEXT>``
  (transformers' InternVL placeholder, expanded to ``<img>`` + 256 x tiles
  ``<IMG_CONTEXT>`` + ``</img>``).
- ``llama-3.2-vision``: ``MllamaForConditionalGeneration`` + ``MllamaProcessor``
  (560-px tiles, at most 4, cross-attention layers). Chat template:
  Llama-3.2-Vision-Instruct's (no system block when an image is present). vLLM removed
  Mllama in 0.10.2: this twin loads in transformers only.

The chat templates are the families' own, reduced to what the workflow renders (system,
user and assistant turns, images and text; the tool-calling branches are left out).
The build is deterministic: the same family and seed give the same weights; the
directory loads with ``AutoProcessor.from_pretrained`` +
``AutoModelForImageTextToText.from_pretrained`` and, except Mllama, with vLLM's
``LLM(model=...)``. A build record (:data:`~vlmrobust.clients.vlm.checkpoint.BUILD_RECORD`)
holds the family, the seed and the weights' sha256.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import CHAT_TEMPLATE, _write_checkpoint, train_bpe

#: Bump when the construction changes.
TWIN_FORMAT = 1
#: The families a twin can be built for (the registry's local paper model families).
TWIN_FAMILIES = ("qwen2.5-vl", "qwen3-vl", "glm-4.1v", "intern-s1", "llama-3.2-vision")
#: Text width, attention head size (vLLM's CPU attention takes 32, 64, ...) and layers.
HIDDEN, HEAD_DIM, TEXT_LAYERS = 64, 32, 2
#: BPE merges trained on the demo corpus (special and reasoning tokens come on top).
BPE_VOCAB = 1000

_QWEN_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>",
]  # fmt: skip

# Qwen2.5-VL-7B-Instruct's chat template: the Qwen2-VL one (a default system message).
QWEN25_TEMPLATE = CHAT_TEMPLATE

# Qwen3-VL-8B-Thinking's chat template without its tool branches: no default system
# message; an assistant turn keeps only its answer after </think>; the generation
# prompt opens the think block.
QWEN3_TEMPLATE = """{%- if messages[0].role == 'system' -%}
{{- '<|im_start|>system\n' -}}
{%- if messages[0].content is string %}{{ messages[0].content }}{% else %}{% for c in messages[0].content %}{% if 'text' in c %}{{ c.text }}{% endif %}{% endfor %}{% endif -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- set image_count = namespace(value=0) -%}
{%- set video_count = namespace(value=0) -%}
{%- for message in messages -%}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) -%}
{{- '<|im_start|>' + message.role + '\n' -}}
{%- if message.content is string %}{{ message.content }}{% else %}{% for content in message.content -%}
{%- if content.type == 'image' or 'image' in content or 'image_url' in content -%}
{%- set image_count.value = image_count.value + 1 -%}
{%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}
<|vision_start|><|image_pad|><|vision_end|>
{%- elif content.type == 'video' or 'video' in content -%}
{%- set video_count.value = video_count.value + 1 -%}
{%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}
<|vision_start|><|video_pad|><|vision_end|>
{%- elif 'text' in content %}{{ content.text }}{% endif -%}
{%- endfor %}{% endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{%- set content = message.content if message.content is string else '' -%}
{%- if '</think>' in content %}{% set content = content.split('</think>')[-1].lstrip('\n') %}{% endif -%}
{{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n' }}{% endif -%}
"""

# GLM-4.1V-9B-Thinking's chat template (chat_template.jinja), rendered with
# transformers' trim_blocks / lstrip_blocks.
GLM_TEMPLATE = """[gMASK]<sop>
{%- for msg in messages %}
    {%- if msg.role == 'system' %}
<|system|>
{{ msg.content }}
    {%- elif msg.role == 'user' %}
<|user|>{{ '\n' }}

        {%- if msg.content is string %}
{{ msg.content }}
        {%- else %}
            {%- for item in msg.content %}
                {%- if item.type == 'video' or 'video' in item %}
<|begin_of_video|><|video|><|end_of_video|>
                {%- elif item.type == 'image' or 'image' in item %}
<|begin_of_image|><|image|><|end_of_image|>
                {%- elif item.type == 'text' %}
{{ item.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
    {%- elif msg.role == 'assistant' %}
        {%- if msg.metadata %}
<|assistant|>{{ msg.metadata }}
{{ msg.content }}
        {%- else %}
<|assistant|>
{{ msg.content }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{% if add_generation_prompt %}<|assistant|>
{% endif %}"""

#: Intern-S1-mini's default system message with thinking on (its template's
#: ``default_thinking_sys``).
INTERN_THINKING_SYSTEM = (
    "You are an expert reasoner with extensive experience in all areas. You approach "
    "problems through systematic thinking and rigorous reasoning. Your response should "
    "reflect deep understanding and precise logical thinking, making your solution path "
    "and reasoning clear to others. Please put your thinking process within "
    "<think>...</think> tags."
)

# Intern-S1-mini's template, reduced: thinking on unless enable_thinking is false (then
# no default system message); images as transformers' InternVL placeholder.
INTERN_TEMPLATE = (
    "{% set default_thinking_sys %}" + INTERN_THINKING_SYSTEM + "{% endset %}"
    """{%- if messages[0].role == 'system' -%}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' -}}
{%- elif enable_thinking is not defined or enable_thinking -%}
{{- '<|im_start|>system\n' + default_thinking_sys + '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) -%}
{{- '<|im_start|>' + message.role + '\n' -}}
{%- if message.content is string %}{{ message.content }}{% else %}{% for content in message.content -%}
{%- if content.type == 'image' or 'image' in content %}{{ '<IMG_CONTEXT>\n' }}
{%- elif content.type == 'video' or 'video' in content %}{{ '<video>\n' }}
{%- elif 'text' in content %}{{ content.text }}{% endif -%}
{%- endfor %}{% endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\n' + message.content + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif -%}
"""
)

# Llama-3.2-11B/90B-Vision-Instruct's chat template without its tool branches: no
# system block when an image is present (a system message with an image is refused).
MLLAMA_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{%- set image_ns = namespace(has_images=false) %}
{%- for message in messages %}
    {%- if message['content'] is not string %}
        {%- for content in message['content'] %}
            {%- if content['type'] == 'image' %}{%- set image_ns.has_images = true %}{%- endif %}
        {%- endfor %}
    {%- endif %}
{%- endfor %}
{%- if image_ns.has_images and not system_message == "" %}
    {{- raise_exception("Prompting with images is incompatible with system messages.") }}
{%- endif %}
{%- if not image_ns.has_images %}
    {{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
    {{- "Cutting Knowledge Date: December 2023\n" }}
    {{- "Today Date: " + date_string + "\n\n" }}
    {{- system_message }}
    {{- "<|eot_id|>" }}
{%- endif %}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}
    {%- if message['content'] is string %}
        {{- message['content'] }}
    {%- else %}
        {%- for content in message['content'] %}
            {%- if content['type'] == 'image' %}
                {{- '<|image|>' }}
            {%- elif content['type'] == 'text' %}
                {{- content['text'] }}
            {%- endif %}
        {%- endfor %}
    {%- endif %}
    {{- '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""


@dataclass(frozen=True)
class TwinFamily:
    """What a family's twin is made of: its tokens, template and builders."""

    name: str
    specials: list[str]
    #: reasoning tags: single tokens, not special (they survive skip_special_tokens)
    think: list[str]
    template: str
    eos: list[str]
    pad: str
    #: the image placeholder the template writes (the processor expands it)
    image_marker: str
    #: the token an image's features fill (what the processor repeats)
    image_token: str
    config: Callable[[dict[str, int], int], Any]
    processor: Callable[[Any, str], Any]
    model_class: str
    bos: str | None = None
    tokenizer_extra: dict[str, str] = field(default_factory=dict)
    #: the tokens around an image's features that the processor adds
    image_bounds: tuple[str, ...] = ()
    #: served by vLLM 0.32 (else the architecture vLLM's registry lists as removed)
    vllm: bool = True


def _mrope(half: int) -> list[int]:
    """M-RoPE (temporal, height, width) sections of a rotary half-dimension, in the
    real checkpoints' proportion (16, 24, 24 of 64)."""
    return [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]


def _text(ids: dict[str, int], vocab: int, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": HIDDEN * 2,
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": HIDDEN // HEAD_DIM,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        **extra,
    }


def _qwen25_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import Qwen2_5_VLConfig

    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": _mrope(16)}
    return Qwen2_5_VLConfig(
        text_config=_text(
            ids, vocab, rope_parameters=rope, bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config={
            "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
            "out_hidden_size": HIDDEN, "patch_size": 14, "spatial_merge_size": 2,
            "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1],
        },
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False,
    )  # fmt: skip


def _qwen3_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import Qwen3VLConfig

    rope = {
        "rope_type": "default", "rope_theta": 5000000.0, "mrope_section": _mrope(16),
        "mrope_interleaved": True,
    }  # fmt: skip
    return Qwen3VLConfig(
        text_config=_text(
            ids, vocab, rope_parameters=rope, bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config={
            "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
            "out_hidden_size": HIDDEN, "patch_size": 16, "spatial_merge_size": 2,
            "temporal_patch_size": 2, "num_position_embeddings": 256,
            "deepstack_visual_indexes": [0, 1],
        },
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False,
    )  # fmt: skip


def _glm_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import Glm4vConfig

    # GLM-4.1V rotates half of each head (partial_rotary_factor 0.5): sections of 8.
    rope = {
        "rope_type": "default", "rope_theta": 10000.0, "mrope_section": _mrope(8),
        "partial_rotary_factor": 0.5,
    }  # fmt: skip
    text = _text(ids, vocab, rope_parameters=rope, pad_token_id=ids["<|endoftext|>"])
    text.pop("tie_word_embeddings")
    return Glm4vConfig(
        text_config=text,
        vision_config={
            "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
            "out_hidden_size": HIDDEN, "patch_size": 14, "spatial_merge_size": 2,
            "temporal_patch_size": 2, "image_size": 336,
        },
        image_token_id=ids["<|image|>"], video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"], tie_word_embeddings=False,
    )  # fmt: skip


def _intern_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import InternVLConfig

    text = _text(
        ids, vocab, model_type="qwen3", rope_parameters={"rope_type": "default",
        "rope_theta": 1000000.0}, bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )  # fmt: skip
    return InternVLConfig(
        vision_config={
            "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 64, "image_size": [448, 448], "patch_size": [14, 14],
            "norm_type": "layer_norm", "use_qk_norm": False,
        },
        text_config=text, image_token_id=ids["<IMG_CONTEXT>"], image_seq_length=256,
        downsample_ratio=0.5, projector_hidden_act="gelu", vision_feature_layer=-1,
        vision_feature_select_strategy="default", tie_word_embeddings=False,
    )  # fmt: skip


def _mllama_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import MllamaConfig

    text = _text(
        ids, vocab, cross_attention_layers=[1], bos_token_id=ids["<|begin_of_text|>"],
        eos_token_id=ids["<|eot_id|>"], pad_token_id=ids["<|finetune_right_pad_id|>"],
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
    )  # fmt: skip
    for key in ("head_dim", "max_position_embeddings"):
        text.pop(key)
    text["max_position_embeddings"] = 131072
    return MllamaConfig(
        vision_config={
            "hidden_size": 32, "num_hidden_layers": 2, "num_global_layers": 1,
            "attention_heads": 2, "intermediate_size": 64, "vision_output_dim": 64,
            "intermediate_layers_indices": [0], "image_size": 560, "patch_size": 14,
            "max_num_tiles": 4,
            "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2],
                                        [3, 1], [4, 1]],
        },
        text_config=text, image_token_index=ids["<|image|>"],
    )  # fmt: skip


def _qwen25_processor(tokenizer: Any, template: str) -> Any:
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    # Qwen2.5-VL-7B-Instruct's preprocessor_config.json: 3136 .. 12845056 pixels.
    size = {"shortest_edge": 3136, "longest_edge": 12845056}
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=size, patch_size=14, merge_size=2),
        video_processor=Qwen2VLVideoProcessor(size=size, patch_size=14, merge_size=2),
        tokenizer=tokenizer,
        chat_template=template,
    )


def _qwen3_processor(tokenizer: Any, template: str) -> Any:
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    # Qwen3-VL-8B's preprocessor_config.json: patch 16, 65536 .. 16777216 pixels, mean
    # and std 0.5.
    half = [0.5, 0.5, 0.5]
    image = Qwen2VLImageProcessor(
        size={"shortest_edge": 65536, "longest_edge": 16777216}, patch_size=16,
        merge_size=2, temporal_patch_size=2, image_mean=half, image_std=half,
    )  # fmt: skip
    video = Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2)
    return Qwen3VLProcessor(
        image_processor=image, video_processor=video, tokenizer=tokenizer,
        chat_template=template,
    )  # fmt: skip


def _glm_processor(tokenizer: Any, template: str) -> Any:
    from transformers import Glm4vImageProcessor, Glm4vProcessor, Glm4vVideoProcessor

    return Glm4vProcessor(
        image_processor=Glm4vImageProcessor(),  # transformers' GLM-4.1V defaults
        video_processor=Glm4vVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=template,
    )


def _intern_processor(tokenizer: Any, template: str) -> Any:
    from transformers import GotOcr2ImageProcessor, InternVLProcessor, InternVLVideoProcessor

    image = GotOcr2ImageProcessor(
        size={"height": 448, "width": 448}, crop_to_patches=True, min_patches=1,
        max_patches=12, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225],
    )  # fmt: skip
    return InternVLProcessor(
        image_processor=image, tokenizer=tokenizer, video_processor=InternVLVideoProcessor(),
        image_seq_length=256, chat_template=template,
    )  # fmt: skip


def _mllama_processor(tokenizer: Any, template: str) -> Any:
    from transformers import MllamaImageProcessor, MllamaProcessor

    image = MllamaImageProcessor(size={"height": 560, "width": 560}, max_image_tiles=4)
    return MllamaProcessor(image_processor=image, tokenizer=tokenizer, chat_template=template)


_THINK = ["<think>", "</think>"]

FAMILIES: dict[str, TwinFamily] = {
    "qwen2.5-vl": TwinFamily(
        "qwen2.5-vl",
        _QWEN_SPECIALS,
        [],
        QWEN25_TEMPLATE,
        ["<|im_end|>", "<|endoftext|>"],
        "<|endoftext|>",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|image_pad|>",
        _qwen25_config,
        _qwen25_processor,
        "Qwen2_5_VLForConditionalGeneration",
    ),
    "qwen3-vl": TwinFamily(
        "qwen3-vl",
        _QWEN_SPECIALS,
        _THINK,
        QWEN3_TEMPLATE,
        ["<|im_end|>", "<|endoftext|>"],
        "<|endoftext|>",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|image_pad|>",
        _qwen3_config,
        _qwen3_processor,
        "Qwen3VLForConditionalGeneration",
    ),
    "glm-4.1v": TwinFamily(
        "glm-4.1v",
        [
            "<|endoftext|>",
            "[MASK]",
            "[gMASK]",
            "[sMASK]",
            "<sop>",
            "<eop>",
            "<|system|>",
            "<|user|>",
            "<|assistant|>",
            "<|observation|>",
            "<|begin_of_image|>",
            "<|end_of_image|>",
            "<|begin_of_video|>",
            "<|end_of_video|>",
            "<|image|>",
            "<|video|>",
        ],
        [*_THINK, "<answer>", "</answer>"],
        GLM_TEMPLATE,
        ["<|endoftext|>", "<|user|>", "<|observation|>"],
        "<|endoftext|>",
        "<|begin_of_image|><|image|><|end_of_image|>",
        "<|image|>",
        _glm_config,
        _glm_processor,
        "Glm4vForConditionalGeneration",
        tokenizer_extra={"image_token": "<|image|>", "video_token": "<|video|>"},
    ),  # fmt: skip
    "intern-s1": TwinFamily(
        "intern-s1",
        [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<img>",
            "</img>",
            "<IMG_CONTEXT>",
            "<video>",
        ],
        _THINK,
        INTERN_TEMPLATE,
        ["<|im_end|>", "<|endoftext|>"],
        "<|endoftext|>",
        "<IMG_CONTEXT>\n",
        "<IMG_CONTEXT>",
        _intern_config,
        _intern_processor,
        "InternVLForConditionalGeneration",
        tokenizer_extra={
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
        image_bounds=("<img>", "</img>"),
    ),  # fmt: skip
    "llama-3.2-vision": TwinFamily(
        "llama-3.2-vision",
        [
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
            "<|eom_id|>",
            "<|python_tag|>",
            "<|image|>",
            "<|finetune_right_pad_id|>",
        ],
        [],
        MLLAMA_TEMPLATE,
        ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"],
        "<|finetune_right_pad_id|>",
        "<|image|>",
        "<|image|>",
        _mllama_config,
        _mllama_processor,
        "MllamaForConditionalGeneration",
        bos="<|begin_of_text|>",
        vllm=False,
    ),  # fmt: skip
}


def family_of(name: str) -> TwinFamily:
    """The family ``name``; a ValueError naming it and the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(
            f"twin: unknown family {name!r}; known families: {', '.join(TWIN_FAMILIES)}"
        ) from None


def build_tokenizer(family: TwinFamily) -> Any:
    """The twin's tokenizer: Qwen2's byte-level BPE class (every family here is
    byte-level BPE; GLM-4.1V's and Llama 3's differ in their pre-tokenizer regex only),
    trained on the demo corpus, with the family's special tokens, reasoning tags (single
    tokens, not special) and chat template."""
    from tokenizers import AddedToken
    from transformers import Qwen2TokenizerFast

    vocab, merges = train_bpe(family.specials, BPE_VOCAB + len(family.specials))
    specials = [t for t in family.specials if t not in (family.pad, family.eos[0], family.bos)]
    tok = Qwen2TokenizerFast(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=family.bos,
        eos_token=family.eos[0],
        pad_token=family.pad,
        extra_special_tokens=dict(family.tokenizer_extra),
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        chat_template=family.template,
    )
    # the special tokens keep the ids the trainer gave them (they are in the vocabulary)
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in family.think])
    return tok


def _generation_config(family: TwinFamily, tokenizer: Any) -> Any:
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=tokenizer.convert_tokens_to_ids(family.bos or family.pad),
        pad_token_id=tokenizer.convert_tokens_to_ids(family.pad),
        eos_token_id=[tokenizer.convert_tokens_to_ids(t) for t in family.eos],
        do_sample=False,
    )


def build_twin(family: str, out: Path, seed: int) -> Path:
    """Write the twin of ``family`` (one of :data:`TWIN_FAMILIES`) with weights drawn
    from ``seed`` to the directory ``out`` (built beside it, then moved into place);
    return ``out``. A text LLM family (:data:`TEXT_TWIN_FAMILIES`) is built by
    :func:`build_text_twin`."""
    import torch
    import transformers

    if family in TEXT_TWIN_FAMILIES:
        build_text_twin(family, Path(out), seed)
        return Path(out)
    spec = family_of(family)
    out = Path(out)
    tokenizer = build_tokenizer(spec)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in spec.specials}
    config = spec.config(ids, len(tokenizer))
    processor = spec.processor(tokenizer, spec.template)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = getattr(transformers, spec.model_class)(config).to(torch.float32).eval()
    model.generation_config = _generation_config(spec, tokenizer)
    record = {
        "format": TWIN_FORMAT,
        "kind": "twin",
        "family": family,
        "architecture": spec.model_class,
        "seed": int(seed),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "transformers": transformers.__version__,
    }
    _write_checkpoint(out, model, processor, record)  # the demo's atomic, shared writer
    return out


# --- Text-only twins: the local LLMs the run's steps call (judges, extractors) ----------

#: The text LLM families a twin can be built for (registry ``demo_twin`` of a ``kind:
#: llm`` entry); :func:`build_twin` hands them to :func:`build_text_twin`.
TEXT_TWIN_FAMILIES = ("qwen3", "gpt-oss")
#: Width and attention heads / KV heads (of :data:`HEAD_DIM`) of a text twin.
TEXT_HIDDEN, TEXT_HEADS, TEXT_KV_HEADS = 128, 4, 2
#: gpt-oss's vocabulary size (o200k_harmony): vLLM's server renders every gpt-oss chat
#: request with Harmony into these ids, so the twin's embedding covers them all.
GPT_OSS_VOCAB = 201088
#: gpt-oss's special tokens at their o200k_harmony ids (the ids Harmony renders).
GPT_OSS_SPECIALS = {
    "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002,
    "<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
    "<|message|>": 200008, "<|call|>": 200012,
}  # fmt: skip

# Qwen3's hybrid-thinking chat template (Qwen3-8B's) without its tool branches: no
# default system message; an earlier assistant turn keeps only its answer after
# </think>; ``enable_thinking=false`` prefills an empty think block.
QWEN3_TEXT_TEMPLATE = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == 'user') or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == 'assistant' %}
        {%- if '</think>' in content %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""

# gpt-oss's chat template reduced to what Harmony renders for a chat request without
# tools (vLLM's server renders gpt-oss with Harmony, not with this template; the hf
# engine uses it): the system header with the date, a system message as the
# developer's instructions, earlier answers on the final channel.
GPT_OSS_TEMPLATE = """{%- set effort = reasoning_effort if reasoning_effort is defined and reasoning_effort else 'medium' -%}
<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: {{ strftime_now('%Y-%m-%d') }}

Reasoning: {{ effort }}

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>
{%- set rest = messages -%}
{%- if messages and messages[0].role in ('system', 'developer') -%}
<|start|>developer<|message|># Instructions

{{ messages[0].content }}<|end|>
{%- set rest = messages[1:] -%}
{%- endif -%}
{%- for message in rest -%}
{%- if message.role == 'assistant' -%}
<|start|>assistant<|channel|>final<|message|>{{ message.content }}<|end|>
{%- else -%}
<|start|>{{ message.role }}<|message|>{{ message.content }}<|end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}"""


@dataclass(frozen=True)
class TextTwinFamily:
    """What a text twin is made of: its tokens, template, config and model class."""

    name: str
    specials: list[str]
    #: reasoning tags: single tokens, not special (they survive skip_special_tokens)
    think: list[str]
    template: str
    eos: list[str]
    pad: str
    config: Callable[[dict[str, int], int], Any]
    model_class: str
    bos: str | None = None
    #: special tokens at fixed ids (the rest of the vocabulary fills 0, 1, ...)
    fixed_ids: dict[str, int] = field(default_factory=dict)
    tokenizer_extra: dict[str, str] = field(default_factory=dict)


def _qwen3_text_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab, hidden_size=TEXT_HIDDEN, intermediate_size=TEXT_HIDDEN * 2,
        num_hidden_layers=TEXT_LAYERS, num_attention_heads=TEXT_HEADS,
        num_key_value_heads=TEXT_KV_HEADS, head_dim=HEAD_DIM, max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False, bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )  # fmt: skip


def _gpt_oss_config(ids: dict[str, int], vocab: int) -> Any:
    from transformers import GptOssConfig

    # gpt-oss-120b's YaRN (factor 32 over 4096 positions) and alternating sliding (128)
    # and full attention; 4 experts, 2 per token, instead of 128 and 4.
    rope = {
        "rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
        "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096,
    }  # fmt: skip
    return GptOssConfig(
        vocab_size=max(vocab, GPT_OSS_VOCAB), hidden_size=TEXT_HIDDEN,
        intermediate_size=TEXT_HIDDEN, num_hidden_layers=TEXT_LAYERS,
        num_attention_heads=TEXT_HEADS, num_key_value_heads=TEXT_KV_HEADS, head_dim=HEAD_DIM,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=128,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=131072,
        rope_parameters=rope, tie_word_embeddings=False, pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|startoftext|>"], eos_token_id=ids["<|return|>"],
    )  # fmt: skip


TEXT_FAMILIES: dict[str, TextTwinFamily] = {
    "qwen3": TextTwinFamily(
        "qwen3", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], _THINK,
        QWEN3_TEXT_TEMPLATE, ["<|im_end|>", "<|endoftext|>"], "<|endoftext|>",
        _qwen3_text_config, "Qwen3ForCausalLM",
    ),
    "gpt-oss": TextTwinFamily(
        "gpt-oss", list(GPT_OSS_SPECIALS), [], GPT_OSS_TEMPLATE,
        ["<|return|>", "<|endoftext|>", "<|call|>"], "<|endoftext|>", _gpt_oss_config,
        "GptOssForCausalLM", bos="<|startoftext|>", fixed_ids=dict(GPT_OSS_SPECIALS),
    ),
}  # fmt: skip


def build_text_tokenizer(family: TextTwinFamily) -> Any:
    """The text twin's tokenizer: as :func:`build_tokenizer` (the demo's byte-level BPE
    with the family's special tokens, reasoning tags and chat template). gpt-oss's special
    tokens keep their o200k_harmony ids (:data:`GPT_OSS_SPECIALS`), above the trained
    tokens (ids 0, 1, ...); the ids in between decode to nothing."""
    from tokenizers import AddedToken
    from transformers import Qwen2TokenizerFast

    if not family.fixed_ids:
        return build_tokenizer(family)  # type: ignore[arg-type] - the fields it reads
    trained, merges = train_bpe(family.specials, BPE_VOCAB + len(family.specials))
    plain = sorted((t for t in trained if t not in family.fixed_ids), key=trained.__getitem__)
    vocab = {t: i for i, t in enumerate(plain)} | dict(family.fixed_ids)
    tok = Qwen2TokenizerFast(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=family.bos,
        eos_token=family.eos[0],
        pad_token=family.pad,
        model_max_length=131072,
        clean_up_tokenization_spaces=False,
        chat_template=family.template,
    )
    named = (family.pad, family.eos[0], family.bos)
    tok.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in family.specials if t not in named]
    )
    return tok


def build_text_twin(family: str, out: Path, seed: int) -> None:
    """Write the text-only twin of ``family`` (one of :data:`TEXT_TWIN_FAMILIES`):
    transformers' own ``Qwen3ForCausalLM`` / ``GptOssForCausalLM`` with random weights
    drawn from ``seed`` (hidden 128, 2 layers, 4 heads / 2 KV heads of 32), a tokenizer
    trained here with the family's special tokens and chat template, and a build record;
    deterministic, as :func:`build_twin`.

    vLLM 0.32's CPU build loads, generates and serves both (float32, eager; checked by
    tests/test_llm_engines.py). Its OpenAI server renders a gpt-oss chat request with
    Harmony (o200k_harmony token ids, not the tokenizer's chat template) and parses the
    answer with Harmony's parser, so the gpt-oss twin's special tokens sit at their
    o200k_harmony ids and its embeddings have gpt-oss's 201,088 rows (about 200 MB of
    float32 weights). The ids between the trained vocabulary and the special tokens
    decode to nothing; their output rows are zero, so a greedy twin writes decodable
    text. A random twin writes no Harmony channels: the server's parser returns what
    it recovers (often nothing).
    """
    import torch
    import transformers

    try:
        spec = TEXT_FAMILIES[family]
    except KeyError:
        raise ValueError(
            f"text twin: unknown family {family!r}; known: {', '.join(TEXT_TWIN_FAMILIES)}"
        ) from None
    out = Path(out)
    tokenizer = build_text_tokenizer(spec)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in spec.specials}
    size = max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)
    config = spec.config(ids, size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = getattr(transformers, spec.model_class)(config).to(torch.float32).eval()
    if spec.fixed_ids:  # ids no token has score 0: a greedy twin writes decodable text
        unused = torch.ones(config.vocab_size, dtype=torch.bool)
        unused[sorted(tokenizer.get_vocab().values())] = False
        with torch.no_grad():
            model.get_output_embeddings().weight[unused] = 0.0
    model.generation_config = _generation_config(spec, tokenizer)  # type: ignore[arg-type]
    record = {
        "format": TWIN_FORMAT,
        "kind": "text-twin",
        "family": family,
        "architecture": spec.model_class,
        "seed": int(seed),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "transformers": transformers.__version__,
    }
    _write_checkpoint(out, model, tokenizer, record)  # the demo's atomic, shared writer

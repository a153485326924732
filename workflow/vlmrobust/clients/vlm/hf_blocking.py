"""Attention blocking on the ``hf`` backend (the Idis study; :mod:`.blocking`): a
request's chat prompt with a prefill appended as the start of the assistant turn, and
its greedy continuation while chosen answer positions do not attend to chosen prefill
tokens.

Functions of a loaded :class:`~.hf.HFBackend` (its processor, tokenizer and model).
"""

from __future__ import annotations

from typing import Any

from .base import Request, media_marks
from .hf_generation import generation_settings


def prefilled_inputs(
    backend: Any, req: Request, prefill: str, char_spans: Any = ()
) -> tuple[Any, list[int]]:
    """``(inputs, positions)``: ``backend``'s processor inputs of ``req``'s chat prompt
    with ``prefill`` appended as the start of the assistant turn, and the positions of
    the prefill tokens whose offsets overlap ``char_spans`` (spans of ``prefill``).

    The prompt goes through the processor (images expanded); the prefill is
    tokenized on its own (no special tokens added) and appended, so its character
    offsets map to tokens exactly. The prompt ends with the assistant header's
    newline, so this is normally also how the joint text would tokenize."""
    import torch

    from .blocking import token_positions

    _req, prompt, images, _seed = backend._prepare(req)
    for mark in media_marks(backend.processor):
        if mark in prefill:
            raise ValueError(f"request {req.key!r}: the prefill holds the media mark {mark!r}")
    inputs = backend.processor(
        text=[prompt],
        images=images or None,
        return_tensors="pt",
        **backend.request_images_kwargs(req),
    )
    enc = backend.tokenizer(prefill, add_special_tokens=False, return_offsets_mapping=True)
    ids = torch.tensor([enc["input_ids"]], dtype=inputs["input_ids"].dtype)
    n_prompt = int(inputs["input_ids"].shape[1])
    for name, value in list(inputs.items()):
        if not (torch.is_tensor(value) and tuple(value.shape[:2]) == (1, n_prompt)):
            continue
        if name == "input_ids":
            extra = ids
        elif name == "attention_mask":
            extra = torch.ones_like(ids)
        elif name in ("token_type_ids", "mm_token_type_ids"):
            extra = torch.zeros_like(ids)  # text tokens
        else:
            raise ValueError(
                f"models.{backend.model_id}: the processor returns a per-token input "
                f"{name!r} that a prefill cannot be appended to"
            )
        inputs[name] = torch.cat([value, extra.to(value.dtype)], dim=1)
    positions = token_positions(enc["offset_mapping"], char_spans, shift=n_prompt)
    return inputs.to(backend.device), positions


def answer_with_blocked(
    backend: Any,
    req: Request,
    prefill: str,
    blocked_char_spans: Any = (),
    max_new_tokens: int | None = None,
) -> tuple[str, int]:
    """``(text, blocked_tokens)``: ``backend``'s greedy continuation of ``req``'s chat
    prompt + ``prefill`` (e.g. the model's own trace up to its closing marker) while
    the answer positions (the last prefill token, which predicts the first answer
    token, and every generated one) do not attend to the prefill tokens overlapping
    ``blocked_char_spans`` (:func:`~.blocking.blocked_attention`). ``text`` is decoded
    as :meth:`~.hf.HFBackend.decode_completion` does; ``max_new_tokens`` defaults to
    the request's. With no spans this is ordinary greedy generation of that prompt."""
    import torch

    from .blocking import blocked_attention

    inputs, positions = prefilled_inputs(backend, req, prefill, blocked_char_spans)
    length = int(inputs["input_ids"].shape[1])
    # greedy, under the request's generation_config (the checkpoint's logits
    # processors apply under ``checkpoint``)
    settings = generation_settings(
        backend, req.generation_config, int(max_new_tokens or req.max_new_tokens)
    )
    with torch.inference_mode(), blocked_attention(backend.model, positions, length - 1):
        out = backend.model.generate(**inputs, generation_config=settings)
    text, _n, _finish = backend.decode_completion(out[0, length:].tolist())
    return text, len(positions)

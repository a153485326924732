"""Attention blocking: stop chosen answer positions from attending to chosen tokens.

The Idis paper (Fig. 7a) asks whether a reasoning model's answer *uses* the attributes
its trace mentions: the answer is generated again after the model's own trace, with the
attention from the answer positions to the tokens of some attribute phrases cut, and
the accuracy compared with none / the distractor's / the target's phrases cut.

How the cut is made (transformers' attention interface):

- :func:`blocked_attention` is a context manager. Inside it the text decoder of the
  model (its ``text_config``, or its ``config`` when it has no sub-configurations)
  dispatches every attention layer to a wrapper registered with
  ``transformers.AttentionInterface`` (and the same mask builder as the kernel it
  wraps, registered with ``AttentionMaskInterface``). The vision encoder keeps its own
  kernel. On leaving, the previous implementation is restored (also after an error).
- The wrapper wraps the model's SDPA kernel, or its eager kernel when the model was
  loaded with ``attn_implementation="eager"`` (only eager returns attention weights).
  Any other implementation (flash attention, ...) is replaced by SDPA for the duration,
  since those kernels take no arbitrary mask.
- In a layer call, a query at absolute position ``q >= first_query`` may not attend to
  a key at a blocked position: the mask there is set to the dtype's minimum (a float
  mask) or to False (a boolean mask); the causal mask is made explicit when the layer
  got none. The softmax then gives those keys exactly zero weight and renormalises the
  rest. Nothing else of the mask changes, and a call in which no (query, key) pair is
  blocked is passed to the kernel untouched, so with no blocked positions the output
  is that of the plain kernel.
- Absolute query positions are ``kv_length - q_length + i``: the keys of a call are the
  whole sequence so far (a growing cache, as in greedy generation without a sliding
  window). One sequence at a time: the positions apply to every row of a batch.

:func:`phrase_spans` finds every case-insensitive occurrence of the phrases in a
region of a text, and :func:`token_positions` maps character spans to the tokens whose
offsets overlap them.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BlockState",
    "active_state",
    "blocked_attention",
    "phrase_spans",
    "token_positions",
]

#: names under which the wrappers are registered (SDPA-based and eager-based)
SDPA_NAME = "vlmrobust_blocked_sdpa"
EAGER_NAME = "vlmrobust_blocked_eager"


@dataclass
class BlockState:
    """What is blocked: key positions, and the first query position that may not see them.

    ``calls`` counts the layer calls in which something was blocked (a check that the
    wrapper ran).
    """

    keys: tuple[int, ...]
    first_query: int
    calls: int = 0


_STATE: BlockState | None = None
_REGISTERED = False


def active_state() -> BlockState | None:
    """The blocking in force (inside :func:`blocked_attention`), or None."""
    return _STATE


# -- character spans -> tokens ---------------------------------------------------------


def phrase_spans(
    text: str, phrases: Iterable[str], start: int = 0, end: int | None = None
) -> list[tuple[int, int]]:
    """Character spans ``(begin, end)`` (end exclusive) of every case-insensitive
    occurrence of each phrase inside ``text[start:end]``, in text order; a span found
    for two phrases is listed once. Empty phrases are ignored."""
    end = len(text) if end is None else end
    region = text[start:end]
    spans: set[tuple[int, int]] = set()
    for phrase in phrases:
        phrase = phrase.strip()
        if not phrase:
            continue
        for m in re.finditer(re.escape(phrase), region, flags=re.IGNORECASE):
            spans.add((start + m.start(), start + m.end()))
    return sorted(spans)


def token_positions(
    offsets: Sequence[Sequence[int]], spans: Iterable[Sequence[int]], shift: int = 0
) -> list[int]:
    """Indices (plus ``shift``) of the tokens whose character offsets overlap a span.

    ``offsets`` are a fast tokenizer's ``offset_mapping`` (``(begin, end)`` per token,
    end exclusive); a token overlaps ``(b, e)`` when ``begin < e`` and ``end > b``, so a
    token that carries a leading space or only part of a phrase counts. Zero-width
    tokens never overlap.
    """
    spans = [(int(b), int(e)) for b, e in spans]
    out = []
    for i, (tb, te) in enumerate(offsets):
        if te > tb and any(tb < e and te > b for b, e in spans):
            out.append(i + shift)
    return out


# -- the kernel wrapper -----------------------------------------------------------------


def _blocked_pairs(query: Any, key: Any, mask_kv: int, state: BlockState) -> Any:
    """A bool ``[q, mask_kv]`` tensor, True where a (query, key) pair is blocked."""
    import torch

    q_len, kv_len = query.shape[2], key.shape[2]
    device = query.device
    q_pos = torch.arange(kv_len - q_len, kv_len, device=device)
    keys = torch.tensor(
        [k for k in state.keys if 0 <= k < mask_kv], device=device, dtype=torch.long
    )
    key_hit = torch.zeros(mask_kv, dtype=torch.bool, device=device)
    if keys.numel():
        key_hit[keys] = True
    return (q_pos >= state.first_query)[:, None] & key_hit[None, :]


def _wrapped(inner: Any, eager: bool) -> Any:
    def attention(
        module: Any,
        query: Any,
        key: Any,
        value: Any,
        attention_mask: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        import torch

        state = _STATE
        if state is None or not getattr(module, "is_causal", False) or not state.keys:
            return inner(module, query, key, value, attention_mask, *args, **kwargs)
        mask_kv = attention_mask.shape[-1] if attention_mask is not None else key.shape[2]
        block = _blocked_pairs(query, key, mask_kv, state)
        if not bool(block.any()):
            return inner(module, query, key, value, attention_mask, *args, **kwargs)
        state.calls += 1
        block = block[None, None]
        if attention_mask is None:
            q_len, kv_len = query.shape[2], key.shape[2]
            q_pos = torch.arange(kv_len - q_len, kv_len, device=query.device)
            allowed = torch.arange(kv_len, device=query.device)[None, :] <= q_pos[:, None]
            attention_mask = allowed[None, None]
            kwargs["is_causal"] = False
        if attention_mask.dtype == torch.bool and not eager:
            mask = attention_mask & ~block
        else:
            if attention_mask.dtype == torch.bool:
                attention_mask = torch.where(
                    attention_mask,
                    torch.zeros((), dtype=query.dtype, device=query.device),
                    torch.finfo(query.dtype).min,
                )
            mask = attention_mask.masked_fill(block, torch.finfo(attention_mask.dtype).min)
        return inner(module, query, key, value, mask, *args, **kwargs)

    return attention


def _eager_kernel(module: Any, *args: Any, **kwargs: Any) -> Any:
    """The eager attention of the module's own modeling file."""
    fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if fn is None:
        raise RuntimeError(
            f"attention blocking: {type(module).__module__} has no eager_attention_forward; "
            "load the model with attn_implementation='sdpa'"
        )
    return fn(module, *args, **kwargs)


def _register() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

    AttentionInterface.register(SDPA_NAME, _wrapped(sdpa_attention_forward, eager=False))
    AttentionInterface.register(EAGER_NAME, _wrapped(_eager_kernel, eager=True))
    AttentionMaskInterface.register(SDPA_NAME, sdpa_mask)
    AttentionMaskInterface.register(EAGER_NAME, eager_mask)
    _REGISTERED = True


def _decoder_config(model: Any) -> Any:
    config = model.config
    text = getattr(config, "text_config", None)
    return text if text is not None else config


@contextlib.contextmanager
def blocked_attention(model: Any, keys: Iterable[int], first_query: int) -> Iterator[BlockState]:
    """Inside: queries at positions ``>= first_query`` of the model's text decoder do not
    attend to the key positions ``keys`` (module docstring). Not re-entrant."""
    global _STATE
    if _STATE is not None:
        raise RuntimeError("attention blocking is already active (not re-entrant)")
    _register()
    config = _decoder_config(model)
    previous = config._attn_implementation
    name = EAGER_NAME if previous == "eager" else SDPA_NAME
    state = BlockState(tuple(sorted({int(k) for k in keys})), int(first_query))
    config._attn_implementation = name
    _STATE = state
    try:
        yield state
    finally:
        _STATE = None
        config._attn_implementation = previous

"""The ``hf`` backend's decoding settings: the ``GenerationConfig`` a batch is generated
with under ``generation_config: explicit`` or ``checkpoint`` (:mod:`.hf`'s module
docstring), the top-k a sampled row takes, and the record of what one row was decoded
with (``Result.extra["generation"]``).

Functions of a loaded :class:`~.hf.HFBackend` (its model's ``generation_config``, its
registry ``options.generation``, end-of-sequence and pad tokens).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from ...core.registry import GENERATION_CONFIGS
from .base import Request

#: the hf backend's logger (its messages name the backend's module, :mod:`.hf`)
log = logging.getLogger(f"{__package__}.hf")

#: GenerationConfig fields that the Request decides, so ``options.generation`` may not.
REQUEST_DECIDES = {"do_sample", "temperature", "top_p", "max_new_tokens", "num_beams", "top_k"}
#: Neutral values for every GenerationConfig field that changes the next-token choice.
#: transformers fills fields left unset from the checkpoint's generation_config.json
#: (Qwen2-VL's: repetition_penalty 1.05, top_k 1, top_p 0.001, temperature 0.01), so
#: "explicit decoding" means setting them; ``options.generation`` may still override.
NEUTRAL_DECODING: dict[str, Any] = {
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "typical_p": 1.0,
    "min_p": None,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "length_penalty": 1.0,
    "min_new_tokens": 0,
    "num_return_sequences": 1,
}
#: Sampling warpers :class:`~.hf.RowSampler` does not apply (their neutral values): a
#: checkpoint that sets one is warned about under ``generation_config: checkpoint``.
UNAPPLIED_WARPERS: dict[str, Any] = {
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
}
#: Logits-processor fields (applied greedy or sampled) recorded in a row's
#: ``generation`` when not neutral (their neutral values), beside repetition_penalty.
PROCESSOR_FIELDS: dict[str, Any] = {
    "no_repeat_ngram_size": 0,
    "encoder_repetition_penalty": 1.0,
    "encoder_no_repeat_ngram_size": 0,
    "min_new_tokens": 0,
    "min_length": 0,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "sequence_bias": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "exponential_decay_length_penalty": None,
    "renormalize_logits": False,
}
#: transformers' top_k where a generation config sets none (its global default)
DEFAULT_TOP_K = 50


def checkpoint_generation(backend: Any) -> Any:
    """The checkpoint's own ``GenerationConfig`` of ``backend``'s model (its
    ``generation_config.json``; an empty one for a model without)."""
    from transformers import GenerationConfig

    cfg = getattr(backend.model, "generation_config", None)
    return cfg if cfg is not None else GenerationConfig()


def checkpoint_top_k(backend: Any) -> int | None:
    """The top-k a sampled row takes under ``generation_config: checkpoint``: the
    checkpoint's, else transformers' default (50); None for 0 (no top-k)."""
    top_k = getattr(checkpoint_generation(backend), "top_k", None)
    top_k = DEFAULT_TOP_K if top_k is None else int(top_k)
    return top_k or None


def generation_settings(backend: Any, mode: str, max_new_tokens: int) -> Any:
    """The ``GenerationConfig`` passed to ``model.generate`` for one batch of
    ``backend`` under ``mode`` (:mod:`.hf`'s module docstring, ``generation_config``).
    Always greedy with one beam (:class:`~.hf.RowSampler` samples), the registry's
    ``options.generation`` on top, and the backend's end-of-sequence and pad tokens."""
    from transformers import GenerationConfig

    fixed: dict[str, Any] = {
        "max_new_tokens": int(max_new_tokens),
        "do_sample": False,
        "num_beams": 1,
        "eos_token_id": backend._eos_ids,
        "pad_token_id": backend._pad_id,
    }
    if mode == "explicit":
        return GenerationConfig(**{**NEUTRAL_DECODING, **backend._generation_extra, **fixed})
    if mode != "checkpoint":
        raise ValueError(
            f"models.{backend.model_id}: generation_config must be one of "
            f"{', '.join(GENERATION_CONFIGS)}, got {mode!r}"
        )
    cfg = copy.deepcopy(checkpoint_generation(backend))
    # the sampling warpers are RowSampler's (with do_sample=False transformers
    # applies none of them): neutral here, so it warns of none
    warpers = {"temperature": 1.0, "top_p": 1.0, "top_k": DEFAULT_TOP_K}
    warpers.update({k: v for k, v in UNAPPLIED_WARPERS.items() if hasattr(cfg, k)})
    cfg.update(**{**warpers, "num_return_sequences": 1, **backend._generation_extra, **fixed})
    return cfg


def warn_unapplied(backend: Any) -> None:
    """Once per backend: the checkpoint sets a sampling warper RowSampler does not
    apply."""
    if getattr(backend, "_warned_warpers", False):
        return
    backend._warned_warpers = True
    cfg = checkpoint_generation(backend)
    unapplied = {
        k: getattr(cfg, k)
        for k, neutral in UNAPPLIED_WARPERS.items()
        if getattr(cfg, k, None) is not None and getattr(cfg, k) != neutral
    }
    if unapplied:
        log.warning(
            "models.%s: the checkpoint's generation_config sets %s, which sampled rows "
            "do not apply (RowSampler applies temperature, top_k and top_p only)",
            backend.model_id,
            unapplied,
        )


def decoding_record(cfg: Any, mode: str, req: Request, top_k: int | None) -> dict[str, Any]:
    """What one row was decoded with (``Result.extra["generation"]``): ``config``,
    ``temperature`` (0 = greedy), ``top_p`` and ``top_k`` (None where not applied),
    ``repetition_penalty``, and any other logits-processor field of ``cfg`` that is
    not neutral."""
    greedy = req.greedy
    record: dict[str, Any] = {
        "config": mode,
        "temperature": 0.0 if greedy else float(req.temperature),
        "top_p": None if greedy or float(req.top_p) >= 1.0 else float(req.top_p),
        "top_k": None if greedy else top_k,
        "repetition_penalty": float(getattr(cfg, "repetition_penalty", None) or 1.0),
    }
    for name, neutral in PROCESSOR_FIELDS.items():
        value = getattr(cfg, name, None)
        if value is not None and value != neutral:
            record[name] = _jsonable(value)
    return record


def _jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it (lists, numbers, text; anything else as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)

"""How the ``hf`` backend is set up: its registry ``options`` read and checked (the
options are described in :mod:`.hf`'s module docstring), the checkpoint's processor and
model loaded, and what every call needs taken from them (image-size bounds,
end-of-sequence, pad and stripped tokens).

Functions of an :class:`~.hf.HFBackend` being built (they set its attributes), and the
dtype and ``accelerate`` helpers the text LLM's transformers engine shares.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .checkpoint import hub_commit
from .hf_generation import REQUEST_DECIDES

#: the hf backend's logger (its messages name the backend's module, :mod:`.hf`)
log = logging.getLogger(f"{__package__}.hf")

_DTYPES = {"bfloat16", "bf16", "float16", "fp16", "half", "float32", "fp32", "float", "auto"}


def load(backend: Any) -> None:
    """Read ``backend``'s options, load the processor and model of its registry entry
    (``local_path`` or ``hf_repo`` at ``revision``) and set the backend up around
    them."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    read_options(backend)
    model_id, spec, opts = backend.model_id, backend.spec, backend.options
    source = spec.get("local_path") or spec.get("hf_repo")
    if not source:
        raise ValueError(
            f"models.{model_id}: the hf backend needs `local_path` (a checkpoint "
            "directory) or `hf_repo` (a Hugging Face repository)"
        )
    backend.source = str(source)
    backend.is_local = bool(spec.get("local_path"))
    if backend.is_local and not Path(backend.source).is_dir():
        raise FileNotFoundError(
            f"models.{model_id}.local_path: {backend.source} is not a directory (build the "
            "demo model or download the checkpoint there first)"
        )
    load_revision = spec.get("revision")
    offline = bool(opts.get("local_files_only", False))
    if not backend.is_local:
        backend._commit = hub_commit(backend.source, load_revision, offline)
        load_revision = backend._commit or load_revision

    use_cuda = torch.cuda.is_available()
    trust = bool(opts.get("trust_remote_code", False))
    dtype_opt = opts.get("dtype")
    if dtype_opt is not None and str(dtype_opt) not in _DTYPES:
        raise ValueError(
            f"models.{model_id}.options.dtype: {dtype_opt!r} is not one of {sorted(_DTYPES)}"
        )
    dtype = _torch_dtype(dtype_opt, use_cuda)

    processor = AutoProcessor.from_pretrained(
        backend.source,
        revision=load_revision,
        trust_remote_code=trust,
        local_files_only=offline,
    )
    load_kwargs: dict[str, Any] = {
        "revision": load_revision,
        "trust_remote_code": trust,
        "local_files_only": offline,
        "dtype": dtype,
    }
    if opts.get("attn_implementation"):
        load_kwargs["attn_implementation"] = opts["attn_implementation"]
    device_map = opts.get("device_map", "auto" if use_cuda else None)
    move_to_cuda = False
    if device_map is not None and not _has_accelerate():
        if use_cuda:
            log.warning(
                "%s: the `accelerate` package is missing, so device_map=%r cannot be "
                "used; loading the model and moving it to cuda",
                model_id,
                device_map,
            )
            move_to_cuda = True
        device_map = None
    if device_map is not None:
        load_kwargs["device_map"] = device_map
    model = AutoModelForImageTextToText.from_pretrained(backend.source, **load_kwargs)
    if move_to_cuda:
        model.to("cuda")
    setup(backend, processor, model)


def read_options(backend: Any) -> None:
    """Check ``backend``'s registry options that do not concern loading and keep them
    (``batch_size``, ``generation``, ``chat_template_kwargs``)."""
    opts = backend.options
    backend.default_batch_size = int(opts.get("batch_size", 8))
    if backend.default_batch_size < 1:
        raise ValueError(
            f"models.{backend.model_id}.options.batch_size: must be >= 1, "
            f"got {backend.default_batch_size}"
        )
    extra = opts.get("generation") or {}
    if not isinstance(extra, dict) or REQUEST_DECIDES & set(extra):
        raise ValueError(
            f"models.{backend.model_id}.options.generation: must be a mapping of "
            f"GenerationConfig fields other than {sorted(REQUEST_DECIDES)} (the request "
            f"decides those), got {extra!r}"
        )
    backend._generation_extra = dict(extra)
    backend._template_kwargs = dict(opts.get("chat_template_kwargs") or {})
    backend._commit = None
    backend._revision_cache = None


def setup(backend: Any, processor: Any, model: Any) -> None:
    """Set ``backend`` up around a loaded ``processor`` and ``model``: left padding,
    the registry's pixel limits, the model in eval mode, and the end-of-sequence, pad
    and stripped token ids."""
    backend.processor = processor
    backend.tokenizer = getattr(processor, "tokenizer", None) or processor
    backend.tokenizer.padding_side = "left"
    backend._images_kwargs = pixel_limits(
        backend, backend.options.get("min_pixels"), backend.options.get("max_pixels")
    )
    backend.model = model.eval()
    backend.device = model.device
    backend._eos_ids, backend._pad_id = stop_ids(backend)
    backend._strip_ids = set(backend._eos_ids) | {backend._pad_id}
    unk = getattr(backend.tokenizer, "unk_token_id", None)
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = backend.tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != unk:
            backend._strip_ids.add(tid)


def pixel_limits(backend: Any, min_pixels: Any, max_pixels: Any) -> dict[str, Any]:
    """The image-processor arguments (``images_kwargs``) that bound every image of a
    processor call of ``backend`` to ``min_pixels`` .. ``max_pixels`` (either None:
    the processor's own bound); ``{}`` where both are None."""
    if min_pixels is None and max_pixels is None:
        return {}
    image_processor = getattr(backend.processor, "image_processor", None)
    size = getattr(image_processor, "size", None)
    current = {}
    if size is not None:
        current = dict(size.items()) if hasattr(size, "items") else dict(vars(size))
    if "shortest_edge" not in current or "longest_edge" not in current:
        raise ValueError(
            f"models.{backend.model_id}.options.min_pixels/max_pixels: apply to Qwen-VL-style "
            "image processors (size with shortest_edge/longest_edge in pixels); "
            f"{type(image_processor).__name__} has size {current!r}"
        )
    new = {"shortest_edge": current["shortest_edge"], "longest_edge": current["longest_edge"]}
    if min_pixels is not None:
        new["shortest_edge"] = int(min_pixels)
    if max_pixels is not None:
        new["longest_edge"] = int(max_pixels)
    if new["shortest_edge"] > new["longest_edge"]:
        raise ValueError(
            f"models.{backend.model_id}.options: min_pixels ({new['shortest_edge']}) is larger "
            f"than max_pixels ({new['longest_edge']})"
        )
    return {"images_kwargs": {"size": new}}


def stop_ids(backend: Any) -> tuple[list[int], int]:
    """``(eos_ids, pad_id)`` of ``backend``'s model: the generation config's and the
    tokenizer's end-of-sequence tokens and ``<|im_end|>``; the pad token (the first
    end-of-sequence token where neither names one, then set on the tokenizer)."""
    gen_cfg = getattr(backend.model, "generation_config", None)
    eos = _as_list(getattr(gen_cfg, "eos_token_id", None))
    tok_eos = getattr(backend.tokenizer, "eos_token_id", None)
    for tid in _as_list(tok_eos):
        if tid not in eos:
            eos.append(tid)
    im_end = backend.tokenizer.convert_tokens_to_ids("<|im_end|>")
    unk = getattr(backend.tokenizer, "unk_token_id", None)
    if isinstance(im_end, int) and im_end != unk and im_end not in eos:
        eos.append(im_end)
    if not eos:
        raise ValueError(
            f"models.{backend.model_id}: neither the generation config nor the tokenizer "
            "names an end-of-sequence token"
        )
    pad = getattr(backend.tokenizer, "pad_token_id", None)
    if pad is None:
        pad = getattr(gen_cfg, "pad_token_id", None)
    if pad is None:
        pad = eos[0]
        backend.tokenizer.pad_token_id = pad
    return eos, int(pad)


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _has_accelerate() -> bool:
    try:
        import accelerate  # noqa: F401
    except ImportError:
        return False
    return True


def _torch_dtype(option: Any, use_cuda: bool) -> Any:
    import torch

    if option is None:
        return torch.bfloat16 if use_cuda else torch.float32
    name = str(option)
    if name == "auto":
        return "auto"
    if name in ("bfloat16", "bf16"):
        return torch.bfloat16
    if name in ("float16", "fp16", "half"):
        return torch.float16
    return torch.float32

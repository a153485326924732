"""The ``hf`` backend: transformers ``AutoModelForImageTextToText`` + ``AutoProcessor``.

Batched generation with left padding (the processor pads on the left, so every row's
last prompt token sits at the same position and generation appends after it; Qwen-VL's
M-RoPE positions are computed from the attention mask, so padded rows get the same
positions as unpadded ones). bf16 on a GPU, float32 on the CPU.

Registry ``options`` read here (all optional):

``batch_size`` (8)
    Requests per batch; :attr:`HFBackend.default_batch_size`.
``min_pixels``, ``max_pixels``
    Image-size bounds of Qwen-VL processors (pixels per image; the image is resized so
    its area falls in between, keeping the aspect ratio). Passed as the image
    processor's ``size={"shortest_edge": min, "longest_edge": max}`` on every call; a
    request's own ``min_pixels`` / ``max_pixels`` (a dataset's ``pixels`` setting)
    replace them for that request (batches hold requests of the same limits).
``dtype``
    ``bfloat16``, ``float16``, ``float32`` or ``auto`` (the checkpoint's); default
    bf16 on a GPU, float32 on the CPU.
``attn_implementation``
    ``sdpa``, ``eager``, ``flash_attention_2``, ...; default: transformers' choice.
``device_map``
    Default ``auto`` on a GPU (needs the ``accelerate`` package; without it the model
    is loaded and moved to ``cuda``), none on the CPU.
``trust_remote_code`` (false)
    For checkpoints whose code lives in the repository.
``local_files_only`` (false)
    Load a hub checkpoint from the local cache only (as ``HF_HUB_OFFLINE=1`` does for
    everything). Without either, transformers asks the hub for files a snapshot lacks
    and, with no network, retries each for minutes.
``generation``
    Extra ``GenerationConfig`` fields, e.g. ``{"repetition_penalty": 1.05}`` or
    ``{"min_new_tokens": 32}`` (never the request's: temperature, top_p, top_k, ...).
``generation_config`` (``explicit``)
    Whose decoding defaults apply (a request's ``generation_config`` says it; the run
    config may set it per dataset):

    - ``explicit``: greedy or plain temperature/top-p sampling, *not* the
      checkpoint's ``generation_config.json`` (Qwen2-VL's ship ``top_k=1`` and
      ``repetition_penalty=1.05``, which transformers would otherwise merge into
      every call, greedy included): every field that changes the next-token choice is
      set neutral (:data:`_NEUTRAL_DECODING`). Only its end-of-sequence tokens are used.
    - ``checkpoint``: what ``model.generate`` does when called with only
      max_new_tokens / do_sample / temperature / top_p (lmms-eval's transformers
      wrappers, the Idis perception runs): the checkpoint's ``generation_config``
      gives every field the request does not set. Its logits processors
      (``repetition_penalty``, ``no_repeat_ngram_size``, ...) apply to every row,
      greedy included; a sampled row also takes its ``top_k`` (transformers' 50 where
      it sets none). The request always sets temperature and top-p (the run config's
      ``decoding`` / ``datasets.<name>`` always give them: greedy is temperature 0),
      so the checkpoint's temperature and top_p are never used; a greedy row ignores
      top_k, as transformers does with ``do_sample=False``. Other sampling warpers a
      checkpoint may set (``min_p``, ``typical_p``, ``epsilon_cutoff``,
      ``eta_cutoff``) are not applied by :class:`RowSampler` (a warning says so).

    Every result carries the decoding it used in ``extra["generation"]`` (the output
    row's ``generation``): ``config``, ``temperature``, ``top_p`` and ``top_k``
    (None where not applied), ``repetition_penalty`` and any other logits-processor
    field that is not neutral.
``chat_template_kwargs``
    Extra variables for the chat template (e.g. ``{"enable_thinking": false}``).

Sampling and reproducibility: a batch shares one random number generator, so with
``do_sample=True`` a row's draws would depend on the other rows of its batch. Instead
sampled rows are drawn by :class:`RowSampler` with the Gumbel-max trick from a
generator of their own, seeded by ``Request.seed``: ``argmax(logits / T + Gumbel
noise)`` is an exact draw from ``softmax(logits / T)`` (restricted to the top-p
nucleus and, under ``generation_config: checkpoint``, the checkpoint's top-k), and
each row consumes exactly one vocabulary-sized draw per step from its own generator. A sampled request therefore gives the same text whatever it is
batched with, and greedy and sampled requests share batches. A sampled request
without a seed gets a fresh random one, recorded in ``Result.extra["seed"]``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core.registry import GENERATION_CONFIGS
from .base import (
    Backend,
    Request,
    Result,
    chunks,
    media_marks,
    template_messages,
)
from .checkpoint import hub_commit, local_revision
from .media import load_images

log = logging.getLogger(__name__)

#: GenerationConfig fields that the Request decides, so ``options.generation`` may not.
_REQUEST_DECIDES = {"do_sample", "temperature", "top_p", "max_new_tokens", "num_beams", "top_k"}
#: Neutral values for every GenerationConfig field that changes the next-token choice.
#: transformers fills fields left unset from the checkpoint's generation_config.json
#: (Qwen2-VL's: repetition_penalty 1.05, top_k 1, top_p 0.001, temperature 0.01), so
#: "explicit decoding" means setting them; ``options.generation`` may still override.
_NEUTRAL_DECODING: dict[str, Any] = {
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
#: Sampling warpers :class:`RowSampler` does not apply (their neutral values): a
#: checkpoint that sets one is warned about under ``generation_config: checkpoint``.
_UNAPPLIED_WARPERS: dict[str, Any] = {
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
}
#: Logits-processor fields (applied greedy or sampled) recorded in a row's
#: ``generation`` when not neutral (their neutral values), beside repetition_penalty.
_PROCESSOR_FIELDS: dict[str, Any] = {
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
_DEFAULT_TOP_K = 50
_DTYPES = {"bfloat16", "bf16", "float16", "fp16", "half", "float32", "fp32", "float", "auto"}


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


class RowSampler:
    """A transformers logits processor that samples each row from its own generator.

    Used with ``do_sample=False``: greedy generation takes the argmax of what this
    returns. A greedy row (``temperature <= 0``) is passed through; a sampled row
    becomes ``logits / T`` (tokens outside the top-p nucleus set to ``-inf``) plus
    standard Gumbel noise from the row's generator, whose argmax is a draw from the
    tempered, nucleus-restricted softmax.
    """

    def __init__(
        self,
        rows: list[tuple[float, float, int | None]],
        top_k: list[int | None] | None = None,
    ) -> None:
        self.rows = rows  # (temperature, top_p, seed) per batch row
        # top-k per row (None or 0: none), applied after the temperature and before
        # top-p, as transformers' warpers are
        self.top_k = list(top_k) if top_k is not None else [None] * len(rows)
        if len(self.top_k) != len(rows):
            raise ValueError(f"RowSampler: {len(rows)} rows but {len(self.top_k)} top_k values")
        self._generators: dict[int, Any] = {}

    @property
    def active(self) -> bool:
        return any(t > 0 for t, _, _ in self.rows)

    def _generator(self, i: int, device: Any) -> Any:
        import torch

        gen = self._generators.get(i)
        if gen is None:
            gen = torch.Generator(device=device)
            gen.manual_seed(int(self.rows[i][2] or 0))
            self._generators[i] = gen
        return gen

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if not self.active:
            return scores
        out = scores.clone()
        for i, (temperature, top_p, _seed) in enumerate(self.rows):
            if temperature <= 0:
                continue
            logits = scores[i].float() / float(temperature)
            top_k = self.top_k[i]
            if top_k and top_k < logits.shape[-1]:
                kth = torch.topk(logits, int(top_k)).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            if top_p < 1.0:
                sorted_logits, order = torch.sort(logits, descending=True)
                probs = torch.softmax(sorted_logits, dim=-1)
                mass_before = torch.cumsum(probs, dim=-1) - probs
                drop_sorted = mass_before >= float(top_p)
                drop_sorted[0] = False  # the most likely token is always kept
                drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
                logits = logits.masked_fill(drop, float("-inf"))
            uniform = torch.rand(
                logits.shape,
                generator=self._generator(i, logits.device),
                device=logits.device,
                dtype=torch.float32,
            )
            tiny = torch.finfo(torch.float32).tiny
            gumbel = -torch.log(-torch.log(uniform.clamp(min=tiny, max=1.0 - 1e-7)))
            out[i] = (logits + gumbel).to(out.dtype)
        return out


class HFBackend(Backend):
    """A transformers image-text-to-text model, batched with left padding."""

    name = "hf"
    applies_pixel_limits = True

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        super().__init__(model_id, spec)
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self._read_options()
        opts = self.options
        source = spec.get("local_path") or spec.get("hf_repo")
        if not source:
            raise ValueError(
                f"models.{model_id}: the hf backend needs `local_path` (a checkpoint "
                "directory) or `hf_repo` (a Hugging Face repository)"
            )
        self.source = str(source)
        self.is_local = bool(spec.get("local_path"))
        if self.is_local and not Path(self.source).is_dir():
            raise FileNotFoundError(
                f"models.{model_id}.local_path: {self.source} is not a directory (build the "
                "demo model or download the checkpoint there first)"
            )
        load_revision = spec.get("revision")
        offline = bool(opts.get("local_files_only", False))
        if not self.is_local:
            self._commit = hub_commit(self.source, load_revision, offline)
            load_revision = self._commit or load_revision

        use_cuda = torch.cuda.is_available()
        trust = bool(opts.get("trust_remote_code", False))
        dtype_opt = opts.get("dtype")
        if dtype_opt is not None and str(dtype_opt) not in _DTYPES:
            raise ValueError(
                f"models.{model_id}.options.dtype: {dtype_opt!r} is not one of {sorted(_DTYPES)}"
            )
        dtype = _torch_dtype(dtype_opt, use_cuda)

        processor = AutoProcessor.from_pretrained(
            self.source,
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
        model = AutoModelForImageTextToText.from_pretrained(self.source, **load_kwargs)
        if move_to_cuda:
            model.to("cuda")
        self._setup(processor, model)

    @classmethod
    def from_loaded(
        cls,
        model_id: str,
        model: Any,
        processor: Any,
        options: dict[str, Any] | None = None,
        revision: str | None = None,
    ) -> HFBackend:
        """A backend around a model and processor already in memory (benchmarks, tests).

        ``options`` as in the registry (``batch_size``, ``min_pixels``, ``generation``,
        ...; the loading options have no effect); ``revision`` is reported as is.
        """
        self = cls.__new__(cls)
        Backend.__init__(self, model_id, {"options": dict(options or {}), "revision": revision})
        self._read_options()
        self.source = f"<in memory: {type(model).__name__}>"
        self.is_local = False
        self._setup(processor, model)
        return self

    def _read_options(self) -> None:
        opts = self.options
        self.default_batch_size = int(opts.get("batch_size", 8))
        if self.default_batch_size < 1:
            raise ValueError(
                f"models.{self.model_id}.options.batch_size: must be >= 1, "
                f"got {self.default_batch_size}"
            )
        extra = opts.get("generation") or {}
        if not isinstance(extra, dict) or _REQUEST_DECIDES & set(extra):
            raise ValueError(
                f"models.{self.model_id}.options.generation: must be a mapping of "
                f"GenerationConfig fields other than {sorted(_REQUEST_DECIDES)} (the request "
                f"decides those), got {extra!r}"
            )
        self._generation_extra = dict(extra)
        self._template_kwargs = dict(opts.get("chat_template_kwargs") or {})
        self._commit: str | None = None
        self._revision_cache: str | None = None

    def _setup(self, processor: Any, model: Any) -> None:
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", None) or processor
        self.tokenizer.padding_side = "left"
        self._images_kwargs = self._pixel_limits(
            self.options.get("min_pixels"), self.options.get("max_pixels")
        )
        self.model = model.eval()
        self.device = model.device
        self._eos_ids, self._pad_id = self._stop_ids()
        self._strip_ids = set(self._eos_ids) | {self._pad_id}
        unk = getattr(self.tokenizer, "unk_token_id", None)
        for tok in ("<|im_end|>", "<|endoftext|>"):
            tid = self.tokenizer.convert_tokens_to_ids(tok)
            if isinstance(tid, int) and tid != unk:
                self._strip_ids.add(tid)

    # -- set-up helpers ---------------------------------------------------------------

    def _pixel_limits(self, min_pixels: Any, max_pixels: Any) -> dict[str, Any]:
        if min_pixels is None and max_pixels is None:
            return {}
        image_processor = getattr(self.processor, "image_processor", None)
        size = getattr(image_processor, "size", None)
        current = {}
        if size is not None:
            current = dict(size.items()) if hasattr(size, "items") else dict(vars(size))
        if "shortest_edge" not in current or "longest_edge" not in current:
            raise ValueError(
                f"models.{self.model_id}.options.min_pixels/max_pixels: apply to Qwen-VL-style "
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
                f"models.{self.model_id}.options: min_pixels ({new['shortest_edge']}) is larger "
                f"than max_pixels ({new['longest_edge']})"
            )
        return {"images_kwargs": {"size": new}}

    def _stop_ids(self) -> tuple[list[int], int]:
        gen_cfg = getattr(self.model, "generation_config", None)
        eos = _as_list(getattr(gen_cfg, "eos_token_id", None))
        tok_eos = getattr(self.tokenizer, "eos_token_id", None)
        for tid in _as_list(tok_eos):
            if tid not in eos:
                eos.append(tid)
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        unk = getattr(self.tokenizer, "unk_token_id", None)
        if isinstance(im_end, int) and im_end != unk and im_end not in eos:
            eos.append(im_end)
        if not eos:
            raise ValueError(
                f"models.{self.model_id}: neither the generation config nor the tokenizer "
                "names an end-of-sequence token"
            )
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(gen_cfg, "pad_token_id", None)
        if pad is None:
            pad = eos[0]
            self.tokenizer.pad_token_id = pad
        return eos, int(pad)

    # -- Backend ------------------------------------------------------------------------

    @property
    def revision(self) -> str:
        """The checkpoint exactly: a hub commit, or ``sha256:<16 hex>`` of the weights."""
        if self._revision_cache is None:
            self._revision_cache = self._compute_revision()
        return self._revision_cache

    def _compute_revision(self) -> str:
        if self._commit:
            return self._commit
        if not self.is_local:
            return str(self.spec.get("revision") or "unknown")
        return local_revision(self.source, self.spec.get("revision"))

    def generate(self, requests: list[Request]) -> Iterator[Result]:
        """Batches of equal ``max_new_tokens``, ``generation_config`` and pixel limits
        (order kept), ``default_batch_size`` each."""
        groups: dict[tuple[Any, ...], list[Request]] = {}
        for req in requests:
            key = (int(req.max_new_tokens), req.generation_config, req.min_pixels, req.max_pixels)
            groups.setdefault(key, []).append(req)
        for group in groups.values():
            for batch in chunks(group, self.default_batch_size):
                yield from self._generate_batch(batch)

    def close(self) -> None:
        import torch

        for attr in ("model", "processor", "tokenizer"):
            if hasattr(self, attr):
                delattr(self, attr)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # -- one batch ---------------------------------------------------------------------

    def _generate_batch(self, batch: list[Request]) -> Iterator[Result]:
        ready: list[tuple[Request, str, list[Any], int | None]] = []
        for req in batch:
            try:
                ready.append(self._prepare(req))
            except Exception as exc:  # unreadable image, template error: this request only
                yield _error(req, _reason(exc))
        if not ready:
            return
        results, reason = self._try_run(ready)
        if results is not None:
            yield from results
            return
        if len(ready) == 1:
            yield _error(ready[0][0], reason)
            return
        log.warning(
            "%s: a batch of %d failed (%s); retrying one request at a time",
            self.model_id,
            len(ready),
            reason,
        )
        for item in ready:
            single, reason = self._try_run([item])
            yield from single if single is not None else [_error(item[0], reason)]

    def _try_run(self, items: list) -> tuple[list[Result] | None, str]:
        """``(results, "")``, or ``(None, reason)`` after freeing what the failure held."""
        try:
            return self._run(items), ""
        except Exception as exc:
            reason = _reason(exc)
        # Outside the except block: the traceback (and the tensors its frames hold, e.g.
        # after an out-of-memory error) is released before the cache is emptied.
        _free_cuda_memory()
        return None, reason

    def _prepare(self, req: Request) -> tuple[Request, str, list[Any], int | None]:
        if req.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {req.max_new_tokens}")
        if req.generation_config not in GENERATION_CONFIGS:
            raise ValueError(
                f"request {req.key!r}: generation_config must be one of "
                f"{', '.join(GENERATION_CONFIGS)}, got {req.generation_config!r}"
            )
        images = load_images(req.image_paths, req.fit)
        prompt = self.chat_prompt(req)
        seed = req.seed
        if not req.greedy and seed is None:
            seed = secrets.randbits(32)
        return req, prompt, images, seed

    def chat_prompt(self, req: Request) -> str:
        """The request as the text the model continues: the processor's chat template
        applied to its messages, with the generation prompt (image placeholders not yet
        expanded). The demo models are trained on exactly this text."""
        messages = template_messages(req, self.processor)
        return self.processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **self._template_kwargs
        )

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` with the checkpoint's tokenizer (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @property
    def images_kwargs(self) -> dict[str, Any]:
        """The image-processor arguments of every processor call (``min_pixels`` and
        ``max_pixels`` as ``size``) of a request without limits of its own."""
        return dict(self._images_kwargs)

    def request_images_kwargs(self, req: Request) -> dict[str, Any]:
        """The image-processor arguments of ``req``: its own ``min_pixels`` /
        ``max_pixels`` over the registry's options, else :attr:`images_kwargs`."""
        if req.min_pixels is None and req.max_pixels is None:
            return dict(self._images_kwargs)
        low = req.min_pixels if req.min_pixels is not None else self.options.get("min_pixels")
        high = req.max_pixels if req.max_pixels is not None else self.options.get("max_pixels")
        return self._pixel_limits(low, high)

    def decode_completion(self, ids: list[int]) -> tuple[str, int, str]:
        """``(text, completion_tokens, finish_reason)`` of one row of generated ids.

        The completion ends at the first end-of-sequence token (counted, finish
        ``stop``) or is cut by max_new_tokens (finish ``length``); padding after it is
        dropped. The text keeps special tokens (so ``<think>``/``</think>`` survive where
        a tokenizer marks them special) except the end-of-turn, end-of-text and pad
        tokens.
        """
        eos = set(self._eos_ids)
        stop_at = next((k for k, t in enumerate(ids) if t in eos), None)
        if stop_at is None:
            completion, finish = list(ids), "length"
        else:
            completion, finish = list(ids[: stop_at + 1]), "stop"
        text = self.tokenizer.decode(
            [t for t in completion if t not in self._strip_ids],
            skip_special_tokens=False,
            clean_up_tokenization_spaces=False,
        )
        return text, len(completion), finish

    # -- decoding settings -------------------------------------------------------------

    def checkpoint_generation(self) -> Any:
        """The checkpoint's own ``GenerationConfig`` (its ``generation_config.json``; an
        empty one for a model without)."""
        from transformers import GenerationConfig

        cfg = getattr(self.model, "generation_config", None)
        return cfg if cfg is not None else GenerationConfig()

    def checkpoint_top_k(self) -> int | None:
        """The top-k a sampled row takes under ``generation_config: checkpoint``: the
        checkpoint's, else transformers' default (50); None for 0 (no top-k)."""
        top_k = getattr(self.checkpoint_generation(), "top_k", None)
        top_k = _DEFAULT_TOP_K if top_k is None else int(top_k)
        return top_k or None

    def generation_settings(self, mode: str, max_new_tokens: int) -> Any:
        """The ``GenerationConfig`` passed to ``model.generate`` for one batch under
        ``mode`` (module docstring, ``generation_config``). Always greedy with one beam
        (:class:`RowSampler` samples), the registry's ``options.generation`` on top,
        and this backend's end-of-sequence and pad tokens."""
        from transformers import GenerationConfig

        fixed: dict[str, Any] = {
            "max_new_tokens": int(max_new_tokens),
            "do_sample": False,
            "num_beams": 1,
            "eos_token_id": self._eos_ids,
            "pad_token_id": self._pad_id,
        }
        if mode == "explicit":
            return GenerationConfig(**{**_NEUTRAL_DECODING, **self._generation_extra, **fixed})
        if mode != "checkpoint":
            raise ValueError(
                f"models.{self.model_id}: generation_config must be one of "
                f"{', '.join(GENERATION_CONFIGS)}, got {mode!r}"
            )
        cfg = copy.deepcopy(self.checkpoint_generation())
        # the sampling warpers are RowSampler's (with do_sample=False transformers
        # applies none of them): neutral here, so it warns of none
        warpers = {"temperature": 1.0, "top_p": 1.0, "top_k": _DEFAULT_TOP_K}
        warpers.update({k: v for k, v in _UNAPPLIED_WARPERS.items() if hasattr(cfg, k)})
        cfg.update(**{**warpers, "num_return_sequences": 1, **self._generation_extra, **fixed})
        return cfg

    def _warn_unapplied(self) -> None:
        """Once: the checkpoint sets a sampling warper RowSampler does not apply."""
        if getattr(self, "_warned_warpers", False):
            return
        self._warned_warpers = True
        cfg = self.checkpoint_generation()
        unapplied = {
            k: getattr(cfg, k)
            for k, neutral in _UNAPPLIED_WARPERS.items()
            if getattr(cfg, k, None) is not None and getattr(cfg, k) != neutral
        }
        if unapplied:
            log.warning(
                "models.%s: the checkpoint's generation_config sets %s, which sampled rows "
                "do not apply (RowSampler applies temperature, top_k and top_p only)",
                self.model_id,
                unapplied,
            )

    @staticmethod
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
        for name, neutral in _PROCESSOR_FIELDS.items():
            value = getattr(cfg, name, None)
            if value is not None and value != neutral:
                record[name] = _jsonable(value)
        return record

    def _run(self, items: list[tuple[Request, str, list[Any], int | None]]) -> list[Result]:
        """Generate one batch; all results or an exception (never a partial batch)."""
        import torch
        from transformers import LogitsProcessorList

        reqs = [it[0] for it in items]
        texts = [it[1] for it in items]
        images = [img for it in items for img in it[2]]
        limits = {(r.min_pixels, r.max_pixels) for r in reqs}
        if len(limits) > 1:
            raise ValueError("a batch mixes pixel limits")
        inputs = self.processor(
            text=texts,
            images=images or None,
            padding=True,
            return_tensors="pt",
            **self.request_images_kwargs(reqs[0]),
        ).to(self.device)
        max_new = reqs[0].max_new_tokens
        mode = reqs[0].generation_config
        if any(r.generation_config != mode for r in reqs):
            raise ValueError("a batch mixes generation_config settings")
        gen_cfg = self.generation_settings(mode, max_new)
        top_k = self.checkpoint_top_k() if mode == "checkpoint" else None
        sampled = [not r.greedy for r in reqs]
        if mode == "checkpoint" and any(sampled):
            self._warn_unapplied()
        sampler = RowSampler(
            [(it[0].temperature, it[0].top_p, it[3]) for it in items],
            top_k=[top_k if s else None for s in sampled],
        )
        processors = LogitsProcessorList([sampler] if sampler.active else [])
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                **inputs, generation_config=gen_cfg, logits_processor=processors
            )
        wall = time.perf_counter() - t0
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = out[:, prompt_len:].tolist()
        mask_sums = inputs["attention_mask"].sum(dim=1).tolist()
        results = []
        for i, (req, _prompt, _imgs, seed) in enumerate(items):
            text, n_completion, finish = self.decode_completion(new_tokens[i])
            extra: dict[str, Any] = {
                "batch_size": len(items),
                "generation": self.decoding_record(gen_cfg, mode, req, top_k),
            }
            if not req.greedy:
                extra["seed"] = seed
            results.append(
                Result(
                    key=req.key,
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=int(mask_sums[i]),
                    completion_tokens=n_completion,
                    latency_s=wall / len(items),
                    extra=extra,
                )
            )
        return results

    # -- attention blocking (the Idis study; clients/vlm/blocking.py) -------------------

    def prefilled_inputs(
        self, req: Request, prefill: str, char_spans: Any = ()
    ) -> tuple[Any, list[int]]:
        """``(inputs, positions)``: the processor inputs of ``req``'s chat prompt with
        ``prefill`` appended as the start of the assistant turn, and the positions of the
        prefill tokens whose offsets overlap ``char_spans`` (spans of ``prefill``).

        The prompt goes through the processor (images expanded); the prefill is
        tokenized on its own (no special tokens added) and appended, so its character
        offsets map to tokens exactly. The prompt ends with the assistant header's
        newline, so this is normally also how the joint text would tokenize."""
        import torch

        from .blocking import token_positions

        _req, prompt, images, _seed = self._prepare(req)
        for mark in media_marks(self.processor):
            if mark in prefill:
                raise ValueError(f"request {req.key!r}: the prefill holds the media mark {mark!r}")
        inputs = self.processor(
            text=[prompt],
            images=images or None,
            return_tensors="pt",
            **self.request_images_kwargs(req),
        )
        enc = self.tokenizer(prefill, add_special_tokens=False, return_offsets_mapping=True)
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
                    f"models.{self.model_id}: the processor returns a per-token input "
                    f"{name!r} that a prefill cannot be appended to"
                )
            inputs[name] = torch.cat([value, extra.to(value.dtype)], dim=1)
        positions = token_positions(enc["offset_mapping"], char_spans, shift=n_prompt)
        return inputs.to(self.device), positions

    def answer_with_blocked(
        self,
        req: Request,
        prefill: str,
        blocked_char_spans: Any = (),
        max_new_tokens: int | None = None,
    ) -> tuple[str, int]:
        """``(text, blocked_tokens)``: the greedy continuation of ``req``'s chat prompt
        + ``prefill`` (e.g. the model's own trace up to its closing marker) while the
        answer positions (the last prefill token, which predicts the first answer
        token, and every generated one) do not attend to the prefill tokens overlapping
        ``blocked_char_spans`` (:func:`~.blocking.blocked_attention`). ``text`` is
        decoded as :meth:`decode_completion` does; ``max_new_tokens`` defaults to the
        request's. With no spans this is ordinary greedy generation of that prompt."""
        import torch

        from .blocking import blocked_attention

        inputs, positions = self.prefilled_inputs(req, prefill, blocked_char_spans)
        length = int(inputs["input_ids"].shape[1])
        # greedy, under the request's generation_config (the checkpoint's logits
        # processors apply under ``checkpoint``)
        settings = self.generation_settings(
            req.generation_config, int(max_new_tokens or req.max_new_tokens)
        )
        with torch.inference_mode(), blocked_attention(self.model, positions, length - 1):
            out = self.model.generate(**inputs, generation_config=settings)
        text, _n, _finish = self.decode_completion(out[0, length:].tolist())
        return text, len(positions)


# -- module helpers ----------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it (lists, numbers, text; anything else as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def _reason(exc: BaseException) -> str:
    reason = f"{type(exc).__name__}: {exc}"
    return reason if len(reason) <= 1000 else reason[:1000] + "..."


def _error(req: Request, reason: str) -> Result:
    return Result(key=req.key, text="", finish_reason="error", error=reason)


def _free_cuda_memory() -> None:
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


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

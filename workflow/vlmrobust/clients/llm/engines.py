"""Text-generation engines: a local text LLM (a judge, an extractor) loaded in this process.

An LLM engine job (:mod:`vlmrobust.clients.llm.local`) answers a step's calls with one
of these: :class:`TextRequest` in, :class:`TextResult` out, in order, one failed request
never losing the others. :func:`load_text_engine` makes the engine of a registry entry
(``kind: llm``, backend ``vllm`` or ``hf``; ``hf_repo`` or ``local_path``, ``revision``,
``options``). ``vllm``, ``torch`` and ``transformers`` are imported only when an engine
is made.

**vllm** (:class:`VLLMTextEngine`): ``vllm.LLM`` with the settings ``vlmrobust
vllm-serve`` gives a server of the same entry (:func:`~vlmrobust.clients.vlm.vllm.engine_kwargs`:
dtype, context, eager mode, generation config, and for ``kind: llm`` no image inputs),
answering each request exactly as vLLM's OpenAI-compatible server answers the
chat-completions request the project's ``openai`` LLM backend sends for the same call
(:func:`chat_body`). It uses the server's own code for each step (vLLM 0.32), offline:

- the prompt: ``OnlineRenderer.render_chat``, as the server renders: the tokenizer's chat
  template with ``add_generation_prompt=True``, the registry's
  ``options.chat_template_kwargs`` as the server's ``--default-chat-template-kwargs``
  (:func:`~vlmrobust.clients.vlm.vllm.serve_command` passes them), message contents
  in the format vLLM detects in the template (``string`` or ``openai`` parts), tokenized
  without added special tokens. A gpt-oss checkpoint (``model_type: gpt_oss``) is
  rendered with Harmony instead (the system header with the date, ``VLLM_SYSTEM_START_DATE``
  pins it; a system message as the developer's instructions), as the server does.
- the sampling: ``ChatCompletionRequest.to_sampling_params`` with the server's defaults
  (``ModelConfig.get_diff_sampling_param``: vLLM's neutral ones under
  ``generation_config: vllm``, the checkpoint's under ``auto``) and output budget
  (``get_max_tokens``: the request's ``max_tokens``, at most what the context leaves).
  A JSON schema becomes ``StructuredOutputsParams(json=schema)`` (``response_format``
  ``json_schema``); ``skip_special_tokens`` is the server's default, true.
- the answer: the text, or where the server has a parser (a gpt-oss checkpoint: the
  Harmony parser with the ``openai_gptoss`` reasoning parser vLLM sets for it) the
  parsed message's ``content`` (the final channel; the analysis is dropped, as the
  ``openai`` backend reads only ``content``).

What differs from a server, and why it does not change the text: the server passes the
engine ``reasoning_ended`` (computed from the prompt by its parser), the offline engine
leaves it unset and vLLM's engine computes the same from the prompt; requests are
batched ``options.batch_size`` (64) at a time instead of as they arrive.

**hf** (:class:`HFTextEngine`): transformers ``AutoModelForCausalLM`` +
``AutoTokenizer`` (registry ``options``: ``dtype``, ``device_map``,
``trust_remote_code``, ``local_files_only``, ``chat_template_kwargs``,
``generation_config``), one request at a time (no padding effects), the same chat
template rendering (:func:`render_prompt`; gpt-oss by its tokenizer's chat template,
not Harmony), greedy or sampled with the request's seed, the same decoding fields as the
server (:func:`decoding_fields`). A JSON schema cannot be enforced in plain
transformers: the text is returned as generated (the caller validates it).
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..vlm.checkpoint import hub_commit, local_revision, release_memory
from ..vlm.vllm import _load_vllm, checkpoint_sampling_defaults, engine_kwargs, source_of

__all__ = [
    "TEXT_ENGINES",
    "HFTextEngine",
    "TextEngine",
    "TextRequest",
    "TextResult",
    "VLLMTextEngine",
    "chat_body",
    "decoding_fields",
    "load_text_engine",
    "render_prompt",
]

_ROLES = ("system", "user", "assistant")
#: The chat-completions defaults vLLM's server starts from
#: (``ChatCompletionRequest._DEFAULT_SAMPLING_PARAMS``, the fields a request can leave).
SERVER_DEFAULTS: dict[str, float] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}


@dataclass(frozen=True)
class TextRequest:
    """One chat call: the messages (``[{"role": system | user | assistant, "content":
    str}]``), the JSON schema the answer must follow (None: free text), the output
    budget and the sampling (``temperature`` 0 = greedy; ``top_p`` None = not set,
    neutral 1.0; ``seed`` None = none)."""

    messages: list[dict[str, str]]
    json_schema: dict | None
    max_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None


@dataclass
class TextResult:
    """The answer to one :class:`TextRequest`: ``finish_reason`` is ``stop``,
    ``length``, ``error`` or the provider's value; on failure ``error`` says why and
    ``text`` is empty."""

    text: str
    finish_reason: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


def _failed(reason: str) -> TextResult:
    return TextResult(text="", finish_reason="error", error=reason[:1000])


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def check_request(req: TextRequest) -> None:
    """A ValueError when ``req`` cannot be asked: messages that are not
    ``{"role": system | user | assistant, "content": str}`` (at least one), an output
    budget below 1, a negative temperature, a top-p outside (0, 1], a schema that is not
    a mapping."""
    if not req.messages:
        raise ValueError("the request has no messages")
    for i, message in enumerate(req.messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise ValueError(f"messages[{i}] must be {{'role', 'content'}}, got {message!r:.200}")
        if message["role"] not in _ROLES or not isinstance(message["content"], str):
            raise ValueError(
                f"messages[{i}]: role must be one of {', '.join(_ROLES)} and content a "
                f"string, got {message!r:.200}"
            )
    if int(req.max_tokens) < 1:
        raise ValueError(f"max_tokens must be at least 1, got {req.max_tokens}")
    if float(req.temperature) < 0:
        raise ValueError(f"temperature must be >= 0, got {req.temperature}")
    if req.top_p is not None and not 0 < float(req.top_p) <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {req.top_p}")
    if req.json_schema is not None and not isinstance(req.json_schema, dict):
        raise ValueError("json_schema must be a mapping (a JSON schema) or None")


def chat_body(req: TextRequest, model: str) -> dict[str, Any]:
    """The chat-completions request body the project's ``openai`` LLM backend sends for
    ``req`` to a server of ``model`` (:class:`~vlmrobust.clients.llm.backends.OpenAILLM`
    with its default options): the messages, ``max_tokens``, ``temperature``, ``top_p``
    and ``seed`` where set, and for a schema ``response_format`` ``json_schema``
    (``name: response``, ``strict: false``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in req.messages],
        "max_tokens": int(req.max_tokens),
        "temperature": float(req.temperature),
    }
    if req.top_p is not None:
        body["top_p"] = float(req.top_p)
    if req.seed is not None:
        body["seed"] = int(req.seed)
    if req.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": req.json_schema, "strict": False},
        }
    return body


def decoding_fields(req: TextRequest, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The decoding fields vLLM's server gives ``req`` (``to_sampling_params``): the
    request's temperature and top-p where set, else the server's default sampling
    parameters ``defaults`` (the checkpoint's under ``generation_config: checkpoint``,
    none under vLLM's neutral ones), else :data:`SERVER_DEFAULTS`."""
    defaults = defaults or {}
    fields = {k: defaults.get(k, v) for k, v in SERVER_DEFAULTS.items()}
    fields["temperature"] = float(req.temperature)
    if req.top_p is not None:
        fields["top_p"] = float(req.top_p)
    return fields


def render_prompt(
    tokenizer: Any, messages: list[dict[str, str]], chat_template_kwargs: dict | None = None
) -> tuple[str, list[int]]:
    """The prompt text and token ids of a chat as vLLM's server makes them from a
    tokenizer's chat template (string contents): ``add_generation_prompt=True``,
    ``continue_final_message=False``, the registry's ``chat_template_kwargs``, tokenized
    without added special tokens (the template writes them)."""
    text = tokenizer.apply_chat_template(
        [dict(m) for m in messages],
        add_generation_prompt=True,
        continue_final_message=False,
        tokenize=False,
        **dict(chat_template_kwargs or {}),
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text, list(ids)


def _chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), max(1, size)):
        yield list(items[start : start + max(1, size)])


class TextEngine(abc.ABC):
    """A local text LLM loaded once; :meth:`generate` answers requests in order. One
    :meth:`generate` call at a time: the caller pools its threads' requests into it."""

    name: str = "?"

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        self.model_id = model_id
        self.spec = dict(spec)
        self.options: dict[str, Any] = dict(spec.get("options") or {})
        self.is_local = bool(spec.get("local_path"))
        self.source = ""
        self._commit: str | None = None
        self._revision: str | None = None

    def _hub_revision(self, offline: bool = False) -> str | None:
        """The hub commit a non-local checkpoint is loaded at (the registry's revision
        resolved where the hub or the cache knows it); None for a local one."""
        if self.is_local:
            return None
        revision = self.spec.get("revision")
        self._commit = hub_commit(self.source, revision, offline) or revision
        return self._commit

    @property
    def revision(self) -> str:
        """What exactly answers, as the VLM backends' revision: the weights' hash of a
        local checkpoint (its build record's for a twin), else the hub commit."""
        if self._revision is None:
            self._revision = (
                local_revision(self.source, self.spec.get("revision"))
                if self.is_local
                else str(self._commit or "unknown")
            )
        return self._revision

    @abc.abstractmethod
    def generate(self, requests: list[TextRequest]) -> list[TextResult]:
        """One result per request, in order; a request that fails gives an error result."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model."""

    def __enter__(self) -> TextEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- vLLM --------------------------------------------------------------------------------


def _run_async(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code (in a thread of its own when
    this thread already runs an event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class _Prepared:
    """A request as the server would run it: its parsed request, prompt, sampling
    parameters and output parser (None: the text is the answer)."""

    request: Any
    prompt_ids: list[int]
    params: Any
    parser: Any


class ChatServerRules:
    """What vLLM's OpenAI server (``OpenAIServingChat``, non-streaming, one choice, no
    tools) does to a chat-completions request, done offline with the server's own
    classes around an offline ``vllm.LLM`` (vLLM 0.32)."""

    def __init__(self, llm: Any, options: dict[str, Any]) -> None:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.parser.parser_manager import ParserManager
        from vllm.renderers.online_renderer import OnlineRenderer

        config = llm.model_config
        # the server's reasoning parser: its flag, or the one vLLM sets for the model
        # (gpt-oss: openai_gptoss), read from the same engine configuration
        reasoning = llm.llm_engine.vllm_config.structured_outputs_config.reasoning_parser
        self.request_cls = ChatCompletionRequest
        self.tokenizer = llm.renderer.tokenizer
        self.renderer = OnlineRenderer(
            config,
            llm.renderer,
            request_logger=None,
            chat_template=None,
            chat_template_content_format="auto",
            reasoning_parser=reasoning,
            default_chat_template_kwargs=dict(options.get("chat_template_kwargs") or {}),
        )
        self.parser_cls = ParserManager.get_parser(
            tool_parser_name=None,
            reasoning_parser_name=reasoning,
            enable_auto_tools=False,
            model_name=config.model,
            is_harmony=config.hf_config.model_type == "gpt_oss",
            tokenizer=self.tokenizer,
        )
        self.model_config = config
        self.defaults = config.get_diff_sampling_param()
        self.override_max_tokens = (
            self.defaults.get("max_tokens")
            if config.generation_config not in ("auto", "vllm")
            else getattr(config, "override_generation_config", {}).get("max_new_tokens")
        )

    async def prepare(self, body: dict[str, Any]) -> _Prepared:
        """Parse, render and make the sampling parameters of one request body, in the
        server's order (the parser is made before the prompt is rendered; rendering may
        adjust the request, e.g. Harmony's structured output, before the sampling
        parameters are made from it). Raises what the server answers with an error."""
        from vllm.entrypoints.serve.utils.api_utils import get_max_tokens

        request = self.request_cls.model_validate(body)
        parser = None
        if self.parser_cls is not None:
            kwargs = self.renderer.effective_chat_template_kwargs(request)
            parser = self.parser_cls(
                self.tokenizer, request.tools, chat_template_kwargs=kwargs,
                model_config=self.model_config,
            )  # fmt: skip
        rendered = await self.renderer.render_chat(request)
        if not isinstance(rendered, tuple):  # an ErrorResponse
            raise ValueError(f"the server would refuse the request: {rendered}")
        (engine_input,) = rendered[1]
        prompt_ids = list(engine_input["prompt_token_ids"])
        max_tokens = get_max_tokens(
            self.model_config.max_model_len,
            request.max_completion_tokens
            if request.max_completion_tokens is not None
            else request.max_tokens,
            len(prompt_ids),
            self.defaults,
            self.override_max_tokens,
            truncate_prompt_tokens=request.truncate_prompt_tokens,
        )
        params = request.to_sampling_params(max_tokens, self.defaults)
        return _Prepared(request, prompt_ids, params, parser)

    async def prepare_all(self, bodies: list[dict[str, Any]]) -> list[_Prepared | str]:
        """:meth:`prepare` for each body; a failure is its reason, in its place."""
        out: list[_Prepared | str] = []
        for body in bodies:
            try:
                out.append(await self.prepare(body))
            except Exception as exc:  # noqa: BLE001 - one bad request never stops the others
                out.append(_reason(exc))
        return out

    def answer(self, prepared: _Prepared, output: Any) -> TextResult:
        """The result the server's response gives the ``openai`` backend: the message
        content (parsed where the server parses), finish reason and usage."""
        completion = output.outputs[0]
        if completion.finish_reason == "error":
            return _failed("the engine reported an internal error for this request")
        content = completion.text
        if prepared.parser is not None:
            prepared.parser.set_prompt_token_ids(output.prompt_token_ids)
            _, content, _ = prepared.parser.parse(
                completion.text,
                prepared.request,
                enable_auto_tools=False,
                model_output_token_ids=completion.token_ids,
            )
        return TextResult(
            text=content or "",
            finish_reason=str(completion.finish_reason or "stop"),
            prompt_tokens=len(output.prompt_token_ids or []),
            completion_tokens=len(completion.token_ids),
        )


class VLLMTextEngine(TextEngine):
    """vLLM's offline engine answering as its OpenAI server would (module docstring)."""

    name = "vllm"

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        super().__init__(model_id, spec)
        self.source = source_of(model_id, spec)
        vllm = _load_vllm(model_id)
        self.batch_size = int(self.options.get("batch_size", 64))
        load = {**self.spec, "kind": "llm", "revision": self._hub_revision()}
        try:
            self.llm = vllm.LLM(**engine_kwargs(self.source, load, self.options))
        except Exception as exc:
            raise RuntimeError(
                f"models.{model_id} (backend vllm): vLLM cannot load {self.source} "
                f"({type(exc).__name__}: {str(exc)[:600]}); vLLM's own reason is in the log "
                f"above; the engine settings are models.{model_id}.options"
            ) from exc
        self.rules = ChatServerRules(self.llm, self.options)

    def generate(self, requests: list[TextRequest]) -> list[TextResult]:
        results: list[TextResult | None] = [None] * len(requests)
        bodies: list[tuple[int, dict[str, Any]]] = []
        for i, req in enumerate(requests):
            try:
                check_request(req)
                bodies.append((i, chat_body(req, self.model_id)))
            except Exception as exc:  # noqa: BLE001
                results[i] = _failed(_reason(exc))
        prepared = _run_async(self.rules.prepare_all([b for _, b in bodies]))
        ready: list[tuple[int, _Prepared]] = []
        for (i, _), item in zip(bodies, prepared, strict=True):
            if isinstance(item, str):
                results[i] = _failed(item)
            else:
                ready.append((i, item))
        for batch in _chunks(ready, self.batch_size):
            for i, result in zip([i for i, _ in batch], self._run_batch(batch), strict=True):
                results[i] = result
        return [r if r is not None else _failed("no result") for r in results]

    def _run_batch(self, batch: list[tuple[int, _Prepared]]) -> list[TextResult]:
        """One ``LLM.generate`` call; when it raises (one prompt the engine refuses),
        each request alone, so one bad request gives one error result."""
        try:
            return self._run([p for _, p in batch])
        except Exception as exc:  # noqa: BLE001
            if len(batch) == 1:
                return [_failed(_reason(exc))]
        out = []
        for _, item in batch:
            try:
                out.extend(self._run([item]))
            except Exception as exc:  # noqa: BLE001
                out.append(_failed(_reason(exc)))
        return out

    def _run(self, items: list[_Prepared]) -> list[TextResult]:
        prompts = [{"prompt_token_ids": p.prompt_ids} for p in items]
        # a copy per call: the engine marks the parameters it is given
        params = [p.params.clone() for p in items]
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        return [self.rules.answer(p, o) for p, o in zip(items, outputs, strict=True)]

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        del llm
        release_memory()


# --- transformers ------------------------------------------------------------------------


#: transformers fills every generation field a call leaves unset from the checkpoint's
#: ``generation_config.json``; vLLM's server applies none of these, so they are set
#: neutral (the decoding fields the server does apply come from :func:`decoding_fields`).
_NEUTRAL_PROCESSORS: dict[str, Any] = {
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "encoder_repetition_penalty": 1.0,
    "min_new_tokens": 0,
    "length_penalty": 1.0,
    "num_return_sequences": 1,
}
_NEUTRAL_WARPERS: dict[str, Any] = {"typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}


class HFTextEngine(TextEngine):
    """transformers' causal LM, one request at a time (module docstring)."""

    name = "hf"

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        super().__init__(model_id, spec)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from ..vlm.hf_setup import _DTYPES, _has_accelerate, _torch_dtype

        self.source = self._source()
        opts = self.options
        offline = bool(opts.get("local_files_only", False))
        revision = self._hub_revision(offline)
        if opts.get("dtype") is not None and str(opts["dtype"]) not in _DTYPES:
            raise ValueError(
                f"models.{model_id}.options.dtype: {opts['dtype']!r} is not one of "
                f"{sorted(_DTYPES)}"
            )
        use_cuda = torch.cuda.is_available()
        load: dict[str, Any] = {
            "revision": revision,
            "trust_remote_code": bool(opts.get("trust_remote_code", False)),
            "local_files_only": offline,
        }
        self.tokenizer = AutoTokenizer.from_pretrained(self.source, **load)
        device_map = opts.get("device_map", "auto" if use_cuda else None)
        if device_map is not None and _has_accelerate():
            load["device_map"] = device_map
        load["dtype"] = _torch_dtype(opts.get("dtype"), use_cuda)
        self.model = AutoModelForCausalLM.from_pretrained(self.source, **load).eval()
        if use_cuda and "device_map" not in load:
            self.model.to("cuda")
        self._setup()

    def _source(self) -> str:
        from pathlib import Path

        source = self.spec.get("local_path") or self.spec.get("hf_repo")
        if not source:
            raise ValueError(
                f"models.{self.model_id}: the hf backend needs `local_path` or `hf_repo`"
            )
        if self.is_local and not Path(source).is_dir():
            raise FileNotFoundError(
                f"models.{self.model_id}.local_path: {source} is not a directory (build the "
                "demo model or download the checkpoint there first)"
            )
        return str(source)

    def _setup(self) -> None:
        """End-of-sequence ids (the checkpoint's generation config and tokenizer, as vLLM
        stops), the context length, and the server's default decoding fields."""
        cfg = self.model.generation_config
        eos = cfg.eos_token_id if cfg is not None else None
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if self.tokenizer.eos_token_id is not None:
            eos.append(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(set(eos))
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_ids[0] if self.eos_ids else 0
        config = self.model.config
        text = getattr(config, "get_text_config", lambda: config)()
        self.max_len = int(
            self.options.get("max_model_len") or getattr(text, "max_position_embeddings", 0)
        )
        checkpoint = self.options.get("generation_config") == "checkpoint"
        self.defaults = checkpoint_sampling_defaults(cfg) if checkpoint else {}
        self.template_kwargs = dict(self.options.get("chat_template_kwargs") or {})

    def generate(self, requests: list[TextRequest]) -> list[TextResult]:
        out = []
        for req in requests:
            try:
                out.append(self._answer(req))
            except Exception as exc:  # noqa: BLE001 - one bad request never stops the others
                out.append(_failed(_reason(exc)))
        return out

    def generation_config(self, req: TextRequest, budget: int) -> Any:
        """The ``GenerationConfig`` of one request: :func:`decoding_fields` (greedy at
        temperature 0), every other field that changes the next token neutral, the
        checkpoint's end-of-sequence ids."""
        from transformers import GenerationConfig

        fields = decoding_fields(req, self.defaults)
        settings: dict[str, Any] = {
            **_NEUTRAL_PROCESSORS,
            "max_new_tokens": int(budget),
            "do_sample": fields["temperature"] > 0,
            "num_beams": 1,
            "repetition_penalty": float(fields["repetition_penalty"]),
            "eos_token_id": self.eos_ids,
            "pad_token_id": self.pad_id,
        }
        if settings["do_sample"]:  # the sampling warpers (greedy takes none)
            settings.update(_NEUTRAL_WARPERS)
            settings["temperature"] = float(fields["temperature"])
            settings["top_p"] = float(fields["top_p"])
            settings["top_k"] = int(fields["top_k"] or 0)
            settings["min_p"] = float(fields["min_p"]) or None
        return GenerationConfig(**settings)

    def _answer(self, req: TextRequest) -> TextResult:
        import torch

        check_request(req)
        _, ids = render_prompt(self.tokenizer, req.messages, self.template_kwargs)
        budget = int(req.max_tokens)
        if self.max_len:
            if len(ids) >= self.max_len:
                raise ValueError(f"the prompt has {len(ids)} tokens; the context is {self.max_len}")
            budget = min(budget, self.max_len - len(ids))
        device = self.model.device
        input_ids = torch.tensor([ids], device=device)
        config = self.generation_config(req, budget)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            if config.do_sample and req.seed is not None:
                torch.manual_seed(int(req.seed))
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config
                )
        return self._result(out[0, len(ids) :].tolist(), len(ids))

    def _result(self, generated: list[int], prompt_tokens: int) -> TextResult:
        """The completion up to and with its first end-of-sequence token (``stop``) or
        cut by the budget (``length``); its text without special tokens, as the server's
        ``skip_special_tokens``."""
        eos = set(self.eos_ids)
        stop = next((k for k, t in enumerate(generated) if t in eos), None)
        completion = generated if stop is None else generated[: stop + 1]
        text = self.tokenizer.decode(
            [t for t in completion if t not in eos],
            skip_special_tokens=True,
            clean_up_tokenization_spaces=False,
        )
        return TextResult(
            text=text,
            finish_reason="length" if stop is None else "stop",
            prompt_tokens=prompt_tokens,
            completion_tokens=len(completion),
        )

    def close(self) -> None:
        model = getattr(self, "model", None)
        if model is None:
            return
        self.model = None
        del model
        release_memory()


TEXT_ENGINES: dict[str, type[TextEngine]] = {"vllm": VLLMTextEngine, "hf": HFTextEngine}


def load_text_engine(model_id: str, spec: dict[str, Any]) -> TextEngine:
    """The engine of the registry entry ``spec`` of ``model_id`` (backend ``vllm`` or
    ``hf``), loaded: the model is read once, here."""
    backend = spec.get("backend")
    cls = TEXT_ENGINES.get(str(backend))
    if cls is None:
        raise ValueError(
            f"models.{model_id}: backend {backend!r} has no local text engine; expected one "
            f"of {', '.join(TEXT_ENGINES)}"
        )
    return cls(model_id, spec)

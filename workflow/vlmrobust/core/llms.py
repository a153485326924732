"""The run's LLMs: a step's setting that names a registry model (``llm: <id>``), resolved.

A step that calls an LLM (a judge, an extractor, a writer) takes either an inline setting
(``backend: openai``, ``model``, ``base_url``, ...: a model served at an address the user
gives) or ``llm: <id>``, a model of the registry (config/models.yaml). After the
configuration is validated, :func:`resolve_llm_refs` replaces every ``llm`` setting by
what the step's code reads, so the judges' own code (prompts, parsing, cache keys) does
not change:

- an **API model** (backend ``openai`` / ``gemini``) becomes the inline setting it stands
  for: ``backend``, ``model`` = its ``api_model``, ``base_url``, ``api_key_env``,
  ``options`` (the same cache keys as the inline setting had);
- a **local model** (backend ``vllm`` / ``hf``, ``kind: llm``) becomes ``backend`` and
  ``model`` = the registry id: its calls are answered by the model's engine jobs
  (docs/judges.md), which only the steps of :data:`ENGINE_STEPS` have.

Either way ``llm`` stays in the setting, naming the registry entry, and the step's own keys
(``temperature``, ``max_tokens``, ``prompt``, ``cache_dir``, ...) stay as written.
Mistakes are errors naming the key: an id not in the registry, a local model on a step
without engines, a local model whose GPUs are not declared, an evaluated model that is
also an ``llm``-kind model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .registry import API_BACKENDS, LOCAL_BACKENDS

__all__ = [
    "ENGINE_STEPS",
    "LLMRefError",
    "is_engine_step",
    "llm_settings",
    "resolve_llm_refs",
    "resolved_setting",
]

#: Config keys whose LLM may be local: their judged files are written by LLM engine jobs
#: (``judge.attributes.extractors.<name>`` for every extractor name).
ENGINE_STEPS = ("judge.mathverse", "judge.attributes.extractors")
#: Keys of a setting that the registry entry decides when the setting names one.
REGISTRY_DECIDES = ("backend", "model", "base_url", "api_key_env", "options")


class LLMRefError(ValueError):
    """A setting's ``llm`` does not name a model the step can use."""


def is_engine_step(where: str) -> bool:
    """Whether the step at config key ``where`` may name a local LLM (its files are
    written by LLM engines)."""
    return any(where == s or where.startswith(s + ".") for s in ENGINE_STEPS)


def llm_settings(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every setting of a configuration that names a registry LLM: (config key, the
    setting's dict), the dict itself so it can be replaced in place."""
    if isinstance(node, dict):
        if isinstance(node.get("llm"), str):
            yield where, node
            return
        for key, value in node.items():
            yield from llm_settings(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from llm_settings(value, f"{where}[{i}]")


def resolved_setting(
    setting: dict[str, Any], where: str, registry: dict[str, dict[str, Any]], source: str
) -> dict[str, Any]:
    """``setting`` (with ``llm``) as the step reads it (module docstring); ``source`` is
    the registry file, for the messages."""
    mid = setting["llm"]
    entry = registry.get(mid)
    if entry is None:
        llms = sorted(m for m, e in registry.items() if e.get("kind") == "llm")
        raise LLMRefError(
            f"config: {where}.llm: {mid!r} is not in the model registry ({source}; its "
            f"LLMs: {', '.join(llms) or 'none'})"
        )
    backend = entry["backend"]
    if backend in API_BACKENDS:
        base = {
            "backend": backend,
            "model": entry["api_model"],
            "base_url": entry.get("base_url"),
            "api_key_env": entry.get("api_key_env"),
            "options": _with_prices(entry),
        }
    else:
        _check_local(entry, mid, where, source)
        base = {"backend": backend, "model": mid}
    # a setting resolved before (validated twice) holds the same values: no clash
    clash = [k for k in REGISTRY_DECIDES[1:] if k in setting and setting[k] != base.get(k)]
    if clash:
        raise LLMRefError(
            f"config: {where}.{clash[0]}: the registry entry models.{mid} decides it "
            "(drop the key, or give an inline setting without `llm`)"
        )
    own = {k: v for k, v in setting.items() if k not in REGISTRY_DECIDES}
    return {**base, **own}


def _with_prices(entry: dict[str, Any]) -> dict[str, Any]:
    """An API entry's options, with its registry ``prices`` as the backend's cost
    options (``price_input_per_mtok`` / ``price_output_per_mtok``: the cost each cached
    response records; not part of a cache key)."""
    options = dict(entry.get("options") or {})
    prices = entry.get("prices")
    if prices:
        options.setdefault("price_input_per_mtok", prices["input"])
        options.setdefault("price_output_per_mtok", prices["output"])
    return options


def _check_local(entry: dict[str, Any], mid: str, where: str, source: str) -> None:
    """A local registry LLM: a step with engines, ``kind: llm``, its GPUs declared."""
    if entry["backend"] not in LOCAL_BACKENDS:  # pragma: no cover - the schema's enum
        raise LLMRefError(f"config: {where}.llm: models.{mid} has no usable backend")
    if not is_engine_step(where):
        raise LLMRefError(
            f"config: {where}.llm: models.{mid} is a local model (backend "
            f"{entry['backend']}); only {' and '.join(ENGINE_STEPS)} are answered by LLM "
            "engines. Serve it (`vlmrobust vllm-serve`) and give this step an inline "
            "setting (backend: openai, model, base_url)"
        )
    if entry.get("kind") != "llm":
        raise LLMRefError(
            f"config: {where}.llm: models.{mid} is a vision-language model (kind "
            f"{entry.get('kind', 'vlm')}); a step's local LLM is a `kind: llm` entry"
        )
    if (entry.get("resources") or {}).get("gpu") is None:
        raise LLMRefError(
            f"config: {where}.llm: models.{mid}.resources.gpu is not declared in {source}: "
            "a local LLM's engines run on the GPUs its entry asks for (0 = on the CPU)"
        )


def resolve_llm_refs(config: dict[str, Any], registry: dict[str, Any], source: str) -> None:
    """Replace, in place, every setting of ``config`` that names a registry LLM by the
    setting the step reads (:func:`resolved_setting`); an evaluated model of ``kind:
    llm`` is an error. ``registry`` is the validated registry (``{"models": ...}``)."""
    models = registry["models"]
    for mid in config.get("models") or []:
        if models.get(mid, {}).get("kind") == "llm":
            raise LLMRefError(
                f"config: models: {mid!r} is a `kind: llm` model of {source} (a judge, "
                "extractor or writer), not a model the run evaluates"
            )
    for where, setting in list(llm_settings(config)):
        resolved = resolved_setting(setting, where, models, source)
        setting.clear()
        setting.update(resolved)

"""Model registry entries as the workflow's inference jobs use them.

An inference job carries only the registry keys its outputs depend on
(:func:`inference_fields`), so editing a display name, a family, a role, a pair or a
study list reruns no inference (Snakemake reruns a job whose params changed). What a
job asks of the machine comes from the entry's ``resources``
(:func:`model_resources`).
"""

from __future__ import annotations

from typing import Any

from .harness import CHAT_WRAPPED_PROMPTS, HARNESS_TASKS

#: How a local checkpoint decodes (registry ``options.generation_config``, run config
#: ``datasets.<name>.generation_config``): ``explicit`` = only the request's fields
#: (greedy, or temperature/top-p sampling; every other field neutral), ``checkpoint`` =
#: the checkpoint's ``generation_config.json`` fills the fields the request does not set,
#: as ``transformers``' ``model.generate`` and vLLM's ``generation_config="auto"`` do.
GENERATION_CONFIGS = ("explicit", "checkpoint")


def generation_config_of(spec: dict[str, Any], override: str | None = None, who: str = "?") -> str:
    """The generation-config choice of a job: ``override`` (a dataset's), else the
    registry entry's ``options.generation_config``, else ``explicit``; a ValueError
    naming ``who`` for another value."""
    value = override
    if value is None:
        value = (spec.get("options") or {}).get("generation_config")
    value = "explicit" if value is None else value
    if value not in GENERATION_CONFIGS:
        raise ValueError(
            f"{who}: generation_config must be one of {', '.join(GENERATION_CONFIGS)}, "
            f"got {value!r}"
        )
    return str(value)


__all__ = [
    "API_BACKENDS",
    "HARNESS_KEYS",
    "INFERENCE_KEYS",
    "LOCAL_BACKENDS",
    "RESOURCE_DEFAULTS",
    "inference_fields",
    "model_kind",
    "model_resources",
]

#: Backends that run a checkpoint on this machine (an engine job per share of its
#: cells: vlmrobust.infer.engine) / call an API (rule ``infer``, one job per cell).
LOCAL_BACKENDS = ("hf", "vllm")
API_BACKENDS = ("openai", "gemini")

#: Registry keys that change what a model answers: the checkpoint (hf_repo /
#: local_path / api_model / base_url), its revision, the backend and its options, the
#: name of the API key's variable (never the key), and the demo model's seed (the
#: weights of an embedded demo model). Display name, family, role, base, studies and
#: resources are left out: they change tables and job sizes, never an answer.
INFERENCE_KEYS = (
    "backend",
    "hf_repo",
    "local_path",
    "api_model",
    "base_url",
    "revision",
    "api_key_env",
    "demo_seed",
    "options",
)

#: Registry keys that only the harness prompt settings read (``harness``: the
#: lmms-eval model a model was run as; :mod:`vlmrobust.core.harness`): a job's
#: ``model_spec`` carries them only for those prompts, so naming a harness reruns no
#: job of another prompt.
HARNESS_KEYS = ("harness",)

#: Resources of an inference job where the registry leaves them null, by kind of
#: model (:func:`model_kind`): gpu (count), mem_mb (MB), runtime (minutes).
RESOURCE_DEFAULTS: dict[str, dict[str, int]] = {
    "local": {"gpu": 1, "mem_mb": 64000, "runtime": 720},
    "api": {"gpu": 0, "mem_mb": 4000, "runtime": 720},
    "demo": {"gpu": 0, "mem_mb": 4000, "runtime": 60},
}


def inference_fields(spec: dict[str, Any], prompt: str | None = None) -> dict[str, Any]:
    """The part of a registry entry an inference job depends on (``INFERENCE_KEYS``;
    null keys left out): the job's ``model_spec``, all that the backends read; for a
    harness prompt setting (``prompt`` in :data:`~vlmrobust.core.harness.HARNESS_TASKS`)
    or one the papers sent through lmms-eval's chat wrapper
    (:data:`~vlmrobust.core.harness.CHAT_WRAPPED_PROMPTS`, which takes its system
    message) also ``HARNESS_KEYS``, which its builder reads."""
    reads_harness = prompt in HARNESS_TASKS or prompt in CHAT_WRAPPED_PROMPTS
    keys = INFERENCE_KEYS + (HARNESS_KEYS if reads_harness else ())
    return {k: spec[k] for k in keys if spec.get(k) is not None}


def model_kind(spec: dict[str, Any]) -> str:
    """``demo`` (an embedded demo model, CPU), ``api`` or ``local`` (a checkpoint)."""
    if spec.get("demo_seed") is not None:
        return "demo"
    return "api" if spec.get("backend") in API_BACKENDS else "local"


def model_resources(spec: dict[str, Any]) -> dict[str, int]:
    """The entry's ``resources`` with null keys filled from ``RESOURCE_DEFAULTS``."""
    defaults = RESOURCE_DEFAULTS[model_kind(spec)]
    given = spec.get("resources") or {}
    return {k: given[k] if given.get(k) is not None else v for k, v in defaults.items()}

"""The inference side of the run plan: which backend answers a cell, an inference job's
spec (decoding, draws, pixel limits), a model's own files and resources, the outputs
files, and the demo models' builds (rules ``infer``, ``demo_model``; the engines of
:mod:`vlmrobust.plan.engines` answer with the same specs).
"""

from __future__ import annotations

from typing import Any

from ..core import paths
from ..core.config import switch_backend
from ..core.paths import path
from ..core.prompts import PROMPTS, prompt_versions
from ..core.registry import LOCAL_BACKENDS, inference_fields, model_resources
from .data import files_under
from .scope import RunPlan

# ---------------------------------------------------------------------- models


def local_models(plan: RunPlan) -> list[str]:
    """Registry models answered by a local checkpoint (backends hf, then vllm): engine
    jobs on their own GPUs."""
    return [m for b in LOCAL_BACKENDS for m, spec in plan.registry.items() if spec["backend"] == b]


def api_models(plan: RunPlan) -> list[str]:
    """Registry models answered through an API (rule ``infer``, one job per cell)."""
    return [m for m, spec in plan.registry.items() if spec["backend"] not in LOCAL_BACKENDS]


def demo_models(plan: RunPlan) -> list[str]:
    """Registry models built by the ``demo_model`` job (a ``demo_seed``)."""
    return [m for m, spec in plan.registry.items() if spec["demo_seed"] is not None]


def model_resource(plan: RunPlan, model: str, name: str) -> Any:
    """A resource of ``model``'s jobs (gpu, mem_mb, runtime) from its registry entry
    (``resources``; null: the kind's default, :func:`model_resources`)."""
    return model_resources(plan.registry[model])[name]


def model_files(plan: RunPlan, model: str) -> list[str]:
    """What a model's answers depend on besides its registry entry: a demo model's
    build record (its job builds the checkpoint), else every file of a local
    checkpoint folder (``local_path``) as it is now, so that weights replaced at the
    same path rerun the model's jobs; [] for a model loaded by name."""
    entry = plan.registry[model]
    if entry.get("demo_seed") is not None:
        return [path(paths.MODEL_RECORD, model=model)]
    if entry.get("local_path"):
        return files_under(entry["local_path"])
    return []


def cell_backend(plan: RunPlan, model: str, dataset: str) -> str:
    """The backend ``model`` answers ``dataset`` with: the registry's, or with config
    ``engines: papers`` the engine the dataset's paper ran (``papers_engine``) for a
    local model (backends hf, vllm) where the dataset names one."""
    backend = plan.registry[model]["backend"]
    if backend in LOCAL_BACKENDS and plan.config["engines"] == "papers":
        return plan.datasets[dataset].get("papers_engine") or backend
    return backend


def model_backends(plan: RunPlan, model: str) -> list[str]:
    """The backends ``model``'s cells are answered with, the registry's first."""
    own = plan.registry[model]["backend"]
    found = {cell_backend(plan, model, d) for d in plan.datasets if model in plan.models_of(d)}
    return [own] + sorted(found - {own})


# ---------------------------------------------------------------------- outputs


def output_files(plan: RunPlan, model: str) -> list[str]:
    """Gathered outputs of one model: each cell it answers (none for a verdicts-only
    import)."""
    return [key.path(paths.OUTPUTS) for key in plan.cells(models=[model])]


def infer_context(
    plan: RunPlan, model: str, dataset: str, condition: str, prompt: str
) -> list[str]:
    """A second-stage prompt's input: the same model's first-stage outputs (CRM)."""
    needs = PROMPTS[prompt].needs if prompt in PROMPTS else None
    if needs is None:
        return []
    return [path(paths.OUTPUTS, model=model, dataset=dataset, condition=condition, prompt=needs)]


# ---------------------------------------------------------------------- decoding


def prompt_decoding(plan: RunPlan, prompt: str, dataset: str) -> dict[str, Any]:
    """What ``datasets.<d>.prompt_decoding`` sets for ``prompt`` ({} = nothing)."""
    own = (plan.datasets[dataset].get("prompt_decoding") or {}).get(prompt) or {}
    return {k: v for k, v in own.items() if v is not None}


def stage_decoding(plan: RunPlan, prompt: str, dataset: str) -> tuple[float, int]:
    """(temperature, max_new_tokens) of a prompt on a dataset: the prompt's own on
    that dataset (``datasets.<d>.prompt_decoding.<prompt>``) first; then the CRM
    stages have their own (config ``masking``), every other prompt the dataset's own
    settings (``datasets.<d>.temperature``, ``max_new_tokens``), else the run's
    ``decoding``."""
    decoding, masking = plan.config["decoding"], plan.config["masking"]
    ds = plan.datasets[dataset]
    tokens = ds["max_new_tokens"] or decoding["max_new_tokens"]
    own = prompt_decoding(plan, prompt, dataset)
    if prompt == masking["cot_prompt"]:
        temperature = masking["cot_temperature"]
        tokens = masking["cot_max_new_tokens"] or tokens
    elif prompt == masking["answer_prompt"]:
        temperature = masking["answer_temperature"]
        tokens = masking["answer_max_new_tokens"] or tokens
    else:
        temperature = decoding["temperature"] if ds["temperature"] is None else ds["temperature"]
    return own.get("temperature", temperature), int(own.get("max_new_tokens", tokens))


def draws(plan: RunPlan, dataset: str, prompt: str | None = None) -> tuple[int, float]:
    """(draws per question, top-p) of a dataset, or of one prompt on it: the prompt's
    own (``prompt_decoding``), else the dataset's, else the run's ``decoding``."""
    decoding, ds = plan.config["decoding"], plan.datasets[dataset]
    own = prompt_decoding(plan, prompt, dataset) if prompt is not None else {}
    n = ds["n"] if ds["n"] is not None else decoding["n"]
    top_p = ds["top_p"] if ds["top_p"] is not None else decoding["top_p"]
    return int(own.get("n", n)), float(own.get("top_p", top_p))


def pixel_limits(plan: RunPlan, model: str, dataset: str) -> dict[str, Any] | None:
    """The pixel limits a dataset shows ``model``'s images at instead of the
    registry's ``options.min_pixels`` / ``max_pixels``: with ``datasets.<d>.pixels:
    harness``, the defaults of the lmms-eval chat wrapper the model was run through
    (``harness.lmms_eval``; :func:`vlmrobust.core.harness.harness_pixels`; None for a
    model without one); with ``datasets.<d>.fit: qwen-vl-utils``, only the resize
    before the processor (``fit``: :func:`vlmrobust.core.harness.vision_utils_fit`,
    the registry's limits kept) for a model whose images the workflow hands a
    processor (backends hf, vllm; openai with a ``base_url``); None (the model's
    own) otherwise."""
    spec = plan.datasets[dataset]
    if spec.get("pixels") == "harness":
        from ..core.harness import harness_pixels

        return harness_pixels(plan.registry[model])
    backend = cell_backend(plan, model, dataset)
    served = backend == "openai" and bool(plan.registry[model].get("base_url"))
    if spec.get("fit") != "qwen-vl-utils" or not (backend in LOCAL_BACKENDS or served):
        return None
    from ..core.harness import vision_utils_fit

    return {"fit": vision_utils_fit()}


def infer_spec(
    plan: RunPlan,
    model: str,
    dataset: str,
    prompt: str,
    shard: int | str = 0,
    shards: int | str = 1,
) -> dict[str, Any]:
    """The inference job (:class:`vlmrobust.infer.run.Job`): only what changes its
    outputs, so editing a model's display name, family, role, base or studies reruns
    no inference (:func:`vlmrobust.core.registry.inference_fields`)."""
    ds = plan.datasets[dataset]
    temperature, max_new_tokens = stage_decoding(plan, prompt, dataset)
    n, top_p = draws(plan, dataset, prompt)
    model_spec = inference_fields(plan.registry[model], prompt)
    backend = cell_backend(plan, model, dataset)
    if backend != model_spec["backend"]:  # config `engines: papers`
        model_spec = switch_backend(model_spec, backend)
    spec = {
        "model": model,
        "model_spec": model_spec,
        "prompt": prompt,
        "prompt_versions": prompt_versions(prompt, ds["adapter"]),
        "adapter": ds["adapter"],
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "n": n,
        "seed": plan.config["seed"],
        "shard": int(shard),
        "shards": int(shards),
    }
    if ds["image_size"] is not None:
        spec["image_size"] = int(ds["image_size"])
    # only where the dataset chooses: a job of the model's own choice (the
    # registry's options.generation_config, part of model_spec) keeps its spec
    if ds.get("generation_config") is not None:
        spec["generation_config"] = str(ds["generation_config"])
    # only where the dataset sets limits for this model: the others keep their spec
    pixels = pixel_limits(plan, model, dataset)
    if pixels is not None:
        spec["pixels"] = pixels
    return spec


# ---------------------------------------------------------------------- demo models


def demo_init(plan: RunPlan, model: str) -> str | None:
    """The checkpoint a demo model starts training from: a reasoning demo model whose
    base is a demo model is fine-tuned from the base's trained weights."""
    spec = plan.registry[model]
    base = spec.get("base")
    if spec.get("role") == "reasoning" and base and plan.registry[base]["demo_seed"] is not None:
        return str(plan.registry[base]["local_path"])
    return None


def demo_model_spec(plan: RunPlan, model: str) -> dict[str, Any]:
    """How the demo model ``model`` is built (the ``demo_model`` job, ``vlmrobust
    demo-model --spec``): its seed, the pixel limits it is evaluated with, and
    unless ``demo.train.enabled`` is false the training split, the training
    settings (``direct`` answers for a base model, ``think`` traces for a reasoning
    one) and the checkpoint it starts from."""
    spec = plan.registry[model]
    if spec["demo_seed"] is None:
        raise ValueError(f"models.{model}: not a demo model (it has no demo_seed)")
    options = spec.get("options") or {}
    out: dict[str, Any] = {
        "seed": spec["demo_seed"],
        "options": {k: options[k] for k in ("min_pixels", "max_pixels") if k in options},
        "train_dir": None,
        "train": None,
        "init": None,
    }
    if spec.get("demo_sizes"):  # only where set: the default models' spec is unchanged
        out["sizes"] = dict(spec["demo_sizes"])
    if spec.get("demo_twin"):  # a family's twin: random weights, never trained
        out["twin"] = spec["demo_twin"]
        return out
    train = plan.config["demo"]["train"]
    if not train["enabled"]:
        return out
    init = demo_init(plan, model)
    out["train_dir"] = paths.DEMO_TRAIN_ROOT
    out["init"] = init
    out["train"] = {
        "steps": train["reasoning_steps"] if init else train["steps"],
        "pretrain_steps": 0 if init else train["pretrain_steps"],
        "schedule": train["schedule"],
        "batch_size": train["batch_size"],
        "lr": train["lr"],
        "warmup": 0 if init else train["warmup"],
        "threads": train["threads"],
        "style": "think" if spec.get("role") == "reasoning" else "direct",
        "weights": dict(train["weights"]),
    }
    return out


def demo_model_inputs(plan: RunPlan, model: str) -> list[str]:
    """What the ``demo_model`` job reads: the training split and the initial checkpoint."""
    spec = demo_model_spec(plan, model)
    inputs = []
    if spec["train"] is not None:
        inputs.append(paths.DEMO_TRAIN_SUMMARY)
    if spec["init"] is not None:
        inputs.append(f"{spec['init']}/vlmrobust_demo.json")
    return inputs

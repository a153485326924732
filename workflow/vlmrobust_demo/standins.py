"""Stand-ins for the papers' run: config/paper.yaml at small size, on this machine.

:func:`stand_in_run` reads a run configuration (config/paper.yaml) and its model
registry and returns a configuration and a registry that keep what the run is made of
and replace only what this machine cannot reach:

- **models**: every model of the run (and the base a reasoning model names) is answered
  by a demo-sized checkpoint of its own (random weights, a distinct ``demo_seed`` per
  model, built by the workflow's ``demo_model`` job): a checkpoint of a paper model
  family with a twin (:mod:`vlmrobust_demo.twins`: Qwen2.5-VL, Qwen3-VL, GLM-4.1V,
  Intern-S1, Llama-3.2-Vision) is that family's twin (``demo_twin``), so each family's
  real model, processor and template code runs; the others a tiny Qwen2-VL. Under the same
  id, name, family, role, base and studies, with the model's registry ``resources``
  as they were (filled from its kind's defaults where the registry leaves them out: 1
  GPU, 64,000 MB, 720 min for a checkpoint; 4 GPUs for Llama-3.2-90B; no GPU for an API
  model). A checkpoint model keeps its backend (``hf``; ``vllm`` gets the vLLM CPU
  build's recipe, attention heads of 32); an API model becomes ``hf``, so it has
  engines too, on no GPU.
- **datasets**: the same names, models, conditions, prompts, draws and sampling. Those
  read from the hub or from folders this machine does not have come from the demo's
  families (a family per benchmark, ``DEMO_FAMILY``) and the demo's Idis slice
  (``IDIS_FOLDER``); MATH-V and LogicVista from the real copies in ``shared_data``
  (``SHARED_FOLDER``). Distract-Bench becomes the demo's constructed distraction
  benchmark (the construction ``demo-distract`` from three demo families, reviewed in
  resources/distraction/demo-decisions.csv). Every answered dataset keeps at most
  ``rows`` samples (``limit``).
- **conditions**: those the datasets name; the released Idis images (``idis-release``,
  a download) become the same kind of distractor built offline (``IDIS_CONDITIONS``).
- **judges and writers**: a step whose setting names a local registry LLM (``llm:
  gpt-oss-120b``, ``llm: qwen3.5-27b``) keeps it, answered by that LLM's engine jobs:
  the LLM becomes a demo-built random-weight text twin of its family
  (:data:`LLM_TWINS`, with its registry ``resources``; its answers at most
  ``max_new_tokens`` long, and at least :data:`JUDGE_TOKENS`); every other LLM step (an API) becomes the offline one,
  under the same names.
- **sizes**: ``max_new_tokens`` (decoding, each dataset that sets its own, the
  masking stages, attention blocking) at most ``max_new_tokens``, and the sampled draws
  per question (``n``: 5, or 64 for ImageNet-9's App. D.3 run) at most ``max_draws``. A
  random-weight model seldom ends early, so every answer is about that long: the work
  per row is known, and the run's size is set by ``rows``, ``max_draws`` and this (an
  Idis distractor condition still gives each sample several variants).

Deterministic: the same inputs give the same files, and the run they describe gives
byte-identical tables and figures (tests/test_cluster.py, benchmarks/bench_cluster.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from vlmrobust.core.registry import model_resources

#: The demo family that stands in for each benchmark read from the hub (its layout:
#: charts, yes/no questions, text in images, diagrams, objects, geometry).
DEMO_FAMILY = {
    "chartqa": "chart",
    "hallusionbench": "yesno",
    "infovqa": "text",
    "mmmu": "diagram",
    "mmstar": "objects",
    "textvqa": "text",
    "mathvista": "geometry",
    "visargs": "premises",
}
#: The demo's Idis slice (results/raw/demo-idis/<folder>, the base datasets' formats).
IDIS_FOLDER = {"imagenet9": "imagenet9", "mathverse": "mathverse", "waterbirds": "waterbirds"}
#: The real benchmarks on this machine (docs/real-data.md), by adapter.
SHARED_FOLDER = {"mathvision": "mathvision", "logicvista": "logicvista/data"}
#: The released Idis conditions (downloads) as the same distractors built offline.
IDIS_CONDITIONS: dict[str, dict[str, Any]] = {
    "idis-visual": {"perturbation": "objects", "segments": "results/raw/demo-idis/segments"},
    "idis-typographic": {"perturbation": "typographic", "classes": 1},
    "idis-math-visual": {
        "perturbation": "diagram",
        "irrelevant_samples": "results/samples/logicvista/samples.jsonl",
    },
    "idis-math-typographic": {
        "perturbation": "handwritten",
        "source": "folder",
        "path": "results/raw/demo-idis/handwritten",
        "name": "handwritten",
    },
    "idis-math-textual": {"perturbation": "textual"},
}
#: The demo's distraction benchmark: a construction from three demo families, and the
#: human verdicts shipped for its candidates.
CONSTRUCTION = "demo-distract"
CONSTRUCTION_SOURCES = {
    "demo-diagram": "diagram",
    "demo-chart": "chart",
    "demo-geometry": "geometry",
}
DECISIONS = "resources/distraction/demo-decisions.csv"
#: Dataset keys that name where the rows come from, dropped when the source changes.
SOURCE_KEYS = ("adapter", "source", "path", "split", "hub_config", "hub_repo", "expected_size")
#: The demo checkpoints' inference options (as the registry's demo models).
DEMO_OPTIONS = {"batch_size": 8, "min_pixels": 3136, "max_pixels": 50176}
VLLM_OPTIONS = {
    **DEMO_OPTIONS,
    "dtype": "float32",
    "max_model_len": 2048,
    "enforce_eager": True,
    "engine": {"kv_cache_memory_bytes": 1 << 30},
}
#: The first stand-in's demo_seed (the registry's own demo models use 1-4).
FIRST_SEED = 101
#: The text twin standing in for a local LLM of each registry family: a Qwen3 dense twin
#: for all. Qwen3.5's own architecture has no twin; the gpt-oss twin runs (its family's
#: classes, Harmony rendering and parsing: tests/test_llm_engines.py), but with random
#: weights it writes no Harmony channel, so a server parses no answer out of it (every
#: call fails): a judge stand-in must answer something to be checked.
LLM_TWINS = {"gpt-oss": "qwen3", "qwen3": "qwen3", "qwen3.5": "qwen3"}
#: The least output budget of a stand-in LLM judge: its JSON answer must have room to
#: close (at the runs' 16 tokens a twin's string field ended and the object did not).
JUDGE_TOKENS = 64
#: The vLLM CPU build's recipe for a text twin (as VLLM_OPTIONS, no images).
LLM_VLLM_OPTIONS = {
    "dtype": "float32",
    "max_model_len": 2048,
    "enforce_eager": True,
    # without any-whitespace JSON: a random-weight twin would write blanks to its budget
    "engine": {
        "kv_cache_memory_bytes": 1 << 30,
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    },
}


def local_llms(config: dict[str, Any], registry: dict[str, dict[str, Any]]) -> list[str]:
    """The local registry LLMs (backend vllm or hf) the run's judges name (``llm:``)."""
    from vlmrobust.core.llms import is_engine_step, llm_settings

    found = []
    for where, setting in llm_settings(config.get("judge") or {}, "judge"):
        entry = registry.get(setting["llm"]) or {}
        if entry.get("backend") in ("vllm", "hf") and is_engine_step(where):
            found.append(setting["llm"])
    return sorted(set(found))


def stand_in_llms(llms: list[str], registry: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A demo-built text twin for each local LLM, by id, with its registry resources."""
    out = {}
    for i, model in enumerate(llms):
        spec = registry[model]
        vllm = spec["backend"] == "vllm"
        twin = LLM_TWINS.get(str(spec.get("family")), "qwen3")
        entry = {
            "kind": "llm",
            "name": spec.get("name", model),
            "local_path": f"results/models/{model}",
            "demo_seed": FIRST_SEED + 50 + i,
            "demo_twin": twin,
            "backend": "vllm" if vllm else "hf",
            "family": spec.get("family"),
            "options": copy.deepcopy(LLM_VLLM_OPTIONS) if vllm else {},
            "resources": model_resources(spec),
        }
        out[model] = {k: v for k, v in entry.items() if v is not None}
    return out


def stand_in_models(
    models: list[str], registry: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """A demo checkpoint of its own for each model (and base) of the run, by id."""
    wanted = list(models)
    for model in models:
        base = registry[model].get("base")
        if base and base not in wanted:
            wanted.append(base)
    from .twins import TWIN_FAMILIES

    out = {}
    for i, model in enumerate(wanted):
        spec = registry[model]
        vllm = spec["backend"] == "vllm"
        twin = spec.get("family") if spec.get("family") in TWIN_FAMILIES else None
        entry = {
            "name": spec.get("name", model),
            "local_path": f"results/models/{model}",
            "demo_seed": FIRST_SEED + i,
            "demo_twin": twin,
            "backend": "vllm" if vllm else "hf",
            "family": spec.get("family"),
            "role": spec.get("role"),
            "base": spec.get("base"),
            "studies": spec.get("studies"),
            "options": _options(spec, vllm, twin),
            # what the paper's model asks of the machine, filled from its own kind
            "resources": model_resources(spec),
        }
        if vllm and twin is None:
            entry["demo_sizes"] = {"head_dim": 32}
        out[model] = {k: v for k, v in entry.items() if v is not None}
    return out


def _options(spec: dict[str, Any], vllm: bool, twin: str | None) -> dict[str, Any]:
    """A stand-in's inference options: the CPU engine's (demo pixel limits); a twin
    keeps the paper model's chat-template switches and takes pixel limits only where
    the paper model sets them (a tiling processor, Intern-S1's or Llama's, has none)."""
    options = copy.deepcopy(VLLM_OPTIONS if vllm else DEMO_OPTIONS)
    if twin is None:
        return options
    own = spec.get("options") or {}
    if "min_pixels" not in own and "max_pixels" not in own:
        options.pop("min_pixels")
        options.pop("max_pixels")
        if vllm:  # the processor's own limits: up to 13 tiles (Intern-S1), 5,350 tokens (GLM)
            options["max_model_len"] = 8192
    if own.get("chat_template_kwargs"):
        options["chat_template_kwargs"] = copy.deepcopy(own["chat_template_kwargs"])
    return options


def _source(name: str, spec: dict[str, Any], shared: Path) -> dict[str, Any]:
    """Where a dataset's rows come from here (keys of SOURCE_KEYS, plus decisions)."""
    adapter = spec.get("adapter", name)
    if adapter in SHARED_FOLDER:
        folder = shared / SHARED_FOLDER[adapter]
        if not folder.is_dir():
            raise FileNotFoundError(f"datasets.{name}: the real data is not at {folder}")
        out = {"adapter": adapter, "source": "local", "path": str(folder)}
        return out | ({"split": spec["split"]} if spec.get("split") else {})
    if adapter in IDIS_FOLDER:
        return {"adapter": adapter, "source": "local", "path": f"results/raw/demo-idis/{adapter}"}
    if adapter == "distract-bench":
        path = f"results/construct/{CONSTRUCTION}"
        return {"adapter": "constructed", "source": "local", "path": path, "decisions": DECISIONS}
    if adapter in DEMO_FAMILY:
        # VisArgs reads the premises family with its own adapter (one sample per premise)
        reader = "visargs" if adapter == "visargs" else "demo"
        path = f"results/raw/demo/{DEMO_FAMILY[adapter]}"
        return {"adapter": reader, "source": "local", "path": path}
    raise ValueError(f"datasets.{name}: no stand-in for adapter {adapter!r}")


def stand_in_datasets(
    datasets: dict[str, dict[str, Any]], shared: Path, sizes: dict[str, int]
) -> dict[str, dict[str, Any]]:
    """The run's datasets, read from here, ``sizes["rows"]`` samples each (pools
    uncapped), at most ``max_draws`` draws and ``max_new_tokens`` tokens."""
    out = {}
    for name, spec in datasets.items():
        entry = {k: v for k, v in spec.items() if k not in SOURCE_KEYS and k != "image_cache"}
        entry = _source(name, spec, shared) | entry
        if entry.get("models") != []:  # an answered dataset (a pool is read whole)
            entry["limit"] = min(sizes["rows"], entry.get("limit") or sizes["rows"])
        for key, cap in (("max_new_tokens", "max_new_tokens"), ("n", "max_draws")):
            if key in entry:
                entry[key] = min(entry[key], sizes[cap])
        out[name] = entry
    if any(d["adapter"] == "constructed" for d in out.values()):
        for name, family in CONSTRUCTION_SOURCES.items():
            out[name] = {
                "adapter": "demo",
                "source": "local",
                "path": f"results/raw/demo/{family}",
                "models": [],
                "conditions": ["clean"],
            }
    return out


def stand_in_conditions(config: dict[str, Any], datasets: dict[str, Any]) -> dict[str, Any]:
    """The conditions the datasets name, the released Idis ones built offline."""
    used = {c for spec in datasets.values() for c in spec.get("conditions", [])}
    out = {}
    for name, spec in config["conditions"].items():
        if name not in used:
            continue
        if spec.get("perturbation") == "idis-release":
            if name not in IDIS_CONDITIONS:
                raise ValueError(f"conditions.{name}: no offline stand-in for this release")
            spec = IDIS_CONDITIONS[name]
        out[name] = copy.deepcopy(spec)
    return out


def _stand_in_judge(setting: dict[str, Any], llms: list[str], max_new_tokens: int) -> dict:
    """A judge's setting here: its local LLM's twin (answers capped), else offline."""
    if setting.get("llm") in llms:
        keep = {k: v for k, v in setting.items() if k in ("llm", "prompt", "temperature")}
        # room for the judge's JSON object to close (its string fields take the rest)
        return {**keep, "max_tokens": max(JUDGE_TOKENS, max_new_tokens)}
    return {"backend": "offline"}


def _offline_steps(
    config: dict[str, Any], max_new_tokens: int, llms: list[str] = ()
) -> dict[str, Any]:
    """Judges and writers offline (same names) but those of a local LLM, generation
    lengths capped."""
    out: dict[str, Any] = {}
    masking = copy.deepcopy(config.get("masking") or {})
    masking["hallucination"] = {"backend": "offline", "threshold": 0.6}
    masking["cot_max_new_tokens"] = max_new_tokens
    masking["answer_max_new_tokens"] = max_new_tokens
    out["masking"] = masking
    judge = copy.deepcopy(config.get("judge") or {})
    if "mathverse" in judge:
        judge["mathverse"] = _stand_in_judge(judge["mathverse"], llms, max_new_tokens)
    extractors = (judge.get("attributes") or {}).get("extractors") or {}
    for name, setting in extractors.items():
        extractors[name] = _stand_in_judge(setting, llms, max_new_tokens)
    out["judge"] = judge
    idis = copy.deepcopy(config.get("idis") or {})
    blocking = idis.get("blocking")
    if blocking and blocking.get("max_new_tokens"):
        blocking["max_new_tokens"] = min(blocking["max_new_tokens"], max_new_tokens)
    out["idis"] = idis
    decoding = copy.deepcopy(config.get("decoding") or {})
    decoding["max_new_tokens"] = min(decoding.get("max_new_tokens", max_new_tokens), max_new_tokens)
    out["decoding"] = decoding
    return out


def stand_in_run(
    config: dict[str, Any],
    registry: dict[str, dict[str, Any]],
    *,
    registry_file: str,
    shared: Path,
    rows: int = 2,
    max_new_tokens: int = 16,
    max_draws: int = 2,
    only: list[str] | None = None,
    llms: list[str] = (),
) -> dict[str, Any]:
    """The stand-in configuration of ``config`` (see the module's docstring); its
    registry is written to ``registry_file`` by the caller (``stand_in_models``).
    ``only``: these of the run's datasets (their real data alone is then needed);
    ``llms``: the local LLMs of its judges (:func:`local_llms`), kept as twins."""
    sizes = {"rows": rows, "max_new_tokens": max_new_tokens, "max_draws": max_draws}
    chosen = config["datasets"]
    if only is not None:
        unknown = sorted(set(only) - set(chosen))
        if unknown:
            raise ValueError(f"--datasets: {', '.join(unknown)} not in the run's datasets")
        chosen = {name: spec for name, spec in chosen.items() if name in only}
    datasets = stand_in_datasets(chosen, shared, sizes)
    out = {k: copy.deepcopy(v) for k, v in config.items() if k not in ("datasets", "conditions")}
    out["model_registry"] = registry_file
    out.update(_offline_steps(config, max_new_tokens, llms))
    attributes = out["judge"].get("attributes") or {}
    if attributes.get("datasets") is not None:  # those of the datasets kept
        attributes["datasets"] = [d for d in attributes["datasets"] if d in datasets]
    out["conditions"] = stand_in_conditions(config, datasets)
    out["datasets"] = datasets
    if any(d["adapter"] == "constructed" for d in datasets.values()):
        sources = list(CONSTRUCTION_SOURCES)
        out["construct"] = {CONSTRUCTION: {"from": sources, "limit_per_dataset": 3}}
    n_per_family = max(rows, 20)  # the construction's verdicts cover the first 20
    out["demo"] = {"n_per_family": n_per_family, "image_size": 384, "train": {"enabled": False}}
    return out


def write_stand_ins(
    config_file: str, out: Path, shared: Path, only: list[str] | None = None, **sizes: int
) -> tuple[Path, Path]:
    """Write ``out/config.yaml`` and ``out/models.yaml``: the stand-ins of the run
    ``config_file`` (paths in them are relative to the folder the run starts in);
    ``only``: these of its datasets."""
    import yaml

    from vlmrobust.core.config import load_yaml, validate_registry

    config = load_yaml(config_file)
    registry_file = config.get("model_registry", "config/models.yaml")
    registry = validate_registry(load_yaml(registry_file), registry_file)["models"]
    out.mkdir(parents=True, exist_ok=True)
    config_out, registry_out = out / "config.yaml", out / "models.yaml"
    llms = local_llms(config, registry)
    run = stand_in_run(
        config,
        registry,
        registry_file=str(registry_out),
        shared=shared,
        only=only,
        llms=llms,
        **sizes,
    )
    models = {**stand_in_models(config["models"], registry), **stand_in_llms(llms, registry)}
    header = f"# Stand-ins of {config_file} (vlmrobust demo-standins; vlmrobust_demo/standins.py)\n"
    registry_out.write_text(header + yaml.safe_dump({"models": models}, sort_keys=False))
    config_out.write_text(header + yaml.safe_dump(run, sort_keys=False))
    return config_out, registry_out

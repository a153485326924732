"""The forecast's stated numbers: four YAML files beside this module, each number with
its source (docs/forecast.md prints them).

- ``generation.yaml``: mean generated tokens per request, as rules matched on a
  request's benchmark (the dataset's adapter), the model's role (``direct`` for a
  registry ``role: base``, ``reasoning``), family, model id and prompt setting
  (:func:`generated_rule`: the rule matching the most keys wins, the later of equals);
- ``throughput.yaml``: per model class, an engine's prompt and generated tokens per
  second on the stated GPU, how much more a vision token costs than a text token,
  the engine's start-up; the GPU types' speeds relative to it; which class each model
  (or family) is in (:func:`throughput_class`);
- ``images.yaml``: per benchmark, the image size, images per sample and question length
  assumed while neither the samples nor a local copy of the data are there;
- ``disk.yaml``: stored bytes per pixel of a variant image, per perturbation and
  ``variants.format``; and (``explorer:``) the measured bytes of the explorer's files:
  a thumbnail, a variant's entry, a row, an output's text entry, a generated token;
- ``calls.yaml``: what the judges', extractors' and writers' LLM calls hold besides their
  prompt files, and the LLMs' hidden reasoning (read by :mod:`.calls` and :mod:`.money`).

A lookup that finds nothing is an error naming the file and the key to add
(:class:`MissingEntry`), never a silent zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
#: the keys a generation rule may match on, besides ``tokens`` and ``source``
RULE_KEYS = ("benchmark", "role", "family", "model", "prompt")


class MissingEntry(ValueError):
    """A forecast table has no entry for something the run needs."""


@cache
def load_table(name: str) -> dict[str, Any]:
    """One table (``generation``, ``throughput``, ``images``, ``disk``, ``calls``) as read."""
    path = HERE / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a forecast table is a mapping")
    return data


@dataclass(frozen=True)
class Generated:
    """Mean generated tokens of a request and where the number comes from."""

    tokens: float
    source: str


def generated_rule(request: dict[str, str | None]) -> Generated:
    """The generation rule for ``request`` (its ``benchmark``, ``role``, ``family``,
    ``model``, ``prompt``): of the rules whose every key matches, the one with the most
    keys (the later of equals)."""
    best, best_n = None, -1
    for rule in load_table("generation")["rules"]:
        keys = [k for k in RULE_KEYS if k in rule]
        if all(request.get(k) == rule[k] for k in keys) and len(keys) >= best_n:
            best, best_n = rule, len(keys)
    if best is None:
        raise MissingEntry(
            f"forecast/generation.yaml: no rule matches {request}; add one (at least a "
            f"`role: {request.get('role')}` rule)"
        )
    return Generated(float(best["tokens"]), str(best["source"]))


@dataclass(frozen=True)
class Throughput:
    """One model class on one GPU type: an engine's rates (module docstring)."""

    name: str
    prompt_tok_s: float | None  # None: prompt time included in gen_tok_s
    gen_tok_s: float
    vision_factor: float
    startup_s: float
    gpu: str
    sources: dict[str, str]


def throughput_class(
    model: str, entry: dict[str, Any], gpu: str | None = None, backend: str | None = None
) -> Throughput:
    """The class of ``model`` (by id, else by its registry ``family``) on ``gpu`` (a key
    of ``gpu_types``; None: the table's own GPU); a model in no class, or an unknown
    GPU type, is an error naming the key to add. A checkpoint the workflow builds
    (registry ``demo_seed``) is demo-sized whatever its id or family: it takes the
    ``demo`` family's class (the stand-ins of the papers' run keep the paper models'
    ids and families, not their size). ``backend`` (None: the entry's) scales a GPU
    class's vLLM rates by the table's ``backends`` factors (transformers' padded
    batches: ``hf``)."""
    table = load_table("throughput")
    demo = table["families"].get("demo") if entry.get("demo_seed") is not None else None
    name = demo or table["models"].get(model) or table["families"].get(entry.get("family") or "")
    if name is None:
        raise MissingEntry(
            f"forecast/throughput.yaml: model {model!r} (family {entry.get('family')!r}) is in "
            "no class; add it under `models:` (or its family under `families:`)"
        )
    cls = table["classes"][name]
    gpu = gpu or table["gpu"]
    speed = table["gpu_types"].get(gpu)
    if speed is None:
        raise MissingEntry(
            f"forecast/throughput.yaml: gpu_types has no {gpu!r} "
            f"(known: {', '.join(table['gpu_types'])})"
        )
    on_cpu = cls.get("device") == "cpu"
    prompt, gen = cls.get("prompt_tok_s"), float(cls["gen_tok_s"])
    sources = {k: str(v) for k, v in (cls.get("sources") or {}).items()}
    if not on_cpu:  # a CPU class is measured on its own machine: no GPU scaling
        engine = _backend_factors(table, backend or entry.get("backend") or "vllm")
        prompt = None if prompt is None else float(prompt) * speed["prefill"] * engine["prefill"]
        gen *= float(speed["decode"]) * float(engine["decode"])
        if engine["decode"] != 1 or engine["prefill"] != 1:
            name = f"{name} ({backend or entry.get('backend')})"
            sources["backend"] = str(engine["source"])
    return Throughput(
        name=name,
        prompt_tok_s=None if prompt is None else float(prompt),
        gen_tok_s=gen,
        vision_factor=float(cls.get("vision_factor", 1.0)),
        startup_s=float(cls.get("startup_s", 0.0)),
        gpu="cpu" if on_cpu else gpu,
        sources=sources,
    )


def _backend_factors(table: dict[str, Any], backend: str) -> dict[str, Any]:
    """The table's ``backends`` entry of ``backend`` (a table without ``backends``: the
    classes' own rates); a backend it lacks is an error naming the key."""
    if "backends" not in table:
        return {"prefill": 1.0, "decode": 1.0, "source": "the class's own rates"}
    if backend not in table["backends"]:
        raise MissingEntry(
            f"forecast/throughput.yaml: backends has no {backend!r} "
            f"(known: {', '.join(table['backends'])})"
        )
    return table["backends"][backend]


def check_gpu_type(gpu: str | None) -> None:
    """An unknown ``--gpu-type`` is an error naming the known ones."""
    known = load_table("throughput")["gpu_types"]
    if gpu is not None and gpu not in known:
        raise MissingEntry(
            f"forecast/throughput.yaml: gpu_types has no {gpu!r} (known: {', '.join(known)})"
        )


def image_assumption(benchmark: str) -> dict[str, Any]:
    """The assumed images of a benchmark (``size``, ``images``, ``question_chars``,
    ``source``); the ``default`` entry for one not listed."""
    table = load_table("images")
    entry = table["benchmarks"].get(benchmark)
    if entry is None:
        entry = dict(table["default"], source=f"{table['default']['source']} ({benchmark})")
    return entry


def bytes_per_pixel(
    perturbation: str, benchmark: str | None = None, fmt: str = "png"
) -> tuple[float, str]:
    """Stored bytes per pixel of a variant image a perturbation writes under
    ``variants.format`` = ``fmt`` (on a benchmark's images, where ``disk.yaml`` has
    numbers of their own), and the source."""
    table = load_table("disk")
    entry = table["perturbations"].get(perturbation)
    if entry is None:
        raise MissingEntry(
            f"forecast/disk.yaml: perturbations has no {perturbation!r}; add its bytes per pixel"
        )
    key = f"perturbations.{perturbation}"
    if benchmark in (entry.get("benchmarks") or {}):
        entry, key = entry["benchmarks"][benchmark], f"{key}.benchmarks.{benchmark}"
    rates = entry["bytes_per_pixel"]
    if fmt not in rates:
        raise MissingEntry(
            f"forecast/disk.yaml: {key}.bytes_per_pixel has no {fmt!r} (variants.format); "
            "add its bytes per pixel"
        )
    return float(rates[fmt]), str(entry["source"])


def explorer_bytes(
    name: str, benchmark: str | None = None, clean: bool = False
) -> tuple[float, str]:
    """Bytes of one item of the explorer's files (``disk.yaml`` ``explorer.<name>``: a
    ``thumbnail``, a ``variant``'s entry, a ``row``, a ``text`` entry, a generated
    ``token`` (``reasoning_token``: of a reasoning model's output), a ``judge`` record;
    on a benchmark's images where the entry has numbers of their own; ``clean``: of a
    condition that keeps the samples' images, where the entry has a ``clean`` number)
    and the source."""
    entry = (load_table("disk").get("explorer") or {}).get(name)
    if entry is None:
        raise MissingEntry(f"forecast/disk.yaml: explorer has no {name!r}; add its measured bytes")
    if benchmark in (entry.get("benchmarks") or {}):
        entry = entry["benchmarks"][benchmark]
    value = entry["clean"] if clean and "clean" in entry else entry["bytes"]
    return float(value), str(entry["source"])


def explorer_clip_tokens() -> tuple[float, str]:
    """The most generated tokens one text of an output's entry shows (the explorer clips
    each text, the answer, the thinking, the raw text, at ``explorer.clip_chars``
    characters: that over the ``token`` entry's characters per token), and the source."""
    table = load_table("disk").get("explorer") or {}
    if "clip_chars" not in table or "chars" not in (table.get("token") or {}):
        raise MissingEntry(
            "forecast/disk.yaml: explorer needs clip_chars and token.chars (characters per "
            "generated token)"
        )
    chars = float(table["token"]["chars"])
    return float(table["clip_chars"]) / chars, f"{table['clip_chars']} chars / {chars:g} a token"

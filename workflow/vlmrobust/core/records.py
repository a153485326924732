"""The records that flow between stages (docs/architecture.md): samples and variants.

Every dataset adapter produces :class:`Sample` rows; every condition turns samples
into :class:`Variant` rows (the variant manifest). Both are plain JSON lines on disk.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .io import read_jsonl, write_jsonl

ANSWER_TYPES = ("letter", "number", "text", "yes/no", "list", "label")
_SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")


def safe_id(*parts: object) -> str:
    """A filesystem-safe, dataset-qualified id: ``safe_id("mathvista", 12) == "mathvista-12"``."""
    out = "-".join(_SAFE_ID.sub("_", str(p)).strip("_") or "_" for p in parts)
    return out


@dataclass
class Sample:
    """One benchmark item in the schema every dataset is normalized to.

    ``images`` are paths (relative to the working directory of the workflow) in the
    order the question refers to them. ``answer`` is the canonical answer (a letter
    for multiple choice with letter answers, the option text for MathVista multiple
    choice, a number as text, ``yes``/``no``, a class label); further accepted answers
    (TextVQA's ten, InfoVQA's list) are in ``meta["answers"]``.
    """

    sample_id: str
    dataset: str
    images: list[str]
    question: str
    answer: str
    answer_type: str
    choices: list[str] = field(default_factory=list)
    precision: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.answer_type not in ANSWER_TYPES:
            raise ValueError(
                f"sample {self.sample_id!r}: answer_type {self.answer_type!r} is not one of "
                f"{', '.join(ANSWER_TYPES)}"
            )
        if safe_id(self.sample_id) != self.sample_id:
            raise ValueError(
                f"sample id {self.sample_id!r} is not filesystem-safe; build it with safe_id()"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Sample:
        known = {f: row[f] for f in cls.__dataclass_fields__ if f in row}
        return cls(**known)


@dataclass
class Variant:
    """One row of a variant manifest: a sample under one condition.

    ``variant_id`` equals ``sample_id`` when a condition makes one variant per sample;
    with several per sample (corruption assignment ``all``) it is qualified by the
    parameters, e.g. ``mmmu-validation_Art_1__fog-s3``.
    """

    variant_id: str
    sample_id: str
    dataset: str
    condition: str
    perturbation: str
    images: list[str]
    sha256: list[str]
    question: str
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    masks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Variant:
        known = {f: row[f] for f in cls.__dataclass_fields__ if f in row}
        return cls(**known)


@dataclass
class OutputRow:
    """One model output: a (variant, draw) answered by one model (docs/architecture.md).

    ``raw_text`` is everything the model generated; ``thinking`` the reasoning part
    split off by the model family's markers (``<think>...</think>``; None when there
    is none) and ``answer_text`` the rest, which scoring reads. ``thinking_tokens`` is
    the reasoning length: the thinking part's tokens with the model's own tokenizer
    (local checkpoints) or the reasoning tokens the API reports; None without either. ``image_sha256`` are the
    hashes of the exact image files the model saw, so a row is never reused for a
    different image. ``error`` is set (and ``finish_reason == "error"``) when the
    generation failed after every retry; such a row is scored wrong with that reason.
    """

    key: str  # f"{variant_id}#{draw}"
    variant_id: str
    sample_id: str
    dataset: str
    condition: str
    prompt: str
    prompt_version: str
    model: str
    backend: str
    model_revision: str
    draw: int
    raw_text: str
    answer_text: str
    thinking: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    thinking_tokens: int | None = None
    latency_s: float | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    max_new_tokens: int | None = None
    image_sha256: list[str] = field(default_factory=list)
    error: str | None = None
    source: str = "run"  # "run", or the importer: "lmms-eval", "vlmevalkit"
    #: labels a released file carried ({"correct": bool, "verdict": "yes"|"no"}); used
    #: only where the configuration says so (imports[].released_labels / references)
    released: dict[str, Any] | None = None
    #: a second-stage prompt (CRM final answer): sha256 of the first-stage text it was
    #: given, so a row is never reused after that text changed
    context_sha256: str | None = None
    #: every image resized to image_size x image_size before the model saw it (the
    #: dataset's ``image_size``; ``image_sha256`` are still the variant's own files)
    image_size: int | None = None
    #: sha256 of the model's inference settings (checkpoint, revision, backend options):
    #: a row is reused on resume only for the same settings and ``model_revision``
    model_spec_sha256: str | None = None
    #: where the prompt's text and layout come from: ``vlmrobust`` (the project's own
    #: wording) or the harness / authors' code it reproduces, with version and file
    prompt_source: str | None = None
    #: how the answer was decoded: ``config`` (the generation-config choice the job
    #: asked for: ``explicit`` or ``checkpoint``) and the effective fields the backend
    #: used (local checkpoints: ``temperature``, ``top_p``, ``top_k``,
    #: ``repetition_penalty``, ...; API models: ``sent``, the request's decoding
    #: fields as sent); None for imported rows
    generation: dict[str, Any] | None = None
    #: the pixel limits the images were shown at (Qwen-VL processors): ``min_pixels``,
    #: ``max_pixels`` and ``set_by`` (``dataset``: the dataset's ``pixels`` setting over
    #: the registry's options; ``model``: the registry's ``options``), and ``fit``, the
    #: resize before the processor where there was one (``pixels: harness``, ``fit``); None where
    #: the backend applies none (API models) or nothing sets any (processor defaults)
    pixels: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> OutputRow:
        known = {f: row[f] for f in cls.__dataclass_fields__ if f in row}
        return cls(**known)


def output_key(variant_id: str, draw: int) -> str:
    return f"{variant_id}#{draw}"


def chain_text(row: dict[str, Any]) -> str:
    """The whole text a model wrote for one output row (as a dict): its reasoning
    (``thinking``, when the family's markers split one off) and the visible answer,
    think tags removed."""
    parts = [row.get("thinking") or "", row.get("answer_text") or ""]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def read_samples(path: str | Path) -> list[Sample]:
    return [Sample.from_dict(r) for r in read_jsonl(path)]


def write_samples(path: str | Path, samples: list[Sample]) -> int:
    return write_jsonl(path, (s.to_dict() for s in samples))


def read_variants(path: str | Path) -> list[Variant]:
    return [Variant.from_dict(r) for r in read_jsonl(path)]


def write_variants(path: str | Path, variants: list[Variant]) -> int:
    return write_jsonl(path, (v.to_dict() for v in variants))


def missing(value: Any) -> bool:
    """``None``, NaN, or an empty/whitespace string (a field a row lacks)."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()

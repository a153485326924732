"""The benchmark registry: one typed record per benchmark, the one place a benchmark is named.

Every other registry is keyed by these names and checked against them
(tests/test_benchmarks.py):

- ``vlmrobust.data.ADAPTERS``: one adapter per benchmark; an adapter names its record
  (``benchmark = BENCHMARKS["mmmu"]``) and takes its ``name``, ``hub_id``,
  ``hub_config``, ``split`` and ``description`` from it;
- ``vlmrobust.score.SCORERS``: a benchmark's ``scorer`` is a key there, and every key
  there is a benchmark with its own rules or a generic scorer (:data:`GENERIC_SCORERS`);
- prompts (:func:`vlmrobust.core.prompts.default_prompt`): a benchmark's
  ``default_prompt`` names a prompt builder, or is ``None``: the prompt then follows
  the sample's answer type;
- the run config (:mod:`vlmrobust.core.config`): the schema's ``adapter`` and
  ``scorer`` enums are filled in from :data:`BENCHMARKS` and :data:`SCORER_NAMES`
  when the schema is loaded.

docs/adding-a-benchmark.md says how to add one. This module imports nothing of the
package beyond :mod:`vlmrobust.core.records`, so every layer may read it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .records import ANSWER_TYPES

__all__ = [
    "BENCHMARKS",
    "GENERIC_SCORERS",
    "SCORER_NAMES",
    "Benchmark",
    "get_benchmark",
]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: what the adapter, the scorer and the prompts agree on.

    ``hub_id`` / ``hub_config`` / ``split`` are the defaults a dataset config may leave
    ``null`` (``hub_id`` ``None``: the benchmark is read from a local folder only).
    ``answer_types`` are the :data:`~vlmrobust.core.records.ANSWER_TYPES` its samples
    may have. ``scorer`` is a key of ``vlmrobust.score.SCORERS``. ``default_prompt``
    is a prompt builder's name, or ``None`` for the prompt of the sample's answer type
    (letter -> mcq, yes/no -> yesno, label -> label, number/text/list -> short).
    ``meta`` are the keys every sample's ``meta`` carries besides ``source_id`` (which
    every adapter adds); ``meta_note`` says what else it may carry.
    """

    name: str
    description: str
    answer_types: tuple[str, ...]
    scorer: str
    default_prompt: str | None = None
    meta: tuple[str, ...] = ()
    meta_note: str = ""
    hub_id: str | None = None
    hub_config: str | None = None
    split: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"benchmark name {self.name!r}: lower-case letters, digits, '-'")
        unknown = [t for t in self.answer_types if t not in ANSWER_TYPES]
        if not self.answer_types or unknown:
            raise ValueError(
                f"benchmark {self.name!r}: answer_types {list(self.answer_types)!r} must be "
                f"a non-empty subset of {', '.join(ANSWER_TYPES)}"
            )


#: Scorers that belong to no benchmark: name -> what they do.
GENERIC_SCORERS: Mapping[str, str] = MappingProxyType(
    {"generic": "by the sample's answer type (letter, number, yes/no, list, label, text)"}
)

_RECORDS = (
    Benchmark(
        name="mmmu",
        description="MMMU validation: multi-discipline multiple-choice and open questions",
        answer_types=("letter", "number", "text"),
        scorer="mmmu",
        meta=(
            "question_type",
            "subfield",
            "img_type",
            "topic_difficulty",
            "explanation",
            "image_numbers",
        ),
        hub_id="lmms-lab/MMMU",
        split="validation",
    ),
    Benchmark(
        name="mathvista",
        description="MathVista testmini: math reasoning in visual contexts",
        answer_types=("text", "number", "list"),
        scorer="mathvista",
        default_prompt="mathvista-solution",
        meta=("question_type", "answer_type", "unit", "precision", "query", "metadata"),
        hub_id="AI4Math/MathVista",
        split="testmini",
    ),
    Benchmark(
        name="mathvision",
        description="MathVision testmini: competition math with visual contexts",
        answer_types=("letter", "number", "text"),
        scorer="mathvision",
        default_prompt="mathvision",
        meta=("level", "subject", "solution"),
        hub_id="MathLLMs/MathVision",
        split="testmini",
    ),
    Benchmark(
        name="chartqa",
        description="ChartQA test: questions about charts",
        answer_types=("number", "text"),
        scorer="chartqa",
        meta=("type",),
        hub_id="lmms-lab/ChartQA",
        split="test",
    ),
    Benchmark(
        name="hallusionbench",
        description="HallusionBench image split: yes/no questions on visual illusions and edits",
        answer_types=("yes/no",),
        scorer="hallusionbench",
        meta=(
            "category",
            "subcategory",
            "set_id",
            "figure_id",
            "question_id",
            "sample_note",
            "visual_input",
            "gt_answer_details",
            "filename",
        ),
        hub_id="lmms-lab/HallusionBench",
        split="image",
    ),
    Benchmark(
        name="infovqa",
        description="InfographicVQA validation: questions about infographics (ANLS)",
        answer_types=("text",),
        scorer="infovqa",
        meta=("answers", "answer_types"),
        hub_id="lmms-lab/DocVQA",
        hub_config="InfographicVQA",
        split="validation",
    ),
    Benchmark(
        name="mmstar",
        description="MMStar val: vision-indispensable multiple-choice questions",
        answer_types=("letter",),
        scorer="mmstar",
        meta=("category", "l2_category", "index", "meta_info", "raw_question", "options_parsed"),
        hub_id="Lin-Chen/MMStar",
        split="val",
    ),
    Benchmark(
        name="textvqa",
        description="TextVQA validation: questions that need reading text in images",
        answer_types=("text",),
        scorer="textvqa",
        meta=("answers", "image_id", "ocr_tokens"),
        hub_id="lmms-lab/textvqa",
        split="validation",
    ),
    Benchmark(
        name="distract-bench",
        description="Distract-Bench: answer-preserving semantic distractors (clean + distracted)",
        answer_types=("letter", "number", "list", "text"),
        scorer="distract-bench",
        default_prompt="distract-open",
        meta=("level", "subject", "solution", "edit", "source_style", "distracted_images"),
        meta_note="and every other non-image field of the row",
        hub_id="EthanSun/Distract-Bench",
        split="test",
    ),
    Benchmark(
        name="visargs",
        description="VisArgs: one sample per (image, visual premise) for region masking",
        answer_types=("text",),
        scorer="generic",
        meta=(
            "premise_index",
            "visual_premises",
            "b_box",
            "image_size",
            "commonsense_premises",
            "conclusion",
            "reasoning_steps",
            "url",
            "clipped_boxes",
            "question_source",
            "source_row",
        ),
        hub_id="jiwan-chung/visargs",
        split="train",
    ),
    Benchmark(
        name="demo",
        description="synthetic demo data made offline by the demo generator",
        answer_types=("letter", "number", "yes/no", "text", "label"),
        scorer="generic",
        meta_note="the generator's own meta per family (kind, ...)",
    ),
    Benchmark(
        name="constructed",
        description="a distraction benchmark constructed and human-verified by this workflow",
        answer_types=ANSWER_TYPES,
        scorer="generic",
        meta=("edit", "distracted_images"),
        meta_note=(
            "and the source sample's meta; seed_ids, writer, editor and source_sample_id "
            "when the candidate has them"
        ),
    ),
    # the base datasets of the Idis study (vlmrobust.data.idis)
    Benchmark(
        name="imagenet9",
        description="ImageNet-9 (Backgrounds Challenge original val): 9-way object classification",
        answer_types=("label",),
        scorer="imagenet9",
        default_prompt="idis-perception",
        meta=(
            "label",
            "imagenet9_class",
            "class_index",
            "stem",
            "target_masks",
            "target_mask_source",
        ),
        meta_note="target_mask_problem when a mask's size differs from the image's",
        split="val",
    ),
    Benchmark(
        name="mathverse",
        description="MathVerse testmini (Text Dominant/Lite, Vision Intensive/Dominant): "
        "visual math problems",
        answer_types=("letter", "number", "text"),
        scorer="mathverse",
        default_prompt="idis-math",
        meta=(
            "sample_index",
            "problem_index",
            "problem_version",
            "question_type",
            "subject",
            "subfield",
            "source",
            "question_for_eval",
            "query_wo",
            "query_cot",
            "concept_family",
        ),
        meta_note="question_for_eval_from_question when the row had no question_for_eval",
        hub_id="AI4Math/MathVerse",
        hub_config="testmini",
        split="testmini",
    ),
    Benchmark(
        name="logicvista",
        description="LogicVista: logical reasoning on images (the Idis table-image pool); "
        "read from the GitHub release",
        answer_types=("letter", "list", "number"),
        scorer="logicvista",
        meta=(
            "skill",
            "broad_capability",
            "specific_capability",
            "reasoning",
            "imagename",
            "imagesource",
            "sourcelink",
        ),
        meta_note="numbered_option_answer when the answer is an option number",
    ),
    Benchmark(
        name="waterbirds",
        description="Waterbirds: landbird or waterbird on a land or water background",
        answer_types=("label",),
        scorer="waterbirds",
        default_prompt="waterbirds",
        meta=("y", "place", "place_name", "group", "img_filename", "place_filename"),
        split="test",
    ),
)

#: Every benchmark, by name (the adapter name of the run config).
BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType({b.name: b for b in _RECORDS})
if len(BENCHMARKS) != len(_RECORDS):  # pragma: no cover - a programming error
    raise AssertionError("two benchmark records share a name")

#: The scorer names a dataset config may give: the benchmarks' scorers, then the generic
#: ones (the order of the schema's ``scorer`` enum).
SCORER_NAMES: tuple[str, ...] = tuple(
    dict.fromkeys([*(b.scorer for b in _RECORDS), *GENERIC_SCORERS])
)


def get_benchmark(name: str) -> Benchmark:
    """The record of benchmark ``name``; an unknown name is an error listing the known."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(
            f"unknown benchmark {name!r}; known benchmarks: {', '.join(BENCHMARKS)}"
        ) from None

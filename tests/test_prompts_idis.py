"""The Idis prompts are the authors' (effl-lab/Idis at commit
b0443df2ab3e90743a10b74c9107371a08a06103): each builder's text equals the constant of
their code, written out here by hand from ``inference/prompts.py`` (PERCEPTION_BASE,
PERCEPTION_STRATEGY, WATERBIRDS_BASE, WATERBIRDS_STRATEGY) and
``inference/run_math_vllm.py`` (SUFFIX); the message is the image, then the text, and
no system prompt (``inference/run_perception.py``, ``run_math_vllm.py``)."""

from __future__ import annotations

import json

import pytest

from vlmrobust.core.prompts import PROMPTS, build_prompt, prompt_role
from vlmrobust.core.records import Sample, Variant

from .test_idis_adapters import _mathverse_folder
from .test_idis_adapters import run as build_samples

# effl-lab/Idis@b0443df2, inference/prompts.py
PERCEPTION_BASE = (
    "[Question] Which category best describes the main object in the image? "
    "Choose exactly one from: Dog, Bird, Vehicle, Reptile, Carnivore, Insect, "
    "Instrument, Primate, Fish.\n"
    "Use a thinking process to analyze the problem step-by-step.\n"
    "At the end, provide your answer and clearly indicate it using <answer>X</answer> format."
)
PERCEPTION_STRATEGY = (
    "[Question] Which category best describes the main object in the image? "
    "Choose exactly one from: Dog, Bird, Vehicle, Reptile, Carnivore, Insect, "
    "Instrument, Primate, Fish. \n"
    "First identify the main object. Base your reasoning only on that object's own "
    "visual attributes, and determine which of the nine categories best matches the "
    "object. Do not assume that the most visually dominant object is the main object. "
    "Do not infer the category from surrounding objects or from items that are merely "
    "associated with another category.\n"
    "At the end, provide your answer as <answer>X</answer>."
)
WATERBIRDS_BASE = (
    "[Question] Is the bird in the image a waterbird or a landbird?\n"
    "Use a thinking process to analyze the problem step-by-step.\n"
    "At the end, provide your answer and clearly indicate it using <answer>X</answer> format."
)
WATERBIRDS_STRATEGY = (
    "[Question] Is the bird in the image a waterbird or a landbird? \n"
    "Think step by step based on the foreground bird's attributes. \n"
    "At the end, select your answer from the provided options and clearly indicate it "
    "using <answer>X</answer> format."
)
# effl-lab/Idis@b0443df2, inference/run_math_vllm.py (one backslash before "boxed")
SUFFIX = (
    "\nYou first think through the reasoning process as an internal monologue, "
    "enclosed within <think> </think> tags. "
    "Then, provide your final answer enclosed within \\boxed{}."
)
SRC = "effl-lab/Idis@b0443df2"


def _variant(s: Sample, question: str | None = None, condition: str = "clean") -> Variant:
    return Variant(
        variant_id=f"{s.sample_id}__{condition}",
        sample_id=s.sample_id,
        dataset=s.dataset,
        condition=condition,
        perturbation="none",
        images=["v0.png"],
        sha256=["0" * 64],
        question=s.question if question is None else question,
    )


def _sample(dataset: str, question: str, answer: str, choices: list[str]) -> Sample:
    return Sample(
        sample_id=f"{dataset}-1",
        dataset=dataset,
        images=["s0.png"],
        question=question,
        answer=answer,
        answer_type="label",
        choices=choices,
    )


IN9 = _sample(
    "imagenet9",
    "Which category best describes the main object in the image? Choose exactly one from: "
    "Dog, Bird, Vehicle, Reptile, Carnivore, Insect, Instrument, Primate, Fish.",
    "Dog",
    ["Dog", "Bird", "Vehicle", "Reptile", "Carnivore", "Insect", "Instrument", "Primate", "Fish"],
)
WB = _sample(
    "waterbirds",
    "Is the bird in the image a landbird or a waterbird?",
    "Waterbird",
    ["Landbird", "Waterbird"],
)


def _only_image_then_text(p, text: str) -> None:
    assert p.system is None
    assert p.content == [{"type": "image", "path": "v0.png"}, {"type": "text", "text": text}]


@pytest.mark.parametrize(
    ("name", "sample", "text", "constant"),
    [
        ("idis-perception", IN9, PERCEPTION_BASE, "inference/prompts.py PERCEPTION_BASE"),
        (
            "idis-perception-mitigate",
            IN9,
            PERCEPTION_STRATEGY,
            "inference/prompts.py PERCEPTION_STRATEGY",
        ),
        ("waterbirds", WB, WATERBIRDS_BASE, "inference/prompts.py WATERBIRDS_BASE"),
        (
            "waterbirds-mitigate",
            WB,
            WATERBIRDS_STRATEGY,
            "inference/prompts.py WATERBIRDS_STRATEGY",
        ),
    ],
)
def test_perception_and_waterbirds_prompts_are_the_authors(name, sample, text, constant):
    p = build_prompt(sample, _variant(sample), name)
    _only_image_then_text(p, text)
    assert p.source == f"{SRC} {constant}"
    # a fixed text: the row's own question (or a changed one) is not used
    assert build_prompt(sample, _variant(sample, question="Something else?"), name).text == text


def test_budget_instruction_is_ours_and_prepended():
    for n in (1024, 2048, 4096):
        p = build_prompt(IN9, _variant(IN9), f"idis-perception-budget-{n}")
        instruction = (
            f"You have a thinking budget of {n} tokens. Keep your reasoning within at most "
            f"{n} tokens before giving your answer."
        )
        _only_image_then_text(p, f"{instruction}\n{PERCEPTION_BASE}")
        assert (
            p.source == f"vlmrobust budget instruction + {SRC} inference/prompts.py PERCEPTION_BASE"
        )
        assert prompt_role(p.name) == ("budget", n)


def test_roles_of_the_paper_and_own_names():
    assert prompt_role("idis-perception") == ("main", None)
    assert prompt_role("idis-perception-mitigate") == ("mitigation", None)
    assert prompt_role("waterbirds-mitigate") == ("mitigation", None)
    assert prompt_role("idis-perception-vlmrobust-mitigate") == ("mitigation", None)
    assert prompt_role("idis-perception-vlmrobust-budget-2048") == ("budget", 2048)


def test_math_prompt_is_question_plus_suffix_on_real_mathverse_rows(tmp_path):
    root = _mathverse_folder(tmp_path / "mathverse")
    _, samples, _ = build_samples(
        tmp_path, "mathverse", {"adapter": "mathverse", "source": "local", "path": str(root)}
    )
    rows = {str(r["sample_index"]): r for r in json.loads((root / "testmini.json").read_text())}
    checked = {"free-form": 0, "multi-choice": 0}
    for s in samples.values():
        row = rows[str(s.meta["sample_index"])]
        p = build_prompt(s, _variant(s), "idis-math")
        # MathVerse's `question` field as is (its Choices: block included) + SUFFIX
        _only_image_then_text(p, row["question"] + SUFFIX)
        checked["multi-choice" if s.answer_type == "letter" else "free-form"] += 1
    assert checked["free-form"] >= 1 and checked["multi-choice"] >= 1
    mc = next(s for s in samples.values() if s.answer_type == "letter")
    assert build_prompt(mc, _variant(mc), "idis-math").text == (
        "As shown in the figure, in triangle ABC, it is known that angle A = 80.0, angle B = "
        "60.0, point D is on AB and point E is on AC, DE parallel BC, then the size of angle "
        "CED is ()\nChoices:\nA:40°\nB:60°\nC:120°\nD:140°\nYou first think through the "
        "reasoning process as an internal monologue, enclosed within <think> </think> tags. "
        "Then, provide your final answer enclosed within \\boxed{}."
    )
    assert PROMPTS["idis-math"].source == f"{SRC} inference/run_math_vllm.py SUFFIX"


def test_math_textual_condition_asks_the_variant_question():
    s = Sample(
        sample_id="mathverse-3421",
        dataset="mathverse",
        images=["s0.png"],
        question="A soft drink can has a height of 13 cm. Find L.",
        answer="14",
        answer_type="number",
    )
    augmented = "A soft drink can has a height of 13 cm. The can is red. Find L."
    p = build_prompt(s, _variant(s, augmented, "idis-math-textual"), "idis-math")
    _only_image_then_text(p, augmented + SUFFIX)

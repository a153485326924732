"""Prompt builders: exact texts, image interleaving, the released Distract-Bench prompt.

Every expected text below is written out by hand; the Distract-Bench expectation is
the ``query`` the released lmms-eval runs recorded (tests/fixtures/distract-bench).
"""

from __future__ import annotations

import json

import pytest

from vlmrobust.core.prompts import PROMPTS, build_prompt, default_prompt, mathvista_problem
from vlmrobust.core.records import Sample, Variant
from vlmrobust.data.released import load_questions

from .conftest import FIXTURES

DB = FIXTURES / "distract-bench"
MCQ_LINE = "Answer with the option's letter from the given choices."


def sample(**kw) -> Sample:
    base = {
        "sample_id": "d-1",
        "dataset": "d",
        "images": ["s0.png"],
        "question": "What color is the car?",
        "answer": "A",
        "answer_type": "letter",
    }
    base.update(kw)
    return Sample(**base)


def variant(s: Sample, images=None, question=None) -> Variant:
    imgs = images if images is not None else [f"v{i}.png" for i in range(len(s.images))]
    return Variant(
        variant_id=s.sample_id,
        sample_id=s.sample_id,
        dataset=s.dataset,
        condition="clean",
        perturbation="none",
        images=imgs,
        sha256=["0" * 64] * len(imgs),
        question=s.question if question is None else question,
    )


def build(s: Sample, name: str, **kw):
    return build_prompt(s, variant(s, **kw), name)


# --------------------------------------------------------------------------- simple builders


def test_mcq_text_and_image_first():
    s = sample(choices=["red", "blue", "green"])
    p = build(s, "mcq")
    assert (p.name, p.version, p.system) == ("mcq", PROMPTS["mcq"].version, None)
    assert p.version.startswith("1+")  # the label, then the text's fingerprint
    assert p.content == [
        {"type": "image", "path": "v0.png"},
        {
            "type": "text",
            "text": f"What color is the car?\nA. red\nB. blue\nC. green\n{MCQ_LINE}",
        },
    ]


def test_mcq_does_not_repeat_options_already_in_the_question():
    q = "How many circles?\nOptions:\nA. 3\nB. 4\nC. 5"
    s = sample(question=q, choices=["3", "4", "5"])
    assert build(s, "mcq").text == f"{q}\n{MCQ_LINE}"


def test_mcq_without_parsed_choices_keeps_the_question():
    q = "Which is larger?\nOptions: A: the cat, B: the dog"
    s = sample(question=q, choices=[])
    assert build(s, "mcq").text == f"{q}\n{MCQ_LINE}"


def test_yesno_short_label_texts():
    yn = sample(question="Is the light red?", answer="yes", answer_type="yes/no")
    assert build(yn, "yesno").text == "Is the light red?\nAnswer yes or no."
    already = sample(question="Is it red? Answer yes or no.", answer="no", answer_type="yes/no")
    assert build(already, "yesno").text == "Is it red? Answer yes or no."
    short = sample(question="What is written on the sign?", answer="stop", answer_type="text")
    assert build(short, "short").text == (
        "What is written on the sign?\nAnswer the question using a single word or phrase."
    )
    lab = sample(
        question="Which category best describes the main object in the image?",
        answer="Dog",
        answer_type="label",
        choices=["Dog", "Bird", "Fish"],
    )
    assert build(lab, "label").text == (
        "Which category best describes the main object in the image?\n"
        "Choose exactly one from: Dog, Bird, Fish.\nAnswer with the category name only."
    )
    listed = sample(
        question="Which category? Choose exactly one from: Dog, Bird, Fish.",
        answer="Dog",
        answer_type="label",
        choices=["Dog", "Bird", "Fish"],
    )
    assert build(listed, "label").text == (
        "Which category? Choose exactly one from: Dog, Bird, Fish.\n"
        "Answer with the category name only."
    )


def test_mathvision_prompt():
    s = sample(question="Which shape? <image1>", choices=["a", "b"])
    assert build(s, "mathvision").text == (
        'Please solve the problem step by step and put your final answer in one "\\boxed{}".\n'
        "Which shape? <image1>\nChoices:\nA. a\nB. b\n"
        'If it is a multiple choice question, only one letter is allowed in the "\\boxed{}".'
    )
    open_q = sample(question="How many?", answer="7", answer_type="number")
    assert build(open_q, "mathvision").text == (
        'Please solve the problem step by step and put your final answer in one "\\boxed{}".\n'
        "How many?"
    )


# --------------------------------------------------------------------------- MathVista settings

MV_MC = dict(
    sample_id="mathvista-5",
    dataset="mathvista",
    question="What fraction of the shape is blue?",
    answer="8/11",
    answer_type="text",
    choices=["3/11", "8/11", "6/11", "3/5"],
    meta={"question_type": "multi_choice", "answer_type": "text", "unit": None},
)
MC_HINT = (
    "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, "
    "at the end."
)


def test_mathvista_three_settings_multi_choice():
    s = sample(**MV_MC)
    choices = "Choices:\n(A) 3/11\n(B) 8/11\n(C) 6/11\n(D) 3/5"
    q = "What fraction of the shape is blue?"
    assert build(s, "mathvista-solution").text == f"Question: {q}\n{choices}\n{MC_HINT}\nSolution:"
    assert build(s, "mathvista-cot").text == f"Question: {q}\n{choices}\n{MC_HINT}"
    assert build(s, "mathvista-format").text == (
        f"{q}\nA. 3/11\nB. 8/11\nC. 6/11\nD. 3/5\n"
        "Answer with the option's letter from the given choices directly."
    )


def test_mathvista_free_form_hints_and_unit():
    s = sample(
        sample_id="mathvista-9",
        question="How much money does Luca need?",
        answer="1.45",
        answer_type="number",
        precision=2,
        meta={"question_type": "free_form", "answer_type": "float", "unit": "$"},
    )
    assert build(s, "mathvista-solution").text == (
        "Question: How much money does Luca need? (Unit: $)\n"
        "Hint: Please answer the question requiring a floating-point number with two decimal "
        "places and provide the final value, e.g., 1.23, 1.34, 1.45, at the end.\nSolution:"
    )
    assert build(s, "mathvista-format").text == (
        "How much money does Luca need? (Unit: $)\n"
        "Answer the question using a single floating-point number with two decimal places."
    )
    integer = sample(
        question="Which number is missing?",
        answer="14",
        answer_type="number",
        meta={"question_type": "free_form", "answer_type": "integer"},
    )
    assert build(integer, "mathvista-cot").text == (
        "Question: Which number is missing?\nHint: Please answer the question requiring an "
        "integer answer and provide the final value, e.g., 1, 2, 3, at the end."
    )
    assert build(integer, "mathvista-format").text == (
        "Which number is missing?\nAnswer the question using a single integer number."
    )
    lst = sample(
        question="Between which two years?",
        answer="[2007, 2008]",
        answer_type="list",
        meta={"question_type": "free_form", "answer_type": "list"},
    )
    assert build(lst, "mathvista-format").text == (
        "Between which two years?\nAnswer the question using a Python list."
    )


def test_mathvista_problem_inferred_from_the_answer():
    def kind(answer, **kw):
        p = mathvista_problem(sample(answer=answer, answer_type=kw.pop("t", "number"), **kw))
        return p["question_type"], p["answer_type"], p["precision"]

    assert kind("B", t="letter", choices=["x", "y"]) == ("multi_choice", "text", None)
    assert kind("12") == ("free_form", "integer", None)
    assert kind("2.50") == ("free_form", "float", 2)
    assert kind("(3,-4)", t="text") == ("free_form", "list", None)
    assert kind("x^2", t="text") == ("free_form", "text", None)


# --------------------------------------------------------------------------- Distract-Bench


@pytest.mark.parametrize("model", ["FanqingM__MM-Eureka-Qwen-7B", "Qwen__Qwen2.5-VL-7B-Instruct"])
def test_distract_open_equals_the_released_query(model):
    questions = load_questions("distract-bench", DB / "questions.jsonl")
    rows = [
        json.loads(line)
        for line in (DB / "model_outputs" / f"{model}.samples.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 12
    for row in rows:
        s = questions[str(row["doc_id"])]
        p = build(s, default_prompt("distract-bench", s), images=["v0.png"])
        assert p.name == "distract-open"
        assert p.content[0] == {"type": "image", "path": "v0.png"}
        assert p.content[1] == {"type": "text", "text": row["llm_as_judge_eval"]["query"]}
        assert "briefly" not in p.text


def test_distract_open_list_hint_and_no_brief_instruction():
    questions = load_questions("distract-bench", DB / "questions.jsonl")
    text = build(questions["11"], "distract-open", images=["x.png"]).text
    assert text.endswith(
        "Hint: Please answer the question requiring a Python list as an answer and provide "
        "the final list, e.g., [1, 2, 3], [1.2, 1.3, 1.4], at the end.\nSolution:"
    )


# --------------------------------------------------------------------------- images


def test_mmmu_markers_interleave_in_order_with_image_numbers():
    s = sample(
        sample_id="mmmu-1",
        dataset="mmmu",
        images=["s2.png", "s3.png", "s5.png"],
        question="Compare <image 5> with <image 2>; again <image 5>.",
        choices=["same", "different"],
        meta={"image_numbers": [2, 3, 5]},
    )
    p = build(s, "mcq", images=["i2.png", "i3.png", "i5.png"])
    assert p.content == [
        {"type": "image", "path": "i3.png"},  # not referenced: first
        {"type": "text", "text": "Compare "},
        {"type": "image", "path": "i5.png"},
        {"type": "text", "text": " with "},
        {"type": "image", "path": "i2.png"},
        {
            "type": "text",
            "text": f"; again <image 5>.\nA. same\nB. different\n{MCQ_LINE}",
        },
    ]


def test_markers_in_options_and_default_numbering():
    s = sample(
        sample_id="mmmu-2",
        dataset="mmmu",
        images=["a.png", "b.png"],
        question="Which plot matches <image 1>?",
        choices=["<image 2>", "neither"],
    )
    p = build(s, "mcq", images=["A.png", "B.png"])
    assert [c.get("path") or c["text"] for c in p.content] == [
        "Which plot matches ",
        "A.png",
        "?\nA. ",
        "B.png",
        f"\nB. neither\n{MCQ_LINE}",
    ]


def test_single_image_keeps_its_marker_and_goes_first():
    s = sample(question="Look at <image 1>. What is it?", answer="cat", answer_type="text")
    p = build(s, "short")
    assert p.content[0] == {"type": "image", "path": "v0.png"}
    assert p.content[1]["text"].startswith("Look at <image 1>. What is it?")


def test_variant_question_and_images_are_used():
    s = sample(question="Original?", answer="yes", answer_type="yes/no")
    p = build(s, "yesno", images=["perturbed.png"], question="Changed question?")
    assert p.image_paths == ["perturbed.png"]
    assert p.text == "Changed question?\nAnswer yes or no."


# --------------------------------------------------------------------------- registry


def test_unknown_prompt_names_the_known_ones():
    with pytest.raises(ValueError) as err:
        build(sample(), "fancy")
    msg = str(err.value)
    assert "'fancy'" in msg
    for name in ("mcq", "yesno", "short", "label", "mathvista-cot", "distract-open"):
        assert name in msg


def test_variant_of_another_sample_is_rejected():
    s = sample()
    v = variant(sample(sample_id="d-2"))
    with pytest.raises(ValueError, match="d-2"):
        build_prompt(s, v, "mcq")


def test_registry_names_and_versions():
    expected = {
        "mcq",
        "yesno",
        "short",
        "label",
        "mathvision",
        "mathvista-cot",
        "mathvista-format",
        "mathvista-solution",
        "distract-open",
        "crm-cot",
        "crm-answer",
        "idis-perception",
        "idis-perception-mitigate",
        "idis-perception-budget-1024",
        "idis-perception-budget-2048",
        "idis-perception-budget-4096",
        "idis-math",
        "waterbirds",
        "waterbirds-mitigate",
        "idis-perception-vlmrobust",
        "idis-perception-vlmrobust-mitigate",
        "idis-perception-vlmrobust-budget-1024",
        "idis-perception-vlmrobust-budget-2048",
        "idis-perception-vlmrobust-budget-4096",
        "idis-math-vlmrobust",
        "waterbirds-vlmrobust",
        "waterbirds-vlmrobust-mitigate",
        # lmms-eval's own task code (tests/test_harness_prompts.py)
        "lmms-mmmu",
        "lmms-mmstar",
        "lmms-mathvision",
        "lmms-mathvision-reason",
        "lmms-hallusionbench",
        "lmms-chartqa",
        "lmms-textvqa",
        "lmms-infovqa",
    }
    assert set(PROMPTS) == expected
    assert all(b.version for b in PROMPTS.values())


def test_default_prompt_per_adapter():
    letter = sample()
    assert default_prompt("mathvista", letter) == "mathvista-solution"
    assert default_prompt("distract-bench", letter) == "distract-open"
    assert default_prompt("mathvision", letter) == "mathvision"
    assert default_prompt("mmmu", letter) == "mcq"
    assert default_prompt("mmstar", letter) == "mcq"
    assert default_prompt("hallusionbench", sample(answer="yes", answer_type="yes/no")) == "yesno"
    assert default_prompt("demo", sample(answer="Dog", answer_type="label")) == "label"
    for atype, answer in (("number", "3"), ("text", "stop"), ("list", "[1, 2]")):
        assert default_prompt("chartqa", sample(answer=answer, answer_type=atype)) == "short"


# --------------------------------------------------------------------------- CRM (two stages)


def test_crm_cot_asks_for_numbered_steps():
    s = sample(question="What is shown in the top-left part of the image?", answer_type="text")
    p = build(s, "crm-cot")
    assert p.text.startswith(
        "What is shown in the top-left part of the image?\nThink step by step."
    )
    assert "numbered step per line (1., 2., ...)" in p.text
    assert p.image_paths == ["v0.png"]


def test_crm_answer_is_built_on_the_chain():
    s = sample(question="What is poured?", answer_type="text")
    p = build_prompt(s, variant(s), "crm-answer", "1. A cup.\n2. Tea is poured.")
    assert p.text == (
        "What is poured?\n\nYour reasoning:\n1. A cup.\n2. Tea is poured.\n\n"
        "Based on your reasoning, give only the final answer as a short phrase, without "
        "explaining it."
    )
    empty = build_prompt(s, variant(s), "crm-answer", "  ")
    assert "Your reasoning:\n(no reasoning was given)" in empty.text
    with pytest.raises(ValueError, match="built on the model's 'crm-cot' output"):
        build_prompt(s, variant(s), "crm-answer")
    with pytest.raises(ValueError, match="prompt 'mcq' takes no context"):
        build_prompt(sample(), variant(sample()), "mcq", "x")


# --------------------------------------------------------------------------- Idis

IN9_QUESTION = (
    "Which category best describes the main object in the image? Choose exactly one from: "
    "Dog, Bird, Vehicle, Reptile, Carnivore, Insect, Instrument, Primate, Fish."
)
IDIS_LINE = (
    "Think step by step, then give your final answer as <answer>X</answer>, where X is one "
    "of the categories."
)


def _in9() -> Sample:
    return sample(
        sample_id="imagenet9-00_dog_n1",
        dataset="imagenet9",
        question=IN9_QUESTION,
        answer="Dog",
        answer_type="label",
        choices=["Dog", "Bird", "Vehicle", "Reptile", "Carnivore", "Insect", "Instrument"]
        + ["Primate", "Fish"],
    )


def test_idis_perception_own_prompts():
    """Our wordings, kept under ``*-vlmrobust*`` (the paper names are the authors':
    tests/test_prompts_idis.py)."""
    s = _in9()
    p = build(s, "idis-perception-vlmrobust")
    assert (p.name, p.source) == ("idis-perception-vlmrobust", "vlmrobust")
    assert p.content == [
        {"type": "image", "path": "v0.png"},
        {"type": "text", "text": f"{IN9_QUESTION}\n{IDIS_LINE}"},
    ]
    assert build(s, "idis-perception-vlmrobust-mitigate").text == (
        f"{IN9_QUESTION}\nFirst identify the main object. Base your reasoning only on that "
        f"object's own visual attributes. {IDIS_LINE}"
    )
    for n in (1024, 2048, 4096):
        assert build(s, f"idis-perception-vlmrobust-budget-{n}").text == (
            f"{IN9_QUESTION}\nThink for at most {n} tokens before answering. {IDIS_LINE}"
        )
    assert default_prompt("imagenet9", s) == "idis-perception"


def test_idis_math_own_prompt_free_form_and_multiple_choice():
    free = sample(
        sample_id="mathverse-3421",
        dataset="mathverse",
        question="The radius is 3 cm. Find L.",
        answer="14",
        answer_type="number",
    )
    line = "Solve the problem step by step and put the final answer in \\boxed{}."
    assert build(free, "idis-math-vlmrobust").text == f"The radius is 3 cm. Find L.\n{line}"
    q = "Find angle CED.\nChoices:\nA:40°\nB:60°"
    mc = sample(sample_id="mathverse-1", question=q, answer="B", choices=["40°", "60°"])
    assert build(mc, "idis-math-vlmrobust").text == (
        f"{q}\n{line} For a multiple-choice question, put only the option letter in \\boxed{{}}."
    )
    assert default_prompt("mathverse", free) == default_prompt("mathverse", mc) == "idis-math"
    # a textual distractor's question is the one asked
    assert build(free, "idis-math-vlmrobust", question="Changed?").text == f"Changed?\n{line}"


def test_waterbirds_own_prompts():
    s = sample(
        sample_id="waterbirds-7",
        dataset="waterbirds",
        question="Is the bird in the image a landbird or a waterbird?",
        answer="Waterbird",
        answer_type="label",
        choices=["Landbird", "Waterbird"],
    )
    line = (
        "Think step by step, then give your final answer as <answer>Landbird</answer> or "
        "<answer>Waterbird</answer>."
    )
    assert build(s, "waterbirds-vlmrobust").text == f"{s.question}\n{line}"
    assert build(s, "waterbirds-vlmrobust-mitigate").text == (
        f"{s.question}\nFirst identify the bird. Base your reasoning only on the bird's own "
        f"visual attributes, not on the background. {line}"
    )
    assert default_prompt("waterbirds", s) == "waterbirds"
    # LogicVista has no prompt of its own: by answer type
    assert default_prompt("logicvista", sample(dataset="logicvista")) == "mcq"
    lst = sample(dataset="logicvista", answer="A, C", answer_type="list")
    assert default_prompt("logicvista", lst) == "short"

"""The Idis scorers: imagenet9, waterbirds, mathverse (the rule-based offline judge) and
logicvista. Every answer below is hand-written, with the verdict worked out by hand."""

from __future__ import annotations

import math

import pytest

from vlmrobust.core.idis import IMAGENET9_LABELS, option_letters
from vlmrobust.core.records import Sample
from vlmrobust.score import score_outputs
from vlmrobust.score.scorers import (
    IMAGENET9_NAMES,
    SCORERS,
    WATERBIRDS_NAMES,
    get_scorer,
    math_value,
)

from .conftest import output_row

LABELS = list(IMAGENET9_LABELS)


def sample(answer: str, answer_type: str, choices=None, question: str = "Q?", **kw) -> Sample:
    return Sample(
        sample_id="s-1",
        dataset="s",
        images=["a.png"],
        question=question,
        answer=answer,
        answer_type=answer_type,
        choices=list(choices or []),
        **kw,
    )


def verdict(name: str, s: Sample, text: str):
    r = SCORERS[name].score(s, text)
    return r.prediction, r.correct, r.method, r.rule


def test_registered_under_the_benchmark_names():
    for name in ("imagenet9", "waterbirds", "mathverse", "logicvista"):
        assert get_scorer(name) is SCORERS[name] and SCORERS[name].name == name
    # the accepted names: the labels and the ImageNet-9 class names, nothing else
    assert IMAGENET9_NAMES == {
        "Dog": ("dog",),
        "Bird": ("bird",),
        "Vehicle": ("vehicle", "wheeled vehicle"),
        "Reptile": ("reptile",),
        "Carnivore": ("carnivore",),
        "Insect": ("insect",),
        "Instrument": ("instrument", "musical instrument"),
        "Primate": ("primate",),
        "Fish": ("fish",),
    }
    assert WATERBIRDS_NAMES == {
        "Landbird": ("landbird", "land bird", "land-bird"),
        "Waterbird": ("waterbird", "water bird", "water-bird"),
    }


# --------------------------------------------------------------------------- imagenet9

VEHICLE = sample("Vehicle", "label", LABELS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>wheeled vehicle</answer>", ("Vehicle", True, "rule", "answer-tag")),
        ("<answer>Vehicles</answer>", ("Vehicle", True, "rule", "answer-tag")),
        ("<answer> VEHICLE </answer>", ("Vehicle", True, "rule", "answer-tag")),
        (
            "It might be a dog.\n<answer>Dog</answer> no wait <answer>Vehicle</answer>",
            ("Vehicle", True, "rule", "answer-tag"),
        ),
        (
            "<answer>Vehicle</answer>\nActually <answer>Dog</answer>",
            ("Dog", False, "rule", "answer-tag"),
        ),
        ("\\boxed{\\text{Vehicle}}", ("Vehicle", True, "rule", "boxed")),
        ("A bus is shown.\nSo it is a vehicle.", ("Vehicle", True, "rule", "last-line")),
        ("02_wheeled vehicle", ("Vehicle", True, "rule", "last-line")),
        (
            "A vehicle with a tennis ball on it.\nNot sure.",
            ("Vehicle", True, "rule", "only-mention"),
        ),
        ("It is a dog.\nFinal answer: Bird", ("Bird", False, "rule", "last-line")),
        ("Fishes", ("Fish", False, "rule", "last-line")),
    ],
)
def test_imagenet9_reads_one_class(text, expected):
    assert verdict("imagenet9", VEHICLE, text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Dog or Bird", "the last line names several classes (Dog, Bird)"),
        ("<answer>Dog or Bird</answer>", "the last <answer> names several classes (Dog, Bird)"),
        # the answer tag decides: a class elsewhere is not read
        ("The vehicle is red.\n<answer>car</answer>", "the last <answer> names none of "),
        ("It is a truck with wheels.", "the answer names none of "),  # no synonyms
        (
            "There is a tennis ball near the car.\nNot sure.",
            "the answer names none of Dog, Bird, Vehicle, Reptile, Carnivore, Insect, "
            "Instrument, Primate, Fish",
        ),
        ("hotdog and birdcage", "the answer names none of "),
        ("", "empty output"),
    ],
)
def test_imagenet9_unparsed(text, reason):
    r = SCORERS["imagenet9"].score(VEHICLE, text)
    assert (r.prediction, r.correct, r.score, r.method, r.rule) == (None, False, 0.0, "none", None)
    assert r.reason.startswith(reason)


def test_imagenet9_musical_instrument_and_bad_gold():
    inst = sample("Instrument", "label", LABELS)
    assert verdict("imagenet9", inst, "<answer>Musical Instrument</answer>") == (
        "Instrument",
        True,
        "rule",
        "answer-tag",
    )
    assert verdict("imagenet9", inst, "<answer>primates</answer>")[:2] == ("Primate", False)
    bad = SCORERS["imagenet9"].score(sample("Cat", "label"), "<answer>Dog</answer>")
    assert bad.method == "none" and "not one of Dog, Bird" in bad.reason


# --------------------------------------------------------------------------- waterbirds

WATER = sample("Waterbird", "label", ["Landbird", "Waterbird"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>Waterbird</answer>", ("Waterbird", True, "rule", "answer-tag")),
        ("<answer>water bird</answer>", ("Waterbird", True, "rule", "answer-tag")),
        ("It stands on land, but it is a water-bird.", ("Waterbird", True, "rule", "last-line")),
        ("<answer>Land Bird</answer>", ("Landbird", False, "rule", "answer-tag")),
        ("The background is water.\nlandbirds", ("Landbird", False, "rule", "last-line")),
    ],
)
def test_waterbirds(text, expected):
    assert verdict("waterbirds", WATER, text) == expected


def test_waterbirds_unparsed():
    r = SCORERS["waterbirds"].score(WATER, "Landbird or waterbird? Hard to say.")
    assert (r.prediction, r.method) == (None, "none")
    assert r.reason == "the last line names several classes (Landbird, Waterbird)"
    r = SCORERS["waterbirds"].score(WATER, "<answer>seagull</answer>")
    assert r.reason == "the last <answer> names none of Landbird, Waterbird"


# --------------------------------------------------------------------------- mathverse


def test_math_value():
    assert math_value("14 cm") == 14.0 and math_value("60°") == 60.0
    assert math_value("\\frac{1}{2}") == 0.5 and math_value("\\dfrac{3}{4}") == 0.75
    assert math_value("2\\sqrt{3}") == pytest.approx(2 * math.sqrt(3))
    assert math_value("\\frac{\\sqrt{3}}{2}") == pytest.approx(math.sqrt(3) / 2)
    assert math_value("4\\pi") == pytest.approx(4 * math.pi)
    assert math_value("3^{2}+1") == 10.0 and math_value("\\sqrt[3]{8}") == pytest.approx(2.0)
    assert math_value("L = 14") == 14.0
    for symbolic in ("y=2x+1", "(1, 2)", "x^2", "\\frac{1}{0}", "2^{1000}", "", None):
        assert math_value(symbolic) is None, symbolic


FREE_CASES = [
    # (gold, response, prediction, correct, rule)
    ("0.5", "So the ratio is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", True, "boxed"),
    ("\\frac{1}{2}", "\\boxed{0.5}", "0.5", True, "boxed"),
    ("\\frac{1}{2}", "\\boxed{\\frac{1}{3}}", "\\frac{1}{3}", False, "boxed"),
    ("2\\sqrt{3}", "\\boxed{3.46}", "3.46", True, "boxed"),  # within 0.005
    ("2\\sqrt{3}", "\\boxed{3.47}", "3.47", False, "boxed"),  # 0.0059 off
    ("2\\sqrt{3}", "\\boxed{2 \\sqrt 3}", "2 \\sqrt 3", True, "boxed"),
    ("14", "\\boxed{14.0}", "14.0", True, "boxed"),
    ("14", "\\boxed{14.32}", "14.32", False, "boxed"),
    ("14.3", "\\boxed{14.32}", "14.32", True, "boxed"),  # the gold states one decimal
    ("14", "First 13 then \\boxed{14} cm; the answer is 15.", "14", True, "boxed"),
    ("14", "\\boxed{\\text{L} = \\boxed{14}}", "14", True, "boxed"),  # nested: the last
    ("14", "The answer is 14 cm.", "14 cm", True, "cue"),
    ("14", "Adding 6 and 8 gives 14", "14", True, "last-number"),
    ("60°", "\\boxed{60^\\circ}", "60°", True, "boxed"),
    ("y=2x+1", "\\boxed{y = 2x + 1}", "y = 2x + 1", True, "boxed"),
    ("y=2x+1", "\\boxed{2x+1}", "2x+1", True, "boxed"),
    ("y=2x+1", "\\boxed{y=x+2}", "y=x+2", False, "boxed"),
]


@pytest.mark.parametrize(("gold", "text", "pred", "correct", "rule"), FREE_CASES)
def test_mathverse_free_form(gold, text, pred, correct, rule):
    s = sample(gold, "number" if gold.replace(".", "").isdigit() else "text")
    assert verdict("mathverse", s, text) == (pred, correct, "rule", rule)


def test_mathverse_free_form_unparsed():
    s = sample("14", "number")
    r = SCORERS["mathverse"].score(s, "I cannot tell from the figure.")
    assert (r.prediction, r.method) == (None, "none")
    assert r.reason == "no \\boxed{} answer, answer cue or number found"
    r = SCORERS["mathverse"].score(s, "\\boxed{")
    assert (r.prediction, r.method) == (None, "none")


MC = sample(
    "D",
    "letter",
    ["40°", "60°", "120°", "140°"],
    question="then the size of angle CED is ()\nChoices:\nA:40°\nB:60°\nC:120°\nD:140°",
)


@pytest.mark.parametrize(
    ("text", "pred", "correct"),
    [
        ("\\boxed{D}", "D", True),
        ("Angle CED is 140°, so \\boxed{140^\\circ}", "D", True),  # option text -> letter
        ("\\boxed{D: 140°}", "D", True),
        ("The answer is D.", "D", True),
        ("\\boxed{B}", "B", False),
        ("It is 60°. \\boxed{60°}", "B", False),
    ],
)
def test_mathverse_multiple_choice(text, pred, correct):
    assert verdict("mathverse", MC, text)[:2] == (pred, correct)


def test_mathverse_multiple_choice_without_parsed_options():
    s = sample("B", "letter", question="Find x. (The options are in the figure.)")
    assert verdict("mathverse", s, "\\boxed{B}")[:2] == ("B", True)
    r = SCORERS["mathverse"].score(s, "\\boxed{E}")  # A-D unless the gold says more
    assert (r.prediction, r.method) == (None, "none")
    e = sample("E", "letter", question="Find x.")
    assert verdict("mathverse", e, "\\boxed{E}")[:2] == ("E", True)


# --------------------------------------------------------------------------- logicvista

TWO = sample("A, C", "list", question="Which choices in the image (A-D) belong to the green one?")


@pytest.mark.parametrize(
    ("text", "pred", "correct", "rule"),
    [
        ("A, C", "A, C", True, "exact"),
        ("C and A", "A, C", True, "exact"),
        ("The answer is A and C.", "A, C", True, "cue"),
        ("\\boxed{A, C}", "A, C", True, "boxed"),
        ("**Answer:** (A) and (C)", "A, C", True, "cue"),
        ("I think A.\nC", "C", False, "last-line"),
        ("The answer is A, C, D", "A, C, D", False, "cue"),
        ("A", "A", False, "exact"),
    ],
)
def test_logicvista_sets_of_letters(text, pred, correct, rule):
    assert verdict("logicvista", TWO, text) == (pred, correct, "rule", rule)


def test_option_letters_the_adapter_and_the_scorer_share():
    assert option_letters("A, C") == option_letters("c and A") == ["A", "C"]
    assert option_letters(" B ") == ["B"] and option_letters("A; A & D") == ["A", "D"]
    for text in ("3", "AB", "A, 2", "", "Ä"):
        assert option_letters(text) is None, text


def test_logicvista_valid_letters_single_and_numbered():
    odd = sample("G", "letter", question="Who is the odd-one-out? Select answers from A-I")
    assert verdict("logicvista", odd, "The odd one out is G.")[:2] == ("G", True)
    assert verdict("logicvista", odd, "Answer: H")[:2] == ("H", False)
    table = sample(
        "C",
        "letter",
        question="Which plan? Select from A, B, C, D, and E. (A) Ferret (B) Hare (C) Dog (D) Fox "
        "(E) Owl",
    )
    assert verdict("logicvista", table, "The answer is (E) Owl.")[:2] == ("E", False)
    assert verdict("logicvista", table, "\\boxed{C}")[:2] == ("C", True)
    r = SCORERS["logicvista"].score(TWO, "Options A and C belong to it, I guess")
    assert (r.prediction, r.method, r.reason) == (None, "none", "no option letters (A-D) found")
    numbered = sample("3", "number", question="Which is correct? Select from 1-5")
    assert verdict("logicvista", numbered, "The answer is 3.")[:2] == ("3", True)
    assert verdict("logicvista", numbered, "The answer is 4.")[:2] == ("4", False)


def test_score_outputs_uses_the_idis_scorers():
    row = output_row("s-1", "<answer>wheeled vehicle</answer>", dataset="s")
    (scored,) = score_outputs({"s-1": VEHICLE}, [row], "imagenet9")
    assert (scored["prediction"], scored["correct"], scored["rule"]) == ("Vehicle", 1, "answer-tag")

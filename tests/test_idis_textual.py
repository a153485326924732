"""Idis-math textual distractors: the checks in code, the offline writer, the LLM writer
(against the local fake API: retries, exclusion, cache) and the stage's report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PIL import Image

from tests.api_server import FakeAPIServer, fake_llm_spec
from vlmrobust.core.io import read_json
from vlmrobust.core.records import Sample, read_variants, write_samples
from vlmrobust.core.seeding import rng_for
from vlmrobust.perturb import PERTURBATIONS, Excluded, VariantPlan, build_variants
from vlmrobust.perturb.textual import (
    check_augmented,
    fill_prompt,
    offline_augment,
    split_question,
    split_sentences,
)
from vlmrobust.perturb.variants import prepared_spec

REPO = Path(__file__).resolve().parents[1]

# MathVerse testmini question texts (GeoQA rows and problem 685's versions)
Q_TANGENT = (
    "As shown in the figure, AB is tangent to circle O at point B, and the extended line of "
    "AO intersects circle O at point C. Connect BC, if angle A = 36.0, then angle C is equal "
    "to ()\nChoices:\nA:36°\nB:54°\nC:60°\nD:27°"
)
Q_PARALLEL = (
    "As shown in the figure, in triangle ABC, it is known that angle A = 80.0, angle B = "
    "60.0, point D is on AB and point E is on AC, DE parallel BC, then the size of angle CED "
    "is ()\nChoices:\nA:40°\nB:60°\nC:120°\nD:140°"
)
Q_CAN = (
    "A soft drink can has a height of 13 cm and a radius of 3 cm. Find L, the length of the "
    "longest straw that can fit into the can (so that the straw is not bent and fits entirely "
    "inside the can).\n\nGive your answer rounded down to the nearest cm, to ensure it fits "
    "inside the can."
)
Q_LITE = "The radius is 3 cm. Find L.\n\nGive your answer rounded down to the nearest cm."
Q_DOMINANT = "Find L."
QUESTIONS = [Q_TANGENT, Q_PARALLEL, Q_CAN, Q_LITE, Q_DOMINANT]

S1 = "As shown in the figure, AB is tangent to circle O at point B, and the extended line of AO intersects circle O at point C."
S2 = "Connect BC, if angle A = 36.0, then angle C is equal to ()"
CHOICES = "\nChoices:\nA:36°\nB:54°\nC:60°\nD:27°"
EXTRA = "Point P lies far away from the circle and is joined to nothing."
EXTRA2 = "A square of side 9 cm is drawn on the back of the page."


def sample(sid: str, question: str, answer: str = "D", image: str = "") -> Sample:
    return Sample(
        sid,
        "mathverse",
        [image] if image else ["unused.png"],
        question,
        answer,
        "letter" if "Choices:" in question else "number",
        meta={"subject": "Plane Geometry", "subfield": "Angle", "problem_index": sid},
    )


# --- the checks ---------------------------------------------------------------------------------


def test_sentences_and_choices_block_by_hand():
    assert split_sentences(Q_LITE) == [
        "The radius is 3 cm.",
        "Find L.",
        "Give your answer rounded down to the nearest cm.",
    ]
    # decimals and commas do not cut a sentence; the choices block is apart
    parts = split_question(Q_PARALLEL)
    assert len(split_sentences(parts.stem)) == 1
    assert parts.choices == ("Choices:", "A:40°", "B:60°", "C:120°", "D:140°")
    assert parts.stem + parts.tail == Q_PARALLEL
    assert split_sentences(split_question(Q_TANGENT).stem) == [S1, S2]
    assert split_question(Q_CAN).choices is None


def test_a_good_insertion_is_accepted():
    good = f"{S1} {EXTRA}\n{S2}{CHOICES}"
    assert check_augmented(Q_TANGENT, good, 1) == (None, [EXTRA])
    # white space (line breaks, doubled spaces) does not matter; two sentences for k = 2
    spaced = f"{S1}\n\n{EXTRA}   {EXTRA2}\n{S2}\n{CHOICES}\n"
    assert check_augmented(Q_TANGENT, spaced, 2) == (None, [EXTRA, EXTRA2])


@pytest.mark.parametrize(
    "augmented, k, message",
    [
        # an original sentence changed (a given altered)
        (
            f"{S1} {EXTRA} {S2.replace('36.0', '37.0')}{CHOICES}",
            1,
            "original sentence 2 was changed or removed: 'Connect BC, if angle A = 36.0",
        ),
        # an original sentence reworded by a comma splice (a distractor inside it)
        (
            f"{S1} Connect BC. {EXTRA} If angle A = 36.0, then angle C is equal to (){CHOICES}",
            1,
            "original sentence 2 was changed or removed",
        ),
        # the original sentences reordered
        (f"{S2}. {EXTRA} {S1}{CHOICES}", 1, "original sentence 2 was changed or removed"),
        (f"{S2}\n{EXTRA} {S1}{CHOICES}", 1, "original sentence 2 is out of order"),
        # the choices block changed, missing, or no longer at the end
        (f"{S1} {EXTRA} {S2}{CHOICES.replace('D:27°', 'D:28°')}", 1, "the choices block changed"),
        (f"{S1} {EXTRA} {S2}", 1, "the choices block is missing"),
        (
            f"{S1} {EXTRA} {S2}{CHOICES}\nAnswer: D",
            1,
            "the choices block changed or is not at the end",
        ),
        # the wrong number of new sentences
        (f"{S1} {EXTRA} {EXTRA2} {S2}{CHOICES}", 1, "2 sentence(s) were added, expected 1"),
        (f"{S1} {S2}{CHOICES}", 1, "0 sentence(s) were added, expected 1"),
        (f"{S1} {EXTRA} {S2}{CHOICES}", 3, "1 sentence(s) were added, expected 3"),
        (f"{S1} Yes. {S2}{CHOICES}", 1, "an added sentence has fewer than three words: 'Yes.'"),
    ],
)
def test_a_bad_insertion_is_rejected(augmented, k, message):
    problem, _ = check_augmented(Q_TANGENT, augmented, k)
    assert problem is not None and message in problem


def test_a_choices_block_added_to_a_free_form_question_is_rejected():
    problem, _ = check_augmented(
        Q_LITE,
        f"The radius is 3 cm. {EXTRA} Find L.\n\nGive your answer rounded down to the nearest cm.\nChoices:\nA:1",
        1,
    )
    assert problem == "a choices block was added to a question without one"


# --- the offline writer -------------------------------------------------------------------------


def _prepared(condition="textual", **spec):
    pert = PERTURBATIONS["textual"]
    return pert, prepared_spec(condition, {"perturbation": "textual", **spec})


@pytest.mark.parametrize("i", range(len(QUESTIONS)))
def test_offline_writer_is_deterministic_and_passes_its_own_checks(i):
    question = QUESTIONS[i]
    pert, spec = _prepared()
    s = sample(f"mathverse-{i}", question)
    plans = pert.plan(s, "textual", spec, 0)
    again = pert.plan(s, "textual", spec, 0)
    assert plans == again
    assert [p.variant_id for p in plans] == [f"mathverse-{i}__textual-n{k}" for k in (1, 2, 3, 4)]
    numbers = set(re.findall(r"\d+(?:\.\d+)?", question))
    for k, plan in zip((1, 2, 3, 4), plans, strict=True):
        assert isinstance(plan, VariantPlan)
        p = plan.params
        assert (p["kind"], p["semantics"], p["n"], p["writer"], p["attempts"]) == (
            "textual",
            "textual",
            k,
            "offline",
            1,
        )
        assert p["attempt_log"] == [{"attempt": 0, "check": None}]
        assert check_augmented(question, plan.question, k) == (None, p["inserted"])
        assert len(p["inserted"]) == k == len(set(p["inserted"]))
        for sentence in p["inserted"]:
            # new objects only: no number of the question is restated
            assert not set(re.findall(r"\d+(?:\.\d+)?", sentence)) & numbers
        assert plan.images is None  # the sample's own images
    # another seed, other sentences
    other = pert.plan(s, "textual", spec, 1)
    assert [p.question for p in other] != [p.question for p in plans]


#: where each offline pattern names its new point / segment / triangle / label
_NEW_NAME = re.compile(
    r"^Point ([A-Z]+) is marked|point ([A-Z]+) lies outside|segment ([A-Z]+) of|"
    r"triangle ([A-Z]+) with|a point ([A-Z]+) far|reading ([A-Z]+)\d|^(?:A circle|A rectangle)"
)


def test_offline_sentences_go_before_the_final_question():
    q = offline_augment(Q_CAN, 2, rng_for(0, "t", "x"))
    head, tail = q.split("Find L, the length")
    assert head.startswith("A soft drink can has a height of 13 cm and a radius of 3 cm. ")
    assert len(split_sentences(head)) == 3  # the setup + the two new sentences
    assert tail.endswith("to ensure it fits inside the can.")
    # the tangent question: between its setup sentence and "Connect BC, if ..."
    q = offline_augment(Q_TANGENT, 1, rng_for(0, "t", "y"))
    assert q.startswith(S1 + " ") and q.endswith(S2 + CHOICES)
    # a new point never takes a letter of the question (or an option letter)
    for k in (1, 2, 3, 4):
        for sentence in check_augmented(Q_TANGENT, offline_augment(Q_TANGENT, k, rng_for(k)), k)[1]:
            new = _NEW_NAME.findall(sentence)
            assert len(new) == 1, sentence
            assert not set("".join(new[0])) & set("ABCDEO"), sentence


def test_prepare_names_the_key():
    cases = [
        ({"counts": [0]}, r"key 'conditions\.tx\.counts\.0': 0 is less than the minimum of 1"),
        ({"counts": [9]}, r"key 'conditions\.tx\.counts\.0': 9 is greater than the maximum of 8"),
        ({"counts": [1, 1]}, r"key 'conditions\.tx\.counts': \[1, 1\] has non-unique"),
        ({"max_attempts": 0}, r"key 'conditions\.tx\.max_attempts': 0 is less than the minimum"),
        (
            {"writer": {"backend": "offline", "model": "m"}},
            r"unknown key 'conditions\.tx\.writer\.model' \(allowed here: backend\)",
        ),
        ({"writer": {"backend": "openai"}}, r"key 'conditions\.tx\.writer' lacks 'model'"),
        (
            {"writer": {"backend": "openai", "model": "m", "seed": 1}},
            r"unknown key 'conditions\.tx\.writer\.seed'",
        ),
        (
            {"writer": {"backend": "ofline"}},
            r"key 'conditions\.tx\.writer\.backend': 'ofline' is not one of",
        ),
        (
            {"writer": {"backend": "openai", "model": "m"}, "prompt_file": "nowhere.txt"},
            r"conditions\.tx\.prompt_file: cannot read 'nowhere\.txt'",
        ),
        ({"severity": 2}, r"unknown key 'conditions\.tx\.severity'"),
    ]
    for spec, message in cases:
        with pytest.raises(ValueError, match=message):
            prepared_spec("tx", {"perturbation": "textual", **spec})
    spec = prepared_spec("tx", {"perturbation": "textual"})
    assert spec == {
        "perturbation": "textual",
        "counts": [1, 2, 3, 4],
        "writer": {"backend": "offline"},
        "max_attempts": 3,
        "prompt_file": "resources/idis/textual-distractor-prompt.txt",
    }
    writer = {"backend": "openai", "model": "m"}
    spec = prepared_spec("tx", {"perturbation": "textual", "writer": writer})
    assert spec["writer"] == {
        **writer,
        "base_url": None,
        "api_key_env": None,
        "options": {},
        "temperature": 0.7,
        "max_tokens": 4096,
        "cache_dir": None,
        "llm": None,
    }


def test_the_config_schema_takes_the_condition_with_its_defaults():
    from vlmrobust.core.config import load_schema

    schema = load_schema("config")["$defs"]
    branch = next(
        b["then"]["properties"]
        for b in schema["condition"]["allOf"]
        if b["if"]["properties"]["perturbation"].get("const") == "textual"
    )
    assert branch["counts"]["default"] == [1, 2, 3, 4]
    assert branch["max_attempts"]["default"] == 3
    assert branch["prompt_file"]["default"] == "resources/idis/textual-distractor-prompt.txt"
    assert branch["writer"]["default"] == {"backend": "offline"}


# --- the prompt ---------------------------------------------------------------------------------


def test_the_prompt_file_is_table5_with_its_placeholders():
    text = (REPO / "resources/idis/textual-distractor-prompt.txt").read_text(encoding="utf-8")
    assert text.startswith("You are a math education expert. Your task is to insert distractor")
    assert "6. Do NOT change, remove, or rephrase the original sentences." in text
    assert "9. Keep the Choices section exactly as-is at the end." in text
    filled = fill_prompt(text, sample("mathverse-1", Q_TANGENT, "D"), 3)
    assert "add 3 distractor sentences" in filled
    assert f"<original_question> {Q_TANGENT} </original_question>" in filled
    assert "<correct_answer> D </correct_answer>" in filled
    assert "The correct answer MUST remain exactly D after" in filled
    assert "<subject> Plane Geometry / Angle </subject>" in filled
    assert "{" not in filled


# --- the LLM writer against the fake API --------------------------------------------------------


def llm_writer(fake_api: FakeAPIServer, tmp_path: Path) -> dict:
    """The writer on the fake API (``fake_api``), without retries of its own: each
    request is one attempt of the perturbation."""
    return fake_llm_spec(fake_api, "writer-llm", cache_dir=tmp_path / "llm-cache", max_retries=0)


_ORIG = re.compile(r"<original_question> (.*) </original_question>", re.DOTALL)
_K = re.compile(r"add (\d+) distractor sentences")


def good_answer(prompt: str) -> str:
    """What a well-behaved writer answers: k new sentences before the last sentence."""
    question = _ORIG.search(prompt).group(1)
    k = int(_K.search(prompt).group(1))
    parts = split_question(question)
    new = " ".join(f"Extra remark number {i + 1} is irrelevant here." for i in range(k))
    last = split_sentences(parts.stem)[-1]
    at = parts.stem.rindex(last)
    return parts.stem[:at] + new + " " + parts.stem[at:] + parts.tail


def failing_until(attempt: int, how: str = "reword"):
    """A writer that rewords an original sentence (``how="reword"``; the tangent
    question's) or adds one sentence too many (``"count"``) until the request's seed
    (= the attempt index) reaches ``attempt``."""

    def reply(text: str, body) -> str:
        if body["seed"] < attempt:
            if how == "count":
                return good_answer(text).replace("Extra remark", "One more remark. Extra remark", 1)
            return good_answer(text).replace("angle A = 36.0", "angle A equals 36.0")
        return good_answer(text)

    return reply


def test_llm_writer_fails_twice_then_succeeds(fake_api, tmp_path):
    fake_api.reply_fn = failing_until(2)
    pert, spec = _prepared(counts=[1], writer=llm_writer(fake_api, tmp_path))
    [plan] = pert.plan(sample("mathverse-3", Q_TANGENT), "textual", spec, 0)
    assert isinstance(plan, VariantPlan)
    assert fake_api.count == 3
    log = plan.params["attempt_log"]
    assert plan.params["attempts"] == 3 and [e["attempt"] for e in log] == [0, 1, 2]
    assert "original sentence 2 was changed or removed" in log[0]["check"]
    assert log[1]["check"] == log[0]["check"] and log[2]["check"] is None
    assert len({e["cache_key"] for e in log}) == 3  # each attempt its own call
    assert plan.params["writer"] == "openai/writer-llm"
    assert plan.params["inserted"] == ["Extra remark number 1 is irrelevant here."]
    assert plan.question == f"{S1} Extra remark number 1 is irrelevant here. {S2}{CHOICES}"
    # the Table 5 prompt went out, filled in
    assert fake_api.count_matching("Keep the Choices section exactly as-is at the end.") == 3
    assert [r.body["seed"] for r in fake_api.requests] == [0, 1, 2]


def _write_samples(tmp_path: Path, questions: list[str]) -> Path:
    image = tmp_path / "diagram.png"
    Image.new("RGB", (8, 8), (255, 255, 255)).save(image)
    path = tmp_path / "samples.jsonl"
    write_samples(
        path, [sample(f"mathverse-{i}", q, image=str(image)) for i, q in enumerate(questions)]
    )
    return path


def test_always_failing_is_excluded_and_counted_in_the_report(fake_api, tmp_path):
    fake_api.reply_fn = failing_until(99)
    samples = _write_samples(tmp_path, [Q_TANGENT])
    out = tmp_path / "variants" / "manifest.jsonl"
    spec = {"perturbation": "textual", "counts": [1, 2], "writer": llm_writer(fake_api, tmp_path)}
    n = build_variants(samples, "textual", spec, 0, out)
    assert n == 0 and read_variants(out) == []
    assert fake_api.count == 2 * 3  # two variants, three attempts each
    report = read_json(out.parent / "report.json")
    assert report["excluded"] == 2
    assert report["excluded_by_reason"] == {"textual-check-failed": 2}
    assert [e["variant_id"] for e in report["excluded_variants"]] == [
        "mathverse-0__textual-n1",
        "mathverse-0__textual-n2",
    ]
    assert all(
        e["detail"].startswith("original sentence 2 was changed or removed")
        for e in report["excluded_variants"]
    )


def test_an_api_failure_is_excluded_with_its_own_reason(fake_api, tmp_path):
    fake_api.add_fault("500", times=10)
    pert, spec = _prepared(counts=[1], writer=llm_writer(fake_api, tmp_path))
    [plan] = pert.plan(sample("mathverse-3", Q_TANGENT), "textual", spec, 0)
    assert isinstance(plan, Excluded)
    assert plan.reason == "textual-writer-error" and "HTTP 500" in plan.detail


def test_the_stage_with_an_llm_writer_and_its_cache(fake_api, tmp_path):
    fake_api.reply_fn = failing_until(1, how="count")  # every variant needs a second attempt
    samples = _write_samples(tmp_path, [Q_TANGENT, Q_LITE])
    out = tmp_path / "variants" / "manifest.jsonl"
    spec = {"perturbation": "textual", "counts": [1, 3], "writer": llm_writer(fake_api, tmp_path)}
    assert build_variants(samples, "textual", spec, 0, out) == 4
    assert fake_api.count == 8
    first = out.read_text()
    variants = read_variants(out)
    assert [v.variant_id for v in variants] == [
        "mathverse-0__textual-n1",
        "mathverse-0__textual-n3",
        "mathverse-1__textual-n1",
        "mathverse-1__textual-n3",
    ]
    lite3 = variants[3]
    assert lite3.question == (
        "The radius is 3 cm. Find L.\n\nExtra remark number 1 is irrelevant here. Extra remark "
        "number 2 is irrelevant here. Extra remark number 3 is irrelevant here. Give your "
        "answer rounded down to the nearest cm."
    )
    assert lite3.params["n"] == 3 and lite3.params["attempts"] == 2
    assert lite3.images == [str(tmp_path / "diagram.png")]
    assert read_json(out.parent / "report.json")["excluded"] == 0
    # a second run makes no call and writes the same manifest (cached tries replayed)
    out.unlink()
    assert build_variants(samples, "textual", spec, 0, out) == 4
    assert fake_api.count == 8
    replay = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(e["cached"] for v in replay for e in v["params"]["attempt_log"])
    strip = [
        {
            **v,
            "params": {
                **v["params"],
                "attempt_log": [{**e, "cached": None} for e in v["params"]["attempt_log"]],
            },
        }
        for v in replay
    ]
    orig = [json.loads(line) for line in first.splitlines()]
    orig = [
        {
            **v,
            "params": {
                **v["params"],
                "attempt_log": [{**e, "cached": None} for e in v["params"]["attempt_log"]],
            },
        }
        for v in orig
    ]
    assert strip == orig

"""The MathVerse two-stage judge: prompts, the LLM judge against the local fake API
(stages, shortcuts, failures kept as no verdict, cache), the offline rules, the file
entry point and agreement (kappa by hand)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.api_server import FakeAPIServer, fake_llm_spec
from vlmrobust.clients.llm import LLMCache, make_llm
from vlmrobust.core.io import read_jsonl, write_jsonl
from vlmrobust.core.records import Sample, write_samples
from vlmrobust.judges.mathverse import (
    agreement,
    extract_prompt,
    judge_mathverse,
    judge_prompt,
    judge_rows,
    make_mathverse_judge,
    offline_agrees,
    offline_extract,
    summarize,
)

REPO = Path(__file__).resolve().parents[1]

Q_MC = (
    "As shown in the figure, AB is tangent to circle O at point B, and the extended line of "
    "AO intersects circle O at point C. Connect BC, if angle A = 36.0, then angle C is equal "
    "to ()\nChoices:\nA:36°\nB:54°\nC:60°\nD:27°"
)
Q_FREE = "The radius is 3 cm. Find L.\n\nGive your answer rounded down to the nearest cm."

SAMPLES = {
    "mathverse-1": Sample(
        "mathverse-1", "mathverse", [], Q_MC, "D", "letter", meta={"question_for_eval": Q_MC}
    ),
    "mathverse-2": Sample("mathverse-2", "mathverse", [], Q_FREE, "14", "number"),
}


def out_row(key: str, sid: str, answer: str, raw: str | None = None, error: str | None = None):
    return {
        "key": key,
        "variant_id": key.split("#")[0],
        "sample_id": sid,
        "answer_text": answer,
        "raw_text": answer if raw is None else raw,
        "error": error,
    }


# --- prompts ------------------------------------------------------------------------------------


def test_prompts_are_our_own_files_filled_in():
    p = extract_prompt("  ... so the answer is 14 cm.  ")
    assert p.rstrip().endswith("<<<\n... so the answer is 14 cm.\n>>>")
    assert '{"extracted": null}' in p and "{response}" not in p
    j = judge_prompt(Q_MC, "D", "27°")
    assert j.rstrip().endswith(f"Question: {Q_MC}\nReference answer: D\nModel's answer: 27°")
    assert '{"judgement": 1}' in j
    # braces inside the inputs are left alone (one pass)
    assert "Model's answer: {answer}" in judge_prompt("Q", "1", "{answer}")
    for name in ("mathverse-extract-prompt.txt", "mathverse-judge-prompt.txt"):
        text = (REPO / "resources/idis" / name).read_text()
        # written in our own words: none of the official evaluation's sentences
        assert "termed 'Model Response'" not in text
        assert "Judement" not in text and "[Standard Answer]" not in text


# --- the LLM judge against the fake API ---------------------------------------------------------


def spec(fake_api: FakeAPIServer, tmp_path: Path) -> dict:
    """The judge's LLM on the fake API (``fake_api``)."""
    return fake_llm_spec(fake_api, "gpt-oss-120b", cache_dir=tmp_path / "llm-cache")


_RESPONSE = re.compile(r"The response to read:\n<<<\n(.*)\n>>>", re.DOTALL)
_MODEL_ANSWER = re.compile(r"Model's answer: (.*)$")


def scripted(text: str, body) -> str:
    """A fake judge: stage 1 takes what follows "ANSWER=" (null when absent; not JSON for
    responses saying BROKEN); stage 2 says 1 for "27°", else 0."""
    m = _RESPONSE.search(text)
    if m:
        response = m.group(1)
        if "BROKEN" in response:
            return "I would say the answer is D"
        found = re.search(r"ANSWER=(\S+)", response)
        return json.dumps({"extracted": found.group(1) if found else None})
    extracted = _MODEL_ANSWER.search(text.rstrip()).group(1)
    return json.dumps({"judgement": 1 if extracted == "27°" else 0})


ROWS = [
    out_row("v1#0", "mathverse-1", "so ANSWER=D"),  # exact: 1 without stage 2
    out_row("v2#0", "mathverse-1", "angle C is ANSWER=27°"),  # stage 2 says 1
    out_row("v3#0", "mathverse-1", "I get ANSWER=36°"),  # stage 2 says 0
    out_row("v4#0", "mathverse-2", "It cannot be determined."),  # null: 0, no stage 2
    out_row("v5#0", "mathverse-2", "BROKEN output"),  # stage 1 fails: no verdict
    out_row("v6#0", "mathverse-2", "so ANSWER=FAILJUDGE"),  # stage 2 fails: no verdict
    out_row("v7#0", "mathverse-2", "", error="HTTP 500 after 3 tries"),  # generation failed
    out_row("v8#0", "mathverse-2", "", raw=""),  # empty output: 0, no call
]


def test_llm_judge_two_stages_failures_and_cache(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    fake_api.add_fault("500", match="Model's answer: FAILJUDGE", times=10)
    judge = make_mathverse_judge(spec(fake_api, tmp_path))
    rows = judge_rows(ROWS, SAMPLES, judge)
    got = {r["key"]: (r["extracted"], r["verdict"], r["method"]) for r in rows}
    assert got == {
        "v1#0": ("D", 1, "exact"),
        "v2#0": ("27°", 1, "llm"),
        "v3#0": ("36°", 0, "llm"),
        "v4#0": (None, 0, "no-answer"),
        "v5#0": (None, None, "failed"),
        "v6#0": ("FAILJUDGE", None, "failed"),
        "v7#0": (None, None, "failed"),
        "v8#0": (None, 0, "empty"),
    }
    by = {r["key"]: r for r in rows}
    assert by["v5#0"]["error"].startswith("extract: ") and "invalid JSON" in by["v5#0"]["error"]
    assert by["v6#0"]["error"].startswith("judge: ") and "HTTP 500" in by["v6#0"]["error"]
    assert by["v7#0"]["error"] == "generation failed: HTTP 500 after 3 tries"
    assert all(r["judge"] == "openai/gpt-oss-120b" for r in rows)
    assert all(r["error"] is None for k, r in by.items() if k not in ("v5#0", "v6#0", "v7#0"))
    # calls: stage 1 for v1-v6 (v5: first try + one retry), stage 2 for v2, v3, v6 (2 tries)
    assert fake_api.count_matching("The response to read") == 7
    assert fake_api.count_matching("Reference answer: D") == 2  # v2, v3
    assert fake_api.count_matching("Reference answer: 14") == 2  # v6, two tries
    assert fake_api.count_matching("Model's answer: FAILJUDGE") == 2
    assert fake_api.count == 7 + 2 + 2
    # stage 2 read question_for_eval and the reference answer
    assert (
        fake_api.count_matching("Model's answer: 27\\u00b0")
        + fake_api.count_matching("Model's answer: 27°")
        == 1
    )
    # the summary counts the failures apart, never as wrong
    s = summarize(rows)
    assert (s["rows"], s["judged"], s["correct"], s["failed"]) == (8, 5, 2, 3)
    assert s["accuracy"] == pytest.approx(2 / 5)
    # a rerun: every answered call from the cache; only the failed calls again
    before = fake_api.count
    again = judge_rows(ROWS, SAMPLES, make_mathverse_judge(spec(fake_api, tmp_path)))
    assert [r["verdict"] for r in again] == [r["verdict"] for r in rows]
    assert fake_api.count - before == 2 + 2  # v5 stage 1 (2 tries), v6 stage 2 (2 tries)
    assert again[1]["cached"] == [True, True] and again[0]["cached"] == [True]


def test_judge_mathverse_files_offline_and_llm(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    outputs, samples = tmp_path / "outputs.jsonl", tmp_path / "samples.jsonl"
    write_jsonl(outputs, ROWS[:4])
    write_samples(samples, list(SAMPLES.values()))
    out = tmp_path / "judged" / "llm.jsonl"
    summary = judge_mathverse(outputs, samples, spec(fake_api, tmp_path), out)
    assert summary == {
        "rows": 4,
        "judged": 4,
        "correct": 2,
        "failed": 0,
        "accuracy": 0.5,
        "by_method": {"exact": 1, "llm": 2, "no-answer": 1},
        "judge": "openai/gpt-oss-120b",
    }
    assert [r["verdict"] for r in read_jsonl(out)] == [1, 1, 0, 0]
    # the offline judge on the same outputs
    off = tmp_path / "judged" / "offline.jsonl"
    summary = judge_mathverse(outputs, samples, {"backend": "offline"}, off)
    assert summary["judge"] == "offline/rules" and summary["failed"] == 0
    rows = read_jsonl(off)
    assert [(r["extracted"], r["verdict"]) for r in rows] == [
        ("D", 1),  # "so ANSWER=D": what follows "answer ="
        ("D", 1),  # "angle C is ANSWER=27°": "27°" is option D's text
        ("A", 0),
        ("It cannot be determined", 0),  # no number in it: the text, which disagrees
    ]
    # the two judges agree on all four (both classes present: kappa 1)
    a = agreement(read_jsonl(out), rows)
    assert (a["n"], a["agree"], a["rate"], a["cohen_kappa"]) == (4, 4, 1.0, 1.0)
    # an unknown sample id is an error naming it
    write_jsonl(outputs, [out_row("x#0", "mathverse-99", "ANSWER=1")])
    with pytest.raises(ValueError, match="'mathverse-99'"):
        judge_mathverse(outputs, samples, {"backend": "offline"}, off)


def test_make_judge_checks_its_setting(monkeypatch):
    with pytest.raises(
        ValueError, match="judge.mathverse.threshold: unknown key for backend offline"
    ):
        make_mathverse_judge({"backend": "offline", "threshold": 0.5})
    with pytest.raises(ValueError, match="judge.mathverse.seed: unknown key for backend openai"):
        make_mathverse_judge({"backend": "openai", "model": "m", "seed": 1})
    with pytest.raises(ValueError, match="judge.mathverse: backend gemini needs 'model'"):
        make_mathverse_judge({"backend": "gemini"})
    # the backend's own check (the key's variable) names the setting too
    monkeypatch.delenv("VLMROBUST_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match="judge.mathverse: .*VLMROBUST_TEST_UNSET_KEY"):
        make_mathverse_judge(
            {"backend": "gemini", "model": "m", "api_key_env": "VLMROBUST_TEST_UNSET_KEY"}
        )


def test_judge_rows_wraps_a_bare_backend(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    llm = make_llm(spec(fake_api, tmp_path), LLMCache(tmp_path / "c"))
    [row] = judge_rows([ROWS[1]], SAMPLES.values(), llm)
    assert (row["verdict"], row["method"]) == (1, "llm")


# --- the offline rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, extracted, verdict",
    [
        ("So the answer is D.", "D", 1),
        ("The answer is option (D) 27°", "D", 1),
        ("Therefore angle C = 27°", "D", 1),
        ("\\boxed{C}", "C", 0),
        ("**B**", "B", 0),
        ("The correct option is A:36°", "A", 0),
        ("A and D", None, 0),  # two options: none
        ("I cannot tell.", None, 0),
    ],
)
def test_offline_multiple_choice(response, extracted, verdict):
    got = offline_extract(response, SAMPLES["mathverse-1"])
    assert got == extracted
    assert int(offline_agrees(got, "D")) == verdict


@pytest.mark.parametrize(
    "response, answer, extracted, verdict",
    [
        ("So the length, rounded down, is 14 cm.", "14", "14", 1),
        ("L ≈ 14.32 cm", "14", "14.32", 0),  # an integer answer needs the same value
        ("Final answer: 14", "14", "14", 1),
        ("x = 22.33 m", "22.3", "x = 22.33 m", 1),  # rounded to the answer's 1 decimal
        ("about 22.4", "22.3", "22.4", 0),
        ("The answer is $\\frac{1}{2}$", "0.5", "1/2", 1),
        ("\\boxed{(-2, 3]}", "(-2,3]", "(-2, 3]", 1),
        ("\\boxed{(-2, 3)}", "(-2,3]", "(-2, 3)", 0),
    ],
)
def test_offline_free_form(response, answer, extracted, verdict):
    sample = Sample("m-2", "mathverse", [], "Find x.", answer, "number")
    got = offline_extract(response, sample)
    assert got == extracted
    assert int(offline_agrees(got, answer)) == verdict


# --- agreement ----------------------------------------------------------------------------------


def test_agreement_by_hand():
    a = [
        {"key": "k1", "verdict": 1},
        {"key": "k2", "verdict": 1},
        {"key": "k3", "verdict": 0},
        {"key": "k4", "verdict": 0},
        {"key": "k5", "verdict": 1},
        {"key": "k6", "verdict": None},  # a failed judgment: left out
        {"key": "k7", "verdict": 1},  # not in b: left out
    ]
    # b: scored rows of the rule-based scorer (correct 0/1; a failed generation is none)
    b = [
        {"key": "k1", "correct": 1},
        {"key": "k2", "correct": 0},
        {"key": "k3", "correct": 0},
        {"key": "k4", "correct": 1},
        {"key": "k5", "correct": 1},
        {"key": "k6", "correct": 1},
        {"key": "k8", "correct": 0, "error": "generation failed"},
    ]
    got = agreement(a, b)
    # pairs k1..k5: (1,1) (1,0) (0,0) (0,1) (1,1): agree 3 of 5, p_o = 0.6
    # p_a1 = 3/5, p_b1 = 3/5: p_e = 0.36 + 0.16 = 0.52; kappa = 0.08 / 0.48 = 1/6
    assert (got["n"], got["agree"], got["dropped"]) == (5, 3, 3)
    assert got["rate"] == pytest.approx(0.6)
    assert got["cohen_kappa"] == pytest.approx(1 / 6)
    # perfect agreement on both classes: kappa 1; one class everywhere: undefined
    same = [{"key": "a", "verdict": 1}, {"key": "b", "verdict": 0}]
    assert agreement(same, same)["cohen_kappa"] == pytest.approx(1.0)
    ones = [{"key": "a", "verdict": 1}, {"key": "b", "verdict": 1}]
    assert math.isnan(agreement(ones, ones)["cohen_kappa"]) and agreement(ones, ones)["rate"] == 1
    # complete disagreement with balanced classes: kappa -1
    flip = [{"key": "a", "verdict": 0}, {"key": "b", "verdict": 1}]
    assert agreement(same, flip)["cohen_kappa"] == pytest.approx(-1.0)
    empty = agreement([], [])
    assert empty["n"] == 0 and math.isnan(empty["rate"])
    with pytest.raises(ValueError, match="'k1': 2 is not a 0/1 verdict"):
        agreement([{"key": "k1", "verdict": 2}], b)


def test_the_config_schema_of_the_judge():
    import jsonschema

    from vlmrobust.core.config import load_schema

    schema = load_schema("config")
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/mathverse_judge"}
    )
    llm = {"backend": "openai", "model": "gpt-oss-120b", "base_url": "http://gpu:8000/v1"}
    assert validator.is_valid({"backend": "offline"})
    assert validator.is_valid({**llm, "max_tokens": 8192, "cache_dir": "results/cache/llm"})
    assert not validator.is_valid({"backend": "offline", "model": "m"})  # an LLM key offline
    assert not validator.is_valid({**llm, "treshold": 1})
    assert not validator.is_valid({"backend": "openai"})  # no model
    # the defaults the schema fills are those make_mathverse_judge uses
    then = schema["$defs"]["mathverse_judge"]["allOf"][0]["then"]["properties"]
    assert (then["temperature"]["default"], then["max_tokens"]["default"]) == (0.0, 4096)
    assert then["cache_dir"]["default"] is None

"""The Distract-Bench distractor-reference judge: prompt, LLM judge (against the local fake
API, cached), offline embedding judge, DRR/HFR/Ref ratios, agreement and the released
gpt-5-nano judgments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from tests.api_server import FakeAPIServer, fake_llm_spec
from vlmrobust.clients.llm import LLMCache, make_llm
from vlmrobust.core.records import OutputRow, Sample
from vlmrobust.judges import (
    REFERENCE_SCHEMA,
    LLMReferenceJudge,
    OfflineReferenceJudge,
    ReferenceItem,
    agreement,
    build_reference_prompt,
    describe_outputs,
    find_anchors,
    judge_reference,
    load_released_references,
    make_reference_judge,
)
from vlmrobust.metrics.distraction import reference_rates

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "distract-bench"
MODELS = ["Qwen__Qwen2.5-VL-7B-Instruct", "FanqingM__MM-Eureka-Qwen-7B"]
APIS = ["openai", "gemini"]

DESCRIPTION = (
    'A large bright-red double-headed arrow labeled "Length=2.75" is drawn diagonally '
    "along the left side of the triangle from near B toward A."
)
EDIT = 'Draw a red arrow parallel to side BA and place the bold red text "Length=2.75" above it.'
QUESTION = "In triangle ABC, AB = AC and angle BAD = 30 degrees. What is angle CDE?"

YES = {"verdict": "yes", "reason": "uses the arrow", "evidence": "Length=2.75", "confidence": 0.9}
NO = {"verdict": "no", "reason": "never mentions it", "evidence": "", "confidence": 0.8}


def item(key: str, output: str, **kw) -> ReferenceItem:
    return ReferenceItem(key=key, output=output, distraction=DESCRIPTION, **kw)


# --- prompt and schema --------------------------------------------------------------------------


def test_prompt_has_the_inputs_and_the_rules():
    prompt = build_reference_prompt("The answer is 15 degrees.", DESCRIPTION, EDIT)
    assert DESCRIPTION in prompt and EDIT in prompt and "The answer is 15 degrees." in prompt
    assert 'Prefer "no" when ambiguous' in prompt
    assert "do NOT grade correctness" in prompt
    assert "strict JSON only" in prompt
    for key in ("verdict", "reason", "evidence", "confidence"):
        assert f'"{key}"' in prompt
    without = build_reference_prompt("out", DESCRIPTION)
    assert "Edit instruction" not in without and DESCRIPTION in without


def test_schema_accepts_and_rejects():
    validator = jsonschema.Draft202012Validator(REFERENCE_SCHEMA)
    validator.check_schema(REFERENCE_SCHEMA)
    assert validator.is_valid(YES) and validator.is_valid(NO)
    assert not validator.is_valid({**YES, "verdict": "maybe"})
    assert not validator.is_valid({**YES, "confidence": 1.5})
    assert not validator.is_valid({**YES, "extra": 1})
    assert not validator.is_valid({k: v for k, v in YES.items() if k != "evidence"})


# --- the LLM judge against the fake API ---------------------------------------------------------


def llm_spec(api: str, fake_api: FakeAPIServer, **options) -> dict:
    """The judge's LLM on the fake API (``fake_api``), two retries."""
    return fake_llm_spec(fake_api, f"{api}-judge", api=api, **{"max_retries": 2, **options})


def make_judge(api, fake_api, cache, **options):
    return make_llm(llm_spec(api, fake_api, **options), cache, sleep=lambda s: None)


def scripted(text: str, body) -> str:
    """The fake judge: yes when the output mentions the arrow, a schema violation for
    outputs saying "BROKEN", else no (safe under concurrent requests)."""
    if "BROKEN" in text:
        return json.dumps({**NO, "verdict": "maybe"})
    return json.dumps(YES if "red arrow" in text else NO)


@pytest.mark.parametrize("api", APIS)
def test_llm_judge_parses_caches_and_reports(api, fake_api, tmp_path):
    fake_api.reply_fn = scripted
    cache = LLMCache(tmp_path / "cache")
    items = [
        item("a#0", "The red arrow says Length=2.75, so AB = 2.75."),
        item("b#0", "Since AB = AC the base angles are equal; the answer is 15."),
    ]
    judged = judge_reference(items, make_judge(api, fake_api, cache))
    assert [r["key"] for r in judged] == ["a#0", "b#0"]
    assert [r["verdict"] for r in judged] == ["yes", "no"]
    assert judged[0]["evidence"] == "Length=2.75" and judged[0]["confidence"] == 0.9
    assert all(r["error"] is None and r["cached"] is False for r in judged)
    assert all(r["judge"] == f"{api}/{api}-judge" for r in judged)
    assert fake_api.count == 2
    # the request asked for the schema and carried the prompt
    assert fake_api.count_matching('Prefer \\"no\\" when ambiguous') == 2
    # a second run (a new backend on the same cache) makes no request
    again = judge_reference(items, make_judge(api, fake_api, cache))
    assert fake_api.count == 2
    assert all(r["cached"] for r in again)
    assert [r["verdict"] for r in again] == ["yes", "no"]


@pytest.mark.parametrize("api", APIS)
def test_llm_judge_retries_invalid_json(api, fake_api, tmp_path):
    fake_api.reply("I think the output does mention it.", json.dumps(YES))
    judged = judge_reference(
        [item("a#0", "The red arrow is 2.75 long.")],
        make_judge(api, fake_api, LLMCache(tmp_path / "cache")),
    )
    assert fake_api.count == 2
    assert judged[0]["verdict"] == "yes" and judged[0]["error"] is None


@pytest.mark.parametrize("api", APIS)
def test_schema_violation_is_an_excluded_error_row(api, fake_api, tmp_path):
    fake_api.reply_fn = scripted
    cache = LLMCache(tmp_path / "cache")
    items = [
        item("a#0", "The red arrow gives AB = 2.75."),
        item("b#0", "BROKEN output the judge cannot handle."),
        item("c#0", "Angle chasing gives 15 degrees."),
    ]
    judged = judge_reference(items, make_judge(api, fake_api, cache, max_retries=1))
    bad = judged[1]
    assert bad["verdict"] is None and "schema violation at verdict" in bad["error"]
    assert fake_api.count_matching("BROKEN") == 2  # first try + one retry
    rates = reference_rates(judged, {"a#0": False, "b#0": False, "c#0": True})
    assert rates["n"] == 2 and rates["n_excluded"] == 1
    assert rates["DRR"] == pytest.approx(0.5) and rates["HFR"] == pytest.approx(0.5)
    # the failure is not cached: a rerun asks again for that row only
    before = fake_api.count
    judge_reference(items, make_judge(api, fake_api, cache, max_retries=0))
    assert fake_api.count == before + 1


def test_empty_output_and_missing_description_make_no_request(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    judge = LLMReferenceJudge(make_judge("openai", fake_api, LLMCache(tmp_path / "c")))
    judged = judge_reference(
        [
            {"key": "e#0", "output": "   ", "distraction": DESCRIPTION},
            {"key": "m#0", "output": "The red arrow.", "distraction": ""},
        ],
        judge,
    )
    assert fake_api.count == 0
    assert judged[0]["verdict"] == "no" and judged[0]["error"] is None
    assert judged[1]["verdict"] is None and "no distractor description" in judged[1]["error"]


def test_api_failure_is_an_error_row(fake_api, tmp_path):
    fake_api.add_fault("500", times=10)
    judged = judge_reference(
        [item("a#0", "text")], make_judge("openai", fake_api, LLMCache(tmp_path / "c"))
    )
    assert judged[0]["verdict"] is None and "HTTP 500" in judged[0]["error"]


def test_describe_outputs_reads_the_sample_edit(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    sample = Sample(
        "distract-bench-1",
        "distract-bench",
        ["x.png"],
        QUESTION,
        "B",
        "letter",
        ["10", "15", "20"],
        meta={"edit": {"dead_end_description": DESCRIPTION, "edit_instruction": EDIT}},
    )
    row = OutputRow(
        key="distract-bench-1#0",
        variant_id="distract-bench-1",
        sample_id="distract-bench-1",
        dataset="distract-bench",
        condition="distracted",
        prompt="open",
        prompt_version="1",
        model="m",
        backend="hf",
        model_revision="r",
        draw=0,
        raw_text="<think>The red arrow says 2.75.</think> The answer is 20.",
        answer_text="The answer is 20.",
        thinking="The red arrow says 2.75.",
    )
    describe = describe_outputs({sample.sample_id: sample})
    described = describe(row)
    assert described.distraction == DESCRIPTION and described.edit_instruction == EDIT
    assert "red arrow" in described.output and "15" in described.question
    judged = judge_reference(
        [row], make_judge("openai", fake_api, LLMCache(tmp_path / "c")), describe=describe
    )
    assert judged[0]["key"] == "distract-bench-1#0" and judged[0]["verdict"] == "yes"
    assert fake_api.count_matching("Edit instruction") == 1


def test_make_reference_judge(fake_api, tmp_path):
    offline = make_reference_judge(None)
    assert isinstance(offline, OfflineReferenceJudge) and offline.threshold == 0.6
    assert make_reference_judge({"backend": "offline", "threshold": 0.7}).threshold == 0.7
    llm = make_reference_judge({**llm_spec("openai", fake_api), "max_tokens": 64}, None)
    assert isinstance(llm, LLMReferenceJudge) and llm.max_tokens == 64
    with pytest.raises(ValueError, match="threshold"):
        OfflineReferenceJudge(threshold=1.5)


# --- the offline judge --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def offline():
    judge = OfflineReferenceJudge()
    judge.model  # noqa: B018 - load the embedding model once for the module
    return judge


def test_anchors():
    anchors = find_anchors(DESCRIPTION, EDIT, QUESTION)
    assert ("label", "Length=2.75") in anchors and ("number", "2.75") in anchors
    # numbers the question has, single digits and the edit's pixel positions are not anchors
    found = find_anchors(
        'A red note "x = 30 and r=4.5" with a 45 mark.', "at pixel (117, 105), 28 px", QUESTION
    )
    assert [a for _, a in found] == ["x = 30 and r=4.5", "4.5", "45"]
    # the edit instruction's labels only when the description quotes nothing
    assert find_anchors("a red note", 'write "Area=12"', "")[0] == ("label", "Area=12")
    assert find_anchors('a red "d=7"', 'below the existing "2000 students" label', "") == [
        ("label", "d=7")
    ]


def test_offline_anchor_hit(offline):
    out = "The red mark reads length = 2.75, so AB = 2.75 and the angle is 20 degrees."
    row = offline.judge_one(item("a", out, edit_instruction=EDIT, question=QUESTION))
    assert row["verdict"] == "yes" and row["method"] == "anchor"
    assert row["evidence"] == "Length=2.75" and row["confidence"] == 0.9
    number = offline.judge_one(item("b", "Using a side of 2.75 we get x = 20.", question=QUESTION))
    assert number["verdict"] == "yes" and "2.75" in number["evidence"]
    # 2.750 is the same value; 12.75 is not
    assert offline.judge_one(item("c", "so AB is 2.750 here"))["verdict"] == "yes"
    assert offline.judge_one(item("d", "Angle chasing gives 12.75."))["method"] == "similarity"


def test_offline_anchor_in_question_is_ignored(offline):
    question = "The side is marked Length=2.75. What is angle CDE?"
    row = offline.judge_one(item("a", "Since Length=2.75, the angle is 15.", question=question))
    assert row["method"] == "similarity"
    assert "Length=2.75" not in row["anchors"]


def test_offline_paraphrase_and_unrelated(offline):
    paraphrase = (
        "There is a large red arrow drawn along the left side of the triangle from B to A. "
        "So the angle is 15 degrees."
    )
    yes = offline.judge_one(item("p", paraphrase, question=QUESTION))
    assert yes["verdict"] == "yes" and yes["method"] == "similarity"
    assert yes["similarity"] >= 0.6 and yes["evidence"].startswith("There is a large red arrow")
    assert 0.5 <= yes["confidence"] <= 1.0
    unrelated = offline.judge_one(item("u", "The weather in Paris is sunny and warm today."))
    assert unrelated["verdict"] == "no" and unrelated["evidence"] == ""
    assert unrelated["similarity"] < 0.6 and 0.5 <= unrelated["confidence"] <= 1.0
    # deterministic, and the threshold is the knob
    assert offline.judge_one(item("p", paraphrase, question=QUESTION)) == yes
    strict = OfflineReferenceJudge(threshold=0.95)
    assert strict.judge_one(item("p", paraphrase, question=QUESTION))["verdict"] == "no"
    assert strict.name == "offline/all-MiniLM-L6-v2@0.95"


def _fixture_items(model: str) -> list[ReferenceItem]:
    questions = {
        (r := json.loads(line))["final_id"]: r for line in (FIXTURE / "questions.jsonl").open()
    }
    edits = {
        (r := json.loads(line))["final_id"]: r["edit"]
        for line in (FIXTURE / "edit_instructions.jsonl").open()
    }
    items = []
    for line in (FIXTURE / "model_outputs" / f"{model}.samples.jsonl").open():
        row = json.loads(line)
        fid = str(row["doc_id"])
        output = row["filtered_resps"]
        output = output[0] if isinstance(output, list) else output
        q = questions[fid]
        items.append(
            ReferenceItem(
                key=fid,
                output=output,
                distraction=edits[fid]["dead_end_description"],
                edit_instruction=edits[fid]["edit_instruction"],
                question="\n".join([q["question"], *(q.get("options") or [])]),
            )
        )
    return items


def test_load_released_references():
    qwen = load_released_references(FIXTURE / "model_outputs" / f"{MODELS[0]}.reference.jsonl")
    assert list(qwen) == [str(i) for i in range(1, 13)]
    assert qwen["3"]["verdict"] == "yes" and qwen["1"]["verdict"] == "no"
    assert sum(r["verdict"] == "yes" for r in qwen.values()) == 1
    assert "Length=2.75" in qwen["1"]["distraction"]


def test_load_released_references_rejects_duplicates(tmp_path):
    path = tmp_path / "dup.reference.jsonl"
    path.write_text('{"doc_id": 1, "verdict": "no"}\n{"final_id": "1", "verdict": "YES"}\n')
    with pytest.raises(ValueError, match="duplicate key '1'"):
        load_released_references(path)
    path.write_text('{"doc_id": 1, "verdict": "Yes"}\n{"final_id": "2", "verdict": "?"}\n')
    loaded = load_released_references(path)
    assert loaded["1"]["verdict"] == "yes" and loaded["2"]["verdict"] is None


@pytest.mark.parametrize("model", MODELS)
def test_offline_judge_vs_released_gpt5_nano(offline, model):
    released = load_released_references(FIXTURE / "model_outputs" / f"{model}.reference.jsonl")
    judged = judge_reference(_fixture_items(model), offline)
    assert len(judged) == 12 and all(r["verdict"] in ("yes", "no") for r in judged)
    result = agreement(
        [r["verdict"] for r in judged], [released[r["key"]]["verdict"] for r in judged]
    )
    print(f"\n{model}: offline vs released gpt-5-nano: {result}")
    assert result["n"] == 12
    assert 0.0 <= result["percent"] <= 1.0
    assert math.isnan(result["kappa"]) or -1.0 <= result["kappa"] <= 1.0


# --- metrics ------------------------------------------------------------------------------------


def test_reference_rates_by_hand():
    verdicts = ["yes", "yes", "no", "no", "yes", "no", None, "yes"]
    correct = [True, False, True, False, False, True, False, None]
    judged = [{"key": f"k{i}", "verdict": v} for i, v in enumerate(verdicts)]
    rates = reference_rates(judged, correct)
    # kept: rows 0-5 (row 6 has no verdict, row 7 no correctness)
    # r = 1 1 0 0 1 0, c = 1 0 1 0 0 1 -> N 6, correct 3, wrong 3
    assert rates["n"] == 6 and rates["n_excluded"] == 2
    assert rates["n_correct"] == 3 and rates["n_wrong"] == 3
    assert rates["DRR"] == pytest.approx(3 / 6)
    assert rates["HFR"] == pytest.approx(2 / 6)  # rows 1 and 4
    assert rates["Ref_correct"] == pytest.approx(1 / 3)  # row 0
    assert rates["Ref_wrong"] == pytest.approx(2 / 3)
    # HFR = Ref_wrong * (1 - accuracy), the paper's Table 5 identity
    assert rates["HFR"] == pytest.approx(rates["Ref_wrong"] * rates["n_wrong"] / rates["n"])
    by_key = reference_rates(judged, {f"k{i}": c for i, c in enumerate(correct)})
    assert by_key == rates


def test_reference_rates_edge_cases():
    all_right = reference_rates([{"key": "a", "verdict": "yes"}], {"a": 1})
    assert all_right["Ref_correct"] == 1.0 and math.isnan(all_right["Ref_wrong"])
    assert all_right["HFR"] == 0.0
    empty = reference_rates([{"key": "a", "verdict": None}], {"a": True})
    assert empty["n"] == 0 and empty["n_excluded"] == 1 and math.isnan(empty["DRR"])
    with pytest.raises(KeyError, match="'b'"):
        reference_rates([{"key": "b", "verdict": "no"}], {"a": True})
    with pytest.raises(ValueError, match="one value per row"):
        reference_rates([{"key": "b", "verdict": "no"}], [True, False])


def test_kappa_against_a_hand_computed_table():
    # a\b   yes  no
    # yes    20   5
    # no     10  15     p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    result = agreement(a + [None, "yes"], b + ["no", None])
    assert result["n"] == 50
    assert result["percent"] == pytest.approx(0.7)
    assert result["kappa"] == pytest.approx(0.4)
    assert result["note"] is None
    assert agreement(["yes", "no"], ["yes", "no"])["kappa"] == pytest.approx(1.0)
    assert agreement(["yes", "no"], ["no", "yes"])["kappa"] == pytest.approx(-1.0)


def test_kappa_degenerate_cases():
    same = agreement(["no", "no", "no"], ["no", "no", "no"])
    assert same["percent"] == 1.0 and math.isnan(same["kappa"]) and "degenerate" in same["note"]
    one_sided = agreement(["no", "no", "yes"], ["no", "no", "no"])
    assert one_sided["kappa"] == pytest.approx(0.0) and "single class" in one_sided["note"]
    none = agreement([None], ["yes"])
    assert none["n"] == 0 and math.isnan(none["percent"]) and math.isnan(none["kappa"])
    with pytest.raises(ValueError, match="aligned"):
        agreement(["yes"], [])


# --- released verdicts: a failed released judgment stays a failure ---------------------------

R1 = FIXTURE / "model_outputs" / "Fancy-MLLM__R1-Onevision-7B.reference.jsonl"


def _with_parse_error(src: Path, dst: Path, row: int) -> Path:
    """A copy of a released reference file whose ``row`` (0-based) failed to parse, as
    one of Qwen2.5-VL-7B-Instruct's 506 released verdicts did."""
    lines = src.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[row])
    rec["verdict"] = "parse_error"
    lines[row] = json.dumps(rec, ensure_ascii=False)
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dst


class _RecordingJudge:
    """A judge that records what it is asked and says "no" to everything."""

    name = "recording"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def judge_many(self, items):
        self.asked += [i.key for i in items]
        return [{"key": i.key, "verdict": "no", "judge": self.name, "error": None} for i in items]


def test_released_parse_error_is_kept_as_a_failed_judgment(tmp_path):
    from vlmrobust.data.released import load_questions
    from vlmrobust.judges.reference import judge_outputs
    from vlmrobust.score.released import import_outputs

    qwen = FIXTURE / "model_outputs" / f"{MODELS[0]}"
    refs = _with_parse_error(Path(f"{qwen}.reference.jsonl"), tmp_path / "q.reference.jsonl", 1)
    loaded = load_released_references(refs)
    assert (loaded["2"]["verdict"], loaded["2"]["verdict_error"]) == (None, "released parse_error")
    assert loaded["1"]["verdict_error"] is None
    samples = list(load_questions("distract-bench", FIXTURE / "questions.jsonl").values())
    spec = {"model": "qwen", "dataset": "distract-bench", "condition": "distracted",
            "prompt": "default", "format": "lmms-eval", "id_field": None,
            "released_labels": False, "references": str(refs)}  # fmt: skip
    rows, _ = import_outputs(spec, samples, Path(f"{qwen}.samples.jsonl"))
    judge = _RecordingJudge()
    judged = judge_outputs(rows, judge, {s.sample_id: s for s in samples}, use_released=True)
    assert judge.asked == []  # the failed row is not judged again in silence
    failed = judged[1]
    assert (failed["key"], failed["verdict"], failed["error"], failed["judge"]) == (
        "distract-bench-2#0",
        None,
        "released parse_error",
        "released",
    )
    assert [j["verdict"] for j in judged].count(None) == 1
    rates = reference_rates(judged, [1] * len(judged))
    assert (rates["n"], rates["n_excluded"]) == (11, 1)  # excluded from DRR / HFR, counted


def test_agreement_reads_a_released_parse_error_as_no_verdict(tmp_path):
    from vlmrobust.judges.reference import agreement_of_files

    qwen = FIXTURE / "model_outputs" / f"{MODELS[0]}.reference.jsonl"
    broken = _with_parse_error(qwen, tmp_path / "q.reference.jsonl", 1)
    result = agreement_of_files(qwen, broken)
    assert (result["samples_in_both"], result["n"], result["percent"]) == (12, 11, 1.0)


def test_released_verdict_rows_for_a_verdicts_only_import(tmp_path):
    from vlmrobust.data.released import load_questions
    from vlmrobust.judges.reference import released_verdict_rows

    samples = list(load_questions("distract-bench", FIXTURE / "questions.jsonl").values())
    refs = _with_parse_error(R1, tmp_path / "r1.reference.jsonl", 0)
    rows, missing = released_verdict_rows(samples, refs)
    assert missing == []
    assert [r["key"] for r in rows] == [f"distract-bench-{i}#0" for i in range(1, 13)]
    assert [r["verdict"] for r in rows] == [None, "no", "no", "yes", *["no"] * 8]
    assert (rows[0]["error"], rows[0]["judge"]) == ("released parse_error", "released")
    assert rows[3]["evidence"].startswith("\"There's also a grey rectangle")
    # a sample without a verdict is reported; a verdict for an unknown id is an error
    short = tmp_path / "short.reference.jsonl"
    short.write_text("".join(R1.read_text(encoding="utf-8").splitlines(True)[:10]))
    rows, missing = released_verdict_rows(samples, short)
    assert (len(rows), missing) == (10, ["distract-bench-11", "distract-bench-12"])
    with pytest.raises(ValueError, match="not among the 3 samples"):
        released_verdict_rows(samples[:3], R1)


def test_table5_of_a_model_with_verdicts_only():
    """DRR needs no correctness: a model with released verdicts and no outputs gets it;
    HFR and the Ref_* ratios say why they are missing."""
    from vlmrobust.metrics.distraction import compute_distraction_metrics

    from .test_distraction_outputs import SPEC, make_judged, make_scored

    spec = {**SPEC, "model_order": [*SPEC["model_order"], "vo"], "verdicts_only": ["vo"]}
    spec["models"] = {**SPEC["models"], "vo": {"name": "V-Only", "family": "x", "role": "base"}}
    judged = make_judged()
    judged["vo"] = [
        {"key": f"vo|s{i}", "verdict": v, "error": None if v else "released parse_error"}
        for i, v in enumerate(["yes", "no", "no", None, "yes"], 1)
    ]
    df, warnings = compute_distraction_metrics(make_scored(), judged, spec)
    mine = df[(df["model"] == "vo") & (df["condition"] == "distracted")].set_index("metric")
    assert mine.loc["drr", "value"] == pytest.approx(2 / 4) and mine.loc["drr", "n"] == 4
    assert mine.loc["drr", "note"] == "1 judged row(s) without a verdict excluded"
    for metric in ("hfr", "ref_correct", "ref_wrong"):
        assert math.isnan(mine.loc[metric, "value"])
        assert mine.loc[metric, "note"] == "no outputs: correctness unknown"
    assert any("vo: released verdicts only" in w for w in warnings)
    # the other models' numbers do not change
    before, _ = compute_distraction_metrics(make_scored(), make_judged(), SPEC)
    keep = ["metric", "model", "base_model", "condition", "group", "value"]
    old = before[before["model"] != "vo"][keep].reset_index(drop=True)
    new = df[df["model"] != "vo"][keep].reset_index(drop=True)
    pd.testing.assert_frame_equal(old, new)

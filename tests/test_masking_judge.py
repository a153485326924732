"""Contrastive Region Masking hallucination judges: the offline judge (with a fake
embedder), the LLM judge (with a fake LLM backend), the prompt and the spec factory."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from vlmrobust.clients.embedding import Embedder
from vlmrobust.clients.llm import make_llm
from vlmrobust.clients.llm.backends import LLMResponse, parse_json_text
from vlmrobust.judges.hallucination import (
    HALLUCINATION_SCHEMA,
    NO_CONTENT_REASON,
    HallucinationItem,
    LLMHallucinationJudge,
    OfflineHallucinationJudge,
    build_hallucination_prompt,
    make_hallucination_judge,
)

PLUG = "a black plug resembling a fridge"
QUESTION = "What is plugged into the wall socket?"
ORIGINAL = "Step 1: A black plug is in the socket.\nStep 2: So it powers the fridge."


class FakeModel:
    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts, **kwargs):
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


# premise = e1; "plug step" . premise = 0.8; "cover step" . premise = 0.6; "other" = 0
VECTORS = {
    PLUG: [1.0, 0.0, 0.0],
    "The black plug sits in the socket.": [0.8, 0.6, 0.0],
    "A black box covers the socket area.": [0.6, 0.0, 0.8],
    "The wall is painted white.": [0.0, 1.0, 0.0],
}


@pytest.fixture
def judge() -> OfflineHallucinationJudge:
    return OfflineHallucinationJudge(Embedder(FakeModel(VECTORS), name="fake"), threshold=0.7)


def item(key: str, steps: list[str], content: list[str] | None = None, **kw) -> HallucinationItem:
    fields = {
        "key": key,
        "question": QUESTION,
        "masked_content": [PLUG] if content is None else content,
        "original_chain": ORIGINAL,
        "masked_chain": " ".join(steps),
        "masked_steps": steps,
    }
    fields.update(kw)
    return HallucinationItem(**fields)


# --- the offline judge --------------------------------------------------------------------------


def test_offline_hit_and_miss(judge):
    hit, miss = judge.judge_many(
        [
            item("hit", ["The wall is painted white.", "The black plug sits in the socket."]),
            item("miss", ["The wall is painted white.", "A black box covers the socket area."]),
        ]
    )
    assert judge.name == "offline/fake@0.7"
    assert hit == {
        "key": "hit",
        "judge": "offline/fake@0.7",
        "hallucinated": True,
        "evidence": "The black plug sits in the socket.",
        "reason": f"a masked-chain step is similar to the masked content {PLUG!r} (0.800 >= 0.7)",
        "similarity": 0.8,
        "method": "similarity",
        "error": None,
    }
    assert miss["hallucinated"] is False and miss["evidence"] == ""
    assert miss["similarity"] == 0.6 and miss["method"] == "similarity"
    assert "0.600 < 0.7" in miss["reason"] and miss["error"] is None
    # the threshold is inclusive
    strict = OfflineHallucinationJudge(judge.embedder, threshold=0.8)
    assert strict.judge_one(item("hit", ["The black plug sits in the socket."]))["hallucinated"]


def test_offline_no_content_and_empty(judge):
    random_mask = item("r", ["The black plug sits in the socket."], content=[])
    row = judge.judge_one(random_mask)
    assert row["hallucinated"] is False and row["method"] == "no-content"
    assert row["reason"] == NO_CONTENT_REASON
    assert row["reason"] == "the mask covers no annotated content; the offline judge cannot tell"
    empty = judge.judge_one(item("e", [], masked_chain="  "))
    assert empty["hallucinated"] is False and empty["method"] == "empty"
    assert empty["error"] is None and empty["evidence"] == ""


def test_offline_splits_the_chain_when_no_steps_are_given(judge):
    chain = "The wall is painted white. The black plug sits in the socket."
    row = judge.judge_one(item("s", [], masked_chain=chain))
    assert row["hallucinated"] is True and row["evidence"] == "The black plug sits in the socket."


def test_offline_threshold_is_checked():
    with pytest.raises(ValueError, match="threshold"):
        OfflineHallucinationJudge(Embedder(FakeModel({})), threshold=1.5)


# --- the LLM judge ------------------------------------------------------------------------------


class FakeLLM:
    """An LLM backend stand-in: ``reply(prompt)`` gives the JSON text of each answer;
    like the real backends it parses the JSON, and ``None`` is a failed call."""

    name = "fake"
    model = "fake-judge"

    def __init__(self, reply) -> None:
        self.reply = reply
        self.calls: list[dict] = []

    def complete_many(self, calls):
        out = []
        for call in calls:
            self.calls.append(call)
            text = self.reply(call["messages"])
            if text is None:
                out.append(
                    LLMResponse(text="", error="HTTP 500 after 3 attempts", model=self.model)
                )
                continue
            out.append(
                LLMResponse(
                    text=text,
                    parsed_json=parse_json_text(text),
                    usage={"prompt_tokens": 100, "completion_tokens": 20},
                    cost_usd=0.0001,
                    model=self.model,
                )
            )
        return out


YES = {"hallucinated": True, "evidence": "The black plug sits in the socket.", "reason": "x"}
NO = {"hallucinated": False, "evidence": "", "reason": "it says the region is hidden"}


def scripted(prompt: str) -> str | None:
    masked = prompt.split("Reasoning on the MASKED image:")[1]
    if "FAIL" in masked:
        return None
    if "BROKEN" in masked:
        return json.dumps({**NO, "hallucinated": "maybe"})
    return json.dumps(YES if "black plug" in masked else NO)


def test_schema_accepts_and_rejects():
    validator = jsonschema.Draft202012Validator(HALLUCINATION_SCHEMA)
    validator.check_schema(HALLUCINATION_SCHEMA)
    assert validator.is_valid(YES) and validator.is_valid(NO)
    assert not validator.is_valid({**YES, "hallucinated": "yes"})
    assert not validator.is_valid({**YES, "extra": 1})
    assert not validator.is_valid({k: v for k, v in YES.items() if k != "evidence"})


def test_prompt_mentions_the_masked_content_and_the_rules():
    masked = "The region is hidden by a black box, so I cannot see it."
    prompt = build_hallucination_prompt(item("a", [masked]))
    for text in (PLUG, QUESTION, ORIGINAL, masked):
        assert text in prompt
    assert "NOT hallucination" in prompt and "refuses" in prompt
    assert "as if it were visible" in prompt and "invents" in prompt
    assert "strict JSON only" in prompt
    for key in HALLUCINATION_SCHEMA["required"]:
        assert f'"{key}"' in prompt
    random_prompt = build_hallucination_prompt(item("r", [masked], content=[]))
    assert "an unannotated region" in random_prompt and PLUG not in random_prompt


def test_llm_judge_rows():
    llm = FakeLLM(scripted)
    judge = LLMHallucinationJudge(llm, max_tokens=256, seed=7)
    rows = judge.judge_many(
        [
            item("yes", ["The black plug sits in the socket."]),
            item("no", ["The socket is hidden by a box; I cannot tell what is there."]),
            item("broken", ["BROKEN answer here."]),
            item("fail", ["FAIL on this one."]),
            item("empty", [], masked_chain=""),
        ]
    )
    assert [r["key"] for r in rows] == ["yes", "no", "broken", "fail", "empty"]
    assert len(llm.calls) == 4  # the empty chain makes no call
    call = llm.calls[0]
    assert call["json_schema"] == HALLUCINATION_SCHEMA
    assert (call["max_tokens"], call["temperature"], call["seed"]) == (256, 0.0, 7)
    assert PLUG in call["messages"] and QUESTION in call["messages"]

    yes, no, broken, fail, empty = rows
    assert judge.name == "fake/fake-judge" and yes["judge"] == "fake/fake-judge"
    assert yes["hallucinated"] is True and yes["evidence"] == YES["evidence"]
    assert yes["error"] is None and yes["method"] == "llm" and yes["similarity"] is None
    assert yes["cached"] is False and yes["judge_model"] == "fake-judge"
    assert yes["usage"] == {"prompt_tokens": 100, "completion_tokens": 20}
    assert yes["cost_usd"] == 0.0001
    assert no["hallucinated"] is False and no["reason"] == NO["reason"]
    # a schema violation and a failed call are error rows without a verdict
    assert broken["hallucinated"] is None
    assert broken["error"].startswith("judge answer rejected: schema violation at hallucinated")
    assert fail["hallucinated"] is None and fail["error"] == "HTTP 500 after 3 attempts"
    assert empty["hallucinated"] is False and empty["method"] == "empty"
    assert empty["error"] is None


# --- the factory --------------------------------------------------------------------------------


def test_make_hallucination_judge(monkeypatch):
    embedder = Embedder(FakeModel(VECTORS), name="fake")
    default = make_hallucination_judge(None, embedder=embedder)
    assert isinstance(default, OfflineHallucinationJudge)
    assert default.threshold == 0.6 and default.embedder is embedder
    offline = make_hallucination_judge({"backend": "offline", "threshold": 0.75})
    assert isinstance(offline, OfflineHallucinationJudge) and offline.threshold == 0.75
    assert offline.name == "offline/all-MiniLM-L6-v2@0.75"  # the model is not loaded yet
    assert make_hallucination_judge({"threshold": 0.5}, embedder=embedder).threshold == 0.5

    monkeypatch.setenv("VLMROBUST_TEST_HALLUCINATION_KEY", "test-hallucination-key")
    spec = {
        "backend": "openai",
        "model": "judge-model",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "VLMROBUST_TEST_HALLUCINATION_KEY",
        "max_tokens": 128,
        "temperature": 0.1,
    }
    llm = make_hallucination_judge(spec)
    assert isinstance(llm, LLMHallucinationJudge)
    assert (llm.max_tokens, llm.temperature) == (128, 0.1)
    assert llm.name == f"{make_llm(spec).name}/judge-model"

    with pytest.raises(ValueError, match="unknown"):
        make_hallucination_judge({"backend": "nonesuch", "model": "m"})

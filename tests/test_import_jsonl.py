"""Released outputs in plain JSONL (format ``jsonl`` of config `imports`): question ids
naming the condition's variants, several sampled responses per question.

A tiny dataset of two samples (``s1``, ``s2``; their dataset ids ``101``, ``102``), a
clean condition with one variant each and a distractor condition ``distract`` with
variants ``s1__conflicting-n1``, ``s1__conflicting-n2``, ``s2__conflicting-n1``; every
expectation below is worked out by hand from the rows written here.
"""

from __future__ import annotations

import json
import logging

import pytest

from vlmrobust.core.records import Sample, Variant, read_variants, write_samples, write_variants
from vlmrobust.score.released import NO_RESPONSE, import_jsonl, import_outputs

DISTRACT = ["s1__conflicting-n1", "s1__conflicting-n2", "s2__conflicting-n1"]


def _samples() -> list[Sample]:
    return [
        Sample(sid, "toy", [], "Which class?", "Dog", "label", meta={"source_id": src})
        for sid, src in (("s1", "101"), ("s2", "102"))
    ]


def _variant(variant_id: str, sample_id: str, condition: str) -> Variant:
    return Variant(variant_id, sample_id, "toy", condition, "objects", [], [], "Which class?")


CLEAN = [_variant("s1", "s1", "clean"), _variant("s2", "s2", "clean")]
DISTRACTED = [_variant(v, v.split("__")[0], "distract") for v in DISTRACT]


def _spec(condition: str = "distract", **kw) -> dict:
    return {
        "model": "m",
        "dataset": "toy",
        "condition": condition,
        "prompt": "default",
        "format": "jsonl",
        "id_field": None,
        "released_labels": False,
        "references": None,
        "response_field": "response",
        "thinking_field": None,
        "draw_field": None,
        "condition_field": None,
        "tokens_field": None,
        "tokenizer": None,
        **kw,
    }


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _three_draws(qid: str, thoughts: list[str], answers: list[str]) -> list[dict]:
    return [
        {"question_id": qid, "response": f"<think>{t}</think>Answer: {a}"}
        for t, a in zip(thoughts, answers, strict=True)
    ]


# --------------------------------------------------------------------------- rows


def test_draws_in_file_order_thinking_split_and_missing(tmp_path):
    n1 = _three_draws("s1__conflicting-n1", ["a", "b", "c"], ["Dog", "Cat", "Dog"])
    n2 = _three_draws("s1__conflicting-n2", ["d", "e", "f"], ["Fish", "Dog", "Dog"])
    # interleaved: each question's draws are numbered in its own order of appearance
    released = _write(tmp_path / "r.jsonl", [n2[0], n1[0], n1[1], n2[1], n2[2], n1[2]])
    rows, missing = import_outputs(_spec(), _samples(), released, DISTRACTED)
    assert missing == 1  # s2__conflicting-n1 has no released row
    # manifest order, then draw
    assert [r.key for r in rows] == [
        "s1__conflicting-n1#0",
        "s1__conflicting-n1#1",
        "s1__conflicting-n1#2",
        "s1__conflicting-n2#0",
        "s1__conflicting-n2#1",
        "s1__conflicting-n2#2",
    ]
    assert [(r.variant_id, r.sample_id, r.draw) for r in rows[2:4]] == [
        ("s1__conflicting-n1", "s1", 2),
        ("s1__conflicting-n2", "s1", 0),
    ]
    assert [(r.thinking, r.answer_text) for r in rows] == [
        ("a", "Answer: Dog"),
        ("b", "Answer: Cat"),
        ("c", "Answer: Dog"),
        ("d", "Answer: Fish"),
        ("e", "Answer: Dog"),
        ("f", "Answer: Dog"),
    ]
    first = rows[0]
    assert first.raw_text == "<think>a</think>Answer: Dog"
    assert (first.dataset, first.condition, first.prompt, first.model) == (
        "toy",
        "distract",
        "default",
        "m",
    )
    assert (first.source, first.backend, first.prompt_version) == ("jsonl", "jsonl", "jsonl")
    assert (first.finish_reason, first.error, first.thinking_tokens) == ("unknown", None, None)
    assert first.image_sha256 == []


def test_rows_score_per_draw(tmp_path):
    from vlmrobust.score import score_outputs

    rows = _three_draws("s1__conflicting-n1", ["x", "y", "z"], ["Dog", "Cat", "Dog"])
    released = _write(tmp_path / "r.jsonl", rows)
    out, missing = import_outputs(_spec(), _samples(), released, DISTRACTED)
    assert missing == 2
    scored = score_outputs({s.sample_id: s for s in _samples()}, out, "generic")
    assert [(s["key"], s["correct"]) for s in scored] == [
        ("s1__conflicting-n1#0", 1),
        ("s1__conflicting-n1#1", 0),
        ("s1__conflicting-n1#2", 1),
    ]


def test_draw_field_and_trace_field_and_tokens_field(tmp_path):
    rows = [
        {"q": {"id": "s1__conflicting-n2"}, "draw": "2", "out": {"text": "Dog"},
         "trace": "thinking two", "usage": {"reasoning_tokens": 7}},
        {"q": {"id": "s1__conflicting-n2"}, "draw": 0, "out": {"text": "<think>kept</think>Cat"},
         "trace": "thinking zero", "usage": {"reasoning_tokens": 3.0}},
        {"q": {"id": "s1__conflicting-n2"}, "draw": 1.0, "out": {"text": "Fish"},
         "trace": "", "usage": {}},
    ]  # fmt: skip
    released = _write(tmp_path / "r.jsonl", rows)
    spec = _spec(
        id_field="q.id",
        response_field="out.text",
        thinking_field="trace",
        draw_field="draw",
        tokens_field="usage.reasoning_tokens",
    )
    out, missing = import_outputs(spec, _samples(), released, DISTRACTED)
    assert missing == 2
    got = [(r.key, r.thinking, r.answer_text, r.raw_text, r.thinking_tokens) for r in out]
    assert got == [
        # the trace field is the thinking: the response is the answer as it stands
        ("s1__conflicting-n2#0", "thinking zero", "<think>kept</think>Cat",
         "thinking zero\n\n<think>kept</think>Cat", 3),
        ("s1__conflicting-n2#1", None, "Fish", "Fish", None),
        ("s1__conflicting-n2#2", "thinking two", "Dog", "thinking two\n\nDog", 7),
    ]  # fmt: skip


def test_bad_draw_and_bad_token_count_name_the_line(tmp_path):
    released = _write(
        tmp_path / "r.jsonl",
        [{"question_id": "s1", "response": "x", "draw": -1}],
    )
    with pytest.raises(ValueError, match=r"r\.jsonl:1: draw \(draw\) -1 is not a whole number"):
        import_outputs(_spec("clean", draw_field="draw"), _samples(), released, CLEAN)
    released = _write(
        tmp_path / "r.jsonl",
        [{"question_id": "s1", "response": "x", "n": "many"}],
    )
    with pytest.raises(ValueError, match=r"r\.jsonl:1: reasoning length \(n\) 'many'"):
        import_outputs(_spec("clean", tokens_field="n"), _samples(), released, CLEAN)


def test_row_without_response_is_kept_as_a_failure(tmp_path):
    rows = [
        {"question_id": "s1__conflicting-n1", "response": "<think>t</think>Dog"},
        {"question_id": "s1__conflicting-n1", "response": "  "},
        {"question_id": "s1__conflicting-n1"},
    ]
    released = _write(tmp_path / "r.jsonl", rows)
    out, counts = import_jsonl(released, DISTRACTED, _samples(), "m", "distract")
    assert [(r.key, r.error, r.finish_reason) for r in out] == [
        ("s1__conflicting-n1#0", None, "unknown"),
        ("s1__conflicting-n1#1", NO_RESPONSE, "error"),
        ("s1__conflicting-n1#2", NO_RESPONSE, "error"),
    ]
    assert NO_RESPONSE == "the released row holds no response"
    assert (out[1].raw_text, out[1].answer_text, out[1].thinking) == ("", "", None)
    # the answered row has no reasoning length (no tokens_field, no tokenizer)
    assert counts == {"read": 3, "other_condition": 0, "without_response": 2, "without_tokens": 1}


# --------------------------------------------------------------------------- conditions


def test_condition_field_reads_only_the_entry_condition(tmp_path, caplog):
    rows = [
        {"question_id": "s1", "cond": "clean", "response": "Dog"},
        {"question_id": "s1__conflicting-n1", "cond": "distract", "response": "Dog"},
        {"question_id": "s2", "cond": "clean", "response": "Cat"},
        {"question_id": "s1__conflicting-n1", "cond": "distract", "response": "Cat"},
        {"question_id": "s1__conflicting-n1", "response": "no condition"},
    ]
    released = _write(tmp_path / "r.jsonl", rows)
    out, counts = import_jsonl(
        released, DISTRACTED, _samples(), "m", "distract", condition_field="cond"
    )
    assert [(r.key, r.answer_text) for r in out] == [
        ("s1__conflicting-n1#0", "Dog"),
        ("s1__conflicting-n1#1", "Cat"),
    ]
    assert (counts["read"], counts["other_condition"]) == (2, 3)
    with caplog.at_level(logging.INFO, logger="vlmrobust"):
        out, missing = import_outputs(
            _spec(condition_field="cond"), _samples(), released, DISTRACTED
        )
    assert missing == 2
    assert "3 rows of other conditions skipped" in caplog.text
    # the clean entry of the same file: its ids are sample ids
    out, missing = import_outputs(
        _spec("clean", condition_field="cond"), _samples(), released, CLEAN
    )
    assert ([r.key for r in out], missing) == (["s1#0", "s2#0"], 0)


def test_condition_field_matching_nothing_is_an_error(tmp_path):
    rows = [{"question_id": "s1", "cond": "Clean", "response": "Dog"}] * 2
    released = _write(tmp_path / "r.jsonl", rows)
    with pytest.raises(ValueError) as err:
        import_outputs(_spec("clean", condition_field="cond"), _samples(), released, CLEAN)
    assert str(err.value) == (
        f"{released}: no row's 'cond' equals condition 'clean' (found 'Clean' (2)); "
        "imports[].condition must be the file's name of the condition"
    )


# --------------------------------------------------------------------------- ids


def test_clean_condition_accepts_sample_ids_and_dataset_ids(tmp_path):
    rows = [
        {"question_id": "s1", "response": "Dog"},
        {"question_id": 102, "response": "Cat"},  # s2's dataset id, as a number
        {"question_id": "101", "response": "Fish"},  # s1 again: its draw 1
    ]
    released = _write(tmp_path / "r.jsonl", rows)
    out, missing = import_outputs(_spec("clean"), _samples(), released, CLEAN)
    assert [(r.key, r.sample_id, r.answer_text) for r in out] == [
        ("s1#0", "s1", "Dog"),
        ("s1#1", "s1", "Fish"),
        ("s2#0", "s2", "Cat"),
    ]
    assert missing == 0


def test_sample_id_of_a_sample_with_several_variants_is_an_error(tmp_path):
    released = _write(tmp_path / "r.jsonl", [{"question_id": "101", "response": "Dog"}])
    with pytest.raises(ValueError) as err:
        import_outputs(_spec(), _samples(), released, DISTRACTED)
    assert str(err.value) == (
        f"{released}:1: question id '101' names sample 's1', which has 2 variants under "
        "condition 'distract' (e.g. s1__conflicting-n1, s1__conflicting-n2); the row must "
        "name one of them by its variant id"
    )


def test_unknown_id_names_the_line_and_valid_ids(tmp_path):
    rows = [{"question_id": "s1__conflicting-n1", "response": "Dog"},
            {"question_id": "s9__aligned-n1", "response": "Dog"}]  # fmt: skip
    released = _write(tmp_path / "r.jsonl", rows)
    with pytest.raises(ValueError) as err:
        import_outputs(_spec(), _samples(), released, DISTRACTED)
    assert str(err.value) == (
        f"{released}:2: question id 's9__aligned-n1' names no variant of condition "
        "'distract' (3 variants; ids look like s1__conflicting-n1, s1__conflicting-n2, "
        "s2__conflicting-n1) nor a sample with exactly one variant there; are the "
        "manifest and the released file of the same dataset and condition?"
    )
    released = _write(tmp_path / "r.jsonl", [{"id": "s1", "response": "Dog"}])
    with pytest.raises(ValueError, match=r"r\.jsonl:1: no 'question_id' field"):
        import_outputs(_spec("clean"), _samples(), released, CLEAN)


def test_duplicate_draw_is_an_error(tmp_path):
    rows = [
        {"question_id": "s1__conflicting-n1", "draw": 1, "response": "Dog"},
        {"question_id": "s1__conflicting-n1", "draw": 0, "response": "Dog"},
        {"question_id": "s1__conflicting-n1", "draw": 1, "response": "Cat"},
    ]
    released = _write(tmp_path / "r.jsonl", rows)
    with pytest.raises(ValueError) as err:
        import_outputs(_spec(draw_field="draw"), _samples(), released, DISTRACTED)
    assert str(err.value) == (
        f"{released}:3: variant 's1__conflicting-n1' draw 1 appears twice (first at line "
        "1); each (question, draw) may be released once"
    )
    # without draw_field a repeated id is simply the question's next draw
    rows = [{"question_id": "s1", "response": "Dog"}] * 2
    out, _ = import_outputs(_spec("clean"), _samples(), _write(tmp_path / "o.jsonl", rows), CLEAN)
    assert [r.key for r in out] == ["s1#0", "s1#1"]


# --------------------------------------------------------------------------- tokens


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    """A word-level tokenizer (whitespace and punctuation split; unknown words -> [UNK])
    saved as a PreTrainedTokenizerFast folder."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[BOS]": 1, "the": 2, "dog": 3, "is": 4, "a": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path_factory.mktemp("tok") / "tiny"
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]")
    fast.save_pretrained(folder)
    return str(folder)


def test_tokenizer_counts_the_thinking_part(tmp_path, tiny_tokenizer):
    rows = [
        # "the dog is a cat , really ." -> 8 tokens (cat, really and the two marks: [UNK])
        {"question_id": "s1", "response": "<think>the dog is a cat, really.</think>Dog"},
        {"question_id": "s1", "response": "Dog"},  # no thinking part: no length
        {"question_id": "s1", "response": "<think>the dog</think>Dog", "len": 40},
        {"question_id": "s2", "response": "<think>\n</think>Dog"},  # empty thinking: 0
    ]
    released = _write(tmp_path / "r.jsonl", rows)
    out, missing = import_outputs(
        _spec("clean", tokenizer=tiny_tokenizer), _samples(), released, CLEAN
    )
    assert [(r.key, r.thinking_tokens) for r in out] == [
        ("s1#0", 8),
        ("s1#1", None),
        ("s1#2", 2),
        ("s2#0", 0),
    ]
    # a released count wins; rows without one fall back to the tokenizer
    out, counts = import_jsonl(
        released, CLEAN, _samples(), "m", "clean", tokens_field="len", tokenizer=tiny_tokenizer
    )
    assert [r.thinking_tokens for r in out] == [8, None, 40, 0]
    assert counts["without_tokens"] == 1


def test_missing_tokenizer_is_an_error(tmp_path):
    released = _write(tmp_path / "r.jsonl", [{"question_id": "s1", "response": "Dog"}])
    missing = tmp_path / "no-such-tokenizer"
    with pytest.raises(ValueError, match=r"imports: tokenizer '.*no-such-tokenizer' could not"):
        import_outputs(_spec("clean", tokenizer=str(missing)), _samples(), released, CLEAN)


def test_thinking_markers_of_the_model_family(tmp_path):
    rows = [{"question_id": "s1", "response": "[R]the dog[/R] Dog"}]
    released = _write(tmp_path / "r.jsonl", rows)
    spec = _spec("clean", thinking_markers=[["[R]", "[/R]"]])
    out, _ = import_outputs(spec, _samples(), released, CLEAN)
    assert (out[0].thinking, out[0].answer_text) == ("the dog", "Dog")
    out, _ = import_outputs(_spec("clean"), _samples(), released, CLEAN)
    assert (out[0].thinking, out[0].answer_text) == (None, "[R]the dog[/R] Dog")


# --------------------------------------------------------------------------- entry points


def test_jsonl_needs_the_manifest(tmp_path):
    released = _write(tmp_path / "r.jsonl", [{"question_id": "s1", "response": "Dog"}])
    with pytest.raises(ValueError, match=r"format jsonl \(m/toy/clean\) needs the condition"):
        import_outputs(_spec("clean"), _samples(), released)
    with pytest.raises(ValueError, match="released_labels is supported for lmms-eval"):
        import_outputs(_spec("clean", released_labels=True), _samples(), released, CLEAN)


def test_cli_import_outputs_with_manifest(tmp_path, capsys):
    from vlmrobust.cli import main

    samples = tmp_path / "samples.jsonl"
    write_samples(samples, _samples())
    manifest = tmp_path / "manifest.jsonl"
    write_variants(manifest, DISTRACTED)
    assert [v.variant_id for v in read_variants(manifest)] == DISTRACT
    rows = _three_draws("s2__conflicting-n1", ["p", "q", "r"], ["Dog", "Dog", "Cat"])
    released = _write(tmp_path / "r.jsonl", rows)
    out = tmp_path / "out.jsonl"
    base = ["import-outputs", "--spec", json.dumps(_spec()), "--samples", str(samples),
            "--released", str(released), "--out", str(out)]  # fmt: skip
    assert main(base) == 2
    assert "format jsonl needs --manifest" in capsys.readouterr().err
    assert not out.exists()
    assert main([*base, "--manifest", str(manifest)]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["key"], r["sample_id"], r["thinking"], r["answer_text"]) for r in written] == [
        ("s2__conflicting-n1#0", "s2", "p", "Answer: Dog"),
        ("s2__conflicting-n1#1", "s2", "q", "Answer: Dog"),
        ("s2__conflicting-n1#2", "s2", "r", "Answer: Cat"),
    ]

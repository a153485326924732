"""The MathVerse concept-family labeler: keyword rules, the labels CSV (human rows kept),
the LLM labeler against the local fake API (strict JSON, cached, failures counted)."""

from __future__ import annotations

import json

import pytest

from tests.api_server import fake_llm_spec
from vlmrobust.construct.concepts import (
    CSV_FIELDS,
    label_prompt,
    problems,
    rule_family,
    write_labels,
)
from vlmrobust.core.concept_labels import read_labels
from vlmrobust.core.records import Sample

# MathVerse testmini question texts (GeoQA rows; problem 685 is Solid Geometry)
Q_TRI = (
    "As shown in the figure, in triangle ABC, it is known that angle A = 80.0, angle B = "
    "60.0, point D is on AB and point E is on AC, DE parallel BC, then the size of angle CED "
    "is ()\nChoices:\nA:40°\nB:60°\nC:120°\nD:140°"
)
Q_CIRCLE = (
    "As shown in the figure, AB is tangent to circle O at point B, and the extended line of "
    "AO intersects circle O at point C. Connect BC, if angle A = 36.0, then angle C is equal "
    "to ()\nChoices:\nA:36°\nB:54°\nC:60°\nD:27°"
)
Q_LINES = (
    "As shown in the figure, AB parallel CD, straight line EF intersects AB at point E, "
    "intersects CD at point F, EG bisects angle BEF, and it intersects CD at point G, angle "
    "1 = 50.0, then angle 2 is equal to ()\nChoices:\nA:50°\nB:60°\nC:65°\nD:90°"
)
Q_RT = (
    "As shown in the figure, the straight line AB parallel CD, Rttriangle DEF is placed as "
    "shown, angle EDF = 90.0, if angle 1 + angle F = 70.0, then the degree of angle 2 is ()"
)
Q_CAN = (
    "A soft drink can has a height of 13 cm and a radius of 3 cm. Find L, the length of the "
    "longest straw that can fit into the can (so that the straw is not bent and fits entirely "
    "inside the can)."
)


@pytest.mark.parametrize(
    "question, subject, family, matched",
    [
        (Q_TRI, "Plane Geometry", "triangle", ["triangle"]),
        (Q_CIRCLE, "Plane Geometry", "circle", ["circle"]),
        (Q_LINES, "Plane Geometry", "other", []),
        (Q_RT, "Plane Geometry", "triangle", ["triangle"]),
        # a solid's radius does not make it a circle problem
        (Q_CAN, "Solid Geometry", "3d", ["circle", "3d"]),
        ("Find L.", "Solid Geometry", "3d", ["3d"]),
        ("In parallelogram ABCD, AB = 5. Find BC.", "", "quadrilateral", ["quadrilateral"]),
        ("Find the area of the square.", "", "quadrilateral", ["quadrilateral"]),
        ("Triangle ABC is inscribed in circle O.", "", "unsure", ["triangle", "circle"]),
        # "square root" and "square units" are not squares
        (
            "In the right triangle the hypotenuse is the square root of 8; give the area in "
            "square units.",
            "",
            "triangle",
            ["triangle"],
        ),
        ("Find the volume of the rectangular box.", "", "3d", ["3d"]),
    ],
)
def test_rule_family_by_hand(question, subject, family, matched):
    assert rule_family(question, subject, "") == (family, matched)


def sample(sid: str, index: str, question: str, version: str, subject="Plane Geometry"):
    return Sample(
        sid,
        "mathverse",
        [],
        question,
        "A",
        "letter",
        meta={
            "problem_index": index,
            "problem_version": version,
            "subject": subject,
            "subfield": "Angle",
        },
    )


SAMPLES = [
    sample("mathverse-1", "1", Q_TRI, "Text Dominant"),
    sample("mathverse-2", "1", "Find angle CED.", "Vision Dominant"),
    sample("mathverse-3", "4", Q_CIRCLE, "Text Dominant"),
    sample("mathverse-4", "10", Q_LINES, "Text Lite"),
    sample("mathverse-5", "685", "Find L.", "Vision Dominant", subject="Solid Geometry"),
    sample("mathverse-6", "685", Q_CAN, "Text Dominant", subject="Solid Geometry"),
]


def test_problems_keep_the_longest_question():
    items = problems(SAMPLES)
    assert sorted(items) == ["1", "10", "4", "685"]
    assert items["1"]["question"] == Q_TRI and items["685"]["question"] == Q_CAN
    assert items["685"]["subject"] == "Solid Geometry"
    bad = Sample("mathverse-9", "mathverse", [], "Q", "A", "letter")
    with pytest.raises(ValueError, match="sample 'mathverse-9' has no meta.problem_index"):
        problems([bad])


def test_write_labels_offline_keeps_human_rows(tmp_path):
    out = tmp_path / "concept_families.csv"
    counts = write_labels(SAMPLES, None, out)
    assert out.read_text() == (
        "problem_index,concept_family,source,status\n"
        "1,triangle,rules,proposed\n"
        "4,circle,rules,proposed\n"
        "10,other,rules,proposed\n"
        "685,3d,rules,proposed\n"
    )
    assert counts["problems"] == 4 and counts["proposed"] == 4 and counts["kept"] == 0
    assert (counts["family_triangle"], counts["family_other"], counts["family_3d"]) == (1, 1, 1)
    # a person confirms one (changing it), rejects another; a problem from elsewhere stays
    out.write_text(
        "problem_index,concept_family,source,status\n"
        "1,quadrilateral,rules,proposed\n"
        "4,triangle,alice,confirmed\n"
        "10,other,rules,rejected\n"
        "685,circle,rules,proposed\n"
        "999,circle,bob,confirmed\n"
    )
    counts = write_labels(SAMPLES, {"backend": "offline"}, out, existing=out)
    assert out.read_text() == (
        "problem_index,concept_family,source,status\n"
        "1,triangle,rules,proposed\n"  # a stale proposal is proposed again
        "4,triangle,alice,confirmed\n"  # untouched
        "10,other,rules,rejected\n"  # untouched
        "685,3d,rules,proposed\n"
        "999,circle,bob,confirmed\n"  # not among the samples: kept
    )
    assert (counts["kept"], counts["proposed"], counts["errors"]) == (3, 2, 0)
    # existing rows may also be given as a list (a person's rows and other problems kept)
    _, rows = read_labels(out)
    write_labels(SAMPLES[:2], None, tmp_path / "b.csv", existing=list(rows.values()))
    assert read_labels(tmp_path / "b.csv")[1] == rows


def test_extra_columns_of_the_labels_file_are_kept(tmp_path):
    out = tmp_path / "concept_families.csv"
    out.write_text(
        "problem_index,concept_family,source,status,note\n"
        "4,circle,human,confirmed,tangent at B\n"
        "1,circle,rules,proposed,\n"
    )
    write_labels(SAMPLES, None, out, existing=out)
    assert out.read_text() == (
        "problem_index,concept_family,source,status,note\n"
        "1,triangle,rules,proposed,\n"
        "4,circle,human,confirmed,tangent at B\n"
        "10,other,rules,proposed,\n"
        "685,3d,rules,proposed,\n"
    )


# --- the LLM labeler against the fake API -------------------------------------------------------


def llm_spec(fake_api, tmp_path):
    """The labeler's LLM on the fake API (``fake_api``)."""
    return fake_llm_spec(fake_api, "labeler", cache_dir=tmp_path / "llm-cache")


def scripted(text: str, body) -> str:
    """circle for a tangent, 3d for a can, a label outside the schema for parallel lines,
    else triangle."""
    text = text.split("<<<")[-1]  # the problem, not the prompt's own family list
    if "soft drink can" in text:
        return json.dumps({"concept_family": "3d"})
    if "tangent" in text:
        return json.dumps({"concept_family": "circle"})
    if "straight line EF" in text:
        return json.dumps({"concept_family": "lines"})
    return json.dumps({"concept_family": "triangle"})


def test_llm_labeler_strict_json_cached_and_failures_counted(fake_api, tmp_path):
    fake_api.reply_fn = scripted
    out = tmp_path / "concept_families.csv"
    counts = write_labels(SAMPLES, llm_spec(fake_api, tmp_path), out)
    assert out.read_text() == (
        "problem_index,concept_family,source,status\n"
        "1,triangle,openai/labeler,proposed\n"
        "4,circle,openai/labeler,proposed\n"
        "10,,openai/labeler,proposed\n"  # "lines" broke the schema twice: no label
        "685,3d,openai/labeler,proposed\n"
    )
    assert (counts["proposed"], counts["errors"]) == (3, 1)
    assert fake_api.count == 3 + 2  # the bad answer was tried again once
    # the prompt carried the longest version's text and the subject
    assert fake_api.count_matching("Subject: Solid Geometry / Angle") == 1
    assert fake_api.count_matching("soft drink can") == 1
    # again: answered calls come from the cache; the failed problem is asked again
    before = fake_api.count
    counts = write_labels(SAMPLES, llm_spec(fake_api, tmp_path), out, existing=out)
    assert fake_api.count - before == 2
    assert counts["errors"] == 1


def test_label_prompt_fills_the_problem():
    item = problems(SAMPLES)["685"]
    prompt = label_prompt(item)
    assert "Subject: Solid Geometry / Angle" in prompt
    assert f"<<<\n{Q_CAN}\n>>>" in prompt
    assert (
        '{"concept_family": "<one of triangle, quadrilateral, circle, 3d, other, unsure>"}'
        in prompt
    )
    assert tuple(CSV_FIELDS) == ("problem_index", "concept_family", "source", "status")


def test_the_labeler_setting_is_checked_before_any_call(fake_api, tmp_path):
    out = tmp_path / "concept_families.csv"
    with pytest.raises(ValueError, match=r"concept labeler\.seed: unknown key for backend openai"):
        write_labels(SAMPLES, {**llm_spec(fake_api, tmp_path), "seed": 1}, out)
    with pytest.raises(
        ValueError, match=r"concept labeler\.model: unknown key for backend offline"
    ):
        write_labels(SAMPLES, {"backend": "offline", "model": "m"}, out)
    with pytest.raises(
        ValueError, match="concept labeler.backend: 'rules' is not one of offline, "
    ):
        write_labels(SAMPLES, {"backend": "rules"}, out)
    assert fake_api.count == 0 and not out.exists()


def test_the_config_schema_of_the_labeler():
    import jsonschema

    from vlmrobust.core.config import load_schema

    schema = load_schema("config")
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/concept_labeler"}
    )
    assert validator.is_valid({"backend": "offline"})
    assert validator.is_valid({"backend": "gemini", "model": "gemini-2.5-flash", "max_tokens": 64})
    assert not validator.is_valid({"backend": "offline", "cache_dir": "x"})
    assert not validator.is_valid({"backend": "openai", "model": "m", "seed": 1})

"""Human verification for the Idis study: criteria sets, candidates from an Idis variant
manifest, the ``verification`` filter of the variants stage, the concept-family labels
and the review servers of both."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.cli import COMMANDS
from vlmrobust.cli import main as cli_main
from vlmrobust.core.concept_labels import (
    LabelError,
    confirm_label,
    label_counts,
    read_labels,
)
from vlmrobust.core.config import ConfigError, load_schema, validate
from vlmrobust.core.decisions import (
    CRITERIA,
    CRITERIA_SETS,
    IDIS_CRITERIA_SETS,
    OPTIONAL_CRITERIA,
    REQUIRED_CRITERIA,
    DecisionError,
    apply_decisions,
    get_criteria_set,
    make_decision,
    read_decisions,
    write_decision,
    write_decisions,
)
from vlmrobust.core.io import read_json, read_jsonl, write_jsonl
from vlmrobust.core.records import Sample, Variant, write_samples
from vlmrobust.perturb.variants import (
    PERTURBATIONS,
    Excluded,
    Perturbation,
    VariantPlan,
    _check_keys,
    build_variants,
    prepare_verification,
)
from vlmrobust.review import server as review_server
from vlmrobust.review.concepts import ConceptReviewServer
from vlmrobust.review.idis import idis_candidates
from vlmrobust.review.page import SET_TEXTS

from .test_review import _request

HEADER = "sample_id,decision,criteria_failed,note,reviewer,time\n"
PERCEPTION = ["target-lost", "wrong-concept", "other-class", "occludes", "class-text"]
MATH = ["target-changed", "wrong-family", "answer-hint"]


# --------------------------------------------------------------------------- criteria sets


def test_criteria_sets_and_the_distraction_set_unchanged():
    assert list(CRITERIA_SETS) == ["distraction", "idis-perception", "idis-math"]
    assert CRITERIA_SETS["distraction"] == (CRITERIA, REQUIRED_CRITERIA, OPTIONAL_CRITERIA)
    assert list(CRITERIA) == ["obvious", "factual", "irrelevant", "dead_end"]
    assert REQUIRED_CRITERIA == ("obvious", "factual", "irrelevant")
    assert OPTIONAL_CRITERIA == ("dead_end",)
    crit, required, optional = get_criteria_set("idis-perception")
    assert list(crit) == PERCEPTION and list(required) == PERCEPTION and optional == ()
    assert crit["occludes"] == "The distractor occludes the target object"
    crit, required, optional = get_criteria_set("idis-math")
    assert list(crit) == MATH and list(required) == MATH and optional == ()
    with pytest.raises(
        DecisionError,
        match=r"unknown criteria set 'nope' \(known: distraction, idis-perception, idis-math\)",
    ):
        get_criteria_set("nope")
    assert list(SET_TEXTS) == list(CRITERIA_SETS)  # every set has its page texts
    # the default is still the distraction set
    assert make_decision("s", "reject", ["factual"]).criteria_failed == ("factual",)
    assert make_decision("s", "accept", ["dead_end"]).criteria_failed == ("dead_end",)


def test_unknown_criterion_for_a_set_is_named():
    d = make_decision("s", "reject", "class-text;occludes", criteria_set="idis-perception")
    assert d.criteria_failed == ("occludes", "class-text")  # the set's order
    with pytest.raises(
        DecisionError,
        match=r"invalid criterion 'factual' for 's' \(criteria set idis-perception: expected "
        r"some of target-lost, wrong-concept, other-class, occludes, class-text\)",
    ):
        make_decision("s", "reject", ["factual"], criteria_set="idis-perception")
    with pytest.raises(
        DecisionError, match=r"invalid criterion 'occludes' .*criteria set distraction"
    ):
        make_decision("s", "reject", ["occludes"])
    with pytest.raises(
        DecisionError, match=r"invalid criterion 'occludes' .*criteria set idis-math"
    ):
        make_decision("s", "reject", ["occludes"], criteria_set="idis-math")
    # every Idis criterion is required: an accept may name none
    with pytest.raises(DecisionError, match=r"accepted but fails required criteria answer-hint"):
        make_decision("s", "accept", ["answer-hint"], criteria_set="idis-math")


def test_read_decisions_with_a_set(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(
        HEADER + "a__aligned-n1,reject,occludes,,ana,\n" + "a__conflicting-n2,accept,,,,\n"
    )
    got = read_decisions(path, criteria_set="idis-perception")
    assert got["a__aligned-n1"].criteria_failed == ("occludes",)
    # the same file read with the default set fails on its first criterion, naming it
    with pytest.raises(DecisionError, match=r"d\.csv:2: invalid criterion 'occludes'"):
        read_decisions(path)
    with pytest.raises(DecisionError, match=r"d\.csv:2: .*criteria set idis-math"):
        read_decisions(path, criteria_set="idis-math")
    with pytest.raises(DecisionError, match="unknown criteria set 'x'"):
        read_decisions(path, criteria_set="x")
    # write_decision validates against the set, and keeps the file when refused
    before = path.read_bytes()
    with pytest.raises(DecisionError, match="invalid criterion 'obvious'"):
        write_decision(path, "b", "reject", ["obvious"], criteria_set="idis-perception")
    assert path.read_bytes() == before
    write_decision(path, "b", "reject", ["other-class"], criteria_set="idis-perception")
    assert list(read_decisions(path, criteria_set="idis-perception")) == [
        "a__aligned-n1",
        "a__conflicting-n2",
        "b",
    ]


def test_apply_decisions_counts_per_criterion_of_the_set():
    ids = ["v1", "v2", "v3", "v4", "v5"]
    decisions = {
        d.sample_id: d
        for d in [
            make_decision("v1", "accept", criteria_set="idis-math"),
            make_decision("v2", "reject", ["wrong-family"], criteria_set="idis-math"),
            make_decision(
                "v3", "reject", ["target-changed", "wrong-family"], criteria_set="idis-math"
            ),
            make_decision("v5", "reject", ["answer-hint"], criteria_set="idis-math"),
        ]
    }
    accepted, report = apply_decisions(ids, decisions, criteria_set="idis-math")
    assert accepted == ["v1"]
    assert report == {
        "generated": 5,
        "accepted": 1,
        "rejected": 3,
        "undecided": 1,
        "rejected_by_criterion": {"target-changed": 1, "wrong-family": 2, "answer-hint": 1},
        "accepted_failing_optional": {},
        "undecided_ids": ["v4"],
    }
    # decisions of one set counted under another: an error naming the criterion
    with pytest.raises(DecisionError, match=r"decision on 'v2': invalid criterion 'wrong-family'"):
        apply_decisions(ids, decisions)


# --------------------------------------------------------------------------- candidates


def _png(path: Path, color) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (20, 14), color).save(path)
    return str(path)


def make_idis(root: Path) -> tuple[Path, Path]:
    """Two ImageNet-9-like samples and a manifest of three Idis variants (image paths
    relative to ``root``, under results/); returns (manifest, samples)."""
    samples, variants = [], []
    for i, label in enumerate(["Dog", "Fish"]):
        sid = f"imagenet9-{i}"
        img = f"results/samples/in9/images/{sid}.png"
        _png(root / img, (30 * i, 90, 160))
        samples.append(
            Sample(
                sid,
                "in9",
                [img],
                "Which class does the main object belong to?",
                label,
                "label",
                choices=["Dog", "Bird", "Fish"],
                meta={"label": label},
            )
        )
    specs = [
        (
            "imagenet9-0",
            "conflicting",
            2,
            {"distractors": ["tire", "bumper"], "distractor_classes": ["Vehicle"]},
        ),
        (
            "imagenet9-0",
            "aligned",
            1,
            {"distractors": ["dog bowl"], "distractor_classes": ["Dog"]},
        ),
        (
            "imagenet9-1",
            "irrelevant",
            1,
            {"distractors": ["clock"], "distractor_classes": ["irrelevant"], "scale": 0.2},
        ),
    ]
    for sid, sem, n, extra in specs:
        vid = f"{sid}__{sem}-n{n}"
        img = f"results/variants/in9/idis-objects/images/{vid}_0.png"
        _png(root / img, (200, 40 * n, 0))
        params = {"kind": "visual", "semantics": sem, "n": n, **extra}
        params["placed"] = [{"boxes": [[0, 0, 4, 4]], "items": extra["distractors"]}]
        variants.append(
            Variant(
                vid,
                sid,
                "in9",
                "idis-objects",
                "objects",
                [img],
                ["x"],
                "Which class does the main object belong to?",
                params,
                7,
                [f"results/variants/in9/idis-objects/images/{vid}_0_mask.png"],
            )
        )
    write_samples(root / "samples.jsonl", samples)
    write_jsonl(root / "manifest.jsonl", [v.to_dict() for v in variants])
    return root / "manifest.jsonl", root / "samples.jsonl"


def test_idis_candidates_from_a_manifest(tmp_path):
    manifest, samples = make_idis(tmp_path)
    cands = idis_candidates(manifest, samples)
    assert [c.sample_id for c in cands] == [
        "imagenet9-0__conflicting-n2",
        "imagenet9-0__aligned-n1",
        "imagenet9-1__irrelevant-n1",
    ]
    c = cands[0]
    assert c.original_image == "results/samples/in9/images/imagenet9-0.png"
    assert (
        c.edited_image
        == "results/variants/in9/idis-objects/images/imagenet9-0__conflicting-n2_0.png"
    )
    assert c.answer == "Dog" and c.choices == ["Dog", "Bird", "Fish"]
    assert c.question == "Which class does the main object belong to?"
    assert c.distractor_description == (
        "visual distractors (conflicting), n = 2: tire, bumper; class: Vehicle; target class: Dog"
    )
    assert c.extra["kind"] == "visual" and c.extra["semantics"] == "conflicting"
    assert c.extra["n"] == 2 and c.extra["distractors"] == ["tire", "bumper"]
    assert c.extra["distractor_classes"] == ["Vehicle"]
    assert c.extra["sample_label"] == "Dog" and c.extra["condition"] == "idis-objects"
    assert c.extra["mask"].endswith("imagenet9-0__conflicting-n2_0_mask.png")
    assert "other_params" not in c.extra and "original_question" not in c.extra
    assert cands[2].extra["other_params"] == {"scale": 0.2}
    assert cands[2].answer == "Fish"


def test_idis_candidates_errors_name_the_variant(tmp_path):
    manifest, samples = make_idis(tmp_path)
    rows = read_jsonl(manifest)
    rows[1]["params"]["kind"] = "textual"
    write_jsonl(tmp_path / "m2.jsonl", rows)
    with pytest.raises(
        DecisionError,
        match=r"m2\.jsonl:2: variant 'imagenet9-0__aligned-n1': params\.kind is 'textual'",
    ):
        idis_candidates(tmp_path / "m2.jsonl", samples)
    rows = read_jsonl(manifest)
    rows[2]["sample_id"] = "ghost"
    write_jsonl(tmp_path / "m3.jsonl", rows)
    with pytest.raises(DecisionError, match=r"m3\.jsonl:3: .*its sample 'ghost' is not in"):
        idis_candidates(tmp_path / "m3.jsonl", samples)


# --------------------------------------------------------------------------- verification


def _prepare_fake(condition, spec):
    _check_keys(condition, spec, ())  # "verification" must not reach a perturbation
    return dict(spec)


def _plan_fake(sample, condition, spec, seed):
    sid = sample.sample_id
    out: list[VariantPlan | Excluded] = [
        VariantPlan(f"{sid}__aligned-n1", {"kind": "visual", "semantics": "aligned", "n": 1}, 1),
        VariantPlan(
            f"{sid}__conflicting-n1", {"kind": "visual", "semantics": "conflicting", "n": 1}, 2
        ),
    ]
    if sid == "s2":
        out.append(Excluded(f"{sid}__irrelevant-n1", "no-pool"))
    return out


FAKE = "test-idis-verification"


@pytest.fixture(autouse=True)
def fake_perturbation(monkeypatch):
    """A perturbation that plans fixed Idis-like ids and keeps the sample's images;
    registered for one test only (the registry must match the schema elsewhere)."""
    monkeypatch.setitem(PERTURBATIONS, FAKE, Perturbation(FAKE, _prepare_fake, _plan_fake, None))


def _verification_inputs(tmp_path):
    samples = [
        Sample(sid, "toy", [_png(tmp_path / f"{sid}.png", (9, 9, 9))], "Q?", "A", "label")
        for sid in ("s1", "s2")
    ]
    write_samples(tmp_path / "samples.jsonl", samples)
    decisions = tmp_path / "decisions.csv"
    write_decisions(
        decisions,
        [
            make_decision(
                "s1__aligned-n1",
                "reject",
                ["class-text", "occludes"],
                "covers the head",
                "ana",
                criteria_set="idis-perception",
            ),
            make_decision("s1__conflicting-n1", "accept", criteria_set="idis-perception"),
            make_decision("s2__aligned-n1", "reject", ["occludes"], criteria_set="idis-perception"),
            make_decision("s2__irrelevant-n1", "accept", criteria_set="idis-perception"),
            make_decision("other__aligned-n1", "accept", criteria_set="idis-perception"),
        ],
    )
    return tmp_path / "samples.jsonl", decisions


@pytest.mark.parametrize("require", [None, "not-rejected", "accepted"])
def test_verification_drops_rejected_variants(tmp_path, require):
    samples, decisions = _verification_inputs(tmp_path)
    verification = {"decisions": str(decisions), "set": "idis-perception"}
    if require:
        verification["require"] = require
    spec = {"perturbation": FAKE, "verification": verification}
    out = tmp_path / "v" / "manifest.jsonl"
    n = build_variants(samples, "idis-objects", spec, 0, out)
    assert spec["verification"] == verification  # the caller's spec is not changed
    ids = [r["variant_id"] for r in read_jsonl(out)]
    report = read_json(out.parent / "report.json")
    by_reason = {
        "no-pool": 1,
        "rejected: occludes": 1,
        "rejected: occludes;class-text": 1,
    }
    if require == "accepted":
        assert ids == ["s1__conflicting-n1"] and n == 1
        by_reason["not-verified"] = 1
    else:
        assert ids == ["s1__conflicting-n1", "s2__conflicting-n1"] and n == 2
    assert report["excluded_by_reason"] == dict(sorted(by_reason.items()))
    assert report["excluded"] == sum(by_reason.values())
    rejected = next(e for e in report["excluded_variants"] if e["variant_id"] == "s1__aligned-n1")
    assert rejected["detail"].startswith("covers the head; ana")
    assert report["verification"] == {
        "decisions": str(decisions),
        "set": "idis-perception",
        "require": require or "not-rejected",
        "checked": 4,
        "accepted": 1,
        "rejected": 2,
        "undecided": 1,
        "dropped": 3 if require == "accepted" else 2,
        "rejected_by_criterion": {
            "target-lost": 0,
            "wrong-concept": 0,
            "other-class": 0,
            "occludes": 2,
            "class-text": 1,
        },
        "decisions_without_variant": 1,
        "decisions_without_variant_ids": ["other__aligned-n1"],
    }


def test_verification_config_errors_name_the_key(tmp_path):
    samples, decisions = _verification_inputs(tmp_path)
    out = tmp_path / "v" / "manifest.jsonl"
    cases = [
        (
            {"decisions": str(decisions), "set": "distraction"},
            r"'conditions\.c\.verification\.set': 'distraction' is not one of "
            r"\['idis-perception', 'idis-math'\]",
        ),
        (
            {"decisions": str(decisions), "set": "idis-math", "require": "all"},
            r"'conditions\.c\.verification\.require': 'all'",
        ),
        (
            {"decisions": str(tmp_path / "no.csv"), "set": "idis-math"},
            r"verification\.decisions: .*no\.csv' is not an existing file",
        ),
        (
            {"decisions": str(decisions), "set": "idis-math", "keep": 1},
            r"unknown key 'conditions\.c\.verification\.keep'",
        ),
        ("x.csv", r"'conditions\.c\.verification': 'x\.csv' is not of type"),
        # the file's criteria are those of another set: the file and line are named
        (
            {"decisions": str(decisions), "set": "idis-math"},
            r"decisions\.csv:2: invalid criterion 'occludes'",
        ),
    ]
    for value, message in cases:
        with pytest.raises(ValueError, match=message):
            build_variants(samples, "c", {"perturbation": FAKE, "verification": value}, 0, out)
    assert not out.exists()
    # without the key the perturbation's own check still refuses unknown keys
    with pytest.raises(ValueError, match=r"conditions\.c\.verify: unknown key"):
        build_variants(samples, "c", {"perturbation": FAKE, "verify": {}}, 0, out)
    v = prepare_verification("c", {"decisions": str(decisions), "set": "idis-perception"})
    assert v.require == "not-rejected" and len(v.decisions) == 5
    # null (the schema's default) is no verification: every variant, no block
    assert build_variants(samples, "c", {"perturbation": FAKE, "verification": None}, 0, out) == 4
    report = read_json(out.parent / "report.json")
    assert "verification" not in report and report["excluded_by_reason"] == {"no-pool": 1}


def test_schema_accepts_verification_on_a_condition():
    schema = load_schema("config")
    conditions = {
        "type": "object",
        "additionalProperties": {"$ref": "#/$defs/condition"},
        "$defs": schema["$defs"],
    }
    good = {
        "c": {
            "perturbation": "objects",
            "verification": {"decisions": "resources/idis/d.csv", "set": "idis-perception"},
        }
    }
    data = validate(good, conditions, "conditions")
    assert data["c"]["verification"]["require"] == "not-rejected"  # the default is filled
    assert validate({"c": {"perturbation": "none"}}, conditions, "c")["c"]["verification"] is None
    bad = {"c": {"perturbation": "none", "verification": {"decisions": "d.csv", "set": "x"}}}
    with pytest.raises(ConfigError, match=r"c\.verification\.set"):
        validate(bad, conditions, "conditions")
    extra = {
        "c": {
            "perturbation": "none",
            "verification": {"decisions": "d.csv", "set": "idis-math", "keep": 1},
        }
    }
    with pytest.raises(ConfigError, match=r"unknown key 'c\.verification\.keep'"):
        validate(extra, conditions, "conditions")


# --------------------------------------------------------------------------- concept labels

LABELS = (
    "problem_index,concept_family,source,status,note\n"
    "12,triangle,offline,proposed,first\n"
    "7,unsure,llm:gpt,proposed,\n"
    "30,circle,human,confirmed,\n"
)


def test_confirm_label_writes_the_csv(tmp_path):
    path = tmp_path / "concept_families.csv"
    path.write_text(LABELS)
    rows = confirm_label(path, "12", "triangle")  # the proposal was right: source kept
    assert list(rows) == ["12", "7", "30"]
    assert rows["12"] == {
        "problem_index": "12",
        "concept_family": "triangle",
        "source": "offline",
        "status": "confirmed",
        "note": "first",
    }
    confirm_label(path, 7, "Quadrilateral")  # corrected: the source is the person
    assert path.read_text() == (
        "problem_index,concept_family,source,status,note\n"
        "12,triangle,offline,confirmed,first\n"
        "7,quadrilateral,human,confirmed,\n"
        "30,circle,human,confirmed,\n"
    )
    confirm_label(path, "30", "other")  # none of the four: rejected, family other
    _, rows = read_labels(path)
    assert rows["30"] == {
        "problem_index": "30",
        "concept_family": "other",
        "source": "human",
        "status": "rejected",
        "note": "",
    }
    assert label_counts(rows) == {
        "problems": 3,
        "proposed": 0,
        "confirmed": 2,
        "rejected": 1,
        "confirmed_by_family": {"triangle": 1, "quadrilateral": 1, "circle": 0, "3d": 0},
    }
    before = path.read_bytes()
    with pytest.raises(LabelError, match=r"invalid concept family 'hexagon' for problem '12'"):
        confirm_label(path, "12", "hexagon")
    with pytest.raises(LabelError, match=r"no problem_index '99'"):
        confirm_label(path, "99", "circle")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["concept_families.csv"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("problem_index,concept_family,status\n1,circle,proposed\n", r":1: header must hold"),
        (
            "problem_index,concept_family,source,status\n1,circle,x,proposed\n1,3d,x,proposed\n",
            r":3: problem_index '1' already on line 2",
        ),
        (
            "problem_index,concept_family,source,status\n1,other,x,confirmed\n",
            r":2: problem_index '1' is confirmed with concept_family 'other'",
        ),
        (
            "problem_index,concept_family,source,status\n1,circle,x,maybe\n",
            r":2: problem_index '1' has status 'maybe'",
        ),
        (
            "problem_index,concept_family,source,status\n,circle,x,proposed\n",
            r":2: problem_index is empty",
        ),
    ],
)
def test_read_labels_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "labels.csv"
    path.write_text(text)
    with pytest.raises(LabelError, match=r"labels\.csv" + message):
        read_labels(path)


def test_confirm_label_keeps_the_file_mode(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(LABELS)
    path.chmod(0o644)
    old = os.umask(0o077)
    try:
        confirm_label(path, "12", "circle")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# --------------------------------------------------------------------------- servers


@pytest.fixture
def running():
    started = []

    def start(srv):
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        started.append((srv, thread))
        return srv

    yield start
    for srv, thread in started:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_idis_review_server(tmp_path, running):
    manifest, samples = make_idis(tmp_path)
    decisions = tmp_path / "decisions.csv"
    srv = running(
        review_server.make_server(
            idis_candidates(manifest, samples),
            decisions,
            image_base=tmp_path,
            reviewer="tester",
            criteria_set="idis-perception",
        )
    )
    url, token = srv.url, srv.token
    status, _, body = _request(url)
    page = body.decode()
    assert status == 200 and page.count('class="card"') == 3
    assert "<title>Idis-perception: human verification</title>" in page
    for cid in PERCEPTION:
        assert page.count(f'value="{cid}"') == 3
    assert 'value="obvious"' not in page and "appendix A.3" in page
    assert "tire, bumper; class: Vehicle" in page
    src = "image/imagenet9-0__conflicting-n2/edited"
    status, ctype, body = _request(url + src)
    assert (status, ctype) == (200, "image/png")
    assert (
        body
        == (
            tmp_path / "results/variants/in9/idis-objects/images/imagenet9-0__conflicting-n2_0.png"
        ).read_bytes()
    )
    assert _request(url + "image/imagenet9-0__conflicting-n2/original")[0] == 200

    vote = {"sample_id": "imagenet9-0__aligned-n1", "decision": "reject", "criteria": ["occludes"]}
    assert _request(url + "decision", vote)[0] == 403  # no token
    assert (
        _request(url + "decision", vote, token=token, headers={"Origin": "http://evil.example"})[0]
        == 403
    )
    status, _, body = _request(url + "decision", vote, token=token)
    answer = json.loads(body)
    assert status == 200 and answer["decision"]["criteria_failed"] == ["occludes"]
    assert answer["counts"]["rejected_by_criterion"]["occludes"] == 1
    assert set(answer["counts"]["rejected_by_criterion"]) == set(PERCEPTION)
    status, _, body = _request(url + "decision", {**vote, "criteria": ["factual"]}, token=token)
    assert status == 400 and "invalid criterion 'factual'" in json.loads(body)["error"]
    assert (
        decisions.read_text()
        .splitlines()[1]
        .startswith("imagenet9-0__aligned-n1,reject,occludes,,tester,")
    )
    state = json.loads(_request(url + "state")[2])
    assert list(state["decisions"]) == ["imagenet9-0__aligned-n1"]
    assert state["counts"]["undecided"] == 2


def test_idis_review_server_refuses_a_file_of_another_set(tmp_path):
    manifest, samples = make_idis(tmp_path)
    bad = tmp_path / "d.csv"
    bad.write_text(HEADER + "imagenet9-0__aligned-n1,reject,occludes,,,\n")
    with pytest.raises(DecisionError, match=r"d\.csv:2: invalid criterion 'occludes'"):
        review_server.make_server(idis_candidates(manifest, samples), bad, criteria_set="idis-math")


def make_concepts(root: Path) -> tuple[Path, Path]:
    """Labels for problems 12, 7, 30 and math samples: two versions of problem 12, one of
    problem 7, one of problem 99 (no label); none of problem 30."""
    rows = []
    for sid, pid, version, color in [
        ("mv-1", "12", "Vision Dominant", (200, 0, 0)),
        ("mv-2", "12", "Text Lite", (0, 200, 0)),
        ("mv-3", 7, "Text Dominant", (0, 0, 200)),
        ("mv-4", "99", "Text Dominant", (9, 9, 9)),
    ]:
        img = f"results/samples/mv/images/{sid}.png"
        _png(root / img, color)
        rows.append(
            Sample(
                sid,
                "mv",
                [img],
                f"Question of {sid}",
                "A",
                "letter",
                meta={"problem_index": pid, "problem_version": version, "subject": "plane"},
            )
        )
    write_samples(root / "samples.jsonl", rows)
    (root / "labels.csv").write_text(LABELS)
    return root / "labels.csv", root / "samples.jsonl"


def test_concepts_review_server(tmp_path, running):
    labels, samples = make_concepts(tmp_path)
    srv = running(ConceptReviewServer(labels, samples, image_base=tmp_path))
    url, token = srv.url, srv.token
    status, _, body = _request(url)
    page = body.decode()
    assert status == 200 and page.count('class="card"') == 3
    assert re.findall(r'data-problem="([^"]+)"', page) == ["12", "7", "30"]
    assert page.count('data-family="') == 15  # five buttons a problem
    assert f'<meta name="review-token" content="{token}">' in page
    assert "no sample with this problem_index" in page  # problem 30
    # the diagram of problem 12 is its Text Lite version's (before Vision Dominant)
    status, ctype, body = _request(url + "image/12/diagram")
    assert (status, ctype) == (200, "image/png")
    assert body == (tmp_path / "results/samples/mv/images/mv-2.png").read_bytes()
    assert _request(url + "image/30/diagram")[0] == 404
    assert _request(url + "image/12/original")[0] == 404
    state = json.loads(_request(url + "state")[2])
    assert state["counts"] == {
        "problems": 3,
        "proposed": 2,
        "confirmed": 1,
        "rejected": 0,
        "confirmed_by_family": {"triangle": 0, "quadrilateral": 0, "circle": 1, "3d": 0},
        "without_image": 1,
        "samples_without_label": 1,
    }

    choice = {"problem_index": "7", "concept_family": "3d"}
    before = labels.read_bytes()
    assert _request(url + "label", choice)[0] == 403  # no token
    assert _request(url + "label", choice, token="wrong")[0] == 403
    assert _request(url + "label", choice, token=token, headers={"Host": "evil.example"})[0] == 403
    port = srv.server_address[1]
    assert (
        _request(
            url + "label", choice, token=token, headers={"Origin": f"http://127.0.0.1:{port + 1}"}
        )[0]
        == 403
    )
    assert _request(url + "decision", choice, token=token)[0] == 404  # not this server's endpoint
    assert labels.read_bytes() == before
    status, _, body = _request(url + "label", choice, token=token)
    answer = json.loads(body)
    assert status == 200 and answer["label"]["status"] == "confirmed"
    assert answer["label"]["source"] == "human" and answer["counts"]["confirmed"] == 2
    assert "7,3d,human,confirmed," in labels.read_text()
    for bad, message in [
        ({"problem_index": "7", "concept_family": "hexagon"}, "invalid concept family 'hexagon'"),
        ({"problem_index": "99", "concept_family": "circle"}, "no problem_index '99'"),
        ({"problem_index": None, "concept_family": "circle"}, "problem_index must be text"),
    ]:
        status, _, body = _request(url + "label", bad, token=token)
        assert status == 400 and message in json.loads(body)["error"]


def test_cli_reports(tmp_path, capsys):
    (set_arg,) = [a for a in COMMANDS["idis-review"].args if a.flags == ("--set",)]
    assert set_arg.kwargs["choices"] == list(IDIS_CRITERIA_SETS) == list(CRITERIA_SETS)[1:]
    manifest, samples = make_idis(tmp_path)
    decisions = tmp_path / "d.csv"
    write_decisions(
        decisions,
        [
            make_decision(
                "imagenet9-1__irrelevant-n1",
                "reject",
                ["class-text"],
                criteria_set="idis-perception",
            )
        ],
    )
    page = tmp_path / "out" / "idis.html"
    base = ["idis-review", "--manifest", str(manifest), "--samples", str(samples)]
    rc = cli_main(
        [*base, "--decisions", str(decisions), "--set", "idis-perception", "--report"]
        + ["--page", str(page), "--image-base", str(tmp_path)]
    )
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{") :])
    assert rc == 0 and (report["rejected"], report["undecided"]) == (1, 2)
    assert report["rejected_by_criterion"] == dict.fromkeys(PERCEPTION, 0) | {"class-text": 1}
    html = page.read_text()
    assert 'data-live="0"' in html and "vlmrobust idis-review" in html
    rc = cli_main([*base, "--decisions", str(decisions), "--set", "idis-math", "--report"])
    assert rc == 2 and "invalid criterion 'class-text'" in capsys.readouterr().err

    labels, msamples = make_concepts(tmp_path / "c")
    rc = cli_main(
        ["concepts-review", "--labels", str(labels), "--samples", str(msamples), "--report"]
    )
    counts = json.loads(capsys.readouterr().out)
    assert rc == 0 and (counts["proposed"], counts["without_image"]) == (2, 1)
    labels.write_text("problem_index,concept_family,source,status\n1,circle,x,maybe\n")
    rc = cli_main(
        ["concepts-review", "--labels", str(labels), "--samples", str(msamples), "--report"]
    )
    assert rc == 2 and "has status 'maybe'" in capsys.readouterr().err


def test_idis_candidates_name_the_target_family_of_a_math_sample(tmp_path):
    manifest, samples = make_idis(tmp_path)
    rows = read_jsonl(samples)
    rows[0]["meta"] = {"concept_family": "triangle", "problem_version": "Text Lite"}
    write_jsonl(samples, rows)
    c = idis_candidates(manifest, samples)[1]
    assert c.distractor_description == (
        "visual distractors (aligned), n = 1: dog bowl; class: Dog; target concept family: triangle"
    )
    assert c.extra["sample_concept_family"] == "triangle"
    assert c.extra["sample_problem_version"] == "Text Lite"

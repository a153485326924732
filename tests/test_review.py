"""Human verification of distraction samples: the decisions file, the page, the server."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.cli import main as cli_main
from vlmrobust.review import (
    CRITERIA,
    Candidate,
    Decision,
    DecisionError,
    apply_decisions,
    build_review_page,
    make_decision,
    read_candidates,
    read_decisions,
    remove_decision,
    write_decision,
    write_decisions,
)
from vlmrobust.review import server as review_server

HEADER = "sample_id,decision,criteria_failed,note,reviewer,time\n"


def make_candidates(root: Path, n: int = 3) -> Path:
    """``n`` candidates with tiny PNGs under ``root/images``; returns the JSONL path.

    Image paths are relative to ``root`` (the image base)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        sid = f"mathvista-{i + 1}"
        Image.new("RGB", (24, 16), (40 * i, 120, 200)).save(root / "images" / f"{sid}.png")
        Image.new("RGB", (24, 16), (255, 40 * i, 0)).save(root / "images" / f"{sid}-edit.png")
        rows.append(
            {
                "sample_id": sid,
                "question": f"Question {i + 1}: what is x? <b>not bold</b>",
                "choices": ["1", "2", "3"],
                "answer": "B",
                "original_image": f"images/{sid}.png",
                "edited_image": f"images/{sid}-edit.png",
                "distractor_description": f"A red label 'x=7' beside figure {i + 1}.",
                "trap_reasoning_path": "Reads the label as the value of x.",
                "trap_answer": "7",
                "edit_instruction": {"content": "red label", "location": "top left"},
                "dataset": "mathvista",
            }
        )
    path = root / "candidates.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


IDS = {"mathvista-1", "mathvista-2", "mathvista-3"}


def write(tmp_path: Path, text: str, name: str = "decisions.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- candidates


def test_read_candidates(tmp_path):
    cands = read_candidates(make_candidates(tmp_path))
    assert [c.sample_id for c in cands] == sorted(IDS)
    c = cands[0]
    assert c.choices == ["1", "2", "3"] and c.answer == "B" and c.trap_answer == "7"
    assert c.edit_instruction == {"content": "red label", "location": "top left"}
    assert c.extra == {"dataset": "mathvista"}
    assert Candidate.from_dict(c.to_dict()) == c


def test_read_candidates_errors_name_the_line(tmp_path):
    path = make_candidates(tmp_path)
    lines = path.read_text().splitlines()
    row = json.loads(lines[1])
    del row["edited_image"]
    bad = write(tmp_path, "\n".join([lines[0], json.dumps(row), lines[2]]) + "\n", "c.jsonl")
    with pytest.raises(DecisionError, match=r"c\.jsonl:2: missing edited_image"):
        read_candidates(bad)
    dup = write(tmp_path, "\n".join([lines[0], lines[1], lines[0]]) + "\n", "d.jsonl")
    with pytest.raises(DecisionError, match=r"d\.jsonl:3: .*'mathvista-1' already on line 1"):
        read_candidates(dup)


# --------------------------------------------------------------------------- decisions


def test_read_decisions_valid(tmp_path):
    path = write(
        tmp_path,
        HEADER
        + "mathvista-1,accept,,,ana,2026-05-01T12:00:00Z\n"
        + "\n"
        + 'mathvista-2,reject,factual;obvious,"label is wrong, 7 != 5",bo,\n'
        + "mathvista-3,Accept,dead_end,no trap,,\n",
    )
    got = read_decisions(path, IDS)
    assert list(got) == ["mathvista-1", "mathvista-2", "mathvista-3"]
    assert got["mathvista-1"] == Decision(
        "mathvista-1", "accept", (), "", "ana", "2026-05-01T12:00:00Z"
    )
    # criteria come back in the paper's order, whatever order the file has
    assert got["mathvista-2"].criteria_failed == ("obvious", "factual")
    assert got["mathvista-2"].note == "label is wrong, 7 != 5"
    assert got["mathvista-3"].decision == "accept"  # case-insensitive value
    assert got["mathvista-3"].criteria_failed == ("dead_end",)  # optional criterion


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("mathvista-9,accept,,,,", r"decisions\.csv:3: unknown sample id 'mathvista-9'"),
        ("mathvista-2,maybe,,,,", r"decisions\.csv:3: invalid decision 'maybe'"),
        ("mathvista-2,reject,obvious;ugly,,,", r"decisions\.csv:3: invalid criterion 'ugly'"),
        ("mathvista-2,reject,,,,", r"decisions\.csv:3: 'mathvista-2' is rejected without"),
        (
            "mathvista-2,accept,factual,,,",
            r"decisions\.csv:3: 'mathvista-2' is accepted but fails required criteria factual",
        ),
        ("mathvista-2,accept,,,,yesterday", r"decisions\.csv:3: invalid time 'yesterday'"),
        ("mathvista-2,accept,,", r"decisions\.csv:3: 4 fields, expected 6"),
        (",accept,,,,", r"decisions\.csv:3: empty sample id"),
        (
            "mathvista-1,reject,factual,,,",
            r"decisions\.csv:3: .*'mathvista-1' already decided on line 2",
        ),
    ],
)
def test_read_decisions_errors_name_line_and_value(tmp_path, row, message):
    path = write(tmp_path, HEADER + "mathvista-1,accept,,,,\n" + row + "\n")
    with pytest.raises(DecisionError, match=message):
        read_decisions(path, IDS)


def test_read_decisions_line_numbers_count_multiline_notes(tmp_path):
    path = write(
        tmp_path,
        HEADER + 'mathvista-1,reject,factual,"two\nlines",,\n\nmathvista-2,nope,,,,\n',
    )
    with pytest.raises(DecisionError, match=r":5: invalid decision 'nope'"):
        read_decisions(path, IDS)


def test_read_decisions_header_file_and_unknown_ids(tmp_path):
    with pytest.raises(DecisionError, match=r":1: header must be sample_id,decision"):
        read_decisions(write(tmp_path, "sample_id,decision\nmathvista-1,accept\n"), IDS)
    with pytest.raises(FileNotFoundError):
        read_decisions(tmp_path / "none.csv", IDS)
    assert read_decisions(tmp_path / "none.csv", IDS, missing_ok=True) == {}
    assert read_decisions(write(tmp_path, HEADER), IDS) == {}
    # Excel's byte-order mark; no known ids: any id passes
    path = tmp_path / "bom.csv"
    path.write_bytes(("\ufeff" + HEADER + "other-7,accept,,,,\n").encode())
    assert list(read_decisions(path)) == ["other-7"]


def test_write_decision_updates_in_place_atomically(tmp_path):
    path = tmp_path / "resources" / "distraction" / "decisions.csv"
    write_decision(path, "mathvista-2", "accept", reviewer="ana", known_ids=IDS)
    write_decision(path, "mathvista-1", "reject", ["irrelevant"], "answer changes", known_ids=IDS)
    got = write_decision(path, "mathvista-2", "reject", "obvious", "too subtle", known_ids=IDS)
    assert list(got) == ["mathvista-2", "mathvista-1"]  # the replaced row keeps its place
    assert read_decisions(path, IDS) == got
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER.strip() and len(lines) == 3
    assert lines[1].startswith("mathvista-2,reject,obvious,too subtle,")
    assert re.search(r",\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", lines[1])
    before = path.read_bytes()
    with pytest.raises(DecisionError, match="unknown sample id 'nope'"):
        write_decision(path, "nope", "accept", known_ids=IDS)
    with pytest.raises(DecisionError, match="invalid criterion 'x'"):
        write_decision(path, "mathvista-3", "reject", ["x"], known_ids=IDS)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["decisions.csv"]  # no temp files
    assert list(remove_decision(path, "mathvista-2")) == ["mathvista-1"]
    assert list(read_decisions(path, IDS)) == ["mathvista-1"]


def test_notes_with_commas_quotes_newlines_round_trip(tmp_path):
    path = tmp_path / "d.csv"
    note = 'says "x=7", then\nsecond line; ok'
    write_decision(path, "mathvista-1", "reject", ["factual", "dead_end"], note, "bo", "")
    assert read_decisions(path, IDS)["mathvista-1"].note == note
    assert read_decisions(path, IDS)["mathvista-1"].criteria_failed == ("factual", "dead_end")


def test_apply_decisions_counts_by_hand():
    ids = [f"s{i}" for i in range(1, 8)]
    decisions = {
        d.sample_id: d
        for d in [
            make_decision("s1", "accept"),
            make_decision("s2", "reject", ["obvious"]),
            make_decision("s3", "reject", ["factual", "irrelevant"]),
            make_decision("s5", "accept", ["dead_end"]),
            make_decision("s6", "reject", ["irrelevant", "dead_end"]),
        ]
    }
    accepted, report = apply_decisions(ids, decisions)
    assert accepted == ["s1", "s5"]
    assert report == {
        "generated": 7,
        "accepted": 2,
        "rejected": 3,
        "undecided": 2,
        "rejected_by_criterion": {"obvious": 1, "factual": 1, "irrelevant": 2, "dead_end": 1},
        "accepted_failing_optional": {"dead_end": 1},
        "undecided_ids": ["s4", "s7"],
    }
    with pytest.raises(DecisionError, match="unknown sample ids: 'zz'"):
        apply_decisions(ids, {**decisions, "zz": make_decision("zz", "accept")})


# --------------------------------------------------------------------------- page


def test_page_shows_every_sample_and_the_four_criteria(tmp_path):
    cands = read_candidates(make_candidates(tmp_path))
    decisions = {"mathvista-2": make_decision("mathvista-2", "reject", ["factual"], "bad <label>")}
    out = build_review_page(cands, decisions, tmp_path / "out" / "review.html", image_base=tmp_path)
    html = out.read_text()
    for c in cands:
        assert f'data-sample-id="{c.sample_id}"' in html
        assert c.distractor_description.replace("'", "&#x27;") in html
    for cid, text in CRITERIA.items():
        assert html.count(f'value="{cid}"') == 3
        assert text in html
    assert "<b>not bold</b>" not in html and "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert "bad &lt;label&gt;</textarea>" in html
    assert re.search(r'data-sample-id="mathvista-2" data-decision="reject"', html)
    assert 'data-live="0"' in html and "Read-only copy" in html
    for key, n in [("generated", 3), ("accepted", 0), ("rejected", 1), ("undecided", 2)]:
        assert f'id="count-{key}">{n}<' in html
    # images by paths relative to the page, which resolve to the files
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == 6
    assert all((out.parent / s).resolve().is_file() for s in srcs)
    assert "http" not in re.sub(r"https?://www\.w3\.org", "", html.split("<main>")[0])

    embedded = build_review_page(
        cands, {}, tmp_path / "e.html", image_base=tmp_path, embed_images=True
    )
    assert len(re.findall(r'<img src="data:image/png;base64,', embedded.read_text())) == 6


# --------------------------------------------------------------------------- server


@pytest.fixture
def live_server(tmp_path):
    candidates = make_candidates(tmp_path)
    srv = review_server.make_server(
        candidates, tmp_path / "decisions.csv", image_base=tmp_path, reviewer="tester"
    )
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def _request(url, body=None, ctype="application/json"):
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    req = urllib.request.Request(url, data=data, headers={"Content-Type": ctype} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read()


def test_server_routes(live_server, tmp_path):
    url = live_server.url
    status, ctype, body = _request(url)
    assert status == 200 and ctype.startswith("text/html")
    page = body.decode()
    assert 'data-live="1"' in page and page.count('class="card"') == 3
    src = re.findall(r'<img src="([^"]+)"', page)[1]
    assert src == "image/mathvista-1/edited"
    status, ctype, body = _request(url + src)
    assert (status, ctype) == (200, "image/png")
    assert body == (tmp_path / "images" / "mathvista-1-edit.png").read_bytes()
    for bad in ("image/mathvista-1/..%2F..%2Fcandidates.jsonl", "image/nope/original", "x"):
        assert _request(url + bad)[0] == 404

    status, _, body = _request(
        url + "decision",
        {"sample_id": "mathvista-3", "decision": "reject", "criteria": ["irrelevant"], "note": "n"},
    )
    answer = json.loads(body)
    assert status == 200 and answer["ok"]
    assert answer["decision"]["criteria_failed"] == ["irrelevant"]
    assert answer["decision"]["reviewer"] == "tester"
    assert answer["counts"]["rejected"] == 1 and answer["counts"]["undecided"] == 2

    for body, message in [
        ({"sample_id": "nope", "decision": "accept"}, "unknown sample id 'nope'"),
        ({"sample_id": "mathvista-1", "decision": "maybe"}, "invalid decision 'maybe'"),
        ({"sample_id": "mathvista-1", "decision": "reject", "criteria": ["x"]}, "criterion 'x'"),
        ({"sample_id": "mathvista-1", "decision": "reject"}, "rejected without a failed"),
        (b"{not json", "not valid JSON"),
    ]:
        status, _, raw = _request(url + "decision", body)
        assert status == 400 and message in json.loads(raw)["error"]
    assert _request(url + "decision", b"sample_id=x", "text/plain")[0] == 415

    state = json.loads(_request(url + "state")[2])
    assert list(state["decisions"]) == ["mathvista-3"]
    status, _, body = _request(
        url + "decision", {"sample_id": "mathvista-3", "decision": "undecided"}
    )
    assert status == 200 and json.loads(body)["decision"] is None
    assert read_decisions(tmp_path / "decisions.csv", IDS) == {}


def test_server_refuses_an_invalid_decisions_file(tmp_path):
    candidates = make_candidates(tmp_path)
    bad = write(tmp_path, HEADER + "mathvista-1,yes,,,,\n")
    with pytest.raises(DecisionError, match=r"decisions\.csv:2: invalid decision 'yes'"):
        review_server.make_server(candidates, bad)


def test_cli_report_and_page(tmp_path, capsys):
    candidates = make_candidates(tmp_path)
    decisions = tmp_path / "decisions.csv"
    write_decisions(decisions, [make_decision("mathvista-1", "accept")])
    page = tmp_path / "page.html"
    rc = cli_main(
        ["review", "--candidates", str(candidates), "--decisions", str(decisions), "--report"]
        + ["--page", str(page), "--image-base", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert rc == 0 and page.is_file()
    report = json.loads(out[out.index("{") :])
    assert (report["accepted"], report["undecided"]) == (1, 2)
    bad = write(tmp_path, HEADER + "ghost,accept,,,,\n", "bad.csv")
    rc = cli_main(["review", "--candidates", str(candidates), "--decisions", str(bad), "--report"])
    assert rc == 2 and "bad.csv:2: unknown sample id 'ghost'" in capsys.readouterr().err

"""Human verification of distraction samples: the decisions file, the page, the server."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.cli import main as cli_main
from vlmrobust.core.decisions import MAX_NOTE
from vlmrobust.core.io import atomic_write_bytes, atomic_write_text
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

    Image paths are relative to ``root`` (the image base) and under its ``results/``, the
    only folders (with ``resources/``) the review server serves images from."""
    images = root / "results" / "images"
    images.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        sid = f"mathvista-{i + 1}"
        Image.new("RGB", (24, 16), (40 * i, 120, 200)).save(images / f"{sid}.png")
        Image.new("RGB", (24, 16), (255, 40 * i, 0)).save(images / f"{sid}-edit.png")
        rows.append(
            {
                "sample_id": sid,
                "question": f"Question {i + 1}: what is x? <b>not bold</b>",
                "choices": ["1", "2", "3"],
                "answer": "B",
                "original_image": f"results/images/{sid}.png",
                "edited_image": f"results/images/{sid}-edit.png",
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


def _request(url, body=None, ctype="application/json", token=None, headers=None):
    """GET (no body) or POST ``body``; a POST carries the session ``token`` when given."""
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    sent = {"Content-Type": ctype} if data else {}
    if token is not None:
        sent[review_server.TOKEN_HEADER] = token
    req = urllib.request.Request(url, data=data, headers={**sent, **(headers or {})})
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
    assert body == (tmp_path / "results" / "images" / "mathvista-1-edit.png").read_bytes()
    for bad in ("image/mathvista-1/..%2F..%2Fcandidates.jsonl", "image/nope/original", "x"):
        assert _request(url + bad)[0] == 404
    token = live_server.token

    status, _, body = _request(
        url + "decision",
        {"sample_id": "mathvista-3", "decision": "reject", "criteria": ["irrelevant"], "note": "n"},
        token=token,
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
        status, _, raw = _request(url + "decision", body, token=token)
        assert status == 400 and message in json.loads(raw)["error"]
    assert _request(url + "decision", b"sample_id=x", "text/plain", token=token)[0] == 415

    state = json.loads(_request(url + "state")[2])
    assert list(state["decisions"]) == ["mathvista-3"]
    status, _, body = _request(
        url + "decision", {"sample_id": "mathvista-3", "decision": "undecided"}, token=token
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


# --------------------------------------------------------------------------- no silent writes


def test_long_note_is_refused_before_anything_is_written(live_server, tmp_path):
    """A note over the limit is a 400 (or a body over the limit a 413) and the file is
    unchanged; before, a 131,073-character note was written and every later read of the
    file died (``field larger than field limit``)."""
    url, token = live_server.url, live_server.token
    decisions = tmp_path / "decisions.csv"
    ok = {"sample_id": "mathvista-1", "decision": "reject", "criteria": ["factual"]}
    status, _, _ = _request(url + "decision", {**ok, "note": "x" * MAX_NOTE}, token=token)
    assert status == 200
    assert read_decisions(decisions, IDS)["mathvista-1"].note == "x" * MAX_NOTE
    before = decisions.read_bytes()

    status, _, raw = _request(url + "decision", {**ok, "note": "y" * (MAX_NOTE + 1)}, token=token)
    assert status == 400 and f"at most {MAX_NOTE}" in json.loads(raw)["error"]
    status, _, raw = _request(url + "decision", {**ok, "note": "z" * 131_073}, token=token)
    assert (
        status == 413
        and f"too large (at most {review_server.MAX_BODY})" in json.loads(raw)["error"]
    )
    status, _, _ = _request(url + "decision", {**ok, "reviewer": "r" * 10_000}, token=token)
    assert status == 400
    assert decisions.read_bytes() == before
    # the server still answers, and the file still reads
    assert _request(url)[0] == 200 and _request(url + "state")[0] == 200
    assert read_decisions(decisions, IDS)["mathvista-1"].note == "x" * MAX_NOTE
    # the page limits the note field too
    assert f'maxlength="{MAX_NOTE}"' in _request(url)[2].decode()


def test_write_decision_refuses_an_overlong_note(tmp_path):
    path = tmp_path / "d.csv"
    write_decision(path, "mathvista-1", "accept", note="kept")
    before = path.read_bytes()
    with pytest.raises(DecisionError, match=rf"note of {MAX_NOTE + 1} characters .*at most"):
        write_decision(path, "mathvista-2", "accept", note="n" * (MAX_NOTE + 1))
    assert path.read_bytes() == before


def test_oversized_field_in_the_file_is_an_error_naming_file_and_line(tmp_path, capsys):
    """A decisions file with a field over the csv module's limit (e.g. written by an older
    server) reads as a DecisionError naming the file and line, not a csv.Error; the server
    refuses to start with that message and the CLI exits 2."""
    huge = "w" * 140_000
    path = write(tmp_path, HEADER + "mathvista-1,accept,,,,\n" + f"mathvista-2,accept,,{huge},,\n")
    with pytest.raises(DecisionError, match=r"decisions\.csv:3: a field is longer than"):
        read_decisions(path, IDS)
    candidates = make_candidates(tmp_path)
    with pytest.raises(DecisionError, match=r"decisions\.csv:3: a field is longer than"):
        review_server.make_server(candidates, path)
    rc = cli_main(["review", "--candidates", str(candidates), "--decisions", str(path), "--report"])
    assert rc == 2 and "decisions.csv:3: a field is longer than" in capsys.readouterr().err


def test_foreign_host_or_origin_is_refused(live_server, tmp_path):
    """DNS rebinding and cross-site writes: a request naming another host (Host header) or
    coming from another origin (Origin header) is a 403, and nothing is written."""
    url, token = live_server.url, live_server.token
    port = live_server.server_address[1]
    decisions = tmp_path / "decisions.csv"
    body = {"sample_id": "mathvista-1", "decision": "accept"}
    for headers in (
        {"Host": "attacker.example"},
        {"Host": f"attacker.example:{port}"},
        {"Origin": "http://attacker.example"},
        {"Origin": f"http://attacker.example:{port}"},
        {"Origin": "null"},
        {"Origin": f"http://127.0.0.1:{port + 1}"},
    ):
        status, _, raw = _request(url + "decision", body, token=token, headers=headers)
        assert status == 403, headers
        assert "not allowed" in json.loads(raw)["error"]
        assert not decisions.exists()
        assert _request(url, headers=headers)[0] == 403  # the page (and its token) too
        assert _request(url + "state", headers=headers)[0] == 403
    for headers in (
        {"Host": f"localhost:{port}"},
        {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"},
        {"Host": f"LOCALHOST:{port}", "Origin": f"http://localhost:{port}"},
    ):
        assert _request(url + "decision", body, token=token, headers=headers)[0] == 200
    assert list(read_decisions(decisions, IDS)) == ["mathvista-1"]


def test_writes_need_the_session_token(live_server, tmp_path):
    """A POST without the token printed with the URL (and embedded in the served page) is a
    403 and writes nothing; the page's token is the server's, random per server."""
    url, token = live_server.url, live_server.token
    decisions = tmp_path / "decisions.csv"
    body = {"sample_id": "mathvista-1", "decision": "accept"}
    for bad in (None, "", "wrong", token[:-1], token + "x"):
        status, _, raw = _request(url + "decision", body, token=bad)
        assert status == 403 and "token" in json.loads(raw)["error"]
    assert not decisions.exists()
    page = _request(url)[2].decode()
    found = re.search(r'<meta name="review-token" content="([^"]+)">', page)
    assert found and found.group(1) == token and len(token) >= 32
    assert _request(url + "decision", body, token=found.group(1))[0] == 200
    assert list(read_decisions(decisions, IDS)) == ["mathvista-1"]
    other = review_server.make_server(make_candidates(tmp_path / "b"), tmp_path / "b" / "d.csv")
    try:
        assert other.token != token
    finally:
        other.server_close()
    # the static page carries no token
    static = build_review_page(read_candidates(make_candidates(tmp_path)), {}, tmp_path / "s.html")
    assert '<meta name="review-token"' not in static.read_text()


def test_serve_prints_the_token_with_the_url(tmp_path, monkeypatch, capsys):
    candidates = make_candidates(tmp_path)

    def stop(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(review_server.ReviewServer, "serve_forever", stop)
    monkeypatch.setattr(review_server.secrets, "token_urlsafe", lambda n: "T" * 43)
    review_server.serve(candidates, tmp_path / "d.csv", image_base=tmp_path)
    out = capsys.readouterr().out
    assert re.search(r"Review page: http://127\.0\.0\.1:\d+/", out)
    assert "T" * 43 in out


def test_images_only_from_results_and_resources(tmp_path):
    """The server serves a candidate's image only from ``results/`` or ``resources/`` under
    the image base: ``..`` and absolute paths elsewhere are a 403."""
    base = tmp_path / "base"
    candidates = make_candidates(base, 1)
    png = (base / "results" / "images" / "mathvista-1.png").read_bytes()
    (base / "resources" / "seeds").mkdir(parents=True)
    (base / "resources" / "seeds" / "s.png").write_bytes(png)
    (base / "elsewhere.png").write_bytes(png)
    (tmp_path / "outside.png").write_bytes(png)
    good = json.loads(candidates.read_text().splitlines()[0])
    cases = {
        "ok-results": ("results/images/mathvista-1.png", 200),
        "ok-resources": ("resources/seeds/s.png", 200),
        "ok-absolute": (str(base / "resources" / "seeds" / "s.png"), 200),
        "up": ("../outside.png", 403),
        "up-inside": ("results/../elsewhere.png", 403),
        "up-out": ("results/../../outside.png", 403),
        "top": ("elsewhere.png", 403),
        "absolute": (str(tmp_path / "outside.png"), 403),
        "absolute-up": (str(base / "results" / ".." / ".." / "outside.png"), 403),
        "etc": ("/etc/hostname", 403),
    }
    rows = [{**good, "sample_id": sid, "original_image": p} for sid, (p, _) in cases.items()]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    srv = review_server.make_server(path, tmp_path / "d.csv", image_base=base)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        for sid, (_, expected) in cases.items():
            status, _, body = _request(srv.url + f"image/{sid}/original")
            assert status == expected, sid
            if expected == 200:
                assert body == png
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture
def umask():
    """Set the process umask for a test; restores the old one."""
    old = os.umask(0o022)
    os.umask(old)
    try:
        yield os.umask
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_atomic_write_of_a_new_file_follows_the_umask(tmp_path, umask, mask):
    """A new file gets 0666 & ~umask, as open() would give it (before: always 0600)."""
    umask(mask)
    atomic_write_text(tmp_path / "a.txt", "x")
    atomic_write_bytes(tmp_path / "b.bin", b"x")
    write_decision(tmp_path / "d.csv", "mathvista-1", "accept")
    for name in ("a.txt", "b.bin", "d.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~mask, name


@pytest.mark.parametrize("mode", [0o644, 0o664, 0o640, 0o600])
def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path, umask, mode):
    umask(0o077)  # a new file would get 0600; a replaced one keeps its mode
    path = write(tmp_path, HEADER)
    path.chmod(mode)
    write_decision(path, "mathvista-1", "accept")
    assert stat.S_IMODE(path.stat().st_mode) == mode
    atomic_write_text(path, HEADER)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_server_write_keeps_the_decisions_file_mode(live_server, tmp_path, umask):
    umask(0o077)
    decisions = write(tmp_path, HEADER)
    decisions.chmod(0o644)
    body = {"sample_id": "mathvista-1", "decision": "accept"}
    assert _request(live_server.url + "decision", body, token=live_server.token)[0] == 200
    assert stat.S_IMODE(decisions.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

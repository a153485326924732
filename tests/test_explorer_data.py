"""The explorer's data builders (issue 48): the variants folder of a condition and the
cell folder of a (model, dataset, condition, prompt), on a tiny hand-made run.

The run (working folder ``tmp_path``): dataset ``ds`` with samples s1..s4; conditions
``clean``, ``mask-specific`` (s1 masked at a recorded box; s2 with the box only in its
mask file), ``idis-objects`` (two distractor boxes on a portrait image) and ``corrupt``.
The cell ``m/ds/corrupt/default`` against the clean cell:

=========  ======  ====  =====  =======  ========  ===================================
key        sample  draw  clean  correct  flip      notes
=========  ======  ====  =====  =======  ========  ===================================
s1-c#0     s1      0     1      0        lost      long prediction, reference "yes"
s1-c#1     s1      1     0      1        gained    pairs with clean s1#1 (draw 1)
s2-c#0     s2      0     0      0        failed    error row (no answer to compare)
s3-c#0     s3      0     1      1        right     40,000-char answer, "</script>"
s3-c2#0    s3      (empty, key empty) 1   1        right     key made from variant_id + draw
s4-c#0     s4      0     -      0        unpaired  no clean row of s4
=========  ======  ====  =====  =======  ========  ===================================
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from vlmrobust.cli import main as cli_main
from vlmrobust.core.io import write_jsonl
from vlmrobust.core.scored import SCORED_COLUMNS
from vlmrobust.report.explorer import cells as cells_mod
from vlmrobust.report.explorer import data as data_mod
from vlmrobust.report.explorer.cells import COLUMNS, build_cell, judge_files, short_verdict
from vlmrobust.report.explorer.data import (
    chunk_count,
    fnv1a32,
    js_payload,
    key_chunk,
    write_js,
)
from vlmrobust.report.explorer.variants import build_variants, facets, full_image

EXPLORER = Path("results/explorer")


# --------------------------------------------------------------------------- helpers


def _image(path: Path | str, size: tuple[int, int], colour: str = "red") -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path.as_posix()


def _load_js(path: Path) -> tuple[str, dict]:
    """(key, payload) of an ``EXPLORER.put(key, payload);`` data file."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("EXPLORER.put(") and text.endswith(");\n"), text[:80]
    inner = text[len("EXPLORER.put(") : -len(");\n")]
    key_json, payload_json = inner.split(", ", 1)
    return json.loads(key_json), json.loads(payload_json)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _sample(sid: str, **extra) -> dict:
    row = {
        "sample_id": sid,
        "dataset": "ds",
        "images": [f"results/samples/ds/images/{sid}_0.png"],
        "question": f"What is in {sid}?",
        "answer": "A",
        "answer_type": "letter",
        "choices": ["cat", "dog"],
        "precision": None,
        "meta": {},
    }
    return {**row, **extra}


def _variant(vid: str, sid: str, condition: str, perturbation: str, image: str, **extra) -> dict:
    row = {
        "variant_id": vid,
        "sample_id": sid,
        "dataset": "ds",
        "condition": condition,
        "perturbation": perturbation,
        "images": [image],
        "sha256": ["0" * 64],
        "question": "",
        "params": {},
        "seed": 7,
        "masks": [],
    }
    return {**row, **extra}


@pytest.fixture
def run(tmp_path, monkeypatch):
    """The hand-made run's samples and manifests (working folder: tmp_path)."""
    monkeypatch.chdir(tmp_path)
    for sid in ("s1", "s2", "s3", "s4"):
        _image(f"results/samples/ds/images/{sid}_0.png", (64, 48))
    write_jsonl(
        "results/samples/ds/samples.jsonl",
        [_sample("s1"), _sample("s2", choices=[], answer="7", answer_type="number"),
         _sample("s3"), _sample("s4")],
    )  # fmt: skip
    mask_dir = Path("results/variants/ds/mask-specific")
    img1 = _image(mask_dir / "images/s1_0.png", (640, 480))
    img2 = _image(mask_dir / "images/s2_0.png", (100, 80))
    mask = Image.new("L", (100, 80), 0)
    ImageDraw.Draw(mask).rectangle((5, 6, 14, 25), fill=255)
    mask.save(mask_dir / "images/s2_0_mask.png")
    write_jsonl(
        mask_dir / "manifest.jsonl",
        [
            _variant("s1", "s1", "mask-specific", "mask", img1, question="What is left?",
                     params={"region": "specific", "box": [10, 20, 110, 70],
                             "image_size": [640, 480]}),
            _variant("s2", "s2", "mask-specific", "mask", img2,
                     params={"region": "specific"},
                     masks=[(mask_dir / "images/s2_0_mask.png").as_posix()]),
        ],
    )  # fmt: skip
    idis_dir = Path("results/variants/ds/idis-objects")
    outside = _image(tmp_path / "outside" / "s1_idis.png", (400, 800), "blue")  # absolute
    params = {
        "kind": "visual",
        "semantics": "aligned",
        "n": 2,
        "boxes": [[1, 2, 30, 40], [50, 60, 70, 80]],
        "files": [str(tmp_path / "segments" / "kennel.png"), "results/raw/cup.png"],
        "attempt_log": list(range(60)),
    }
    write_jsonl(
        idis_dir / "manifest.jsonl",
        [_variant("s1__aligned-n2", "s1", "idis-objects", "objects", outside, params=params)],
    )
    return tmp_path


# --------------------------------------------------------------------------- data files


def test_fnv1a_and_chunks_match_hand_computed_values():
    assert fnv1a32("") == 0x811C9DC5
    assert fnv1a32("a") == 0xE40C292C
    assert fnv1a32("b") == 0xE70C2DE5
    assert fnv1a32("foobar") == 0xBF9CF968
    assert key_chunk("a", 7) == 0xE40C292C % 7 == 5
    assert key_chunk("a", 1) == 0
    with pytest.raises(ValueError, match="at least one part"):
        key_chunk("a", 0)


def test_chunk_count_is_the_smallest_that_fits(monkeypatch):
    monkeypatch.setattr(data_mod, "PART_BYTES", 100)
    # limit 100 - 50 = 50 a part; each item takes its size + 1 (a comma)
    assert chunk_count({"a": 20, "b": 20}, 50, "x") == 1  # 42 < 50
    # 62 bytes: two parts at least; "a" -> 0 (0xe40c292c even), "b" -> 1 (odd)
    assert chunk_count({"a": 30, "b": 30}, 50, "x") == 2
    with pytest.raises(ValueError, match="x: the item 'a' takes 49 bytes; no part"):
        chunk_count({"a": 49}, 50, "x")


def test_payload_escapes_script_breakers(tmp_path):
    text = js_payload("k</script>", {"t": "</script><!-- & \u2028\u2029", "b": 1})
    assert text == (
        'EXPLORER.put("k\\u003c/script\\u003e", {"b":1,"t":"\\u003c/script\\u003e\\u003c!-- '
        '\\u0026 \\u2028\\u2029"});\n'
    )
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    size = write_js(tmp_path / "x.js", "k", {"a": "é"})
    assert (
        size == len((tmp_path / "x.js").read_bytes()) == len('EXPLORER.put("k", {"a":"é"});\n') + 1
    )
    with pytest.raises(ValueError, match=r"x\.js: the data file for 'k' would be \d+ bytes"):
        write_js(tmp_path / "x.js", "k", {"a": "z" * 2_000_001})
    with pytest.raises(ValueError):
        js_payload("k", {"a": math.nan})


# --------------------------------------------------------------------------- variants


def test_facets_of_every_perturbation():
    assert facets("corruption", {"method": "fog", "severity": 3}) == ("fog", "3")
    assert facets("objects", {"kind": "visual", "semantics": "aligned", "n": 2}) == (
        "visual:aligned",
        "n=2",
    )
    assert facets("size", {"kind": "size", "semantics": None, "n": 1, "size": "large"}) == (
        "size",
        "large",
    )
    assert facets("resize", {"kind": "resolution", "n": None, "resolution": 128}) == (
        "resolution",
        "128",
    )
    assert facets("distraction", {"source": "released"}) == ("released", None)
    assert facets("mask", {"region": "random"}) == ("random", None)
    assert facets("none", {}) == (None, None)


def test_full_image_only_under_results(run):
    assert full_image("results/samples/ds/a.png") == "../samples/ds/a.png"
    assert full_image("./results/variants/x/y.png") == "../variants/x/y.png"
    assert full_image(str(run / "results" / "samples" / "a.png")) == "../samples/a.png"
    assert full_image("outside/a.png") is None
    assert full_image("results/../outside/a.png") is None
    assert full_image("/elsewhere/results/a.png") is None


def test_mask_variants_folder(run):
    out = EXPLORER / "variants/ds/mask-specific"
    summary = build_variants(
        "results/variants/ds/mask-specific/manifest.jsonl",
        "results/samples/ds/samples.jsonl",
        str(out),
    )
    key, payload = _load_js(out / "part0.js")
    assert key == "variants/ds/mask-specific/0"
    assert (payload["dataset"], payload["condition"], payload["part"], payload["parts"]) == (
        "ds", "mask-specific", 0, 1,
    )  # fmt: skip
    v1, v2 = payload["variants"]["s1"], payload["variants"]["s2"]
    assert v1 == {
        "sample_id": "s1",
        "question": "What is left?",  # the manifest's question wins
        "choices": ["cat", "dog"],
        "answer": "A",
        "answer_type": "letter",
        "images": [
            {
                "thumb": "variants/ds/mask-specific/thumbs/0.webp",
                "full": "../variants/ds/mask-specific/images/s1_0.png",
                "width": 640,
                "height": 480,
                "boxes": [[10, 20, 110, 70]],
                "box_kind": "mask",
            }
        ],
        "params": {"region": "specific", "box": [10, 20, 110, 70], "image_size": [640, 480]},
        "seed": 7,
        "perturbation": "mask",
        "method": "specific",
        "severity": None,
    }
    # no params.box: the mask file's bounding box; no manifest question: the sample's
    assert v2["images"][0]["boxes"] == [[5, 6, 15, 26]]
    assert (v2["question"], v2["choices"], v2["answer"]) == ("What is in s2?", None, "7")
    with Image.open(out / "thumbs/0.webp") as thumb:
        assert (thumb.format, thumb.size) == ("WEBP", (320, 240))
    with Image.open(out / "thumbs/1.webp") as thumb:
        assert (thumb.format, thumb.size) == ("WEBP", (320, 256))
    part_and_thumbs = sum(len(p.read_bytes()) for p in [out / "part0.js", *out.glob("thumbs/*")])
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary == {
        "dataset": "ds",
        "condition": "mask-specific",
        "perturbation": "mask",
        "n": 2,
        "parts": 1,
        "bytes": part_and_thumbs,
        "thumbs": 2,
        "param_keys": ["box", "image_size", "region"],
    }


def test_idis_variants_folder_and_no_absolute_path(run):
    out = EXPLORER / "variants/ds/idis-objects"
    build_variants(
        "results/variants/ds/idis-objects/manifest.jsonl",
        "results/samples/ds/samples.jsonl",
        str(out),
    )
    _, payload = _load_js(out / "part0.js")
    v = payload["variants"]["s1__aligned-n2"]
    assert v["images"] == [
        {
            "thumb": "variants/ds/idis-objects/thumbs/0.webp",
            "full": None,  # the image is not under results/
            "width": 400,
            "height": 800,
            "boxes": [[1, 2, 30, 40], [50, 60, 70, 80]],
            "box_kind": "distractor",
        }
    ]
    assert (v["method"], v["severity"], v["question"]) == (
        "visual:aligned",
        "n=2",
        "What is in s1?",
    )
    assert v["params"]["files"] == ["\u2026/kennel.png", "results/raw/cup.png"]
    assert v["params"]["attempt_log"] == [*range(50), "\u2026 10 more"]
    with Image.open(out / "thumbs/0.webp") as thumb:
        assert thumb.size == (160, 320)
    for name, content in _files(run / "results/explorer").items():
        assert str(run).encode() not in content, name


def test_variants_errors_name_file_and_line(run):
    samples = "results/samples/ds/samples.jsonl"
    bad = Path("results/variants/ds/bad/manifest.jsonl")
    out = str(EXPLORER / "variants/ds/bad")
    cases = [
        ([_variant("v", "s1", "bad", "none", "results/nothing.png")], r"manifest\.jsonl:1: cannot open the image results/nothing\.png"),
        ([_variant("v", "s1", "bad", "none", "results/samples/ds/images/s1_0.png")] * 2, r"manifest\.jsonl:2: variant 'v' repeats \(first at line 1\)"),
        ([_variant("v", "s9", "bad", "none", "results/samples/ds/images/s1_0.png")], r"manifest\.jsonl:1: sample 's9' is not in"),
        ([{"sample_id": "s1"}], r"manifest\.jsonl:1: a manifest row without variant_id"),
        ([_variant("v", "s1", "bad", "mask", "results/samples/ds/images/s1_0.png", params={"box": [1, 2, 3]})], r"manifest\.jsonl:1: params\.box \[1, 2, 3\] is not a box"),
    ]  # fmt: skip
    for rows, message in cases:
        write_jsonl(bad, rows)
        with pytest.raises(ValueError, match=message):
            build_variants(str(bad), samples, out)
    write_jsonl("results/samples/ds/dup.jsonl", [_sample("s1"), _sample("s1")])
    write_jsonl(bad, [])
    with pytest.raises(
        ValueError, match=r"dup\.jsonl:2: sample_id 's1' repeats \(first at line 1\)"
    ):
        build_variants(str(bad), "results/samples/ds/dup.jsonl", out)


# --------------------------------------------------------------------------- cells


def _scored(path: str, condition: str, rows: list[dict]) -> str:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(SCORED_COLUMNS))
        writer.writeheader()
        for row in rows:
            full = {"dataset": "ds", "condition": condition, "prompt": "p", "model": "m",
                    "method": "rule", "mode": "extract", "finish_reason": "stop", **row}  # fmt: skip
            writer.writerow({k: "" if full.get(k) is None else full.get(k) for k in SCORED_COLUMNS})
    return path


def _row(key, variant, sample, draw, correct, score=None, **extra) -> dict:
    score = float(correct) if score is None else score
    return {"key": key, "variant_id": variant, "sample_id": sample, "draw": draw,
            "correct": correct, "score": score, **extra}  # fmt: skip


CLEAN = [
    _row("s1#0", "s1", "s1", 0, 1),
    _row("s1#1", "s1", "s1", 1, 0),
    _row("s2#0", "s2", "s2", 0, 0),
    _row("s3#0", "s3", "s3", 0, 1),
]
LONG_PREDICTION = "p" * 200
PERTURBED = [
    _row("s1-c#0", "s1-c", "s1", 0, 0, prediction=LONG_PREDICTION, completion_tokens=12),
    _row("s1-c#1", "s1-c", "s1", 1, 1, prediction="dog", thinking_tokens="40"),
    _row("s2-c#0", "s2-c", "s2", 0, 0, error="E" * 300, method="none", reason="request failed"),
    _row("s3-c#0", "s3-c", "s3", 0, 1, prediction="cat"),
    _row("", "s3-c2", "s3", "", 1, prediction="cat"),
    _row("s4-c#0", "s4-c", "s4", 0, 0, score=0.25, method="random"),
]
KEYS = ["s1-c#0", "s1-c#1", "s2-c#0", "s3-c#0", "s3-c2#0", "s4-c#0"]


def _outputs(path: str, keys: list[str], **texts) -> str:
    rows = []
    for key in keys:
        text = texts.get(key, {"answer_text": f"answer of {key}", "raw_text": f"answer of {key}"})
        rows.append({"key": key, "model": "m", "thinking": None, **text})
    write_jsonl(path, rows)
    return path


def _judge(path: str, rows: list[dict]) -> str:
    write_jsonl(path, rows)
    return path


@pytest.fixture
def cell_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clean = _scored("results/scored/m/ds/clean/default.csv", "clean", CLEAN)
    scored = _scored("results/scored/m/ds/corrupt/default.csv", "corrupt", PERTURBED)
    outputs = _outputs(
        "results/outputs/m/ds/corrupt/default.jsonl",
        KEYS,
        **{
            "s3-c#0": {"answer_text": "</script>" + "x" * 40_000, "raw_text": None},
            "s1-c#1": {"answer_text": "dog", "thinking": "T", "raw_text": "<think>T</think>dog"},
            "s1-c#0": {"answer_text": "cat", "thinking": "T", "raw_text": "T\n\ncat"},
            "s4-c#0": {"answer_text": "cat", "thinking": "T", "raw_text": "<think>T</think>x cat"},
        },
    )
    judges = {
        "reference": _judge("results/judged/ref.jsonl", [
            {"key": "s1-c#0", "verdict": "yes", "model": "m", "dataset": "ds", "reason": "r"},
            {"key": "s1-c#1", "verdict": None, "error": "parse"},
            {"key": "other#0", "verdict": "no"},
        ]),
        "mathverse": _judge("results/judged/mv.jsonl", [{"key": "s1-c#0", "verdict": 0}]),
        "hallucination": _judge("results/judged/h.jsonl", [{"key": "s1-c#0", "hallucinated": True}]),
        "attributes:lexical": _judge("results/judged/a.jsonl", [
            {"key": "s1-c#0", "counts": {"target_related": 2, "other": 5}, "error": None},
        ]),
    }  # fmt: skip
    return {"scored": scored, "clean": clean, "outputs": outputs, "judges": judges}


def _build(cell_run, out: str = "results/explorer/cells/m/ds/corrupt/default") -> dict:
    return build_cell(
        cell_run["scored"], cell_run["clean"], cell_run["outputs"], cell_run["judges"], out
    )


def test_cell_rows_flips_and_summary(cell_run):
    out = EXPLORER / "cells/m/ds/corrupt/default"
    summary = _build(cell_run)
    key, payload = _load_js(out / "rows.js")
    assert key == "rows/m/ds/corrupt/default"
    rows = payload.pop("rows")
    assert payload == {
        "model": "m",
        "dataset": "ds",
        "condition": "corrupt",
        "prompt": "default",
        "clean_condition": "clean",
        "chunks": 1,
        "row_parts": 1,
        "columns": list(COLUMNS),
    }
    by_key = {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in rows}
    assert [r[0] for r in rows] == KEYS  # file order
    assert rows[0] == [
        "s1-c#0", "s1-c", "s1", 0, 0, 0.0, "p" * 159 + "\u2026", "rule", "extract", None, "",
        "stop", None, None, 12, "lost", "s1#0",
        {"attributes:lexical": 7, "hallucination": "yes", "mathverse": "no", "reference": "yes"},
    ]  # fmt: skip
    flips = {k: (r["flip"], r["clean_key"]) for k, r in by_key.items()}
    assert flips == {
        "s1-c#0": ("lost", "s1#0"),
        "s1-c#1": ("gained", "s1#1"),  # draw 1 pairs with the clean draw 1
        "s2-c#0": ("failed", "s2#0"),  # a failed request is never a flip
        "s3-c#0": ("right", "s3#0"),
        "s3-c2#0": ("right", "s3#0"),  # empty key and draw: s3-c2#0, draw 0
        "s4-c#0": ("unpaired", None),
    }
    assert by_key["s1-c#1"]["judges"] == {"reference": "failed"}
    assert by_key["s1-c#1"]["thinking_tokens"] == 40
    assert by_key["s3-c#0"]["judges"] is None
    assert by_key["s2-c#0"]["error"] == "E" * 159 + "\u2026"
    assert by_key["s2-c#0"]["reason"] == "request failed"
    assert by_key["s4-c#0"]["method"] == "random"
    assert summary == json.loads((out / "summary.json").read_text())
    files = [out / "rows.js", out / "text0.js"]
    assert summary == {
        "model": "m",
        "dataset": "ds",
        "condition": "corrupt",
        "prompt": "default",
        "clean_condition": "clean",
        "n": 6,
        "chunks": 1,
        "row_parts": 1,
        "bytes": sum(len(p.read_bytes()) for p in files),
        "counts": {"lost": 1, "gained": 1, "right": 2, "wrong": 0, "unpaired": 1, "failed": 1},
        "correct": 3,
        "score_sum": 3.25,
        "errors": 1,
        "flips": {"s1-c#0": "lost", "s1-c#1": "gained"},
    }


def test_cell_texts(cell_run):
    out = EXPLORER / "cells/m/ds/corrupt/default"
    _build(cell_run)
    raw = (out / "text0.js").read_text(encoding="utf-8")
    assert "</script>" not in raw and "\\u003c/script\\u003e" in raw
    key, payload = _load_js(out / "text0.js")
    assert key == "text/m/ds/corrupt/default/0" and payload["part"] == 0
    texts = payload["texts"]
    assert sorted(texts) == sorted(KEYS)
    long = texts["s3-c#0"]
    assert long["clipped"] is True
    assert len(long["answer_text"]) == 32_000 and long["answer_text"].startswith("</script>xx")
    assert texts["s1-c#1"] == {
        "answer_text": "dog",
        "thinking": "T",
        "raw_text": None,  # the thinking and the answer in the default markers: not stored twice
        "clipped": False,
        "judges": {"reference": {"verdict": None, "error": "parse"}},
    }
    assert texts["s1-c#0"]["raw_text"] is None  # the thinking and the answer, nothing more
    assert texts["s4-c#0"]["raw_text"] == "<think>T</think>x cat"  # more than both: kept
    assert texts["s2-c#0"]["raw_text"] is None  # the answer itself
    assert texts["s1-c#0"]["judges"]["reference"] == {"verdict": "yes", "reason": "r"}
    assert texts["s1-c#0"]["judges"]["attributes:lexical"]["counts"] == {
        "target_related": 2,
        "other": 5,
    }


def test_clean_cell_has_no_flips(cell_run):
    _outputs("results/outputs/m/ds/clean/default.jsonl", [r["key"] for r in CLEAN])
    out = EXPLORER / "cells/m/ds/clean/default"
    summary = build_cell(
        cell_run["clean"], None, "results/outputs/m/ds/clean/default.jsonl", {}, str(out)
    )
    _, payload = _load_js(out / "rows.js")
    assert [(r[15], r[16], r[17]) for r in payload["rows"]] == [("", None, None)] * 4
    assert payload["clean_condition"] is None
    assert summary["counts"] == dict.fromkeys(
        ("lost", "gained", "right", "wrong", "unpaired", "failed"), 0
    )
    assert (summary["flips"], summary["correct"], summary["score_sum"]) == ({}, 2, 2.0)


def test_texts_and_rows_split_into_parts(cell_run, monkeypatch):
    small = EXPLORER / "cells/m/ds/corrupt/default"
    monkeypatch.setattr(data_mod, "PART_BYTES", 600)
    monkeypatch.setattr(cells_mod, "PART_BYTES", 1_200)
    _outputs(cell_run["outputs"], KEYS)  # short texts: every one fits a small part
    summary = _build(cell_run)
    chunks = summary["chunks"]
    assert chunks > 1 and summary["row_parts"] > 1
    for k in range(chunks):
        key, payload = _load_js(small / f"text{k}.js")
        assert key == f"text/m/ds/corrupt/default/{k}"
        assert all(key_chunk(t, chunks) == k for t in payload["texts"])
        assert len((small / f"text{k}.js").read_bytes()) < 600
    _, first = _load_js(small / "rows.js")
    rows = list(first["rows"])
    for r in range(1, summary["row_parts"]):
        key, payload = _load_js(small / f"rows{r}.js")
        assert key == f"rows/m/ds/corrupt/default/{r}"
        assert (payload["part"], payload["row_parts"]) == (r, summary["row_parts"])
        rows += payload["rows"]
    assert [r[0] for r in rows] == KEYS
    # a rerun with the usual limit leaves no part of the split behind
    monkeypatch.setattr(data_mod, "PART_BYTES", 1_500_000)
    monkeypatch.setattr(cells_mod, "PART_BYTES", 1_500_000)
    _build(cell_run)
    assert sorted(p.name for p in small.iterdir()) == ["rows.js", "summary.json", "text0.js"]


def test_cell_errors_name_file_and_line(cell_run):
    def fails(message: str, **changed) -> None:
        args = {**cell_run, **changed}
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            build_cell(args["scored"], args["clean"], args["outputs"], args["judges"], "out")

    dup = _scored("results/scored/m/ds/corrupt/dup.csv", "corrupt", [PERTURBED[0], PERTURBED[0]])
    fails(r"dup\.csv:3: key 's1-c#0' repeats \(first at line 2\)", scored=dup)
    bad = _scored("results/scored/m/ds/corrupt/bad.csv", "corrupt", [_row("k#0", "k", "s1", 0, 2)])
    fails(r"bad\.csv:2: correct = '2' is neither 0 nor 1", scored=bad)
    nan = _scored(
        "results/scored/m/ds/corrupt/nan.csv", "corrupt", [_row("k#0", "k", "s1", 0, 0, "x")]
    )
    fails(r"nan\.csv:2: score = 'x' is not a number", scored=nan)
    twice = _scored(
        "results/scored/m/ds/clean/twice.csv", "clean", [CLEAN[0], {**CLEAN[0], "key": "z"}]
    )
    fails(r"twice\.csv:3: sample 's1' draw 0 repeats \(first at line 2\)", clean=twice)
    no_key = _judge("results/judged/nokey.jsonl", [{"key": "a#0"}, {"verdict": "yes"}])
    fails(r"nokey\.jsonl:2: a reference judge row without key", judges={"reference": no_key})
    again = _judge("results/judged/again.jsonl", [{"key": "a#0"}, {"key": "a#0"}])
    fails(r"again\.jsonl:2: key 'a#0' repeats \(first at line 1\)", judges={"mathverse": again})
    short = _outputs("results/outputs/short.jsonl", KEYS[:2])
    fails(r"default\.csv:4: key 's2-c#0' has no row in results/outputs/short\.jsonl", outputs=short)
    with pytest.raises(ValueError, match=r"unknown judge kind 'verdicts'"):
        judge_files(["verdicts=results/judged/ref.jsonl"])
    with pytest.raises(ValueError, match=r"not KIND=PATH"):
        judge_files(["reference"])
    with pytest.raises(FileNotFoundError, match=r"no file results/judged/none\.jsonl"):
        judge_files(["attributes:lexical=results/judged/none.jsonl"])
    assert judge_files(["attributes:lexical=results/judged/a.jsonl"]) == {
        "attributes:lexical": "results/judged/a.jsonl"
    }


def test_short_verdicts():
    assert short_verdict("reference", {"verdict": "no"}) == "no"
    assert short_verdict("mathverse", {"verdict": 1}) == "yes"
    assert short_verdict("mathverse", {"verdict": None, "error": "x"}) == "failed"
    assert short_verdict("hallucination", {"hallucinated": False}) == "no"
    assert short_verdict("attributes:llm", {"counts": None, "error": "x"}) == "failed"


# --------------------------------------------------------------------------- commands, reruns


def test_commands_and_a_rerun_write_identical_bytes(run, monkeypatch):
    _scored("results/scored/m/ds/clean/default.csv", "clean", CLEAN)
    _scored("results/scored/m/ds/corrupt/default.csv", "corrupt", PERTURBED)
    _outputs("results/outputs/m/ds/corrupt/default.jsonl", KEYS)
    _judge("results/judged/ref.jsonl", [{"key": "s1-c#0", "verdict": "yes"}])
    commands = [
        ["explorer-variants", "--manifest", "results/variants/ds/mask-specific/manifest.jsonl",
         "--samples", "results/samples/ds/samples.jsonl",
         "--out-dir", "results/explorer/variants/ds/mask-specific"],
        ["explorer-variants", "--manifest", "results/variants/ds/idis-objects/manifest.jsonl",
         "--samples", "results/samples/ds/samples.jsonl",
         "--out-dir", "results/explorer/variants/ds/idis-objects"],
        ["explorer-cell", "--scored", "results/scored/m/ds/corrupt/default.csv",
         "--clean-scored", "results/scored/m/ds/clean/default.csv",
         "--outputs", "results/outputs/m/ds/corrupt/default.jsonl",
         "--judge", "reference=results/judged/ref.jsonl",
         "--out-dir", "results/explorer/cells/m/ds/corrupt/default"],
    ]  # fmt: skip
    for command in commands:
        assert cli_main(command) == 0
    first = _files(run / "results/explorer")
    assert len(first) == 4 + 3 + 3  # two variants folders (2 + 1 thumbs), one cell
    for command in commands:
        assert cli_main(command) == 0
    assert _files(run / "results/explorer") == first
    for name, content in first.items():
        assert str(run).encode() not in content, name

    seen = []
    import vlmrobust.report.explorer.site as site

    monkeypatch.setattr(site, "build_site", lambda *args: seen.append(args))
    index = ["explorer-index", "--spec", '{"models": {}}', "--cells", "c1", "c2",
             "--variants", "v1", "--out-dir", "results/explorer"]  # fmt: skip
    assert cli_main(index) == 0
    assert seen == [({"models": {}}, ["c1", "c2"], ["v1"], "results/explorer")]
    assert cli_main(["explorer-cell", "--scored", "results/scored/m/ds/corrupt/default.csv",
                     "--outputs", "results/outputs/m/ds/corrupt/default.jsonl",
                     "--judge", "nope=x", "--out-dir", "o"]) == 2  # fmt: skip

"""The VisArgs adapter: one sample per (image, visual premise), box checks, image
download and cache, the template question writer and the LLM question writer's step
(`vlmrobust write-questions`, whose file the adapter reads), the demo's annotation.json."""

from __future__ import annotations

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image

from tests.api_server import FakeAPIServer
from vlmrobust.cli import main
from vlmrobust.core.io import read_json
from vlmrobust.core.records import read_samples
from vlmrobust.data.base import BadRowError
from vlmrobust.data.build import build_samples
from vlmrobust.data.visargs import region_phrase, template_question
from vlmrobust_demo.data import generate_demo

KEY_ENV = "VLMROBUST_TEST_VISARGS_KEY"


def _row(id_, url, boxes, premises=None, **kw):
    premises = premises or [f"premise {i}" for i in range(len(boxes))]
    return {
        "id": id_,
        "url": url,
        "visual_premises": premises,
        "b_box": boxes,
        "commonsense_premises": ["c"] * len(boxes),
        "conclusion": "A conclusion.",
        "reasoning_steps": ["(VP1, CP1 -> IC1): x"],
        **kw,
    }


def _box(x, y, w, h):
    return {"startX": x, "startY": y, "w": w, "h": h}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "visargs"
    (root / "img").mkdir(parents=True)
    Image.new("RGB", (300, 150), (10, 20, 30)).save(root / "img" / "a.png")
    Image.new("RGB", (90, 90), (200, 0, 0)).save(root / "img" / "b.png")
    return root


def _build(tmp_path, folder, rows, **spec):
    (folder / "annotation.json").write_text(json.dumps(rows))
    out = tmp_path / "out" / "samples.jsonl"
    report = build_samples(
        "visargs",
        {"adapter": "visargs", "source": "local", "path": str(folder), **spec},
        out,
        tmp_path / "out" / "report.json",
    )
    return read_samples(out), report


def test_one_sample_per_premise_with_boxes_and_template_questions(tmp_path, folder):
    rows = [
        _row("a", "img/a.png", [_box(0, 0, 50, 40), _box(200, 100, 100, 50)]),
        _row("b", "img/b.png", [_box(30, 30, 30, 30)], premises=["A red square."]),
    ]
    samples, report = _build(tmp_path, folder, rows)
    assert [s.sample_id for s in samples] == ["visargs-a-vp1", "visargs-a-vp2", "visargs-b-vp1"]
    first, second, third = samples
    assert first.question == "What is shown in the top-left part of the image?"
    assert second.question == "What is shown in the bottom-right part of the image?"
    assert third.question == "What is shown in the centre of the image?"
    assert third.answer == "A red square." and third.answer_type == "text"
    assert first.meta["premise_index"] == 0 and second.meta["premise_index"] == 1
    assert first.meta["b_box"] == [_box(0, 0, 50, 40), _box(200, 100, 100, 50)]
    assert first.meta["image_size"] == [300, 150]
    assert first.meta["question_source"] == "template"
    assert first.meta["clipped_boxes"] == 0
    assert report["samples_written"] == 3 and report["warnings"] == []
    assert report["question_writer"] == "template"


def test_region_phrase_by_thirds():
    assert region_phrase((0, 0, 10, 10), (90, 90)) == "top-left"
    assert region_phrase((30, 0, 60, 10), (90, 90)) == "top"  # centre x 45 -> middle third
    assert region_phrase((80, 80, 90, 90), (90, 90)) == "bottom-right"
    assert region_phrase((0, 40, 10, 50), (90, 90)) == "left"
    assert (
        template_question((30, 30, 60, 60), (90, 90)) == "What is shown in the centre of the image?"
    )


def test_boxes_outside_the_image_are_clipped_and_counted(tmp_path, folder):
    rows = [_row("a", "img/a.png", [_box(-10, 100, 50, 80), _box(280.5, 0, 40, 20)])]
    samples, report = _build(tmp_path, folder, rows)
    # (-10, 100, 40, 180) -> (0, 100, 40, 150); (280.5, 0, 320.5, 20) -> (280, 0, 300, 20)
    assert samples[0].meta["b_box"] == [_box(0, 100, 40, 50), _box(280, 0, 20, 20)]
    assert samples[0].meta["clipped_boxes"] == 2
    assert report["warnings"] == [
        "2 box(es) reached outside their image and were clipped (1 image(s)); meta.clipped_boxes"
    ]


@pytest.mark.parametrize(
    ("box", "reason"),
    [
        (_box(10, 10, 0, 5), "b_box[1] is empty or negative (w=0, h=5)"),
        (_box(10, 10, 5, -3), "b_box[1] is empty or negative (w=5, h=-3)"),
        (_box(400, 10, 5, 5), "b_box[1] [400.0, 10.0, 405.0, 15.0] lies entirely outside"),
        ({"startX": "a", "startY": 0, "w": 1, "h": 1}, "b_box[1].startX is not a number"),
    ],
)
def test_bad_boxes_name_the_sample(tmp_path, folder, box, reason):
    rows = [_row("a", "img/a.png", [_box(0, 0, 5, 5), box])]
    with pytest.raises(BadRowError, match=r"id 'a-vp1'\): " + re.escape(reason)):
        _build(tmp_path, folder, rows, on_bad_row="error")
    assert not (tmp_path / "out" / "samples.jsonl").exists()
    # skipped, every premise of the bad image is reported and the others are kept
    rows.append(_row("b", "img/b.png", [_box(0, 0, 5, 5)]))
    samples, report = _build(tmp_path, folder, rows, on_bad_row="skip")
    assert [s.sample_id for s in samples] == ["visargs-b-vp1"]
    assert [r["id"] for r in report["skipped_rows"]] == ["a-vp1", "a-vp2"]


def test_premises_and_boxes_must_pair(tmp_path, folder):
    rows = [_row("a", "img/a.png", [_box(0, 0, 5, 5)], premises=["x", "y"])]
    with pytest.raises(BadRowError, match="2 visual_premises but 1 b_box entries"):
        _build(tmp_path, folder, rows)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_url_images_are_downloaded_once_then_read_from_the_cache(tmp_path, folder):
    served = tmp_path / "www"
    served.mkdir()
    Image.new("RGB", (64, 32), (0, 255, 0)).save(served / "pic.png")
    handler = functools.partial(_Quiet, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/pic.png"
    cache = tmp_path / "cache"
    try:
        samples, _ = _build(
            tmp_path, folder, [_row("w", url, [_box(0, 0, 8, 8)])], image_cache=str(cache)
        )
    finally:
        server.shutdown()
        server.server_close()
    cached = list(cache.iterdir())
    assert len(cached) == 1 and cached[0].suffix == ".png"
    assert samples[0].meta["image_size"] == [64, 32] and samples[0].meta["url"] == url
    # the server is gone: the cached file serves the second build
    again, _ = _build(
        tmp_path, folder, [_row("w", url, [_box(0, 0, 8, 8)])], image_cache=str(cache)
    )
    assert Path(again[0].images[0]).read_bytes() == cached[0].read_bytes()
    # an uncached url that cannot be fetched is a bad row naming the url
    gone = url.replace("pic.png", "other.png")
    with pytest.raises(BadRowError, match=f"image url {gone} could not be downloaded"):
        _build(tmp_path, folder, [_row("w", gone, [_box(0, 0, 8, 8)])], image_cache=str(cache))


def _writer(server, tmp_path):
    return {
        "backend": "openai",
        "model": "writer-model",
        "base_url": server.url + "/v1",
        "api_key_env": KEY_ENV,
        "cache_dir": str(tmp_path / "llm-cache"),
        "options": {"max_retries": 1, "base_delay": 0.001, "max_delay": 0.005, "timeout_s": 5},
    }


def _write_questions(folder, rows, writer, out, name="visargs"):
    """`vlmrobust write-questions` as the workflow's questions rule runs it."""
    (folder / "annotation.json").write_text(json.dumps(rows))
    spec = {"adapter": "visargs", "source": "local", "path": str(folder)}
    argv = [
        "write-questions",
        "--name",
        name,
        "--spec",
        json.dumps(spec | {"question_writer": writer}),
    ]
    return main([*argv, "--out", str(out)])


def test_llm_question_writer_step_is_cached_and_read_by_the_adapter(tmp_path, folder, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-visargs-key")
    monkeypatch.chdir(tmp_path)  # the adapter's default questions file is relative
    rows = [_row("a", "img/a.png", [_box(0, 0, 50, 40), _box(200, 100, 100, 50)])]
    out = tmp_path / "results" / "questions" / "visargs" / "questions.jsonl"
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: json.dumps({"question": "What sits in that corner?"})
        writer = _writer(server, tmp_path)
        assert _write_questions(folder, rows, writer, out) == 0
        assert server.count == 2
        prompts = sorted(json.dumps(r.body) for r in server.requests)
        assert "premise 0" in prompts[0] and "top-left" in prompts[0]
        assert "[0, 0, 50, 40]" in prompts[0] and "premise 1" in prompts[1]
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert [x["key"] for x in lines] == ["a-vp1", "a-vp2"]
        for x in lines:
            assert (x["question"], x["writer"], x["error"]) == (
                "What sits in that corner?",
                "openai/writer-model",
                None,
            )
            assert re.fullmatch(r"[0-9a-f]{64}", x["cache_key"])
            assert (
                tmp_path / "llm-cache" / x["cache_key"][:2] / f"{x['cache_key']}.json"
            ).is_file()
        written = out.read_bytes()
        # a rerun of the step asks nothing: every answer comes from the cache
        out.unlink()
        assert _write_questions(folder, rows, writer, out) == 0
        assert server.count == 2 and out.read_bytes() == written
        # the samples step only reads the file (default path: results/questions/<name>/)
        samples, report = _build(tmp_path, folder, rows, question_writer=writer)
        assert server.count == 2
    assert [s.question for s in samples] == ["What sits in that corner?"] * 2
    assert samples[0].meta["question_source"] == "openai/writer-model"
    assert report["question_writer"] == "openai/writer-model"
    assert (
        "test-visargs-key"
        not in "".join(p.read_text() for p in (tmp_path / "llm-cache").rglob("*") if p.is_file())
        + written.decode()
    )


def test_llm_questions_file_problems_are_named(tmp_path, folder, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-visargs-key")
    rows = [_row("a", "img/a.png", [_box(0, 0, 50, 40), _box(200, 100, 100, 50)])]
    out = tmp_path / "q.jsonl"
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: json.dumps({"question": "What is up there?"})
        server.add_fault("400", match="premise 1")
        writer = _writer(server, tmp_path)
        assert _write_questions(folder, rows, writer, out) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["question"] == "What is up there?" and lines[0]["error"] is None
    assert lines[1]["question"] is None and "400" in lines[1]["error"]
    # a failed call is a bad row of that premise, under the dataset's on_bad_row
    with pytest.raises(BadRowError, match=r"id 'a-vp2'\): the question writer failed: "):
        _build(tmp_path, folder, rows, question_writer=writer, questions_file=str(out))
    samples, report = _build(
        tmp_path, folder, rows, question_writer=writer, questions_file=str(out), on_bad_row="skip"
    )
    assert [s.sample_id for s in samples] == ["visargs-a-vp1"]
    assert [r["id"] for r in report["skipped_rows"]] == ["a-vp2"]
    # another writer, a missing key, a missing file: write the questions again
    other = dict(writer, model="other-model")
    with pytest.raises(ValueError, match="written by 'openai/writer-model'.*write the questions"):
        _build(tmp_path, folder, rows, question_writer=other, questions_file=str(out))
    out.write_text(out.read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="no question for 'a-vp2'"):
        _build(tmp_path, folder, rows, question_writer=writer, questions_file=str(out))
    with pytest.raises(ValueError, match="questions file .*missing.jsonl does not exist"):
        _build(tmp_path, folder, rows, question_writer=writer,
               questions_file=str(tmp_path / "missing.jsonl"))  # fmt: skip
    # the template writer needs no file; the step refuses it
    assert _write_questions(folder, rows, {"backend": "template"}, tmp_path / "t.jsonl") == 2
    assert not (tmp_path / "t.jsonl").exists()


def test_demo_premises_feed_the_visargs_adapter(tmp_path):
    generate_demo(tmp_path / "demo", n_per_family=3, seed=0, families=["premises"], image_size=192)
    fam = tmp_path / "demo" / "premises"
    rows = json.loads((fam / "annotation.json").read_text())
    demo_rows = [json.loads(line) for line in (fam / "rows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["0000", "0001", "0002"]
    assert rows[0]["b_box"] == demo_rows[0]["meta"]["b_box"]
    out = tmp_path / "s" / "samples.jsonl"
    build_samples(
        "demo-visargs",
        {"adapter": "visargs", "source": "local", "path": str(fam)},
        out,
        tmp_path / "s" / "report.json",
    )
    samples = read_samples(out)
    assert len(samples) == sum(len(r["visual_premises"]) for r in rows)
    assert samples[0].sample_id == "demo-visargs-0000-vp1"
    assert samples[0].answer == rows[0]["visual_premises"][0]
    assert read_json(tmp_path / "s" / "report.json")["files"] == ["annotation.json"]


def test_boxes_are_checked_against_the_image_as_shown(tmp_path, folder):
    # a 300x150 JPEG stored sideways with EXIF orientation 6 is shown 150 wide, 300 high
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.new("RGB", (300, 150), (0, 0, 200)).save(folder / "img" / "rot.jpg", exif=exif)
    rows = [_row("r", "img/rot.jpg", [_box(100, 200, 80, 50)])]
    samples, _ = _build(tmp_path, folder, rows)
    assert samples[0].meta["image_size"] == [150, 300]
    # (100, 200, 180, 250) clipped to the shown width 150
    assert samples[0].meta["b_box"] == [_box(100, 200, 50, 50)]
    assert samples[0].meta["clipped_boxes"] == 1

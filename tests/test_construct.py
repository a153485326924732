"""Distract-Bench construction: seeds, retrieval, writers, editors, pipeline."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from tests.api_server import FakeAPIServer
from vlmrobust.clients.llm import LLMCache, make_llm
from vlmrobust.construct import (
    EDIT_SCHEMA,
    MAX_AREA_FRACTION,
    CompositeEditor,
    GeminiImageEditor,
    KnowledgeBase,
    LLMWriter,
    OfflineWriter,
    OpenAIImageEditor,
    Seed,
    build_candidates,
    knowledge_base,
    load_seeds,
    retrieve,
    validate_edit,
)
from vlmrobust.construct.editor import EditorError
from vlmrobust.construct.writer import WriterError, correct_option
from vlmrobust.core.decisions import read_candidates
from vlmrobust.core.records import Sample, safe_id
from vlmrobust_demo.data import generate_demo
from vlmrobust_demo.seeds import make_demo_seeds

KEY_ENV = "VLMROBUST_TEST_CONSTRUCT_KEY"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    generate_demo(out, n_per_family=6, seed=0, families=["diagram", "chart", "geometry"],
                  image_size=160)  # fmt: skip
    return out


def demo_samples(demo_dir: Path, family: str) -> list[Sample]:
    out = []
    for line in (demo_dir / family / "rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        out.append(
            Sample(
                sample_id=safe_id("demo", family, row["id"]),
                dataset=f"demo-{family}",
                images=[str(demo_dir / family / row["images"][0])],
                question=row["question"],
                answer=row["answer"],
                answer_type=row["answer_type"],
                choices=row.get("choices") or [],
                precision=row.get("precision"),
                meta=row.get("meta") or {},
            )
        )
    return out


@pytest.fixture(scope="module")
def samples(demo_dir):
    return [s for fam in ("diagram", "chart", "geometry") for s in demo_samples(demo_dir, fam)]


@pytest.fixture(scope="module")
def seeds():
    return load_seeds()


@pytest.fixture(scope="module")
def kb(seeds):
    return knowledge_base(seeds)


def _seed(sid: str, injected: str) -> Seed:
    return Seed(sid, "o.png", "e.png", injected, "irrelevant", "misleads",
                {"kind": "label", "text": "x {number}"})  # fmt: skip


# --------------------------------------------------------------------------- seeds


def test_shipped_seeds_load_and_regenerate_identically(seeds, tmp_path):
    assert len(seeds) == 6
    assert len({s.seed_id for s in seeds}) == 6
    for s in seeds:
        assert s.path("original_image").is_file() and s.path("edited_image").is_file()
    again = make_demo_seeds(tmp_path)
    for a, b in zip(seeds, again, strict=True):
        assert a.to_dict() == b.to_dict()
        for which in ("original_image", "edited_image"):
            assert a.path(which).read_bytes() == b.path(which).read_bytes()


def test_retrieve_most_similar_first_and_deterministic():
    seeds = [
        _seed("s-a", "a pie chart of fruit sales with a revenue note"),
        _seed("s-b", "a right triangle with an angle of 40 degrees marked"),
        _seed("s-c", "a photo of a dog playing in a park"),
        _seed("s-d", "a bar chart of rainfall per month with a target line"),
    ]
    kb = knowledge_base(seeds)
    got = retrieve("geometry: find the hypotenuse of the right triangle", kb, k=3)
    assert len(got) == 3 and got[0].seed_id == "s-b"
    assert [s.seed_id for s in got] == [
        s.seed_id for s in retrieve("geometry: find the hypotenuse of the right triangle", kb)
    ]
    assert retrieve("dog in the park", kb, k=1)[0].seed_id == "s-c"


def test_retrieve_ties_broken_by_seed_id():
    seeds = [_seed(sid, "same text") for sid in ("z", "b", "m", "a")]
    kb = KnowledgeBase(
        [e for e in knowledge_base(seeds).entries], embed=lambda t: np.ones((len(t), 2)) / 2**0.5
    )
    assert [s.seed_id for s in retrieve("anything", kb, k=3)] == ["a", "b", "m"]


def test_knowledge_base_with_summarizer_is_cached(seeds, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-construct")
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: "A chart with a note that is irrelevant."
        llm = make_llm(_spec(server), LLMCache(tmp_path / "c"), sleep=lambda s: None)
        kb = knowledge_base(seeds[:2], summarizer=llm, embed=lambda t: np.eye(len(t), 4))
        assert [e.source for e in kb.entries] == ["llm:openai/writer-model"] * 2
        n = server.count
        assert n == 2
        knowledge_base(seeds[:2], summarizer=llm, embed=lambda t: np.eye(len(t), 4))
        assert server.count == n


# --------------------------------------------------------------------------- offline writer


def test_offline_writer_valid_answer_preserving_deterministic(samples, kb):
    writer = OfflineWriter(seed=3)
    for sample in samples:
        description = writer.describe(sample)
        demos = retrieve(description + " " + sample.question, kb)
        edit = writer.write(sample, None, demos, description)
        validate_edit(edit)
        assert edit == OfflineWriter(seed=3).write(sample, None, demos, description)
        trap = edit["trap_answer"].strip().lower()
        assert trap != sample.answer.strip().lower()
        right = correct_option(sample)
        assert right is None or trap != right.strip().lower()
        # the injected text never carries the answer value or the correct option
        text = edit["render"]["text"]
        tokens = set(text.replace("=", " ").replace(":", " ").split())
        value = str(sample.meta.get("answer_value", sample.answer))
        if sample.answer_type == "number" or sample.choices:
            assert value not in tokens, (sample.sample_id, text, value)
        for c in sample.choices:
            if any(ch.isdigit() for ch in c):
                assert c not in tokens


def test_offline_writer_without_demo_fails(samples):
    with pytest.raises(WriterError):
        OfflineWriter().write(samples[0], None, [], "")


# --------------------------------------------------------------------------- editor


def _render(**kw):
    base = {"kind": "label", "text": "Length = 7", "position": [0.8, 0.1],
            "color": "#ff0000", "size": 0.08}  # fmt: skip
    base.update(kw)
    return {"render": base}


@pytest.mark.parametrize("kind", ["label", "arrow", "box", "number", "shape"])
@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
def test_composite_editor_bounded_and_deterministic(kind, mode):
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    image = Image.fromarray(arr, "RGB").convert(mode)
    editor = CompositeEditor()
    ins = _render(kind=kind, text="Target: 42 units", shape="star")
    out = editor.edit(image, ins)
    assert out.mode == mode and out.size == image.size
    assert np.array_equal(np.asarray(out), np.asarray(editor.edit(image, ins)))
    x0, y0, x1, y1 = editor.region(image, ins)
    assert (x1 - x0) * (y1 - y0) <= MAX_AREA_FRACTION * 160 * 120
    diff = np.asarray(out).astype(int) != np.asarray(image).astype(int)
    if diff.ndim == 3:
        diff = diff.any(axis=2)
    assert diff.any()
    ys, xs = np.nonzero(diff)
    assert xs.min() >= x0 and xs.max() < x1 and ys.min() >= y0 and ys.max() < y1
    assert np.asarray(image).shape == np.asarray(out).shape


@pytest.mark.parametrize("size", [(1, 1), (3, 5), (16, 9)])
def test_composite_editor_tiny_and_palette_images(size):
    image = Image.new("P", size, 0)
    out = CompositeEditor().edit(image, _render(kind="arrow", text="a long distractor text"))
    assert out.mode == "RGB" and out.size == size


def test_composite_editor_rejects_missing_render():
    with pytest.raises(ValueError):
        CompositeEditor().edit(Image.new("RGB", (8, 8)), {"render": {"kind": "cloud"}})


# --------------------------------------------------------------------------- API editors


def _b64_png(size=(16, 12), color=(0, 255, 0)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_openai_image_editor_request_and_result():
    calls = []

    class Images:
        def edit(self, **kw):
            calls.append(kw)
            return SimpleNamespace(data=[SimpleNamespace(b64_json=_b64_png((32, 24)))])

    editor = OpenAIImageEditor({"model": "gpt-image-1", "options": {"quality": "high"}},
                               client=SimpleNamespace(images=Images()), sleep=lambda s: None)  # fmt: skip
    image = Image.new("RGB", (16, 12), "white")
    edit = {"edit_instruction": {"content": "Add 'Fig. 3'", "location": "bottom",
                                 "style": "red", "layout_constraints": "cover nothing"}}  # fmt: skip
    out = editor.edit(image, edit)
    assert out.size == (16, 12) and out.getpixel((0, 0)) == (0, 255, 0)
    (kw,) = calls
    assert kw["model"] == "gpt-image-1" and kw["quality"] == "high" and kw["n"] == 1
    name, data, mime = kw["image"]
    assert name == "image.png" and mime == "image/png" and data.startswith(b"\x89PNG")
    assert "Add 'Fig. 3'" in kw["prompt"] and "Preserve all original content" in kw["prompt"]

    class Empty:
        def edit(self, **kw):
            return SimpleNamespace(data=[])

    with pytest.raises(EditorError, match="no b64_json"):
        OpenAIImageEditor({}, client=SimpleNamespace(images=Empty())).edit(image, edit)


def test_gemini_image_editor_request_and_result():
    calls = []
    png = base64.b64decode(_b64_png())

    class Models:
        def generate_content(self, **kw):
            calls.append(kw)
            part = SimpleNamespace(inline_data=SimpleNamespace(data=png))
            return SimpleNamespace(candidates=[SimpleNamespace(content=SimpleNamespace(
                parts=[SimpleNamespace(inline_data=None), part]))])  # fmt: skip

    editor = GeminiImageEditor({"model": "gemini-img"}, client=SimpleNamespace(models=Models()))
    out = editor.edit(Image.new("RGB", (16, 12)), "Add a red star at the top left.")
    assert out.size == (16, 12) and out.getpixel((3, 3)) == (0, 255, 0)
    (kw,) = calls
    assert kw["model"] == "gemini-img"
    assert kw["contents"][0].text.endswith("Add a red star at the top left.")
    assert kw["contents"][1].inline_data.mime_type == "image/png"
    assert "IMAGE" in kw["config"].response_modalities


# --------------------------------------------------------------------------- LLM writer


def _spec(server):
    return {
        "backend": "openai",
        "model": "writer-model",
        "base_url": server.url + "/v1",
        "api_key_env": KEY_ENV,
        "options": {"max_retries": 2, "base_delay": 0.001, "max_delay": 0.005, "timeout_s": 5},
    }


VALID_EDIT = {
    "edit_instruction": {"content": "Add the red text 'Fig. 12'", "location": "bottom centre",
                         "style": "red sans-serif, 6% of the height",
                         "layout_constraints": "cover nothing"},
    "distractor_description": "A red 'Fig. 12' label at the bottom.",
    "trap_reasoning_path": "Counts 12 as a quantity.",
    "trap_answer": "12",
    "render": {"kind": "label", "text": "Fig. 12", "position": [0.5, 0.95],
               "color": "#ff0000", "size": 0.06},
}  # fmt: skip


def test_llm_writer_retries_invalid_json_and_caches(samples, kb, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-construct")
    sample = next(s for s in samples if s.answer != "12")
    image = Image.open(sample.images[0]).convert("RGB")
    with FakeAPIServer() as server:
        writes = []

        def reply(text, body):
            if "Describe this image" in text:
                return "A diagram with labelled segments."
            writes.append(text)
            return "{not json" if len(writes) == 1 else json.dumps(VALID_EDIT)

        server.reply_fn = reply
        cache = LLMCache(tmp_path / "llm")
        writer = LLMWriter(make_llm(_spec(server), cache, sleep=lambda s: None))
        description = writer.describe(sample, image)
        demos = retrieve(description, kb)
        edit = writer.write(sample, image, demos, description)
        assert edit == VALID_EDIT
        assert len(writes) == 2  # invalid JSON retried once
        assert all(d.seed_id in writes[0] for d in demos)
        assert "Keep the answer unchanged" in writes[0]
        n = server.count
        assert n == 3
        again = LLMWriter(make_llm(_spec(server), LLMCache(cache.root), sleep=lambda s: None))
        assert again.write(sample, image, demos, again.describe(sample, image)) == VALID_EDIT
        assert server.count == n  # rerun: no request


def test_llm_writer_rejects_the_answer_as_trap(samples, kb, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-construct")
    sample = samples[0]
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: json.dumps(
            {**VALID_EDIT, "trap_answer": sample.answer}
        )
        writer = LLMWriter(make_llm(_spec(server), None, sleep=lambda s: None))
        with pytest.raises(WriterError, match="correct answer"):
            writer.write(sample, Image.new("RGB", (8, 8)), retrieve("x", kb), "")


# --------------------------------------------------------------------------- pipeline


def test_pipeline_end_to_end(samples, kb, tmp_path):
    chosen = samples[:2] + samples[6:8] + samples[12:13]
    broken = Sample(sample_id="broken", dataset="demo", images=[str(tmp_path / "missing.png")],
                    question="q?", answer="1", answer_type="number")  # fmt: skip
    out = tmp_path / "construct"
    rows = build_candidates([*chosen, broken], OfflineWriter(), CompositeEditor(), kb, out, 0)
    assert len(rows) == 5
    assert rows.failures == [
        {"sample_id": "broken", "stage": "image", "reason": rows.failures[0]["reason"]}
    ]
    assert "missing.png" in rows.failures[0]["reason"]
    cands = read_candidates(out / "candidates.jsonl")
    assert [c.sample_id for c in cands] == [s.sample_id for s in chosen]
    for cand, sample in zip(cands, chosen, strict=True):
        assert cand.answer == sample.answer and cand.choices == sample.choices
        assert cand.trap_answer and cand.trap_answer != cand.answer
        assert isinstance(cand.edit_instruction, str) and cand.distractor_description
        assert len(cand.extra["seed_ids"]) == 3
        assert cand.extra["writer"] == "offline" and cand.extra["editor"] == "composite"
        orig = np.asarray(Image.open(cand.original_image).convert("RGB"))
        edited = np.asarray(Image.open(cand.edited_image).convert("RGB"))
        assert orig.shape == edited.shape and (orig != edited).any()
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert failures == rows.failures
    first = (out / "candidates.jsonl").read_bytes()
    build_candidates(chosen, OfflineWriter(), CompositeEditor(), kb, out, 0)
    assert (out / "candidates.jsonl").read_bytes() == first


def test_pipeline_records_writer_and_editor_failures(samples, kb, tmp_path):
    class BadEditor:
        name = "bad"

        def edit(self, image, instruction):
            raise EditorError("quota exceeded")

    rows = build_candidates(samples[:1], OfflineWriter(), BadEditor(), kb, tmp_path, 0)
    assert list(rows) == [] and rows.failures[0]["stage"] == "edit"
    assert "quota exceeded" in rows.failures[0]["reason"]
    rows = build_candidates(samples[:1], OfflineWriter(), CompositeEditor(),
                            KnowledgeBase([]), tmp_path, 0)  # fmt: skip
    assert rows.failures[0]["stage"] == "write"


def test_edit_schema_is_a_valid_schema():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(EDIT_SCHEMA)


def test_composite_editor_moves_off_content():
    image = Image.new("RGB", (200, 200), "white")
    image.paste((0, 0, 0), (120, 0, 200, 40))  # content where the label was asked for
    editor = CompositeEditor()
    ins = _render(position=[0.85, 0.06])
    x0, y0, x1, y1 = editor.region(image, ins)
    assert x1 <= 120 or y0 >= 40
    out = np.asarray(editor.edit(image, ins))
    assert (out[0:40, 120:200] == 0).all()
    assert CompositeEditor(find_free_space=False).region(image, ins)[2] > 120

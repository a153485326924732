"""Nothing dropped in silence: settings that would make jobs vanish are errors, bad bytes
name their file and line, and the review server serves only what it should and answers
every request. (The rerun cases, where a changed input must rerun its jobs, are in
``tests/test_workflow.py``.)"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from vlmrobust.core.config import ConfigError, load_yaml, validate_config, validate_registry
from vlmrobust.core.decisions import read_decisions, write_decision
from vlmrobust.core.io import read_jsonl
from vlmrobust.data.released import load_questions
from vlmrobust.review import server as review_server
from vlmrobust.score.released import import_vlmevalkit

from .conftest import REPO
from .test_review import IDS, _request, make_candidates


def _config():
    return load_yaml(REPO / "config/config.yaml")


def _registry():
    return validate_registry(load_yaml(REPO / "config/models.yaml"))


# --------------------------------------------------------------------------- settings


def test_a_dataset_naming_a_model_outside_the_run_is_an_error():
    config = _config()
    config["datasets"]["demo-chart"]["models"] = ["demo-extra"]  # in the registry only
    with pytest.raises(ConfigError, match=r"datasets\.demo-chart\.models: 'demo-extra' is not"):
        validate_config(config, _registry())


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("datasets", ["demo-nothing"], r"idis\.blocking\.datasets: 'demo-nothing' is not a"),
        ("models", ["demo-extra"], r"idis\.blocking\.models: 'demo-extra' is not among"),
    ],
)
def test_blocking_names_outside_the_run_are_errors(key, value, message):
    config = _config()
    config.setdefault("idis", {}).setdefault("blocking", {})[key] = value
    with pytest.raises(ConfigError, match=message):
        validate_config(config, _registry())


# --------------------------------------------------------------------------- bad bytes


def test_non_utf8_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": "caf\xff"}\n')
    with pytest.raises(
        ValueError, match=r"samples\.jsonl:3: not UTF-8 text: byte 0xff at column 11"
    ):
        read_jsonl(path)


def test_non_utf8_questions_name_file_and_line(tmp_path):
    path = tmp_path / "testmini.json"
    path.write_bytes(b'[\n {"pid": "1",\n  "question": "\xe9t\xe9"}\n]\n')
    with pytest.raises(ValueError, match=r"testmini\.json:3: not UTF-8 text: byte 0xe9"):
        load_questions("mathvista", path)


def test_bad_tsv_names_the_file(tmp_path):
    bad = tmp_path / "pred.tsv"
    bad.write_bytes(b"index\tquestion\tanswer\tprediction\n1\tq\tA\tA\n2\tq\tB\t\xffB\n")
    with pytest.raises(ValueError, match=r"pred\.tsv:3: not UTF-8 text: byte 0xff at column 7"):
        import_vlmevalkit(bad, "mmstar", {}, "m", "clean")
    quote = tmp_path / "quote.tsv"
    quote.write_text('index\tquestion\tanswer\tprediction\n1\t"unterminated\tA\tA\n')
    with pytest.raises(ValueError, match=r"quote\.tsv: not a readable TSV file \(.*row 1"):
        import_vlmevalkit(quote, "mmstar", {}, "m", "clean")


# --------------------------------------------------------------------------- review server


def _serve(srv):
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    return thread


def test_a_symlink_under_results_to_a_file_elsewhere_is_refused(tmp_path):
    base = tmp_path / "base"
    candidates = make_candidates(base, 1)
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    os.symlink(secret, base / "results" / "images" / "link.png")
    os.symlink(base / "results" / "images", base / "results" / "linked-dir")
    good = json.loads(candidates.read_text().splitlines()[0])
    rows = [
        {**good, "sample_id": "link", "original_image": "results/images/link.png"},
        {**good, "sample_id": "dir", "original_image": "results/linked-dir/mathvista-1.png"},
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    srv = review_server.make_server(path, tmp_path / "d.csv", image_base=base)
    thread = _serve(srv)
    try:
        status, _, body = _request(srv.url + "image/link/original")
        assert status == 403 and b"root:x" not in body
        # a link that stays inside results/ is fine
        assert _request(srv.url + "image/dir/original")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_fifty_concurrent_writes_all_get_an_answer(tmp_path):
    candidates = make_candidates(tmp_path)
    srv = review_server.make_server(candidates, tmp_path / "decisions.csv", image_base=tmp_path)
    thread = _serve(srv)
    ids = sorted(IDS)

    def post(i):
        body = {"sample_id": ids[i % 3], "decision": "accept", "note": f"round note {i}"}
        return _request(srv.url + "decision", body, token=srv.token)[0]

    try:
        for _round in range(5):
            with ThreadPoolExecutor(50) as pool:
                statuses = list(pool.map(post, range(50)))
            assert statuses == [200] * 50
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
    assert set(read_decisions(tmp_path / "decisions.csv", IDS)) == IDS


@pytest.mark.parametrize("note", ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "'quoted"])
def test_notes_cannot_become_spreadsheet_formulas(tmp_path, note):
    path = tmp_path / "decisions.csv"
    write_decision(path, "mathvista-1", "accept", note=note, reviewer="=me", known_ids=IDS)
    line = path.read_text().splitlines()[1]
    cells = line.split(",")
    assert cells[3].lstrip('"').startswith("'") and cells[4] == "'=me"
    decision = read_decisions(path, IDS)["mathvista-1"]
    assert (decision.note, decision.reviewer) == (note, "=me")


# --------------------------------------------------------------------------- inputs


def test_an_image_outside_the_dataset_folder_is_refused_naming_the_row(tmp_path):
    from PIL import Image

    from vlmrobust.data import build_samples

    from .test_adapters import spec, write_jsonl

    folder = tmp_path / "chartqa"
    (folder / "images").mkdir(parents=True)
    Image.new("RGB", (8, 6), "red").save(folder / "images" / "in.png")
    Image.new("RGB", (8, 6), "blue").save(tmp_path / "img6.png")
    rows = [
        {"type": "human_test", "question": "Peak?", "answer": "4", "image": "images/in.png"},
        {"type": "human_test", "question": "Low?", "answer": "1", "image": "../img6.png"},
    ]
    write_jsonl(folder / "test.jsonl", rows)
    out, rep = tmp_path / "s" / "samples.jsonl", tmp_path / "s" / "report.json"
    with pytest.raises(ValueError, match=r"row 1 \(row '1'\): image path '\.\./img6\.png' lies"):
        build_samples("chartqa", spec("chartqa", folder), out, rep)
    report = build_samples("chartqa", spec("chartqa", folder, on_bad_row="skip"), out, rep)
    assert report["samples_written"] == 1
    assert report["skipped_by_reason"] == {"image path … lies outside the dataset folder …": 1}


def test_files_a_condition_or_a_model_reads_are_inputs(tmp_path, monkeypatch):
    from vlmrobust.plan import RunPlan, data, inference

    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "textual.txt").write_text("Write {num_distractors} sentences.")
    (tmp_path / "ckpt").mkdir()
    for name in ("config.json", "model.safetensors"):
        (tmp_path / "ckpt" / name).write_text("x")
    config = _config()
    config["conditions"]["idis-textual"]["prompt_file"] = "prompts/textual.txt"
    registry = load_yaml(REPO / "config/models.yaml")
    registry["models"]["demo-extra"].update(demo_seed=None, local_path="ckpt")
    config["model_registry"] = str(tmp_path / "models.yaml")
    (tmp_path / "models.yaml").write_text(json.dumps(registry))
    plan = RunPlan.from_config(config)
    assert "prompts/textual.txt" in data.condition_inputs(plan, "idis-textual")
    assert inference.model_files(plan, "demo-extra") == [
        "ckpt/config.json",
        "ckpt/model.safetensors",
    ]
    assert inference.model_files(plan, "demo-base") == [
        "results/models/demo-base/vlmrobust_demo.json"
    ]


def test_a_prompt_text_changed_without_a_version_bump_gets_a_new_version(monkeypatch):
    from vlmrobust.core import prompts

    before = prompts.PROMPTS["yesno"].version
    assert before.startswith("1+") and len(before) == len("1+") + 8
    monkeypatch.setattr(prompts, "YESNO_INSTRUCTION", "Answer with yes or no.")
    changed = prompts.PromptBuilder("yesno", "1", "yes/no question", prompts._yesno)
    assert changed.version.startswith("1+") and changed.version != before
    monkeypatch.undo()
    again = prompts.PromptBuilder("yesno", "1", "yes/no question", prompts._yesno)
    assert again.version == before


def test_registry_options_unknown_to_the_backend_are_errors():
    registry = load_yaml(REPO / "config/models.yaml")
    registry["models"]["demo-base"]["options"]["batchsize"] = 4
    with pytest.raises(
        ConfigError, match=r"models\.demo-base\.options': 'batchsize' is not one of"
    ):
        validate_registry(registry)
    registry = load_yaml(REPO / "config/models.yaml")
    registry["models"]["gpt-4o"]["options"] = {"batch_size": 4}  # an hf option on an API model
    with pytest.raises(ConfigError, match=r"models\.gpt-4o\.options': 'batch_size' is not one"):
        validate_registry(registry)


def test_a_checkpoint_replaced_at_the_same_path_gets_a_new_revision(tmp_path):
    """Per-row resume keeps a row only when its ``model_revision`` is the backend's: for a
    local checkpoint that is a content hash of its weights, so new weights at the same
    ``local_path`` never reuse an old answer."""
    from vlmrobust.clients.vlm.checkpoint import local_revision

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights one")
    first = local_revision(ckpt)
    assert first.startswith("sha256:") and local_revision(ckpt) == first
    (ckpt / "model.safetensors").write_bytes(b"weights two")
    assert local_revision(ckpt) != first

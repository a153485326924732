"""The run forecast (``vlmrobust forecast``, docs/forecast.md) on a small configuration
whose requests, tokens, GPU-hours, wall time and disk are computed here by hand; the
pilot override; measured counts once the run's files exist; and a model the tables do
not know, which is an ``unknown`` naming the key to add, never a zero."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from PIL import Image

from vlmrobust.cli import main
from vlmrobust.core.paths import real_data
from vlmrobust.core.prompts import SHORT_INSTRUCTION
from vlmrobust.forecast import build_forecast, read_pilot, tables
from vlmrobust.forecast.cost import Engine, schedule
from vlmrobust.forecast.render import render_text, to_json
from vlmrobust.forecast.tokens import (
    CHARS_PER_TOKEN,
    FILLER,
    IMAGE_MARKER_TOKENS,
    TEMPLATE_TEXT,
    TEMPLATE_TOKENS,
)
from vlmrobust.plan import RunPlan

from .conftest import REPO

REGISTRY = {
    "models": {
        "vlm": {
            "name": "VLM",
            "hf_repo": "org/vlm",
            "backend": "hf",
            "family": "qwen2.5-vl",
            "role": "reasoning",
            "options": {"min_pixels": 200704, "max_pixels": 1003520},
        },
        "big": {
            "name": "Big",
            "hf_repo": "org/big",
            "backend": "hf",
            "family": "qwen2.5-vl",
            "role": "base",
            "resources": {"gpu": 2},
        },
        "api": {
            "name": "API",
            "api_model": "gpt-4o",
            "backend": "openai",
            "family": "openai",
            "role": "base",
        },
        "odd": {
            "name": "Odd",
            "hf_repo": "org/odd",
            "backend": "hf",
            "family": "mystery",
            "role": "base",
        },
    }
}

#: the forecast tables of the test: round numbers to compute with
TABLES = {
    "generation": {
        "rules": [
            {"role": "direct", "tokens": 10, "source": "test direct"},
            {"role": "reasoning", "tokens": 200, "source": "test reasoning"},
            {"role": "reasoning", "benchmark": "mmstar", "tokens": 5000, "source": "test long"},
        ]
    },
    "throughput": {
        "gpu": "T1",
        "gpu_types": {
            "T1": {"prefill": 1.0, "decode": 1.0, "source": "t"},
            "T2": {"prefill": 2.0, "decode": 4.0, "source": "t"},
        },
        "classes": {
            "small": {
                "prompt_tok_s": 1000,
                "gen_tok_s": 100,
                "vision_factor": 2.0,
                "startup_s": 60,
                "sources": {"gen_tok_s": "test"},
            },
        },
        "models": {"vlm": "small", "big": "small"},
        "families": {},
    },
    "images": {
        "default": {"size": [100, 100], "images": 1, "question_chars": 0, "source": "t"},
        "benchmarks": {
            "chartqa": {"size": [800, 600], "images": 1, "question_chars": 40, "source": "t"},
            "mmstar": {"size": [640, 480], "images": 1, "question_chars": 40, "source": "t"},
        },
    },
    "disk": {
        "perturbations": {
            "corruption": {"bytes_per_pixel": {"png": 2.0, "webp": 1.5}, "source": "test"}
        }
    },
}


def _config():
    return {
        "model_registry": "registry.yaml",
        "models": ["vlm", "big", "api"],
        "decoding": {"max_new_tokens": 1000},
        "conditions": {
            "clean": {"perturbation": "none"},
            "corrupt": {"perturbation": "corruption"},
        },
        "datasets": {
            "chartqa": {
                "adapter": "chartqa",
                "expected_size": 10,
                "conditions": ["clean", "corrupt"],
            },
            "mmstar": {
                "adapter": "mmstar",
                "expected_size": 4,
                "n": 5,
                "temperature": 0.7,
                "image_size": 448,
                "models": ["vlm"],
                "conditions": ["clean"],
            },
        },
    }


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """A working folder with the test registry and the test's forecast tables."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(REGISTRY))
    monkeypatch.setattr(tables, "load_table", lambda name: TABLES[name])
    return tmp_path


def _plan(config=None):
    return RunPlan.from_config(copy.deepcopy(config or _config()))


def _cell(result, model, dataset, condition):
    (cell,) = [
        c for c in result.cells if (c.model, c.dataset, c.condition) == (model, dataset, condition)
    ]
    return cell


def _text_tokens(question_chars: int) -> float:
    """The short-answer prompt of a stand-in question: the question, a newline, the
    instruction; then the chat template's tokens and one image's markers."""
    chars = question_chars + 1 + len(SHORT_INSTRUCTION)
    return chars / CHARS_PER_TOKEN + TEMPLATE_TOKENS + IMAGE_MARKER_TOKENS


def test_requests_tokens_and_gpu_hours_by_hand(run_dir):
    result = build_forecast(_plan(), gpus=2)
    # chartqa: 10 samples (expected_size), one variant each, one draw
    clean = _cell(result, "vlm", "chartqa", "clean")
    assert clean.requests == 10 and clean.requests_how.startswith("10 samples (config")
    # 800 x 600 under [200704, 1003520]: sides to 812 x 588 -> 29 x 21 = 609 tokens
    assert clean.vision_tokens == 609
    assert clean.text_tokens == pytest.approx(_text_tokens(40))
    assert clean.generated == 200 and clean.generated_how == "assumed"
    # engine time: 10 x ((text + 2 x 609) / 1000 + 200 / 100) on one GPU
    per_request = (clean.text_tokens + 2 * 609) / 1000 + 200 / 100
    assert clean.engine_s == pytest.approx(10 * per_request)
    assert clean.gpu_hours == pytest.approx(10 * per_request / 3600)
    # mmstar: 4 samples x 5 draws, every image shown at 448 x 448 = 16 x 16 tokens;
    # the 5,000-token rule is capped at max_new_tokens 1,000
    draws = _cell(result, "vlm", "mmstar", "clean")
    assert draws.requests == 20 and "x 5 draws" in draws.requests_how
    assert draws.vision_tokens == 256
    assert draws.generated == 1000 and "capped at max_new_tokens 1000" in draws.generated_source
    # a direct model on 2 GPUs: twice the engine time in GPU-hours
    big = _cell(result, "big", "chartqa", "corrupt")
    assert big.generated == 10
    assert big.gpu_hours == pytest.approx(2 * big.engine_s / 3600)
    # the API model: tokens, no engine time; GPT-4o's tiles for 800 x 600: 85 + 4 x 170
    api = _cell(result, "api", "chartqa", "clean")
    assert api.kind == "api" and api.engine_s is None and api.vision_tokens == 765
    assert {tuple(c.studies) for c in result.cells if c.dataset == "chartqa"} == {("corruption",)}
    assert draws.studies == []  # mmstar has no perturbed condition: no study reads it


def test_wall_time_is_the_engines_list_scheduled(run_dir):
    result = build_forecast(_plan(), gpus=2)
    by_model = {}
    for e in result.engines:
        by_model.setdefault(e.model, []).append(e)
    vlm_jobs = [c.engine_s for c in result.cells if c.model == "vlm"]
    big_jobs = [c.engine_s for c in result.cells if c.model == "big"]
    # one engine per model (service.default_engines 1), its start-up plus its jobs
    assert [e.seconds for e in by_model["vlm"]] == [pytest.approx(60 + sum(vlm_jobs))]
    assert [e.gpus for e in by_model["big"]] == [2]
    # 2 GPUs: the 2-GPU engine cannot run beside the other; one after the other
    assert result.makespan_s == pytest.approx(60 + sum(vlm_jobs) + 60 + sum(big_jobs))
    assert build_forecast(_plan(), gpus=4).makespan_s == pytest.approx(
        max(60 + sum(vlm_jobs), 60 + sum(big_jobs))
    )
    with pytest.raises(ValueError, match="--gpus 1: an engine of big holds 2 GPUs"):
        build_forecast(_plan(), gpus=1)


def test_schedule_waits_for_phase_0_and_for_free_gpus():
    engines = [
        Engine("a", 0, 0, 1, 10.0),
        Engine("a", 1, 0, 1, 5.0),
        Engine("b", 0, 0, 1, 8.0),
        Engine("c", 0, 0, 2, 3.0),
    ]
    # a0 and b start at 0; a1 waits for a0 (10), c for both GPUs: a1 takes one at 10,
    # so c starts when a1 ends (15)
    assert schedule(engines, 2) == pytest.approx(18.0)
    starts = {(e.model, e.phase): e.start for e in engines}
    assert starts == {("a", 0): 0.0, ("b", 0): 0.0, ("a", 1): 10.0, ("c", 0): 15.0}


def test_gpu_type_scales_the_rates(run_dir):
    fast = build_forecast(_plan(), gpus=4, gpu_type="T2")
    cell = _cell(fast, "vlm", "chartqa", "clean")
    per_request = (cell.text_tokens + 2 * 609) / 2000 + 200 / 400
    assert cell.engine_s == pytest.approx(10 * per_request)
    with pytest.raises(tables.MissingEntry, match="gpu_types has no 'T9'"):
        build_forecast(_plan(), gpu_type="T9")


def _output_row(model, dataset, condition, prompt, key, tokens, error=None):
    return {
        "model": model,
        "dataset": dataset,
        "condition": condition,
        "prompt": prompt,
        "key": key,
        "completion_tokens": tokens,
        "error": error,
    }


def test_a_pilot_run_replaces_the_assumed_generated_tokens(run_dir):
    folder = run_dir / "pilot" / "vlm" / "chartqa" / "clean"
    folder.mkdir(parents=True)
    # a row names the builder it used (`short`); the file, the prompt setting (`default`)
    rows = [
        _output_row("vlm", "chartqa", "clean", "short", "a#0", 30),
        _output_row("vlm", "chartqa", "clean", "short", "b#0", 50),
        _output_row("vlm", "chartqa", "clean", "short", "c#0", 0, error="timeout"),
    ]
    (folder / "default.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the same rows again in a shard: counted once
    (folder / "default").mkdir()
    (folder / "default" / "shard0of1.jsonl").write_text(json.dumps(rows[0]) + "\n")
    pilot = read_pilot(run_dir / "pilot")
    result = build_forecast(_plan(), pilot=pilot)
    clean = _cell(result, "vlm", "chartqa", "clean")
    assert clean.generated == 40 and clean.generated_how == "measured"
    assert "2 rows (model, dataset, condition, prompt)" in clean.generated_source
    # no pilot rows for corrupt: the same prompt's mean on the dataset stands in for it
    corrupt = _cell(result, "vlm", "chartqa", "corrupt")
    assert corrupt.generated == 40 and "(model, dataset, prompt)" in corrupt.generated_source
    # a model the pilot did not run keeps the table's number
    assert _cell(result, "big", "chartqa", "clean").generated_how == "assumed"
    (run_dir / "empty").mkdir()
    with pytest.raises(ValueError, match="no answered output rows"):
        read_pilot(run_dir / "empty")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        read_pilot(run_dir / "missing")


def test_the_variants_disk(run_dir):
    result = build_forecast(_plan())
    (disk,) = result.disk  # clean (none) writes no image
    assert (disk.dataset, disk.condition, disk.perturbation) == ("chartqa", "corrupt", "corruption")
    assert disk.images == 10 and disk.bytes == pytest.approx(10 * 800 * 600 * 2.0)
    # once the condition's images are there, their bytes are measured
    folder = run_dir / "results" / "variants" / "chartqa" / "corrupt"
    (folder / "images").mkdir(parents=True)
    variants = []
    for i in range(3):
        path = folder / "images" / f"s{i}.png"
        Image.new("RGB", (64, 32), "white").save(path)
        variants.append(
            {
                "variant_id": f"s{i}",
                "sample_id": f"s{i}",
                "dataset": "chartqa",
                "condition": "corrupt",
                "perturbation": "corruption",
                "images": [str(path.relative_to(run_dir))],
                "sha256": ["x"],
                "question": "q",
            }
        )
    (folder / "manifest.jsonl").write_text("".join(json.dumps(v) + "\n" for v in variants))
    measured = build_forecast(_plan())
    (disk,) = measured.disk
    assert disk.images == 3 and disk.how == "measured: the images folder"
    assert disk.bytes == sum(p.stat().st_size for p in (folder / "images").iterdir())
    corrupt = _cell(measured, "vlm", "chartqa", "corrupt")
    assert corrupt.requests == 3 and corrupt.requests_how.endswith("manifest.jsonl")
    # 64 x 32 is under min_pixels: scaled by sqrt(200704 / 2048) = 9.9, the sides
    # rounded up to multiples of 28: 644 x 336 -> 23 x 12 = 276 tokens
    assert corrupt.vision_tokens == 276


def test_the_variants_disk_follows_variants_format(run_dir, capsys):
    """The same configuration under ``variants.format`` png and webp: the disk of each at
    its own bytes per pixel of the table (2.0 and 1.5: 10 images x 800 x 600 px), so in
    their ratio, and the format named in the printed forecast and the JSON."""
    by_format = {}
    for fmt in ("png", "webp"):
        config = _config() | {"variants": {"format": fmt}}
        (run_dir / f"{fmt}.yaml").write_text(yaml.safe_dump(config))
        assert main(["forecast", f"{fmt}.yaml"]) == 0
        by_format[fmt] = capsys.readouterr().out
        (disk,) = build_forecast(_plan(config)).disk
        assert disk.format == fmt and f"B/px as {fmt} (test)" in disk.how
        assert main(["forecast", f"{fmt}.yaml", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["disk_format"] == fmt and data["disk_bytes"] == disk.bytes
    png = build_forecast(_plan(_config() | {"variants": {"format": "png"}})).disk[0].bytes
    webp = build_forecast(_plan(_config() | {"variants": {"format": "webp"}})).disk[0].bytes
    assert png == pytest.approx(9_600_000) and webp == pytest.approx(7_200_000)
    assert webp / png == pytest.approx(1.5 / 2.0)
    assert "stored as PNG (variants.format: png)" in by_format["png"]
    assert "stored as lossless WebP" in by_format["webp"]
    assert "(variants.format: webp)" in by_format["webp"]
    # the default is PNG (the schema's default of variants.format)
    assert build_forecast(_plan()).disk[0].bytes == pytest.approx(png)


def test_a_format_the_disk_table_lacks_is_unknown_naming_the_key(run_dir, monkeypatch):
    png_only = copy.deepcopy(TABLES)
    del png_only["disk"]["perturbations"]["corruption"]["bytes_per_pixel"]["webp"]
    monkeypatch.setattr(tables, "load_table", lambda name: png_only[name])
    (disk,) = build_forecast(_plan(_config() | {"variants": {"format": "webp"}})).disk
    assert disk.bytes is None
    assert "perturbations.corruption.bytes_per_pixel has no 'webp'" in disk.how


def test_the_disk_table_has_every_format_for_every_entry():
    """forecast/disk.yaml as shipped: a number per ``variants.format`` in every entry
    (lossless WebP never above PNG on the measured images), and a source."""
    from vlmrobust.perturb.storage import FORMATS

    entries = []
    for name, entry in tables.load_table("disk")["perturbations"].items():
        entries.append((name, entry))
        entries += [(f"{name}/{b}", e) for b, e in (entry.get("benchmarks") or {}).items()]
    for name, entry in entries:
        rates = entry["bytes_per_pixel"]
        assert set(rates) == set(FORMATS), name
        assert 0 < rates["webp"] <= rates["png"], name
        assert entry["source"], name
    assert tables.bytes_per_pixel("corruption", "mathvision", "webp")[0] == 0.44


def test_measured_samples_give_counts_sizes_and_prompts(run_dir):
    folder = run_dir / "results" / "samples" / "chartqa"
    (folder / "images").mkdir(parents=True)
    rows = []
    for i in range(4):
        path = folder / "images" / f"c{i}.png"
        Image.new("RGB", (1120, 840), "white").save(path)
        rows.append(
            {
                "sample_id": f"chartqa_{i}",
                "dataset": "chartqa",
                "images": [str(path.relative_to(run_dir))],
                "question": "q" * 8,
                "answer": "1",
                "answer_type": "number",
            }
        )
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = build_forecast(_plan())
    clean = _cell(result, "vlm", "chartqa", "clean")
    assert (
        clean.requests == 4
        and "(measured: results/samples/chartqa/samples.jsonl)" in clean.requests_how
    )
    assert clean.sizes_how.startswith("measured: headers")
    # 1120 x 840 is 40 x 30 patches of 28 px, within the limits: 1,200 tokens
    assert clean.vision_tokens == 1200
    assert clean.text_tokens == pytest.approx(_text_tokens(8))
    assert clean.text_how == "measured: built for the samples; 4 chars per token"


def test_a_model_the_tables_do_not_know_is_unknown_never_zero(run_dir):
    config = _config()
    config["models"] = ["vlm", "odd"]
    result = build_forecast(_plan(config))
    odd = _cell(result, "odd", "chartqa", "clean")
    assert odd.engine_s is None and odd.gpu_hours is None
    assert any("PROCESSORS has no rule for family 'mystery'" in u for u in odd.unknown)
    assert any("throughput.yaml: model 'odd'" in u and "models:" in u for u in odd.unknown)
    assert result.left_out == ["odd"]
    text = render_text(result)
    assert "| odd | corruption | 20 | unknown |" in text
    assert "Unknown (no silent zero" in text
    totals = to_json(result)["totals"]
    assert totals["gpu_hours"] is None and totals["prompt_tokens"] is None


def test_a_missing_generation_rule_names_the_file(run_dir, monkeypatch):
    only_direct = dict(TABLES, generation={"rules": [TABLES["generation"]["rules"][0]]})
    monkeypatch.setattr(tables, "load_table", lambda name: only_direct[name])
    result = build_forecast(_plan())
    vlm = _cell(result, "vlm", "chartqa", "clean")
    assert vlm.generated is None and vlm.engine_s is None
    assert any("generation.yaml: no rule matches" in u for u in vlm.unknown)


def test_a_dataset_without_any_count_is_an_error_naming_the_key(run_dir):
    config = _config()
    del config["datasets"]["chartqa"]["expected_size"]
    config["datasets"]["chartqa"]["adapter"] = "visargs"  # no `rows` in its record
    config["datasets"]["chartqa"]["conditions"] = ["clean"]
    with pytest.raises(ValueError, match="set datasets.chartqa.expected_size"):
        build_forecast(_plan(config))


def test_the_command_prints_tables_and_json(run_dir, capsys):
    (run_dir / "run.yaml").write_text(yaml.safe_dump(_config()))
    assert main(["forecast", "run.yaml", "--gpus", "4", "--json-out", "f.json"]) == 0
    text = capsys.readouterr().out
    assert "| vlm | corruption | 20 |" in text and "Wall time on 4 GPUs" in text
    assert main(["forecast", "run.yaml", "--json", "--engines", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["requests"] == 10 * 2 * 3 + 20
    assert json.loads((run_dir / "f.json").read_text())["gpus"] == 4
    assert main(["forecast", "run.yaml", "--gpus", "0"]) == 2


MATHV = real_data(REPO) / "mathvision"


#: the explorer's constants of the test's disk table: round numbers to compute with
EXPLORER = {
    "thumbnail": {"bytes": 1000, "clean": 800, "source": "t thumb",
                  "benchmarks": {"mmstar": {"bytes": 3000, "source": "t photo"}}},
    "variant": {"bytes": 500, "source": "t variant"},
    "row": {"bytes": 100, "source": "t row"},
    "text": {"bytes": 50, "source": "t text"},
    "token": {"bytes": 5, "chars": 4, "source": "t token"},
    "reasoning_token": {"bytes": 8, "source": "t reasoning"},
    "judge": {"bytes": 300, "source": "t judge"},
    "clip_chars": 1000,
}  # fmt: skip


def test_the_explorer_disk_by_hand(run_dir, monkeypatch, capsys):
    """The explorer's files (explorer.build true, the default): per variant set its
    thumbnails (one per variant image; a clean set at the clean rate) and variant
    entries; per cell its rows (requests) and one text entry per row, at the cell's
    generated tokens, clipped at 1,000 chars / 4 = 250 tokens, a reasoning model's at its
    own bytes per token. The variants' disk is as without the explorer; with
    ``explorer.build: false`` there are no explorer lines."""
    with_explorer = copy.deepcopy(TABLES)
    with_explorer["disk"]["explorer"] = EXPLORER
    monkeypatch.setattr(tables, "load_table", lambda name: with_explorer[name])
    result = build_forecast(_plan())
    found = result.explorer
    # variant sets: chartqa clean and corrupt (10 variants, one image each), mmstar clean
    # (4, at the mmstar thumbnail rate, which has no clean number of its own)
    assert [(s["dataset"], s["condition"], s["thumbnails"]) for s in found.sets] == [
        ("chartqa", "clean", 10), ("chartqa", "corrupt", 10), ("mmstar", "clean", 4)
    ]  # fmt: skip
    thumbs = 10 * 800 + 10 * 1000 + 4 * 3000
    parts = 24 * 500
    # cells: vlm, big, api on chartqa clean + corrupt (10 rows each), vlm on mmstar clean
    # (4 samples x 5 draws = 20 rows): 6 x 10 + 20 = 80 rows
    rows = 80 * 100
    # texts: vlm (reasoning, 8 B a token) chartqa 200 tokens, mmstar 5,000 capped at
    # max_new_tokens 1,000 and clipped to 250; big and api (base, 5 B a token) 10
    texts = (20 * (50 + 200 * 8) + 20 * (50 + 250 * 8) + 20 * (50 + 10 * 5)
             + 20 * (50 + 10 * 5))  # fmt: skip
    assert [line.bytes for line in found.lines] == pytest.approx([thumbs, parts, rows, texts])
    assert found.bytes == pytest.approx(thumbs + parts + rows + texts) == 128_000
    mmstar = [c for c in found.cells if c["dataset"] == "mmstar"][0]
    assert mmstar["rows"] == 20 and mmstar["generated"] == 1000 and mmstar["shown_tokens"] == 250
    assert mmstar["texts_bytes"] == 20 * (50 + 250 * 8)
    # the variants' disk is unchanged by the explorer
    (disk,) = result.disk
    assert disk.bytes == pytest.approx(10 * 800 * 600 * 2.0)
    text = render_text(result)
    assert "| explorer: thumbnails | 24 thumbnails | | 24 | | 0.00 |" in text
    assert (
        "10 x 800 B (clean: t thumb); 10 x 1,000 B (t thumb); 4 x 3,000 B (clean: t photo)" in text
    )
    assert "| explorer: cell rows | 80 rows |" in text and "at most 250" in text
    assert "| **all with the explorer** | | | | | 0.01 | |" in text
    data = to_json(result)
    assert data["explorer_disk"]["bytes"] == pytest.approx(128_000)
    assert data["disk_bytes"] == pytest.approx(10 * 800 * 600 * 2.0)
    assert [e["what"] for e in data["explorer_disk"]["lines"]] == [
        "explorer: thumbnails", "explorer: variant parts", "explorer: cell rows",
        "explorer: cell texts",
    ]  # fmt: skip
    # explorer.build false: no explorer lines, the same variants' disk
    off = build_forecast(_plan(_config() | {"explorer": {"build": False}}))
    assert off.explorer is None and off.disk[0].bytes == disk.bytes
    assert "explorer:" not in render_text(off) and to_json(off)["explorer_disk"] is None


def test_an_explorer_constant_the_disk_table_lacks_is_unknown_naming_the_key(run_dir):
    """The test's tables have no ``explorer:`` section: the lines are unknown and say
    which key to add; the variants' disk is still known."""
    result = build_forecast(_plan())
    assert all(line.bytes is None for line in result.explorer.lines)
    assert "explorer has no 'thumbnail'" in result.explorer.lines[0].how
    assert result.disk[0].bytes == pytest.approx(10 * 800 * 600 * 2.0)
    assert "| **all with the explorer** | | | | | unknown | |" in render_text(result)


def test_the_disk_table_has_the_explorer_constants():
    """forecast/disk.yaml as shipped: every explorer constant, positive, with a source."""
    for name in ("thumbnail", "variant", "row", "text", "token", "reasoning_token", "judge"):
        value, source = tables.explorer_bytes(name)
        assert value > 0 and source, name
    assert tables.explorer_clip_tokens()[0] > 0


@pytest.mark.skipif(
    not (MATHV / "data" / "testmini.jsonl").is_file(),
    reason=f"the released MATH-V files are not at {MATHV} (docs/real-data.md)",
)
def test_a_local_copy_of_the_rows_is_counted_before_the_samples_exist(run_dir):
    """MATH-V testmini read in place (never copied): its 304 rows through the adapter,
    the image sizes from the folder's headers, before any samples file."""
    config = _config()
    config["datasets"] = {
        "mathvision": {"adapter": "mathvision", "source": "local", "path": str(MATHV),
                       "split": "testmini", "conditions": ["clean"], "models": ["vlm"]}
    }  # fmt: skip
    result = build_forecast(_plan(config))
    (cell,) = result.cells
    assert cell.requests == 304
    assert "the adapter's rows in" in cell.requests_how and "(measured:" in cell.requests_how
    assert cell.sizes_how.startswith(f"measured: headers of the images under {MATHV}")
    # the registry limits keep every image within 256-1,280 tokens (docs/large-images.md)
    assert 256 <= cell.vision_tokens <= 1280


def test_a_local_checkpoint_s_tokenizer_counts_the_text(run_dir):
    """A model whose local checkpoint folder has a tokenizer.json gets its text counted
    by that tokenizer (one token per whitespace-separated word here), not chars / 4."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = run_dir / "ckpt"
    folder.mkdir()
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    registry = copy.deepcopy(REGISTRY)
    registry["models"]["vlm"] = dict(registry["models"]["vlm"], local_path="ckpt")
    del registry["models"]["vlm"]["hf_repo"]
    (run_dir / "registry.yaml").write_text(yaml.safe_dump(registry))
    result = build_forecast(_plan())
    clean = _cell(result, "vlm", "chartqa", "clean")
    # the stand-in question (40 characters of filler words) and the instruction
    words = len(FILLER[:40].split()) + len(SHORT_INSTRUCTION.split())
    template = len(TEMPLATE_TEXT.split())  # the chat template, counted by it too
    assert clean.text_tokens == words + template + IMAGE_MARKER_TOKENS
    assert clean.text_how.endswith(f"vlm's tokenizer (template {template})")


def test_crm_second_stage_carries_the_first_stage_answer_and_runs_in_phase_1(run_dir):
    config = _config()
    config["models"] = ["vlm"]
    config["conditions"]["mask-specific"] = {"perturbation": "mask", "region": "specific"}
    config["datasets"] = {
        "visargs": {"adapter": "visargs", "expected_size": 3, "prompts": ["crm-cot", "crm-answer"],
                    "conditions": ["clean", "mask-specific"]}
    }  # fmt: skip
    result = build_forecast(_plan(config), gpus=2)
    assert len(result.cells) == 4 and {c.requests for c in result.cells} == {3}
    # every cell, the clean ones too, feeds the masking study (through the comparison)
    assert {tuple(c.studies) for c in result.cells} == {("masking",)}
    cot = _cell_p(result, "clean", "crm-cot")
    answer = _cell_p(result, "clean", "crm-answer")
    assert cot.context_tokens == 0 and answer.context_tokens == cot.generated == 200
    assert answer.prompt_tokens == answer.text_tokens + answer.vision_tokens + 200
    # phase 1 (the answers) starts when phase 0 (the chains) has ended
    (p0,) = [e for e in result.engines if e.phase == 0]
    (p1,) = [e for e in result.engines if e.phase == 1]
    assert p1.start == pytest.approx(p0.end)
    assert result.makespan_s == pytest.approx(p0.seconds + p1.seconds)


def _cell_p(result, condition, prompt):
    (cell,) = [c for c in result.cells if (c.condition, c.prompt) == (condition, prompt)]
    return cell


def test_a_checkpoint_the_workflow_builds_takes_the_demo_rates():
    """A stand-in keeps a paper model's id and family but is a demo checkpoint
    (demo_seed): it is forecast at the demo-cpu class's rates, not the 7B GPU class's."""
    paper = tables.throughput_class("qwen2.5-vl-7b", {"family": "qwen2.5-vl"})
    standin = tables.throughput_class("qwen2.5-vl-7b", {"family": "qwen2.5-vl", "demo_seed": 101})
    assert (paper.name, paper.gen_tok_s, paper.startup_s) == ("vlm-7-9b", 6500.0, 120.0)
    assert (standin.name, standin.gen_tok_s, standin.startup_s, standin.gpu) == (
        "demo-cpu",
        1073.0,
        5.0,
        "cpu",
    )


# --- every LLM call of the run: judges, extractors, money, LLM engines -------------------

from vlmrobust.forecast import calls as calls_module  # noqa: E402
from vlmrobust.forecast import money as money_module  # noqa: E402
from vlmrobust.forecast.money import totals  # noqa: E402
from vlmrobust.judges.attributes import math_prompt, perception_prompt  # noqa: E402
from vlmrobust.judges.mathverse import extract_prompt, judge_prompt  # noqa: E402

LLM_REGISTRY = {
    "models": {
        "vlm": REGISTRY["models"]["vlm"],
        "api": dict(
            REGISTRY["models"]["api"],
            prices={"input": 2.0, "cached_input": 0.5, "output": 8.0, "batch_input": 1.0,
                    "batch_output": 4.0, "source": "https://example.test/api", "date": "2026-12-06"},
        ),  # fmt: skip
        "judge-llm": {"kind": "llm", "name": "J", "hf_repo": "org/j", "backend": "vllm",
                      "family": "tllm", "resources": {"gpu": 1}},  # fmt: skip
        "ext-api": {"kind": "llm", "name": "E", "api_model": "e-chat", "backend": "openai",
                    "base_url": "https://e.test", "family": "efam",
                    "prices": {"input": 1.0, "cached_input": 0.1, "output": 2.0,
                               "source": "https://example.test/e", "date": "2026-12-06"}},
    }
}  # fmt: skip


def _entry(n: float) -> dict:
    return {"tokens": n, "source": "test"}


#: the LLM calls' stated numbers of the test: round numbers to compute with
CALLS = {
    "mathverse": {
        "response_tokens": _entry(100),
        "judge_share": {"value": 0.5, "source": "test"},
        "extract_answer_tokens": _entry(10),
        "judge_answer_tokens": _entry(4),
    },
    "attributes": {
        "sentence_tokens": _entry(50),
        "answer_tokens": {"perception": _entry(30), "math": _entry(8), "waterbirds": _entry(9)},
    },
    "reasoning": {"tllm": _entry(100)},
    "caching": {
        "efam": {"min_tokens": 0, "source": "test"},
        "openai": {"min_tokens": 1024, "source": "test"},
    },  # fmt: skip
}


def _llm_config(**attributes):
    return {
        "model_registry": "registry.yaml",
        "models": ["vlm", "api"],
        "decoding": {"max_new_tokens": 1000},
        "conditions": {"clean": {"perturbation": "none"}},
        "datasets": {
            "mathverse": {
                "adapter": "mathverse",
                "expected_size": 4,
                "conditions": ["clean"],
                "models": ["vlm"],
                "prompts": ["idis-math"],
            },
            "imagenet9": {
                "adapter": "imagenet9",
                "source": "local",
                "path": "nowhere",
                "expected_size": 3,
                "conditions": ["clean"],
                "models": ["vlm", "api"],
                "prompts": ["idis-perception"],
            },
        },  # fmt: skip
        "judge": {
            "mathverse": {"llm": "judge-llm"},
            "attributes": {
                "scope": "all",
                "extractors": {"main": {"llm": "ext-api"}},
                **attributes,
            },  # fmt: skip
        },
    }


@pytest.fixture
def llm_dir(run_dir, monkeypatch):
    """The test's registry with a local judge LLM (class `small`) and an API extractor,
    and the test's LLM-call numbers."""
    (run_dir / "registry.yaml").write_text(yaml.safe_dump(LLM_REGISTRY))
    found = copy.deepcopy(TABLES)
    found["throughput"]["models"]["judge-llm"] = "small"
    monkeypatch.setattr(tables, "load_table", lambda name: found[name])
    for module in (calls_module, money_module):
        monkeypatch.setattr(module, "load_table", lambda name: CALLS)
    return run_dir


def _before(text: str) -> float:
    """Tokens of a prompt before its first varying part, the chat template's included."""
    return len(text.split("\x00")[0]) / CHARS_PER_TOKEN + TEMPLATE_TOKENS


def _whole(text: str) -> float:
    return len(text.replace("\x00", "")) / CHARS_PER_TOKEN + TEMPLATE_TOKENS


def _call(result, step, model, dataset):
    (found,) = [
        c for c in result.calls if (c.step, c.reads[0], c.reads[1]) == (step, model, dataset)
    ]
    return found


def test_the_llm_calls_their_gpu_hours_and_money_by_hand(llm_dir):
    result = build_forecast(_plan(_llm_config()), gpus=2)
    # the MathVerse judge (local): 4 rows x (1 extraction + 0.5 judgement); the answer
    # text 100 tokens (under the VLM's 200); every answer after 100 reasoning tokens
    judge = _call(result, "mathverse", "vlm", "mathverse")
    assert (judge.model, judge.kind, judge.role) == ("judge-llm", "local", "judge")
    assert judge.requests == 6
    p_extract = _whole(extract_prompt("\x00")) + 100
    p_judge = _whole(judge_prompt("", "a", "a" * 20))  # no question: images.yaml's 0 chars
    assert judge.prompt == pytest.approx((p_extract + 0.5 * p_judge) / 1.5)
    cached = (_before(extract_prompt("\x00")) + 0.5 * _before(judge_prompt("\x00", "", ""))) / 1.5
    assert judge.cached == pytest.approx(cached)
    assert judge.generated == pytest.approx((10 + 100 + 0.5 * (4 + 100)) / 1.5)  # 108
    assert {"judge share", "answer text", "reasoning"} <= set(judge.assumed)
    # its engine time at class `small` (1,000 prompt, 100 generated tokens/s): the
    # repeated prefix is not prefilled again
    seconds = 6 * ((judge.prompt - cached) / 1000 + 108 / 100)
    assert judge.engine_s == pytest.approx(seconds) and judge.gpu_hours == pytest.approx(
        seconds / 3600
    )
    # the API extractor: one call per perception trace (the VLM's 200 tokens; the API
    # model's 10), one per sentence of a math trace (200 / 50 = 4 sentences)
    per_trace = _call(result, "attributes", "vlm", "imagenet9")
    template = perception_prompt("\x00")
    assert (per_trace.model, per_trace.kind, per_trace.requests) == ("ext-api", "api", 3)
    assert per_trace.prompt == pytest.approx(_whole(template) + 200)
    assert per_trace.cached == pytest.approx(_before(template)) and per_trace.generated == 30
    short = _call(result, "attributes", "api", "imagenet9")
    assert short.prompt == pytest.approx(_whole(template) + 10)
    math = _call(result, "attributes", "vlm", "mathverse")
    m_template = math_prompt("\x00", "triangle", "circle; a table (an image of a data table)", "")
    assert math.requests == 4 * 4 and math.generated == 8 and "sentences" in math.assumed
    assert math.prompt == pytest.approx(_whole(m_template) + 50)
    assert math.cached == pytest.approx(_before(m_template) * 3 / 4)
    # money: the extractor's tokens x its prices (no batch API); the API VLM's at its own
    rows = {(u.model, u.role): u for u in result.usage}
    ext = rows[("ext-api", "extractor")]
    prompt = sum(c.prompt * c.requests for c in (per_trace, short, math))
    gen = sum(c.generated * c.requests for c in (per_trace, short, math))
    cached_tokens = sum(c.cached * c.requests for c in (per_trace, short, math))
    assert ext.requests == 3 + 3 + 16
    assert ext.usd == pytest.approx((prompt * 1.0 + gen * 2.0) / 1e6)
    assert ext.usd_batch is None
    assert ext.usd_cached == pytest.approx(ext.usd - cached_tokens * (1.0 - 0.1) / 1e6)
    api_cell = _cell(result, "api", "imagenet9", "clean")
    vlm_api = rows[("api", "VLM")]
    assert vlm_api.usd == pytest.approx(3 * (api_cell.prompt_tokens * 2.0 + 10 * 8.0) / 1e6)
    assert vlm_api.usd_batch == pytest.approx(3 * (api_cell.prompt_tokens * 1.0 + 10 * 4.0) / 1e6)
    # totals: GPU-hours of the VLM and the judge; USD of the API VLM and the extractor
    all_ = totals(result.usage)
    vlm_gpu = sum(c.gpu_hours for c in result.cells if c.model == "vlm")
    assert all_["gpu_hours"] == pytest.approx(vlm_gpu + seconds / 3600)
    assert all_["usd"] == pytest.approx(ext.usd + vlm_api.usd)
    assert all_["requests"] == 4 + 3 + 3 + 6 + 22
    # scope all, and the validation sample (the schema's 1,250) only samples the
    # alternative extractors, of which there is none: the scoping saves nothing
    assert result.savings["saved"]["requests"] == 0


def test_an_llm_engine_starts_after_the_vlms_it_reads(llm_dir):
    result = build_forecast(_plan(_llm_config()), gpus=2)
    (vlm,) = [e for e in result.engines if e.model == "vlm"]
    (judge,) = [e for e in result.engines if e.model == "judge-llm"]
    assert judge.after == ("vlm",) and judge.start == pytest.approx(vlm.end)
    assert judge.seconds == pytest.approx(
        60 + _call(result, "mathverse", "vlm", "mathverse").engine_s
    )
    assert result.makespan_s == pytest.approx(vlm.end + judge.seconds)
    text = render_text(result)
    assert "| judge-llm | 1 (after 1 VLMs) | 1 |" in text
    assert "| ext-api | api | extractor | attributes | 22 |" in text
    assert "https://example.test/e, read 2026-12-06" in text


def test_a_model_without_prices_is_unknown_money_naming_the_key(llm_dir):
    registry = copy.deepcopy(LLM_REGISTRY)
    del registry["models"]["ext-api"]["prices"]
    (llm_dir / "registry.yaml").write_text(yaml.safe_dump(registry))
    result = build_forecast(_plan(_llm_config()), gpus=2)
    ext = next(u for u in result.usage if u.model == "ext-api")
    assert ext.usd is None and ext.requests == 22
    assert any("add models.ext-api.prices" in u for u in ext.unknown)
    assert totals(result.usage)["usd"] is None  # never a silent zero
    text = render_text(result)
    assert "**USD all unknown**" in text and "add models.ext-api.prices" in text
    data = to_json(result)
    assert data["usage_totals"]["usd"] is None and data["prices"]["ext-api"] is None


def test_the_scoping_savings_are_the_unsampled_calls_minus_the_run_s(llm_dir):
    """A second extractor on a validation sample of 3 traces per file: against all
    traces (5 per file: the VLM's and the API model's perception outputs) it saves two
    calls per file."""
    config = _llm_config(validation_sample=3)
    config["datasets"]["imagenet9"]["expected_size"] = 5
    config["judge"]["attributes"]["extractors"]["alt"] = {"llm": "ext-api", "prompt": "alternative"}
    result = build_forecast(_plan(config), gpus=2)
    alt = [c for c in result.calls if c.where.endswith(".alt")]
    assert sorted(c.requests for c in alt) == [3, 3] and all("sample" in c.how for c in alt)
    saved = result.savings["saved"]
    assert saved["requests"] == 4 and saved["gpu_hours"] == pytest.approx(0)
    per_call = [c.prompt * 1.0 + c.generated * 2.0 for c in alt]
    assert saved["usd"] == pytest.approx(2 * sum(per_call) / 1e6)
    assert "validation_sample: 3" in result.savings["setting"]
    text = render_text(result)
    assert "(judge.attributes.scope: all, validation_sample: 3) saves 4 requests" in text

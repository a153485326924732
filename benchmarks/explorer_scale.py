"""The explorer at paper scale: one synthesised cell of 5,000 samples, built and opened.

    .venv/bin/python benchmarks/explorer_scale.py [--samples 5000] [--data DATA]
        [--dir DIR] [--thinking-tokens 1500] [--corrupted-images 300] [--repeats 3]
        [--no-browser] [--out explorer_scale.json]

Synthesises, in ``--dir`` (a temporary folder by default), what the explorer's jobs read
for one dataset answered by two models under the clean and one corrupted condition:

- the samples: MATH-V test questions (question, options, answer) and their images from
  the real-data folder (``--data``, else ``$VLMROBUST_REAL_DATA`` or ``data/real``:
  docs/real-data.md; the images linked, never copied), cycled to ``--samples``; where the
  folder is missing, PIL-drawn diagrams (shapes, labels) stand in;
- the variants: ``clean`` (the samples' own images) and ``corrupt`` (one seeded random
  corruption method and severity per variant, the package's ``corrupt_image``, stored as
  the variants stage's lossless WebP); ``--corrupted-images`` distinct images are
  corrupted (every method costs 0.01-1.8 s an image here) and cycled over the variants;
- two models' scored CSVs and outputs in both conditions: a base model whose answers are
  the released Qwen2.5-VL-7B-Instruct responses of the Distract-Bench slice (``tests/
  fixtures/distract-bench``; a stand-in text without it) and a reasoning model whose
  ``<think>`` traces are MM-Eureka-Qwen-7B's released responses joined to about
  ``--thinking-tokens`` tokens (their released token counts), raw text as such a model
  writes it (``<think>...</think>`` then the answer); the base model's corrupted cell also
  has a ``reference`` judge file (the slice's released verdicts, cycled), to measure the
  bytes a judge record adds.

Then it builds the explorer with the real jobs (``vlmrobust.jobs.explorer``: ``variants``
per set, ``cell`` per cell, ``index``), timing each, and reports per kind of file (index
and app, rows, text chunks, variants parts, thumbnails, summaries) the count, the total
bytes and the largest file; the bytes per row, per thumbnail, per variant entry, per text
entry and per generated token (the constants of ``forecast/disk.yaml``'s ``explorer:``);
and, in headless Chromium (Playwright, the launch arguments of
tests/test_review_browser.py), the time to open the corrupted cell of the reasoning model
(``index.html#model=...&dataset=...&condition=...&prompt=...`` until the unit list shows
its first rows), to open one sample (a click on the first row until the sample view is
drawn) and its reasoning trace (until the text chunk is loaded and shown), each the
median of ``--repeats`` fresh pages. Nothing is asserted: it prints Markdown
tables and writes every number to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.paths import real_data  # noqa: E402
from vlmrobust.core.scored import SCORED_COLUMNS  # noqa: E402

sys.path.insert(0, str(REPO))
# how the project's browser tests launch Chromium (headless, as root, offline)
from tests.test_review_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

DATASET = "mathvision"
PROMPT = "cot"
MODELS = {
    "base-7b": {"name": "Base 7B", "family": "qwen2.5-vl", "role": "base", "base": None},
    "reasoner-7b": {
        "name": "Reasoner 7B", "family": "qwen2.5-vl", "role": "reasoning", "base": "base-7b",
    },
}  # fmt: skip
CONDITIONS = ("clean", "corrupt")
FIXTURES = REPO / "tests" / "fixtures" / "distract-bench" / "model_outputs"
#: the app's selectors (assets/explorer.js): a row of the unit list (its button opens the
#: sample), the sample view once drawn, the perturbed side's trace (opening it loads the
#: row's text chunk) and that trace once its text is shown
ROW_SELECTOR = "#units li[data-key]"
SAMPLE_SELECTOR = '#sample-view[data-ready="1"]'
TRACE_SELECTOR = 'details.trace[data-side="perturbed"]'
TRACE_LOADED = 'details.trace[data-side="perturbed"][data-loaded="1"]'
#: the stand-in texts where the fixtures are missing (about 3 characters a token)
STAND_IN = (
    "Let me look at the figure. The triangle has two equal sides, so the base angles are "
    "equal: \\(\\angle B = \\angle C = x\\). Then \\(2x + 30^\\circ + y = 180^\\circ\\). "
)


# --------------------------------------------------------------------------- inputs


def released_texts() -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[dict]]:
    """(base responses, reasoning responses, reference judge records): each response with
    its released output token count; stand-ins where the fixtures are missing."""

    def read(name: str) -> list[dict]:
        path = FIXTURES / name
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    if not FIXTURES.is_dir():
        fake = [(STAND_IN * k, round(len(STAND_IN * k) / 3.1)) for k in range(2, 14)]
        return fake, fake, [{"verdict": "no", "reason": "stand-in", "evidence": "",
                             "confidence": 0.9}]  # fmt: skip

    def texts(name: str) -> list[tuple[str, int]]:
        return [(r["filtered_resps"], r["token_counts"][0]["output_tokens"]) for r in read(name)]

    # the reference judge's own rows (judges/reference.py `_row`), with the slice's
    # released verdicts, reasons, evidence and confidences
    judged = [
        {"verdict": r["verdict"], "reason": r["reason"], "evidence": r["evidence"],
         "confidence": r["confidence"], "judge": "gpt-5-nano", "error": None, "cached": False,
         "prompt_version": "1"}
        for r in read("FanqingM__MM-Eureka-Qwen-7B.reference.jsonl")
    ]  # fmt: skip
    return (
        texts("Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl"),
        texts("FanqingM__MM-Eureka-Qwen-7B.samples.jsonl"),
        judged,
    )


def drawn_image(path: Path, i: int) -> None:
    """A PIL-drawn diagram (a stand-in for a real image): shapes, lines and labels."""
    rng = random.Random(i)
    w, h = rng.choice([(480, 360), (640, 420), (520, 520), (900, 300)])
    im = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(im)
    for _ in range(rng.randint(3, 9)):
        x0, y0 = rng.randrange(w - 40), rng.randrange(h - 40)
        x1, y1 = x0 + rng.randint(20, w // 2), y0 + rng.randint(20, h // 2)
        colour = rng.choice(["black", "#1f77b4", "#d62728", "#2ca02c"])
        box = [x0, y0, min(x1, w - 1), min(y1, h - 1)]
        shape = rng.choice(["rectangle", "ellipse", "line"])
        if shape == "line":
            d.line(box, fill=colour, width=2)
        else:
            getattr(d, shape)(box, outline=colour, width=2)
        d.text((x0, y0), rng.choice("ABCDEFGH") + str(rng.randint(1, 99)), fill="black")
    im.save(path)


def make_samples(work: Path, n: int, data: Path | None) -> tuple[list[dict], str]:
    """``n`` samples (MATH-V's questions and images, cycled; or drawn stand-ins) and
    their ``samples.jsonl``; where the images came from."""
    folder = work / "results" / "samples" / DATASET
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    source = "drawn"
    if data is not None:
        lines = (data / "mathvision" / "data" / "test.jsonl").read_text().splitlines()
        rows = [json.loads(x) for x in lines if x.strip()]
        source = f"MATH-V test ({len(rows)} images) from {data}"
    samples = []
    for i in range(n):
        sid = f"{DATASET}-{i}"
        image = folder / "images" / f"{sid}_0{'.jpg' if rows else '.png'}"
        if rows:
            row = rows[i % len(rows)]
            image.unlink(missing_ok=True)
            image.symlink_to(data / "mathvision" / row["image"])  # type: ignore[operator]
            options = list(row.get("options") or [])
            question, answer = row["question"], str(row["answer"])
        else:
            drawn_image(image, i)
            options, question, answer = list("ABCDE"), f"Which figure matches? ({i})", "B"
        samples.append({
            "sample_id": sid, "dataset": DATASET,
            "images": [str(image.relative_to(work))], "question": question, "answer": answer,
            "answer_type": "letter" if options else "number", "choices": options,
            "precision": None, "meta": {"source_id": str(i)},
        })  # fmt: skip
    write_jsonl(folder / "samples.jsonl", samples)
    return samples, source


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def make_variants(work: Path, samples: list[dict], distinct: int) -> float:
    """The clean and corrupt manifests; the seconds the corruptions took."""
    from vlmrobust.perturb.corruption import CORRUPTION_METHODS, corrupt_image
    from vlmrobust.perturb.storage import encode_image
    from vlmrobust.perturb.variants import open_shown

    base = work / "results" / "variants" / DATASET
    clean = [{"variant_id": s["sample_id"], "sample_id": s["sample_id"], "dataset": DATASET,
              "condition": "clean", "perturbation": "none", "images": s["images"],
              "sha256": ["0" * 64], "question": s["question"], "params": {}, "seed": None,
              "masks": []} for s in samples]  # fmt: skip
    write_jsonl(base / "clean" / "manifest.jsonl", clean)
    (base / "corrupt" / "images").mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    made: list[tuple[str, dict]] = []
    t0 = time.perf_counter()
    for i, s in enumerate(samples[:distinct]):
        method = rng.choice(CORRUPTION_METHODS)
        severity = None if method == "blank" else rng.randint(1, 5)
        image = open_shown(str(work / s["images"][0]), s["sample_id"])
        data, suffix = encode_image(
            corrupt_image(image.convert("RGB"), method, severity, i), "webp"
        )
        out = base / "corrupt" / "images" / f"{s['sample_id']}_0{suffix}"
        out.write_bytes(data)
        made.append((str(out.relative_to(work)), {"method": method, "severity": severity}))
    seconds = time.perf_counter() - t0
    corrupt = []
    for i in range(len(samples)):
        path, params = made[i % len(made)]
        corrupt.append({**clean[i], "condition": "corrupt", "perturbation": "corruption",
                        "images": [path], "params": params, "seed": 1000 + i})  # fmt: skip
    write_jsonl(base / "corrupt" / "manifest.jsonl", corrupt)
    return seconds


def _thinking(rng: random.Random, texts: list[tuple[str, int]], target: int) -> tuple[str, int]:
    """Released responses joined (from a random one on) until ``target`` tokens."""
    parts, tokens = [], 0
    k = rng.randrange(len(texts))
    while tokens < target:
        text, n = texts[k % len(texts)]
        parts.append(text)
        tokens += n
        k += 1
    return "\n\nWait, let me check this again.\n\n".join(parts), tokens


def make_answers(work: Path, samples: list[dict], thinking_tokens: int) -> dict[str, Any]:
    """Scored CSVs and outputs of both models in both conditions; the reference judge file
    of the base model's corrupted cell; the generated tokens per model."""
    base_texts, reasoning_texts, judged = released_texts()
    rng = random.Random(1)
    tokens: dict[str, list[int]] = defaultdict(list)
    files: dict[tuple[str, str], dict[str, str]] = {}
    for model in MODELS:
        for cond in CONDITIONS:
            scored, outputs = [], []
            for s in samples:
                row, out, n = _answer(rng, model, cond, s, base_texts, reasoning_texts,
                                      thinking_tokens)  # fmt: skip
                scored.append(row)
                outputs.append(out)
                tokens[model].append(n)
            paths = _write_cell(work, model, cond, scored, outputs)
            if (model, cond) == ("base-7b", "corrupt"):
                judge = work / "results" / "judged" / model / DATASET / cond / f"{PROMPT}.jsonl"
                write_jsonl(judge, [{"key": o["key"], "model": model, "dataset": DATASET,
                                     "condition": cond, "prompt": PROMPT,
                                     **judged[i % len(judged)]}
                                    for i, o in enumerate(outputs)])  # fmt: skip
                paths["judge"] = str(judge.relative_to(work))
            files[(model, cond)] = paths
    return {"files": files, "tokens": {m: statistics.fmean(t) for m, t in tokens.items()}}


def _answer(rng, model, cond, s, base_texts, reasoning_texts, thinking_tokens):
    """One (scored row, output row, generated tokens) of ``model`` on sample ``s``."""
    key = f"{s['sample_id']}#0"
    correct = int(rng.random() < (0.45 if cond == "clean" else 0.35))
    letter = s["answer"] if correct else rng.choice([c for c in "ABCDE" if c != s["answer"]])
    if model == "base-7b":
        text, n = base_texts[rng.randrange(len(base_texts))]
        thinking, answer, raw, think_n = None, text, text, None
    else:
        thinking, think_n = _thinking(rng, reasoning_texts, thinking_tokens)
        answer = f"The answer is \\(\\boxed{{{letter}}}\\)."
        raw = f"<think>\n{thinking}\n</think>\n\n{answer}"
        n = think_n + 12
    row = dict.fromkeys(SCORED_COLUMNS, "")
    row.update(key=key, variant_id=s["sample_id"], sample_id=s["sample_id"], dataset=DATASET,
               condition=cond, prompt=PROMPT, model=model, draw=0, answer=s["answer"],
               answer_type=s["answer_type"], prediction=letter, correct=correct,
               score=float(correct), method="boxed", rule="last_boxed",
               reason=f"\\boxed{{{letter}}} is option {letter}", finish_reason="stop",
               thinking_tokens="" if think_n is None else think_n, completion_tokens=n,
               mode="extract")  # fmt: skip
    out = {"key": key, "variant_id": s["sample_id"], "sample_id": s["sample_id"],
           "dataset": DATASET, "condition": cond, "prompt": PROMPT, "prompt_version": "1",
           "model": model, "backend": "vllm", "model_revision": "bench", "draw": 0,
           "raw_text": raw, "answer_text": answer, "thinking": thinking,
           "finish_reason": "stop", "completion_tokens": n, "thinking_tokens": think_n,
           "error": None}  # fmt: skip
    return row, out, n


def _write_cell(work: Path, model: str, cond: str, scored: list[dict], outputs: list[dict]):
    scored_path = work / "results" / "scored" / model / DATASET / cond / f"{PROMPT}.csv"
    scored_path.parent.mkdir(parents=True, exist_ok=True)
    with scored_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=SCORED_COLUMNS)
        writer.writeheader()
        writer.writerows(scored)
    out_path = work / "results" / "outputs" / model / DATASET / cond / f"{PROMPT}.jsonl"
    write_jsonl(out_path, outputs)
    return {
        "scored": str(scored_path.relative_to(work)),
        "outputs": str(out_path.relative_to(work)),
    }


# --------------------------------------------------------------------------- build


def spec() -> dict[str, Any]:
    """The index's specification (what studies/explorer.py's index_spec gives a run)."""
    return {
        "clean": "clean",
        "model_order": list(MODELS),
        "models": MODELS,
        "datasets": {DATASET: {"display": "MATH-V", "group": "reasoning", "prompts": [PROMPT]}},
        "conditions": {"clean": {"perturbation": "none"},
                       "corrupt": {"perturbation": "corruption"}},
        "studies": [{
            "folder": "corruption", "study": "corruption", "title": "Corruption",
            "clean_condition": "clean", "models": list(MODELS), "datasets": [DATASET],
            "conditions": ["corrupt"], "tables": [],
            "scope": {"clean_condition": "clean",
                      "datasets": {DATASET: {"group": "reasoning", "prompts": [PROMPT]}}},
        }],
    }  # fmt: skip


def build(work: Path, answers: dict[str, Any]) -> list[dict[str, Any]]:
    """Every explorer job, timed (seconds, wall); run in ``work`` (paths relative)."""
    from vlmrobust.jobs import explorer as jobs

    timings = []
    site = "results/explorer"
    variant_dirs, cell_dirs = [], []
    for cond in CONDITIONS:
        out = f"{site}/variants/{DATASET}/{cond}"
        t0 = time.perf_counter()
        jobs.variants(f"results/variants/{DATASET}/{cond}/manifest.jsonl",
                      f"results/samples/{DATASET}/samples.jsonl", out)  # fmt: skip
        timings.append({"job": f"variants {DATASET}/{cond}", "seconds": time.perf_counter() - t0})
        variant_dirs.append(out)
    for (model, cond), files in answers["files"].items():
        out = f"{site}/cells/{model}/{DATASET}/{cond}/{PROMPT}"
        clean = answers["files"][(model, "clean")]["scored"] if cond != "clean" else None
        judge = [f"reference={files['judge']}"] if "judge" in files else None
        t0 = time.perf_counter()
        jobs.cell(files["scored"], clean, files["outputs"], judge, out)
        timings.append({"job": f"cell {model}/{cond}", "seconds": time.perf_counter() - t0})
        cell_dirs.append(out)
    t0 = time.perf_counter()
    jobs.index(json.dumps(spec()), cell_dirs, variant_dirs, site)
    timings.append({"job": "index", "seconds": time.perf_counter() - t0})
    return timings


# --------------------------------------------------------------------------- measure


def kind_of(rel: Path) -> str:
    """The kind of an explorer file (its path relative to results/explorer)."""
    name = rel.name
    if rel.parts[0] == "variants":
        if "thumbs" in rel.parts:
            return "thumbnails"
        return "variants parts" if name.startswith("part") else "summaries"
    if rel.parts[0] == "cells":
        if name.startswith("rows"):
            return "rows"
        return "text chunks" if name.startswith("text") else "summaries"
    return "index and app"


def file_sizes(site: Path) -> dict[str, dict[str, Any]]:
    """Per kind: files, total bytes, the largest file and its bytes."""
    kinds: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        rel = path.relative_to(site)
        k = kinds.setdefault(
            kind_of(rel), {"files": 0, "bytes": 0, "largest": "", "largest_bytes": 0}
        )
        size = path.stat().st_size
        k["files"] += 1
        k["bytes"] += size
        if size > k["largest_bytes"]:
            k["largest"], k["largest_bytes"] = str(rel), size
    return kinds


def payload(path: Path) -> Any:
    """The JSON payload of a data file (``EXPLORER.put(key, payload);``)."""
    text = path.read_text(encoding="utf-8")
    start = text.index(", ") + 2
    return json.loads(text[start : text.rindex(");")])


def per_item(site: Path, answers: dict[str, Any]) -> dict[str, Any]:
    """The forecast's constants: bytes per thumbnail and variant entry per set; per cell
    the bytes per row, per text entry, the text entries' overhead besides their texts,
    and the text bytes per generated token; what a judge record adds."""
    from vlmrobust.report.explorer.data import dumps

    sets = {}
    for cond in CONDITIONS:
        folder = site / "variants" / DATASET / cond
        thumbs = list((folder / "thumbs").glob("*.webp"))
        parts = list(folder.glob("part*.js"))
        n = json.loads((folder / "summary.json").read_text())["n"]
        sets[cond] = {"thumbnail": statistics.fmean(p.stat().st_size for p in thumbs),
                      "variant": sum(p.stat().st_size for p in parts) / n}  # fmt: skip
    cells = {}
    for model, cond in answers["files"]:
        folder = site / "cells" / model / DATASET / cond / PROMPT
        n = json.loads((folder / "summary.json").read_text())["n"]
        rows = sum(p.stat().st_size for p in folder.glob("rows*.js"))
        chunks = list(folder.glob("text*.js"))
        text_bytes = sum(p.stat().st_size for p in chunks)
        texts = [t for p in chunks for t in payload(p)["texts"].values()]
        strings = sum(len(dumps(t.get(k) or "").encode()) - 2 * bool(t.get(k))
                      for t in texts for k in ("answer_text", "thinking", "raw_text"))  # fmt: skip
        judges = sum(len(dumps(t.get("judges") or {}).encode()) - 2 for t in texts)
        tokens = answers["tokens"][model] * n
        cells[f"{model}/{cond}"] = {
            "rows": n, "row": rows / n, "text": text_bytes / n,
            "text_overhead": (text_bytes - strings - judges) / n, "judge": judges / n,
            "text_per_token": strings / tokens, "tokens_per_row": tokens / n,
            "raw_kept": sum(1 for t in texts if t.get("raw_text")),
        }  # fmt: skip
    return {"sets": sets, "cells": cells}


def released_bytes_per_token() -> dict[str, float] | None:
    """Characters and script-escaped JSON bytes per released output token of the slice's
    responses (Qwen2.5-VL's tokenizer counts)."""
    if not FIXTURES.is_dir():
        return None
    from vlmrobust.report.explorer.data import dumps

    base, reasoning, _ = released_texts()
    both = base + reasoning
    tokens = sum(n for _, n in both)
    return {
        "responses": len(both),
        "tokens": tokens,
        "chars_per_token": sum(len(t) for t, _ in both) / tokens,
        "json_bytes_per_token": sum(len(dumps(t).encode()) - 2 for t, _ in both) / tokens,
    }


#: scikit-image's bundled photos (as benchmarks/forecast_check.py --measure-disk)
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "hubble_deep_field.jpg"]  # fmt: skip


def photo_thumbnails() -> dict[str, float] | None:
    """Mean bytes of the explorer's thumbnail (its own ``make_thumbnail``) of each
    bundled photo, clean and under every corruption method at severity 3 (None without
    scikit-image)."""
    try:
        import skimage
    except ImportError:
        return None
    from vlmrobust.perturb.corruption import CORRUPTION_METHODS, corrupt_image
    from vlmrobust.perturb.variants import open_shown
    from vlmrobust.report.explorer.variants import make_thumbnail

    clean, corrupted = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in PHOTOS:
            im = open_shown(str(Path(skimage.data.__file__).parent / name), name).convert("RGB")
            path = Path(tmp) / "photo.png"
            im.save(path)
            clean.append(len(make_thumbnail(str(path), name)[0]))
            for m in CORRUPTION_METHODS:
                corrupt_image(im, m, None if m == "blank" else 3, 7).save(path)
                corrupted.append(len(make_thumbnail(str(path), name)[0]))
    return {"photos": len(PHOTOS), "clean": statistics.fmean(clean),
            "corrupted": statistics.fmean(corrupted)}  # fmt: skip


# --------------------------------------------------------------------------- browser


def browse(site: Path, repeats: int) -> dict[str, Any]:
    """Median seconds, each on a fresh page, to open the reasoning model's corrupted cell
    (until the unit list shows rows), then one sample (a click on the first row, until
    the sample view is drawn) and its trace (a click on the perturbed side's trace, until
    its text chunk is loaded and shown)."""
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    cell = {"model": "reasoner-7b", "dataset": DATASET, "condition": "corrupt", "prompt": PROMPT}
    page_url = (site / "index.html").resolve().as_uri()
    times: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(repeats):
                context = browser.new_context()
                page = context.new_page()
                page.set_default_timeout(120_000)
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                t0 = time.perf_counter()
                page.goto(f"{page_url}#{urlencode(cell)}")
                page.wait_for_selector(ROW_SELECTOR)
                times["cell"].append(time.perf_counter() - t0)
                times["units"].append(page.locator(ROW_SELECTOR).count())
                t0 = time.perf_counter()
                page.locator(f"{ROW_SELECTOR} button").first.click()
                page.wait_for_selector(SAMPLE_SELECTOR)
                times["sample"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                page.locator(f"{TRACE_SELECTOR} > summary").first.click()
                page.wait_for_selector(TRACE_LOADED)
                times["trace"].append(time.perf_counter() - t0)
                context.close()
        finally:
            browser.close()
    return {
        "open_cell_s": statistics.median(times["cell"]), "open_cell_all": times["cell"],
        "units_listed": times["units"][0],
        "open_sample_s": statistics.median(times["sample"]), "open_sample_all": times["sample"],
        "open_trace_s": statistics.median(times["trace"]), "open_trace_all": times["trace"],
        "page_errors": errors[:5],
    }  # fmt: skip


# --------------------------------------------------------------------------- report


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f}"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Explorer at scale: {result['samples']:,} samples x {len(CONDITIONS)} conditions x "
        f"{len(MODELS)} models ({result['images']}); {result['machine']}, {result['date']}",
        "", "| kind | files | MB | largest file | its MB |", "|---|---:|---:|---|---:|",
    ]  # fmt: skip
    for kind, k in sorted(result["files"].items()):
        lines.append(f"| {kind} | {k['files']:,} | {_mb(k['bytes'])} | {k['largest']} | "
                     f"{_mb(k['largest_bytes'])} |")  # fmt: skip
    total = sum(k["bytes"] for k in result["files"].values())
    lines += [f"| **all** | {sum(k['files'] for k in result['files'].values()):,} | "
              f"{_mb(total)} | | |", "", "| job | seconds |", "|---|---:|"]  # fmt: skip
    lines += [f"| {t['job']} | {t['seconds']:.1f} |" for t in result["jobs"]]
    lines += ["", "| set | B/thumbnail | B/variant entry |", "|---|---:|---:|"]
    for cond, s in result["per_item"]["sets"].items():
        lines.append(f"| {DATASET}/{cond} | {s['thumbnail']:,.0f} | {s['variant']:,.0f} |")
    lines += ["", "| cell | rows | B/row (rows.js) | B/text entry | of it overhead | judges "
              "| text B/token | tokens/row | raw_text kept |", "|---|" + "---:|" * 8]  # fmt: skip
    for name, c in result["per_item"]["cells"].items():
        lines.append(f"| {name} | {c['rows']:,} | {c['row']:,.1f} | {c['text']:,.0f} | "
                     f"{c['text_overhead']:,.1f} | {c['judge']:,.1f} | "
                     f"{c['text_per_token']:.3f} | {c['tokens_per_row']:,.0f} | "
                     f"{c['raw_kept']:,} |")  # fmt: skip
    if result.get("released"):
        r = result["released"]
        lines += ["", f"Released responses ({r['responses']}, {r['tokens']:,} tokens): "
                  f"{r['chars_per_token']:.2f} chars/token, {r['json_bytes_per_token']:.2f} "
                  "JSON bytes/token."]  # fmt: skip
    if result.get("photo_thumbnails"):
        t = result["photo_thumbnails"]
        lines += ["", f"Thumbnails of scikit-image's {t['photos']} photos: clean {t['clean']:,.0f} "
                  f"B, under every corruption at severity 3 {t['corrupted']:,.0f} B."]  # fmt: skip
    if result.get("browser"):
        b = result["browser"]
        lines += ["", "| in Chromium (median of the repeats) | seconds |", "|---|---:|",
                  f"| open the cell ({result['samples']:,} rows) | {b['open_cell_s']:.2f} |",
                  f"| open one sample (click on its row) | {b['open_sample_s']:.2f} |",
                  f"| open its trace (loads its text chunk) | {b['open_trace_s']:.2f} |"]  # fmt: skip
        if b["page_errors"]:
            lines.append(f"\nPage errors: {b['page_errors']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--data", type=Path, default=None, help="the real-data folder")
    ap.add_argument("--dir", type=Path, default=None, help="work here (kept)")
    ap.add_argument("--thinking-tokens", type=int, default=1500)
    ap.add_argument("--corrupted-images", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = ap.parse_args()
    data = args.data or real_data(REPO)
    data = data.resolve() if (data / "mathvision" / "data" / "test.jsonl").is_file() else None
    work = args.dir or Path(tempfile.mkdtemp(prefix="explorer-scale-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    here = Path.cwd()
    os.chdir(work)
    try:
        result = run(work, data, args)
    finally:
        os.chdir(here)
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    text = markdown(result)
    print(text)
    if args.out:
        args.out.write_text(json.dumps({**result, "markdown": text}, indent=1))


def run(work: Path, data: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    samples, source = make_samples(work, args.samples, data)
    corrupt_s = make_variants(work, samples, min(args.corrupted_images, len(samples)))
    answers = make_answers(work, samples, args.thinking_tokens)
    setup_s = time.perf_counter() - t0
    jobs = build(work, answers)
    site = work / "results" / "explorer"
    result = {
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "samples": args.samples, "images": source, "thinking_tokens": args.thinking_tokens,
        "corrupted_images": args.corrupted_images, "setup_s": setup_s, "corrupt_s": corrupt_s,
        "jobs": jobs, "files": file_sizes(site), "per_item": per_item(site, answers),
        "released": released_bytes_per_token(), "tokens_per_row": answers["tokens"],
        "photo_thumbnails": photo_thumbnails(),
    }  # fmt: skip
    result["largest_file_bytes"] = max(k["largest_bytes"] for k in result["files"].values()
                                       if k is not result["files"].get("thumbnails"))  # fmt: skip
    if not args.no_browser and math.isfinite(args.repeats) and args.repeats > 0:
        result["browser"] = browse(site, args.repeats)
    return result


if __name__ == "__main__":
    main()

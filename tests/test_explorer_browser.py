"""The explorer (issue 48) in a real browser: a tiny run in the real file formats, the
explorer built by the real jobs (``vlmrobust.jobs.explorer``: variants, cells, index),
a table with linked cells written by the report code, all opened from the file system
in headless Chromium driven by Playwright.

The run (working folder: a module temp dir), one prompt setting ``default``:

* models ``base-7b`` (role base) and ``think-7b`` (role reasoning, base ``base-7b``:
  the pair ``base-7b~think-7b``);
* ``mathd`` (group reasoning; samples m1..m4, draws 0 and 1, 640x480 images, MCQ with
  gold ``B``) under ``clean``, ``blur`` (corruption gaussian_blur severity 3, manifest
  images given as absolute paths under results/) and ``mask`` (a box per sample);
  ``genq`` (group general; samples g1..g3, one draw, 480x640 images) under ``clean``
  and ``blur``. 10 cells.

Correctness by unit (mathd: m1#0 m1#1 m2#0 m2#1 m3#0 m3#1 m4#0 m4#1; genq: g1 g2 g3)::

    base-7b   mathd clean 11100110  blur 01010110  mask 11100100   genq clean 101  blur 110
    think-7b  mathd clean 11111011  blur 01111011  mask 11111101   genq clean 111  blur 111

so base-7b loses m1#0, m2#0 and gains m2#1 on mathd/blur, think-7b loses m1#0 (the same
unit); on mathd/mask both lose m4#0 (think-7b's row there is the harness's random
guess, method ``random``) and think-7b gains m3#1; on genq/blur base-7b loses g3 and
gains g2. base-7b's mathd/blur row m3#0 is a failed request (error; left out of every
number). Flip counts (lost, gained, right, wrong) by perturbed cell::

    base-7b  mathd/blur 2 1 3 2   mathd/mask 1 0 4 3   genq/blur 1 1 1 0
    think-7b mathd/blur 1 0 6 1   mathd/mask 1 1 6 0   genq/blur 0 0 3 0

The table numbers, by hand (errors left out, a group/all = macro mean over datasets):

* base-7b accuracy mathd/blur = 4/7 (57.1); general (genq) blur = 2/3 (66.7);
  RR all blur = ((4/7 + 2/3) / 2) / ((5/8 + 2/3) / 2) = 0.95853 (95.9);
* think-7b accuracy mathd/blur = 6/8 (75.0); general blur = 3/3 (100.0);
  RR all blur = ((6/8 + 1) / 2) / ((7/8 + 1) / 2) = 0.93333 (93.3).

Needs Debian's Chromium at /usr/bin/chromium and the ``playwright`` package (as
tests/test_review_browser.py); without them the tests are skipped unless
VLMROBUST_REQUIRE_BROWSER=1. With VLMROBUST_WRITE_SCREENSHOTS=1 the sample-view
screenshot is written to docs/img/explorer-sample.png (else into the temp dir).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlencode, urljoin, urlparse

import pytest
from PIL import Image, ImageDraw, ImageFilter

from vlmrobust.core.io import write_jsonl
from vlmrobust.core.scored import SCORED_COLUMNS
from vlmrobust.jobs import explorer as explorer_jobs
from vlmrobust.report.tables.render import Table, grouped_frame, linked, write_table

from .test_review_browser import CHROMIUM, CHROMIUM_ARGS, _browser_or_skip

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SECRET = "sk-test-secret-123"
VIEWPORT = {"width": 1400, "height": 900}

# --------------------------------------------------------------------------- the run

MODELS = {
    "base-7b": {"name": "Base-7B", "family": "toy", "role": "base", "base": None},
    "think-7b": {"name": "Think-7B", "family": "toy", "role": "reasoning", "base": "base-7b"},
}
DATASETS = {
    "mathd": {"display": "MathD", "group": "reasoning", "prompts": ["default"]},
    "genq": {"display": "GenQ", "group": "general", "prompts": ["default"]},
}
CONDITIONS = {
    "clean": {"perturbation": "none"},
    "blur": {"perturbation": "corruption"},
    "mask": {"perturbation": "mask"},
}
CONDITIONS_OF = {"mathd": ["clean", "blur", "mask"], "genq": ["clean", "blur"]}
UNITS = {
    "mathd": [(f"m{i}", d) for i in range(1, 5) for d in (0, 1)],
    "genq": [("g1", 0), ("g2", 0), ("g3", 0)],
}
SIZE = {"mathd": (640, 480), "genq": (480, 640)}
CORRECT = {
    ("base-7b", "mathd", "clean"): "11100110",
    ("base-7b", "mathd", "blur"): "01010110",
    ("base-7b", "mathd", "mask"): "11100100",
    ("base-7b", "genq", "clean"): "101",
    ("base-7b", "genq", "blur"): "110",
    ("think-7b", "mathd", "clean"): "11111011",
    ("think-7b", "mathd", "blur"): "01111011",
    ("think-7b", "mathd", "mask"): "11111101",
    ("think-7b", "genq", "clean"): "111",
    ("think-7b", "genq", "blur"): "111",
}
ERROR_ROW = ("base-7b", "mathd", "blur", "m3", 0)
RANDOM_ROW = ("think-7b", "mathd", "mask", "m4", 0)
ERROR_TEXT = "request failed after 3 retries: HTTP 500"
MASK_BOX = {
    "m1": [40, 60, 200, 220],
    "m2": [100, 40, 300, 200],
    "m3": [320, 200, 600, 440],
    "m4": [200, 100, 520, 380],
}
HALLUCINATION = {"key": "m4-mask#0", "hallucinated": True, "judge_model": "judge-x",
                 "rationale": "names bars that the mask hides"}  # fmt: skip
CELL_ORDER = [  # the index's order: the spec's models, datasets and conditions, then prompt
    "base-7b/mathd/clean/default",
    "base-7b/mathd/blur/default",
    "base-7b/mathd/mask/default",
    "base-7b/genq/clean/default",
    "base-7b/genq/blur/default",
    "think-7b/mathd/clean/default",
    "think-7b/mathd/blur/default",
    "think-7b/mathd/mask/default",
    "think-7b/genq/clean/default",
    "think-7b/genq/blur/default",
]
# (model, metric, bench) -> the number shown in the table, computed by hand (docstring)
TABLE_VALUES = {
    ("base-7b", "accuracy", "mathd"): "57.1",
    ("base-7b", "accuracy", "general"): "66.7",
    ("base-7b", "rr", "all"): "95.9",
    ("think-7b", "accuracy", "mathd"): "75.0",
    ("think-7b", "accuracy", "general"): "100.0",
    ("think-7b", "rr", "all"): "93.3",
}


def _vid(sid: str, condition: str) -> str:
    return sid if condition == "clean" else f"{sid}-{condition}"


def _thinking_tokens(condition: str, i: int) -> int:
    return {"clean": 100, "blur": 200, "mask": 300}[condition] + i


def _thinking(sid: str, condition: str, draw: int) -> str:
    return (
        f"Looking at chart {sid} ({condition}, draw {draw}): the bars read 3, 5 and 7, "
        "so two bars are taller than 4."
    )


def _image(path: Path, size: tuple[int, int], sid: str) -> None:
    """A small chart: a few coloured bars on white with the sample id written on it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = size
    im = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(im)
    draw.line((30, h - 40, w - 20, h - 40), fill="black", width=3)
    draw.line((30, 20, 30, h - 40), fill="black", width=3)
    seed = sum(map(ord, sid))
    colours = ["#d1495b", "#edae49", "#00798c", "#30638e", "#6a4c93"]
    bar = (w - 80) // 5
    for k in range(5):
        top = 40 + ((seed * (k + 3)) % (h - 140))
        x0 = 45 + k * bar
        draw.rectangle((x0, top, x0 + bar - 15, h - 42), fill=colours[k])
    draw.text((40, 8), f"chart {sid}", fill="black")
    im.save(path)


def _write_samples(d: str) -> tuple[str, list[dict]]:
    """One dataset's samples (and their images): the samples file and its rows."""
    samples = []
    for sid in dict.fromkeys(s for s, _ in UNITS[d]):
        image = Path(f"results/samples/{d}/images/{sid}.png")
        _image(image, SIZE[d], sid)
        mcq = d == "mathd"
        samples.append(
            {
                "sample_id": sid,
                "dataset": d,
                "images": [image.as_posix()],
                "question": (
                    f"How many bars of chart {sid} are taller than 4?"
                    if mcq
                    else f"What colour is the tallest bar of chart {sid}?"
                ),
                "answer": "B" if mcq else "red",
                "answer_type": "letter" if mcq else "text",
                "choices": ["1", "2", "3", "4"] if mcq else [],
                "precision": None,
                "meta": {},
            }
        )
    samples_path = f"results/samples/{d}/samples.jsonl"
    write_jsonl(samples_path, samples)
    return samples_path, samples


def _variant_image(root: Path, d: str, c: str, sid: str, clean_image: str) -> tuple[str, dict]:
    """(image path, params) of a sample's variant under condition ``c``: blurred (an
    absolute path under results/) or masked (a box filled, an absolute ``source``)."""
    if c == "clean":
        return clean_image, {}
    target = root / f"results/variants/{d}/{c}/images/{sid}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(clean_image) as im:
        if c == "blur":
            im.filter(ImageFilter.GaussianBlur(4)).save(target)
            return str(target), {"method": "gaussian_blur", "severity": 3}
        box = MASK_BOX[sid]
        masked = im.copy()
        ImageDraw.Draw(masked).rectangle(box, fill="black")
        masked.save(target)
    params = {"region": "specific", "box": box, "image_size": [640, 480],
              "source": str(root / clean_image)}  # fmt: skip
    return f"results/variants/{d}/{c}/images/{sid}.png", params


def _write_manifest(root: Path, d: str, c: str, samples: list[dict]) -> str:
    rows = []
    for s in samples:
        sid = s["sample_id"]
        image, params = _variant_image(root, d, c, sid, s["images"][0])
        rows.append(
            {
                "variant_id": _vid(sid, c),
                "sample_id": sid,
                "dataset": d,
                "condition": c,
                "perturbation": CONDITIONS[c]["perturbation"],
                "images": [image],
                "sha256": ["0" * 64],
                "question": "",
                "params": params,
                "seed": 11,
                "masks": [],
            }
        )
    manifest = f"results/variants/{d}/{c}/manifest.jsonl"
    write_jsonl(manifest, rows)
    return manifest


def _answer_rows(m: str, d: str, c: str, bits: str) -> tuple[list[dict], list[dict]]:
    """One cell's scored rows and output rows, right or wrong as ``bits`` says."""
    think = MODELS[m]["role"] == "reasoning"
    scored_rows, outputs = [], []
    for i, ((sid, draw), bit) in enumerate(zip(UNITS[d], bits, strict=True)):
        correct = int(bit)
        vid = _vid(sid, c)
        key = f"{vid}#{draw}"
        mcq = d == "mathd"
        pred = ("B" if correct else "C") if mcq else ("red" if correct else "blue")
        method, mode, error = ("letter" if mcq else "exact"), "extract", None
        if (m, d, c, sid, draw) == RANDOM_ROW:
            pred, method, mode = "A", "random", "harness"
        if (m, d, c, sid, draw) == ERROR_ROW:
            pred, error = "", ERROR_TEXT
        tokens = _thinking_tokens(c, i) if think else None
        scored_rows.append(
            {
                "key": key, "variant_id": vid, "sample_id": sid, "dataset": d,
                "condition": c, "prompt": "default", "model": m, "draw": draw,
                "answer": "B" if mcq else "red", "answer_type": "letter" if mcq else "text",
                "prediction": pred, "correct": correct, "score": float(correct),
                "method": method, "reason": "matched the gold answer" if correct else "no match",
                "finish_reason": "stop", "error": error, "thinking_tokens": tokens,
                "completion_tokens": (tokens or 0) + 12, "mode": mode,
            }
        )  # fmt: skip
        thinking = _thinking(sid, c, draw) if think else None
        answer = f"The answer is {pred}."
        outputs.append(
            {
                "key": key, "model": m, "dataset": d, "condition": c, "prompt": "default",
                "answer_text": answer, "thinking": thinking,
                "raw_text": f"<think>{thinking}</think>{answer}" if think else answer,
            }
        )  # fmt: skip
    return scored_rows, outputs


def _write_cell(m: str, d: str, c: str, bits: str) -> dict:
    """One cell's scored, outputs (and judge) files: the explorer-cell job's arguments."""
    scored_rows, outputs = _answer_rows(m, d, c, bits)
    scored = Path(f"results/scored/{m}/{d}/{c}/default.csv")
    scored.parent.mkdir(parents=True, exist_ok=True)
    with open(scored, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(SCORED_COLUMNS))
        writer.writeheader()
        for row in scored_rows:
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in SCORED_COLUMNS})
    out_path = f"results/outputs/{m}/{d}/{c}/default.jsonl"
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(out_path, outputs)
    judge = []
    if (m, d, c) == ("base-7b", "mathd", "mask"):
        path = f"results/judged/hallucination/{m}/{d}/{c}.jsonl"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, [{**HALLUCINATION, "model": m, "dataset": d, "condition": c}])
        judge.append(f"hallucination={path}")
    return {
        "scored": scored.as_posix(),
        "clean_scored": None if c == "clean" else f"results/scored/{m}/{d}/clean/default.csv",
        "outputs": out_path,
        "judge": judge,
        "out_dir": f"results/explorer/cells/{m}/{d}/{c}/default",
    }


def _write_run(root: Path) -> dict:
    """Samples, manifests, scored/outputs/judge files (relative to the cwd, ``root``);
    the explorer jobs' arguments."""
    variants = []
    for d in DATASETS:
        samples_path, samples = _write_samples(d)
        for c in CONDITIONS_OF[d]:
            manifest = _write_manifest(root, d, c, samples)
            out = f"results/explorer/variants/{d}/{c}"
            variants.append({"manifest": manifest, "samples": samples_path, "out_dir": out})
    cells = [_write_cell(m, d, c, bits) for (m, d, c), bits in CORRECT.items()]
    return {"cells": cells, "variants": variants}


def _study(folder: str, title: str, datasets: list[str], conditions: list[str]) -> dict:
    """A study line as vlmrobust.studies.explorer.index_spec writes it."""
    return {
        "folder": folder,
        "study": folder,
        "title": title,
        "clean_condition": "clean",
        "models": list(MODELS),
        "datasets": datasets,
        "conditions": conditions,
        "tables": [{"name": "table1", "href": f"../tables/{folder}/table1.html"}],
        "scope": {
            "clean_condition": "clean",
            "datasets": {
                d: {"group": DATASETS[d]["group"], "prompts": DATASETS[d]["prompts"]}
                for d in datasets
            },
        },
    }


def _spec() -> dict:
    return {
        "clean": "clean",
        "model_order": list(MODELS),
        "models": MODELS,
        "datasets": DATASETS,
        "conditions": CONDITIONS,
        "studies": [
            _study("corruption", "Corruption", ["mathd", "genq"], ["blur"]),
            _study("masking", "Masking", ["mathd"], ["mask"]),
        ],
    }


def _write_table() -> Path:
    """Table 1 of the corruption study: accuracy of a dataset, of a group and the RR of
    ``all``, as linked cells (the report's renderer writes the links)."""
    rows = []
    for m in MODELS:
        rows.append(
            [
                MODELS[m]["name"],
                linked(TABLE_VALUES[(m, "accuracy", "mathd")], "accuracy", m, "mathd", "blur"),
                linked(TABLE_VALUES[(m, "accuracy", "general")], "accuracy", m, "general", "blur"),
                linked(TABLE_VALUES[(m, "rr", "all")], "rr", m, "all", "blur"),
            ]
        )
    columns = [("", "Model"), ("Blur", "MathD acc. (%)"), ("Blur", "General acc. (%)"),
               ("Blur", "RR all (%)")]  # fmt: skip
    table = Table(data=grouped_frame(rows, columns), caption="Toy corruption table")
    paths = write_table(table, "results/tables/corruption/table1", folder="corruption")
    return next(p for p in paths if p.suffix == ".html")


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    """The tiny run with its explorer and table, built by the real jobs (cwd: the run,
    OPENAI_API_KEY set to a secret that must reach no page)."""
    root = tmp_path_factory.mktemp("explorer-run")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("OPENAI_API_KEY", SECRET)
        jobs = _write_run(root)
        for v in jobs["variants"]:
            explorer_jobs.variants(v["manifest"], v["samples"], v["out_dir"])
        for c in jobs["cells"]:
            explorer_jobs.cell(
                c["scored"], c["clean_scored"], c["outputs"], c["judge"], c["out_dir"]
            )
        explorer_jobs.index(
            json.dumps(_spec()),
            [c["out_dir"] for c in jobs["cells"]],
            [v["out_dir"] for v in jobs["variants"]],
            "results/explorer",
        )
        _write_table()
    return root


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def app(run_root):
    """One Chromium and one page for the module (1400x900), recording every request,
    page error and console error."""
    sync_playwright = _browser_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(15_000)
            state = SimpleNamespace(
                page=page,
                root=run_root,
                url=(run_root / "results/explorer/index.html").as_uri(),
                requests=[],
                errors=[],
                console=[],
            )
            page.on("request", lambda r: state.requests.append(r.url))
            page.on("pageerror", lambda exc: state.errors.append(str(exc)))
            page.on(
                "console",
                lambda m: state.console.append(m.text) if m.type == "error" else None,
            )
            yield state
        finally:
            browser.close()


def _open(app, fragment: dict | None = None):
    """A fresh load of the explorer at ``fragment``; the page once the index is shown."""
    page = app.page
    page.goto("about:blank")
    page.goto(app.url + ("#" + urlencode(fragment) if fragment else ""))
    page.wait_for_selector("body[data-ready]")
    return page


def _fragment(page) -> dict[str, str]:
    return dict(parse_qsl(urlparse(page.url).fragment, keep_blank_values=True))


def _cell_ids(page) -> list[str]:
    return page.locator("#cells tbody tr").evaluate_all("els => els.map(e => e.dataset.cell)")


def _units(page) -> list[tuple[str, str]]:
    found = page.locator("#units li[data-key]").evaluate_all(
        "els => els.map(e => [e.dataset.key, e.dataset.flip])"
    )
    return [tuple(u) for u in found]


_COUNTS_JS = """([sel, want]) => {
  const got = {};
  document.querySelectorAll(sel).forEach(e => {
    got[e.dataset.value] = Number(e.querySelector('.count').textContent);
  });
  return want === null ? got
    : JSON.stringify(Object.entries(got).sort()) === JSON.stringify(Object.entries(want).sort());
}"""


def _counts(page, facet: str, want: dict | None = None) -> dict[str, int]:
    """The counts beside a facet's options ({value: count}); with ``want``, after
    waiting (up to 5 s) for them to become ``want``."""
    sel = f'.filter[data-facet="{facet}"] button.opt'
    if want is not None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        with contextlib.suppress(PlaywrightTimeout):  # the caller's assert shows the difference
            page.wait_for_function(_COUNTS_JS, arg=[sel, want], timeout=5_000)
    return page.evaluate(_COUNTS_JS, [sel, None])


def _wait_images(page, scope: str = "#sample-view") -> None:
    page.wait_for_function(
        "s => { const im = [...document.querySelectorAll(s + ' img')];"
        " return im.length > 0 && im.every(i => i.complete && i.naturalWidth > 0); }",
        arg=scope,
    )


def _sample_param(page) -> str | None:
    return _fragment(page).get("sample")


# --------------------------------------------------------------------------- the tests

ALL_COUNTS = {
    "study": {"corruption": 6, "masking": 3},
    "model": {"base-7b": 6, "think-7b": 3},
    "pair": {"base-7b~think-7b": 9},
    "dataset": {"mathd": 7, "genq": 2},
    "condition": {"clean": 0, "blur": 6, "mask": 3},
    "prompt": {"default": 9},
    "flip": {
        "lost": 6,
        "gained": 3,
        "right": 23,
        "wrong": 5,
        "unpaired": 0,
        "failed": 1,
        "clean": 22,
    },
}


def test_filters_and_their_counts(app):
    from playwright.sync_api import expect

    page = _open(app)
    expect(page.locator("#index-summary")).to_have_text(
        "10 cells \u00b7 2 models \u00b7 2 benchmarks \u00b7 3 conditions"
    )
    assert _cell_ids(page) == CELL_ORDER
    expect(page.locator("#cells-summary span").first).to_have_text(
        "10 cells \u00b7 60 rows \u00b7 6 lost \u00b7 3 gained "
    )
    # counts beside the options: units lost or gained (the default flip directions)
    for facet, want in ALL_COUNTS.items():
        assert _counts(page, facet) == want, facet
    pair = page.locator('.filter[data-facet="pair"] button[data-value="base-7b~think-7b"] .label')
    expect(pair).to_have_text("Base-7B \u2194 Think-7B")
    # the row of one cell: rows, lost, gained, right, wrong, unpaired, accuracy (the failed
    # request left out, as the metrics do: 4 right of 7 answers), failed
    row = page.locator('#cells tbody tr[data-cell="base-7b/mathd/blur/default"] td')
    assert row.all_inner_texts() == [
        "Base-7B", "MathD", "blur", "default", "8", "2", "1", "3", "1", "0", "57.1", "1",
        "units",
    ]  # fmt: skip


def test_a_study_narrows_the_list_and_back_restores_it(app):
    from playwright.sync_api import expect

    page = _open(app)
    # a study: the URL changes, the list narrows, the other facets count within it
    page.locator('.filter[data-facet="study"] button[data-value="masking"]').click()
    expect(page).to_have_url(re.compile(r"#.*study=masking"))
    expect(page.locator("#cells tbody tr")).to_have_count(4)
    assert _cell_ids(page) == [
        "base-7b/mathd/clean/default",
        "base-7b/mathd/mask/default",
        "think-7b/mathd/clean/default",
        "think-7b/mathd/mask/default",
    ]
    assert _counts(page, "model", {"base-7b": 1, "think-7b": 2}) == {"base-7b": 1, "think-7b": 2}
    assert _counts(page, "study") == ALL_COUNTS["study"]  # a facet ignores its own choice
    assert _counts(page, "condition") == {"clean": 0, "blur": 0, "mask": 3}
    assert _counts(page, "flip") == {
        "lost": 2, "gained": 1, "right": 10, "wrong": 3, "unpaired": 0, "failed": 0, "clean": 16,
    }  # fmt: skip
    expect(
        page.locator('.filter[data-facet="study"] button[data-value="masking"]')
    ).to_have_attribute("aria-pressed", "true")

    # and the pair within it; back undoes one step at a time
    page.locator('.filter[data-facet="pair"] button[data-value="base-7b~think-7b"]').click()
    expect(page).to_have_url(re.compile(r"pair=base-7b(~|%7E)think-7b"))
    assert _fragment(page)["study"] == "masking"
    expect(page.locator("#cells tbody tr")).to_have_count(4)
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"pair="))
    assert _fragment(page).get("study") == "masking"
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"study="))
    expect(page.locator("#cells tbody tr")).to_have_count(10)
    assert _cell_ids(page) == CELL_ORDER
    assert _counts(page, "model", ALL_COUNTS["model"]) == ALL_COUNTS["model"]

    # the flip facet weighs the counts: lost only
    page.locator('#filters-units .filter[data-facet="flip"] button[data-value="gained"]').click()
    expect(page).to_have_url(re.compile(r"flip=lost(&|$)"))
    assert _counts(page, "model", {"base-7b": 4, "think-7b": 2}) == {"base-7b": 4, "think-7b": 2}
    assert _counts(page, "study") == {"corruption": 4, "masking": 2}
    page.go_back()
    assert _counts(page, "model", ALL_COUNTS["model"]) == ALL_COUNTS["model"]


def test_one_cell_lists_its_flips_and_the_rest_on_request(app):
    from playwright.sync_api import expect

    page = _open(app)
    # one cell's units: the lost and gained rows, their agreement across the two models
    page.locator('button[data-open-cell="base-7b/mathd/blur/default"]').click()
    expect(page.locator("#units li[data-key]")).to_have_count(3)
    assert _units(page) == [("m1-blur#0", "lost"), ("m2-blur#0", "lost"), ("m2-blur#1", "gained")]
    agree = page.locator("#units li[data-key] .u-agree").all_inner_texts()
    assert agree == ["2/2 flipped", "1/2 flipped", "1/2 flipped"]
    assert _counts(page, "flip") == {
        "lost": 2, "gained": 1, "right": 3, "wrong": 1, "unpaired": 0, "failed": 1, "clean": 0,
    }  # fmt: skip
    assert _counts(page, "method") == {"gaussian_blur": 3}
    assert _counts(page, "severity") == {"3": 3}
    assert _counts(page, "agree") == {"1": 2, "2": 1}
    page.locator('#filters-units .filter[data-facet="flip"] button[data-value="wrong"]').click()
    expect(page.locator("#units li[data-key]")).to_have_count(4)
    assert [k for k, f in _units(page) if f == "wrong"] == ["m4-blur#1"]
    # the failed request: no answer to compare, never a flip, listed on request
    page.locator('#filters-units .filter[data-facet="flip"] button[data-value="failed"]').click()
    expect(page.locator("#units li[data-key]")).to_have_count(5)
    assert [k for k, f in _units(page) if f == "failed"] == ["m3-blur#0"]
    expect(page.locator('#units li[data-key="m3-blur#0"] .u-err')).to_have_text("request failed")
    page.go_back()
    expect(page.locator("#units li[data-key]")).to_have_count(4)
    page.go_back()
    expect(page.locator("#units li[data-key]")).to_have_count(3)


def _lost_mask_unit(app):
    """The page showing the sample view of base-7b's lost unit m4-mask#0, and that view."""
    from playwright.sync_api import expect

    page = _open(app, {"open": "base-7b/mathd/mask/default"})
    expect(page.locator("#units li[data-key]")).to_have_count(1)
    assert _units(page) == [("m4-mask#0", "lost")]
    page.locator('#units li[data-key="m4-mask#0"] button').click()
    page.wait_for_selector("#sample-view[data-ready]")
    frag = _fragment(page)
    assert (frag["sample"], frag["at"], frag["smodel"]) == (
        "m4-mask#0",
        "mathd/mask/default",
        "base-7b",
    )
    _wait_images(page)
    return page, page.locator("#sample-view")


def test_sample_view_images_and_mask_box(app):
    from playwright.sync_api import expect

    page, sv = _lost_mask_unit(app)
    # thumbnails: clean and perturbed, 320x240 (the 640x480 images at scale 1/2)
    for side in ("clean", "perturbed"):
        img = sv.locator(f'figure[data-side="{side}"] img')
        expect(img).to_have_count(1)
        assert img.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [320, 240], side
    # the mask box: in full-image pixels on a viewBox of the full size, so it lands on the
    # thumbnail at the thumbnail's scale; dashed (ghost) at the same place on the clean one
    box = MASK_BOX["m4"]
    for side, cls in (("perturbed", "rect.box-mask:not(.ghost)"), ("clean", "rect.box-mask.ghost")):
        fig = sv.locator(f'figure[data-side="{side}"]')
        expect(fig.locator(f"svg {cls}")).to_have_count(1)
        expect(fig.locator("svg")).to_have_attribute("viewBox", "0 0 640 480")
        rect = fig.locator(f"svg {cls}")
        attrs = [float(rect.get_attribute(a)) for a in ("x", "y", "width", "height")]
        assert attrs == [200, 100, 320, 280], (side, attrs)
        shown = fig.locator("img").bounding_box()
        drawn = rect.bounding_box()
        scale = shown["width"] / 640  # displayed px per full-image px
        assert scale == pytest.approx(shown["height"] / 480, abs=0.01)
        got = [
            (drawn["x"] - shown["x"]) / scale,
            (drawn["y"] - shown["y"]) / scale,
            (drawn["x"] + drawn["width"] - shown["x"]) / scale,
            (drawn["y"] + drawn["height"] - shown["y"]) / scale,
        ]
        assert got == pytest.approx(box, abs=4), (side, got, shown, drawn)
    expect(sv.locator('figure[data-side="perturbed"] figcaption')).to_contain_text(
        "640\u00d7480 px \u00b7 1 mask box"
    )


def test_sample_view_question_answers_and_traces(app):
    from playwright.sync_api import expect

    page, sv = _lost_mask_unit(app)
    # question, choices, gold answer; the perturbation's parameters (no absolute path)
    expect(sv.locator("#sample-question")).to_have_text(
        "How many bars of chart m4 are taller than 4?"
    )
    assert sv.locator("#sample-choices li").all_inner_texts() == ["1", "2", "3", "4"]
    expect(sv.locator("#sample-answer")).to_have_text("Gold answer: B (letter)")
    expect(sv.locator('#sample-params tr[data-param="box"] td')).to_have_text("[200,100,520,380]")
    expect(sv.locator('#sample-params tr[data-param="source"] td')).to_have_text("\u2026/m4.png")

    # each model: prediction and verdict on both sides
    models = sv.locator("#sample-models section[data-model]")
    assert models.evaluate_all("els => els.map(e => e.dataset.model)") == ["base-7b", "think-7b"]
    expect(sv.locator('#sample-models section[data-model="base-7b"].current')).to_have_count(1)
    want = {
        ("base-7b", "clean"): ("B", "\u2713 right", "mode extract \u00b7 method letter"),
        ("base-7b", "perturbed"): ("C", "\u2717 wrong", "mode extract \u00b7 method letter"),
        ("think-7b", "clean"): ("B", "\u2713 right", "mode extract \u00b7 method letter"),
        ("think-7b", "perturbed"): (
            "A",
            "\u2717 wrong",
            "mode harness \u00b7 harness random guess",
        ),
    }
    for (m, side), (pred, verdict, read_as) in want.items():
        tr = sv.locator(f'section[data-model="{m}"] tr[data-side="{side}"]')
        got = [tr.locator(f"td.{c}").inner_text() for c in ("prediction", "verdict", "read-as")]
        assert got == [pred, verdict, read_as], (m, side)
        expect(sv.locator(f'section[data-model="{m}"] h4 .flip')).to_have_text("lost")
    tokens = sv.locator('section[data-model="think-7b"] tr[data-side="perturbed"] td.tokens')
    expect(tokens).to_have_text("306 thinking, 318 completion")
    judge = sv.locator('section[data-model="base-7b"] .judge[data-judge="hallucination"] strong')
    expect(judge).to_have_text("yes")

    # the trace loads on expand: its token count, the thinking and the answer text
    det = sv.locator('section[data-model="think-7b"] details.trace[data-side="perturbed"]')
    expect(det.locator("summary")).to_have_text(
        "perturbed (mask): reasoning trace and answer text \u00b7 306 thinking tokens"
    )
    assert det.get_attribute("data-loaded") is None
    det.locator("summary").click()
    expect(det).to_have_attribute("data-loaded", "1")
    expect(det.locator("pre.thinking")).to_have_text(_thinking("m4", "mask", 0))
    expect(det.locator("pre.answer")).to_have_text("The answer is A.")
    clean_det = sv.locator('section[data-model="think-7b"] details.trace[data-side="clean"]')
    expect(clean_det.locator("summary")).to_contain_text("106 thinking tokens")
    base_det = sv.locator('section[data-model="base-7b"] details.trace[data-side="perturbed"]')
    base_det.locator("summary").click()
    expect(base_det).to_have_attribute("data-loaded", "1")
    expect(base_det).to_contain_text("no thinking part")
    expect(base_det.locator('.judge-record[data-judge="hallucination"]')).to_contain_text(
        "names bars that the mask hides"
    )


def test_sample_view_full_image(app):
    from playwright.sync_api import expect

    page, sv = _lost_mask_unit(app)
    # the full image: an overlay on click (640 px wide, the box over it); Escape closes it
    sv.locator('figure[data-side="perturbed"] button.thumb').click()
    expect(page.locator("#overlay")).to_be_visible()
    page.wait_for_function(
        "() => { const i = document.querySelector('#overlay-img');"
        " return i && i.complete && i.naturalWidth === 640 && i.naturalHeight === 480; }"
    )
    assert page.locator("#overlay-img").get_attribute("src") == (
        "../variants/mathd/mask/images/m4.png"
    )
    expect(page.locator("#overlay svg rect.box-mask")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.locator("#overlay")).to_be_hidden()
    expect(sv).to_be_visible()  # the first Escape closes only the overlay

    # a blurred unit: the manifest gave an absolute image path under results/: relative here
    page.goto(app.url + "#" + urlencode({"open": "base-7b/mathd/blur/default", "sample": "m1-blur#0",
                                         "at": "mathd/blur/default", "smodel": "base-7b"}))  # fmt: skip
    page.wait_for_selector("#sample-view[data-ready]")
    expect(sv.locator("#sample-title")).to_have_text("Unit m1-blur#0 \u00b7 mathd/blur/default")
    full = sv.locator('figure[data-side="perturbed"] button.thumb').get_attribute("data-full")
    assert full == "../variants/mathd/blur/images/m1.png"
    expect(sv.locator("svg rect")).to_have_count(0)


def test_table_cell_links_recompute_the_number(app):
    from playwright.sync_api import expect

    page = app.page
    table = app.root / "results/tables/corruption/table1.html"
    md = (app.root / "results/tables/corruption/table1.md").read_text(encoding="utf-8")
    page.goto(table.as_uri())
    links = page.locator("table a")
    expect(links).to_have_count(6)
    hrefs = links.evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert all(
        h.startswith("../../explorer/index.html#cell=1&study=corruption&table=table1&")
        for h in hrefs
    )
    assert all(f"]({h})" in md for h in hrefs)  # the Markdown links the same URLs
    seen = {}
    for n in range(6):
        page.goto(table.as_uri())
        link = page.locator("table a").nth(n)
        with page.expect_navigation():
            link.click()
        page.wait_for_selector("#cell-check[data-ready]")
        assert page.url.startswith(app.url + "#")
        q = dict(parse_qsl(urlparse(hrefs[n]).fragment))
        want = TABLE_VALUES[(q["model"], q["metric"], q["bench"])]
        assert q["shown"] == want
        expect(page.locator("#cell-check")).to_have_class("match")
        expect(page.locator("#cell-computed")).to_have_text(want)
        line = page.locator("#cell-check .cell-line").inner_text()
        assert line == f"table: {want} \u00b7 from these rows: {want}"
        seen[(q["model"], q["metric"], q["bench"])] = want
        if (q["model"], q["metric"], q["bench"]) == ("base-7b", "rr", "all"):
            # rows used per (dataset, condition), in the study's order of its datasets;
            # the failed request left out
            cells = page.locator("#cell-breakdown tbody tr").evaluate_all(
                "trs => trs.map(tr => [...tr.children].map(td => td.textContent))"
            )
            assert cells == [
                ["MathD", "default", "clean", "8", "0", "\u2013", "62.5"],
                ["MathD", "default", "blur", "7", "1", "\u2013", "57.1"],
                ["GenQ", "default", "clean", "3", "0", "\u2013", "66.7"],
                ["GenQ", "default", "blur", "3", "0", "\u2013", "66.7"],
            ]
        if (q["model"], q["metric"], q["bench"]) == ("base-7b", "accuracy", "mathd"):
            # the link lists the cell's units, every flip direction
            expect(page.locator("#units li[data-key]")).to_have_count(8)
            assert _fragment(page)["dataset"] == "mathd"
    assert seen == TABLE_VALUES

    # a link whose shown value was altered: a mismatch
    bad = hrefs[0].replace("shown=57.1", "shown=57.3")
    assert bad != hrefs[0]
    page.goto(urljoin(table.as_uri(), bad))
    page.wait_for_selector("#cell-check[data-ready]")
    expect(page.locator("#cell-check")).to_have_class("mismatch")
    expect(page.locator("#cell-computed")).to_have_class("mismatch")
    assert page.locator("#cell-check .cell-line").inner_text() == (
        "table: 57.3 \u00b7 from these rows: 57.1"
    )


def test_keyboard_navigation(app):
    from playwright.sync_api import expect

    page = _open(app, {"open": "base-7b/mathd/blur/default"})
    expect(page.locator("#units li[data-key]")).to_have_count(3)
    keys = ["m1-blur#0", "m2-blur#0", "m2-blur#1"]
    current = page.locator('#units li[aria-current="true"]')
    expect(current).to_have_count(0)
    expect(page.locator("#sample-view")).to_be_hidden()

    def at(key: str) -> None:
        expect(current).to_have_attribute("data-key", key)
        page.wait_for_function(
            "k => new URLSearchParams(location.hash.slice(1)).get('sample') === k", arg=key
        )
        page.wait_for_selector("#sample-view[data-ready]")
        expect(page.locator("#sample-title")).to_have_text(f"Unit {key} \u00b7 mathd/blur/default")

    for key, want in [("j", 0), ("j", 1), ("k", 0), ("ArrowDown", 1), ("j", 2), ("j", 2),
                      ("ArrowUp", 1), ("k", 0), ("k", 0)]:  # fmt: skip
        page.keyboard.press(key)
        at(keys[want])
    expect(current).to_have_count(1)
    # Escape closes the sample view; Enter opens the unit again (the first, nothing selected)
    page.keyboard.press("Escape")
    expect(page.locator("#sample-view")).to_be_hidden()
    assert _sample_param(page) is None
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowDown")
    at(keys[0])
    page.keyboard.press("j")
    at(keys[1])
    page.keyboard.press("Escape")
    expect(page.locator("#sample-view")).to_be_hidden()
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("Enter")
    page.wait_for_selector("#sample-view[data-ready]")
    assert _sample_param(page) in keys
    expect(current).to_have_attribute("data-key", _sample_param(page))
    page.keyboard.press("Escape")
    expect(page.locator("#sample-view")).to_be_hidden()


def test_nothing_leaves_the_file_system(app, run_root):
    from playwright.sync_api import expect

    # exercise what loads files: a sample view with both traces and the full image
    page = _open(app, {"open": "think-7b/mathd/mask/default", "sample": "m4-mask#0",
                       "at": "mathd/mask/default", "smodel": "think-7b"})  # fmt: skip
    page.wait_for_selector("#sample-view[data-ready]")
    _wait_images(page)
    for det in page.locator("#sample-view details.trace").all():
        det.locator("summary").click()
        expect(det).to_have_attribute("data-loaded", "1")
    page.locator('#sample-view figure[data-side="clean"] button.thumb').click()
    _wait_images(page, "#overlay")
    page.keyboard.press("Escape")

    assert app.requests
    bad = [u for u in app.requests if not u.startswith(("file:", "data:", "about:"))]
    assert not bad, bad
    loaded = [urlparse(u).path for u in app.requests if u.startswith("file:")]
    assert any(p.endswith("/index.js") for p in loaded)
    assert any(p.endswith(".webp") for p in loaded)
    assert any(re.search(r"/cells/think-7b/mathd/mask/default/text\d+\.js$", p) for p in loaded)
    assert not app.errors, app.errors
    assert not app.console, app.console
    expect(page.locator("#status")).to_have_text("")

    # the written files: no absolute path of the run, no home folder, no environment value
    files = [p for p in (run_root / "results").rglob("*") if p.is_file()]
    written = [p for p in files if p.parts[len(run_root.parts) + 1] in ("explorer", "tables")]
    assert len(written) > 40
    for p in written:
        content = p.read_bytes()
        for needle in (str(run_root), "/home", "/root", SECRET):
            assert needle.encode() not in content, (p, needle)
    for name in ("index.html", "assets/explorer.js", "assets/explorer.css"):
        text = (run_root / "results/explorer" / name).read_text(encoding="utf-8")
        assert not re.search(r"https?:", text), name


def test_sample_view_screenshot(app, tmp_path):
    from playwright.sync_api import expect

    page = _open(app, {"open": "think-7b/mathd/mask/default", "sample": "m4-mask#0",
                       "at": "mathd/mask/default", "smodel": "think-7b"})  # fmt: skip
    page.wait_for_selector("#sample-view[data-ready]")
    assert page.viewport_size == VIEWPORT
    _wait_images(page)
    sv = page.locator("#sample-view")
    expect(sv.locator("h4 .flip").first).to_have_text("lost")
    expect(sv.locator('figure[data-side="perturbed"] svg rect.box-mask')).to_have_count(1)
    det = sv.locator('section[data-model="think-7b"] details.trace[data-side="perturbed"]')
    det.locator("summary").click()
    expect(det).to_have_attribute("data-loaded", "1")
    page.evaluate("() => { document.querySelector('#sample-view').scrollTop = 0; }")
    if os.environ.get("VLMROBUST_WRITE_SCREENSHOTS") == "1":
        target = REPO / "docs" / "img" / "explorer-sample.png"
    else:
        target = tmp_path / "explorer-sample.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target))
    with Image.open(target) as shot:
        assert (shot.format, shot.size) == ("PNG", (1400, 900))

"""The CPU stages on real released files at full size (docs/large-images.md): 20 MATH-V
test rows, among them ``2935.jpg`` (2520 x 8526, 21.5 MP) and the two letter answers
without options, and LogicVista's folder as released (287 of its 448 images missing;
``limit: 20`` reads its first 307 rows: the 287 without an image, then 20 samples) go
samples -> variants (clean, corrupt) -> the demo models' answers -> scored -> the
corruption study's tables; then the Idis diagram composite of the MATH-V rows, and the
whole LogicVista folder's samples report.

The data is the real-data folder (docs/real-data.md; ``$VLMROBUST_REAL_DATA``); the
MATH-V rows and their images are copied into the test's temporary folder (a dataset's
images must lie inside its folder), never into the repository. The run takes about
4 minutes on 2 cores that other jobs share (load average 8; the two demo models'
training, 1.5 minutes of it, is the largest part).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image

from vlmrobust.core.io import read_json, read_jsonl
from vlmrobust.core.paths import real_data
from vlmrobust.data.build import build_samples

from .conftest import BIN, QUICK_TRAIN, REPO, copy_repo, run

DATA = real_data(REPO)
MATHV = DATA / "mathvision"
LOGICVISTA = DATA / "logicvista" / "data"

pytestmark = [
    pytest.mark.skipif(
        not (MATHV / "data" / "test.jsonl").is_file()
        or not (LOGICVISTA / "dataset.json").is_file(),
        reason=f"the released MATH-V and LogicVista files are not at {DATA} (docs/real-data.md)",
    ),
    pytest.mark.workflow,  # a whole run on the slice
]

#: rows 1-17, the two letter answers without options (59, 434: options pictured, with
#: <image2>... parts) and the largest image of the test set (2935)
MATHV_IDS = [str(i) for i in range(1, 18)] + ["59", "434", "2935"]
CHEAP_CORRUPTIONS = ["gaussian_noise", "impulse_noise", "contrast", "brightness",
                     "jpeg_compression", "pixelate"]  # fmt: skip
#: the bound of the run, the default (samples.max_pixels): 2048 x 2048
MAX_PIXELS = 4_194_304
#: 2935.jpg scaled by sqrt(4194304 / (2520 * 8526)), each side rounded down
DOWNSCALED_2935 = [1113, 3767]


def _mathv_slice(root: Path) -> Path:
    """The 20 rows of MATH-V's test.jsonl and their images, in a folder of their own."""
    rows = [json.loads(line) for line in (MATHV / "data" / "test.jsonl").read_text().splitlines()]
    chosen = [r for r in rows if r["id"] in MATHV_IDS]
    assert [r["id"] for r in chosen] == MATHV_IDS  # the release's order
    (root / "data").mkdir(parents=True)
    (root / "images").mkdir()
    (root / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen))
    for r in chosen:
        shutil.copyfile(MATHV / r["image"], root / r["image"])
    return root


def _config(workdir: Path, mathv: Path) -> str:
    common = {"source": "local", "group": "reasoning", "conditions": ["clean", "corrupt"]}
    config = {
        "models": ["demo-base", "demo-reasoning"],
        "demo": {"n_per_family": 4, "families": ["diagram", "chart"], "train": QUICK_TRAIN},
        "decoding": {"max_new_tokens": 8},
        "conditions": {
            "clean": {"perturbation": "none"},
            # the corruptions that take well under a second on a 4-megapixel image (the
            # blurs, frost and elastic take seconds): the bound is under test here
            "corrupt": {"perturbation": "corruption", "methods": CHEAP_CORRUPTIONS},
        },
        "datasets": {
            "mathvision": {
                **common,
                "adapter": "mathvision",
                "path": str(mathv),
                "split": "test",
                "display": "MathVision",
            },
            "logicvista": {
                **common,
                "adapter": "logicvista",
                "path": str(LOGICVISTA),
                "display": "LogicVista",
                "limit": 20,
            },
        },
    }
    path = workdir / "config" / "real-slice.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path.relative_to(workdir))


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real")
    workdir = copy_repo(root / "repo")
    configfile = _config(workdir, _mathv_slice(root / "mathv"))
    run([str(BIN / "snakemake"), "--cores", "2", "--configfile", configfile], workdir)
    return workdir


def test_the_samples_reports_count_what_the_release_holds(real_run):
    mv = read_json(real_run / "results/samples/mathvision/report.json")
    assert (mv["rows_read"], mv["samples_written"], mv["skipped"]) == (20, 20, 0)
    assert (mv["max_pixels"], mv["images_downscaled"], mv["downscaled_samples"]) == (
        MAX_PIXELS,
        1,
        ["2935"],
    )
    assert mv["letter_answers_without_options"] == ["59", "434"]
    assert mv["questions_with_image_parts"] == 2  # 59 (<image2>-<image4>), 434 (<image2>)
    lv = read_json(real_run / "results/samples/logicvista/report.json")
    # the release's first 287 rows (v1_0 ... v1_286) name an image it does not ship
    assert (lv["rows_read"], lv["samples_written"], lv["skipped"]) == (307, 20, 287)
    assert lv["skipped_by_reason"] == {"image file not found": 287}
    assert [r["id"] for r in lv["skipped_rows"]] == [f"v1_{i}" for i in range(287)]
    first = lv["skipped_rows"][0]["reason"]
    assert first == f"image file not found: {LOGICVISTA / 'images' / 'v1_0.png'}"
    assert any("287 bad row(s) skipped" in w for w in lv["warnings"])


def test_logicvista_as_released(tmp_path):
    """The whole folder: 448 rows, 287 images missing, v1_382 without a question."""
    out = tmp_path / "samples.jsonl"
    spec = {"adapter": "logicvista", "source": "local", "path": str(LOGICVISTA),
            "on_bad_row": "skip"}  # fmt: skip
    lv = build_samples("logicvista", spec, out, tmp_path / "report.json")
    assert (lv["rows_read"], lv["samples_written"], lv["skipped"]) == (448, 160, 288)
    assert lv["skipped_by_reason"] == {"image file not found": 287, "question is missing": 1}
    assert [r["id"] for r in lv["skipped_rows"] if r["reason"] == "question is missing"] == [
        "v1_382"
    ]
    assert lv["images_downscaled"] == 0  # the largest is 1328 x 1352 (1.8 MP)


def test_the_samples_keep_the_bound_and_say_what_was_scaled(real_run):
    samples = {
        s["sample_id"]: s for s in read_jsonl(real_run / "results/samples/mathvision/samples.jsonl")
    }
    big = samples["mathvision-2935"]
    assert big["meta"]["downscaled_images"] == [
        {"file": "mathvision-2935_0.png", "from": [2520, 8526], "to": DOWNSCALED_2935}
    ]
    with Image.open(real_run / big["images"][0]) as im:
        assert list(im.size) == DOWNSCALED_2935
    for sid in ("mathvision-59", "mathvision-434"):
        s = samples[sid]
        assert (s["answer"], s["answer_type"], s["choices"]) == ("C", "letter", list("ABCDE"))
        assert s["meta"]["options_pictured"] is True
    assert "<image2>" in samples["mathvision-59"]["question"]  # kept verbatim
    others = [s for sid, s in samples.items() if sid != "mathvision-2935"]
    assert all("downscaled_images" not in s["meta"] for s in others)
    assert all(s["images"][0].endswith(".jpg") for s in others)  # the released bytes


def test_every_variant_image_is_within_max_pixels(real_run):
    sizes = {}
    for dataset in ("mathvision", "logicvista"):
        for condition in ("clean", "corrupt"):
            rows = read_jsonl(real_run / f"results/variants/{dataset}/{condition}/manifest.jsonl")
            assert len(rows) == 20
            for row in rows:
                with Image.open(real_run / row["images"][0]) as im:
                    assert im.size[0] * im.size[1] <= MAX_PIXELS
                    sizes[(row["sample_id"], condition)] = list(im.size)
    assert sizes[("mathvision-2935", "clean")] == sizes[("mathvision-2935", "corrupt")]
    assert sizes[("mathvision-2935", "corrupt")] == DOWNSCALED_2935


def test_every_answer_is_scored_and_the_tables_have_their_rows(real_run):
    with open(real_run / "results/scored/summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    got = {(r["model"], r["dataset"], r["condition"]): int(r["n"]) for r in summary}
    expected = {}
    for model in ("demo-base", "demo-reasoning"):
        for dataset, n in (("mathvision", 20), ("logicvista", 20)):
            for condition in ("clean", "corrupt"):
                expected[(model, dataset, condition)] = n
    assert got == expected
    for model in ("demo-base", "demo-reasoning"):
        rows = read_jsonl(real_run / f"results/outputs/{model}/mathvision/corrupt/default.jsonl")
        assert len(rows) == 20 and all(r["error"] is None for r in rows)
    with open(real_run / "results/tables/corruption/table1.csv") as fh:
        table1 = list(csv.DictReader(fh))
    assert [r["Model"] for r in table1] == ["Demo-Base", "Demo-Reasoning"]
    assert list(table1[0])[:3] == ["Family", "Model", "Type"]
    with open(real_run / "results/tables/corruption/table8.csv") as fh:
        table8 = list(csv.DictReader(fh))
    assert [r["Model"] for r in table8] == ["Demo-Base", "Demo-Reasoning"]
    assert list(table8[0])[-2:] == ["LogicVista", "MathVision"]


def test_the_idis_composite_of_2935_stays_within_the_bound(real_run):
    samples = real_run / "results/samples/mathvision/samples.jsonl"
    spec = {"perturbation": "diagram", "semantics": ["irrelevant"], "counts": [1],
            "irrelevant_samples": "results/samples/logicvista/samples.jsonl"}  # fmt: skip
    out = "results/variants/mathvision/idis-diagram/manifest.jsonl"
    cmd = [str(BIN / "vlmrobust"), "variants", "--samples", str(samples), "--condition",
           "idis-diagram", "--spec", json.dumps(spec), "--max-pixels", str(MAX_PIXELS),
           "--out", out]  # fmt: skip
    run(cmd, real_run)
    rows = {r["sample_id"]: r for r in read_jsonl(real_run / out)}
    assert len(rows) == 20
    big = rows["mathvision-2935"]["params"]
    # unbounded: a ceil(3767 / 0.6) = 6279 px canvas (14210 px from the original);
    # bounded: isqrt(4194304) = 2048, the diagram's longer side floor(0.6 * 2048) = 1228
    assert big["canvas"] == 2048 and big["target_source_size"] == DOWNSCALED_2935
    assert big["target_size"] == [363, 1228]  # 1113 x 1228 / 3767, rounded
    for row in rows.values():
        with Image.open(real_run / row["images"][0]) as im:
            assert im.size[0] == im.size[1] == row["params"]["canvas"] <= 2048

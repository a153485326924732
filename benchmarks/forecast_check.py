"""The run forecast (``vlmrobust forecast``) against a run that was made: requests, prompt
and generated tokens per request, and engine time, per model.

    python benchmarks/forecast_check.py --write-config RUN_DIR   # the small demo config
    (cd RUN_DIR && snakemake --cores 2 --configfile config/forecast-check.yaml)
    python benchmarks/forecast_check.py --run-dir RUN_DIR [--config config/forecast-check.yaml]

``--write-config`` writes ``config/forecast-check.yaml`` into a copy of the repository
(RUN_DIR): the default run's configuration cut to two demo families with the corruption
study, the VisArgs-like masking study (CRM's two stages) and two Idis slices (5 sampled
responses per question; clean, resized, objects, diagram and textual conditions), no
construction and no attention blocking (docs/forecast.md).

``--measure-disk`` measures the bytes per pixel of ``workflow/vlmrobust/forecast/
disk.yaml`` for every ``variants.format``: the package's own ``corrupt_image``, every
image encoded by the variants stage's own ``encode_image`` (``perturb/storage.py``) as
``png`` and as ``webp`` (printed: each, WebP's share of PNG, and how many images
``webp`` stored as PNG), on scikit-image's six bundled RGB photos (every method at
severities 2 and 4; clean; the PNG of a one-box ``fill_box`` mask) and on
``--mathv-images`` MATH-V testmini images (one seeded random method and severity each,
as ``assignment: random``; the real-data folder's ``mathvision``, docs/real-data.md).

The comparison prints three forecasts of the same configuration — **before** the run
(built in an empty folder holding only the configuration and the registry: every count
from the configuration, every size and length assumed), **after** it (the run's samples
and manifests read: counts and image sizes measured) and **pilot** (after, with
``--pilot RUN_DIR/results/outputs``) — beside what the outputs files measured: their
rows, mean ``prompt_tokens`` and ``completion_tokens``, and the inference jobs' wall
time from Snakemake's benchmark files (``logs/benchmarks/infer/``; the jobs of a model
share one service, so their times overlap with the service's start and with each
other: an upper bound of the engine's busy time).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.io import iter_jsonl  # noqa: E402
from vlmrobust.core.paths import real_data  # noqa: E402
from vlmrobust.forecast import build_forecast, read_pilot  # noqa: E402
from vlmrobust.plan import RunPlan  # noqa: E402

CONFIG = "config/forecast-check.yaml"
KEEP = ["demo-chart", "demo-diagram", "demo-visargs", "demo-idis-perception", "demo-idis-math",
        "demo-idis-figures", "demo-idis-tables"]  # fmt: skip


def write_config(run_dir: Path) -> Path:
    """config/forecast-check.yaml in ``run_dir``, cut from its config/config.yaml."""
    config = yaml.safe_load((run_dir / "config" / "config.yaml").read_text())
    config["run_name"] = "forecast-check"
    config["datasets"] = {k: config["datasets"][k] for k in KEEP}
    config["datasets"]["demo-idis-perception"]["conditions"] = ["clean", "idis-res", "idis-objects"]
    config["datasets"]["demo-idis-math"]["conditions"] = ["clean", "idis-diagram", "idis-textual"]
    config["construct"] = {}
    config["idis"]["blocking"]["models"] = []
    config["demo"]["families"] = ["chart", "diagram", "premises"]
    path = run_dir / CONFIG
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def forecasts(run_dir: Path, config: str, gpus: int = 2) -> dict[str, object]:
    """The before / after / pilot forecasts (module docstring)."""
    registry = yaml.safe_load((run_dir / config).read_text()).get(
        "model_registry", "config/models.yaml"
    )
    with tempfile.TemporaryDirectory() as empty:
        for name in (registry, config):  # the configuration and the registry it names
            (Path(empty) / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(run_dir / name, Path(empty) / name)
        with contextlib.chdir(empty):
            before = build_forecast(RunPlan.load(config), "before", gpus=gpus)
    with contextlib.chdir(run_dir):
        after = build_forecast(RunPlan.load(config), "after", gpus=gpus)
        pilot = build_forecast(
            RunPlan.load(config), "pilot", gpus=gpus, pilot=read_pilot("results/outputs")
        )
    return {"before": before, "after": after, "pilot": pilot}


def measured(run_dir: Path) -> dict[tuple, dict[str, float]]:
    """Per (model, dataset, condition, prompt): rows, mean prompt and completion tokens
    of the gathered outputs, and the summed wall time of its inference jobs."""
    out: dict[tuple, dict[str, float]] = {}
    for path in sorted((run_dir / "results" / "outputs").glob("*/*/*/*.jsonl")):
        rows = [r for _, r in iter_jsonl(path) if not r.get("error")]
        if not rows:
            continue
        # the prompt setting from the path (a row names the builder: `short` for `default`)
        key = (*path.parts[-4:-1], path.stem)
        out[key] = {
            "requests": len(rows),
            "prompt": sum(r["prompt_tokens"] or 0 for r in rows) / len(rows),
            "generated": sum(r["completion_tokens"] or 0 for r in rows) / len(rows),
            "job_s": 0.0,
        }
    for tsv in (run_dir / "logs" / "benchmarks" / "infer").glob("*/*/*/*/*.tsv"):
        model, dataset, condition, prompt = tsv.parts[-5:-1]
        with open(tsv, newline="") as fh:
            seconds = sum(float(r["s"]) for r in csv.DictReader(fh, delimiter="\t"))
        if (model, dataset, condition, prompt) in out:
            out[(model, dataset, condition, prompt)]["job_s"] += seconds
    return out


def _cells(forecast) -> dict[tuple, object]:
    return {(c.model, c.dataset, c.condition, c.prompt): c for c in forecast.cells}


def per_cell_table(runs: dict[str, object], seen: dict[tuple, dict[str, float]]) -> list[str]:
    before, after, pilot = (_cells(runs[k]) for k in ("before", "after", "pilot"))
    lines = [
        "| model | dataset | condition | prompt | requests before / after / run | "
        "prompt tok/req before / after / run | generated tok/req before / pilot / run |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted(after):
        b, a, p, m = before.get(key), after[key], pilot[key], seen.get(key)
        if m is None or b is None:
            continue
        lines.append(
            f"| {' | '.join(key)} | {b.requests:g} / {a.requests:g} / {m['requests']:g} | "
            f"{b.prompt_tokens:.0f} / {a.prompt_tokens:.0f} / {m['prompt']:.0f} | "
            f"{b.generated:.0f} / {p.generated:.1f} / {m['generated']:.1f} |"
        )
    return lines


def per_model_table(runs: dict[str, object], seen: dict[tuple, dict[str, float]]) -> list[str]:
    lines = [
        "| model | forecast | requests | prompt Mtok | generated Mtok | engine time (s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for model in sorted({k[0] for k in seen}):
        for name, run in runs.items():
            cells = [c for c in run.cells if c.model == model]
            req = sum(c.requests for c in cells)
            prompt = sum(c.requests * (c.prompt_tokens or 0) for c in cells) / 1e6
            gen = sum(c.requests * (c.generated or 0) for c in cells) / 1e6
            engine = sum(e.seconds for e in run.engines if e.model == model)
            lines.append(
                f"| {model} | {name} | {req:g} | {prompt:.4f} | {gen:.4f} | {engine:.0f} |"
            )
        rows = {k: v for k, v in seen.items() if k[0] == model}
        req = sum(v["requests"] for v in rows.values())
        prompt = sum(v["requests"] * v["prompt"] for v in rows.values()) / 1e6
        gen = sum(v["requests"] * v["generated"] for v in rows.values()) / 1e6
        jobs = sum(v["job_s"] for v in rows.values())
        lines.append(f"| {model} | **run** | {req:g} | {prompt:.4f} | {gen:.4f} | "
                     f"{jobs:.0f} (jobs) |")  # fmt: skip
    return lines


METHODS = ["blank", "gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise",
           "gaussian_blur", "glass_blur", "defocus_blur", "motion_blur", "zoom_blur", "fog",
           "frost", "snow", "spatter", "contrast", "brightness", "saturate",
           "jpeg_compression", "pixelate", "elastic_transform"]  # fmt: skip
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "hubble_deep_field.jpg"]  # fmt: skip


def _stored(image) -> dict[str, tuple[int, str]]:
    """The bytes of ``image`` and the format it is stored in, as the variants stage
    writes it under each ``variants.format`` (its own encoder, ``perturb.storage``)."""
    from vlmrobust.perturb.storage import FORMATS, encode_image

    out = {}
    for fmt in FORMATS:
        data, suffix = encode_image(image, fmt)
        out[fmt] = (len(data), suffix.lstrip("."))
    return out


def measure_disk(mathv: Path, n_mathv: int) -> dict[str, float]:
    """Bytes per pixel, corrupted and clean, of photos and of MATH-V diagrams, per
    ``variants.format`` (every image encoded by the stage's own ``encode_image``; the
    ``webp_stored_as_png`` entry counts the images ``webp`` stores as PNG, where WebP
    cannot hold them), the one-box mask PNG of the photos, and per corruption method
    on the photos."""
    import random

    import skimage

    from vlmrobust.perturb.corruption import corrupt_image
    from vlmrobust.perturb.masking import fill_box
    from vlmrobust.perturb.storage import FORMATS
    from vlmrobust.perturb.variants import open_shown

    fallback = {"webp": 0, "images": 0}

    def stored(image) -> dict[str, int]:
        found = _stored(image)
        fallback["images"] += 1
        fallback["webp"] += found["webp"][1] == "png"
        return {fmt: n for fmt, (n, _) in found.items()}

    per_method = {(m, f): [] for m in METHODS for f in FORMATS}
    clean = dict.fromkeys(FORMATS, 0)
    mask = pixels = 0
    for name in PHOTOS:
        im = open_shown(str(Path(skimage.data.__file__).parent / name), name)
        if im.width * im.height > 600_000:
            im = im.resize((im.width // 2, im.height // 2))
        px = im.width * im.height
        clean = {f: clean[f] + n for f, n in stored(im).items()}
        box = (im.width // 4, im.height // 4, 3 * im.width // 4, 3 * im.height // 4)
        mask, pixels = mask + _stored(fill_box(im, box, "black", 0.0)[1])["png"][0], pixels + px
        for m in METHODS:
            for sev in [None] if m == "blank" else [2, 4]:
                for f, n in stored(corrupt_image(im, m, sev, 7)).items():
                    per_method[(m, f)].append(n / px)
    out = {
        f"photos_corrupted_{f}": sum(
            sum(per_method[(m, f)]) / len(per_method[(m, f)]) for m in METHODS
        )
        / len(METHODS)
        for f in FORMATS
    }
    out |= {f"photos_clean_{f}": clean[f] / pixels for f in FORMATS}
    out["photos_box_mask_png"] = mask / pixels
    out |= {f"photos_{m}_{f}": sum(v) / len(v) for (m, f), v in per_method.items()}
    rows = [
        json.loads(line) for line in (mathv / "data" / "testmini.jsonl").read_text().splitlines()
    ]
    rng = random.Random(0)
    corrupted, clean = dict.fromkeys(FORMATS, 0), dict.fromkeys(FORMATS, 0)
    pixels = 0
    for row in rng.sample(rows, n_mathv):
        im = open_shown(str(mathv / row["image"]), row["image"])
        if im.width * im.height > 4_194_304:  # the samples stage would downscale it first
            continue
        m = METHODS[rng.randrange(len(METHODS))]
        sev = None if m == "blank" else rng.randrange(1, 6)
        done = stored(corrupt_image(im, m, sev, rng.randrange(2**32)))
        corrupted = {f: corrupted[f] + n for f, n in done.items()}
        clean = {f: clean[f] + n for f, n in stored(im).items()}
        pixels += im.width * im.height
    out |= {f"mathv_corrupted_{f}": corrupted[f] / pixels for f in FORMATS}
    out |= {f"mathv_clean_{f}": clean[f] / pixels for f in FORMATS}
    out["webp_stored_as_png"] = fallback["webp"]
    out["images_encoded"] = fallback["images"]
    return out


def disk_table(runs: dict[str, object]) -> list[str]:
    """The variants' disk forecast before the run against the images folders after it."""
    after = {(d.dataset, d.condition): d for d in runs["after"].disk}
    lines = ["| dataset | condition | images before / run | MB before / run |",
             "|---|---|---|---|"]  # fmt: skip
    for d in runs["before"].disk:
        a = after.get((d.dataset, d.condition))
        if a is None or d.bytes is None or a.bytes is None:
            continue
        lines.append(f"| {d.dataset} | {d.condition} | {d.images:g} / {a.images:g} | "
                     f"{d.bytes / 1e6:.2f} / {a.bytes / 1e6:.2f} |")  # fmt: skip
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-config", type=Path, metavar="RUN_DIR")
    ap.add_argument("--run-dir", type=Path)
    ap.add_argument("--config", default=CONFIG)
    ap.add_argument("--gpus", type=int, default=2, help="the GPUs of the run (its wall time)")
    ap.add_argument("--json", type=Path, help="also write the numbers as JSON here")
    ap.add_argument("--measure-disk", action="store_true")
    ap.add_argument("--mathv-images", type=int, default=60)
    ap.add_argument("--mathv", type=Path, default=real_data(REPO) / "mathvision")
    args = ap.parse_args()
    if args.measure_disk:
        found = measure_disk(args.mathv, args.mathv_images)
        for key, value in found.items():
            if key.endswith("_webp"):
                png = found[key.removesuffix("_webp") + "_png"]
                print(f"{key}: {value:.3f} bytes per pixel ({value / png:.0%} of PNG)")
            elif key in ("webp_stored_as_png", "images_encoded"):
                print(f"{key}: {value}")
            else:
                print(f"{key}: {value:.3f} bytes per pixel")
        return 0
    if args.write_config:
        print(write_config(args.write_config))
        return 0
    if args.run_dir is None:
        ap.error("--run-dir (a finished run) or --write-config")
    runs = forecasts(args.run_dir.resolve(), args.config, args.gpus)
    seen = measured(args.run_dir.resolve())
    print("\n".join(per_model_table(runs, seen)) + "\n")
    print("\n".join(per_cell_table(runs, seen)) + "\n")
    print("\n".join(disk_table(runs)))
    if args.json:
        data = {k: {"/".join(key): v for key, v in seen.items()} for k in ["measured"]}
        args.json.write_text(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

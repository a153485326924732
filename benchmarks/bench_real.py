"""The samples and variants stages on the real MATH-V and LogicVista data, at full size.

    .venv/bin/python benchmarks/bench_real.py --data DATA [--rows 100]
        [--corruptions gaussian_noise,glass_blur] [--severities 1,2,3,4,5] [--cores 2]
        [--threads 1] [--format png] [--dir DIR] [--json out.json] [--no-second-run]
        [--no-library]

Writes a run configuration (``DIR/run1/config.yaml``) with three datasets read from
``--data`` (the real-data folder, docs/real-data.md: ``mathvision/`` and
``logicvista/``, read in place, never copied):

- ``mathvision``: the MATH-V test split (``source: local``, ``limit: --rows``) under
  the clean condition, every corruption and the Idis condition;
- ``logicvista``: LogicVista (``on_bad_row: skip``: 287 of its 448 images are not
  released; ``limit: --rows``) under the clean condition and every corruption;
- ``logicvista-pool``: all of LogicVista under the clean condition: its table images are
  the Idis condition's irrelevant figures;

and the conditions ``clean`` (``none``), one ``corrupt-<method>`` per corruption
(``assignment: all``, that method at every ``--severities``; ``blank`` once), so each
corruption is a variants job of its own, and ``idis-diagram`` (the Idis-math visual
distractor of config/paper.yaml, ``perturbation: diagram``; MATH-V has no concept
families, so only ``irrelevant`` figures: LogicVista tables, k = 1-4 around the diagram).
Then runs ``snakemake --cores N`` twice in that folder (the repository's Snakefile, its
code on PYTHONPATH): the samples files first, then the variant manifests, and reports

- per stage the wall time of its Snakemake call (DAG included) and the jobs' seconds;
- per corruption job: images, wall seconds (the rule's ``benchmark:`` file), images/s,
  and the library's own cost: ``imagecorruptions.corrupt`` timed directly on the same
  images (the samples' images as RGB arrays, each method x severity once per image,
  one OpenCV thread, after a warm-up), as images/s and the job's time over it;
- peak RSS per job: Snakemake's ``max_rss`` of the job (the process tree: worker
  processes included), from the second run (below);
- disk per condition (the files under ``results/variants/<dataset>/<condition>/``);
- determinism: the second run, in a fresh folder (``DIR/run2``), must give the same
  manifests, sha256 for sha256 (``--no-second-run`` skips it: no RSS, no check).

Before it runs it prints the forecast disk (the source megapixels of the rows times the
bytes per megapixel bench_storage.py measured) and stops when the runs would not fit in
90% of the free disk (``--force`` runs anyway). All of MATH-V test and LogicVista
(``--rows 0``) at 20 x 5 is 307,000 corrupted images, about 76 GB per run as PNG
(62 GB as WebP).

Smoke: ``--rows 10 --corruptions gaussian_noise,glass_blur --severities 3``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.paths import real_data  # noqa: E402
from vlmrobust.core.records import read_samples, read_variants  # noqa: E402
from vlmrobust.perturb.corruption import CORRUPTION_METHODS  # noqa: E402
from vlmrobust.perturb.variants import open_shown  # noqa: E402

DATASETS = ("mathvision", "logicvista")
POOL = "logicvista-pool"
IDIS = "idis-diagram"


def add_data_arg(parser: argparse.ArgumentParser) -> None:
    """``--data``: the real-data folder (docs/real-data.md), for every real-data benchmark."""
    parser.add_argument("--data", type=Path, default=real_data(REPO),
                        help="the real-data folder (docs/real-data.md)")  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arg(p)
    p.add_argument("--rows", type=int, default=100, help="rows per dataset (0: all)")
    p.add_argument("--corruptions", default=",".join(CORRUPTION_METHODS), help="comma list")
    p.add_argument("--severities", default="1,2,3,4,5", help="comma list")
    p.add_argument("--cores", type=int, default=2, help="snakemake --cores")
    p.add_argument("--threads", type=int, default=1, help="threads.variants of the run")
    p.add_argument("--format", default="png", choices=["png", "webp"], help="variants.format")
    p.add_argument("--dir", type=Path, default=None, help="where to run (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    p.add_argument("--no-second-run", action="store_true", help="no RSS, no determinism check")
    p.add_argument("--no-library", action="store_true",
                   help="do not time imagecorruptions itself (at full size that alone is ~1 core-hour)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="run even if the disk forecast says no")
    args = p.parse_args(argv)
    args.corruptions = [m for m in args.corruptions.split(",") if m]
    args.severities = [int(s) for s in args.severities.split(",") if s]
    unknown = sorted(set(args.corruptions) - set(CORRUPTION_METHODS))
    if unknown:
        p.error(f"unknown corruption(s) {unknown}; known: {', '.join(CORRUPTION_METHODS)}")
    return args


def condition_name(method: str) -> str:
    return f"corrupt-{method.replace('_', '-')}"


def idis_condition() -> dict:
    """The Idis-math visual distractor: LogicVista's table images (the pool dataset's
    samples) as irrelevant figures around the diagram."""
    return {"perturbation": "diagram", "semantics": ["irrelevant"],
            "irrelevant_samples": f"results/samples/{POOL}/samples.jsonl"}  # fmt: skip


def pool_dataset(data: Path) -> dict:
    """All of LogicVista under the clean condition, answered by no model: the figures of
    :func:`idis_condition`."""
    return {"adapter": "logicvista", "source": "local", "on_bad_row": "skip",
            "path": str(data / "logicvista" / "data"), "models": [], "conditions": ["clean"]}  # fmt: skip


def make_config(args: argparse.Namespace) -> dict:
    """The run configuration (see the module docstring)."""
    data = args.data.resolve()
    corrupt = {condition_name(m): {"perturbation": "corruption", "assignment": "all",
               "methods": [m], "severities": args.severities} for m in args.corruptions}  # fmt: skip
    limit = {"limit": args.rows} if args.rows else {}
    return {
        "run_name": "bench-real",
        "seed": 0,
        "model_registry": str(REPO / "config" / "models.yaml"),
        "models": [],
        "threads": {"variants": args.threads},
        "variants": {"format": args.format},
        "conditions": {
            "clean": {"perturbation": "none"},
            **corrupt,
            IDIS: idis_condition(),
        },
        "datasets": {
            "mathvision": {
                "adapter": "mathvision",
                "source": "local",
                "split": "test",
                "path": str(data / "mathvision"),
                "models": [],
                **limit,
                "conditions": ["clean", *corrupt, IDIS],
            },  # fmt: skip
            "logicvista": {
                "adapter": "logicvista",
                "source": "local",
                "on_bad_row": "skip",
                "path": str(data / "logicvista" / "data"),
                "models": [],
                **limit,
                "conditions": ["clean", *corrupt],
            },  # fmt: skip
            POOL: pool_dataset(data),
        },
    }


def snakemake(work: Path, cores: int, targets: list[str]) -> float:
    """Run Snakemake on ``targets`` in ``work``; its wall seconds (a failure stops here)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work),
           "--configfile", str(work / "config.yaml"), "--cores", str(cores), *targets]  # fmt: skip
    t0 = time.perf_counter()
    with open(work / "snakemake.log", "a") as log:
        code = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    if code:
        raise SystemExit(f"snakemake failed (exit {code}); see {work / 'snakemake.log'}")
    return time.perf_counter() - t0


def run(work: Path, config: dict, cores: int) -> dict:
    """Both stages in ``work``: their wall seconds, and the targets of each."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    samples = [f"results/samples/{d}/samples.jsonl" for d in config["datasets"]]
    manifests = [
        f"results/variants/{d}/{c}/manifest.jsonl"
        for d, spec in config["datasets"].items()
        for c in spec["conditions"]
    ]
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    times = {
        "samples_s": snakemake(work, cores, samples),
        "variants_s": snakemake(work, cores, manifests),
    }
    load += " -> " + "/".join(f"{x:.1f}" for x in os.getloadavg())
    return {**times, "overlap": overlap(work / "snakemake.log"), "load": load}


def job_record(work: Path, rule: str, name: str) -> dict:
    """Wall seconds, peak RSS (MB) and CPU seconds of one job (its ``benchmark:`` file)."""
    with open(work / "logs" / "benchmarks" / rule / f"{name}.tsv") as fh:
        row = next(csv.DictReader(fh, delimiter="\t"))
    value = lambda k: float(row[k]) if row.get(k) not in (None, "", "NA", "-") else None  # noqa: E731
    return {"s": value("s"), "max_rss_mb": value("max_rss"), "cpu_s": value("cpu_time")}


def disk(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def manifest_hashes(work: Path, manifest: str) -> list[tuple[str, list[str]]]:
    return [(v.variant_id, v.sha256) for v in read_variants(work / manifest)]


def library_rates(work: Path, dataset: str, methods: list[str], sevs: list[int]) -> dict:
    """method -> (images, seconds) of ``imagecorruptions.corrupt`` itself on the
    dataset's sample images (RGB, as ``corrupt_image`` gives the library), one call per
    image x severity, after one warm-up call per method."""
    import cv2
    import numpy as np
    from imagecorruptions import corrupt

    cv2.setNumThreads(1)
    images = [
        np.asarray(open_shown(str(work / p), s.sample_id).convert("RGB"))
        for s in read_samples(work / f"results/samples/{dataset}/samples.jsonl")
        for p in s.images
    ]
    out = {}
    for method in methods:
        if method == "blank":  # not a library method: the stage draws one colour
            continue
        kw = {"seed": 0} if method in ("glass_blur", "impulse_noise") else {}
        corrupt(np.zeros((32, 32, 3), np.uint8), corruption_name=method, severity=1, **kw)
        t0 = time.perf_counter()
        for rgb in images:
            for sev in sevs:
                np.random.seed(0)
                corrupt(rgb, corruption_name=method, severity=sev, **kw)
        out[method] = (len(images) * len(sevs), time.perf_counter() - t0)
    return out


def job_rows(args: argparse.Namespace, config: dict, works: list[Path]) -> list[dict]:
    """One row per variants job: images, time, rates, RSS, disk and determinism."""
    rows = []
    for dataset, spec in config["datasets"].items():
        methods = {condition_name(m): m for m in args.corruptions}
        lib = {}
        if not args.no_library and any(c in methods for c in spec["conditions"]):
            lib = library_rates(works[0], dataset, args.corruptions, args.severities)
        for cond in spec["conditions"]:
            manifest = f"results/variants/{dataset}/{cond}/manifest.jsonl"
            hashes = manifest_hashes(works[0], manifest)
            first = job_record(works[0], "variants", f"{dataset}/{cond}")
            row = {"dataset": dataset, "condition": cond, "variants": len(hashes),
                   "images": sum(len(h) for _, h in hashes), "s": first["s"],
                   "disk_mb": disk((works[0] / manifest).parent) / 1e6,
                   "client_rss_mb": first["max_rss_mb"]}  # fmt: skip
            method = methods.get(cond)
            if method in lib and row["s"]:
                n, sec = lib[method]
                row.update(images_per_s=row["images"] / row["s"], library_per_s=n / sec)
            if len(works) > 1:
                second = job_record(works[1], "variants", f"{dataset}/{cond}")
                row.update(rss_mb=second["max_rss_mb"], own_process_s=second["s"],
                           same_sha256=manifest_hashes(works[1], manifest) == hashes)  # fmt: skip
            rows.append(row)
    return rows


STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def overlap(log: Path, rule: str = "variants") -> dict:
    """From a Snakemake log: the most ``rule`` jobs running at once, and their mean
    number over the span from the first start to the last end (1 s stamps)."""
    stamp, pending, start, spans = None, False, {}, []
    for line in log.read_text(errors="replace").splitlines():
        if m := STAMP.match(line):
            stamp = dt.datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif line.strip() in (f"localrule {rule}:", f"rule {rule}:"):
            pending = True
        elif pending and (m := re.match(r"^\s+jobid: (\d+)$", line)):
            start[m.group(1)], pending = stamp, False
        elif (m := re.match(rf"^Finished jobid: (\d+) \(Rule: {rule}\)$", line)) and m.group(
            1
        ) in start:
            spans.append((start.pop(m.group(1)), stamp))
    if not spans:
        return {"max": 0, "mean": 0.0}
    edges = sorted(
        [(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1])
    )
    running = most = 0
    for _, d in edges:
        running += d
        most = max(most, running)
    span = (max(b for _, b in spans) - min(a for a, _ in spans)).total_seconds()
    busy = sum((b - a).total_seconds() for a, b in spans)
    return {"max": most, "mean": busy / span if span else 0.0}


def print_report(args, runs: list[dict], rows: list[dict], samples: list[dict]) -> None:
    print(f"# {platform.python_version()} {platform.machine()}, {os.cpu_count()} CPUs, load "
          f"{runs[0]['load']}; rows {args.rows or 'all'}, severities {args.severities}, "
          f"--cores {args.cores}, threads.variants {args.threads}, format {args.format}")  # fmt: skip
    for i, r in enumerate(runs, 1):
        how = "warm job runner" if i == 1 else "every job in its own process"
        print(f"run {i} ({how}): samples stage {r['samples_s']:.1f} s, variants stage "
              f"{r['variants_s']:.1f} s (wall, DAG included); variants jobs at once: at most "
              f"{r['overlap']['max']}, {r['overlap']['mean']:.2f} on average")  # fmt: skip
    for s in samples:
        print(f"samples {s['dataset']:<16} {s['s']:>6.1f} s  rss {s['rss_mb'] or 0:>6.0f} MB")
    print(f"{'dataset':<12} {'condition':<28} {'img':>5} {'s':>6} {'img/s':>6} {'lib/s':>7} "
          f"{'job/lib':>7} {'rss MB':>7} {'disk MB':>8} {'same':>5}")  # fmt: skip
    for r in rows:
        rate, lib = r.get("images_per_s"), r.get("library_per_s")
        print(f"{r['dataset']:<12} {r['condition']:<28} {r['images']:>5} {r['s']:>6.1f} "
              f"{_f(rate, 6, 1)} {_f(lib, 7, 1)} {_f(lib / rate if rate and lib else None, 7, 2)} "
              f"{_f(r.get('rss_mb'), 7, 0)} {r['disk_mb']:>8.2f} {str(r.get('same_sha256', '-')):>5}")  # fmt: skip
    total = sum(r["disk_mb"] for r in rows)
    print(f"variants on disk: {total:.1f} MB; client RSS under the runner (not the job's): "
          f"{max(r['client_rss_mb'] or 0 for r in rows):.0f} MB at most")  # fmt: skip


def _f(value: float | None, width: int, digits: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


#: Bytes per megapixel of a corrupted image, the mean over the 20 corruptions at
#: severities 3 and 5 on MATH-V (benchmarks/bench_storage.py), and of one Idis variant.
MB_PER_MP = {"png": 0.40, "webp": 0.32}
IDIS_MB = 0.35


def source_megapixels(data: Path, rows: int) -> dict[str, tuple[int, float]]:
    """dataset -> (images, megapixels) of the first ``rows`` usable rows (0: all)."""
    from PIL import Image

    lines = (data / "mathvision" / "data" / "test.jsonl").read_text().splitlines()
    mv = [data / "mathvision" / json.loads(x)["image"] for x in lines if x.strip()]
    table = json.loads((data / "logicvista" / "data" / "dataset.json").read_text())
    folder = data / "logicvista" / "data" / "images"
    lv = [folder / r["imagename"] for r in table.values() if (folder / r["imagename"]).is_file()]
    out = {}
    for name, files in (("mathvision", mv), ("logicvista", lv)):
        files = files[:rows] if rows else files
        out[name] = (len(files), sum(w * h for w, h in (Image.open(f).size for f in files)) / 1e6)
    return out


def preflight(args: argparse.Namespace, where: Path, runs: int) -> None:
    """Print the forecast disk of the run's variants; stop when it would not fit."""
    import shutil

    per = sum(1 if m == "blank" else len(args.severities) for m in args.corruptions)
    src = source_megapixels(args.data.resolve(), args.rows)
    mb = sum(mp for _, mp in src.values()) * per * MB_PER_MP[args.format]
    mb += src["mathvision"][0] * 4 * IDIS_MB
    where.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(where).free / 1e6
    print(f"# forecast: {sum(n for n, _ in src.values()) * per:,} corrupted images, about "
          f"{mb:,.0f} MB per run x {runs}; {free / 1e3:.0f} GB free in {where}")  # fmt: skip
    if mb * runs > 0.9 * free and not args.force:
        raise SystemExit("not enough disk for that: fewer --rows, or --force")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    where = args.dir or Path(tempfile.mkdtemp(prefix="vlmrobust-bench-real-"))
    config = make_config(args)
    works = [where / "run1"] + ([] if args.no_second_run else [where / "run2"])
    preflight(args, where, len(works))
    runs = [run(w, config, args.cores) for w in works]
    samples = []
    for d in config["datasets"]:
        rec = job_record(works[-1], "samples", d)
        samples.append({"dataset": d, "s": job_record(works[0], "samples", d)["s"],
                        "rss_mb": rec["max_rss_mb"] if len(works) > 1 else None})  # fmt: skip
    rows = job_rows(args, config, works)
    print_report(args, runs, rows, samples)
    print(f"# folders: {', '.join(map(str, works))}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "samples": samples, "jobs": rows}, indent=1))
    if any(r.get("same_sha256") is False for r in rows):
        print("NOT DETERMINISTIC: the second run gave other sha256s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

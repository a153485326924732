"""The demo's commands (``vlmrobust demo-data``, ``demo-idis``, ``demo-model``,
``demo-seeds``, ``demo-standins``): the CLI adds this table to its own; each command imports the
generator it runs only when it runs."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from vlmrobust.core.commands import Command, arg
from vlmrobust.core.config import load_yaml, validate_config

log = logging.getLogger("vlmrobust")


def demo_data(out: str, n_per_family: int, seed: int, image_size: int, families: Any) -> None:
    """The embedded synthetic demo datasets."""
    from .data import generate_demo

    t0 = time.perf_counter()
    summary = generate_demo(
        Path(out), n_per_family=n_per_family, seed=seed, families=families, image_size=image_size
    )
    log.info("demo data written to %s in %.2f s", out, time.perf_counter() - t0)
    log.info("%s", json.dumps(summary))


def demo_idis(out: str, seed: int | None, config: str | None, **sizes: int | None) -> None:
    """The Idis demo data: the sizes given (else the generator's defaults); the seed is
    --seed, else the --config run's seed, else 0."""
    from .idis import IDIS_DEMO_OPTIONS, generate_idis_demo

    if seed is None and config is not None:
        seed = validate_config(load_yaml(config))["seed"]
    options = {k: sizes[k] for k in IDIS_DEMO_OPTIONS if sizes.get(k) is not None}
    t0 = time.perf_counter()
    summary = generate_idis_demo(Path(out), seed=0 if seed is None else seed, **options)
    log.info("Idis demo data written to %s in %.2f s", out, time.perf_counter() - t0)
    log.info("%s", json.dumps(summary["counts"]))


def demo_model(out: str, spec: str | None, seed: int | None) -> None:
    """A demo model (a tiny Qwen2-VL checkpoint, or with ``twin`` in the spec a paper
    model family's twin) built as --spec says (the rule passes the registry entry's
    build, ``vlmrobust.plan.inference.demo_model_spec``), or with random weights from --seed."""
    from .model import build_demo_model
    from .train import TrainSpec

    if spec is not None:
        build = json.loads(spec)
    elif seed is not None:
        build = {"seed": seed}  # random weights
    else:
        raise SystemExit("demo-model: give --spec or --seed")
    train = build.get("train")
    t0 = time.perf_counter()
    if build.get("twin"):  # a paper model family's twin (vlmrobust_demo/twins.py)
        from .twins import build_twin

        build_twin(build["twin"], Path(out), int(build["seed"]))
        log.info("%s twin written to %s in %.2f s", build["twin"], out, time.perf_counter() - t0)
        return
    info = build_demo_model(
        Path(out),
        seed=int(build["seed"]),
        train_dir=Path(build["train_dir"]) if build.get("train_dir") else None,
        train=TrainSpec.from_dict(train) if train else None,
        init=Path(build["init"]) if build.get("init") else None,
        options=build.get("options"),
        **(build.get("sizes") or {}),
    )
    log.info("demo model written to %s in %.2f s: %s", out, time.perf_counter() - t0, info)


def demo_seeds(out: str) -> None:
    """Redraw the demo seed distractors."""
    from .seeds import make_demo_seeds

    seeds = make_demo_seeds(out)
    log.info("wrote %d seeds to %s", len(seeds), out)


def demo_standins(
    config: str,
    out: str,
    shared: str | None,
    rows: int,
    max_new_tokens: int,
    max_draws: int,
    datasets: list[str] | None = None,
) -> None:
    """Stand-ins of a run (config/paper.yaml) at small size: its datasets, conditions,
    prompts and studies, every model answered by a demo checkpoint of its own with the
    model's registry resources (vlmrobust_demo/standins.py)."""
    from .standins import write_stand_ins

    sizes = {"rows": rows, "max_new_tokens": max_new_tokens, "max_draws": max_draws}
    from vlmrobust.core.paths import real_data

    folder = Path(shared) if shared else real_data()
    paths = write_stand_ins(config, Path(out), folder, only=datasets, **sizes)
    log.info("wrote %s", ", ".join(map(str, paths)))


#: the demo's subcommands (see :data:`vlmrobust.cli.COMMANDS`)
DEMO_COMMANDS: dict[str, Command] = {
    "demo-data": Command(
        demo_data,
        "generate the embedded synthetic demo datasets",
        (
            arg("--out", required=True, help="output folder (results/raw/demo)"),
            arg("--n-per-family", type=int, default=20),
            arg("--seed", type=int, default=0),
            arg("--image-size", type=int, default=384),
            arg("--families", nargs="+", default=None, help="default: all of them"),
        ),
    ),
    "demo-idis": Command(
        demo_idis,
        "generate the Idis demo data in the base datasets' formats, and its distractor assets",
        (
            arg("--out", required=True, help="output folder (e.g. results/raw/demo-idis)"),
            arg("--seed", type=int, help="default: the config's seed, else 0"),
            arg("--config", help="a run configuration YAML (its seed)"),
            arg("--n-per-class", type=int, help="ImageNet-9 images per class (default 1)"),
            arg("--n-problems", type=int, help="MathVerse problems, 4 versions each (default 3)"),
            arg("--n-tables", type=int, help="LogicVista table questions (default 4)"),
            arg("--n-birds", type=int, help="Waterbirds images (default 8)"),
            arg("--image-size", type=int, help="ImageNet-9 / Waterbirds side in px (default 224)"),
            arg("--diagram-size", type=int, help="MathVerse canvas in px (default 384)"),
            arg("--n-segment-variants", type=int, help="cut-outs per object (default 2)"),
            arg("--n-expressions", type=int, help="images per handwriting style (default 20)"),
        ),
    ),
    "demo-model": Command(
        demo_model,
        "build an embedded demo model (a tiny Qwen2-VL checkpoint)",
        (
            arg("--out", required=True, help="checkpoint folder (results/models/<id>)"),
            arg(
                "--spec",
                help="how to build it as JSON (seed, options, train_dir, train, init), as "
                "the rule passes it",
            ),
            arg("--seed", type=int, help="alone: a random-weight model from this seed"),
        ),
    ),
    "demo-standins": Command(
        demo_standins,
        "stand-ins of a run at small size: demo checkpoints for its models, data from here",
        (
            arg("--config", default="config/paper.yaml", help="the run to stand in for"),
            arg("--out", required=True, help="folder of the config.yaml and models.yaml made"),
            arg(
                "--shared",
                default=None,
                help="the real MATH-V and LogicVista (default: the real-data folder, docs/real-data.md)",
            ),
            arg("--rows", type=int, default=2, help="samples per answered dataset"),
            arg("--max-new-tokens", type=int, default=16, help="longest answer"),
            arg("--max-draws", type=int, default=2, help="sampled draws per question"),
            arg(
                "--datasets",
                nargs="+",
                default=None,
                help="only these of the run's datasets (default: all; the real data is "
                "needed only where one of them reads it)",
            ),
        ),
    ),
    "demo-seeds": Command(
        demo_seeds,
        "redraw the demo seed distractors (resources/distraction/seeds)",
        (arg("--out", default="resources/distraction/seeds", help="output folder"),),
    ),
}

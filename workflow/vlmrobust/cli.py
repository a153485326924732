"""``vlmrobust``: one subcommand per stage, so every step runs without Snakemake.

The Snakemake rules call these subcommands with the validated parts of the run
configuration (``--spec`` JSON); by hand, ``--config config/config.yaml`` reads the same
parts from a configuration file.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from . import __version__
from .config import ConfigError, load_yaml, validate_config

log = logging.getLogger("vlmrobust")


def _load_run_config(path: str) -> dict:
    return validate_config(load_yaml(path))


def _spec(args: argparse.Namespace, section: str, key: str) -> dict[str, Any]:
    """The config part for one dataset/condition: from --spec JSON or from --config."""
    if args.spec is not None:
        try:
            spec = json.loads(args.spec)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--spec is not valid JSON: {exc}") from exc
        if not isinstance(spec, dict):
            raise ConfigError("--spec must be a JSON object")
        return spec
    if args.config is None:
        raise ConfigError("give either --spec JSON or --config FILE")
    config = _load_run_config(args.config)
    try:
        return config[section][key]
    except KeyError:
        known = ", ".join(config[section]) or "none"
        raise ConfigError(f"{args.config}: no {section}.{key} (known: {known})") from None


def cmd_check_config(args: argparse.Namespace) -> int:
    config = _load_run_config(args.config)
    n_variants = sum(len(d["conditions"]) for d in config["datasets"].values())
    print(
        f"{args.config}: valid ({len(config['datasets'])} datasets, "
        f"{len(config['conditions'])} conditions, {n_variants} dataset x condition pairs, "
        f"{len(config['models'])} models)"
    )
    if args.show:
        print(json.dumps(config, indent=2))
    return 0


def cmd_demo_data(args: argparse.Namespace) -> int:
    from .data.demo import generate_demo

    t0 = time.perf_counter()
    summary = generate_demo(
        Path(args.out),
        n_per_family=args.n_per_family,
        seed=args.seed,
        families=args.families,
        image_size=args.image_size,
    )
    log.info("demo data written to %s in %.2f s", args.out, time.perf_counter() - t0)
    log.info("%s", json.dumps(summary))
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    from .data import build_samples

    spec = _spec(args, "datasets", args.name)
    t0 = time.perf_counter()
    report = build_samples(args.name, spec, Path(args.out), Path(args.report))
    log.info(
        "dataset %s: %s samples written, %s rows skipped (%.1f s)",
        args.name,
        report.get("samples_written"),
        report.get("skipped"),
        time.perf_counter() - t0,
    )
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    from .perturb import build_variants

    spec = _spec(args, "conditions", args.condition)
    t0 = time.perf_counter()
    n = build_variants(
        Path(args.samples), args.condition, spec, args.seed, Path(args.out), threads=args.threads
    )
    log.info(
        "condition %s: %d variants written to %s (%.1f s)",
        args.condition,
        n,
        args.out,
        time.perf_counter() - t0,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vlmrobust",
        description="Stages of the vlmrobust workflow (each one is a Snakemake rule).",
    )
    p.add_argument("--version", action="version", version=f"vlmrobust {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("check-config", help="validate a run configuration (and the model registry)")
    s.add_argument("config", help="run configuration YAML, e.g. config/config.yaml")
    s.add_argument("--show", action="store_true", help="print it with every default filled in")
    s.set_defaults(func=cmd_check_config)

    s = sub.add_parser("demo-data", help="generate the embedded synthetic demo datasets")
    s.add_argument("--out", required=True, help="output folder (results/raw/demo)")
    s.add_argument("--n-per-family", type=int, default=20)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--image-size", type=int, default=384)
    s.add_argument("--families", nargs="+", default=None, help="default: all seven")
    s.set_defaults(func=cmd_demo_data)

    s = sub.add_parser(
        "samples", help="datasets -> samples: load one dataset into the sample schema"
    )
    s.add_argument("--name", required=True, help="the dataset's name (key under `datasets`)")
    s.add_argument("--spec", help="the dataset's configuration as JSON (as the rule passes it)")
    s.add_argument("--config", help="or: a run configuration YAML to read it from")
    s.add_argument("--out", required=True, help="samples JSONL (images go beside it)")
    s.add_argument("--report", required=True, help="report JSON (counts, skipped rows)")
    s.set_defaults(func=cmd_samples)

    s = sub.add_parser("variants", help="samples -> variants: apply one condition")
    s.add_argument("--samples", required=True, help="samples JSONL")
    s.add_argument(
        "--condition", required=True, help="the condition's name (key under `conditions`)"
    )
    s.add_argument("--spec", help="the condition's configuration as JSON (as the rule passes it)")
    s.add_argument("--config", help="or: a run configuration YAML to read it from")
    s.add_argument("--seed", type=int, default=0, help="global seed")
    s.add_argument("--threads", type=int, default=1, help="worker processes")
    s.add_argument("--out", required=True, help="variant manifest JSONL (images go beside it)")
    s.set_defaults(func=cmd_variants)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.func(args)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        print(f"vlmrobust {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""A run configuration before it runs: its check (``check-config``), and its forecast,
every model call's requests and tokens (the VLMs' and the judges', extractors' and
writers' LLM calls), GPU-hours, money, wall time on N GPUs and the variants' disk
(:mod:`vlmrobust.forecast`, docs/forecast.md), and the engines sized from it
(``balance``). It reads files only; no model, no network."""

from __future__ import annotations

import json
import sys

from ..core.commands import Command, arg
from ..core.io import atomic_write_text
from .args import RUN_CONFIG


def forecast(
    config: str,
    gpus: int,
    gpu_type: str | None,
    engines: int | None,
    pilot: str | None,
    json_out: str | None,
    as_json: bool,
    no_sources: bool,
) -> None:
    """Print the forecast of ``config`` (``--json``: the JSON instead; ``--json-out``:
    also write it to a file)."""
    from ..forecast import build_forecast, read_pilot
    from ..forecast.render import render_text, to_json
    from ..plan import RunPlan

    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    plan = RunPlan.load(config)
    measured = read_pilot(pilot) if pilot else None
    result = build_forecast(plan, config, gpus, measured, gpu_type, engines)
    data = to_json(result)
    if json_out:
        atomic_write_text(json_out, json.dumps(data, indent=2) + "\n")
    if as_json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result, sources=not no_sources))


def balance(config: str, gpus: int, gpu_type: str | None, tolerance: float, write: bool) -> None:
    """Size the engines of every local model of ``config`` from its forecast
    (:mod:`vlmrobust.forecast.balance`); print the choice and the forecast's makespan and
    GPU-hours / GPUs; ``write``: put it into ``config`` between the balance markers (a
    damaged marker, or a result that would not validate, is refused with nothing
    written: :func:`~vlmrobust.forecast.balance.write_block`)."""
    from ..core.config import load_yaml, validate_config
    from ..forecast import build_forecast
    from ..forecast.balance import balance as size_engines
    from ..forecast.balance import block_text, find_block, write_block
    from ..plan import RunPlan

    if write:  # a damaged marker is refused before the forecast's work
        with open(config, encoding="utf-8") as fh:
            find_block(config, fh.read())
    plan = RunPlan.load(config)
    result = size_engines(plan, build_forecast(plan, config, gpus, None, gpu_type), gpus, tolerance)
    command = f"vlmrobust balance {config} --gpus {gpus}" + (
        f" --gpu-type {gpu_type}" if gpu_type else ""
    )
    own = (load_yaml(config) or {}).get("service") or {}  # the file's, not the defaults
    text = block_text(result, command + " --write", keep=own if isinstance(own, dict) else {})
    sys.stdout.write(text)
    verdict = "within" if result.within else "NOT within"
    sys.stdout.write(
        f"makespan {result.makespan_s / 3600:,.1f} h on {gpus} GPUs; engines' GPU-hours / "
        f"GPUs {result.bound_s / 3600:,.1f} h; ratio {result.ratio:.3f} ({verdict} "
        f"{tolerance:.0%})\n"
    )
    if write:
        write_block(config, text, check=validate_config)
        sys.stdout.write(f"wrote the block into {config}\n")


def check_config(config: str, show: bool) -> None:
    """Validate a run configuration and print what it holds (``--show``: all of it)."""
    from ..core.config import load_yaml, validate_config

    valid = validate_config(load_yaml(config))
    n_variants = sum(len(d["conditions"]) for d in valid["datasets"].values())
    print(
        f"{config}: valid ({len(valid['datasets'])} datasets, "
        f"{len(valid['conditions'])} conditions, {n_variants} dataset x condition pairs, "
        f"{len(valid['models'])} models)"
    )
    if show:
        print(json.dumps(valid, indent=2))


#: the commands on a run configuration before it runs
COMMANDS: dict[str, Command] = {
    "check-config": Command(
        check_config,
        "validate a run configuration (and the model registry)",
        (
            arg("config", help="run configuration YAML, e.g. config/config.yaml"),
            arg("--show", action="store_true", help="print it with every default filled in"),
        ),
    ),
    "forecast": Command(
        forecast,
        "forecast a run before it runs: every model call's requests and tokens (VLMs, "
        "judges, extractors, writers), GPU-hours, money, wall time, disk",
        (
            RUN_CONFIG,
            arg("--gpus", type=int, default=8, help="GPUs for the wall time (default 8)"),
            arg(
                "--gpu-type",
                help="scale the rates to this GPU (a gpu_types key of forecast/throughput.yaml: "
                "H100, A100, H200; default the table's own)",
            ),
            arg(
                "--engines",
                type=int,
                help="what if every local model and LLM had this many engines "
                "(service.engines; default the configuration's)",
            ),
            arg(
                "--pilot",
                help="an outputs folder of a pilot run (results/outputs): its measured mean "
                "generated tokens replace the assumed ones where it has them",
            ),
            arg("--json", dest="as_json", action="store_true", help="print JSON instead"),
            arg("--json-out", help="also write the JSON to this file"),
            arg("--no-sources", action="store_true", help="leave out the list of sources"),
        ),
    ),
    "balance": Command(
        balance,
        "size every local model's engines from the forecast (service.split_cells, "
        "service.engines) so the run's makespan on N GPUs nears GPU-hours / N",
        (
            RUN_CONFIG,
            arg("--gpus", type=int, default=8, help="GPUs of the run (default 8)"),
            arg("--gpu-type", help="as for `forecast` (default the table's own)"),
            arg(
                "--tolerance",
                type=float,
                default=0.15,
                help="the makespan may exceed GPU-hours / GPUs by this share (default 0.15)",
            ),
            arg("--write", action="store_true", help="write the choice into the config file"),
        ),
    ),
}

"""The preflight (``vlmrobust preflight``, docs/preflight.md): before the paper run,
replay a seeded draw of a release's rows through the engine the configuration names and
compare the responses, the accuracy and the time with the release's.

Everything a row is answered with is built as the run builds it: the dataset's samples
by its adapter from the configuration (:func:`vlmrobust.plan.data.samples_spec`), the
condition's variants by the perturbation stage, the job spec by
:func:`vlmrobust.plan.inference.infer_spec` (the registry entry's backend, or the
dataset's paper engine under ``engines: papers``), the requests by :func:`vlmrobust.infer.run.plan_requests` inside the engine job, which runs
as the run's engine does (``vlmrobust infer-engine``; a ``vllm`` model in the vLLM
environment, ``environments.vllm``). The comparison is
:mod:`vlmrobust.score.preflight`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.commands import Command, arg, required
from ..core.config import ConfigError
from ..core.io import atomic_write_text, read_jsonl
from . import log
from .args import THREADS

#: the backends a preflight replays (a local checkpoint, loaded by an engine job)
LOCAL = ("hf", "vllm")


def preflight(
    config: str,
    release: str,
    rows: int,
    seed: int,
    min_identical: float,
    models: list[str] | None,
    dataset: str,
    condition: str | None,
    prompt: str | None,
    samples: str | None,
    work: str | None,
    diffs: int,
    threads: int,
    out: str | None,
) -> int:
    """Replay ``rows`` released rows per model (module docstring); print the table,
    write the JSON report to ``out``; 1 when a model's identical share is below
    ``min_identical`` (or its engine failed), naming it, else 0."""
    from ..plan import RunPlan
    from ..score.preflight import render_report

    if not 0.0 <= min_identical <= 1.0:
        raise ConfigError(f"--min-identical {min_identical}: a share between 0 and 1")
    if rows < 1:
        raise ConfigError(f"--rows {rows}: at least 1")
    plan = RunPlan.load(config)
    cell = _cell(plan, dataset, condition, prompt)
    chosen = _models(plan, dataset, models)
    with _folder(work) as root:
        questions, sample_file = _questions(plan, dataset, samples, root)
        entries = [_entry(plan, m, cell, release) for m in chosen]
        run = _Replay(plan, cell, rows, seed, min_identical, threads, root)
        _replay_all(run, entries, questions)
    failed = [e["model"] for e in entries if e["status"] in ("below", "engine failed")]
    report = {
        "config": config,
        "release": str(release),
        "dataset": cell[0],
        "condition": cell[1],
        "prompt": cell[2],
        "samples": sample_file if samples or work else None,
        "work": work,
        "rows_requested": rows,
        "seed": seed,
        "min_identical": min_identical,
        "scoring": _scoring(plan, cell[0]),
        "models": entries,
        "failed": failed,
        "passed": not failed,
    }
    ids = {s.sample_id: key for key, s in questions.items()}
    print(render_report(report, diffs, lambda sid: ids.get(sid, sid)))
    if out:
        atomic_write_text(out, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for e in entries:
        if e["model"] in failed:
            log.error("preflight: models.%s: %s", e["model"], e["note"])
    return 1 if failed else 0


# --------------------------------------------------------------------------- what is replayed


def _cell(
    plan: Any, dataset: str, condition: str | None, prompt: str | None
) -> tuple[str, str, str]:
    """(dataset, condition, prompt) replayed: the dataset must be the run's; the
    condition defaults to its ``distraction`` condition (a Distract-Bench release holds
    the answers on the distracted images), else the run's clean one; the prompt to the
    dataset's only prompt setting."""
    if dataset not in plan.datasets:
        raise ConfigError(f"--dataset {dataset!r} is not a dataset of the configuration")
    conditions = plan.datasets[dataset]["conditions"]
    if condition is None:
        distracted = [c for c in conditions if plan.conditions[c]["perturbation"] == "distraction"]
        condition = distracted[0] if len(distracted) == 1 else plan.clean
    if condition not in conditions:
        raise ConfigError(
            f"--condition {condition!r} is not a condition of datasets.{dataset} "
            f"({', '.join(conditions)})"
        )
    prompts = plan.prompts_of(dataset)
    if prompt is None and len(prompts) > 1:
        raise ConfigError(f"datasets.{dataset} has prompts {', '.join(prompts)}: say --prompt")
    prompt = prompt or prompts[0]
    if prompt not in prompts:
        raise ConfigError(f"--prompt {prompt!r} is not a prompt of datasets.{dataset}")
    return dataset, condition, prompt


def _models(plan: Any, dataset: str, models: list[str] | None) -> list[str]:
    """The models replayed: ``--models``, else every model of the dataset."""
    of_dataset = plan.models_of(dataset)
    for m in models or []:
        if m not in of_dataset:
            raise ConfigError(
                f"--models: {m!r} is not a model of datasets.{dataset} ({', '.join(of_dataset)})"
            )
    return list(models) if models else of_dataset


def _scoring(plan: Any, dataset: str) -> dict[str, Any]:
    """How the replayed rows are scored: the dataset's scorer, unparsed choice, scoring
    mode and seed, as the score rule passes them; no LLM (no extraction fallback, no
    harness judge)."""
    from ..plan.scoring import score_params

    params = score_params(plan, dataset)
    keys = ("scorer", "unparsed_choice", "mode", "seed")
    return {**{k: params[k] for k in keys}, "llm": None}


@contextlib.contextmanager
def _folder(work: str | None) -> Iterator[Path]:
    """The work folder (``--work``, kept: a rerun reuses its answers through the
    engine's resume cache), else a temporary one, removed at the end."""
    if work:
        root = Path(work).resolve()
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="vlmrobust-preflight-") as tmp:
        yield Path(tmp)


def _questions(plan: Any, dataset: str, samples: str | None, root: Path) -> tuple[Any, str]:
    """The dataset's samples by their own id (``meta.source_id``), the rows the samples
    stage skipped among them: ``--samples`` (a samples file of this dataset, its
    report.json beside it), else built here by the samples stage from the config."""
    from ..core.records import read_samples
    from ..core.released import Questions
    from ..data import build_samples
    from ..plan.data import samples_spec

    if samples is None:
        path, report = root / "samples" / "samples.jsonl", root / "samples" / "report.json"
        build_samples(dataset, samples_spec(plan, dataset), path, report)
    else:
        path = Path(samples)
        report = path.parent / "report.json"
    skipped = []
    if report.is_file():
        skipped = json.loads(report.read_text(encoding="utf-8")).get("skipped_rows") or []
    by_id = {str(s.meta["source_id"]): s for s in read_samples(path)}
    return Questions(by_id, skipped=skipped), str(path)


def _entry(plan: Any, model: str, cell: tuple[str, str, str], release: str) -> dict[str, Any]:
    """A model's report entry before its replay: its backend, hub id and release file;
    ``status`` says why it is not replayed (no release file, not a local model)."""
    from ..plan.inference import infer_spec
    from ..score.preflight import release_candidates

    spec = infer_spec(plan, model, cell[0], cell[2])
    backend = spec["model_spec"]["backend"]
    hub_id = plan.registry[model].get("hf_repo")
    entry = {"model": model, "backend": backend, "hub_id": hub_id, "job_spec": spec}
    if backend not in LOCAL:
        return {**entry, "status": "skipped", "note": f"backend {backend}: not a local engine"}
    if not hub_id:
        note = "no hf_repo in its registry entry, so no release file can be named"
        return {**entry, "status": "no release", "note": note}
    looked = release_candidates(release, hub_id)
    found = next((p for p in looked if p.is_file()), None)
    if found is None:
        note = "no release file (looked for " + ", ".join(str(p) for p in looked) + ")"
        return {**entry, "status": "no release", "note": note, "looked_for": list(map(str, looked))}
    if spec["temperature"] != 0 or spec["n"] != 1:
        raise ConfigError(
            f"models.{model} on datasets.{cell[0]}: temperature {spec['temperature']}, "
            f"{spec['n']} draws; the preflight replays greedy decoding, as the release"
        )
    return {**entry, "status": "pending", "release_file": str(found)}


# --------------------------------------------------------------------------- the replay


@dataclass(frozen=True)
class _Replay:
    """What every model's replay shares: the plan, the (dataset, condition, prompt),
    the draw, the threshold, the engine's threads and the work folder."""

    plan: Any
    cell: tuple[str, str, str]
    rows: int
    seed: int
    min_identical: float
    threads: int
    root: Path


def _replay_all(run: _Replay, entries: list[dict[str, Any]], questions: Any) -> None:
    """Draw each model's rows, build their variants once, and replay and compare each
    model in turn (its entry updated in place)."""
    from ..score.preflight import draw_rows, read_release

    dataset, condition, _ = run.cell
    todo = [e for e in entries if e["status"] == "pending"]
    for e in todo:  # a missing vLLM environment stops the preflight before any engine
        _engine_command(run.plan, e["backend"])
    releases, drawn = {}, {}
    for e in todo:
        rel = read_release(e["release_file"], dataset, questions, e["model"], condition)
        answered = [sid for sid, r in rel.rows.items() if r.error is None]
        releases[e["model"]] = rel
        drawn[e["model"]] = draw_rows(answered, run.rows, run.seed, dataset)
    if not todo:
        return
    wanted = {sid for ids in drawn.values() for sid in ids}
    samples = {s.sample_id: s for s in questions.values() if s.sample_id in wanted}
    variants, sample_file = _variants(run, list(samples.values()))
    for e in todo:
        ids = drawn[e["model"]]
        mine = [v for v in variants if v.sample_id in set(ids)]
        replayed, engine_s, error = _run_engine(run, e["job_spec"], mine, sample_file)
        _compare(run, e, (ids, releases[e["model"]], replayed, samples), engine_s, error)
        log.info("preflight: models.%s: %s", e["model"], e["status"])


def _variants(run: _Replay, samples: list[Any]) -> tuple[list[Any], str]:
    """The drawn samples' variants of the condition, made by the perturbation stage
    with the run's seed, the dataset's pixel bound and the run's image format."""
    from ..core.records import read_variants, write_samples
    from ..perturb import build_variants

    dataset, condition, _ = run.cell
    folder = run.root / "replay"
    sample_file = folder / "samples.jsonl"
    write_samples(sample_file, samples)
    manifest = folder / condition / "manifest.jsonl"
    build_variants(
        sample_file,
        condition,
        run.plan.conditions[condition],
        run.plan.config["seed"],
        manifest,
        threads=max(1, run.threads),
        max_pixels=run.plan.datasets[dataset]["max_pixels"],
        image_format=run.plan.config["variants"]["format"],
    )
    return read_variants(manifest), str(sample_file)


def _engine_command(plan: Any, backend: str) -> tuple[list[str], dict[str, str]]:
    """``python -m vlmrobust`` of the engine's environment (a ``vllm`` model's: the vLLM
    environment, ``environments.vllm``) with this package first on PYTHONPATH."""
    from ..core.workflow import environment_python

    python = sys.executable
    if backend == "vllm":
        python = environment_python(
            plan.config["environments"].get("vllm"),
            who="the preflight of a backend-vllm model",
            setting="environments.vllm",
            make="bash envs/vllm-env.sh (or --cuda on a GPU machine)",
        )
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return [python, "-m", "vlmrobust"], env


def _run_engine(
    run: _Replay, spec: dict[str, Any], variants: list[Any], samples: str
) -> tuple[list[Any], float, str | None]:
    """One model's replay: an engine plan of one cell (its drawn variants) answered by
    ``vlmrobust infer-engine`` in the engine's environment, as the run's engine job;
    the output rows, the wall time (model load included) and the engine's failure
    (None when it succeeded)."""
    from ..core.records import OutputRow, write_variants

    folder = run.root / "replay" / spec["model"]
    manifest, out = folder / "manifest.jsonl", folder / "outputs.jsonl"
    write_variants(manifest, variants)
    cell = {"spec": spec, "manifest": str(manifest), "samples": samples, "out": str(out)}
    plan_file = folder / "engine.json"
    atomic_write_text(plan_file, json.dumps({"model": spec["model"], "cells": [cell]}))
    cli, env = _engine_command(run.plan, spec["model_spec"]["backend"])
    cmd = [*cli, "infer-engine", "--plan", str(plan_file), "--threads", str(run.threads)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=sys.stderr, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        return [], took, f"the engine exited with {proc.returncode} ({' '.join(cmd)})"
    return [OutputRow.from_dict(r) for r in read_jsonl(out)], took, None


def _tokenizer(spec: dict[str, Any]) -> Any:
    """The model's own tokenizer (its checkpoint: ``local_path``, else ``hf_repo`` at
    its ``revision``)."""
    from transformers import AutoTokenizer

    model_spec = spec["model_spec"]
    source = model_spec.get("local_path") or model_spec.get("hf_repo")
    revision = None if model_spec.get("local_path") else model_spec.get("revision")
    return AutoTokenizer.from_pretrained(source, revision=revision)


def _compare(
    run: _Replay,
    entry: dict[str, Any],
    data: tuple[list[str], Any, list[Any], dict[str, Any]],
    engine_s: float,
    error: str | None,
) -> None:
    """Fill a model's entry with its comparison (:func:`compare_model` on ``data``:
    the drawn ids, the release, the replayed rows, the samples) and its status:
    ``ok``, ``below`` (the identical share under --min-identical) or ``engine
    failed``."""
    from ..score.preflight import compare_model

    ids, release, replayed, samples = data
    tokenizer = _tokenizer(entry["job_spec"]) if replayed else None
    scoring = _scoring(run.plan, run.cell[0])
    entry.update(compare_model(ids, release, replayed, samples, scoring, tokenizer, engine_s))
    entry["skipped_release_rows"] = release.skipped
    if error is not None:
        entry.update(status="engine failed", note=error)
    elif (entry["identical_share"] or 0.0) < run.min_identical:
        entry["status"] = "below"
        entry["note"] = (
            f"identical share {entry['identical_share']:.3f} is below --min-identical "
            f"{run.min_identical}"
        )
    else:
        entry["status"] = "ok"


#: the preflight's command
COMMANDS: dict[str, Command] = {
    "preflight": Command(
        preflight,
        "before the run: replay N released rows per model through the configured engine and "
        "compare responses (identical share, first differing token), accuracy and time "
        "(docs/preflight.md)",
        (
            required("--config", help="run configuration YAML, e.g. config/paper.yaml"),
            required(
                "--release",
                help="the release folder: <hub id with / as __>.samples.jsonl per model "
                "(lmms-eval samples), there or under model_outputs/",
            ),
            arg("--rows", type=int, default=50, help="rows replayed per model (default 50)"),
            arg("--seed", type=int, default=0, help="seed of the rows drawn (default 0)"),
            arg(
                "--min-identical",
                type=float,
                default=0.9,
                help="fail (exit 1, naming the model) when a model's share of identical "
                "responses is below this (default 0.9)",
            ),
            arg("--models", nargs="+", help="these models (default: every model of the dataset)"),
            arg("--dataset", default="distract-bench", help="the dataset (default distract-bench)"),
            arg(
                "--condition",
                help="the condition the release answered (default: the dataset's distraction "
                "condition, else the clean one)",
            ),
            arg("--prompt", help="the prompt setting (default: the dataset's only one)"),
            arg("--samples", help="the dataset's samples file, if built (default: built here)"),
            arg(
                "--work",
                help="work folder, kept (a rerun reuses its answers); default a temporary one",
            ),
            arg("--diffs", type=int, default=3, help="differing rows printed per model (3)"),
            THREADS,
            arg("--out", help="the JSON report"),
        ),
    ),
}

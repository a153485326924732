"""``vlmrobust``: one subcommand per stage, so every step runs without Snakemake.

The CLI only parses arguments and calls the stage's function: :data:`COMMANDS` is one
table from subcommand to (function, help, arguments). The Snakemake rules pass the
validated parts of the run configuration as ``--spec`` JSON and name every file; by
hand, ``--config config/config.yaml`` reads the same parts from a configuration file
and the run plan (:class:`vlmrobust.core.plan.RunPlan`) fills in the files a job reads
and writes, e.g.::

    vlmrobust score --config config/config.yaml --model demo-base --dataset demo-chart \\
        --condition corrupt
    vlmrobust table table1 --study corruption --config config/config.yaml
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .core.config import ConfigError, load_yaml, validate_config

log = logging.getLogger("vlmrobust")

# --------------------------------------------------------------------------- helpers


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from exc


def _plan(args: argparse.Namespace):
    from .core.plan import RunPlan

    return RunPlan.load(args.config)


def _spec(args: argparse.Namespace, section: str, key: str) -> dict[str, Any]:
    """The config part for one dataset/condition: from --spec JSON or from --config."""
    if args.spec is not None:
        spec = _json_arg(args.spec, "--spec")
        if not isinstance(spec, dict):
            raise ConfigError("--spec must be a JSON object")
        return spec
    if args.config is None:
        raise ConfigError("give either --spec JSON or --config FILE")
    config = validate_config(load_yaml(args.config))
    try:
        return config[section][key]
    except KeyError:
        known = ", ".join(config[section]) or "none"
        raise ConfigError(f"{args.config}: no {section}.{key} (known: {known})") from None


def _need(args: argparse.Namespace, *names: str) -> None:
    """Without --config, every file of a job must be named."""
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None) is None]
    if missing:
        raise ConfigError(f"give {', '.join(missing)}, or --config FILE with the job's names")


def _job_names(args: argparse.Namespace, *names: str):
    """The plan and the job's names (model, dataset, condition, prompt) for --config."""
    if "prompt" in names and args.prompt is None:
        args.prompt = "default"
    missing = [f"--{n}" for n in names if getattr(args, n, None) is None]
    if missing:
        raise ConfigError(f"with --config, give {', '.join(missing)} (the job's names)")
    return _plan(args)


def _fill(args: argparse.Namespace, **values: Any) -> None:
    """Set the arguments the user did not give (explicit ones win)."""
    for name, value in values.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


# --------------------------------------------------------------------------- commands


def cmd_check_config(args: argparse.Namespace) -> int:
    config = validate_config(load_yaml(args.config))
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
    from vlmrobust_demo.data import generate_demo

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


def cmd_demo_idis(args: argparse.Namespace) -> int:
    """The Idis demo data: the sizes given as arguments (else the generator's
    defaults); the seed is --seed, else the --config run's seed, else 0."""
    from vlmrobust_demo.idis import IDIS_DEMO_OPTIONS, generate_idis_demo

    seed = args.seed
    if args.config is not None:
        config = validate_config(load_yaml(args.config))
        if seed is None:
            seed = config["seed"]
    options = {k: getattr(args, k) for k in IDIS_DEMO_OPTIONS if getattr(args, k) is not None}
    t0 = time.perf_counter()
    summary = generate_idis_demo(Path(args.out), seed=0 if seed is None else seed, **options)
    log.info("Idis demo data written to %s in %.2f s", args.out, time.perf_counter() - t0)
    log.info("%s", json.dumps(summary["counts"]))
    return 0


def cmd_demo_model(args: argparse.Namespace) -> int:
    from vlmrobust_demo.model import build_demo_model
    from vlmrobust_demo.train import TrainSpec

    if args.config is not None:
        if not args.model:
            raise SystemExit("demo-model: --config needs --model (the demo model's id)")
        plan = _plan(args)
        spec = plan.demo_model_spec(args.model)
        out = args.out or plan.registry[args.model]["local_path"]
    elif args.spec is not None:
        spec, out = json.loads(args.spec), args.out
    elif args.seed is not None:
        spec, out = {"seed": args.seed}, args.out  # random weights
    else:
        raise SystemExit("demo-model: give --spec, --config with --model, or --seed")
    if not out:
        raise SystemExit("demo-model: --out (the checkpoint folder) is required")
    train = spec.get("train")
    t0 = time.perf_counter()
    info = build_demo_model(
        Path(out),
        seed=int(spec["seed"]),
        train_dir=Path(spec["train_dir"]) if spec.get("train_dir") else None,
        train=TrainSpec.from_dict(train) if train else None,
        init=Path(spec["init"]) if spec.get("init") else None,
        options=spec.get("options"),
        **(spec.get("sizes") or {}),
    )
    log.info("demo model written to %s in %.2f s: %s", out, time.perf_counter() - t0, info)
    return 0


def cmd_demo_seeds(args: argparse.Namespace) -> int:
    from vlmrobust_demo.seeds import make_demo_seeds

    seeds = make_demo_seeds(args.out)
    log.info("wrote %d seeds to %s", len(seeds), args.out)
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    from .data import build_samples

    spec = _spec(args, "datasets", args.name)
    if args.config is not None:
        from .core.plan import RunPlan

        _fill(
            args,
            out=RunPlan.samples_path(args.name),
            report=RunPlan.samples_report_path(args.name),
        )
    _need(args, "out", "report")
    t0 = time.perf_counter()
    report = build_samples(args.name, spec, Path(args.out), Path(args.report))
    reasons = "; ".join(f"{r} ({n})" for r, n in report.get("skipped_by_reason", {}).items())
    log.info(
        "dataset %s: %s samples written, %s rows skipped%s (%.1f s)",
        args.name,
        report.get("samples_written"),
        report.get("skipped"),
        f" (on_bad_row: skip): {reasons}" if reasons else "",
        time.perf_counter() - t0,
    )
    return 0


def cmd_write_questions(args: argparse.Namespace) -> int:
    """VisArgs: the LLM question writer's questions of one dataset (read by `samples`)."""
    from .construct.questions import write_questions
    from .data.visargs import question_items

    spec = _spec(args, "datasets", args.name)
    if spec.get("adapter") != "visargs":
        raise ConfigError(
            f"datasets.{args.name}: adapter {spec.get('adapter')!r} has no question writer "
            "(only visargs does)"
        )
    _fill(args, out=f"results/questions/{args.name}/questions.jsonl")
    writer = spec.get("question_writer") or {"backend": "template"}
    t0 = time.perf_counter()
    counts = write_questions(
        question_items(args.name, spec),
        writer,
        Path(args.out),
        cache_dir=args.cache_dir,
        where=f"datasets.{args.name}.question_writer",
    )
    log.info(
        "dataset %s: %d questions written to %s (%d from the cache, %d failed; %.1f s)",
        args.name,
        counts["written"],
        args.out,
        counts["cached"],
        counts["failed"],
        time.perf_counter() - t0,
    )
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    from .perturb import build_variants

    spec = _spec(args, "conditions", args.condition)
    if args.config is not None:
        if args.dataset is None and (args.samples is None or args.out is None):
            raise ConfigError("with --config, give --dataset (or --samples and --out)")
        if args.dataset is not None:
            plan = _plan(args)
            _fill(
                args,
                samples=plan.samples_path(args.dataset),
                out=plan.manifest_path(args.dataset, args.condition),
                seed=plan.config["seed"],
            )
    _need(args, "samples", "out")
    t0 = time.perf_counter()
    seed = 0 if args.seed is None else args.seed
    n = build_variants(
        Path(args.samples), args.condition, spec, seed, Path(args.out), threads=args.threads
    )
    log.info(
        "condition %s: %d variants written to %s (%.1f s)",
        args.condition,
        n,
        args.out,
        time.perf_counter() - t0,
    )
    return 0


def _service(args: argparse.Namespace, job: Any) -> Any:
    """The model service an inference job answers through (``--service auto``: the one
    of the Snakemake run above the job, for a local checkpoint), or None: the job loads
    its own model (``--service off``, an API model, or a job run by hand)."""
    from .clients.service import SERVED_BACKENDS, find_owner
    from .infer.run import Service

    if args.service == "off" or job.model_spec.get("backend") not in SERVED_BACKENDS:
        return None
    owner = find_owner()
    if owner is None:
        return None
    log_path = Path(args.service_log) if args.service_log else None
    return Service(owner, threads=args.threads or None, idle_s=args.service_idle_s, log=log_path)


def cmd_infer(args: argparse.Namespace) -> int:
    from .infer.run import Job, run_inference

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        context = plan.infer_context(m, d, c, p)
        _fill(
            args,
            spec=json.dumps(plan.infer_spec(m, d, p, args.shard, args.shards)),
            manifest=plan.manifest_path(d, c),
            samples=plan.samples_path(d),
            context=context[0] if context else None,
            out=plan.shard_path(m, d, c, p, args.shard, args.shards),
        )
    _need(args, "spec", "manifest", "samples", "out")
    job = Job(**_json_arg(args.spec, "--spec"))
    service = _service(args, job)
    if args.threads and service is None:
        import torch

        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    context = Path(args.context) if args.context else None
    stats = run_inference(
        job,
        Path(args.manifest),
        Path(args.samples),
        Path(args.out),
        context=context,
        service=service,
    )
    log.info("%s: %s (%.1f s)", args.out, stats, time.perf_counter() - t0)
    return 0


def cmd_vllm_serve(args: argparse.Namespace) -> int:
    """Serve a backend-vllm registry entry through vLLM's OpenAI-compatible server, in
    the vLLM environment (config `environments.vllm`), on 127.0.0.1 by default."""
    import os
    import shlex

    from .clients.vlm.vllm import serve_command
    from .core.workflow import environment_python

    plan = _plan(args)
    spec = plan.registry.get(args.model)
    if spec is None or spec["backend"] != "vllm":
        raise ConfigError(
            f"vllm-serve: --model {args.model!r} is not a registry entry with backend vllm"
        )
    python = environment_python(
        plan.config["environments"]["vllm"],
        who=f"models.{args.model} (backend vllm)",
        setting="environments.vllm",
        make="bash envs/vllm-env.sh",
    )
    cmd = serve_command(
        args.model, spec, python=python, host=args.host, port=args.port, check=not args.print
    )
    if args.print:
        print(shlex.join(cmd))
        return 0
    log.info("serving %s: %s", args.model, shlex.join(cmd))
    sys.stdout.flush()
    os.execv(cmd[0], cmd) if os.sep in cmd[0] else os.execvp(cmd[0], cmd)
    return 0  # not reached


def cmd_gather(args: argparse.Namespace) -> int:
    from .infer.run import gather_outputs

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        _fill(args, manifest=plan.manifest_path(d, c), out=plan.output_path(m, d, c, p))
        args.shards = args.shards or plan.shard_files(m, d, c, p)
    _need(args, "manifest", "out")
    if not args.shards:
        raise ConfigError("give the shard files, or --config FILE with the job's names")
    n = gather_outputs([Path(p) for p in args.shards], Path(args.manifest), Path(args.out))
    log.info("%s: %d rows gathered from %d shards", args.out, n, len(args.shards))
    return 0


def cmd_import_outputs(args: argparse.Namespace) -> int:
    """A released lmms-eval / VLMEvalKit / JSONL file as the outputs of one job (config
    `imports`); format jsonl needs --manifest (its question ids name variants)."""
    from .core.io import write_jsonl
    from .core.records import read_samples, read_variants
    from .score.released import import_outputs

    spec = _json_arg(args.spec, "--spec")
    if not isinstance(spec, dict):
        raise ConfigError("--spec must be a JSON object")
    jsonl = spec.get("format") == "jsonl"
    if jsonl and not args.manifest:
        raise ConfigError(
            "import-outputs: format jsonl needs --manifest (the condition's variant "
            "manifest, results/variants/<dataset>/<condition>/manifest.jsonl)"
        )
    variants = read_variants(args.manifest) if args.manifest else None
    skipped = []
    if args.samples_report:
        report = json.loads(Path(args.samples_report).read_text(encoding="utf-8"))
        skipped = [str(r["id"]) for r in report.get("skipped_rows") or [] if r.get("id")]
    rows, missing = import_outputs(
        spec, read_samples(args.samples), args.released, variants, skipped_ids=skipped
    )
    if missing:
        what = "variants" if jsonl else "samples"
        log.warning("%s: %d %s have no released answer", args.released, missing, what)
    failed = sum(1 for r in rows if r.released and r.released.get("verdict_error"))
    if failed:
        log.warning(
            "%s: %d released verdict(s) are failed judgments (e.g. parse_error): kept as "
            "failures, excluded from DRR and HFR",
            spec.get("references"),
            failed,
        )
    n = write_jsonl(args.out, (r.to_dict() for r in rows))
    log.info("%s: %d rows imported from %s", args.out, n, args.released)
    return 0


def cmd_import_verdicts(args: argparse.Namespace) -> int:
    """Released distractor-reference verdicts alone as the judged file of one job (an
    `imports` entry with `references` and no `path`): no outputs, so no correctness."""
    from .core.io import write_jsonl
    from .core.records import read_samples
    from .judges.reference import released_verdict_rows

    rows, missing = released_verdict_rows(read_samples(args.samples), args.references)
    if missing:
        log.warning("%s: %d samples have no released verdict", args.references, len(missing))
    failed = sum(1 for r in rows if r["verdict"] is None)
    n = write_jsonl(args.out, rows)
    log.info(
        "%s: %d released verdicts (%d failed judgments) from %s",
        args.out,
        n,
        failed,
        args.references,
    )
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from .core.io import read_jsonl
    from .core.records import OutputRow, read_samples
    from .score import score_outputs, write_scored
    from .score.released import use_released_correctness

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        params = plan.score_params(d)
        _fill(
            args,
            outputs=plan.output_path(m, d, c, p),
            samples=plan.samples_path(d),
            out=plan.scored_path(m, d, c, p),
            **{**params, "fallback": json.dumps(params["fallback"])},
        )
    _need(args, "outputs", "samples", "scorer", "out")
    fallback = None
    spec = _json_arg(args.fallback, "--fallback") if args.fallback else None
    if spec is not None:
        from .clients.llm import LLMCache, make_llm
        from .score import llm_extractor

        cache = LLMCache(Path(args.cache_dir or "results/cache/llm"))
        fallback = llm_extractor(make_llm(spec, cache))
    samples = {s.sample_id: s for s in read_samples(args.samples)}
    rows = [OutputRow.from_dict(r) for r in read_jsonl(args.outputs)]
    scored = score_outputs(
        samples,
        rows,
        args.scorer,
        fallback=fallback,
        unparsed_choice=args.unparsed_choice or "wrong",
    )
    if args.use_released:
        use_released_correctness(scored, rows)
    write_scored(Path(args.out), scored)
    log.info("%s: %d rows, %d correct", args.out, len(scored), sum(r["correct"] for r in scored))
    return 0


def cmd_score_summary(args: argparse.Namespace) -> int:
    from .score import read_scored, summarize, write_summary

    if args.config is not None:
        plan = _plan(args)
        args.scored = args.scored or plan.scored_files()
        _fill(args, out="results/scored/summary.csv")
    _need(args, "out")
    rows = [r for path in args.scored for r in read_scored(Path(path))]
    summary = summarize(rows)
    write_summary(Path(args.out), summary)
    for line in summary:
        log.info("%s", line)
    return 0


def cmd_check_requests(args: argparse.Namespace) -> int:
    from .score.requests import check_requests

    if args.config is not None:
        plan = _plan(args)
        args.outputs = args.outputs or [f for m in plan.models for f in plan.output_files(m)]
        _fill(args, on_error=plan.config["scoring"]["on_request_error"])
        _fill(args, out="results/requests.txt")
    _need(args, "on_error", "out")
    status, message = check_requests(args.outputs, args.on_error, Path(args.out))
    if args.log:
        Path(args.log).parent.mkdir(parents=True, exist_ok=True)
        Path(args.log).write_text(message + "\n", encoding="utf-8")
    (log.error if status else log.info)("%s", message)
    return status


def cmd_score_released(args: argparse.Namespace) -> int:
    from .data.released import load_questions
    from .score.released import format_released_summary, released_summary, score_released

    rows = score_released(
        args.format,
        args.dataset,
        load_questions(args.dataset, Path(args.questions), on_bad_row=args.on_bad_row),
        Path(args.samples),
        Path(args.out),
        model=args.model,
        condition=args.condition,
        id_field=args.id_field,
        unparsed_choice=args.unparsed_choice or "wrong",
        response_field=args.response_field,
        extraction_field=args.extraction_field,
    )
    print(f"{args.out}: {format_released_summary(released_summary(rows))}")
    return 0


def cmd_judge_reference(args: argparse.Namespace) -> int:
    from .clients.llm import LLMCache
    from .core.io import read_jsonl, write_jsonl
    from .core.records import OutputRow, read_samples
    from .judges.reference import judge_outputs, make_reference_judge

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        _fill(
            args,
            outputs=plan.output_path(m, d, c, p),
            samples=plan.samples_path(d),
            spec=json.dumps(plan.reference_judge_spec()),
            cache_dir=plan.llm_cache_dir,
            out=plan.judged_path(m, d, c, p),
        )
    _need(args, "outputs", "samples", "spec", "out")
    samples = {s.sample_id: s for s in read_samples(args.samples)}
    rows = [OutputRow.from_dict(r) for r in read_jsonl(args.outputs)]
    cache = LLMCache(Path(args.cache_dir or "results/cache/llm"))
    judge = make_reference_judge(_json_arg(args.spec, "--spec"), cache)
    judged = judge_outputs(rows, judge, samples, use_released=args.use_released)
    write_jsonl(args.out, judged)
    log.info(
        "%s: %d outputs judged, %d refer to the distractor, %d without a verdict",
        args.out,
        len(judged),
        sum(r["verdict"] == "yes" for r in judged),
        sum(r["verdict"] is None for r in judged),
    )
    return 0


def cmd_judge_mathverse(args: argparse.Namespace) -> int:
    from .judges.mathverse import judge_mathverse

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        _fill(
            args,
            outputs=plan.output_path(m, d, c, p),
            samples=plan.samples_path(d),
            spec=json.dumps(plan.math_judge_spec()),
            out=plan.math_judged_path(m, d, c, p),
        )
    _need(args, "outputs", "samples", "spec", "out")
    summary = judge_mathverse(args.outputs, args.samples, _json_arg(args.spec, "--spec"), args.out)
    log.info(
        "%s: %d outputs judged (%s), %d correct, %d without a verdict",
        args.out,
        summary["rows"],
        summary.get("judge"),
        summary["correct"],
        summary["failed"],
    )
    return 0


def cmd_judge_attributes(args: argparse.Namespace) -> int:
    from .judges.attributes import judge_attributes

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        args.extractor = args.extractor or plan.attribute_extractors[0]
        _fill(
            args,
            outputs=plan.output_path(m, d, c, p),
            samples=plan.samples_path(d),
            manifest=plan.manifest_path(d, c),
            task=plan.idis_task(d),
            spec=json.dumps(plan.attribute_spec(args.extractor)),
            out=plan.attributes_path(args.extractor, m, d, c, p),
        )
    _need(args, "outputs", "samples", "manifest", "task", "extractor", "spec", "out")
    summary = judge_attributes(
        args.outputs,
        args.samples,
        args.manifest,
        _json_arg(args.spec, "--spec"),
        args.task,
        args.extractor,
        args.out,
    )
    log.info("%s: %s", args.out, summary)
    return 0


def cmd_idis_areas(args: argparse.Namespace) -> int:
    from .perturb.areas import measure_areas

    if args.config is not None:
        plan = _job_names(args, "dataset", "condition")
        d, c = args.dataset, args.condition
        _fill(
            args,
            manifest=plan.manifest_path(d, c),
            samples=plan.samples_path(d),
            spec=json.dumps(plan.areas_spec()),
            out=plan.area_path(d, c),
        )
    _need(args, "manifest", "samples", "spec", "out")
    summary = measure_areas(args.manifest, args.samples, _json_arg(args.spec, "--spec"), args.out)
    log.info("%s: %s", args.out, summary)
    return 0


def cmd_block_attention(args: argparse.Namespace) -> int:
    from .clients.vlm import make_backend
    from .infer.blocking import block_attention
    from .infer.run import Job
    from .score import score_outputs

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition", "prompt")
        m, d, c, p = args.model, args.dataset, args.condition, args.prompt
        extractor = plan.attribute_extractors[0]
        _fill(
            args,
            spec=json.dumps(plan.blocking_spec(m, d, p)),
            outputs=plan.output_path(m, d, c, p),
            attributes=plan.attributes_path(extractor, m, d, c, p),
            manifest=plan.manifest_path(d, c),
            samples=plan.samples_path(d),
            out=plan.blocked_path(m, d, c, p),
        )
    _need(args, "spec", "outputs", "attributes", "manifest", "samples", "out")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    spec = _json_arg(args.spec, "--spec")
    job = Job(**spec["infer"])
    unparsed = spec.get("unparsed_choice") or "wrong"

    def score(row: dict[str, Any], sample: Any) -> int | None:
        """A re-answer scored as the outputs are (the dataset's scorer, no LLM fallback)."""
        scored = score_outputs(
            {sample.sample_id: sample},
            [row],
            spec["scorer"],
            unparsed_choice=unparsed,
        )
        return int(scored[0]["correct"])

    backend = make_backend(job.model, job.model_spec)
    try:
        summary = block_attention(
            Path(args.outputs),
            Path(args.samples),
            Path(args.manifest),
            Path(args.attributes),
            backend,
            Path(args.out),
            settings=tuple(spec["settings"]),
            max_new_tokens=int(spec["max_new_tokens"]),
            limit=spec.get("limit"),
            score=score,
        )
    finally:
        backend.close()
    log.info("%s: %s", args.out, json.dumps(summary, sort_keys=True, default=str))
    return 0


def cmd_concepts(args: argparse.Namespace) -> int:
    from .construct.concepts import write_labels
    from .core.records import read_samples

    spec = _json_arg(args.spec, "--spec") if args.spec else {"backend": "offline"}
    existing = args.out if Path(args.out).exists() else None
    counts = write_labels(read_samples(args.samples), spec, args.out, existing)
    log.info("%s: %s", args.out, counts)
    return 0


def cmd_judge_agreement(args: argparse.Namespace) -> int:
    from .judges.reference import agreement_of_files

    print(json.dumps(agreement_of_files(args.a, args.b), indent=2, default=str))
    return 0


def cmd_compare_masking(args: argparse.Namespace) -> int:
    from .judges.crm.stage import compare_masking

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition")
        m, d, c = args.model, args.dataset, args.condition
        _fill(args, spec=json.dumps(plan.compare_spec()), out=plan.compared_path(m, d, c))
        _fill(args, **plan.compare_inputs(m, d, c))
    files = ("clean_cot", "clean_answer", "masked_cot", "masked_answer", "manifest", "samples")
    _need(args, "spec", *files, "out")
    counts = compare_masking(
        **{f: Path(getattr(args, f)) for f in files},
        out=Path(args.out),
        spec=_json_arg(args.spec, "--spec"),
    )
    log.info("%s: %s", args.out, counts)
    return 0


def cmd_judge_hallucination(args: argparse.Namespace) -> int:
    from .judges.hallucination import judge_compared

    if args.config is not None:
        plan = _job_names(args, "model", "dataset", "condition")
        m, d, c = args.model, args.dataset, args.condition
        _fill(
            args,
            compared=plan.compared_path(m, d, c),
            spec=json.dumps(plan.hallucination_judge_spec()),
            cache_dir=plan.llm_cache_dir,
            out=plan.hallucination_path(m, d, c),
        )
    _need(args, "compared", "out")
    counts = judge_compared(
        Path(args.compared),
        Path(args.out),
        _json_arg(args.spec, "--spec") if args.spec else None,
        Path(args.cache_dir or "results/cache/llm"),
    )
    log.info("%s: %s", args.out, counts)
    return 0


def cmd_construct(args: argparse.Namespace) -> int:
    """Distraction candidates for human review: writer + editor."""
    from .construct.pipeline import construct

    if args.config is not None:
        if args.name is None:
            raise ConfigError("with --config, give --name (a key under `construct`)")
        plan = _plan(args)
        if args.name not in plan.config["construct"]:
            known = ", ".join(plan.config["construct"]) or "none"
            raise ConfigError(f"{args.config}: no construct.{args.name} (known: {known})")
        _fill(
            args,
            spec=json.dumps(plan.config["construct"][args.name]),
            samples=plan.construct_inputs(args.name)["samples"],
            seed=plan.config["seed"],
            cache_dir=plan.llm_cache_dir,
            out_dir=f"results/construct/{args.name}",
        )
    _need(args, "spec", "samples", "out_dir")
    rows, writer, editor = construct(
        _json_arg(args.spec, "--spec"),
        args.samples,
        Path(args.out_dir),
        seed=args.seed or 0,
        cache_dir=Path(args.cache_dir or "results/cache/llm"),
    )
    for failure in rows.failures:
        log.warning("construction failed: %s", failure)
    log.info(
        "%s: %d candidates, %d failures (writer %s, editor %s)",
        args.out_dir,
        len(rows),
        len(rows.failures),
        writer.name,
        editor.name,
    )
    return 0


def cmd_review(args: argparse.Namespace, candidates: Any = None, **options: Any) -> int:
    """Serve, write or report the review of ``candidates`` (default: --candidates) with
    the decisions file (the DECIDE arguments); ``options`` go to ``review``."""
    from .review.server import review

    return review(
        args.candidates if candidates is None else candidates,
        args.decisions,
        host=args.host,
        port=args.port,
        image_base=args.image_base,
        reviewer=args.reviewer,
        page=args.page,
        report=args.report,
        **options,
    )


def cmd_idis_review(args: argparse.Namespace) -> int:
    """Human verification of an Idis condition's images (the Idis paper's A.3 criteria)."""
    from .core.decisions import DecisionError
    from .review.idis import idis_candidates

    try:
        candidates = idis_candidates(args.manifest, args.samples)
    except (DecisionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return cmd_review(args, candidates, criteria_set=args.set)


def cmd_concepts_review(args: argparse.Namespace) -> int:
    """Confirm or correct the proposed concept families of MathVerse problems."""
    from .review.concepts import concepts_review

    return concepts_review(
        args.labels,
        args.samples,
        host=args.host,
        port=args.port,
        image_base=args.image_base,
        report=args.report,
    )


def cmd_study(args: argparse.Namespace) -> int:
    """A study's metrics, or one of its tables, figures or pages (see vlmrobust.studies)."""
    from .studies import get_study
    from .studies.base import spec_json

    study = get_study(args.study)
    scope = args.scope
    if args.config is not None:
        plan = _plan(args)
        scopes = study.scopes(plan)
        if scope not in scopes:
            known = ", ".join(repr(s) for s in scopes) or "none in this run"
            raise ConfigError(
                f"{args.config}: study {study.name} has no scope {scope!r} (scopes: {known})"
            )
        # exactly the spec the rule passes (sorted JSON), so the files are the same
        spec = json.loads(spec_json(study.spec(plan, scope)))
        inputs = study.metrics_inputs(plan, scope) if args.command == "metrics" else None
        inputs = inputs if inputs is not None else study.view_inputs(plan, scope)
    elif args.spec is None:
        raise ConfigError("give either --config FILE or --spec JSON (and --inputs JSON)")
    else:
        spec = _json_arg(args.spec, "--spec")
        inputs = _json_arg(args.inputs, "--inputs") if args.inputs else {}
    t0 = time.perf_counter()
    if args.command == "metrics":
        out = Path(args.out or study.metrics_path(scope))
        warnings = Path(args.warnings or study.warnings_path(scope))
        metrics, found = study.write_metrics(inputs, spec, out, warnings)
        for w in found:
            log.warning("%s", w)
        log.info(
            "%s: %d metric rows, %d warnings (%.1f s)",
            out,
            len(metrics),
            len(found),
            time.perf_counter() - t0,
        )
        return 0
    metrics_path = Path(args.metrics or study.metrics_path(scope))
    if args.command == "views":
        out_dir = Path(args.out_dir or f"results/views/{study.folder(scope)}")
        paths = study.write_views(metrics_path, inputs, spec, out_dir)
        log.info("%s: %d files (%.1f s)", out_dir, len(paths), time.perf_counter() - t0)
        return 0
    root = "results/tables" if args.command == "table" else "figures"
    out_dir = Path(args.out_dir or f"{root}/{study.folder(scope)}")
    write = getattr(study, f"write_{args.command}")
    paths = write(args.name, metrics_path, inputs, spec, out_dir)
    log.info("%s (%.1f s)", ", ".join(str(p) for p in paths), time.perf_counter() - t0)
    return 0


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Arg:
    """One argparse argument: its flags and keyword arguments."""

    flags: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def arg(*flags: str, **kwargs: Any) -> Arg:
    return Arg(flags, kwargs)


@dataclass(frozen=True)
class Command:
    run: Callable[[argparse.Namespace], int]
    help: str
    args: tuple[Arg, ...] = ()


SPEC = (
    arg("--spec", help="the part of the configuration as JSON (as the rule passes it)"),
    arg("--config", help="or: a run configuration YAML (the run plan fills in the files)"),
)
CONFIG = (arg("--config", help="a run configuration YAML (the run plan fills in the files)"),)


def job(*names: str) -> tuple[Arg, ...]:
    """The names of one job (with --config): model, dataset, condition, prompt."""
    helps = {
        "model": "model id (registry)",
        "dataset": "dataset name (key under `datasets`)",
        "condition": "condition name (key under `conditions`)",
        "prompt": "prompt setting (default: the dataset's own)",
    }
    return tuple(arg(f"--{n}", help=f"with --config: {helps[n]}") for n in names)


MCP = job("model", "dataset", "condition", "prompt")
CACHE = arg("--cache-dir", help="LLM cache folder (default results/cache/llm)")
UNPARSED_CHOICE = arg(
    "--unparsed-choice",
    choices=["wrong", "most-similar"],
    help="a multiple-choice answer no rule reads: wrong, an extraction failure (default), "
    "or the most similar option, MathVista's official convention (score with --config: "
    "the plan's scoring.unparsed_choice)",
)
# A local review server (review, idis-review, concepts-review).
SERVE = (
    arg("--host", default="127.0.0.1", help="bind address"),
    arg("--port", type=int, default=0, help="port (0: any free port)"),
    arg("--image-base", help="folder relative image paths start from (default: .)"),
)
# The decisions file and what review / idis-review do with it.
DECIDE = (
    arg("--decisions", required=True, help="decisions CSV (created when first used)"),
    *SERVE,
    arg("--reviewer", help="name written with each decision"),
    arg("--page", help="write a static, read-only page here instead of serving"),
    arg("--report", action="store_true", help="print the verification report"),
)


def _study_args(command: str) -> tuple[Arg, ...]:
    named = (
        ()
        if command in ("metrics", "views")
        else (arg("name", help="file stem: table1, figure4, ..."),)
    )
    common = (
        arg("--study", required=True, help="corruption, distraction, masking, ..."),
        arg("--scope", default="", help="the dataset of a per-dataset study ('' if pooled)"),
        *CONFIG,
        arg("--spec", help="or: the study's specification as JSON (as the rule passes it)"),
        arg("--inputs", help="and its input files as JSON {name: [paths]}"),
    )
    if command == "metrics":
        outputs = (
            arg("--out", help="metrics CSV (default: the study's)"),
            arg("--warnings", help="warnings text file (default: the study's)"),
        )
    else:
        outputs = (
            arg("--metrics", help="the study's metrics CSV (default: the study's)"),
            arg("--out-dir", help="output folder (default: the study's)"),
        )
    return named + common + outputs


#: subcommand -> (function, help, arguments): the whole command line in one place
COMMANDS: dict[str, Command] = {
    "check-config": Command(
        cmd_check_config,
        "validate a run configuration (and the model registry)",
        (
            arg("config", help="run configuration YAML, e.g. config/config.yaml"),
            arg("--show", action="store_true", help="print it with every default filled in"),
        ),
    ),
    "demo-data": Command(
        cmd_demo_data,
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
        cmd_demo_idis,
        "generate the Idis demo data in the base datasets' formats, and its distractor assets",
        (
            arg("--out", required=True, help="output folder (e.g. results/raw/demo-idis)"),
            arg("--seed", type=int, help="default: the config's seed, else 0"),
            *CONFIG,
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
        cmd_demo_model,
        "build an embedded demo model (a tiny Qwen2-VL checkpoint)",
        (
            arg("--out", help="checkpoint folder (results/models/<id>)"),
            arg(
                "--spec",
                help="how to build it as JSON (seed, options, train_dir, train, init), as "
                "the rule passes it",
            ),
            *CONFIG,
            arg("--model", help="with --config: the demo model's id (registry)"),
            arg("--seed", type=int, help="alone: a random-weight model from this seed"),
        ),
    ),
    "demo-seeds": Command(
        cmd_demo_seeds,
        "redraw the demo seed distractors (resources/distraction/seeds)",
        (arg("--out", default="resources/distraction/seeds", help="output folder"),),
    ),
    "samples": Command(
        cmd_samples,
        "datasets -> samples: load one dataset into the sample schema",
        (
            arg("--name", required=True, help="the dataset's name (key under `datasets`)"),
            *SPEC,
            arg("--out", help="samples JSONL (images go beside it)"),
            arg("--report", help="report JSON (counts, skipped rows)"),
        ),
    ),
    "write-questions": Command(
        cmd_write_questions,
        "VisArgs: write the questions of one dataset with its LLM question writer",
        (
            arg("--name", required=True, help="the dataset's name (key under `datasets`)"),
            *SPEC,
            arg(
                "--cache-dir", help="LLM cache (default: question_writer.cache_dir, else the run's)"
            ),
            arg("--out", help="questions JSONL (results/questions/<dataset>/questions.jsonl)"),
        ),
    ),
    "variants": Command(
        cmd_variants,
        "samples -> variants: apply one condition",
        (
            arg("--condition", required=True, help="the condition (key under `conditions`)"),
            *SPEC,
            arg("--dataset", help="with --config: the dataset (its samples and manifest)"),
            arg("--samples", help="samples JSONL"),
            arg("--seed", type=int, help="global seed (default 0, or the config's)"),
            arg("--threads", type=int, default=1, help="worker processes"),
            arg("--out", help="variant manifest JSONL (images go beside it)"),
        ),
    ),
    "infer": Command(
        cmd_infer,
        "variants -> outputs: one model on one manifest (resumable)",
        (
            *SPEC,
            *MCP,
            arg("--shard", type=int, default=0, help="with --config: this shard"),
            arg("--shards", type=int, default=1, help="with --config: of this many"),
            arg("--manifest", help="variant manifest JSONL"),
            arg("--samples", help="samples JSONL of the dataset"),
            arg("--context", help="a second-stage prompt's first-stage outputs (CRM)"),
            arg("--threads", type=int, default=0, help="torch CPU threads (0: torch's)"),
            arg("--out", help="outputs JSONL (progress goes to <out>.partial)"),
            arg(
                "--service",
                choices=("auto", "off"),
                default="auto",
                help="auto: answer through the model's service (one loaded model for every "
                "job of the Snakemake run above this job, started by the first; none when "
                "run by hand); off: load the model in this job",
            ),
            arg(
                "--service-idle-s",
                type=float,
                default=900.0,
                help="a service this job starts stops after this many seconds unused",
            ),
            arg("--service-log", help="the log of a service this job starts"),
        ),
    ),
    "vllm-serve": Command(
        cmd_vllm_serve,
        "serve a backend-vllm model through vLLM's OpenAI-compatible server (the openai "
        "backend answers through it)",
        (
            arg("--config", required=True, help="the run's configuration (registry, environments)"),
            arg("--model", required=True, help="the registry id of a backend-vllm model"),
            arg("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)"),
            arg("--port", type=int, default=8000, help="port (default 8000)"),
            arg("--print", action="store_true", help="print the command instead of running it"),
        ),
    ),
    "gather": Command(
        cmd_gather,
        "concatenate the shards of one output in manifest order",
        (
            *CONFIG,
            *MCP,
            arg("--manifest"),
            arg("--out"),
            arg("shards", nargs="*", help="shard files (with --config: the plan's)"),
        ),
    ),
    "import-outputs": Command(
        cmd_import_outputs,
        "released results as the outputs of one job (config `imports`)",
        (
            arg("--spec", required=True, help="the `imports` entry as JSON"),
            arg("--samples", required=True, help="samples JSONL of the dataset"),
            arg(
                "--samples-report",
                help="the samples stage's report.json: the ids it skipped as bad rows, "
                "whose released answers are left out (counted)",
            ),
            arg("--released", required=True, help="the released file"),
            arg(
                "--manifest",
                help="the condition's variant manifest JSONL (required for format jsonl)",
            ),
            arg("--out", required=True, help="outputs JSONL"),
        ),
    ),
    "import-verdicts": Command(
        cmd_import_verdicts,
        "released distractor-reference verdicts alone as the judged file of one job",
        (
            arg("--spec", help="the `imports` entry as JSON (recorded; not needed)"),
            arg("--samples", required=True, help="samples JSONL of the dataset"),
            arg("--references", required=True, help="the released verdicts file"),
            arg("--out", required=True, help="judged JSONL"),
        ),
    ),
    "score": Command(
        cmd_score,
        "outputs -> scored: the benchmark's rules on every answer",
        (
            *CONFIG,
            *MCP,
            arg("--outputs", help="outputs JSONL"),
            arg("--samples", help="samples JSONL"),
            arg("--scorer", help="scoring rules (a benchmark's name or generic)"),
            arg("--fallback", help="scoring.llm_fallback as JSON (LLM answer extraction)"),
            UNPARSED_CHOICE,
            CACHE,
            arg("--use-released", action="store_true", help="keep released correctness"),
            arg("--out", help="scored CSV"),
        ),
    ),
    "score-summary": Command(
        cmd_score_summary,
        "accuracy and extraction failures per model x dataset",
        (
            *CONFIG,
            arg("--out", help="summary CSV"),
            arg("scored", nargs="*", help="scored CSV files (with --config: the plan's)"),
        ),
    ),
    "check-requests": Command(
        cmd_check_requests,
        "the run's last check: requests that failed after every retry",
        (
            *CONFIG,
            arg("--on-error", choices=["fail", "exclude"], help="scoring.on_request_error"),
            arg("--out", help="report of the failed requests (results/requests.txt)"),
            arg("--log", help="also write the message here"),
            arg("outputs", nargs="*", help="outputs JSONL files (with --config: the plan's)"),
        ),
    ),
    "score-released": Command(
        cmd_score_released,
        "score released lmms-eval / VLMEvalKit results with this project's rules",
        (
            arg(
                "--format",
                required=True,
                help="lmms-eval (samples JSONL), vlmevalkit (predictions), mathvista "
                "(MathVista's output_<model>.json), logicvista (LogicVista's "
                "<model>-answers.json)",
            ),
            arg("--dataset", required=True, help="benchmark: mathvista, mmmu, ..."),
            arg("--questions", required=True, help="the dataset's rows (JSON, JSONL, parquet)"),
            arg("--samples", required=True, help="released samples / predictions file"),
            arg("--id-field", default=None, help="the released rows' id field (dotted)"),
            arg(
                "--on-bad-row",
                choices=["skip", "error"],
                default="skip",
                help="a question row that cannot be a sample: skip it and count it and its "
                "released rows (default), or stop",
            ),
            UNPARSED_CHOICE,
            arg(
                "--extraction-field",
                default=None,
                help="score this released field (e.g. extraction: MathVista's official "
                "GPT-4 extraction) instead of the response",
            ),
            arg(
                "--response-field",
                default=None,
                help="mathvista/logicvista: the field holding the response (default: the "
                "format's: response / answer)",
            ),
            arg("--model", default="released", help="model id recorded in the rows"),
            arg("--condition", default="clean", help="condition recorded in the rows"),
            arg("--out", required=True, help="scored CSV"),
        ),
    ),
    "judge-reference": Command(
        cmd_judge_reference,
        "outputs -> does each output refer to the distractor?",
        (
            *SPEC,
            *MCP,
            arg("--outputs", help="outputs JSONL of a distraction condition"),
            arg("--samples", help="samples JSONL (meta.edit: the distractor)"),
            CACHE,
            arg("--use-released", action="store_true", help="keep released verdicts"),
            arg("--out", help="judged JSONL (one row per output)"),
        ),
    ),
    "judge-mathverse": Command(
        cmd_judge_mathverse,
        "outputs -> MathVerse two-stage judge verdicts (extract, then judge)",
        (
            *SPEC,
            *MCP,
            arg("--outputs", help="outputs JSONL of a mathverse dataset"),
            arg("--samples", help="samples JSONL (meta.question_for_eval)"),
            arg("--out", help="judged JSONL (one row per output: extracted, verdict)"),
        ),
    ),
    "judge-attributes": Command(
        cmd_judge_attributes,
        "outputs -> Idis attribute labels of each reasoning trace (one extractor)",
        (
            *SPEC,
            *MCP,
            arg(
                "--extractor",
                help="extractor name (judge.attributes.extractors; default the first)",
            ),
            arg("--task", choices=["perception", "math", "waterbirds"], help="attribute task"),
            arg("--outputs", help="outputs JSONL of an Idis dataset"),
            arg("--samples", help="samples JSONL (the target's label or concept family)"),
            arg("--manifest", help="variant manifest JSONL (the distractors' classes)"),
            arg("--out", help="attributes JSONL (one row per output)"),
        ),
    ),
    "idis-areas": Command(
        cmd_idis_areas,
        "variants -> distractor and target areas and r_area per variant",
        (
            *SPEC,
            *job("dataset", "condition"),
            arg("--manifest", help="variant manifest JSONL"),
            arg("--samples", help="samples JSONL (target masks, original images)"),
            arg("--out", help="areas JSONL (one row per variant)"),
        ),
    ),
    "block-attention": Command(
        cmd_block_attention,
        "outputs -> final answers re-generated with attention to attribute phrases blocked",
        (
            *SPEC,
            *MCP,
            arg("--outputs", help="outputs JSONL of a local model"),
            arg("--attributes", help="the main extractor's attributes JSONL of those outputs"),
            arg("--manifest", help="variant manifest JSONL"),
            arg("--samples", help="samples JSONL"),
            arg("--threads", type=int, default=0, help="torch CPU threads (0: torch's)"),
            arg("--out", help="blocked JSONL (one row per output and setting)"),
        ),
    ),
    "judge-agreement": Command(
        cmd_judge_agreement,
        "agreement (percent, Cohen's kappa) of two judges on the same rows",
        (
            arg("a", help="judged JSONL or released reference JSONL"),
            arg("b", help="judged JSONL or released reference JSONL"),
        ),
    ),
    "compare-masking": Command(
        cmd_compare_masking,
        "outputs -> compared: CRM chains and answers, clean vs one mask condition",
        (
            *SPEC,
            *job("model", "dataset", "condition"),
            arg("--clean-cot", help="clean chain-of-thought outputs"),
            arg("--clean-answer", help="clean final-answer outputs"),
            arg("--masked-cot", help="masked chain-of-thought outputs"),
            arg("--masked-answer", help="masked final-answer outputs"),
            arg("--manifest", help="the mask condition's variant manifest"),
            arg("--samples", help="samples JSONL of the dataset"),
            arg("--out", help="compared rows JSONL"),
        ),
    ),
    "judge-hallucination": Command(
        cmd_judge_hallucination,
        "compared -> does each masked chain hallucinate the hidden content? (CRM)",
        (
            *SPEC,
            *job("model", "dataset", "condition"),
            arg("--compared", help="compared rows JSONL of one mask condition"),
            CACHE,
            arg("--out", help="judged rows JSONL"),
        ),
    ),
    "construct": Command(
        cmd_construct,
        "samples -> distraction candidates (writer + editor)",
        (
            *SPEC,
            arg("--name", help="with --config: the construction (key under `construct`)"),
            arg("--samples", nargs="+", help="samples JSONL of the source datasets"),
            arg("--seed", type=int, help="global seed (default 0, or the config's)"),
            CACHE,
            arg("--out-dir", help="folder of candidates.jsonl and images"),
        ),
    ),
    "review": Command(
        cmd_review,
        "human verification: serve the review page that writes the decisions file",
        (arg("--candidates", required=True, help="candidates JSONL"), *DECIDE),
    ),
    "idis-review": Command(
        cmd_idis_review,
        "human verification of an Idis condition's images (A.3 criteria) -> decisions file",
        (
            arg("--manifest", required=True, help="variant manifest of an Idis image condition"),
            arg("--samples", required=True, help="samples JSONL the variants were built from"),
            arg(
                "--set",
                required=True,
                choices=["idis-perception", "idis-math"],  # IDIS_CRITERIA_SETS (lazy import)
                help="criteria set the page shows and the decisions are checked against",
            ),
            *DECIDE,
        ),
    ),
    "concepts": Command(
        cmd_concepts,
        "MathVerse samples -> proposed concept-family labels (a person confirms them)",
        (
            arg("--samples", required=True, help="samples JSONL of a mathverse dataset"),
            arg("--spec", help="labeler spec JSON (default offline rules; or an LLM spec)"),
            arg("--out", required=True, help="labels CSV (confirmed rows are kept)"),
        ),
    ),
    "concepts-review": Command(
        cmd_concepts_review,
        "confirm the proposed concept family of each MathVerse problem -> labels CSV",
        (
            arg("--labels", required=True, help="concept-family labels CSV (rewritten in place)"),
            arg("--samples", required=True, help="MathVerse samples JSONL (the diagrams)"),
            *SERVE,
            arg("--report", action="store_true", help="print the label counts"),
        ),
    ),
    **{
        command: Command(cmd_study, what, _study_args(command))
        for command, what in (
            ("metrics", "stage files -> a study's tidy metrics (and warnings)"),
            ("table", "metrics -> one table of a study (csv, md, tex)"),
            ("figure", "metrics -> one figure of a study (png, pdf)"),
            ("page", "metrics -> one HTML page of a study"),
            (
                "views",
                "metrics -> every table, figure and page of a study's scope, in one "
                "process (OUT_DIR/tables/, OUT_DIR/figures/)",
            ),
        )
    },
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vlmrobust",
        description="Stages of the vlmrobust workflow (each one is a Snakemake rule).",
    )
    p.add_argument("--version", action="version", version=f"vlmrobust {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        s = sub.add_parser(name, help=command.help, description=command.help)
        for a in command.args:
            s.add_argument(*a.flags, **a.kwargs)
        s.set_defaults(func=command.run)
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

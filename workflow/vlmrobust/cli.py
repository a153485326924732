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
from .core.config import ConfigError, load_yaml, validate_config

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
    from .demo.data import generate_demo

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
    writer = spec.get("question_writer") or {"backend": "template"}
    t0 = time.perf_counter()
    items = question_items(args.name, spec)
    counts = write_questions(
        items,
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


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from exc


def cmd_demo_model(args: argparse.Namespace) -> int:
    from .demo.model import build_demo_model

    t0 = time.perf_counter()
    info = build_demo_model(Path(args.out), seed=args.seed)
    log.info("demo model written to %s in %.2f s: %s", args.out, time.perf_counter() - t0, info)
    return 0


def cmd_infer(args: argparse.Namespace) -> int:
    from .infer.run import Job, run_inference

    spec = _json_arg(args.spec, "--spec")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    job = Job(**spec)
    t0 = time.perf_counter()
    context = Path(args.context) if args.context else None
    stats = run_inference(
        job, Path(args.manifest), Path(args.samples), Path(args.out), context=context
    )
    log.info("%s: %s (%.1f s)", args.out, stats, time.perf_counter() - t0)
    return 0


def cmd_gather(args: argparse.Namespace) -> int:
    from .infer.run import gather_outputs

    n = gather_outputs([Path(p) for p in args.shards], Path(args.manifest), Path(args.out))
    log.info("%s: %d rows gathered from %d shards", args.out, n, len(args.shards))
    return 0


def _fallback(spec_json: str | None, cache_dir: str | None):
    """The LLM extraction fallback of scoring.llm_fallback (None when not configured)."""
    if not spec_json:
        return None
    spec = _json_arg(spec_json, "--fallback")
    if spec is None:
        return None
    from .clients.llm import LLMCache, make_llm
    from .score import llm_extractor

    return llm_extractor(make_llm(spec, LLMCache(Path(cache_dir or "results/cache/llm"))))


def cmd_score(args: argparse.Namespace) -> int:
    from .core.io import read_jsonl
    from .core.records import OutputRow, read_samples
    from .score import score_outputs, write_scored

    samples = {s.sample_id: s for s in read_samples(args.samples)}
    rows = [OutputRow.from_dict(r) for r in read_jsonl(args.outputs)]
    scored = score_outputs(
        samples, rows, args.scorer, fallback=_fallback(args.fallback, args.cache_dir)
    )
    if args.use_released:
        released = {r.key: r.released for r in rows if r.released and "correct" in r.released}
        for row in scored:
            if row["key"] in released:
                row["correct"] = int(released[row["key"]]["correct"])
                row["score"] = float(row["correct"])
                row["method"], row["rule"] = "released", "released"
                row["reason"] = "correctness as stated by the released file"
    write_scored(Path(args.out), scored)
    n_ok = sum(r["correct"] for r in scored)
    log.info("%s: %d rows, %d correct", args.out, len(scored), n_ok)
    return 0


def cmd_score_summary(args: argparse.Namespace) -> int:
    from .score import read_scored, summarize, write_summary

    rows = [r for path in args.scored for r in read_scored(Path(path))]
    summary = summarize(rows)
    write_summary(Path(args.out), summary)
    for line in summary:
        log.info("%s", line)
    return 0


def cmd_score_released(args: argparse.Namespace) -> int:
    from .data.released import load_questions
    from .score.released import score_released

    questions = load_questions(args.dataset, Path(args.questions))
    rows = score_released(
        args.format,
        args.dataset,
        questions,
        Path(args.samples),
        Path(args.out),
        model=args.model,
        condition=args.condition,
        id_field=args.id_field,
    )
    log.info("%s: %d rows scored", args.out, len(rows))
    return 0


def _released_labels(spec: dict, released: str, questions: dict) -> dict[str, dict]:
    """{sample_id: {"correct": ..., "verdict": ...}} from the released files, where the
    `imports` entry asks for them (released_labels, references)."""
    from .core.io import read_jsonl
    from .judges import load_released_references

    labels: dict[str, dict] = {}
    if spec.get("released_labels"):
        if spec["format"] != "lmms-eval":
            raise ConfigError("imports: released_labels is supported for lmms-eval files only")
        id_field = spec.get("id_field") or "doc_id"
        for lineno, rec in enumerate(read_jsonl(released), 1):
            value = rec
            for part in id_field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            sample = questions.get(str(value))
            verdict = (rec.get("llm_as_judge_eval") or {}).get("true_false")
            if sample is None or verdict is None:
                raise ValueError(f"{released}:{lineno}: no released correctness (true_false)")
            labels.setdefault(sample.sample_id, {})["correct"] = bool(verdict)
    if spec.get("references"):
        for source_id, row in load_released_references(spec["references"]).items():
            sample = questions.get(str(source_id))
            if sample is not None and row.get("verdict") in ("yes", "no"):
                labels.setdefault(sample.sample_id, {})["verdict"] = row["verdict"]
    return labels


def cmd_import_outputs(args: argparse.Namespace) -> int:
    """A released lmms-eval / VLMEvalKit file as the outputs of one job (config `imports`)."""
    from dataclasses import replace

    from .core.io import write_jsonl
    from .core.records import read_samples
    from .score.released import import_lmms_eval, import_vlmevalkit

    spec = _json_arg(args.spec, "--spec")
    samples = read_samples(args.samples)
    questions = {str(s.meta.get("source_id", s.sample_id)): s for s in samples}
    dataset = samples[0].dataset if samples else spec["dataset"]
    if spec["format"] == "lmms-eval":
        rows = import_lmms_eval(
            args.released,
            dataset,
            questions,
            spec["model"],
            spec["condition"],
            id_field=spec.get("id_field") or "doc_id",
        )
    else:
        rows = import_vlmevalkit(
            args.released,
            dataset,
            questions,
            spec["model"],
            spec["condition"],
            id_column=spec.get("id_field"),
        )
    # The rows stand for the run's prompt setting, so they sit where a run would put them.
    rows = [replace(r, prompt=spec["prompt"]) for r in rows]
    labels = _released_labels(spec, args.released, questions)
    if labels:
        rows = [replace(r, released=labels.get(r.sample_id)) for r in rows]
    missing = len(samples) - len({r.sample_id for r in rows})
    if missing:
        log.warning("%s: %d samples have no released answer", args.released, missing)
    n = write_jsonl(args.out, (r.to_dict() for r in rows))
    log.info("%s: %d rows imported from %s", args.out, n, args.released)
    return 0


def cmd_compare_masking(args: argparse.Namespace) -> int:
    from .judges.crm.stage import compare_masking

    counts = compare_masking(
        clean_cot=Path(args.clean_cot),
        clean_answer=Path(args.clean_answer),
        masked_cot=Path(args.masked_cot),
        masked_answer=Path(args.masked_answer),
        manifest=Path(args.manifest),
        samples=Path(args.samples),
        out=Path(args.out),
        spec=_json_arg(args.spec, "--spec"),
        cache_dir=Path(args.cache_dir),
    )
    log.info("%s: %s", args.out, counts)
    return 0


def cmd_judge_reference(args: argparse.Namespace) -> int:
    from .clients.llm import LLMCache
    from .core.io import read_jsonl, write_jsonl
    from .core.records import OutputRow, read_samples
    from .judges import describe_outputs, judge_reference, make_reference_judge

    spec = _json_arg(args.spec, "--spec")
    samples = {s.sample_id: s for s in read_samples(args.samples)}
    rows = [OutputRow.from_dict(r) for r in read_jsonl(args.outputs)]
    judge = make_reference_judge(spec, LLMCache(Path(args.cache_dir)))
    released = {
        r.key: r.released["verdict"] for r in rows if r.released and "verdict" in r.released
    }
    if args.use_released and released:
        judged = judge_reference(
            [r for r in rows if r.key not in released], judge, describe=describe_outputs(samples)
        )
        by_key = {j["key"]: j for j in judged}
        judged = [
            by_key.get(r.key)
            or {
                "key": r.key,
                "verdict": released[r.key],
                "reason": "released verdict",
                "evidence": "",
                "confidence": None,
                "judge": "released",
                "error": None,
                "cached": False,
                "prompt_version": "released",
            }
            for r in rows
        ]
    else:
        judged = judge_reference(rows, judge, describe=describe_outputs(samples))
    write_jsonl(args.out, judged)
    n_yes = sum(r["verdict"] == "yes" for r in judged)
    n_err = sum(r["verdict"] is None for r in judged)
    log.info(
        "%s: %d outputs judged, %d refer to the distractor, %d without a verdict",
        args.out,
        len(judged),
        n_yes,
        n_err,
    )
    return 0


def cmd_construct(args: argparse.Namespace) -> int:
    """Distraction candidates for human review (Distract-Bench §3): writer + editor."""
    from .clients.llm import LLMCache, make_llm
    from .construct import (
        CompositeEditor,
        GeminiImageEditor,
        LLMWriter,
        OfflineWriter,
        OpenAIImageEditor,
        build_candidates,
        knowledge_base,
        load_seeds,
    )
    from .core.records import read_samples

    spec = _json_arg(args.spec, "--spec")
    cache = LLMCache(Path(args.cache_dir))
    samples = []
    for path in args.samples:
        rows = read_samples(path)
        samples += rows[: spec["limit_per_dataset"]] if spec["limit_per_dataset"] else rows
    writer_spec = spec["writer"]
    if writer_spec.get("backend", "offline") == "offline":
        writer = OfflineWriter(seed=args.seed)
        summarizer = None
    else:
        writer = LLMWriter(make_llm(writer_spec, cache))
        summarizer = make_llm(writer_spec, cache)
    editor_spec = spec["editor"]
    editors = {"composite": None, "openai": OpenAIImageEditor, "gemini": GeminiImageEditor}
    backend = editor_spec.get("backend", "composite")
    if backend not in editors:
        raise ConfigError(
            f"construct editor backend {backend!r} is not one of {', '.join(editors)}"
        )
    editor = CompositeEditor() if backend == "composite" else editors[backend](editor_spec)
    kb = knowledge_base(load_seeds(spec.get("seeds")), summarizer)
    rows = build_candidates(samples, writer, editor, kb, Path(args.out_dir), seed=args.seed)
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


def cmd_review(args: argparse.Namespace) -> int:
    from .review.server import main as review_main

    argv = ["--candidates", args.candidates, "--decisions", args.decisions]
    argv += ["--port", str(args.port)] + (["--page", args.page] if args.page else [])
    return review_main(argv)


def _verdicts(path: str) -> dict[str, Any]:
    """Verdicts by key: a judged JSONL of this workflow (``<variant>#<draw>``) or a
    released reference file (``final_id`` / ``doc_id``)."""
    from .core.io import read_jsonl

    return {
        str(row.get("key") or row.get("final_id") or row.get("doc_id")): row.get("verdict")
        for row in read_jsonl(path)
    }


def _own_id(key: str) -> str:
    """``distract-bench-17#0`` -> ``17``: a workflow key reduced to the dataset's own id."""
    return key.split("#")[0].rsplit("-", 1)[-1]


def cmd_judge_agreement(args: argparse.Namespace) -> int:
    from .judges import agreement

    a, b = _verdicts(args.a), _verdicts(args.b)
    shared = sorted(set(a) & set(b))
    if not shared:  # a workflow file against a released one: match on the dataset's ids
        a = {_own_id(k): v for k, v in a.items()}
        b = {_own_id(k): v for k, v in b.items()}
        shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(f"{args.a} and {args.b} label no common sample")
    result = {
        **agreement([a[k] for k in shared], [b[k] for k in shared]),
        "a": args.a,
        "b": args.b,
        "samples_in_both": len(shared),
    }
    print(json.dumps(result, indent=2, default=str))
    return 0


def _study_job(args: argparse.Namespace):
    """(study, scope, spec, inputs) of a study command: from --spec and --inputs JSON
    (as the rules pass them) or from --config (the run plan says which files)."""
    from .studies import get_study

    study = get_study(args.study)
    if args.config is not None:
        from .core.plan import RunPlan

        plan = RunPlan.load(args.config)
        scopes = study.scopes(plan)
        if args.scope not in scopes:
            known = ", ".join(repr(s) for s in scopes) or "none in this run"
            raise ConfigError(
                f"{args.config}: study {study.name} has no scope {args.scope!r} (scopes: {known})"
            )
        inputs = study.inputs(plan, args.scope)
        if args.command != "metrics":
            inputs = study.view_inputs(plan, args.scope)
        return study, args.scope, study.spec(plan, args.scope), inputs
    if args.spec is None:
        raise ConfigError("give either --config FILE or --spec JSON (and --inputs JSON)")
    spec = _json_arg(args.spec, "--spec")
    inputs = _json_arg(args.inputs, "--inputs") if args.inputs else {}
    return study, args.scope, spec, inputs


def cmd_study(args: argparse.Namespace) -> int:
    """A study's metrics, or one of its tables, figures or pages (see vlmrobust.studies)."""
    study, scope, spec, inputs = _study_job(args)
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
    metrics = Path(args.metrics or study.metrics_path(scope))
    default_dir = {"table": "results/tables"}.get(args.command, "figures")
    out_dir = Path(args.out_dir or f"{default_dir}/{study.folder(scope)}")
    write = getattr(study, f"write_{args.command}")
    paths = write(args.name, metrics, inputs, spec, out_dir)
    log.info("%s (%.1f s)", ", ".join(str(p) for p in paths), time.perf_counter() - t0)
    return 0


def _study_parser(sub, command: str, what: str) -> None:
    s = sub.add_parser(command, help=what)
    if command != "metrics":
        s.add_argument("name", help=f"the {command}'s file stem, e.g. table1, figure4, example1")
    s.add_argument("--study", required=True, help="corruption, distraction, masking, ...")
    s.add_argument(
        "--scope", default="", help="the dataset of a per-dataset study ('' for a pooled one)"
    )
    s.add_argument("--config", help="a run configuration YAML: spec and inputs from its plan")
    s.add_argument("--spec", help="or: the study's specification as JSON (as the rule passes it)")
    s.add_argument("--inputs", help="and its input files as JSON {name: [paths]}")
    if command == "metrics":
        s.add_argument("--out", help="metrics CSV (default: the study's)")
        s.add_argument("--warnings", help="warnings text file (default: the study's)")
    else:
        s.add_argument("--metrics", help="the study's metrics CSV (default: the study's)")
        s.add_argument("--out-dir", help="output folder (default: the study's)")
    s.set_defaults(func=cmd_study)


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

    s = sub.add_parser(
        "write-questions",
        help="VisArgs: the LLM question writer's questions of one dataset (cached)",
    )
    s.add_argument("--name", required=True, help="the dataset's name (key under `datasets`)")
    s.add_argument("--spec", help="the dataset's configuration as JSON (as the rule passes it)")
    s.add_argument("--config", help="or: a run configuration YAML to read it from")
    s.add_argument(
        "--cache-dir",
        default=None,
        help="LLM cache folder (default: question_writer.cache_dir, else results/cache/llm)",
    )
    s.add_argument(
        "--out", required=True, help="questions JSONL (results/questions/<dataset>/questions.jsonl)"
    )
    s.set_defaults(func=cmd_write_questions)

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

    s = sub.add_parser("demo-model", help="build an embedded random-weight demo model")
    s.add_argument("--out", required=True, help="checkpoint folder (results/models/<id>)")
    s.add_argument("--seed", type=int, required=True)
    s.set_defaults(func=cmd_demo_model)

    s = sub.add_parser("infer", help="variants -> outputs: one model on one manifest (resumable)")
    s.add_argument("--spec", required=True, help="the job as JSON (model, model_spec, prompt, ...)")
    s.add_argument("--manifest", required=True, help="variant manifest JSONL")
    s.add_argument("--samples", required=True, help="samples JSONL of the dataset")
    s.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    s.add_argument("--out", required=True, help="outputs JSONL (progress goes to <out>.partial)")
    s.add_argument(
        "--context",
        default=None,
        help="a second-stage prompt's first-stage outputs (CRM: crm-answer reads crm-cot)",
    )
    s.set_defaults(func=cmd_infer)

    s = sub.add_parser("import-outputs", help="released results as the outputs of one job")
    s.add_argument("--spec", required=True, help="the `imports` entry as JSON")
    s.add_argument("--samples", required=True, help="samples JSONL of the dataset")
    s.add_argument("--released", required=True, help="the released file")
    s.add_argument("--out", required=True, help="outputs JSONL")
    s.set_defaults(func=cmd_import_outputs)

    s = sub.add_parser("construct", help="samples -> distraction candidates (writer + editor)")
    s.add_argument("--spec", required=True, help="the construction's configuration as JSON")
    s.add_argument(
        "--samples", nargs="+", required=True, help="samples JSONL of the source datasets"
    )
    s.add_argument("--seed", type=int, default=0, help="global seed")
    s.add_argument("--cache-dir", default="results/cache/llm", help="LLM cache folder")
    s.add_argument("--out-dir", required=True, help="folder of candidates.jsonl and images")
    s.set_defaults(func=cmd_construct)

    s = sub.add_parser(
        "review", help="human verification: serve the review page that writes the decisions file"
    )
    s.add_argument("--candidates", required=True, help="candidates JSONL")
    s.add_argument("--decisions", required=True, help="decisions CSV (resources/distraction/...)")
    s.add_argument("--port", type=int, default=0, help="port (0: any free port)")
    s.add_argument("--page", help="write a static, read-only page here instead of serving")
    s.set_defaults(func=cmd_review)

    s = sub.add_parser("gather", help="concatenate the shards of one output in manifest order")
    s.add_argument("--manifest", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("shards", nargs="+")
    s.set_defaults(func=cmd_gather)

    s = sub.add_parser("score", help="outputs -> scored: the benchmark's rules on every answer")
    s.add_argument("--outputs", required=True, help="outputs JSONL")
    s.add_argument("--samples", required=True, help="samples JSONL")
    s.add_argument("--scorer", required=True, help="scoring rules (adapter name or generic)")
    s.add_argument("--fallback", help="scoring.llm_fallback as JSON (LLM answer extraction)")
    s.add_argument("--cache-dir", help="LLM cache folder (scoring.cache_dir)")
    s.add_argument(
        "--use-released", action="store_true", help="use the released correctness of imported rows"
    )
    s.add_argument("--out", required=True, help="scored CSV")
    s.set_defaults(func=cmd_score)

    s = sub.add_parser(
        "judge-reference", help="outputs -> does each output refer to the distractor?"
    )
    s.add_argument("--outputs", required=True, help="outputs JSONL of a distraction condition")
    s.add_argument("--samples", required=True, help="samples JSONL (meta.edit: the distractor)")
    s.add_argument("--spec", required=True, help="judge.reference as JSON")
    s.add_argument("--cache-dir", required=True, help="LLM cache folder")
    s.add_argument("--use-released", action="store_true", help="use released verdicts of imports")
    s.add_argument("--out", required=True, help="judged JSONL (one row per output)")
    s.set_defaults(func=cmd_judge_reference)

    s = sub.add_parser(
        "judge-agreement", help="agreement (percent, Cohen's kappa) of two judges on the same rows"
    )
    s.add_argument("a", help="judged JSONL or released reference JSONL")
    s.add_argument("b", help="judged JSONL or released reference JSONL")
    s.set_defaults(func=cmd_judge_agreement)

    s = sub.add_parser("score-summary", help="accuracy and extraction failures per model x dataset")
    s.add_argument("--out", required=True, help="summary CSV")
    s.add_argument("scored", nargs="+", help="scored CSV files")
    s.set_defaults(func=cmd_score_summary)

    s = sub.add_parser(
        "score-released",
        help="score released lmms-eval / VLMEvalKit results with this project's rules",
    )
    s.add_argument("--format", required=True, choices=["lmms-eval", "vlmevalkit"])
    s.add_argument(
        "--dataset", required=True, help="adapter name: mathvista, mmmu, distract-bench, ..."
    )
    s.add_argument("--questions", required=True, help="the dataset's rows (JSON, JSONL or parquet)")
    s.add_argument("--samples", required=True, help="released samples / predictions file")
    s.add_argument("--model", default="released", help="model id recorded in the rows")
    s.add_argument("--condition", default="clean", help="condition recorded in the rows")
    s.add_argument(
        "--id-field",
        default=None,
        help="the results' id field: doc_id (lmms-eval; a dotted path reaches nested fields) "
        "/ index or id (VLMEvalKit)",
    )
    s.add_argument("--out", required=True, help="scored CSV")
    s.set_defaults(func=cmd_score_released)

    s = sub.add_parser(
        "compare-masking",
        help="outputs -> compared: CRM chains and answers, clean vs one mask condition",
    )
    s.add_argument("--spec", required=True, help="thresholds and judge (config masking) as JSON")
    s.add_argument("--clean-cot", required=True, help="clean chain-of-thought outputs")
    s.add_argument("--clean-answer", required=True, help="clean final-answer outputs")
    s.add_argument("--masked-cot", required=True, help="masked chain-of-thought outputs")
    s.add_argument("--masked-answer", required=True, help="masked final-answer outputs")
    s.add_argument("--manifest", required=True, help="the mask condition's variant manifest")
    s.add_argument("--samples", required=True, help="samples JSONL of the dataset")
    s.add_argument("--cache-dir", default="results/cache/llm", help="LLM cache folder")
    s.add_argument("--out", required=True, help="compared rows JSONL")
    s.set_defaults(func=cmd_compare_masking)

    for command, what in (
        ("metrics", "stage files -> a study's tidy metrics (and warnings)"),
        ("table", "metrics -> one table of a study (csv, md, tex)"),
        ("figure", "metrics -> one figure of a study (png, pdf)"),
        ("page", "metrics -> one HTML page of a study"),
    ):
        _study_parser(sub, command, what)
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

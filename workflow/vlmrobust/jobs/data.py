"""Jobs of the data stage: one dataset into the sample schema, and VisArgs' questions."""

from __future__ import annotations

import time
from pathlib import Path

from ..core.commands import Command, arg, required
from ..core.config import ConfigError
from . import json_object, log
from .args import DATASET_NAME, DATASET_SPEC


def samples(name: str, spec: str, out: str, report: str) -> None:
    """Load dataset ``name`` (its configuration ``spec``) into the sample schema."""
    from ..data import build_samples

    t0 = time.perf_counter()
    counts = build_samples(name, json_object(spec), Path(out), Path(report))
    reasons = "; ".join(f"{r} ({n})" for r, n in counts.get("skipped_by_reason", {}).items())
    log.info(
        "dataset %s: %s samples written, %s rows skipped%s (%.1f s)",
        name,
        counts.get("samples_written"),
        counts.get("skipped"),
        f" (on_bad_row: skip): {reasons}" if reasons else "",
        time.perf_counter() - t0,
    )


def write_questions(name: str, spec: str, cache_dir: str | None, out: str) -> None:
    """VisArgs: the LLM question writer's questions of one dataset (read by `samples`)."""
    from ..construct.questions import write_questions as write
    from ..data.visargs import question_items

    config = json_object(spec)
    if config.get("adapter") != "visargs":
        raise ConfigError(
            f"datasets.{name}: adapter {config.get('adapter')!r} has no question writer "
            "(only visargs does)"
        )
    writer = config.get("question_writer") or {"backend": "template"}
    t0 = time.perf_counter()
    counts = write(
        question_items(name, config),
        writer,
        Path(out),
        cache_dir=cache_dir,
        where=f"datasets.{name}.question_writer",
    )
    log.info(
        "dataset %s: %d questions written to %s (%d from the cache, %d failed; %.1f s)",
        name,
        counts["written"],
        out,
        counts["cached"],
        counts["failed"],
        time.perf_counter() - t0,
    )


#: the data stage's commands
COMMANDS: dict[str, Command] = {
    "samples": Command(
        samples,
        "datasets -> samples: load one dataset into the sample schema",
        (
            DATASET_NAME,
            DATASET_SPEC,
            required("--out", help="samples JSONL (images go beside it)"),
            required("--report", help="report JSON (counts, skipped rows)"),
        ),
    ),
    "write-questions": Command(
        write_questions,
        "VisArgs: write the questions of one dataset with its LLM question writer",
        (
            DATASET_NAME,
            DATASET_SPEC,
            arg(
                "--cache-dir", help="LLM cache (default: question_writer.cache_dir, else the run's)"
            ),
            required("--out", help="questions JSONL (results/questions/<dataset>/questions.jsonl)"),
        ),
    ),
}

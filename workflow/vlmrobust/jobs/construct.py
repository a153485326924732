"""Jobs of the construction stage: distraction candidates, and concept-family labels."""

from __future__ import annotations

from pathlib import Path

from ..core.commands import Command, arg, required
from ..core.paths import LLM_CACHE
from . import json_object, log
from .args import CACHE, SEED, spec


def construct(
    spec: str, samples: list[str], seed: int, cache_dir: str | None, out_dir: str
) -> None:
    """Distraction candidates for human review: writer + editor."""
    from ..construct.pipeline import construct as build

    rows, writer, editor = build(
        json_object(spec), samples, Path(out_dir), seed=seed, cache_dir=Path(cache_dir or LLM_CACHE)
    )
    for failure in rows.failures:
        log.warning("construction failed: %s", failure)
    log.info(
        "%s: %d candidates, %d failures (writer %s, editor %s)",
        out_dir,
        len(rows),
        len(rows.failures),
        writer.name,
        editor.name,
    )


def concepts(samples: str, spec: str | None, out: str) -> None:
    """MathVerse samples -> proposed concept-family labels (confirmed rows are kept)."""
    from ..construct.concepts import write_labels
    from ..core.records import read_samples

    labeler = json_object(spec) if spec else {"backend": "offline"}
    existing = out if Path(out).exists() else None
    counts = write_labels(read_samples(samples), labeler, out, existing)
    log.info("%s: %s", out, counts)


#: the construction stage's commands
COMMANDS: dict[str, Command] = {
    "construct": Command(
        construct,
        "samples -> distraction candidates (writer + editor)",
        (
            spec("the construction (construct.<name>)"),
            required("--samples", nargs="+", help="samples JSONL of the source datasets"),
            SEED,
            CACHE,
            required("--out-dir", help="folder of candidates.jsonl and images"),
        ),
    ),
    "concepts": Command(
        concepts,
        "MathVerse samples -> proposed concept-family labels (a person confirms them)",
        (
            required("--samples", help="samples JSONL of a mathverse dataset"),
            arg("--spec", help="labeler spec JSON (default offline rules; or an LLM spec)"),
            required("--out", help="labels CSV (confirmed rows are kept)"),
        ),
    ),
}

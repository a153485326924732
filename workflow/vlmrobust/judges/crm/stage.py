"""The comparison stage of CRM: one (model, dataset, mask condition) -> compared rows.

Inputs: the model's outputs of both stages (``crm-cot`` chain, ``crm-answer`` final
answer) on the clean images and on the masked images, the mask condition's variant
manifest (the filled box, the premise's box, the premises it covers) and the samples.
Each masked variant is paired with the clean output of its sample (same draw). The
chain of an output is its reasoning and visible text (:func:`~vlmrobust.core.records.chain_text`);
the final answer is the answer stage's visible text. Whether the masked chain
hallucinates is a judge of its own (:func:`vlmrobust.judges.hallucination.judge_compared`,
the ``judge_hallucination`` rule), which reads these rows.

A pair with a missing or failed output (either stage, either image) becomes a row
with ``error`` set, counted in no rate (the metrics report how many). The row format is
in :mod:`vlmrobust.judges.crm`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.io import read_jsonl, write_jsonl
from ...core.records import Sample, Variant, chain_text, output_key, read_samples, read_variants
from . import SPEC_KEYS
from .steps import (
    Embedder,
    answer_flip,
    compare_chains,
    dependent_steps,
    disrupted_original_steps,
    region_attribution,
    split_steps,
)

log = logging.getLogger(__name__)


def _defaults() -> dict[str, Any]:
    from ...core.config import load_schema

    props = load_schema("config")["properties"]["masking"]["properties"]
    return {k: props[k]["default"] for k in SPEC_KEYS}


def _by_key(path: Path, what: str) -> dict[str, dict[str, Any]]:
    rows = {}
    for row in read_jsonl(path):
        if "key" not in row:
            raise ValueError(f"{path}: a {what} row has no key")
        rows[row["key"]] = row
    return rows


def _problem(row: dict[str, Any] | None, what: str) -> str | None:
    if row is None:
        return f"no {what} output"
    if row.get("error"):
        return f"the {what} output failed: {row['error']}"
    return None


def _box(value: Any) -> list[int] | None:
    return [int(v) for v in value] if value is not None else None


def _pair_row(sample: Sample, variant: Variant, draw: int) -> dict[str, Any]:
    """The compared row of a masked variant and a draw before its outputs are read: the
    sample, the mask (region, boxes, the premises it covers) and the images."""
    params = variant.params
    premises = [str(p) for p in sample.meta.get("visual_premises", [])]
    covered = [premises[i] for i in params.get("covered", []) if 0 <= i < len(premises)]
    return {
        "sample_id": sample.sample_id,
        "variant_id": variant.variant_id,
        "dataset": variant.dataset,
        "condition": variant.condition,
        "model": None,
        "draw": draw,
        "region": params.get("region"),
        "premise_index": params.get("premise_index", sample.meta.get("premise_index")),
        "premise": sample.answer,
        "masked_content": covered,
        "box": _box(params.get("box")),
        "target_box": _box(params.get("target_box")),
        "image": sample.images[0],
        "masked_image": variant.images[0],
        "mask": variant.masks[0] if variant.masks else None,
        "question": variant.question,
        "error": None,
    }


def _fill_pair(row: dict[str, Any], outputs: Mapping[str, Mapping[str, dict[str, Any]]]) -> bool:
    """Fill ``row`` from the four outputs of its pair (clean/masked chain and answer):
    the model, then the chains, their steps and the final answers; or ``error`` naming
    every missing or failed output. True when all four were there."""
    clean = output_key(row["sample_id"], row["draw"])
    masked = output_key(row["variant_id"], row["draw"])
    keys = {
        "clean chain": clean,
        "clean answer": clean,
        "masked chain": masked,
        "masked answer": masked,
    }
    found = {what: outputs[what].get(key) for what, key in keys.items()}
    row["model"] = next((r["model"] for r in found.values() if r), None)
    problems = [p for what, r in found.items() if (p := _problem(r, what))]
    if problems:
        row["error"] = "; ".join(problems)
        return False
    original_chain = chain_text(found["clean chain"])
    masked_chain = chain_text(found["masked chain"])
    row.update(
        original_chain=original_chain,
        masked_chain=masked_chain,
        original_steps=split_steps(original_chain),
        masked_steps=split_steps(masked_chain),
        original_answer=(found["clean answer"].get("answer_text") or "").strip(),
        masked_answer=(found["masked answer"].get("answer_text") or "").strip(),
    )
    return True


def _compare(row: dict[str, Any], embedder: Embedder, spec: Mapping[str, Any]) -> None:
    """Add the comparison of a filled pair to ``row``: the chains' alignment, the answer
    flip, the steps that use the hidden content and the region attribution."""
    chains = compare_chains(
        row["original_steps"],
        row["masked_steps"],
        embedder,
        step_threshold=spec["step_threshold"],
    )
    similarity, flipped = answer_flip(
        row["original_answer"],
        row["masked_answer"],
        embedder,
        threshold=spec["answer_threshold"],
    )
    # the steps that use the hidden content: the premise for a specific mask,
    # the premises a random box happens to cover (usually none)
    dependent = dependent_steps(
        row["original_steps"], row["masked_content"], embedder, spec["attribution_threshold"]
    )
    disrupted = disrupted_original_steps(chains["alignment"])
    row.update(
        **chains,
        answer_similarity=similarity,
        answer_flipped=flipped,
        dependent_steps=dependent,
        region_attribution=region_attribution(dependent, disrupted),
    )


def compare_masking(
    *,
    clean_cot: Path,
    clean_answer: Path,
    masked_cot: Path,
    masked_answer: Path,
    manifest: Path,
    samples: Path,
    out: Path,
    spec: Mapping[str, Any] | None = None,
    embedder: Embedder | None = None,
) -> dict[str, int]:
    """Write the compared rows of one masked condition to ``out``; return counts."""
    spec = {**_defaults(), **(spec or {})}
    variants: list[Variant] = read_variants(manifest)
    by_sample: dict[str, Sample] = {s.sample_id: s for s in read_samples(samples)}
    outputs = {
        "clean chain": _by_key(clean_cot, "chain"),
        "clean answer": _by_key(clean_answer, "answer"),
        "masked chain": _by_key(masked_cot, "chain"),
        "masked answer": _by_key(masked_answer, "answer"),
    }
    draws = sorted({r.get("draw", 0) for r in outputs["masked chain"].values()}) or [0]
    if embedder is None:
        embedder = Embedder(model_dir=spec["model_dir"])

    rows: list[dict[str, Any]] = []
    compared: list[dict[str, Any]] = []  # the rows with all four outputs
    texts: set[str] = set()
    for variant in variants:
        sample = by_sample.get(variant.sample_id)
        if sample is None:
            raise ValueError(
                f"{manifest}: variant {variant.variant_id!r} names sample "
                f"{variant.sample_id!r}, which is not in {samples}"
            )
        for draw in draws:
            row = _pair_row(sample, variant, draw)
            rows.append(row)
            if _fill_pair(row, outputs):
                texts.update(row["original_steps"], row["masked_steps"], row["masked_content"])
                texts.update((row["original_answer"], row["masked_answer"]))
                compared.append(row)

    # Every text is embedded once, in large batches, before the comparisons.
    if texts:
        embedder.encode(sorted(t for t in texts if t))
    for row in compared:
        _compare(row, embedder, spec)

    write_jsonl(out, rows)
    failed = sum(r["error"] is not None for r in rows)
    counts = {
        "rows": len(rows),
        "failed": failed,
        "disrupted": sum(bool(r.get("step_disrupted")) for r in rows),
        "flipped": sum(bool(r.get("answer_flipped")) for r in rows),
    }
    if failed:
        log.warning("%s: %d of %d pairs could not be compared", out, failed, len(rows))
    return counts

"""The construction pipeline: samples → candidates for human review (Distract-Bench §3).

For each sample: open its first image → ``writer.describe`` → retrieve the ``k`` most
similar seeds from the knowledge base (query: the description, the question and the
options) → ``writer.write`` with those seeds as demonstrations → ``editor.edit`` → save
``out_dir/images/<sample_id>.png``. Outputs (all written atomically)::

    out_dir/candidates.jsonl   one row per constructed sample: the Candidate fields of
                               vlmrobust.review (sample_id, question, choices, answer,
                               original_image, edited_image, distractor_description,
                               trap_reasoning_path, trap_answer, edit_instruction as
                               one string) plus edit (the structured instruction),
                               render, seed_ids, writer, editor, dataset, construct_seed
    out_dir/failures.jsonl     one row per sample whose image, writer or editor failed:
                               sample_id, stage (image|describe|write|edit), reason
    out_dir/summary.json       counts, writer, editor, seed

A failed sample is never silently dropped: it is in ``failures.jsonl`` and in the
returned list's ``failures`` attribute. Image paths: ``original_image`` is the sample's
path as given (relative to ``image_base`` when relative); ``edited_image`` is the
written file's path (relative when ``out_dir`` is).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.io import atomic_save_image, write_json, write_jsonl
from ..core.records import Sample
from .seeds import KnowledgeBase, retrieve_entries
from .writer import instruction_text, sample_query_text


class CandidateList(list):
    """The candidate rows, with ``failures`` (list of dicts) alongside."""

    failures: list[dict[str, Any]]


def _name(obj: Any) -> str:
    return str(getattr(obj, "name", type(obj).__name__))


def build_candidates(
    samples: Sequence[Sample],
    writer: Any,
    editor: Any,
    kb: KnowledgeBase,
    out_dir: str | Path,
    seed: int = 0,
    *,
    k: int = 3,
    image_base: str | Path | None = None,
) -> CandidateList:
    """Construct one candidate per sample (see the module docstring); returns the rows
    written to ``candidates.jsonl`` (``.failures`` has the failed samples)."""
    out = Path(out_dir)
    base = Path(image_base) if image_base is not None else None
    if hasattr(writer, "seed") and getattr(writer, "seed", None) is None:
        writer.seed = seed
    rows: CandidateList = CandidateList()
    rows.failures = []

    def fail(sample: Sample, stage: str, exc: BaseException | str) -> None:
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        rows.failures.append({"sample_id": sample.sample_id, "stage": stage, "reason": reason})

    seen: set[str] = set()
    for sample in samples:
        if sample.sample_id in seen:
            fail(sample, "input", "sample id appears twice; only the first is constructed")
            continue
        seen.add(sample.sample_id)
        if not sample.images:
            fail(sample, "image", "the sample has no image")
            continue
        try:
            image = _first_image(sample, base)
        except (OSError, ValueError) as exc:
            fail(sample, "image", exc)
            continue
        row = _construct_one(sample, image, writer, editor, kb, k, out, seed, fail)
        if row is not None:
            rows.append(row)
    _write_outputs(out, rows, len(samples), writer, editor, k, seed)
    return rows


def _first_image(sample: Sample, base: Path | None) -> Any:
    """The sample's first image, opened (relative paths from ``base``, when given);
    a mode other than RGB, L or RGBA is converted to RGB."""
    from PIL import Image

    rel = Path(sample.images[0])
    path = rel if rel.is_absolute() or base is None else base / rel
    with Image.open(path) as opened:
        return opened.convert("RGB") if opened.mode not in ("RGB", "L", "RGBA") else (opened.copy())


def _construct_one(
    sample: Sample,
    image: Any,
    writer: Any,
    editor: Any,
    kb: KnowledgeBase,
    k: int,
    out: Path,
    seed: int,
    fail: Callable[[Sample, str, BaseException | str], None],
) -> dict[str, Any] | None:
    """Describe, retrieve the seeds, write and edit one sample; save the edited image
    and return its candidate row, or report the failed stage to ``fail`` and return
    None."""
    try:
        description = writer.describe(sample, image)
    except Exception as exc:  # noqa: BLE001 - recorded, never dropped
        fail(sample, "describe", exc)
        return None
    demos = retrieve_entries(sample_query_text(sample, description), kb, k)
    try:
        edit = writer.write(sample, image, demos, description)
    except Exception as exc:  # noqa: BLE001
        fail(sample, "write", exc)
        return None
    try:
        edited = editor.edit(image, edit)
    except Exception as exc:  # noqa: BLE001
        fail(sample, "edit", exc)
        return None
    edited_path = out / "images" / f"{sample.sample_id}.png"
    atomic_save_image(edited, edited_path)
    return {
        "sample_id": sample.sample_id,
        "question": sample.question,
        "choices": list(sample.choices),
        "answer": sample.answer,
        "original_image": str(sample.images[0]),
        "edited_image": str(edited_path),
        "distractor_description": edit["distractor_description"],
        "trap_reasoning_path": edit["trap_reasoning_path"],
        "trap_answer": edit["trap_answer"],
        "edit_instruction": instruction_text(edit),
        "edit": edit["edit_instruction"],
        "render": edit.get("render"),
        "seed_ids": [d.seed.seed_id for d in demos],
        "writer": _name(writer),
        "editor": _name(editor),
        "dataset": sample.dataset,
        "construct_seed": seed,
    }


def _write_outputs(
    out: Path, rows: CandidateList, n_samples: int, writer: Any, editor: Any, k: int, seed: int
) -> None:
    """``candidates.jsonl``, ``failures.jsonl`` and ``summary.json`` under ``out``."""
    write_jsonl(out / "candidates.jsonl", rows)
    write_jsonl(out / "failures.jsonl", rows.failures)
    write_json(
        out / "summary.json",
        {
            "n_samples": n_samples,
            "n_candidates": len(rows),
            "n_failures": len(rows.failures),
            "writer": _name(writer),
            "editor": _name(editor),
            "k": k,
            "seed": seed,
        },
    )


def construct(
    spec: Mapping[str, Any],
    sample_files: Sequence[str | Path],
    out_dir: Path,
    seed: int,
    cache_dir: Path,
):
    """One construction (config ``construct.<name>``): its source samples (the first
    ``limit_per_dataset`` of each file), the writer (offline, or an LLM through the
    cache) and the editor of its spec; the candidates written under ``out_dir``."""
    from ..clients.llm import LLMCache, make_llm
    from ..core.records import read_samples
    from .editor import make_editor
    from .seeds import knowledge_base, load_seeds
    from .writer import LLMWriter, OfflineWriter

    cache = LLMCache(Path(cache_dir))
    samples = []
    for path in sample_files:
        rows = read_samples(path)
        samples += rows[: spec["limit_per_dataset"]] if spec["limit_per_dataset"] else rows
    writer_spec = spec["writer"]
    if writer_spec.get("backend", "offline") == "offline":
        writer, summarizer = OfflineWriter(seed=seed), None
    else:
        writer, summarizer = LLMWriter(make_llm(writer_spec, cache)), make_llm(writer_spec, cache)
    editor = make_editor(spec["editor"])
    kb = knowledge_base(load_seeds(spec.get("seeds")), summarizer)
    return build_candidates(samples, writer, editor, kb, Path(out_dir), seed=seed), writer, editor

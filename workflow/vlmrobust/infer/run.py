"""The inference runner: one (model, dataset, condition, prompt[, shard]) job.

Reads the variant manifest and the samples, builds one request per (variant, draw),
and appends one JSON line per finished answer to ``<out>.partial`` (flushed), so a
killed job loses at most the batch in flight. A rerun keeps every partial row whose
prompt, decoding and image hashes still match the manifest (a row is never reused for
a different image) and generates only the rest. When every request has its row, the
rows are written to ``out`` atomically, in manifest order, and the partial file keeps
them: it is the shard's resume cache. Snakemake deletes a job's declared outputs before
it runs, which is why the rows live beside them too: an engine job rerun for one of its
cells (:mod:`vlmrobust.infer.engine`) finds every other cell's rows there and asks the
model nothing for them.

One job writes a shard at a time: it holds ``<out>.lock`` (``core.io.exclusive``) from
planning to the last row. A second job for the same shard (on a cluster, one a killed
Snakemake left running while a new one submitted the shard again) waits, then resumes
from the partial file, or from ``out`` when the first one finished it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..clients.vlm.base import Backend, Request, Result, chunks
from ..clients.vlm.thinking import split_thinking
from ..core import watchdog
from ..core.io import exclusive, write_jsonl
from ..core.records import (
    OutputRow,
    Sample,
    Variant,
    chain_text,
    output_key,
    read_samples,
    read_variants,
)
from ..core.seeding import derive_seed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """What one inference job answers, and how."""

    model: str
    model_spec: dict[str, Any]
    prompt: str  # prompt setting (vlmrobust.core.prompts), or "default": the dataset's per sample
    max_new_tokens: int
    adapter: str = "demo"  # the dataset's adapter (chooses the default prompt)
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int = 0
    shard: int = 0
    shards: int = 1
    # versions of the prompt builders the job was planned with (name -> version; the
    # workflow's rerun trigger when a prompt's text changes); checked when given
    prompt_versions: dict[str, str] | None = None
    # every image resized to image_size x image_size before the model sees it (None: as is)
    image_size: int | None = None
    # the dataset's generation-config choice (explicit | checkpoint); None: the model's
    # (registry options.generation_config, else explicit): see `generation`
    generation_config: str | None = None
    # the dataset's pixel limits for this model ({min_pixels, max_pixels} and the resize
    # before the processor, fit; datasets.<d>.pixels: harness; only the fit:
    # datasets.<d>.fit); None: the model's (registry options.min_pixels / max_pixels)
    pixels: dict[str, Any] | None = None

    @property
    def generation(self) -> str:
        """Whose decoding defaults apply (:data:`~vlmrobust.core.registry.GENERATION_CONFIGS`):
        the dataset's choice, else the model's, else ``explicit``."""
        from ..core.registry import generation_config_of

        return generation_config_of(
            self.model_spec, self.generation_config, who=f"models.{self.model}"
        )


@dataclass
class Planned:
    request: Request
    variant: Variant
    draw: int
    prompt: str
    prompt_version: str
    context_sha256: str | None = None
    prompt_source: str = "vlmrobust"


def read_contexts(path: Path) -> dict[str, str]:
    """First-stage outputs as context of a second-stage prompt: key -> chain text
    (a failed first-stage row gives an empty chain)."""
    from ..core.io import read_jsonl

    return {row["key"]: chain_text(row) for row in read_jsonl(path)}


def resized_images(variant: Variant, size: int, folder: Path) -> dict[str, str]:
    """Each image of ``variant`` -> a ``size`` x ``size`` copy (bicubic, EXIF orientation
    applied, RGB) written once under ``folder`` and named by the image's hash in the
    manifest, so every backend, local or API, sees the same resized pixels."""
    from PIL import Image, ImageOps

    from ..core.io import atomic_save_image

    copies = {}
    for path, digest in zip(variant.images, variant.sha256, strict=True):
        target = folder / f"{digest[:32]}_{size}.png"
        if not target.exists():
            with Image.open(path) as im:
                im.load()
                img = ImageOps.exif_transpose(im).convert("RGB")
            atomic_save_image(img.resize((size, size), Image.Resampling.BICUBIC), target)
        copies[path] = str(target)
    return copies


def with_copies(content: list[dict[str, Any]], copies: dict[str, str]) -> list[dict[str, Any]]:
    """A prompt's content with each image part's path replaced by its resized copy
    (:func:`resized_images`)."""
    return [
        {**part, "path": copies[part["path"]]} if part["type"] == "image" else part
        for part in content
    ]


def _context(contexts: dict[str, str], variant: Variant, draw: int, needs: str) -> tuple[str, str]:
    """The first-stage output a second-stage prompt is built on, and its hash."""
    from ..core.io import sha256_bytes

    key = output_key(variant.variant_id, draw)
    if key not in contexts:
        raise ValueError(
            f"variant {variant.variant_id!r} (draw {draw}): the context file has "
            f"no {needs!r} output with key {key!r}"
        )
    context = contexts[key]
    return context, sha256_bytes(context.encode("utf-8"))


def _check_prompt_version(job: Job, name: str, version: str) -> None:
    """The prompt is at the version the job was planned with (where it says one)."""
    planned_version = (job.prompt_versions or {}).get(name)
    if planned_version is not None and planned_version != version:
        raise ValueError(
            f"prompt {name!r} is version {version!r}, but the job was "
            f"planned with version {planned_version!r}: plan the job again"
        )


def _prompt_name(job: Job, sample: Sample, contexts: dict[str, str] | None) -> tuple[str, bool]:
    """The prompt of a sample under this job, and whether it is a second-stage one (which
    needs ``contexts``)."""
    from ..core.prompts import DEFAULT_PROMPT, PROMPTS, default_prompt

    name = default_prompt(job.adapter, sample) if job.prompt == DEFAULT_PROMPT else job.prompt
    staged = name in PROMPTS and PROMPTS[name].needs is not None
    if staged and contexts is None:
        raise ValueError(
            f"prompt {name!r} is built on the {PROMPTS[name].needs!r} outputs: pass them "
            "with --context"
        )
    return name, staged


def plan_requests(
    job: Job,
    variants: list[Variant],
    samples: dict[str, Sample],
    contexts: dict[str, str] | None = None,
    resized_dir: Path | None = None,
) -> list[Planned]:
    """One request per (variant, draw) of this job's shard, in manifest order.

    ``contexts`` (key -> text) feed a second-stage prompt (``PromptBuilder.needs``):
    the first-stage output of the same (variant, draw). With ``job.image_size`` the
    images are resized copies written under ``resized_dir`` (:func:`resized_images`),
    except a variant of the resolution ablation (``params.resolution``), which keeps the
    size it was made at."""
    from ..core.prompts import PROMPTS, build_prompt

    if not 0 <= job.shard < job.shards:
        raise ValueError(f"shard {job.shard} is outside 0..{job.shards - 1}")
    planned = []
    for index, variant in enumerate(variants):
        if index % job.shards != job.shard:
            continue
        sample = samples.get(variant.sample_id)
        if sample is None:
            raise ValueError(
                f"variant {variant.variant_id!r}: sample {variant.sample_id!r} is not in the samples file"
            )
        name, staged = _prompt_name(job, sample, contexts)
        # a resolution variant (the visual-token ablation) keeps its own size
        copies = (
            resized_images(variant, job.image_size, resized_dir)
            if job.image_size is not None
            and resized_dir is not None
            and variant.params.get("resolution") is None
            else {}
        )
        for draw in range(job.n):
            context = context_sha = None
            if staged:
                context, context_sha = _context(contexts or {}, variant, draw, PROMPTS[name].needs)
            built = build_prompt(sample, variant, name, context, job.model_spec)
            content = with_copies(built.content, copies) if copies else built.content
            _check_prompt_version(job, built.name, built.version)
            seed = None
            if job.temperature > 0:
                seed = derive_seed(job.seed, job.model, variant.variant_id, draw)
            request = Request(
                key=output_key(variant.variant_id, draw),
                content=content,
                max_new_tokens=job.max_new_tokens,
                temperature=job.temperature,
                top_p=job.top_p,
                seed=seed,
                system=built.system,
                generation_config=job.generation,
                min_pixels=(job.pixels or {}).get("min_pixels"),
                max_pixels=(job.pixels or {}).get("max_pixels"),
                fit=(job.pixels or {}).get("fit"),
            )
            planned.append(
                Planned(
                    request, variant, draw, built.name, built.version, context_sha, built.source
                )
            )
    return planned


def check_images(todo: list[Planned]) -> None:
    """The image files the requests to answer carry are the ones their manifest hashed:
    a file changed since (by another run, another clone, a hand) stops the job before
    the model sees it, naming the file, instead of answering for the wrong image under
    the manifest's hash."""
    from ..core.io import sha256_file

    seen: set[str] = set()
    for plan in todo:
        variant = plan.variant
        if variant.variant_id in seen:
            continue
        seen.add(variant.variant_id)
        for image, digest in zip(variant.images, variant.sha256, strict=True):
            got = sha256_file(image)
            if got != digest:
                raise ValueError(
                    f"variant {variant.variant_id!r}: image {image} has sha256 {got[:16]}..., "
                    f"its manifest says {digest[:16]}...: the file changed after the manifest "
                    "was written (rerun its variants job)"
                )


def model_spec_sha256(job: Job) -> str:
    """The fingerprint of what the job's model is (checkpoint, revision, backend and its
    options): rows of another checkpoint are never reused."""
    from ..core.io import sha256_bytes

    text = json.dumps(job.model_spec, sort_keys=True, default=str)
    return sha256_bytes(text.encode("utf-8"))


def _reusable(row: dict[str, Any], plan: Planned, job: Job) -> bool:
    """A partial row may be kept only if it answers exactly this request, with the same
    model; a failed request is never kept (it is asked again)."""
    r = plan.request
    return (
        row.get("error") is None
        and row.get("model_spec_sha256") == model_spec_sha256(job)
        and row.get("image_sha256") == plan.variant.sha256
        and row.get("prompt") == plan.prompt
        and row.get("prompt_version") == plan.prompt_version
        and row.get("model") == job.model
        and row.get("max_new_tokens") == r.max_new_tokens
        and row.get("temperature") == r.temperature
        and row.get("top_p") == r.top_p
        and row.get("seed") == r.seed
        and row.get("context_sha256") == plan.context_sha256
        and row.get("image_size") == job.image_size
        # a row from before the choice was recorded was decoded explicitly
        and ((row.get("generation") or {}).get("config") or "explicit") == r.generation_config
        and dataset_pixels(row) == r.pixels
        and ((row.get("pixels") or {}).get("fit") or None) == (r.fit or None)
    )


def dataset_pixels(row: dict[str, Any]) -> dict[str, int] | None:
    """The pixel limits an output row's request set itself (``pixels`` with ``set_by:
    dataset``), or None: the model's own (a row from before rows recorded them too)."""
    pixels = row.get("pixels") or {}
    if pixels.get("set_by") != "dataset":
        return None
    return {k: int(pixels[k]) for k in ("min_pixels", "max_pixels") if pixels.get(k) is not None}


def read_partial(path: Path) -> list[dict[str, Any]]:
    """The rows of a resume cache (a partial file, or a finished shard). A damaged line
    (not UTF-8, not JSON, or not an output row: a JSON object with a string ``key``) is
    dropped with a warning naming the file and the line, and so is a torn last line (a
    job killed mid-write, a full disk): their requests are asked again, nothing fails."""
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    rows = []
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        row, damage = _cache_row(raw)
        if row is not None:
            rows.append(row)
            continue
        torn = " (its last line, cut short)" if lineno == len(lines) else ""
        log.warning(
            "%s:%d: %s%s: line dropped, its request is asked again", path, lineno, damage, torn
        )
    return rows


def _cache_row(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """One line of a resume cache as a row, or None and what is wrong with it."""
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(row, dict) or not isinstance(row.get("key"), str):
        return None, f"not an output row (a JSON {type(row).__name__} without a string key)"
    return row, ""


def reasoning_tokens(result: Result, thinking: str | None, backend: Backend) -> int | None:
    """The reasoning length of one output: what the backend reports (an API's reasoning
    tokens), else the thinking part counted with the model's own tokenizer; None when
    neither exists (no thinking part, or an API that reports none)."""
    extra = result.extra or {}
    for key in ("thinking_tokens", "reasoning_tokens"):
        if extra.get(key) is not None:
            return int(extra[key])
    if thinking is None:
        return None
    return backend.count_tokens(thinking)


def generation_record(result: Result, request: Request) -> dict[str, Any]:
    """An output row's ``generation``: the request's ``config`` and the decoding fields
    the backend says it used (``Result.extra["generation"]``; none from a backend that
    says nothing)."""
    reported = dict((result.extra or {}).get("generation") or {})
    reported.pop("config", None)
    return {"config": request.generation_config, **reported}


def to_row(result: Result, plan: Planned, job: Job, backend: Backend) -> OutputRow:
    markers = job.model_spec.get("options", {}).get("thinking_markers")
    thinking, answer = split_thinking(result.text or "", markers)
    thinking_tokens = reasoning_tokens(result, thinking, backend)
    r = plan.request
    return OutputRow(
        key=r.key,
        variant_id=plan.variant.variant_id,
        sample_id=plan.variant.sample_id,
        dataset=plan.variant.dataset,
        condition=plan.variant.condition,
        prompt=plan.prompt,
        prompt_version=plan.prompt_version,
        prompt_source=plan.prompt_source,
        model=job.model,
        backend=backend.name,
        model_revision=backend.revision,
        draw=plan.draw,
        raw_text=result.text or "",
        answer_text=answer,
        thinking=thinking,
        finish_reason=result.finish_reason,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        thinking_tokens=thinking_tokens,
        latency_s=round(result.latency_s, 4),
        temperature=r.temperature,
        top_p=r.top_p,
        seed=r.seed,
        max_new_tokens=r.max_new_tokens,
        image_sha256=list(plan.variant.sha256),
        error=result.error,
        context_sha256=plan.context_sha256,
        model_spec_sha256=model_spec_sha256(job),
        image_size=job.image_size,
        generation=generation_record(result, r),
        pixels=backend.pixel_limits(r),
    )


def check_image_limit(job: Job, plans: list[Planned], backend: Backend | None) -> None:
    """Refuse a job whose requests carry more images than its model accepts (the
    backend's :meth:`~vlmrobust.clients.vlm.base.Backend.image_limit`), before the model
    is loaded and before any row is written."""
    from ..clients.vlm import backend_class

    cls = type(backend) if backend is not None else backend_class(job.model, job.model_spec)
    limit = cls.image_limit(job.model, job.model_spec)
    if limit is None or not plans:
        return
    most = max(plans, key=lambda p: len(p.request.image_paths))
    n = len(most.request.image_paths)
    if n > limit:
        raise ValueError(
            f"models.{job.model}.options.max_images_per_prompt is {limit}, but variant "
            f"{most.variant.variant_id!r} has {n} images: raise the limit (vLLM's "
            "limit_mm_per_prompt) or leave this dataset out for this model"
        )


def open_backend(job: Job) -> Backend:
    """The job's backend, loaded here (the registry entry's backend class)."""
    from ..clients.vlm import make_backend

    log.info("models.%s: loading the model in this job", job.model)
    return make_backend(job.model, job.model_spec)


def kept_rows(
    partial: Path, plans: list[Planned], job: Job, out: Path | None = None
) -> tuple[dict[str, dict[str, Any]], int]:
    """The rows of the partial file (and of ``out``, when another writer of this shard
    finished it first) that still answer one of ``plans`` (by key), and how many were
    dropped; then the rows of the same cell that the resume caches of another split hold
    (:func:`other_splits`: a row's key and request do not depend on the split). The
    partial file is rewritten with the kept rows, so appends continue a clean file."""
    by_key = {p.request.key: p for p in plans}
    done: dict[str, dict[str, Any]] = {}
    dropped = 0
    # a finished shard leaves no partial file (one with failed rows keeps both)
    finished = out is not None and out.exists() and not partial.exists()
    own = out if finished else partial
    for row in read_partial(own):
        plan = by_key.get(row["key"])
        if plan is not None and _reusable_row(row, plan, job, own):
            done[row["key"]] = row
        else:
            dropped += 1
    others = other_splits(out) if out is not None else []
    adopted = 0
    for source in others:
        for row in read_partial(source):
            plan = by_key.get(row["key"])
            if plan is None or row["key"] in done:
                continue
            if _reusable_row(row, plan, job, source):
                done[row["key"]] = row
                adopted += 1
    if others:
        log.info(
            "%s: %d row(s) taken from the resume caches of another split (%s)",
            out,
            adopted,
            ", ".join(f.name for f in others),
        )
    if partial.exists() or done:
        write_jsonl(partial, done.values())
    return done, dropped


def _reusable_row(row: dict[str, Any], plan: Planned, job: Job, source: Path) -> bool:
    """:func:`_reusable`, where a field of the wrong type (a damaged row) is no match."""
    try:
        return _reusable(row, plan, job)
    except (AttributeError, TypeError, ValueError) as exc:
        log.warning(
            "%s: row %r has a damaged field (%s: %s): dropped, its request is asked again",
            source,
            row["key"],
            type(exc).__name__,
            exc,
        )
        return False


#: a shard file's name (core.paths.SHARD): shard <index> of <shards>
SHARD_NAME = re.compile(r"shard(\d+)of(\d+)\.jsonl")


def _shard_files(folder: Path) -> list[tuple[Path, re.Match[str]]]:
    """The shard files and partial files in ``folder``, each with its name's match of
    :data:`SHARD_NAME` (index, count), in name order."""
    if not folder.is_dir():
        return []
    found = []
    for f in sorted(folder.iterdir()):
        match = SHARD_NAME.fullmatch(f.name.removesuffix(".partial"))
        if match is not None and f.is_file():
            found.append((f, match))
    return found


def other_splits(out: Path) -> list[Path]:
    """The resume caches of ``out``'s cell under another split: for each shard of
    another shard count in its folder (``service.engines`` or ``service.split_cells``
    changed, or the dataset's ``shards``), its partial file, else its finished file."""
    this = SHARD_NAME.fullmatch(out.name)
    if this is None:
        return []
    found: dict[tuple[int, int], Path] = {}
    for f, match in _shard_files(out.parent):
        index = (int(match.group(2)), int(match.group(1)))
        if match.group(2) != this.group(2) and (f.suffix == ".partial" or index not in found):
            found[index] = f
    return [found[k] for k in sorted(found)]


def remove_other_splits(shards: list[Path]) -> list[Path]:
    """Remove the resume caches and shard files of another split (:func:`other_splits`)
    beside ``shards``, every shard of one cell's current split: their rows are in these
    shards now (taken over, or asked again). Returns what was removed."""
    keep = {Path(s).name for s in shards}
    removed = []
    for folder in sorted({Path(s).parent for s in shards}):
        for f, match in _shard_files(folder):
            if match.group(0) not in keep:
                f.unlink()
                removed.append(f)
    return removed


def generate_rows(
    todo: list[Planned],
    backend: Backend,
    job: Job,
    partial: Path,
    done: dict[str, dict[str, Any]],
    size: int,
) -> tuple[int, int]:
    """Answer ``todo`` in batches of ``size``, appending each row to ``partial`` (flushed;
    fsynced after each batch) and to ``done``; return (generated, failed) counts."""
    generated = errors = 0
    with open(partial, "a", encoding="utf-8") as fh:
        bar = tqdm(total=len(todo), desc=f"infer {job.model}", unit="answer", disable=None)
        for batch in chunks(todo, size):
            plans_by_key = {p.request.key: p for p in batch}
            watchdog.waiting(
                f"the model's answers to {len(batch)} request(s) of {partial.with_suffix('')}"
            )
            t0 = time.perf_counter()
            for result in backend.generate([p.request for p in batch]):
                plan = plans_by_key.pop(result.key, None)
                if plan is None:
                    raise RuntimeError(f"backend returned an unknown key {result.key!r}")
                row = to_row(result, plan, job, backend).to_dict()
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                fh.flush()
                done[row["key"]] = row
                generated += 1
                errors += row["error"] is not None
                watchdog.answered()
                bar.update(1)
            if plans_by_key:
                raise RuntimeError(f"backend returned no result for {sorted(plans_by_key)[:3]}")
            os.fsync(fh.fileno())
            log.info("generated %d requests in %.2f s", len(batch), time.perf_counter() - t0)
        bar.close()
    return generated, errors


def write_outputs(out: Path, partial: Path, rows: list[dict[str, Any]]) -> None:
    """Every row to ``out``, and to the partial file, the shard's resume cache (a rerun
    of the job reuses every answered row there and asks only the failed requests again:
    a failed row is never reused)."""
    write_jsonl(out, rows)
    write_jsonl(partial, rows)
    failed = sum(row.get("error") is not None for row in rows)
    if not failed:
        return
    log.warning(
        "%s: %d request(s) failed after every retry; they are no answers (excluded "
        "from the metrics and counted) and a rerun of this job asks only them again",
        out,
        failed,
    )


def run_inference(
    job: Job,
    manifest: Path,
    samples_path: Path,
    out: Path,
    backend: Backend | None = None,
    batch_size: int | None = None,
    context: Path | None = None,
    opener: Any = None,
) -> dict[str, int]:
    """Answer every (variant, draw) of the job's shard; return counts.

    ``backend`` defaults to ``opener()`` (the engine job's model, loaded once for all its
    cells: :mod:`vlmrobust.infer.engine`), else the registry entry's backend loaded here
    and closed at the end; either only when there is something left to generate.
    ``context``: the first-stage outputs a second-stage prompt is built on
    (:func:`read_contexts`).
    """
    variants = read_variants(manifest)
    bare = [v.variant_id for v in variants if v.params.get("without_images")]
    if bare:  # datasets.<name>.images: false -- never answer without the image
        raise ValueError(
            f"{manifest}: {len(bare)} variant(s) have no images (e.g. {bare[0]!r}; the "
            "dataset has images: false): a model cannot answer them; import its outputs "
            "(config imports) or set images: true"
        )
    samples = {s.sample_id: s for s in read_samples(samples_path)}
    contexts = read_contexts(context) if context is not None else None
    out.parent.mkdir(parents=True, exist_ok=True)
    # one writer per shard: a duplicate of this job (one an earlier Snakemake left on a
    # cluster) waits here, then resumes from what the first one wrote
    with exclusive(out.with_name(out.name + ".lock"), waiting=lambda pid: _waiting(out, pid)):
        resized = out.with_name(out.name + ".resized") if job.image_size is not None else None
        plans = plan_requests(job, variants, samples, contexts, resized)
        check_image_limit(job, plans, backend)
        return _answer_shard(job, plans, out, resized, backend, batch_size, opener)


def _waiting(out: Path, pid: int | None) -> None:
    watchdog.waiting(f"the lock of {out} (held by pid {pid if pid is not None else '?'})")
    log.warning(
        "%s: another job writes this shard (pid %s: a duplicate of this job, e.g. one an "
        "earlier Snakemake left running); waiting for it, then resuming from its rows",
        out,
        pid if pid is not None else "?",
    )


def _answer_shard(
    job: Job,
    plans: list[Planned],
    out: Path,
    resized: Path | None,
    backend: Backend | None,
    batch_size: int | None,
    opener: Any,
) -> dict[str, int]:
    """Answer what the partial file (or a finished ``out``) does not hold yet, then
    write ``out``: the part of :func:`run_inference` done by one writer at a time."""
    partial = out.with_name(out.name + ".partial")
    watchdog.waiting(f"reading the resume caches and images of {out}")
    done, dropped = kept_rows(partial, plans, job, out)
    todo = [p for p in plans if p.request.key not in done]
    generated = errors = 0
    if todo:
        check_images(todo)  # before the model is loaded for them
    own_backend = backend is None and bool(todo) and opener is None
    if backend is None and todo:
        backend = opener() if opener is not None else open_backend(job)
    if backend is not None and backend.revision_before_answers:
        # rows another revision of the checkpoint wrote (the same settings, new weights);
        # with nothing left to generate the model is not loaded just to ask, and the
        # settings' fingerprint alone decides (so does it for an API, whose model is
        # named only in its answers)
        other = [k for k, row in done.items() if row.get("model_revision") != backend.revision]
        for key in other:
            del done[key]
        dropped += len(other)
        todo = [p for p in plans if p.request.key not in done]
        if other:
            check_images(todo)
    log.info(
        "%s: %d requests, %d already answered, %d stale rows dropped, %d to generate",
        out,
        len(plans),
        len(done),
        dropped,
        len(todo),
    )
    try:
        if todo:
            size = batch_size or backend.default_batch_size
            generated, errors = generate_rows(todo, backend, job, partial, done, size)
    finally:
        if own_backend:
            backend.close()
    write_outputs(out, partial, [done[p.request.key] for p in plans])
    if resized is not None:
        import shutil

        shutil.rmtree(resized, ignore_errors=True)
    return {
        "requests": len(plans),
        "reused": len(plans) - generated,
        "generated": generated,
        "errors": errors,
        "dropped": dropped,
    }


def reopen_shard(out: Path) -> bool:
    """Turn a finished shard back into its resume cache: its rows merged into
    ``<out>.partial`` (the partial's row first where both hold a key), then ``out``
    removed, so the job that writes it runs again and asks the model nothing. Done under
    the shard's lock; False (nothing done) while another job holds it or no shard is
    there. Why: docs/architecture.md, "Engines" (a rerun that says done with work left).
    """
    if not out.exists():
        return False
    partial = out.with_name(out.name + ".partial")
    try:
        with exclusive(out.with_name(out.name + ".lock"), wait=False):
            rows = {row["key"]: row for row in read_partial(partial)}
            for row in read_partial(out):
                rows.setdefault(row["key"], row)
            write_jsonl(partial, rows.values())
            out.unlink()
    except BlockingIOError:
        return False
    return True


def gather_outputs(shards: list[Path], manifest: Path, out: Path) -> int:
    """Concatenate shard outputs in manifest order (then draw); every key exactly once.
    The files of the cell's earlier splits are removed (:func:`remove_other_splits`)."""
    order = {v.variant_id: i for i, v in enumerate(read_variants(manifest))}
    rows: dict[str, dict[str, Any]] = {}
    for path in shards:
        for row in _read_rows(path):
            if row["key"] in rows:
                raise ValueError(f"{path}: key {row['key']!r} is in more than one shard")
            rows[row["key"]] = row
    missing = set(order) - {r["variant_id"] for r in rows.values()}
    if missing:
        raise ValueError(
            f"{out}: no output for {len(missing)} variants, e.g. {sorted(missing)[:3]}"
        )
    ordered = sorted(rows.values(), key=lambda r: (order[r["variant_id"]], r["draw"]))
    n = write_jsonl(out, ordered)
    removed = remove_other_splits([Path(s) for s in shards])
    if removed:
        log.info(
            "removed %d file(s) of an earlier split of this cell: %s",
            len(removed),
            ", ".join(f.name for f in removed),
        )
    return n


def _read_rows(path: Path) -> list[dict[str, Any]]:
    from ..core.io import read_jsonl

    return read_jsonl(path)

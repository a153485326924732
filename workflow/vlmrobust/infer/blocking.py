"""Attention blocking (the Idis paper, Fig. 7a): answer again after the model's own trace,
with the answer's attention to chosen attribute phrases cut.

For every output row of a reasoning model (one ``(variant, draw)``) and every block
setting (``none``, ``distractor``, ``target``):

1. The prompt is the one the output was made with: the row's prompt builder
   (``row["prompt"]``, checked against its recorded version), the variant's question
   and images (resized as the row records, ``image_size``), the model's chat template.
2. The assistant turn is prefilled with the model's own text up to and including its
   closing thinking marker (``raw_text`` up to the last ``</think>``, or the model's
   ``options.thinking_markers``): exactly what the model had written when it began its
   answer, so with nothing blocked the re-answer is the greedy continuation of that.
3. The phrases of the setting come from the row's attribute judge row
   (:func:`vlmrobust.core.idis.attribute_roles`: the distractor's or the target's
   phrases; none for ``none``). Every case-insensitive occurrence of each inside the
   trace (between the markers) is a character span; the prefill tokens overlapping a
   span are the *blocked keys*.
4. The answer is generated greedily (temperature 0) while the *answer positions* -- the
   last prefilled token (it predicts the first answer token) and every generated token
   -- do not attend to the blocked keys (:mod:`vlmrobust.clients.vlm.blocking`); every
   other attention is unchanged. The answer is split off as inference does
   (:func:`vlmrobust.clients.vlm.thinking.split_thinking` of prefill + continuation).

Output rows are written in outputs order, one per (output row, setting), in the
attention-blocking row format: ``key``, ``variant_id``, ``sample_id``, ``draw``,
``block``, ``answer_text``, ``correct`` (from the ``score`` callable, else null: the
caller scores them), ``blocked_tokens``, ``phrases`` (the judge's phrases of the
setting), ``error`` (the re-answer failed; ``answer_text`` empty, ``correct`` null).

An aligned variant (perception) has no distractor phrases, so its ``distractor`` rows
block nothing and equal ``none``: the study reports aligned separately. Output rows
that cannot be re-answered are skipped, each with a row per setting (no answer,
``error`` = ``skipped: <reason>``, so the metrics count them) and counted by reason in
the summary: ``generation-error`` (the original generation failed), ``no-judge-row``,
``judge-error``, ``no-trace`` (no thinking markers) and ``unclosed-trace`` (the model
stopped while thinking: it never began an answer).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..clients.vlm.base import Request
from ..clients.vlm.blocking import phrase_spans
from ..clients.vlm.thinking import DEFAULT_MARKERS, split_thinking
from ..core.idis import attribute_roles
from ..core.io import read_jsonl, write_jsonl
from ..core.records import read_samples, read_variants

log = logging.getLogger(__name__)

BLOCK_SETTINGS = ("none", "distractor", "target")
SKIP_REASONS = ("generation-error", "no-judge-row", "judge-error", "no-trace", "unclosed-trace")


def trace_prefill(
    raw_text: str, markers: Sequence[Sequence[str]] | None = None
) -> tuple[str, int, int] | str:
    """``(prefill, trace_start, trace_end)``: ``raw_text`` up to and including its last
    closing marker, and the trace's character span in it (after the opening marker, or
    from 0 when the chat template opened the block; up to the closing one) -- the same
    split as :func:`~vlmrobust.clients.vlm.thinking.split_thinking`. Else the skip
    reason: ``"unclosed-trace"`` (opened, never closed) or ``"no-trace"``."""
    for open_tag, close_tag in markers or DEFAULT_MARKERS:
        close_at = raw_text.rfind(close_tag)
        if close_at >= 0:
            open_at = raw_text[:close_at].find(open_tag)
            start = open_at + len(open_tag) if open_at >= 0 else 0
            return raw_text[: close_at + len(close_tag)], start, close_at
        if raw_text.find(open_tag) >= 0:
            return "unclosed-trace"
    return "no-trace"


def _request(
    row: dict[str, Any],
    sample: Any,
    variant: Any,
    prompt: str | None,
    max_new_tokens: int,
    resized_dir: Path,
    model_spec: dict[str, Any] | None = None,
) -> Request:
    """The request the output row answered (its prompt builder, question and images;
    ``model_spec``: the model's registry entry, for a prompt that depends on the model)."""
    from ..core.prompts import PROMPTS, build_prompt
    from .run import resized_images, with_copies

    name = prompt or row.get("prompt")
    builder = PROMPTS.get(name)
    if builder is None:
        raise ValueError(f"output row {row['key']!r}: unknown prompt {name!r}")
    if builder.needs is not None:
        raise ValueError(
            f"output row {row['key']!r}: prompt {name!r} is a second-stage prompt; attention "
            "blocking re-answers first-stage reasoning outputs only"
        )
    if prompt is None and row.get("prompt_version") not in (None, builder.version):
        raise ValueError(
            f"output row {row['key']!r} was made with prompt {name!r} version "
            f"{row['prompt_version']!r}, now {builder.version!r}: run the inference again"
        )
    built = build_prompt(sample, variant, builder.name, model=model_spec)
    content = built.content
    size = row.get("image_size")
    if size is not None and variant.params.get("resolution") is None:
        copies = resized_images(variant, int(size), resized_dir)
        content = with_copies(content, copies)
    # the re-answer decodes under the output's own generation config (its checkpoint
    # defaults, e.g. a repetition penalty, apply to the greedy answer as they did)
    generation = (row.get("generation") or {}).get("config") or "explicit"
    # and at the pixel limits its images were shown at (a dataset's, where it set any),
    # after the same resize before the processor (a dataset's fit, whoever set the limits)
    shown = row.get("pixels") or {}
    pixels = shown if shown.get("set_by") == "dataset" else {}
    return Request(
        key=row["key"],
        content=content,
        max_new_tokens=max_new_tokens,
        system=built.system,
        generation_config=generation,
        min_pixels=pixels.get("min_pixels"),
        max_pixels=pixels.get("max_pixels"),
        fit=shown.get("fit"),
    )


def _row(
    row: Mapping[str, Any], setting: str, phrases: int = 0, error: str | None = None
) -> dict[str, Any]:
    """A blocked row of an output and a setting, before its re-answer (none yet)."""
    return {
        "key": row["key"],
        "variant_id": row["variant_id"],
        "sample_id": row["sample_id"],
        "draw": row.get("draw"),
        "block": setting,
        "answer_text": "",
        "correct": None,
        "blocked_tokens": 0,
        "phrases": phrases,
        "error": error,
    }


def _judged_rows(attributes_path: Path) -> dict[str, dict[str, Any]]:
    """The attribute judge rows by key (a key listed twice is an error)."""
    judged: dict[str, dict[str, Any]] = {}
    for jrow in read_jsonl(attributes_path):
        if jrow["key"] in judged:
            raise ValueError(f"{attributes_path}: key {jrow['key']!r} is listed twice")
        judged[jrow["key"]] = jrow
    return judged


def _skip_reason(
    row: Mapping[str, Any], jrow: Mapping[str, Any] | None, found: tuple[str, int, int] | str
) -> str | None:
    """Why an output row cannot be re-answered (:data:`SKIP_REASONS`), or None."""
    if row.get("error"):
        return "generation-error"
    if jrow is None:
        return "no-judge-row"
    if jrow.get("error"):
        return "judge-error"
    return found if isinstance(found, str) else None


class _Blocking:
    """One attention-blocking run: its inputs and settings, the rows written so far and
    the sums of the summary."""

    def __init__(
        self,
        paths: tuple[Path, Path, Path, Path],
        settings: Sequence[str],
        backend: Any,
        max_new_tokens: int,
        score: Callable[[dict[str, Any], Any], int | None] | None,
        markers: Sequence[Sequence[str]] | None,
    ):
        outputs_path, samples_path, manifest_path, attributes_path = paths
        self.paths = paths
        self.settings, self.backend, self.max_new_tokens = settings, backend, max_new_tokens
        self.score, self.markers = score, markers
        self.outputs = read_jsonl(outputs_path)
        self.samples = {s.sample_id: s for s in read_samples(samples_path)}
        self.variants = {v.variant_id: v for v in read_variants(manifest_path)}
        self.judged = _judged_rows(attributes_path)
        self.skipped: Counter[str] = Counter({reason: 0 for reason in SKIP_REASONS})
        self.rows: list[dict[str, Any]] = []
        self.sums: dict[str, Counter[str]] = {s: Counter() for s in settings}
        self.reanswered = self.errors = 0
        self.seconds = 0.0

    def skip(self, row: Mapping[str, Any], reason: str) -> None:
        """Count a skipped output row; a row per setting says so."""
        self.skipped[reason] += 1
        self.rows += [_row(row, setting, error=f"skipped: {reason}") for setting in self.settings]

    def inputs_of(self, row: Mapping[str, Any]) -> tuple[Any, Any]:
        """The variant and the sample of an output row (either missing is an error)."""
        outputs_path, samples_path, manifest_path, _ = self.paths
        key = row["key"]
        variant = self.variants.get(row["variant_id"])
        if variant is None:
            raise ValueError(
                f"{outputs_path}: row {key!r}: variant {row['variant_id']!r} is not in "
                f"{manifest_path}"
            )
        sample = self.samples.get(row["sample_id"])
        if sample is None:
            raise ValueError(
                f"{outputs_path}: row {key!r}: sample {row['sample_id']!r} is not in {samples_path}"
            )
        return variant, sample

    def reanswer(
        self,
        row: dict[str, Any],
        found: tuple[str, int, int],
        req: Request,
        sample: Any,
        roles: Mapping[str, Sequence[str]],
    ) -> None:
        """Re-answer one output row under every setting: block the setting's phrases in
        the trace, generate, split off the answer and score it; a failed re-answer is
        recorded in its row and counted."""
        prefill, start, end = found
        for setting in self.settings:
            phrases = roles[setting]
            spans = phrase_spans(prefill, phrases, start, end)
            out_row = _row(row, setting, len(phrases))
            t0 = time.perf_counter()
            try:
                text, blocked = self.backend.answer_with_blocked(
                    req, prefill, spans, self.max_new_tokens
                )
            except Exception as exc:  # this re-answer only; recorded and counted
                out_row["error"] = f"{type(exc).__name__}: {exc}"[:1000]
                self.errors += 1
                self.rows.append(out_row)
                continue
            self.seconds += time.perf_counter() - t0
            raw = prefill + text
            answer = split_thinking(raw, self.markers)[1]
            out_row["answer_text"] = answer
            out_row["blocked_tokens"] = int(blocked)
            if self.score is not None:
                scored = {**row, "raw_text": raw, "answer_text": answer, "error": None}
                out_row["correct"] = self.score(scored, sample)
            self.add_answer(out_row, setting, phrases, blocked)

    def add_answer(
        self, out_row: dict[str, Any], setting: str, phrases: Sequence[str], blocked: int
    ) -> None:
        """Count a re-answered row in the sums of its setting and keep it."""
        sums = self.sums[setting]
        sums["n"] += 1
        sums["blocked"] += int(blocked)
        sums["phrases"] += len(phrases)
        sums["missing"] += bool(phrases) and not blocked
        if out_row["correct"] is not None:
            sums["scored"] += 1
            sums["correct"] += int(out_row["correct"])
        self.rows.append(out_row)

    def summary(self) -> dict[str, Any]:
        """The run's summary (:func:`block_attention`)."""
        settings, sums = self.settings, self.sums

        def mean(setting: str, field: str, over: str = "n") -> float | None:
            n = sums[setting][over]
            return round(sums[setting][field] / n, 4) if n else None

        answered = sum(c["n"] for c in sums.values())
        return {
            "outputs": len(self.outputs),
            "reanswered": self.reanswered,
            "rows": len(self.rows),
            "errors": self.errors,
            "skipped": dict(self.skipped),
            "blocked_tokens": {s: mean(s, "blocked") for s in settings},
            "phrases": {s: mean(s, "phrases") for s in settings},
            "missing_phrases": {s: sums[s]["missing"] for s in settings},
            "accuracy": {s: mean(s, "correct", "scored") for s in settings},
            "seconds_per_answer": round(self.seconds / answered, 4) if answered else None,
        }


def _check_setup(settings: Sequence[str], backend: Any) -> None:
    """The block settings are known and the backend can block attention."""
    bad = [s for s in settings if s not in BLOCK_SETTINGS]
    if bad or not settings:
        raise ValueError(f"block settings must be among {BLOCK_SETTINGS}, got {list(settings)}")
    if not hasattr(backend, "answer_with_blocked"):
        raise ValueError(
            f"backend {getattr(backend, 'name', type(backend).__name__)!r} cannot block "
            "attention (a local hf model is needed)"
        )


def block_attention(
    outputs_path: Path,
    samples_path: Path,
    manifest_path: Path,
    attributes_path: Path,
    backend: Any,
    out: Path,
    prompt: str | None = None,
    settings: Sequence[str] = BLOCK_SETTINGS,
    max_new_tokens: int = 64,
    limit: int | None = None,
    score: Callable[[dict[str, Any], Any], int | None] | None = None,
    markers: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Re-answer each output row under each block setting (module docstring); write the
    rows to ``out`` and return the summary.

    ``backend``: a loaded hf backend (``answer_with_blocked``). ``prompt``: the prompt
    builder for every row (None: each row's own, the default). ``limit``: stop after
    this many output rows were re-answered (file order). ``score(row, sample)`` -> 1, 0
    or None, given the output row with the re-answer in ``raw_text`` (prefill +
    continuation) and ``answer_text`` (the same shape as an output row, so a scorer of
    output rows applies). ``markers``: the model's thinking markers (default: the
    backend's ``options.thinking_markers``, else ``<think>``/``</think>`` and Kimi's).

    Summary: ``outputs`` (rows read), ``reanswered``, ``rows`` (written), ``errors``
    (failed re-answers), ``skipped`` (reason -> count, every reason listed),
    ``blocked_tokens`` / ``phrases`` (setting -> mean over re-answered rows),
    ``missing_phrases`` (setting -> rows with phrases but no token blocked),
    ``accuracy`` (setting -> mean of the scored rows, or None), ``seconds_per_answer``.
    """
    _check_setup(settings, backend)
    if markers is None:
        markers = (getattr(backend, "options", None) or {}).get("thinking_markers")
    paths = (outputs_path, samples_path, manifest_path, attributes_path)
    run = _Blocking(paths, settings, backend, max_new_tokens, score, markers)
    resized_dir = out.with_name(out.name + ".resized")
    try:
        for row in run.outputs:
            if limit is not None and run.reanswered >= limit:
                break
            jrow = run.judged.get(row["key"])
            found = trace_prefill(row.get("raw_text") or "", markers)
            reason = _skip_reason(row, jrow, found)
            if reason is not None:  # a row per setting says so: counted where it is read
                run.skip(row, reason)
                continue
            variant, sample = run.inputs_of(row)
            roles = attribute_roles(jrow.get("task", ""), jrow, variant.params, sample.meta)
            roles["none"] = []
            spec = getattr(backend, "spec", None)
            req = _request(row, sample, variant, prompt, max_new_tokens, resized_dir, spec)
            run.reanswered += 1
            run.reanswer(row, found, req, sample, roles)
    finally:
        shutil.rmtree(resized_dir, ignore_errors=True)
    write_jsonl(out, run.rows)
    summary = run.summary()
    skipped, errors = run.skipped, run.errors
    if sum(skipped.values()) or errors:
        log.warning(
            "%s: %d output rows skipped (%s), %d re-answers failed",
            out,
            sum(skipped.values()),
            ", ".join(f"{k} {v}" for k, v in skipped.items() if v),
            errors,
        )
    return summary

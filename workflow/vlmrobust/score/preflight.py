"""Preflight: does this setup reproduce a release that holds the exact inputs and outputs?

A release such as Distract-Bench's holds, per model, lmms-eval samples files
(``<hub id with / as __>.samples.jsonl``: ``doc_id``, ``target``, ``filtered_resps``,
``token_counts``, ``llm_as_judge_eval.true_false``). The preflight (``vlmrobust
preflight``, docs/preflight.md) replays a seeded draw of those rows through the engine
the run would load and compares, per model:

- the responses: identical (exact text) in how many rows, and for each row that is not,
  where the two texts part (:func:`first_difference`: both tokenised with the model's
  own tokenizer, the first differing token and its position);
- the accuracy of the replayed responses (the project's scorer for the dataset) against
  the release's own verdicts on the same rows (``true_false``), each with a 95% Wilson
  interval (:func:`wilson`), and their difference;
- the time per request.

This module compares and reports; the job (:mod:`vlmrobust.jobs.preflight`) builds the
samples, the variants and the requests as the run does and runs the engine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.io import read_jsonl
from ..core.records import OutputRow, Sample
from ..core.released import Questions
from ..core.seeding import derive_seed
from . import score_outputs
from .released import import_lmms_eval
from .released.keyed_json import _released_label

__all__ = [
    "Release",
    "compare_model",
    "draw_rows",
    "first_difference",
    "read_release",
    "release_candidates",
    "render_report",
    "wilson",
]

#: the file name of a model's samples in a release: its hub id with ``/`` as ``__``
RELEASE_SUFFIX = ".samples.jsonl"
#: the two-sided 95% normal quantile of the Wilson interval
Z95 = 1.959963984540054
#: tokens of common text shown before a first difference
CONTEXT_TOKENS = 8


# --------------------------------------------------------------------------- the release


def release_candidates(release: str | Path, hub_id: str) -> list[Path]:
    """Where a model's samples file may lie in the release folder, in the order looked
    at: ``<release>/<id>.samples.jsonl``, then ``<release>/model_outputs/<id>...`` (the
    layout of the release's repository; ``<id>`` is the hub id with ``/`` as ``__``)."""
    name = hub_id.replace("/", "__") + RELEASE_SUFFIX
    return [Path(release) / name, Path(release) / "model_outputs" / name]


@dataclass
class Release:
    """One model's released rows: output rows by sample id (the response in
    ``raw_text``) and the release's own verdicts (``true_false``; None where a row has
    none)."""

    path: Path
    rows: dict[str, OutputRow]
    labels: dict[str, bool | None] = field(default_factory=dict)
    skipped: int = 0


def read_release(
    path: str | Path, dataset: str, questions: Questions, model: str, condition: str
) -> Release:
    """A model's released samples file (lmms-eval's format, ``doc_id`` = the dataset's
    own id) as output rows of ``dataset`` and the release's verdicts; the rows of
    question rows the samples stage skipped are counted in ``skipped``."""
    counts: dict[str, int] = {}
    rows = import_lmms_eval(path, dataset, questions, model, condition, counts=counts)
    labels: dict[str, bool | None] = {}
    for rec in read_jsonl(path):
        sample = questions.get(str(rec.get("doc_id")).strip())
        if sample is not None:
            judged = rec.get("llm_as_judge_eval") or {}
            labels[sample.sample_id] = _released_label(judged.get("true_false"))
    by_id = {r.sample_id: r for r in rows}
    return Release(Path(path), by_id, labels, counts.get("skipped_questions", 0))


def draw_rows(ids: Sequence[str], n: int, seed: int, dataset: str) -> list[str]:
    """``n`` of ``ids`` (all of them when there are fewer), drawn with a generator seeded
    by (``seed``, ``dataset``) from the sorted ids, so every model with the same
    released rows replays the same ones; in the order of ``ids``."""
    pool = sorted(set(ids))
    rng = random.Random(derive_seed(seed, "preflight", dataset))
    chosen = set(rng.sample(pool, min(n, len(pool))))
    return [i for i in dict.fromkeys(ids) if i in chosen]


# --------------------------------------------------------------------------- comparing


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``k`` successes in ``n`` trials (None for n = 0)."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _accuracy(k: int, n: int) -> dict[str, Any]:
    interval = wilson(k, n)
    return {
        "correct": k,
        "n": n,
        "accuracy": k / n if n else None,
        "ci95": list(interval) if interval else None,
    }


def _kind(released: str, replayed: str) -> str:
    """How two texts differ: ``tail`` when one is the other plus only U+FFFD (the bytes
    of a character cut by max_new_tokens: transformers' ``decode`` shows them as U+FFFD,
    vLLM's detokenizer holds them back), ``ends first`` when one is the other's
    beginning, else ``token``."""
    short, long_ = sorted((released, replayed), key=len)
    if not long_.startswith(short):
        return "token"
    return "tail" if set(long_[len(short) :]) == {"\ufffd"} else "ends first"


def first_difference(released: str, replayed: str, tokenizer: Any) -> dict[str, Any]:
    """Where two texts part, in the model's tokens: both tokenised with ``tokenizer``
    (no special tokens added), the position of the first token that differs (or where
    the shorter one ends), the two tokens (id and text; None past an end), the common
    text just before them and the kind of difference (:func:`_kind`)."""
    a = list(tokenizer.encode(released, add_special_tokens=False))
    b = list(tokenizer.encode(replayed, add_special_tokens=False))
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1

    def token(ids: list[int]) -> tuple[int | None, str | None]:
        return (ids[i], tokenizer.decode([ids[i]])) if i < len(ids) else (None, None)

    (rel_id, rel_text), (rep_id, rep_text) = token(a), token(b)
    return {
        "kind": _kind(released, replayed),
        "position": i,
        "released_token": rel_text,
        "replayed_token": rep_text,
        "released_token_id": rel_id,
        "replayed_token_id": rep_id,
        "released_tokens": len(a),
        "replayed_tokens": len(b),
        "before": tokenizer.decode(a[max(0, i - CONTEXT_TOKENS) : i]),
    }


def _correct(
    rows: list[OutputRow], samples: Mapping[str, Sample], scoring: Mapping[str, Any]
) -> dict[str, int]:
    """Each row's verdict (0/1) by the project's scorer for the dataset (``scoring``:
    ``scorer``, ``unparsed_choice``, ``mode``, ``seed``; no LLM is asked)."""
    scored = score_outputs(
        samples,
        rows,
        scoring["scorer"],
        unparsed_choice=scoring.get("unparsed_choice", "wrong"),
        mode=scoring.get("mode", "extract"),
        seed=int(scoring.get("seed", 0)),
    )
    return {s["sample_id"]: int(s["correct"]) for s in scored}


def _timing(replayed: list[OutputRow], engine_s: float | None) -> dict[str, Any]:
    latencies = [r.latency_s for r in replayed if r.latency_s is not None]
    tokens = [r.completion_tokens for r in replayed if r.completion_tokens is not None]
    return {
        "seconds_per_request": sum(latencies) / len(latencies) if latencies else None,
        "completion_tokens_per_request": sum(tokens) / len(tokens) if tokens else None,
        "engine_seconds": engine_s,
    }


def _differences(
    ids: list[str], release: Release, replayed: Mapping[str, OutputRow], tokenizer: Any
) -> list[dict[str, Any]]:
    out = []
    for k, sid in enumerate(ids):
        rel, rep = release.rows[sid], replayed.get(sid)
        if rep is not None and rep.error is None and rep.raw_text == rel.raw_text:
            continue
        row: dict[str, Any] = {"sample_id": sid, "row": k}
        if rep is None or rep.error is not None:
            row["error"] = "no replayed row" if rep is None else rep.error
        elif tokenizer is not None:
            row.update(first_difference(rel.raw_text, rep.raw_text, tokenizer))
        out.append(row)
    return out


def compare_model(
    ids: list[str],
    release: Release,
    replayed: list[OutputRow],
    samples: Mapping[str, Sample],
    scoring: Mapping[str, Any],
    tokenizer: Any = None,
    engine_s: float | None = None,
) -> dict[str, Any]:
    """One model's comparison on the drawn rows ``ids`` (module docstring): identical
    responses, every differing row (:func:`first_difference`, in row order), the
    accuracy of the replayed rows and of the release's verdicts on the same rows, their
    difference and the time per request."""
    by_id = {r.sample_id: r for r in replayed}
    differing = _differences(ids, release, by_id, tokenizer)
    identical = len(ids) - len(differing)
    verdicts = _correct([by_id[i] for i in ids if i in by_id], samples, scoring)
    ours = _accuracy(sum(verdicts.get(i, 0) for i in ids), len(ids))
    labelled = [i for i in ids if release.labels.get(i) is not None]
    theirs = _accuracy(sum(bool(release.labels[i]) for i in labelled), len(labelled))
    rescored = _correct([release.rows[i] for i in ids], samples, scoring)
    both = (ours["accuracy"], theirs["accuracy"])
    return {
        "release_file": str(release.path),
        "rows": len(ids),
        "sample_ids": list(ids),
        "identical": identical,
        "identical_share": identical / len(ids) if ids else None,
        "differing": differing,
        "errors": sum(1 for d in differing if "error" in d),
        "accuracy": {
            "replayed": ours,
            "released": theirs,
            "difference": None if None in both else both[0] - both[1],
            "released_rescored": _accuracy(sum(rescored.values()), len(rescored)),
        },
        **_timing([by_id[i] for i in ids if i in by_id], engine_s),
    }


# --------------------------------------------------------------------------- the report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _acc(a: Mapping[str, Any]) -> str:
    if a["accuracy"] is None:
        return "-"
    lo, hi = a["ci95"]
    return f"{a['accuracy']:.3f} [{lo:.3f}, {hi:.3f}]"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _model_line(m: Mapping[str, Any]) -> list[str]:
    if "rows" not in m:
        return [m["model"], m.get("backend") or "-", "-", "-", "-", "-", "-", "-", m["status"]]
    acc = m["accuracy"]
    return [
        m["model"],
        m["backend"],
        str(m["rows"]),
        f"{m['identical']} ({_pct(m['identical_share'])})",
        _acc(acc["replayed"]),
        _acc(acc["released"]),
        _num(acc["difference"], "+.3f"),
        _num(m["seconds_per_request"], ".2f"),
        m["status"],
    ]


HEADER = [
    "model", "backend", "rows", "identical", "replayed acc [95% CI]",
    "released acc [95% CI]", "diff", "s/request", "status",
]  # fmt: skip


def _table(lines: list[list[str]]) -> str:
    widths = [max(len(r[k]) for r in lines) for k in range(len(lines[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
    )


def _difference_line(d: Mapping[str, Any], source_id: Callable[[str], str]) -> str:
    where = f"row {d['row']} (id {source_id(d['sample_id'])})"
    if "error" in d:
        return f"    {where}: {d['error']}"
    if "position" not in d:
        return f"    {where}: differs"
    kind = "" if d["kind"] == "token" else f" ({d['kind']})"
    return (
        f"    {where}: token {d['position']} of {d['released_tokens']} / "
        f"{d['replayed_tokens']}: released {d['released_token']!r}, replayed "
        f"{d['replayed_token']!r} after {d['before']!r}{kind}"
    )


def render_report(
    report: Mapping[str, Any], shown: int = 3, source_id: Callable[[str], str] = str
) -> str:
    """The report as a readable table, then per model its first ``shown`` differing
    rows and what kept a model out (no release file, not a local model)."""
    models = report["models"]
    out = [
        f"preflight of {report['config']} on {report['dataset']} ({report['condition']}, "
        f"prompt {report['prompt']}): {report['rows_requested']} rows per model, seed "
        f"{report['seed']}, identical share required {report['min_identical']}",
        "",
        _table([HEADER, *(_model_line(m) for m in models)]),
    ]
    for m in models:
        if m.get("differing"):
            n = len(m["differing"])
            out.append(f"\n{m['model']}: {n} differing row(s), the first {min(n, shown)}:")
            out += [_difference_line(d, source_id) for d in m["differing"][:shown]]
        if m.get("note"):
            out.append(f"\n{m['model']}: {m['note']}")
    failed = report["failed"]
    out.append(
        "\n" + (f"FAILED: {', '.join(failed)}" if failed else "passed: every replayed model")
    )
    return "\n".join(out)

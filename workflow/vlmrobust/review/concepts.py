"""Confirming the concept-family labels of MathVerse problems on a review page.

``vlmrobust concepts-review --labels concept_families.csv --samples S.jsonl`` serves a
page that lists each problem of the labels file (:mod:`vlmrobust.core.concept_labels`)
with its diagram, question and proposed family, and five buttons: triangle,
quadrilateral, circle, 3d, other. A click writes the person's choice to the labels file
(:func:`~vlmrobust.core.concept_labels.confirm_label`: a family is ``confirmed``;
``other`` is ``rejected``, no family of the four), atomically and keeping the file's
permission bits, as the decisions file of ``vlmrobust review`` is written.

The diagram of a problem is the image of a sample in the samples file whose
``meta.problem_index`` is the row's (compared as text); of a problem's several versions
the first in :data:`VERSION_ORDER`, then in file order. A problem with no such sample
is listed without an image (and counted as ``without_image``); samples of problems
missing from the labels file are counted as ``samples_without_label``.

The server (:class:`ConceptReviewServer`) is a
:class:`~vlmrobust.review.server.LocalServer`, with the same protections as the
decisions server: writes need the session token (``X-Review-Token``), every request
must name the server in its ``Host`` header and come from no other ``Origin``, and
images are served only from ``results/`` and ``resources/`` under the image base.
Routes: ``GET /`` (the page), ``GET /state`` (``{"labels": {problem_index: row},
"counts": ...}``), ``GET /image/<problem_index>/diagram``, and ``POST /label`` with a
JSON body ``{"problem_index", "concept_family"}`` (answer ``{"ok": true, "label": row,
"counts": ...}``, or a 400 with ``{"error": message}``).

Keyboard: ``j``/``k`` next/previous problem, ``1``-``5`` choose a family (in the order
of the buttons), ``h`` hide the decided problems.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..core.concept_labels import (
    REVIEW_CHOICES,
    LabelError,
    confirm_label,
    label_counts,
    read_labels,
)
from ..core.decisions import DecisionError
from ..core.idis import MATHVERSE_VERSIONS
from ..core.records import Sample, read_samples
from .page import BASE_CSS, _e, count_spans, page_script
from .server import LocalServer, run_server

__all__ = [
    "VERSION_ORDER",
    "ConceptReviewServer",
    "concept_counts",
    "concepts_review",
    "diagrams_by_problem",
    "render_concepts_page",
]

log = logging.getLogger("vlmrobust.review")

TITLE = "MathVerse concept families: confirmation"
#: the problem version whose image is shown first (MathVerse's versions of a problem)
VERSION_ORDER = MATHVERSE_VERSIONS


def diagrams_by_problem(samples: list[Sample]) -> dict[str, Sample]:
    """``{problem_index (text): the sample whose image is shown}``; samples without a
    ``meta.problem_index`` or an image are left out."""
    rank = {v: i for i, v in enumerate(VERSION_ORDER)}
    best: dict[str, tuple[int, int, Sample]] = {}
    for pos, s in enumerate(samples):
        pid = s.meta.get("problem_index")
        if pid is None or str(pid).strip() == "" or not s.images:
            continue
        key = str(pid).strip()
        order = (rank.get(str(s.meta.get("problem_version")), len(rank)), pos)
        if key not in best or order < best[key][:2]:
            best[key] = (*order, s)
    return {k: v[2] for k, v in best.items()}


def _read_inputs(
    labels_path: str | Path, samples_path: str | Path
) -> tuple[dict[str, dict[str, str]], dict[str, Sample], int]:
    """The rows of the labels file (validated), the diagram of each problem, and how
    many samples have a problem_index with no row in the labels file."""
    samples = read_samples(samples_path)
    _, rows = read_labels(labels_path)
    without_label = sum(
        1
        for s in samples
        if s.meta.get("problem_index") is not None
        and str(s.meta["problem_index"]).strip() not in rows
    )
    return rows, diagrams_by_problem(samples), without_label


def concept_counts(
    rows: dict[str, dict[str, str]], diagrams: dict[str, Sample], samples_without_label: int
) -> dict[str, Any]:
    """The page's counts: :func:`~vlmrobust.core.concept_labels.label_counts` plus
    ``without_image`` (rows with no sample image) and ``samples_without_label``."""
    counts = label_counts(rows)
    counts["without_image"] = sum(1 for pid in rows if pid not in diagrams)
    counts["samples_without_label"] = samples_without_label
    return counts


def _status(row: dict[str, str]) -> str:
    if row["status"] == "proposed":
        return "proposed"
    if row["status"] == "rejected":
        return f"rejected ({row['concept_family'] or 'no family'}) · {row['source']}"
    return f"confirmed: {row['concept_family']} · {row['source']}"


def _card(index: int, row: dict[str, str], sample: Sample | None) -> str:
    pid = row["problem_index"]
    if sample is not None:
        src = f"image/{quote(pid, safe='')}/diagram"
        figure = (
            f'<figure><a href="{src}" target="_blank" rel="noopener"><img src="{src}" '
            f'alt="diagram of problem {_e(pid)}" loading="lazy" '
            f"onerror=\"this.closest('figure').classList.add('missing')\"></a>"
            f"<figcaption><code>{_e(sample.images[0])}</code> "
            f"({_e(sample.sample_id)}, {_e(sample.meta.get('problem_version') or '')})"
            f"</figcaption></figure>"
        )
        meta = sample.meta
        subject = " / ".join(str(meta[k]) for k in ("subject", "subfield") if meta.get(k))
        question = (
            f'<div class="field"><b>Question</b><div class="text">{_e(sample.question)}</div></div>'
            + (
                f'<div class="field"><b>Subject</b><div>{_e(subject)}</div></div>'
                if subject
                else ""
            )
        )
    else:
        figure = '<p class="error">no sample with this problem_index in the samples file</p>'
        question = ""
    buttons = "".join(
        f'<button type="button" data-family="{f}" title="key {n}"'
        f"{' class=chosen' if row['status'] != 'proposed' and row['concept_family'] == f else ''}>"
        f"<kbd>{n}</kbd> {f}</button>"
        for n, f in enumerate(REVIEW_CHOICES, 1)
    )
    return f"""
<section class="card" id="card-{index}" data-problem="{_e(pid)}" data-status="{_e(row["status"])}">
  <header><h2><span class="idx">{index}.</span> problem {_e(pid)}</h2>
    <span class="status" data-role="status">{_e(_status(row))}</span></header>
  <div class="body">{figure}
    <div class="fields">
      <div class="field proposed"><b>Proposed</b><div><code>{_e(row["concept_family"] or "none")}</code>
        from {_e(row["source"] or "unknown")}</div></div>
      {question}
      <div class="actions">{buttons}<span class="error" data-role="error" role="alert"></span></div>
    </div>
  </div>
</section>"""


_CSS = (
    BASE_CSS
    + """
.card[data-status="confirmed"] { border-left-color: var(--ok); }
.card[data-status="rejected"] { border-left-color: var(--bad); }
.body { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1rem; }
button.chosen { background: var(--ok); color: #fff; }
.card[data-status="rejected"] button.chosen { background: var(--bad); }
body.hide-decided .card[data-status="confirmed"], body.hide-decided .card[data-status="rejected"] { display: none; }
"""
)

#: the counts in the page's header (updated from each answer)
COUNT_KEYS = ("problems", "proposed", "confirmed", "rejected")

_JS = page_script(
    COUNT_KEYS,
    r"""
  function show(card, row) {
    card.dataset.status = row.status;
    let text = "proposed";
    if (row.status === "confirmed") text = "confirmed: " + row.concept_family + " \u00b7 " + row.source;
    if (row.status === "rejected") text = "rejected (" + (row.concept_family || "no family") + ") \u00b7 " + row.source;
    card.querySelector("[data-role=status]").textContent = text;
    for (const b of card.querySelectorAll("button[data-family]"))
      b.classList.toggle("chosen", row.status !== "proposed" && b.dataset.family === row.concept_family);
  }
  function send(card, family) {
    const payload = {problem_index: card.dataset.problem, concept_family: family};
    return post(card, "label", payload, body => show(card, body.label));
  }
  cards.forEach((card, i) => {
    card.addEventListener("click", ev => {
      focusCard(i, false);
      const button = ev.target.closest("button[data-family]");
      if (button) send(card, button.dataset.family);
    });
  });
  document.addEventListener("keydown", async ev => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !cards.length) return;
    const card = cards[current];
    const buttons = card.querySelectorAll("button[data-family]");
    if (ev.key === "j") focusCard(current + 1, true);
    else if (ev.key === "k") focusCard(current - 1, true);
    else if (ev.key === "h") { hide.checked = !hide.checked; hide.dispatchEvent(new Event("change")); }
    else if (/^[1-9]$/.test(ev.key) && buttons[Number(ev.key) - 1]) {
      if (await send(card, buttons[Number(ev.key) - 1].dataset.family)) focusCard(current + 1, true);
    } else return;
    ev.preventDefault();
  });
  focusCard(0, false);
""",
)


def render_concepts_page(
    rows: dict[str, dict[str, str]],
    diagrams: dict[str, Sample],
    counts: dict[str, Any],
    *,
    token: str,
    title: str = TITLE,
) -> str:
    """The live confirmation page (one card per labels row, in file order)."""
    cards = "".join(
        _card(i, row, diagrams.get(pid)) for i, (pid, row) in enumerate(rows.items(), 1)
    )
    shown = count_spans(counts, COUNT_KEYS)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="review-token" content="{_e(token)}">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head>
<body data-live="1">
<header>
  <h1>{_e(title)}</h1>
  <div class="counts">{shown}
    <span>without image <b>{counts.get("without_image", 0)}</b></span>
    <label><input type="checkbox" id="hide-decided"> hide decided</label></div>
  <details class="help"><summary>What to do, and keys</summary>
    <p>Choose the family of the figure the diagram shows: triangle, quadrilateral, circle
    or 3d (a solid); <em>other</em> when it is none of these (the problem then gets no
    aligned or conflicting distractor). A family is saved as <code>confirmed</code>,
    <em>other</em> as <code>rejected</code>; only confirmed families are used.</p>
    <p>Keys: <kbd>j</kbd>/<kbd>k</kbd> next/previous, <kbd>1</kbd>-<kbd>{len(REVIEW_CHOICES)}</kbd>
    choose a family, <kbd>h</kbd> hide decided.</p>
  </details>
</header>
<main>{cards}
</main>
<script>{_JS}</script>
</body>
</html>
"""


class ConceptReviewServer(LocalServer):
    """The concept-family confirmation server of one labels file and one samples file; a
    bound, not yet running server (port 0: any free port; see ``.url``)."""

    post_path = "/label"
    image_kinds = ("diagram",)

    def __init__(
        self,
        labels_path: str | Path,
        samples_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        image_base: str | Path | None = None,
    ) -> None:
        self.labels_path = Path(labels_path)
        # Fails now, not on the first click, if the labels file does not validate.
        _, self.diagrams, self.samples_without_label = _read_inputs(labels_path, samples_path)
        super().__init__(host, port, image_base)

    def state(self) -> tuple[dict[str, dict[str, str]], dict[str, Any]]:
        """The rows now in the labels file and their counts."""
        _, rows = read_labels(self.labels_path)
        return rows, self._counts(rows)

    def _counts(self, rows: dict[str, dict[str, str]]) -> dict[str, Any]:
        return concept_counts(rows, self.diagrams, self.samples_without_label)

    def page(self) -> str:
        rows, counts = self.state()
        return render_concepts_page(rows, self.diagrams, counts, token=self.token)

    def state_json(self) -> dict[str, Any]:
        rows, counts = self.state()
        return {"labels": rows, "counts": counts}

    def image_of(self, key: str, kind: str) -> str | None:
        sample = self.diagrams.get(key)
        return None if sample is None else sample.images[0]

    def post(self, body: Any) -> dict[str, Any]:
        """Save one choice: ``{"problem_index", "concept_family"}``."""
        if not isinstance(body, dict):
            raise DecisionError("the body must be a JSON object")
        pid, family = body.get("problem_index"), body.get("concept_family")
        if not isinstance(pid, str | int) or isinstance(pid, bool):
            raise DecisionError(f"problem_index must be text, got {pid!r}")
        if not isinstance(family, str):
            raise DecisionError(f"concept_family must be text, got {family!r}")
        pid = str(pid).strip()
        try:
            with self.lock:
                rows = confirm_label(self.labels_path, pid, family)
        except LabelError as exc:
            raise DecisionError(str(exc)) from None
        row = rows[pid]
        log.info("problem %s: %s %s", pid, row["status"], row["concept_family"])
        return {"ok": True, "label": row, "counts": self._counts(rows)}


def concepts_review(
    labels: str | Path,
    samples: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    image_base: str | None = None,
    report: bool = False,
) -> int:
    """``vlmrobust concepts-review``: serve the confirmation page until interrupted, or
    with ``report`` print the counts as JSON. Returns the exit status (2 with the
    message on a bad labels file)."""
    try:
        if report:
            counts = concept_counts(*_read_inputs(labels, samples))
            print(json.dumps(counts, indent=2))
            return 0
        server = ConceptReviewServer(labels, samples, host, port, image_base=image_base)
        run_server(server, what="choice")
        counts = server.state()[1]
        print(
            f"problems {counts['problems']}: confirmed {counts['confirmed']}, rejected "
            f"{counts['rejected']}, proposed {counts['proposed']}",
            flush=True,
        )
    except (LabelError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

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

import html
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
from ..core.records import Sample, read_samples
from .server import LocalServer, run_server

__all__ = [
    "VERSION_ORDER",
    "ConceptReviewServer",
    "concept_counts",
    "concepts_review",
    "diagrams_by_problem",
    "make_concept_server",
    "render_concepts_page",
]

log = logging.getLogger("vlmrobust.review")

TITLE = "MathVerse concept families: confirmation"
#: the problem version whose image is shown first (MathVerse's versions of a problem)
VERSION_ORDER = ("Text Dominant", "Text Lite", "Vision Intensive", "Vision Dominant")


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


def _without_label(samples: list[Sample], rows: dict[str, dict[str, str]]) -> int:
    """Samples with a problem_index that has no row in the labels file."""
    return sum(
        1
        for s in samples
        if s.meta.get("problem_index") is not None
        and str(s.meta["problem_index"]).strip() not in rows
    )


def concept_counts(
    rows: dict[str, dict[str, str]], diagrams: dict[str, Sample], samples_without_label: int
) -> dict[str, Any]:
    """The page's counts: :func:`~vlmrobust.core.concept_labels.label_counts` plus
    ``without_image`` (rows with no sample image) and ``samples_without_label``."""
    counts = label_counts(rows)
    counts["without_image"] = sum(1 for pid in rows if pid not in diagrams)
    counts["samples_without_label"] = samples_without_label
    return counts


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


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


_CSS = """
:root { --ok: #1a7f37; --bad: #cf222e; --muted: #57606a; --line: #d0d7de; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
body > header { position: sticky; top: 0; z-index: 2; background: #fff;
  border-bottom: 1px solid var(--line); padding: .5rem 1rem; }
h1 { font-size: 1.15rem; margin: 0 0 .3rem; }
.counts span { margin-right: 1rem; } .counts b { font-variant-numeric: tabular-nums; }
.help { color: var(--muted); font-size: .85rem; }
main { max-width: 1400px; margin: 0 auto; padding: 1rem; }
.card { background: #fff; border: 1px solid var(--line); border-left: 6px solid var(--line);
  border-radius: 6px; padding: .8rem 1rem; margin-bottom: 1.2rem; }
.card.current { box-shadow: 0 0 0 3px #54aeff66; }
.card[data-status="confirmed"] { border-left-color: var(--ok); }
.card[data-status="rejected"] { border-left-color: var(--bad); }
.card.busy { opacity: .6; }
.card > header { display: flex; justify-content: space-between; align-items: baseline; gap: 1rem; }
h2 { font-size: 1rem; margin: 0 0 .5rem; } .idx { color: var(--muted); }
.status { font-size: .9rem; color: var(--muted); }
.body { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1rem; }
figure { margin: 0; text-align: center; background: #f6f8fa; border: 1px solid var(--line);
  border-radius: 4px; padding: .4rem; }
figure img { max-width: 100%; max-height: 55vh; }
figcaption { font-size: .8rem; color: var(--muted); word-break: break-all; }
figure.missing img { display: none; }
figure.missing::before { content: "image not found"; color: var(--bad); display: block; padding: 2rem; }
.field { margin: .35rem 0; } .field > b { display: block; font-size: .8rem; color: var(--muted);
  text-transform: uppercase; letter-spacing: .03em; }
.text { white-space: pre-wrap; }
.actions { margin-top: .6rem; display: flex; gap: .4rem; flex-wrap: wrap; align-items: center; }
button { font: inherit; padding: .3rem .8rem; border-radius: 4px; border: 1px solid var(--line);
  cursor: pointer; background: #f6f8fa; }
button.chosen { background: var(--ok); color: #fff; }
.card[data-status="rejected"] button.chosen { background: var(--bad); }
kbd { font-size: .75rem; border: 1px solid var(--line); border-radius: 3px; padding: 0 .25rem; }
.error { color: var(--bad); }
body.hide-decided .card[data-status="confirmed"], body.hide-decided .card[data-status="rejected"] { display: none; }
"""

_JS = r"""
(() => {
  "use strict";
  const token = (document.querySelector("meta[name=review-token]") || {}).content || "";
  const cards = Array.from(document.querySelectorAll("section.card"));
  let current = 0;
  function setCounts(counts) {
    for (const key of ["problems", "proposed", "confirmed", "rejected"]) {
      const el = document.getElementById("count-" + key);
      if (el && key in counts) el.textContent = counts[key];
    }
  }
  function show(card, row) {
    card.dataset.status = row.status;
    let text = "proposed";
    if (row.status === "confirmed") text = "confirmed: " + row.concept_family + " \u00b7 " + row.source;
    if (row.status === "rejected") text = "rejected (" + (row.concept_family || "no family") + ") \u00b7 " + row.source;
    card.querySelector("[data-role=status]").textContent = text;
    for (const b of card.querySelectorAll("button[data-family]"))
      b.classList.toggle("chosen", row.status !== "proposed" && b.dataset.family === row.concept_family);
  }
  async function send(card, family) {
    const err = card.querySelector("[data-role=error]");
    err.textContent = "";
    card.classList.add("busy");
    try {
      const response = await fetch("label", {
        method: "POST",
        headers: {"Content-Type": "application/json", "X-Review-Token": token},
        body: JSON.stringify({problem_index: card.dataset.problem, concept_family: family}),
      });
      let body = {};
      try { body = await response.json(); } catch (e) { /* not JSON */ }
      if (!response.ok) throw new Error(body.error || response.status + " " + response.statusText);
      show(card, body.label);
      if (body.counts) setCounts(body.counts);
      return true;
    } catch (e) {
      err.textContent = "Not saved: " + e.message;
      return false;
    } finally {
      card.classList.remove("busy");
    }
  }
  function focusCard(i, scroll) {
    if (!cards.length) return;
    current = Math.max(0, Math.min(cards.length - 1, i));
    cards.forEach((c, j) => c.classList.toggle("current", j === current));
    if (scroll) cards[current].scrollIntoView({block: "start", behavior: "instant"});
  }
  cards.forEach((card, i) => {
    card.addEventListener("click", ev => {
      focusCard(i, false);
      const button = ev.target.closest("button[data-family]");
      if (button) send(card, button.dataset.family);
    });
  });
  const hide = document.getElementById("hide-decided");
  hide.addEventListener("change", ev => document.body.classList.toggle("hide-decided", ev.target.checked));
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
})();
"""


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
    shown = "".join(
        f'<span>{key} <b id="count-{key}">{counts[key]}</b></span>'
        for key in ("problems", "proposed", "confirmed", "rejected")
    )
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
    """The concept-family confirmation server of one labels file and one samples file."""

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
        samples = read_samples(samples_path)
        self.diagrams = diagrams_by_problem(samples)
        # Fail now, not on the first click, if the labels file does not validate.
        _, rows = read_labels(self.labels_path)
        self.samples_without_label = _without_label(samples, rows)
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
        try:
            with self.lock:
                row = confirm_label(self.labels_path, str(pid), family)
                _, rows = read_labels(self.labels_path)
        except LabelError as exc:
            raise DecisionError(str(exc)) from None
        log.info("problem %s: %s %s", pid, row["status"], row["concept_family"])
        return {"ok": True, "label": row, "counts": self._counts(rows)}


def make_concept_server(
    labels_path: str | Path,
    samples_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    image_base: str | Path | None = None,
) -> ConceptReviewServer:
    """A bound, not yet running server (port 0: any free port; see ``.url``)."""
    return ConceptReviewServer(labels_path, samples_path, host, port, image_base=image_base)


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
            found = read_samples(samples)
            _, rows = read_labels(labels)
            counts = concept_counts(rows, diagrams_by_problem(found), _without_label(found, rows))
            print(json.dumps(counts, indent=2))
            return 0
        server = make_concept_server(labels, samples, host, port, image_base=image_base)
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

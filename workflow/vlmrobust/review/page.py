"""The review page: one self-contained HTML file (inline CSS and JS, no network).

Per sample it shows the original and the edited image side by side, the question,
choices and answer, the distractor description, the trap reasoning path and trap
answer, the edit instruction (folded), the four criteria of Distract-Bench §3 as
checkboxes ("fails"), a note field, accept / reject / undecide buttons and the current
decision. The page is rendered twice over:

- by :func:`build_review_page` as a static file; images are referenced by paths
  relative to the HTML file (or embedded as data URIs with ``embed_images=True``, for a
  page that travels alone). Opened from disk it is read-only: the buttons explain that
  decisions are saved only through the review server;
- by the review server (:mod:`vlmrobust.review.server`) on every ``GET /``, with image
  URLs the server answers (``image/<sample_id>/original``) and the buttons live: they
  ``POST`` JSON to ``decision`` (relative to the page), with the server's session token
  (a ``<meta name="review-token">`` of the page) in the ``X-Review-Token`` header, and
  update the card and the counts from the server's answer.

The criteria shown are those of a *criteria set* (``criteria_set=``, default
``distraction``; :data:`~vlmrobust.core.decisions.CRITERIA_SETS`): the Idis review
(``vlmrobust idis-review``) shows the Idis paper's appendix A.3 criteria for perception
images, or our math counterparts, with the page's title and help to match
(:data:`SET_TEXTS`).

Keyboard (outside the note field): ``j``/``k`` next/previous sample, ``1``-``9`` toggle a
criterion (as many as the set has), ``a`` accept, ``r`` reject, ``u`` undecide, ``n``
edit the note, ``Esc`` leave the note.
"""

from __future__ import annotations

import base64
import html
import json
import mimetypes
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..core.decisions import (
    DEFAULT_CRITERIA_SET,
    MAX_NOTE,
    Candidate,
    Decision,
    apply_decisions,
    get_criteria_set,
)
from ..core.decisions import as_candidates as _as_candidates
from ..core.io import atomic_write_text

ImageSrc = Callable[[Candidate, str], str]  # (candidate, "original"|"edited") -> URL

TITLE = "Distract-Bench: human verification"

# The help of both Idis sets: the criteria are failures, every one required.
_IDIS_BEFORE = "A sample fails a criterion when the statement is true:"
_IDIS_AFTER = (
    "A sample failing any criterion is rejected: tick the ones it fails, then reject. "
    "Accept a sample that fails none. Undecided samples are kept or dropped as the "
    "condition's verification.require says."
)
#: per criteria set (one for each of :data:`~vlmrobust.core.decisions.CRITERIA_SETS`):
#: (title, help summary, text before the criteria list, text after it, the command that
#: serves a live page)
SET_TEXTS: dict[str, tuple[str, str, str, str, str]] = {
    "distraction": (
        TITLE,
        "Criteria (Distract-Bench §3) and keys",
        "A distractor must:",
        "Samples that fail any of the first three are rejected; tick the criteria a sample "
        "fails. Undecided samples do not enter the benchmark.",
        "vlmrobust review",
    ),
    "idis-perception": (
        "Idis-perception: human verification",
        "Criteria (the Idis paper, appendix A.3) and keys",
        _IDIS_BEFORE,
        _IDIS_AFTER,
        "vlmrobust idis-review",
    ),
    "idis-math": (
        "Idis-math: human verification",
        "Criteria (ours for the math diagrams, after the Idis paper's A.3 perception "
        "criteria) and keys",
        _IDIS_BEFORE,
        _IDIS_AFTER,
        "vlmrobust idis-review",
    ),
}


def resolve_image(path: str, image_base: str | Path | None = None) -> Path:
    """A candidate's image path as a file: absolute as is, else under ``image_base``."""
    p = Path(path)
    if p.is_absolute():
        return p
    return Path(image_base if image_base is not None else Path.cwd()) / p


def _data_uri(path: Path) -> str:
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    try:
        data = path.read_bytes()
    except OSError:
        return ""  # shown as a missing image
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def count_spans(counts: Mapping[str, Any], keys: Iterable[str]) -> str:
    """The header's counts, ``<b id="count-KEY">`` each (what the script updates)."""
    return "".join(f'<span>{k} <b id="count-{k}">{counts[k]}</b></span>' for k in keys)


def _status_html(d: Decision | None) -> str:
    if d is None:
        return "undecided"
    word = "accepted" if d.decision == "accept" else "rejected"
    parts = [word]
    if d.criteria_failed:
        parts.append("fails " + ", ".join(d.criteria_failed))
    if d.reviewer or d.time:
        parts.append(" ".join(x for x in (d.reviewer, d.time) if x))
    return " · ".join(_e(p) for p in parts)


def _text_block(label: str, value: Any, cls: str) -> str:
    if value in (None, "", [], {}):
        return ""
    if not isinstance(value, str):
        value = json.dumps(value, indent=2, ensure_ascii=False)
    return f'<div class="field {cls}"><b>{_e(label)}</b><div class="text">{_e(value)}</div></div>'


def _card(
    index: int,
    cand: Candidate,
    decision: Decision | None,
    image_src: ImageSrc,
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> str:
    criteria, _, optional_ids = get_criteria_set(criteria_set)
    sid = _e(cand.sample_id)
    figures = []
    for which, label, path in (
        ("original", "Original", cand.original_image),
        ("edited", "Edited", cand.edited_image),
    ):
        src = _e(image_src(cand, which))
        figures.append(
            f'<figure class="{which}"><a href="{src}" target="_blank" rel="noopener">'
            f'<img src="{src}" alt="{label} image of {sid}" loading="lazy" '
            f"onerror=\"this.closest('figure').classList.add('missing')\"></a>"
            f"<figcaption>{label} <code>{_e(path)}</code></figcaption></figure>"
        )
    choices = ""
    if cand.choices:
        items = "".join(f"<li>{_e(c)}</li>" for c in cand.choices)
        choices = f'<ol type="A" class="choices">{items}</ol>'
    failed = set(decision.criteria_failed) if decision else set()
    boxes = []
    for n, (cid, text) in enumerate(criteria.items(), 1):
        checked = " checked" if cid in failed else ""
        optional = ' <span class="optional">(optional)</span>' if cid in optional_ids else ""
        boxes.append(
            f'<label title="key {n}"><input type="checkbox" name="criterion" value="{cid}"'
            f"{checked}> <kbd>{n}</kbd> <code>{cid}</code> {_e(text)}{optional}</label>"
        )
    details = {"edit_instruction": cand.edit_instruction, **cand.extra}
    details = {k: v for k, v in details.items() if v not in (None, "", [], {})}
    more = ""
    if details:
        body = "".join(_text_block(k, v, "extra") for k, v in details.items())
        more = f"<details><summary>Edit instruction and more</summary>{body}</details>"
    state = decision.decision if decision else ""
    note = _e(decision.note) if decision else ""
    return f"""
<section class="card" id="card-{index}" data-sample-id="{sid}" data-decision="{state}">
  <header><h2><span class="idx">{index}.</span> {sid}</h2>
    <span class="status" data-role="status">{_status_html(decision)}</span></header>
  <div class="images">{"".join(figures)}</div>
  <div class="fields">
    <div class="field question"><b>Question</b><div class="text">{_e(cand.question)}</div>{choices}</div>
    {_text_block("Answer", cand.answer, "answer")}
    {_text_block("Distractor description", cand.distractor_description, "distractor")}
    {_text_block("Trap reasoning path", cand.trap_reasoning_path, "trap-path")}
    {_text_block("Trap answer", cand.trap_answer, "trap-answer")}
    {more}
  </div>
  <fieldset class="criteria"><legend>Criteria the distractor <em>fails</em></legend>
    {"".join(boxes)}
  </fieldset>
  <label class="note-label">Note <textarea class="note" name="note" rows="2" maxlength="{MAX_NOTE}">{note}</textarea></label>
  <div class="actions">
    <button type="button" class="accept" data-action="accept" title="key a">Accept</button>
    <button type="button" class="reject" data-action="reject" title="key r">Reject</button>
    <button type="button" class="undecide" data-action="undecided" title="key u">Undecide</button>
    <span class="error" data-role="error" role="alert"></span>
  </div>
</section>"""


#: the style rules every review page shares (this page and the concept-family page of
#: :mod:`vlmrobust.review.concepts`); each adds its own
BASE_CSS = """
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
.card.busy { opacity: .6; }
.card > header { display: flex; justify-content: space-between; align-items: baseline; gap: 1rem; }
h2 { font-size: 1rem; margin: 0 0 .5rem; word-break: break-all; } .idx { color: var(--muted); }
.status { font-size: .9rem; color: var(--muted); }
figure { margin: 0; text-align: center; background: #f6f8fa; border: 1px solid var(--line);
  border-radius: 4px; padding: .4rem; }
figure img { max-width: 100%; max-height: 60vh; image-rendering: auto; }
figcaption { font-size: .8rem; color: var(--muted); word-break: break-all; }
figure.missing img { display: none; }
figure.missing::before { content: "image not found"; color: var(--bad); display: block; padding: 2rem; }
.field { margin: .35rem 0; } .field > b { display: block; font-size: .8rem; color: var(--muted);
  text-transform: uppercase; letter-spacing: .03em; }
.text { white-space: pre-wrap; }
kbd { font-size: .75rem; border: 1px solid var(--line); border-radius: 3px; padding: 0 .25rem; }
.actions { margin-top: .4rem; display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
button { font: inherit; padding: .3rem 1rem; border-radius: 4px; border: 1px solid var(--line);
  cursor: pointer; background: #f6f8fa; }
.error { color: var(--bad); }
"""

_CSS = (
    BASE_CSS
    + """
.banner { color: var(--bad); }
.card[data-decision="accept"] { border-left-color: var(--ok); }
.card[data-decision="reject"] { border-left-color: var(--bad); }
.card[data-decision="accept"] .status { color: var(--ok); font-weight: 600; }
.card[data-decision="reject"] .status { color: var(--bad); font-weight: 600; }
.images { display: grid; grid-template-columns: 1fr 1fr; gap: .8rem; }
.fields { margin: .6rem 0; }
.answer .text { font-weight: 600; }
.distractor .text, .trap-path .text, .trap-answer .text { background: #fff8c5; }
.choices { margin: .3rem 0; }
details { margin: .4rem 0; } summary { cursor: pointer; color: var(--muted); }
.criteria { border: 1px solid var(--line); border-radius: 4px; margin: .5rem 0; }
.criteria label { display: block; padding: .1rem 0; cursor: pointer; }
.optional { color: var(--muted); font-style: italic; }
.note-label { display: block; } textarea.note { width: 100%; font: inherit; }
button.accept { background: var(--ok); color: #fff; } button.reject { background: var(--bad); color: #fff; }
body.hide-decided .card[data-decision="accept"], body.hide-decided .card[data-decision="reject"] { display: none; }
"""
)

# What every review page's script starts with: the session token, the cards and the
# current one, setCounts (the counts named in COUNT_KEYS), post (send one card's JSON
# body, show the answer, or the error on the card; true when saved), focusCard, and the
# "hide decided" box.
_JS_SHARED = r"""
  const tokenMeta = document.querySelector("meta[name=review-token]");
  const token = tokenMeta ? tokenMeta.content : "";
  const cards = Array.from(document.querySelectorAll("section.card"));
  let current = 0;

  function setCounts(counts) {
    for (const key of COUNT_KEYS) {
      const el = document.getElementById("count-" + key);
      if (el && key in counts) el.textContent = counts[key];
    }
  }
  async function post(card, endpoint, payload, show) {
    const err = card.querySelector("[data-role=error]");
    err.textContent = "";
    card.classList.add("busy");
    try {
      const response = await fetch(endpoint, {
        method: "POST",
        headers: {"Content-Type": "application/json", "X-Review-Token": token},
        body: JSON.stringify(payload),
      });
      let body = {};
      try { body = await response.json(); } catch (e) { /* not JSON */ }
      if (!response.ok) throw new Error(body.error || response.status + " " + response.statusText);
      show(body);
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
  const hide = document.getElementById("hide-decided");
  hide.addEventListener("change", ev => document.body.classList.toggle("hide-decided", ev.target.checked));
"""


def page_script(count_keys: Iterable[str], body: str) -> str:
    """A review page's script: the shared part (:data:`_JS_SHARED`, updating the counts
    ``count_keys`` from each answer), then ``body``, in one strict-mode function."""
    keys = json.dumps(list(count_keys))
    return f'\n(() => {{\n  "use strict";\n  const COUNT_KEYS = {keys};\n{_JS_SHARED}{body}}})();\n'


COUNT_KEYS = ("generated", "accepted", "rejected", "undecided")

_JS = page_script(
    COUNT_KEYS,
    r"""
  const live = document.body.dataset.live === "1";
  function statusText(d) {
    if (!d) return "undecided";
    const parts = [d.decision === "accept" ? "accepted" : "rejected"];
    if (d.criteria_failed.length) parts.push("fails " + d.criteria_failed.join(", "));
    const who = [d.reviewer, d.time].filter(Boolean).join(" ");
    if (who) parts.push(who);
    return parts.join(" \u00b7 ");
  }
  function show(card, d) {
    card.dataset.decision = d ? d.decision : "";
    card.querySelector("[data-role=status]").textContent = statusText(d);
    const failed = new Set(d ? d.criteria_failed : []);
    for (const box of card.querySelectorAll("input[name=criterion]")) box.checked = failed.has(box.value);
    if (d) card.querySelector("textarea.note").value = d.note;
  }
  async function send(card, decision) {
    if (!live) {
      card.querySelector("[data-role=error]").textContent =
        "Read-only copy: decisions are saved only through the review server " +
        "(" + (document.body.dataset.command || "vlmrobust review") + " ... --decisions ...).";
      return false;
    }
    const criteria = Array.from(card.querySelectorAll("input[name=criterion]:checked")).map(b => b.value);
    const note = card.querySelector("textarea.note").value;
    const payload = {sample_id: card.dataset.sampleId, decision, criteria, note};
    return post(card, "decision", payload, body => show(card, body.decision));
  }
  cards.forEach((card, i) => {
    card.addEventListener("click", ev => {
      focusCard(i, false);
      const button = ev.target.closest("button[data-action]");
      if (button) send(card, button.dataset.action);
    });
    card.addEventListener("focusin", () => focusCard(i, false));
  });
  document.addEventListener("keydown", async ev => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !cards.length) return;
    const t = ev.target;
    if (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text")) {
      if (ev.key === "Escape") t.blur();
      return;
    }
    const card = cards[current];
    if (ev.key === "j") focusCard(current + 1, true);
    else if (ev.key === "k") focusCard(current - 1, true);
    else if (/^[1-9]$/.test(ev.key)) {
      const box = card.querySelectorAll("input[name=criterion]")[Number(ev.key) - 1];
      if (box) box.checked = !box.checked;
    } else if (ev.key === "n") { ev.preventDefault(); card.querySelector("textarea.note").focus(); }
    else if (ev.key === "a" || ev.key === "r" || ev.key === "u") {
      const action = {a: "accept", r: "reject", u: "undecided"}[ev.key];
      if (await send(card, action) && action !== "undecided") focusCard(current + 1, true);
    } else return;
    ev.preventDefault();
  });
  focusCard(0, false);
""",
)


def render_review_page(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    decisions: Mapping[str, Decision] | None,
    *,
    image_src: ImageSrc,
    live: bool = False,
    title: str | None = None,
    token: str | None = None,
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> str:
    """The page as a string; ``image_src`` gives each image's URL, ``live`` enables saving
    and ``token`` (the server's session token, live pages only) goes with each save.
    The criteria, title (unless given) and help are those of ``criteria_set``."""
    crit, _, _ = get_criteria_set(criteria_set)  # an unknown set: names the known ones
    default_title, summary, before, after, command = SET_TEXTS[criteria_set]
    title = default_title if title is None else title
    cands = _as_candidates(candidates)
    decisions = dict(decisions or {})
    _, report = apply_decisions(cands, decisions, criteria_set=criteria_set)
    cards = "".join(
        _card(i, c, decisions.get(c.sample_id), image_src, criteria_set)
        for i, c in enumerate(cands, 1)
    )
    criteria = "".join(f"<li><code>{cid}</code> {_e(text)}</li>" for cid, text in crit.items())
    counts = count_spans(report, COUNT_KEYS)
    banner = (
        ""
        if live
        else '<p class="banner">Read-only copy: decisions are saved only through the review '
        f"server (<code>{_e(command)}</code>).</p>"
    )
    token_meta = f'<meta name="review-token" content="{_e(token)}">\n' if live and token else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{token_meta}<title>{_e(title)}</title>
<style>{_CSS}</style>
</head>
<body data-live="{1 if live else 0}" data-command="{_e(command)}">
<header>
  <h1>{_e(title)}</h1>
  <div class="counts">{counts}
    <label><input type="checkbox" id="hide-decided"> hide decided</label></div>
  {banner}
  <details class="help"><summary>{_e(summary)}</summary>
    <div>{_e(before)} <ol>{criteria}</ol>
    {_e(after)}</div>
    <p>Keys: <kbd>j</kbd>/<kbd>k</kbd> next/previous, <kbd>1</kbd>-<kbd>{len(crit)}</kbd> toggle a
    criterion, <kbd>a</kbd> accept, <kbd>r</kbd> reject, <kbd>u</kbd> undecide,
    <kbd>n</kbd> note, <kbd>Esc</kbd> leave the note.</p>
  </details>
</header>
<main>{cards}
</main>
<script>{_JS}</script>
</body>
</html>
"""


def build_review_page(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    decisions: Mapping[str, Decision] | None,
    out_html: str | Path,
    *,
    image_base: str | Path | None = None,
    embed_images: bool = False,
    criteria_set: str = DEFAULT_CRITERIA_SET,
    title: str | None = None,
) -> Path:
    """Write the static (read-only) review page; returns its path.

    Candidate image paths resolve against ``image_base`` (default: the current
    directory). The page refers to them by paths relative to ``out_html``, so it shows
    them when opened from disk next to the images; ``embed_images`` inlines them as data
    URIs instead (a page that can be moved or mailed alone).
    """
    out_html = Path(out_html)
    folder = out_html.resolve().parent

    def image_src(cand: Candidate, which: str) -> str:
        path = resolve_image(getattr(cand, f"{which}_image"), image_base).resolve()
        if embed_images:
            return _data_uri(path)
        return quote(Path(os.path.relpath(path, folder)).as_posix())

    page = render_review_page(
        candidates, decisions, image_src=image_src, criteria_set=criteria_set, title=title
    )
    atomic_write_text(out_html, page)
    return out_html

"""Example figures and pages of the Contrastive Region Masking study (the CRM paper's
Figures 2-3 and Table 3, one sample per file).

For example ``i`` (the i-th sample of :func:`vlmrobust.metrics.masking.masking_examples`:
the specific-masking condition, else the random one; the same samples as Table 3),
:func:`write_masking_figures` writes

* ``example{i}.png`` / ``.pdf``: the original and the masked image side by side, the
  filled box outlined in red on both (for a random mask also the premise's box, dashed
  blue), and below them, per model, its answers and flags and the step alignment
  (original step | status | masked step | similarity), each row coloured by its status
  (unchanged, modified, disappeared, new); step texts are wrapped and cut so the figure
  stays readable, long alignments are cut after :data:`MAX_STEPS` rows;
* ``example{i}.html``: a self-contained page with the same content in full (images as
  base64 PNG data URIs with the boxes drawn in, plain CSS, every text HTML-escaped):
  question, premise, boxes, and per model the flags, answers, hallucination verdict and
  the alignment table.

Fewer compared samples than examples requested: ``example{i}`` for the missing ones is
a placeholder figure and page saying "no example i: only k compared samples" (the
workflow declares every file). PNG at 150 dpi and PDF without timestamps, as the other
figures; matplotlib math parsing is off for every text (model outputs may hold "$").
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image, ImageDraw

from vlmrobust.core.io import atomic_write_text
from vlmrobust.metrics.masking import (
    masked_conditions,
    masking_examples,
    read_compared,
)
from vlmrobust.report.common import DPI, save_figure
from vlmrobust.report.tables.render import fmt_yes_no
from vlmrobust.report.text import clip_text, printable

__all__ = [
    "MAX_STEPS",
    "STATUS_COLOURS",
    "example_figure",
    "example_page",
    "masking_figure_names",
    "placeholder_figure",
    "placeholder_page",
    "write_masking_figures",
]

#: background colour of an alignment row, by status
STATUS_COLOURS = {
    "unchanged": "#dff0d8",
    "modified": "#fcf3cf",
    "disappeared": "#f5d5d5",
    "new": "#d9e8f7",
}
OTHER_COLOUR = "#eeeeee"
BOX_COLOUR = "#d62728"
TARGET_COLOUR = "#1f77b4"
#: alignment rows drawn per model in the figure (the page shows all)
MAX_STEPS = 14
#: longest image side (pixels) drawn in the figure and embedded in the page
MAX_SIDE = 768
FIG_WIDTH = 12.0
IMAGE_HEIGHT = 3.6
HEADER_HEIGHT = 0.55
COLUMN_HEIGHT = 0.24
ROW_HEIGHT = 0.34
MODEL_GAP = 0.18
#: characters per line of a step in the figure, and lines kept
WRAP = 96
LINES = 2
FONT = 6.5

_TXT: dict[str, Any] = {"parse_math": False}


# --------------------------------------------------------------------------- data


def masking_figure_names(spec: Mapping[str, Any]) -> list[str]:
    """The file stems :func:`write_masking_figures` writes (each as .png, .pdf, .html)."""
    return [f"example{i}" for i in range(1, int(spec.get("examples") or 0) + 1)]


def _box(value: Any) -> tuple[float, float, float, float] | None:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 4:
        return None
    try:
        x0, y0, x1, y1 = (float(v) for v in value)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
        return None
    return x0, y0, x1, y1


def _load(path: Any) -> tuple[Image.Image | None, float, str]:
    """(RGB image scaled to at most MAX_SIDE, scale factor, error text)."""
    if not path:
        return None, 1.0, "no image path"
    try:
        with Image.open(path) as im:
            img = im.convert("RGB")
    except (OSError, ValueError) as exc:
        return None, 1.0, f"cannot read {os.fspath(path)}: {exc.__class__.__name__}"
    scale = min(1.0, MAX_SIDE / max(img.size))
    if scale < 1.0:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.resize(size, Image.Resampling.LANCZOS)
    return img, scale, ""


def _boxes(row: Mapping[str, Any]) -> list[tuple[tuple[float, float, float, float], str, bool]]:
    """(box, colour, dashed): the filled box; for a random mask also the premise's box."""
    out = []
    box = _box(row.get("box"))
    if box:
        out.append((box, BOX_COLOUR, False))
    target = _box(row.get("target_box"))
    if target and row.get("region") == "random" and target != box:
        out.append((target, TARGET_COLOUR, True))
    return out


def _wrap(text: str, width: int = WRAP, lines: int = LINES) -> str:
    parts = textwrap.wrap(printable(text), width) or [""]
    if len(parts) > lines:
        parts = parts[:lines]
        parts[-1] = parts[-1][: width - 1].rstrip() + "\u2026"
    return "\n".join(parts)


def _sim(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "\u2013"
    return f"{v:.2f}" if math.isfinite(v) else "\u2013"


def _step(steps: Any, idx: Any) -> str:
    if not isinstance(idx, int) or isinstance(idx, bool):
        return ""
    if not isinstance(steps, list) or not 0 <= idx < len(steps):
        return f"{idx + 1}. (missing)"
    return f"{idx + 1}. {' '.join(str(steps[idx]).split())}"


def _alignment(row: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(original step, status, masked step, similarity) per alignment entry."""
    out = []
    for a in row.get("alignment") or []:
        if not isinstance(a, Mapping):
            continue
        out.append(
            (
                _step(row.get("original_steps"), a.get("original")),
                str(a.get("status") or ""),
                _step(row.get("masked_steps"), a.get("masked")),
                _sim(a.get("similarity")),
            )
        )
    return out


def _flags(row: Mapping[str, Any]) -> str:
    if row.get("error") not in (None, ""):
        return f"not compared: {row.get('error')}"
    attribution = str(row.get("region_attribution") or "")
    return (
        f"step disrupted: {fmt_yes_no(row.get('step_disrupted'))} \u00b7 answer flipped: "
        f"{fmt_yes_no(row.get('answer_flipped'))} (similarity {_sim(row.get('answer_similarity'))})"
        f" \u00b7 step similarity: {_sim(row.get('step_similarity'))} \u00b7 region "
        f"attribution: {attribution.title() if attribution else chr(0x2013)} \u00b7 "
        f"hallucination: {fmt_yes_no(row.get('hallucinated'))}"
    )


# --------------------------------------------------------------------------- figure


def _image_panel(ax, img: Image.Image | None, scale: float, error: str, row, title: str) -> None:
    ax.set_title(title, fontsize=8, **_TXT)
    ax.set_xticks([])
    ax.set_yticks([])
    if img is None:
        ax.set_facecolor("0.9")
        ax.text(
            0.5,
            0.5,
            _wrap(error, 50, 3),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=7,
            color="firebrick",
            **_TXT,
        )
        return
    ax.imshow(np.asarray(img), interpolation="nearest")
    for (x0, y0, x1, y1), colour, dashed in _boxes(row):
        ax.add_patch(
            Rectangle(
                (x0 * scale - 0.5, y0 * scale - 0.5),
                (x1 - x0) * scale,
                (y1 - y0) * scale,
                fill=False,
                edgecolor=colour,
                linewidth=1.6,
                linestyle="--" if dashed else "-",
            )
        )


def _block_height(n_rows: int) -> float:
    return HEADER_HEIGHT + COLUMN_HEIGHT + ROW_HEIGHT * max(n_rows, 1) + MODEL_GAP


def example_figure(
    i: int, sample_id: str, condition: str, models: list[tuple[str, Mapping[str, Any]]]
) -> Figure:
    """Figure of one example: both images with the boxes, then each model's alignment."""
    first = models[0][1]
    blocks = []
    for name, row in models:
        align = _alignment(row)
        shown = align[:MAX_STEPS]
        more = len(align) - len(shown)
        blocks.append((name, row, shown, more))
    title_lines = _title_lines(i, sample_id, condition, first)
    top = 0.22 * len(title_lines) + 0.2
    legend_h = 0.3
    body = sum(_block_height(len(s) + (1 if m else 0)) for _, _, s, m in blocks)
    height = top + IMAGE_HEIGHT + legend_h + body + 0.1
    fig = Figure(figsize=(FIG_WIDTH, round(height, 2)), dpi=DPI)
    fig.text(
        0.5,
        1 - 0.1 / height,
        "\n".join(title_lines),
        ha="center",
        va="top",
        fontsize=8.5,
        linespacing=1.4,
        **_TXT,
    )
    _draw_images(fig, first, height, top)

    # alignment blocks: one axes in inch coordinates (y down from the top)
    ax = fig.add_axes((0.03, 0.1 / height, 0.94, body / height))
    ax.set_xlim(0, 1)
    ax.set_ylim(body, 0)
    ax.set_axis_off()
    y = 0.0
    for name, row, shown, more in blocks:
        y = _draw_block(ax, y, name, row, shown, more) + MODEL_GAP
    return fig


def _title_lines(i: int, sample_id: str, condition: str, first: Mapping[str, Any]) -> list[str]:
    """The title of an example figure: the example, its premise and its question."""
    region = str(first.get("region") or "")
    question = str(first.get("question") or "")
    title_lines = [f"Example {i}: {sample_id} \u2014 {region or 'masked'} masking ({condition})"]
    premise_idx = first.get("premise_index")
    vp = f"VP{premise_idx + 1}" if isinstance(premise_idx, int) else "premise"
    title_lines.append(clip_text(f"{vp}: \u201c{first.get('premise') or ''}\u201d", 150))
    if question:
        title_lines.append(clip_text(f"Question: {question}", 150))
    return title_lines


def _draw_images(fig: Figure, first: Mapping[str, Any], height: float, top: float) -> None:
    """The original and the masked image below the title (``top`` inches), and the
    legend of the boxes and step colours under them."""
    img_bottom = (height - top - IMAGE_HEIGHT) / height
    for k, (key, label) in enumerate((("image", "Original"), ("masked_image", "Masked"))):
        ax = fig.add_axes((0.03 + 0.485 * k, img_bottom, 0.455, IMAGE_HEIGHT / height))
        img, scale, err = _load(first.get(key))
        _image_panel(ax, img, scale, err, first, f"({'ab'[k]}) {label} image")
    legend = "red: the masked (filled) box"
    if any(c == TARGET_COLOUR for _, c, _ in _boxes(first)):
        legend += "; dashed blue: the premise's annotated box"
    legend += ".   Step status: " + ", ".join(STATUS_COLOURS)
    fig.text(
        0.5,
        (height - top - IMAGE_HEIGHT - 0.12) / height,
        legend,
        ha="center",
        va="top",
        fontsize=7,
        color="0.3",
        **_TXT,
    )


#: the alignment table's columns: (x, header)
_ALIGN_COLUMNS = ((0.0, "Original step"), (0.44, "Status"), (0.53, "Masked step"), (0.955, "Sim."))


def _draw_block(
    ax, y: float, name: str, row: Mapping[str, Any], shown: list[tuple], more: int
) -> float:
    """One model's block from ``y`` (inches down): its name, answers and flags, then
    the alignment rows shown (``more`` cut ones named); returns where it ends."""
    ax.text(0.0, y + 0.04, name, fontsize=8, fontweight="bold", va="top", **_TXT)
    answers = (
        f"answer: \u201c{clip_text(row.get('original_answer'), 60)}\u201d \u2192 "
        f"\u201c{clip_text(row.get('masked_answer'), 60)}\u201d"
    )
    ax.text(
        0.0,
        y + 0.24,
        clip_text(f"{answers}   |   {_flags(row)}", 230),
        fontsize=FONT,
        va="top",
        color="0.15",
        **_TXT,
    )
    y += HEADER_HEIGHT
    for cx, label in _ALIGN_COLUMNS:
        ax.text(cx + 0.004, y + 0.03, label, fontsize=FONT, fontweight="bold", va="top", **_TXT)
    y += COLUMN_HEIGHT
    entries = list(shown)
    if not entries:
        entries = [("(no aligned steps)", "", "", "")]
    if more:
        entries.append((f"\u2026 {more} more aligned step(s): see the HTML page", "", "", ""))
    for orig, status, masked, sim in entries:
        ax.add_patch(
            Rectangle(
                (0.0, y + 0.02),
                1.0,
                ROW_HEIGHT - 0.04,
                facecolor=STATUS_COLOURS.get(status, OTHER_COLOUR),
                edgecolor="none",
            )
        )
        mid = y + ROW_HEIGHT / 2
        kw = dict(fontsize=FONT, va="center", linespacing=1.15, **_TXT)
        ax.text(0.004, mid, _wrap(orig), **kw)
        ax.text(0.444, mid, status, **kw)
        ax.text(0.534, mid, _wrap(masked), **kw)
        ax.text(0.959, mid, sim, **kw)
        y += ROW_HEIGHT
    return y


def placeholder_figure(i: int, k: int) -> Figure:
    """A figure saying there is no i-th example (only k compared samples)."""
    fig = Figure(figsize=(6.0, 1.6), dpi=DPI)
    fig.text(
        0.5,
        0.5,
        placeholder_text(i, k),
        ha="center",
        va="center",
        fontsize=10,
        color="firebrick",
        **_TXT,
    )
    return fig


def placeholder_text(i: int, k: int) -> str:
    return f"no example {i}: only {k} compared samples"


# --------------------------------------------------------------------------- page


def _data_uri(img: Image.Image | None, row: Mapping[str, Any], scale: float) -> str:
    if img is None:
        return ""
    img = img.copy()
    draw = ImageDraw.Draw(img)
    width = max(2, round(max(img.size) / 250))
    for (x0, y0, x1, y1), colour, dashed in _boxes(row):
        rect = [x0 * scale, y0 * scale, x1 * scale - 1, y1 * scale - 1]
        if dashed:
            _dashed_rect(draw, rect, colour, width)
        else:
            draw.rectangle(rect, outline=colour, width=width)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _dashed_rect(draw: ImageDraw.ImageDraw, rect: list[float], colour: str, width: int) -> None:
    x0, y0, x1, y1 = rect
    dash = 3 * width + 4
    for a, b, horizontal, fixed in (
        (x0, x1, True, y0),
        (x0, x1, True, y1),
        (y0, y1, False, x0),
        (y0, y1, False, x1),
    ):
        t = a
        while t < b:
            e = min(t + dash, b)
            if horizontal:
                draw.line([(t, fixed), (e, fixed)], fill=colour, width=width)
            else:
                draw.line([(fixed, t), (fixed, e)], fill=colour, width=width)
            t += 2 * dash


_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1300px; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
.images { display: flex; gap: 1em; flex-wrap: wrap; }
figure { margin: 0; } figure img { max-width: 600px; max-height: 480px; border: 1px solid #999; }
figcaption { font-size: 0.85em; color: #555; }
.missing { color: #b22222; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; } dd { margin: 0; }
table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; text-align: left; }
td.num { text-align: right; white-space: nowrap; }
.key span { padding: 0.1em 0.5em; margin-right: 0.4em; }
""" + "".join(f"tr.{s} td, .key .{s} {{ background: {c}; }}\n" for s, c in STATUS_COLOURS.items())


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _box_text(value: Any) -> str:
    box = _box(value)
    return "\u2013" if box is None else "(" + ", ".join(f"{v:g}" for v in box) + ")"


def _steps_table(row: Mapping[str, Any]) -> str:
    head = (
        "<tr><th>#</th><th>Original step</th><th>Status</th><th>#</th><th>Masked step</th>"
        "<th>Similarity</th></tr>"
    )
    lines = ['<table class="alignment">', head]
    orig_steps = row.get("original_steps") or []
    masked_steps = row.get("masked_steps") or []
    for a in row.get("alignment") or []:
        if not isinstance(a, Mapping):
            continue
        status = str(a.get("status") or "")
        cls = status if status in STATUS_COLOURS else "other"
        i, j = a.get("original"), a.get("masked")
        o = orig_steps[i] if isinstance(i, int) and 0 <= i < len(orig_steps) else ""
        m = masked_steps[j] if isinstance(j, int) and 0 <= j < len(masked_steps) else ""
        lines.append(
            f'<tr class="{_e(cls)}"><td class="num">{"" if i is None else _e(i + 1)}</td>'
            f"<td>{_e(o)}</td><td>{_e(status)}</td>"
            f'<td class="num">{"" if j is None else _e(j + 1)}</td><td>{_e(m)}</td>'
            f'<td class="num">{_e(_sim(a.get("similarity")))}</td></tr>'
        )
    if len(lines) == 2:
        lines.append('<tr><td colspan="6">(no aligned steps)</td></tr>')
    lines.append("</table>")
    return "\n".join(lines)


def example_page(
    i: int, sample_id: str, condition: str, models: list[tuple[str, Mapping[str, Any]]]
) -> str:
    """The self-contained HTML page of one example."""
    first = models[0][1]
    title = f"Example {i}: {sample_id}"
    body = [f"<h1>{_e(title)}</h1>", _page_images(first)]
    legend = "Red: the masked (filled) box."
    if any(c == TARGET_COLOUR for _, c, _ in _boxes(first)):
        legend += " Dashed blue: the premise's annotated box."
    body.append(f"<p>{_e(legend)}</p>")
    body.append(_definitions([(k, v) for k, v in _sample_facts(first, condition) if v]))
    body.append(
        '<p class="key">Step status: '
        + "".join(f'<span class="{s}">{_e(s)}</span>' for s in STATUS_COLOURS)
        + "</p>"
    )
    for name, row in models:
        body.append(f"<h2>{_e(name)}</h2>")
        if row.get("error") not in (None, ""):
            body.append(f'<p class="missing">Not compared: {_e(row.get("error"))}</p>')
        flags = [(k, v) for k, v in _model_facts(row) if v not in (None, "")]
        body.append(_definitions(flags))
        body.append(_steps_table(row))
    return _page(title, body)


def _definitions(items: Iterable[tuple[str, Any]]) -> str:
    """A definition list of (term, value) pairs, both escaped."""
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items) + "</dl>"


def _page_images(first: Mapping[str, Any]) -> str:
    """The original and the masked image with their boxes (or why one is missing)."""
    figs = []
    for key, label in (("image", "Original image"), ("masked_image", "Masked image")):
        img, scale, err = _load(first.get(key))
        uri = _data_uri(img, first, scale)
        if uri:
            inner = f'<img src="{uri}" alt="{_e(label)}">'
        else:
            inner = f'<p class="missing">{_e(err)}</p>'
        figs.append(
            f"<figure>{inner}<figcaption>{_e(label)}: {_e(first.get(key))}</figcaption></figure>"
        )
    return '<div class="images">' + "".join(figs) + "</div>"


def _sample_facts(first: Mapping[str, Any], condition: str) -> list[tuple[str, Any]]:
    """What the page says of the example itself: dataset, condition, question, premise,
    boxes and what the mask covers."""
    region = str(first.get("region") or "")
    idx = first.get("premise_index")
    vp = f"VP{idx + 1}" if isinstance(idx, int) and not isinstance(idx, bool) else ""
    return [
        ("Dataset", first.get("dataset")),
        ("Condition", f"{condition} ({region} masking)" if region else condition),
        ("Variant", first.get("variant_id")),
        ("Question", first.get("question") or "(not recorded in the compared rows)"),
        ("Premise", f"{vp}: {first.get('premise') or ''}" if vp else first.get("premise")),
        ("Masked box", _box_text(first.get("box"))),
        ("Premise box", _box_text(first.get("target_box"))),
        (
            "Mask covers",
            "; ".join(map(str, first.get("masked_content") or [])) or "nothing annotated",
        ),
    ]


def _model_facts(row: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """What the page says of one model's compared row: answers, flags, the steps using
    the premise, the region attribution and the hallucination verdict."""
    deps = [d + 1 for d in row.get("dependent_steps") or [] if isinstance(d, int)]
    attribution = str(row.get("region_attribution") or "")
    return [
        ("Original answer", row.get("original_answer")),
        ("Masked answer", row.get("masked_answer")),
        (
            "Answer flipped",
            f"{fmt_yes_no(row.get('answer_flipped'))} (similarity "
            f"{_sim(row.get('answer_similarity'))})",
        ),
        (
            "Step disrupted",
            f"{fmt_yes_no(row.get('step_disrupted'))} (unchanged {row.get('n_unchanged', 0)}, "
            f"modified {row.get('n_modified', 0)}, disappeared {row.get('n_disappeared', 0)}, "
            f"new {row.get('n_new', 0)}; mean similarity {_sim(row.get('step_similarity'))})",
        ),
        ("Steps using the premise", ", ".join(map(str, deps)) or "none"),
        ("Region attribution", attribution.title() or "\u2013"),
        (
            "Hallucination",
            fmt_yes_no(row.get("hallucinated"))
            + (
                f" (judge: {row.get('hallucination_judge')})"
                if row.get("hallucination_judge")
                else ""
            ),
        ),
        ("Hallucination evidence", row.get("hallucination_evidence")),
        ("Hallucination reason", row.get("hallucination_reason")),
        ("Judge error", row.get("hallucination_error")),
    ]


def placeholder_page(i: int, k: int) -> str:
    text = placeholder_text(i, k)
    return _page(f"Example {i}", [f"<h1>Example {i}</h1>", f'<p class="missing">{_e(text)}</p>'])


# --------------------------------------------------------------------------- API


def masking_examples_views(
    rows: Sequence[Mapping[str, Any]], spec: Mapping[str, Any], only: str | None = None
) -> dict[str, tuple[Figure, str]]:
    """Every example by file stem (:func:`masking_figure_names`), or only the one named
    ``only``: its figure and its HTML page (a placeholder of both where there are fewer
    examples than asked for)."""
    masked_conditions(spec)  # validates the spec
    cond, k, examples = masking_examples(rows, spec)
    out: dict[str, tuple[Figure, str]] = {}
    with matplotlib.style.context("default"):
        for n, stem in enumerate(masking_figure_names(spec), start=1):
            if only is not None and stem != only:
                continue
            if n <= len(examples):
                sid, models = examples[n - 1]
                out[stem] = (
                    example_figure(n, sid, str(cond), models),
                    example_page(n, sid, str(cond), models),
                )
            else:
                out[stem] = (placeholder_figure(n, k), placeholder_page(n, k))
    return out


def write_masking_figures(
    compared_paths: Iterable[str | os.PathLike], spec: Mapping[str, Any], out_dir: str | Path
) -> list[Path]:
    """Write ``example{i}.png``, ``.pdf`` and ``.html`` for every name of
    :func:`masking_figure_names` under ``out_dir``; return the paths."""
    out_dir = Path(out_dir)
    paths: list[Path] = []
    with matplotlib.style.context("default"):
        for stem, (fig, page) in masking_examples_views(
            read_compared(compared_paths), spec
        ).items():
            paths += save_figure(fig, out_dir / stem)
            html_path = out_dir / f"{stem}.html"
            atomic_write_text(html_path, page)
            paths.append(html_path)
    return paths

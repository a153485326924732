"""Render one table as CSV, Markdown and LaTeX (booktabs), written atomically.

A :class:`Table` holds display strings only (numbers are formatted by the ``fmt_*``
helpers below, in the papers' style), optional header groups (a two-level column
MultiIndex: a spanning label over consecutive columns), optional row groups (a label line such as "Qwen2.5-VL family"
before consecutive rows; an empty label is a plain rule, e.g. before a "Mean" row) and
footnotes. A cell may be :class:`Linked`: its text plus the explorer fields of the
number it shows (metric, model, benchmark, condition ...). The formats are views of the
same cells:

* CSV: one header line; a header group prefixes its columns ("Reasoning: RR (%)"); row
  groups become a leading column (``row_group_column``) when any group has a label.
  ``pd.read_csv(path, dtype=str, keep_default_na=False)`` gives the cells back.
* Markdown: a pipe table (header groups prefixed as in the CSV, row groups as bold
  label rows), the caption above and the footnotes below it.
* LaTeX: a ``table`` float with a ``tabular`` using booktabs rules, ``\\multicolumn``
  header groups with ``\\cmidrule``, italic row-group lines and the footnotes as plain
  lines after the tabular. It needs no package but ``booktabs``.
* HTML (only when the table's folder under ``results/tables/`` is known): a standalone
  page (inline CSS, no script) with the caption, header groups as spanning cells, row
  groups as label rows and the footnotes.

With the folder, a :class:`Linked` cell links to the explorer filtered to that cell
(:func:`vlmrobust.report.explorer.links.cell_link`) in the Markdown and the HTML; CSV
and LaTeX never carry links.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from vlmrobust.core.io import atomic_write_text
from vlmrobust.metrics.index import is_missing
from vlmrobust.report.text import clip_text, printable

__all__ = [
    "write_tables",
    "clip_text",
    "printable",
    "DASH",
    "Linked",
    "Table",
    "cell_hrefs",
    "fmt_count",
    "fmt_gap_ci",
    "fmt_jaccard",
    "fmt_pct",
    "fmt_signed_pct",
    "grouped_frame",
    "is_missing",
    "latex_escape",
    "linked",
    "mean_present",
    "to_csv_text",
    "to_html",
    "to_latex",
    "to_markdown",
    "write_table",
]

#: What a table shows for a value that does not exist (with a footnote saying why).
DASH = "\u2013"


# ---------------------------------------------------------------------------
# Number formatting (values are fractions in [0, 1] unless said otherwise)
# ---------------------------------------------------------------------------


def fmt_yes_no(flag: Any) -> str:
    """Yes / No, or "–" for None."""
    return DASH if flag is None else ("Yes" if flag else "No")


def _round_half_away(x: float, digits: int) -> float:
    """Round half away from zero (46.65 -> 46.7), robust to binary noise (0.466*100)."""
    scale = 10**digits
    # A tiny relative nudge makes 0.4665*100 = 46.64999... round as the decimal reads.
    nudged = abs(x) * scale * (1 + 1e-12)
    return math.copysign(math.floor(nudged + 0.5) / scale, x)


def fmt_pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage without the sign: 0.466 -> "46.6"; NaN -> "–"."""
    if is_missing(value):
        return DASH
    return f"{_round_half_away(float(value) * 100, digits):.{digits}f}"


def fmt_signed_pct(value: Any, digits: int = 1) -> str:
    """A fractional difference as signed percentage points: 0.058 -> "+5.8"."""
    if is_missing(value):
        return DASH
    x = _round_half_away(float(value) * 100, digits)
    if x == 0:
        x = 0.0  # never "-0.0"
    return f"{x:+.{digits}f}"


def fmt_gap_ci(value: Any, low: Any = None, high: Any = None, digits: int = 1) -> str:
    """A gap with its confidence interval: "+5.8 [+5.2, +6.4]" (no CI -> "+5.8")."""
    if is_missing(value):
        return DASH
    text = fmt_signed_pct(value, digits)
    if is_missing(low) or is_missing(high):
        return text
    return f"{text} [{fmt_signed_pct(low, digits)}, {fmt_signed_pct(high, digits)}]"


def fmt_jaccard(value: Any) -> str:
    """A similarity in [0, 1] with three decimals and no leading zero: 0.566 -> ".566"."""
    if is_missing(value):
        return DASH
    text = f"{_round_half_away(float(value), 3):.3f}"
    if text.startswith("0."):
        return text[1:]
    if text.startswith("-0."):
        return "-" + text[2:]
    return text


def fmt_count(value: Any) -> str:
    """A count, thousands as "k" and millions as "M": 506, 10.1k, 1.2M."""
    if is_missing(value):
        return DASH
    n = float(value)
    if abs(n) < 1000:
        return str(int(_round_half_away(n, 0)))
    k = _round_half_away(n / 1000, 1)
    if abs(k) < 1000:
        return f"{k:.1f}k"
    return f"{_round_half_away(n / 1e6, 1):.1f}M"


def mean_present(values: Iterable[float]) -> float:
    """The mean of the values that exist (NaN when none does)."""
    vals = [v for v in values if not is_missing(v)]
    return sum(vals) / len(vals) if vals else math.nan


# ---------------------------------------------------------------------------
# Linked cells
# ---------------------------------------------------------------------------


class Linked(str):
    """A cell's display text that stands for one number the explorer can recompute.

    ``link`` holds the fields of :func:`vlmrobust.report.explorer.links.cell_link` but
    the folder and the shown text (known when the table is written): ``metric``,
    ``model``, ``benchmark``, ``condition``, optionally ``table`` (default: the file
    stem) and extra keys (``filter.<param>``, ``errors``). It is a ``str``, so every
    check and view of a :class:`Table` takes it as its text; keep the frame's dtype
    ``object`` (:func:`grouped_frame` does) or pandas turns it into a plain string.
    """

    link: dict[str, str]

    def __new__(cls, text: str, **link: Any) -> Linked:
        obj = super().__new__(cls, text)
        obj.link = {str(k): str(v) for k, v in link.items()}
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_linked, (str(self), dict(self.link)))


def _make_linked(text: str, link: dict[str, str]) -> Linked:
    return Linked(text, **link)


def linked(text: str, metric: str, model: str, benchmark: str, condition: str, **extra: Any) -> str:
    """``text`` as a :class:`Linked` cell, or unchanged when it shows no value ("–")."""
    if text == DASH or not text:
        return text
    return Linked(
        text, metric=metric, model=model, benchmark=benchmark, condition=condition, **extra
    )


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


def grouped_frame(rows: list[list[str]], columns: list[tuple[str, str]]) -> pd.DataFrame:
    """The cells of a table whose columns are (header group, label) pairs: a two-level
    column index when any column has a group, plain labels otherwise."""
    if any(g for g, _ in columns):
        cols: Any = pd.MultiIndex.from_tuples(columns)
    else:
        cols = [c for _, c in columns]
    return pd.DataFrame(rows, columns=cols, dtype=object)


@dataclass(frozen=True)
class Table:
    """Display cells plus the structure the three formats draw.

    ``data`` columns are either plain names or a two-level MultiIndex
    ``(header group, name)``: consecutive columns with the same non-empty group get one
    spanning header (an empty group leaves a column ungrouped). ``row_groups``:
    ``(label, n_rows)`` pairs covering every row in order (an empty label draws only a
    rule before the block, e.g. before a "Mean" row). ``stub_columns``: the leading
    label columns (left-aligned); the others are aligned right when all their cells look
    like numbers.
    """

    data: pd.DataFrame
    row_groups: tuple[tuple[str, int], ...] = ()
    footnotes: tuple[str, ...] = ()
    caption: str = ""
    label: str = ""
    row_group_column: str = "Group"
    stub_columns: int = 1

    def __post_init__(self) -> None:
        data = self.data
        name = self.label or self.caption
        cols = data.columns
        if isinstance(cols, pd.MultiIndex) and cols.nlevels != 2:
            raise ValueError(f"table {name!r}: column MultiIndex must have 2 levels (group, name)")
        flat = self.flat_columns()
        if len(set(flat)) != len(flat):
            raise ValueError(f"table {name!r}: duplicate columns {flat}")
        for j, col in enumerate(flat):
            for pos, cell in enumerate(data.iloc[:, j].tolist()):
                if not isinstance(cell, str):
                    raise TypeError(
                        f"table {name!r}: cell in column {col!r}, row {pos} is {cell!r} "
                        f"({type(cell).__name__}); format it to a string first (the fmt_* "
                        "helpers show a missing value as '\u2013')"
                    )
        if self.row_groups:
            counts = [int(n) for _, n in self.row_groups]
            if any(n < 0 for n in counts) or sum(counts) != len(data):
                raise ValueError(
                    f"table {name!r}: row group sizes {counts} must add up to the {len(data)} rows"
                )
        if not 0 <= self.stub_columns <= len(flat):
            raise ValueError(f"stub_columns={self.stub_columns} outside 0..{len(flat)}")

    # -- derived views -----------------------------------------------------------------

    def _pairs(self) -> list[tuple[str, str]]:
        cols = self.data.columns
        if isinstance(cols, pd.MultiIndex):
            return [(str(g), str(c)) for g, c in cols.tolist()]
        return [("", str(c)) for c in cols]

    @property
    def columns(self) -> list[str]:
        """The leaf column names (without header group)."""
        return [c for _, c in self._pairs()]

    @property
    def header_groups(self) -> list[tuple[str, int]]:
        """Consecutive runs ``(group, span)``; empty when no column has a group."""
        pairs = self._pairs()
        if not any(g for g, _ in pairs):
            return []
        runs: list[tuple[str, int]] = []
        for group, _ in pairs:
            if runs and group and runs[-1][0] == group:
                runs[-1] = (group, runs[-1][1] + 1)
            else:
                runs.append((group, 1))
        return runs

    def flat_columns(self) -> list[str]:
        """Column names with their header group as prefix ("Reasoning: RR (%)")."""
        return [f"{g}: {c}" if g else c for g, c in self._pairs()]

    def cells(self) -> list[list[str]]:
        return [list(map(str, row)) for row in self.data.itertuples(index=False, name=None)]

    def row_group_labels(self) -> list[str]:
        """The row-group label of every row ('' without groups)."""
        if not self.row_groups:
            return [""] * len(self.data)
        labels: list[str] = []
        for label, n in self.row_groups:
            labels.extend([label] * n)
        return labels

    def links(self) -> dict[tuple[int, int], Linked]:
        """The :class:`Linked` cells by (row position, column position)."""
        return {
            (i, j): cell
            for j in range(self.data.shape[1])
            for i, cell in enumerate(self.data.iloc[:, j].tolist())
            if isinstance(cell, Linked)
        }

    def has_labelled_row_groups(self) -> bool:
        return any(label for label, n in self.row_groups if n)

    def to_frame(self) -> pd.DataFrame:
        """The CSV view: flat column names, the row-group label as a leading column."""
        flat = self.flat_columns()
        frame = pd.DataFrame(self.cells(), columns=flat, dtype=object)
        if self.has_labelled_row_groups():
            if self.row_group_column in flat:
                raise ValueError(
                    f"row_group_column {self.row_group_column!r} clashes with a column name"
                )
            frame.insert(0, self.row_group_column, self.row_group_labels())
        return frame

    def alignments(self) -> list[str]:
        """'l' for stub and text columns, 'r' for columns of numbers."""
        out = []
        for j in range(len(self.columns)):
            cells = [c for c in self.data.iloc[:, j].tolist() if c]
            numeric = bool(cells) and all(_NUMBERISH.fullmatch(c) for c in cells)
            out.append("r" if j >= self.stub_columns and numeric else "l")
        return out

    def blocks(self) -> list[tuple[str, list[int]]]:
        """(label, row positions) per row group; one unlabelled block without groups."""
        if not self.row_groups:
            return [("", list(range(len(self.data))))]
        out = []
        pos = 0
        for label, n in self.row_groups:
            out.append((label, list(range(pos, pos + n))))
            pos += n
        return out


_NUMBERISH = re.compile(r"[+\-\u2212]?(\d[\d,]*(\.\d+)?|\.\d+)[kM%]?( \[[^\]]*\])?|\u2013|-|n/a")


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------


def to_csv_text(table: Table) -> str:
    """The table as CSV text (cells as displayed; footnotes are not part of the CSV)."""
    return table.to_frame().to_csv(index=False, lineterminator="\n")


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_link(text: str, href: str | None) -> str:
    if href is None:
        return _md_cell(text)
    label = _md_cell(text).replace("[", "\\[").replace("]", "\\]")
    return f"[{label}]({href})"


def cell_hrefs(table: Table, folder: str | None, name: str) -> dict[tuple[int, int], str]:
    """The explorer URL of every :class:`Linked` cell (by row and column position),
    relative to ``results/tables/<folder>/``; none without a folder. ``name``: the
    table's file stem (the ``table`` field unless the cell names its own)."""
    if not folder:
        return {}
    # imported here: the explorer package imports this module (clip_text)
    from vlmrobust.report.explorer.links import cell_link

    out = {}
    for pos, cell in table.links().items():
        fields = dict(cell.link)
        which = fields.pop("table", "") or name
        out[pos] = cell_link(folder, which, shown=str(cell), **fields)
    return out


def to_markdown(table: Table, folder: str | None = None, name: str = "") -> str:
    """A pipe table with the caption above and the footnotes below; with the table's
    ``folder`` (and file stem ``name``) its :class:`Linked` cells link to the explorer."""
    header = [_md_cell(c) for c in table.flat_columns()]
    aligns = table.alignments()
    cells = table.cells()
    hrefs = cell_hrefs(table, folder, name)
    rows: list[list[str]] = []
    for label, positions in table.blocks():
        if label and positions:
            rows.append([f"**{_md_cell(label)}**"] + [""] * (len(header) - 1))
        for pos in positions:
            rows.append([_md_link(c, hrefs.get((pos, j))) for j, c in enumerate(cells[pos])])
    widths = [max([len(h), 3] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if a == "r" else c.ljust(w)
            for c, w, a in zip(cells, widths, aligns, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [
        ("-" * (w - 1) + ":") if a == "r" else (":" + "-" * (w - 1))
        for w, a in zip(widths, aligns, strict=True)
    ]
    parts = []
    if table.caption:
        parts += [_md_inline(table.caption), ""]
    parts.append(line(header))
    parts.append("| " + " | ".join(rule) + " |")
    parts += [line(r) for r in rows]
    if table.footnotes:
        parts += ["", "Notes:", ""]
        parts += [f"- {_md_inline(note)}" for note in table.footnotes]
    return "\n".join(parts) + "\n"


def _md_inline(text: str) -> str:
    return text.replace("\n", " ")


# ---------------------------------------------------------------------------
# LaTeX
# ---------------------------------------------------------------------------

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    # Non-ASCII symbols that pdflatex's default utf8 input does not define.
    "\u2013": "--",
    "\u2014": "---",
    "\u2212": "$-$",
    "\u2192": r"$\rightarrow$",
    "\u2190": r"$\leftarrow$",
    "\u2191": r"$\uparrow$",
    "\u2193": r"$\downarrow$",
    "\u00d7": r"$\times$",
    "\u00b1": r"$\pm$",
    "\u2264": r"$\leq$",
    "\u2265": r"$\geq$",
    "\u2248": r"$\approx$",
    "\u00b7": r"$\cdot$",
    "\u2026": r"\ldots{}",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))
# A sign that starts a number ("+5.8", "[-0.4"): set as a math sign, not a hyphen.
_SIGNED_NUMBER = re.compile(r"(^|[\s\[(])([+-])(?=\d|\.\d)")


def latex_escape(text: str) -> str:
    """Escape text for LaTeX; leading signs of numbers become math signs ($+$5.8)."""
    text = _SIGNED_NUMBER.sub(lambda m: f"{m.group(1)}\x00{m.group(2)}\x01", str(text))
    text = _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], text)
    return text.replace("\x00", "$").replace("\x01", "$")


def _latex_cell(text: str) -> str:
    out = latex_escape(text)
    # "\\" looks ahead for "[" or "*": a row must not start with either.
    if out.startswith(("[", "*")):
        out = "{}" + out
    return out


def to_latex(table: Table) -> str:
    """A booktabs ``table`` float; footnotes as plain lines after the tabular."""
    ncols = len(table.columns)
    spec = "".join(table.alignments())
    cells = table.cells()
    lines = [
        "% Generated by vlmrobust.report.tables (edit the code, not this file).",
        "% Requires \\usepackage{booktabs}.",
        "\\begin{table}[htbp]",
        "\\centering",
    ]
    if table.caption:
        lines.append(f"\\caption{{{latex_escape(table.caption)}}}")
    if table.label:
        lines.append(f"\\label{{{_latex_label(table.label)}}}")
    lines.append(f"\\begin{{tabular}}{{{spec}}}")
    lines.append("\\toprule")
    if table.header_groups:
        heads, rules = [], []
        pos = 1
        for label, span in table.header_groups:
            if label:
                heads.append(f"\\multicolumn{{{span}}}{{c}}{{{latex_escape(label)}}}")
                rules.append(f"\\cmidrule(lr){{{pos}-{pos + span - 1}}}")
            else:
                heads.extend([""] * span)
            pos += span
        lines.append(" & ".join(heads) + " \\\\")
        if rules:
            lines.append(" ".join(rules))
    lines.append(" & ".join(_latex_cell(c) for c in table.columns) + " \\\\")
    for label, positions in table.blocks():
        if not positions and not label:
            continue
        lines.append("\\midrule")
        if label:
            lines.append(f"\\multicolumn{{{ncols}}}{{l}}{{\\textit{{{latex_escape(label)}}}}} \\\\")
        for pos in positions:
            lines.append(" & ".join(_latex_cell(c) for c in cells[pos]) + " \\\\")
    lines.append("\\bottomrule")
    lines.append("\\end{tabular}")
    if table.footnotes:
        lines.append("\\par\\smallskip")
        lines.append("{\\raggedright\\footnotesize")
        lines += [f"{latex_escape(note)}\\par" for note in table.footnotes]
        lines.append("}")
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def _latex_label(label: str) -> str:
    # Labels are keys, not text: keep a safe character set.
    return re.sub(r"[^A-Za-z0-9:._-]", "-", label)


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------

_HTML_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem;
  color: #1f2328; background: #fff; }
table { border-collapse: collapse; font-size: 0.9rem; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: 0.6rem;
  max-width: 60rem; }
th, td { padding: 0.25rem 0.6rem; white-space: nowrap; }
thead tr:last-child th { border-bottom: 2px solid #1f2328; }
thead tr.groups th { border-bottom: 1px solid #8c959f; text-align: center; }
thead { border-top: 2px solid #1f2328; }
tbody { border-bottom: 2px solid #1f2328; }
tbody tr.group th { text-align: left; font-style: italic; font-weight: 500;
  border-top: 1px solid #8c959f; padding-top: 0.4rem; }
tbody tr.rule td { border-top: 1px solid #8c959f; }
.l { text-align: left; }
.r { text-align: right; font-variant-numeric: tabular-nums; }
a { color: #0550ae; text-decoration: none; }
a:hover { text-decoration: underline; }
.notes { font-size: 0.8rem; color: #57606a; max-width: 60rem; padding-left: 1.2rem; }
""".strip()


def _html_head_rows(table: Table) -> list[str]:
    esc = html.escape
    aligns = table.alignments()
    rows = []
    if table.header_groups:
        cells = [
            f'<th colspan="{span}" scope="colgroup">{esc(label)}</th>'
            if label
            else f'<th colspan="{span}"></th>'
            for label, span in table.header_groups
        ]
        rows.append('<tr class="groups">' + "".join(cells) + "</tr>")
    leaves = [
        f'<th class="{a}" scope="col">{esc(c)}</th>'
        for c, a in zip(table.columns, aligns, strict=True)
    ]
    rows.append("<tr>" + "".join(leaves) + "</tr>")
    return rows


def _html_body_rows(table: Table, hrefs: Mapping[tuple[int, int], str]) -> list[str]:
    esc = html.escape
    aligns = table.alignments()
    cells = table.cells()
    ncols = len(table.columns)
    rows = []
    for b, (label, positions) in enumerate(table.blocks()):
        if label and positions:
            rows.append(
                f'<tr class="group"><th colspan="{ncols}" scope="rowgroup">{esc(label)}</th></tr>'
            )
        for k, pos in enumerate(positions):
            out = []
            for j, (text, a) in enumerate(zip(cells[pos], aligns, strict=True)):
                href = hrefs.get((pos, j))
                body = esc(text)
                if href is not None:
                    tip = "the samples behind this number in the explorer"
                    body = f'<a href="{esc(href)}" title="{tip}">{body}</a>'
                out.append(f'<td class="{a}">{body}</td>')
            rule = b > 0 and k == 0 and not label
            rows.append(('<tr class="rule">' if rule else "<tr>") + "".join(out) + "</tr>")
    return rows


def to_html(table: Table, folder: str | None = None, name: str = "") -> str:
    """A standalone HTML page of the table (inline CSS, no script, nothing external);
    with the table's ``folder`` (and file stem ``name``) its :class:`Linked` cells
    link to the explorer."""
    esc = html.escape
    title = table.caption or table.label or name or "Table"
    hrefs = cell_hrefs(table, folder, name)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<!-- Generated by vlmrobust.report.tables (edit the code, not this file). -->",
        f"<title>{esc(title)}</title>",
        f"<style>\n{_HTML_STYLE}\n</style>",
        "</head>",
        "<body>",
        "<table>",
    ]
    if table.caption:
        parts.append(f"<caption>{esc(table.caption)}</caption>")
    parts += ["<thead>", *_html_head_rows(table), "</thead>"]
    parts += ["<tbody>", *_html_body_rows(table, hrefs), "</tbody>", "</table>"]
    if table.footnotes:
        parts.append('<ul class="notes">')
        parts += [f"<li>{esc(note)}</li>" for note in table.footnotes]
        parts.append("</ul>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def write_table(table: Table, stem: str | Path, folder: str | None = None) -> list[Path]:
    """Write ``stem``.csv, .md and .tex atomically; return their paths. With ``folder``
    (the table's folder under ``results/tables/``), the Markdown links its
    :class:`Linked` cells to the explorer and ``stem``.html is written too."""
    stem = Path(stem)
    renders: list[tuple[str, Any]] = [
        (".csv", to_csv_text),
        (".md", lambda t: to_markdown(t, folder, stem.name)),
        (".tex", to_latex),
    ]
    if folder:
        renders.append((".html", lambda t: to_html(t, folder, stem.name)))
    paths = []
    for suffix, render in renders:
        path = stem.with_name(stem.name + suffix)
        atomic_write_text(path, render(table))
        paths.append(path)
    return paths


def write_tables(
    tables: Mapping[str, Table], out_dir: str | Path, folder: str | None = None
) -> list[Path]:
    """Every table of ``tables`` (file stem -> Table) under ``out_dir``, as
    :func:`write_table` writes it (.csv/.md/.tex, and .html with ``folder``)."""
    return [
        path
        for stem, table in tables.items()
        for path in write_table(table, Path(out_dir) / stem, folder)
    ]

"""Table cells link to the explorer (issue 48): the exact URL of an accuracy / RR cell in
the Markdown and the HTML, none on a dash, one more ``../`` per nested folder, CSV and
LaTeX unchanged by the links, and the Idis group filters of an accuracy cell."""

from __future__ import annotations

import math
import pickle
from html.parser import HTMLParser
from urllib.parse import parse_qsl

import pandas as pd
import pytest

from vlmrobust.metrics.core import METRIC_COLUMNS
from vlmrobust.metrics.idis import EXTRA_COLUMNS
from vlmrobust.report.explorer.links import cell_link, explorer_href
from vlmrobust.report.tables.corruption import corruption_tables, write_corruption_tables
from vlmrobust.report.tables.distraction import distraction_tables
from vlmrobust.report.tables.idis import idis_tables
from vlmrobust.report.tables.render import (
    DASH,
    Linked,
    Table,
    grouped_frame,
    linked,
    to_html,
    to_markdown,
    write_table,
)

NAN = math.nan
SPEC = {
    "models": {
        "q25": {"name": "Qwen<2.5> & VL", "family": "qwen", "role": "base", "base": None},
        "r1": {"name": "R1", "family": "qwen", "role": "reasoning", "base": "q25"},
    },
    "model_order": ["q25", "r1"],
    "datasets": {"mathvista": {"group": "reasoning", "display": "MathVista"}},
    "clean_condition": "clean",
    "perturbed_conditions": ["corrupt"],
}
T1 = (
    "cell=1&study=corruption&table=table1&metric=accuracy&model=q25&bench=reasoning"
    "&condition=clean&shown=46.6"
)


def row(metric, model, benchmark, condition, value, **kw):
    out = {c: "" for c in METRIC_COLUMNS}
    out.update(metric=metric, model=model, benchmark=benchmark, condition=condition)
    out.update(severity=NAN, value=value, ci_low=NAN, ci_high=NAN, n=100.0)
    out.update(kw)
    return out


def corruption_metrics() -> pd.DataFrame:
    rows = []
    for bench in ("mathvista", "reasoning"):
        rows += [
            row("accuracy", "q25", bench, "clean", 0.466),
            row("accuracy", "q25", bench, "corrupt", 0.402),
            row("rr", "q25", bench, "corrupt", 0.863),
            row("accuracy", "r1", bench, "clean", 0.0),
            row("accuracy", "r1", bench, "corrupt", 0.0),
            row("rr", "r1", bench, "corrupt", NAN, note="clean accuracy 0"),
        ]
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def md_cells(md: str, first: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith(f"| {first}"))
    return [c.strip() for c in line.strip("|").split(" | ")]


class Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.append(dict(attrs)["href"])


def hrefs_of(page: str) -> list[str]:
    parser = Hrefs()
    parser.feed(page)
    return parser.hrefs


def test_cell_link_format_and_folders():
    url = cell_link("corruption", "table1", "accuracy", "q25", "reasoning", "clean", "46.6")
    assert url == f"../../explorer/index.html#{T1}"
    nested = cell_link(
        "distraction/demo-distract", "table3", "rr", "m", "d", "distracted", "91.2 [1, 2]",
        errors="exclude", **{"filter.semantics": "aligned", "filter.kind": "visual"},
    )  # fmt: skip
    page, fragment = nested.split("#")
    assert page == "../../../explorer/index.html"
    assert fragment.endswith("&shown=91.2+%5B1%2C+2%5D&errors=exclude&filter.kind=visual"
                             "&filter.semantics=aligned")  # fmt: skip
    assert [k for k, _ in parse_qsl(fragment)][:8] == [
        "cell", "study", "table", "metric", "model", "bench", "condition", "shown"
    ]  # fmt: skip
    for bad in ("", "/abs", "a/../b"):
        with pytest.raises(ValueError):
            explorer_href(bad)


def test_linked_cell_is_a_string_and_a_dash_gets_no_link():
    cell = linked("46.6", "accuracy", "q25", "reasoning", "clean")
    assert isinstance(cell, Linked) and cell == "46.6" and type(str(cell)) is str
    assert cell.link == {
        "metric": "accuracy", "model": "q25", "benchmark": "reasoning", "condition": "clean"
    }  # fmt: skip
    assert pickle.loads(pickle.dumps(cell)).link == cell.link
    assert type(linked(DASH, "rr", "q25", "reasoning", "corrupt")) is str
    table = Table(data=grouped_frame([["a", cell, DASH]], [("", "M"), ("", "A"), ("", "B")]))
    assert list(table.links()) == [(0, 1)]


def test_table1_markdown_links_and_dash(tmp_path):
    tables = corruption_tables(corruption_metrics(), SPEC)
    md = to_markdown(tables["table1"], "corruption", "table1")
    q25 = md_cells(md, "Qwen")
    assert q25[2] == f"[46.6](../../explorer/index.html#{T1})"
    assert q25[3] == (
        "[40.2](../../explorer/index.html#cell=1&study=corruption&table=table1&metric=accuracy"
        "&model=q25&bench=reasoning&condition=corrupt&shown=40.2)"
    )
    assert q25[4].startswith("[86.3](../../explorer/index.html#") and "metric=rr" in q25[4]
    r1 = md_cells(md, "R1")
    assert r1[2].startswith("[0.0](") and r1[4] == DASH  # RR undefined: no link
    # without a folder: no link at all, as before
    plain = to_markdown(tables["table1"])
    assert "explorer" not in plain and md_cells(plain, "Qwen")[2] == "46.6"
    # Table 8 (models x benchmarks): the dataset is the benchmark
    md8 = to_markdown(tables["table8"], "corruption", "table8")
    assert "&table=table8&metric=accuracy&model=q25&bench=mathvista&condition=clean" in md8


def test_html_page_has_the_same_links_and_escapes(tmp_path):
    table = corruption_tables(corruption_metrics(), SPEC)["table1"]
    page = to_html(table, "corruption", "table1")
    md = to_markdown(table, "corruption", "table1")
    md_hrefs = [c.split("](", 1)[1][:-1] for c in md_cells(md, "Qwen") + md_cells(md, "R1")
                if c.startswith("[")]  # fmt: skip
    assert hrefs_of(page) == md_hrefs and len(md_hrefs) == 5
    assert f'href="../../explorer/index.html#{T1.replace("&", "&amp;")}"' in page
    assert "Qwen&lt;2.5&gt; &amp; VL" in page and "<2.5>" not in page
    assert '<th colspan="3" scope="colgroup">Reasoning</th>' in page
    assert '<th colspan="5" scope="rowgroup">Qwen family</th>' in page
    assert "<script" not in page and "http" not in page
    assert page.startswith("<!DOCTYPE html>") and "clean accuracy 0" in page


def test_files_with_and_without_folder(tmp_path):
    metrics = corruption_metrics()
    plain = write_corruption_tables(metrics, SPEC, tmp_path / "plain")
    assert {p.suffix for p in plain} == {".csv", ".md", ".tex"}
    linked_paths = write_corruption_tables(metrics, SPEC, tmp_path / "linked", "corruption")
    assert [p.name for p in linked_paths][:4] == [
        "table1.csv", "table1.md", "table1.tex", "table1.html"
    ]  # fmt: skip
    for stem in ("table1", "table8", "table9", "table10"):
        for ext in (".csv", ".tex"):
            a = (tmp_path / "plain" / f"{stem}{ext}").read_bytes()
            assert a == (tmp_path / "linked" / f"{stem}{ext}").read_bytes(), (stem, ext)
        assert "](../../explorer/index.html#" in (tmp_path / "linked" / f"{stem}.md").read_text()
    # a nested folder: one more ../
    table = corruption_tables(metrics, SPEC)["table1"]
    paths = write_table(table, tmp_path / "nested" / "table1", "distraction/demo-distract")
    md = paths[1].read_text()
    assert "[46.6](../../../explorer/index.html#cell=1&study=distraction%2Fdemo-distract" in md
    assert all(h.startswith("../../../explorer/") for h in hrefs_of(paths[3].read_text()))


def test_table3_links_accuracy_drop_and_rr():
    spec = {
        "models": SPEC["models"],
        "model_order": ["q25", "r1"],
        "dataset": "distract-bench",
    }
    d = "distract-bench"
    rows = [
        row("accuracy", "q25", d, "clean", 0.8),
        row("accuracy", "q25", d, "distracted", 0.6),
        row("drop_pp", "q25", d, "distracted", 0.2),
        row("rr", "q25", d, "distracted", 0.75),
        row("accuracy", "r1", d, "clean", 0.5),
        row("missing", "r1", d, "distracted", NAN, note="no scored outputs"),
    ]
    metrics = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    md = to_markdown(distraction_tables(metrics, spec)["table3"], "distraction/d", "table3")
    q25 = md_cells(md, "Qwen")
    base = "../../../explorer/index.html#cell=1&study=distraction%2Fd&table=table3"
    assert q25[2] == "100"  # N: no link
    assert (
        q25[3] == f"[80.0]({base}&metric=accuracy&model=q25&bench={d}&condition=clean&shown=80.0)"
    )
    assert q25[5] == (
        f"[20.0]({base}&metric=drop_pp&model=q25&bench={d}&condition=distracted&shown=20.0)"
    )
    assert q25[6].startswith("[75.0](") and "&metric=rr&" in q25[6]
    r1 = md_cells(md, "R1")
    assert r1[3].startswith("[50.0](") and r1[4] == DASH and r1[6] == DASH


IDIS_COLUMNS = [*METRIC_COLUMNS, *EXTRA_COLUMNS]


def idis_row(metric, value, **kw):
    r = {c: "" for c in IDIS_COLUMNS}
    r.update(severity=NAN, value=value, ci_low=NAN, ci_high=NAN, n=10)
    r.update(metric=metric, model="m1", prompt="natural", benchmark="idis-p")
    r.update(kw)
    return r


def test_idis_accuracy_links_carry_the_group_filters():
    spec = {"dataset": "idis-p", "kinds": ["visual", "size"], "models": {"m1": {"name": "M"}}}
    rows = [
        idis_row("accuracy", 0.9, condition="clean", kind="none", distractors="0"),
        idis_row(
            "accuracy",
            0.5,
            condition="objects",
            kind="visual",
            semantics="aligned",
            distractors="3",
            ci_low=0.4,
            ci_high=0.6,
        ),  # fmt: skip
        idis_row(
            "accuracy", 0.55, condition="objects", kind="visual", semantics="all", distractors="3"
        ),  # fmt: skip
        idis_row(
            "mean_length",
            120.0,
            condition="objects",
            kind="visual",
            semantics="aligned",
            distractors="3",
        ),  # fmt: skip
        idis_row("accuracy", 0.7, condition="size", kind="size", size="large"),
        idis_row("accuracy", NAN, condition="size", kind="size", size="small", note="failed"),
    ]
    metrics = pd.DataFrame(rows, columns=IDIS_COLUMNS)
    tables = idis_tables(metrics, spec)
    links = {str(c): c.link for c in tables["summary"].links().values()}
    head = {"metric": "accuracy", "model": "m1", "benchmark": "idis-p:natural"}
    assert links["90.0"] == {**head, "condition": "clean", "errors": "exclude"}
    assert links["50.0 [40.0, 60.0]"] == {
        **head,
        "condition": "objects",
        "errors": "exclude",
        "filter.kind": "visual",
        "filter.semantics": "aligned",
        "filter.n": "3",
    }
    assert "filter.semantics" not in links["55.0"] and links["55.0"]["filter.n"] == "3"
    assert links["70.0"]["filter.size"] == "large" and links["70.0"]["filter.kind"] == "size"
    assert len(links) == 4  # the dash (no value) and the length get none
    md = to_markdown(tables["summary"], "idis/idis-p", "summary")
    assert (
        "[50.0 \\[40.0, 60.0\\]](../../../explorer/index.html#cell=1&study=idis%2Fidis-p"
        "&table=summary&metric=accuracy&model=m1&bench=idis-p%3Anatural&condition=objects"
        "&shown=50.0+%5B40.0%2C+60.0%5D&errors=exclude&filter.kind=visual&filter.n=3"
        "&filter.semantics=aligned)"
    ) in md
    sizes = {str(c): c.link for c in tables["sizes"].links().values()}
    assert sizes == {
        "70.0": {
            **head,
            "condition": "size",
            "errors": "exclude",
            "filter.kind": "size",
            "filter.size": "large",
        }
    }

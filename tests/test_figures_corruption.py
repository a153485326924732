"""Corruption-study figures: files, sizes, byte-identical reruns, all-NaN inputs."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from PIL import Image

from tests.test_tables_corruption import (
    COND,
    PAIRS,
    SPEC,
    VALUES,
    make_metrics,
    row,
)
from vlmrobust.metrics.core import METRIC_COLUMNS
from vlmrobust.perturb.corruption import CORRUPTION_METHODS
from vlmrobust.report.common import DPI
from vlmrobust.report.figures.corruption import (
    CLEAN_ZERO_NOTE,
    corruption_figure_names,
    corruption_figures,
    figure4_size,
    rr_heatmap_size,
    write_corruption_figures,
)

NAN = math.nan


def method_severity_rows(value) -> list[dict]:
    rows = []
    for k, model in enumerate(SPEC["model_order"]):
        for i, method in enumerate(CORRUPTION_METHODS):
            for sev in [NAN] if method == "blank" else [1, 2, 3, 4, 5]:
                v = value(k, i, sev)
                for metric in ("rr_method_severity", "acc_method_severity"):
                    rows.append(row(metric, model, "all", COND, v, method=method, severity=sev))
    return rows


def metrics_with_heatmap() -> pd.DataFrame:
    def value(k, i, sev):
        if CORRUPTION_METHODS[i] == "frost" and sev == 5:
            return NAN  # one undefined cell: grey "n/a"
        return 1.0 - 0.02 * i * (1 if math.isnan(sev) else sev) / 3 - 0.01 * k

    extra = pd.DataFrame(method_severity_rows(value), columns=list(METRIC_COLUMNS))
    return pd.concat([make_metrics(), extra], ignore_index=True)


def all_nan_metrics() -> pd.DataFrame:
    """Random-weight demo models: 0% clean accuracy, so every RR is undefined."""
    values = {
        model: {b: (0.0, 0.0, NAN, "clean accuracy 0") for b in ("chartqa", "mathvista")}
        for model in VALUES
    }
    pairs = {r: (b, 40, 1.0, NAN, NAN, NAN, NAN, NAN) for r, (b, *_) in PAIRS.items()}
    base = make_metrics(values=values, pairs=pairs)
    for model in VALUES:  # pooled clean accuracy, as the metrics step writes it
        base.loc[len(base)] = row("accuracy", model, "all", "clean", 0.0)
    extra = pd.DataFrame(method_severity_rows(lambda k, i, s: NAN), columns=list(METRIC_COLUMNS))
    return pd.concat([base, extra], ignore_index=True)


def _texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return [t for t in texts if isinstance(t, str)]


def _expected_px(size: tuple[float, float]) -> tuple[int, int]:
    return round(size[0] * DPI), round(size[1] * DPI)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    metrics = metrics_with_heatmap()
    one = write_corruption_figures(metrics, SPEC, tmp_path_factory.mktemp("a"))
    two = write_corruption_figures(metrics, SPEC, tmp_path_factory.mktemp("b"))
    return one, two


def test_files_exist_with_the_expected_pixel_size(written):
    paths, _ = written
    assert corruption_figure_names(SPEC) == ["figure4", "rr_heatmap"]
    assert [p.name for p in paths] == [
        "figure4.png",
        "figure4.pdf",
        "rr_heatmap.png",
        "rr_heatmap.pdf",
    ]
    for p in paths:
        assert p.stat().st_size > 1000
    assert paths[1].read_bytes().startswith(b"%PDF")
    assert paths[3].read_bytes().startswith(b"%PDF")
    # Two families, two benchmarks, at most three models per family; five models.
    with Image.open(paths[0]) as im:
        im.load()
        assert im.format == "PNG"
        assert im.size == _expected_px(figure4_size(2, 2, 3))
    with Image.open(paths[2]) as im:
        im.load()
        assert im.size == _expected_px(rr_heatmap_size(5))
    assert rr_heatmap_size(5)[0] > rr_heatmap_size(1)[0]


def test_two_runs_give_identical_bytes(written):
    one, two = written
    for a, b in zip(one, two, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    pdf = one[1].read_bytes()
    assert b"CreationDate" not in pdf and b"ModDate" not in pdf


def test_figure_content_legend_r_and_heatmap_cells():
    figs = corruption_figures(metrics_with_heatmap(), SPEC)
    fig4_texts = _texts(figs["figure4"])
    assert "Qwen2.5-VL-7B (base)" in fig4_texts
    assert "R1-OneVision (r = 0.93)" in fig4_texts
    assert "mm_eureka (r = 0.97)" in fig4_texts
    assert "Qwen3-VL-8B-Thinking (T&R) (r = n/a)" in fig4_texts
    assert "x: no RR value" in fig4_texts  # R1 on MathVista, Qwen3-T on ChartQA
    # Base drawn dashed black, reasoning models solid.
    ax = figs["figure4"].axes[0]
    styles = {line.get_label(): (line.get_linestyle(), line.get_color()) for line in ax.lines}
    assert styles["Qwen2.5-VL-7B (base)"] == ("--", "black")
    assert styles["R1-OneVision (r = 0.93)"][0] == "-"

    heat = figs["rr_heatmap"]
    panels = [a for a in heat.axes if a.get_title()]
    assert [a.get_title() for a in panels] == [
        "Qwen2.5-VL-7B",
        "R1-OneVision",
        "mm_eureka",
        "Qwen3-VL-8B",
        "Qwen3-VL-8B-Thinking (T&R)",
    ]
    first = panels[0]
    labels = [t.get_text() for t in first.get_yticklabels()]
    assert labels[:3] == ["blank", "gaussian noise", "shot noise"]
    assert labels[-1] == "elastic transform" and len(labels) == 20
    cell_texts = [t.get_text() for t in first.texts]
    # 1 blank cell + 19 methods x 5 severities; frost at severity 5 is n/a.
    assert len(cell_texts) == 1 + 19 * 5
    assert cell_texts[0] == "100"
    assert cell_texts.count("n/a") == 1
    assert cell_texts[1 + 11 * 5 - 1] == "n/a"  # frost (row 11), severity 5
    # The blank cell spans the five severity columns.
    assert first.patches[0].get_width() == 5


def test_all_nan_metrics_still_give_figures_with_a_note(tmp_path):
    metrics = all_nan_metrics()
    paths = write_corruption_figures(metrics, SPEC, tmp_path)
    assert [p.name for p in paths] == [
        "figure4.png",
        "figure4.pdf",
        "rr_heatmap.png",
        "rr_heatmap.pdf",
    ]
    with Image.open(paths[2]) as im:
        im.load()
        assert im.size == _expected_px(rr_heatmap_size(5))
    figs = corruption_figures(metrics, SPEC)
    assert sum(CLEAN_ZERO_NOTE in t for t in _texts(figs["figure4"])) == 2  # one per family
    assert any(CLEAN_ZERO_NOTE in t for t in _texts(figs["rr_heatmap"]))
    heat_cells = [t.get_text() for a in figs["rr_heatmap"].axes for t in a.texts]
    assert set(heat_cells) == {"n/a"}


def test_no_method_severity_rows_and_no_models_do_not_crash(tmp_path):
    # No rr_method_severity rows at all: every heat-map cell is n/a.
    figs = corruption_figures(make_metrics(), SPEC)
    assert {t.get_text() for a in figs["rr_heatmap"].axes for t in a.texts} == {"n/a"}
    empty = pd.DataFrame(columns=list(METRIC_COLUMNS))
    spec = dict(SPEC, models={}, model_order=[])
    paths = write_corruption_figures(empty, spec, tmp_path)
    assert all(p.is_file() for p in paths)

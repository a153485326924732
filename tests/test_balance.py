"""`vlmrobust balance`: engines per model sized from the forecast (docs/forecast.md,
"Balancing the engines"), written into the configuration between its markers."""

from __future__ import annotations

import contextlib
import re
import shutil

import pytest

from vlmrobust.forecast import build_forecast
from vlmrobust.forecast.balance import BEGIN, END, balance, block_text, write_block
from vlmrobust.plan import RunPlan

from .conftest import BIN, REPO, run


def _paper_copy(tmp_path):
    shutil.copytree(REPO / "config", tmp_path / "config")
    return tmp_path / "config" / "paper.yaml"


def test_paper_yaml_is_balanced_within_15_percent_of_gpu_hours_over_8():
    """The shipped config/paper.yaml: its forecast makespan on 8 GPUs is within 15% of
    its engines' GPU-hours / 8, and the engine no longer takes the run's whole time."""
    with contextlib.chdir(REPO):
        plan = RunPlan.load("config/paper.yaml")
        forecast = build_forecast(plan, "config/paper.yaml", 8)
    bound = sum(e.seconds * e.gpus for e in forecast.engines) / 8
    assert forecast.makespan_s <= 1.15 * bound
    assert plan.config["service"]["split_cells"] is True
    thinking = [e for e in forecast.engines if e.model == "qwen3-vl-8b-thinking"]
    assert len(thinking) == plan.engines_of("qwen3-vl-8b-thinking") >= 2
    # its engines share its work equally (one share of every cell each)
    assert max(e.seconds for e in thinking) - min(e.seconds for e in thinking) < 1.0


def test_balance_writes_what_the_forecast_then_gives(tmp_path):
    """Balancing a copy of paper.yaml with one engine per model (as before the block),
    writing it, and forecasting the written file give the same makespan; a second write
    leaves the file as it was; the rest of the file is untouched."""
    config = _paper_copy(tmp_path)
    text = config.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END) + 1
    config.write_text(text[:start] + text[end:])  # no block: every model one engine
    with contextlib.chdir(tmp_path):
        plan = RunPlan.load("config/paper.yaml")
        before = build_forecast(plan, "config/paper.yaml", 8)
        assert before.makespan_s > 3 * sum(e.seconds * e.gpus for e in before.engines) / 8
        result = balance(plan, before, 8, 0.15)
        assert result.within and result.engines["qwen3-vl-8b-thinking"] >= 2
        write_block("config/paper.yaml", block_text(result, "vlmrobust balance x --write"))
        written = config.read_text()
        assert written.startswith(text[:start]) and written.count(BEGIN) == 1
        after = build_forecast(RunPlan.load("config/paper.yaml"), "config/paper.yaml", 8)
        assert after.makespan_s == pytest.approx(result.makespan_s)
        write_block("config/paper.yaml", block_text(result, "vlmrobust balance x --write"))
        assert config.read_text() == written


def test_a_service_key_outside_the_block_is_an_error(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("models: []\nservice:\n  default_engines: 2\n")
    with pytest.raises(ValueError, match="has a `service:` key outside"):
        write_block(config, f"{BEGIN}\nservice: {{}}\n{END}\n")
    assert config.read_text() == "models: []\nservice:\n  default_engines: 2\n"


def test_the_commands_print_the_makespan_beside_gpu_hours_over_gpus(tmp_path):
    _paper_copy(tmp_path)
    out = run([str(BIN / "vlmrobust"), "balance", "config/paper.yaml", "--gpus", "8"],
              cwd=tmp_path).stdout  # fmt: skip
    assert "service:\n  split_cells: true\n  engines:\n" in out
    assert "(within 15%)" in out
    out = run([str(BIN / "vlmrobust"), "forecast", "config/paper.yaml", "--gpus", "8",
               "--no-sources"], cwd=tmp_path).stdout  # fmt: skip
    ratio = re.search(r"/ 8 GPUs = .*?; the makespan is ([0-9.]+) x that", out)
    assert ratio is not None and 1.0 <= float(ratio.group(1)) <= 1.15

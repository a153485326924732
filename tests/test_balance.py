"""`vlmrobust balance`: engines per model sized from the forecast (docs/forecast.md,
"Balancing the engines"), written into the configuration between its markers."""

from __future__ import annotations

import contextlib
import re
import shutil

import pytest

from vlmrobust.core.config import ConfigError, load_yaml, validate_config
from vlmrobust.forecast import build_forecast
from vlmrobust.forecast.balance import BEGIN, END, balance, block_text, write_block
from vlmrobust.plan import RunPlan, engines

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
    assert len(thinking) == engines.engines_of(plan, "qwen3-vl-8b-thinking") >= 2
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


def _balance_write(config):
    cmd = [str(BIN / "vlmrobust"), "balance", "config/paper.yaml", "--gpus", "8", "--write"]
    return run(cmd, cwd=config.parent.parent, check=False)


BLOCK_END = "    gpt-oss-120b: 5\n" + END + "\n"


@pytest.mark.parametrize(
    "damage, marker, line_of, what",
    [
        (
            lambda t: t.replace(END + "\n", END + " extra\n"),
            END,
            END + " extra",
            "has text after it on its line ('extra'): the rewrite would drop it",
        ),
        (
            lambda t: t.replace(BLOCK_END, "    gpt-oss-120b: 5  " + END + "\n"),
            END,
            "    gpt-oss-120b: 5  " + END,
            "has text before it on its line ('gpt-oss-120b: 5')",
        ),
        (lambda t: t.replace(END + "\n", ""), BEGIN, BEGIN, f"has no end marker `{END}`"),
        (
            lambda t: t.replace(BEGIN, f"{BEGIN} (older)\n{BEGIN}"),
            BEGIN,
            BEGIN + ":",
            "appears a second time (first on line",
        ),
        (
            lambda t: t.replace(BLOCK_END, "    gpt-oss-120b: 5\n").replace(
                BEGIN, f"{END}\n{BEGIN}"
            ),
            END,
            END,
            "comes before the begin marker",
        ),
        (lambda t: t.replace(BEGIN, "  " + BEGIN), BEGIN, "  " + BEGIN, "is indented"),
    ],
    ids=["text-after-end", "text-before-end", "no-end", "two-begins", "end-first", "indented"],
)
def test_a_damaged_marker_is_refused_naming_file_line_and_marker(
    tmp_path, damage, marker, line_of, what
):
    """`vlmrobust balance --write` on a damaged marker line exits non-zero, names the
    file, the line and the marker and what is wrong, and writes nothing (before, text
    after the end marker left a file that no longer parsed, with exit 0)."""
    config = _paper_copy(tmp_path)
    damaged = damage(config.read_text())
    assert damaged != config.read_text()
    config.write_text(damaged)
    before, names = config.read_bytes(), _names(config.parent)
    proc = _balance_write(config)
    line = next(n for n, t in enumerate(damaged.splitlines(), 1) if t.startswith(line_of))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"config/paper.yaml: line {line}: the balance marker `{marker}` {what}" in proc.stderr
    assert "nothing was written" in proc.stderr
    assert config.read_bytes() == before and _names(config.parent) == names  # no temp file


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_write_keeps_everything_but_the_block_and_reads_back_valid(tmp_path):
    """A valid `--write` (spaces after the end marker are harmless: the whole marker line
    is replaced) rewrites only the block, keeping the block's other `service` keys
    (wait_log_s); the file loads with the project's YAML reader and validates, its
    configuration unchanged but for `service`."""
    config = _paper_copy(tmp_path)
    text = config.read_text().replace(END + "\n", END + "   \n")
    text = text.replace("\nservice:\n", "\nservice:\n  wait_log_s: 120\n", 1)
    config.write_text(text)
    proc = _balance_write(config)
    assert proc.returncode == 0, proc.stderr
    written = config.read_text()
    start = text.index(BEGIN)
    assert written.startswith(text[:start]) and written.endswith(END + "\n")
    assert written.count(BEGIN) == written.count(END) == 1
    old, new = load_yaml(REPO / "config/paper.yaml"), load_yaml(config)
    assert {k: v for k, v in new.items() if k != "service"} == {
        k: v for k, v in old.items() if k != "service"
    }
    assert new["service"]["wait_log_s"] == 120 and new["service"]["split_cells"] is True
    with contextlib.chdir(tmp_path):
        RunPlan.load("config/paper.yaml")


@pytest.mark.parametrize(
    "body, message",
    [
        # markers at the start of their lines, but inside `judge`'s mapping: the rewritten
        # `service:` would take `mathverse` in
        (
            f"models: []\njudge:\n  attributes: {{}}\n{BEGIN}\n{END}\n  mathverse: {{}}\n",
            "the balance block on lines 4-5 would not stand at the top level of the file "
            "(it reads back as another configuration)",
        ),
        # inside a flow sequence: the rewrite would not parse
        (
            f"models: [a,\n{BEGIN}\n{END}\n  b]\n",
            "the balance block on lines 2-3 would not stand at the top level of the file "
            "(it would not read back: ",
        ),
    ],
    ids=["inside-a-mapping", "inside-a-list"],
)
def test_a_block_that_is_not_at_the_top_level_is_refused(tmp_path, body, message):
    config = tmp_path / "c.yaml"
    config.write_text(body)
    with pytest.raises(ConfigError, match=re.escape(f"{config}: {message}")):
        write_block(config, f"{BEGIN}\nservice:\n  engines: {{a: 2}}\n{END}\n")
    assert config.read_text() == body
    assert _names(tmp_path) == ["c.yaml"]


def test_a_block_the_configuration_check_refuses_is_not_written(tmp_path):
    """The command checks the rewritten file with validate_config before writing it: a
    block naming a model outside the run is refused and nothing is written."""
    shutil.copytree(REPO / "config", tmp_path / "config")
    config = tmp_path / "config" / "config.yaml"
    before = config.read_bytes()
    text = f"{BEGIN}\nservice:\n  split_cells: true\n  engines:\n    demo-bse: 2\n{END}\n"
    with contextlib.chdir(tmp_path), pytest.raises(ConfigError) as error:
        write_block("config/config.yaml", text, check=validate_config)
    assert str(error.value).startswith(
        "config/config.yaml as rewritten would not validate, so nothing was written: "
        "config: service.engines.demo-bse: 'demo-bse' is not a model of the run"
    )
    assert config.read_bytes() == before
    with contextlib.chdir(tmp_path):  # the same block for a model of the run is written
        write_block("config/config.yaml", text.replace("demo-bse", "demo-base"), validate_config)
        assert load_yaml("config/config.yaml")["service"]["engines"] == {"demo-base": 2}

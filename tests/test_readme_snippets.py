"""Every YAML configuration snippet of the documentation (README.md, config/README.md and
the pages under docs/) is valid, no `snakemake` command of the documentation hands a
target to an option that takes several values (``--configfile``, ``--config``), which
would read it as a configuration, and every relative link of the documentation leads to
a file and a heading that exist.

A snippet is a ```yaml block. One with a top-level ``models`` key is a whole run
configuration and is validated as it is (its local files must exist: it is meant to run
from the repository root); any other snippet documents a part of one and is validated
merged into the default configuration (``config/config.yaml``) at the place it
documents (its top-level keys; mappings merge, except backend settings, and anything
else replaces). A snippet that
is deliberately partial or illustrative says so in an HTML comment on the line right
above it, ``<!-- snippet: illustrative -->``; it only has to parse as YAML.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path

import pytest
import yaml

from vlmrobust.core.config import ConfigError, load_yaml
from vlmrobust.plan import RunPlan
from vlmrobust.plan import data as plan_data

from .conftest import REPO

#: the pages whose ```yaml blocks are not run configurations (a benchmark record)
NOT_CONFIG = {"docs/adding-a-benchmark.md"}
DOCS = (
    "README.md",
    "config/README.md",
    *(
        page
        for page in sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))
        if page not in NOT_CONFIG
    ),
)
#: the page of the reviewers' example (tests/test_reviewers.py runs it)
REVIEWERS = "docs/reviewers.md"
ILLUSTRATIVE = "<!-- snippet: illustrative -->"
_BLOCK = re.compile(r"^```yaml[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def yaml_snippets(text: str) -> list[tuple[int, str, bool]]:
    """(line, text, illustrative) of every ```yaml block of a Markdown text."""
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        above = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        out.append((line, m.group(1), above == ILLUSTRATIVE))
    return out


def merged(base: dict, part: dict) -> dict:
    """``part`` put into ``base`` at the place it documents (mappings merge, except a
    backend setting, one with a ``backend`` or ``llm`` key, which replaces the default's:
    an LLM judge does not keep the offline judge's keys)."""
    out = copy.deepcopy(base)
    for key, value in part.items():
        setting = isinstance(value, dict) and ("backend" in value or "llm" in value)
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not setting:
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check_snippet(text: str, illustrative: bool = False) -> dict | None:
    """Validate one snippet (module docstring); return the validated configuration."""
    data = yaml.safe_load(text)
    if illustrative:
        return None
    if not isinstance(data, dict):
        raise ConfigError(f"a configuration snippet is a mapping, got {type(data).__name__}")
    if "models" in data:
        plan = RunPlan.from_config(copy.deepcopy(data))
        for name, ds in plan.datasets.items():
            if ds["source"] == "local":
                plan_data.samples_sources(
                    plan, name
                )  # a ConfigError when the folder does not exist
        for imp in plan.config["imports"]:
            for key in ("path", "references"):
                if imp[key]:
                    assert Path(imp[key]).is_file(), imp[key]
        return plan.config
    return RunPlan.from_config(merged(load_yaml("config/config.yaml"), data)).config


SNIPPETS = [
    pytest.param(doc, line, text, illustrative, id=f"{doc}:{line}")
    for doc in DOCS
    for line, text, illustrative in yaml_snippets((REPO / doc).read_text(encoding="utf-8"))
]


@pytest.mark.parametrize(("doc", "line", "text", "illustrative"), SNIPPETS)
def test_every_yaml_snippet_is_valid(doc, line, text, illustrative, monkeypatch):
    monkeypatch.chdir(REPO)  # relative paths (registry, fixtures) from the repository root
    check_snippet(text, illustrative)


def reviewers_example() -> str:
    """The reviewers' configuration: the first snippet of the Distract-Bench section of
    docs/reviewers.md."""
    page = (REPO / REVIEWERS).read_text(encoding="utf-8")
    _, text, illustrative = yaml_snippets(page[page.index("## The Distract-Bench release") :])[0]
    assert not illustrative
    return text


def test_the_snippets_are_found_and_illustrative_ones_are_rare():
    assert len(SNIPPETS) >= 2
    found = {p.values[0] for p in SNIPPETS}
    # the pages that hold the manual's snippets (moved out of README.md)
    assert {"docs/usage.md", "docs/judges.md", REVIEWERS} <= found
    assert sum(p.values[3] for p in SNIPPETS) <= 1
    full = [p for p in SNIPPETS if "models" in yaml.safe_load(p.values[2])]
    assert full, "the reviewers' example is a whole configuration"


def test_the_reviewers_example_imports_distracted_outputs(monkeypatch):
    """docs/reviewers.md: the released outputs answer the distracted images."""
    monkeypatch.chdir(REPO)
    config = check_snippet(reviewers_example())
    perturbation = {c: s["perturbation"] for c, s in config["conditions"].items()}
    assert {perturbation[i["condition"]] for i in config["imports"]} == {"distraction"}
    assert config["datasets"]["distract-bench"]["images"] is False
    assert any(i["path"] is None and i["references"] for i in config["imports"])


# The reviewers' example as it was: it named a condition it never defined and called the
# released (distracted) outputs "corrupt".
OLD_REVIEWERS_EXAMPLE = """
models: [qwen2.5-vl-7b, mm-eureka-qwen-7b]
datasets:
  distract-bench: {conditions: [clean, corrupt], group: reasoning}
imports:
  - {model: qwen2.5-vl-7b, dataset: distract-bench, condition: clean, path: released/qwen-clean.jsonl}
  - {model: qwen2.5-vl-7b, dataset: distract-bench, condition: corrupt, path: released/qwen-corrupt.jsonl}
"""


def test_a_broken_snippet_fails(monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(ConfigError, match="unknown condition 'corrupt'"):
        check_snippet(OLD_REVIEWERS_EXAMPLE)
    with pytest.raises(ConfigError, match="unknown key"):
        check_snippet("datasets:\n  mathvista: {conditions: [clean], limt: 3}\n")
    assert check_snippet("datasets: [not, a, config]\n", illustrative=True) is None


def test_snippet_extraction():
    text = "a\n```yaml\nx: 1\n```\n<!-- snippet: illustrative -->\n```yaml\ny: [\n```\n"
    assert yaml_snippets(text) == [(2, "x: 1\n", False), (6, "y: [\n", True)]


# --------------------------------------------------------------------------- commands

#: Snakemake's options with nargs '+': what each of their values is (anything else after
#: them is a target Snakemake would read as one more value)
_MANY_VALUES = {
    "--configfile": lambda w: w.endswith((".yaml", ".yml", ".json")),
    "--configfiles": lambda w: w.endswith((".yaml", ".yml", ".json")),
    "--config": lambda w: "=" in w,
}
_CODE = re.compile(r"^```[a-z]*[ \t]*\n(.*?)^```[ \t]*$|`([^`\n]+)`", re.M | re.S)


def snakemake_commands(text: str) -> list[str]:
    """The `snakemake` command lines of a Markdown text: in code blocks (continuation
    lines joined) and in inline code."""
    found = []
    for m in _CODE.finditer(text):
        code = (m.group(1) or m.group(2)).replace("\\\n", " ")
        found += [line for line in code.splitlines() if re.search(r"\bsnakemake\s", line)]
    return found


def targets_read_as_config(command: str) -> list[str]:
    """The words Snakemake would take as values of --configfile / --config although they
    are no configuration: targets written after such an option."""
    words = shlex.split(command, comments=True)
    start = next(i for i, w in enumerate(words) if w.endswith("snakemake"))
    wrong, option = [], None
    for word in words[start + 1 :]:
        if word == "--":
            break
        if word.startswith("-"):
            option = word if word in _MANY_VALUES else None
        elif option is not None and not _MANY_VALUES[option](word):
            wrong.append(word)
    return wrong


COMMAND_DOCS = (
    "README.md",
    "config/README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")),
)


def test_no_documented_command_reads_a_target_as_a_configuration():
    wrong = {
        (doc, command): targets_read_as_config(command)
        for doc in COMMAND_DOCS
        for command in snakemake_commands((REPO / doc).read_text(encoding="utf-8"))
        if targets_read_as_config(command)
    }
    assert not wrong, wrong
    # the running instructions (moved from README.md): the joined form is shown
    usage = snakemake_commands((REPO / "docs/usage.md").read_text(encoding="utf-8"))
    assert any("--configfile=" in c for c in usage) and len(usage) >= 5


def test_the_readme_keeps_the_commands_ci_runs():
    """.ci/run installs as the README's quick start does and runs its test command."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start") :]
    quick = quick[: quick.index("\n## ")]
    assert (
        '.venv/bin/pip install -e ".[dev]" && .venv/bin/snakemake --cores 2' in quick
        and ".venv/bin/pytest -n 2" in quick
    )
    tests = readme[readme.index("## Tests") :]
    assert "```bash\n.venv/bin/pytest -n 2\n```" in tests
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert '.venv/bin/pip install --quiet -e ".[dev]"' in ci
    assert ci.rstrip().endswith(".venv/bin/pytest -n 2")


def test_a_target_after_configfile_is_found():
    assert targets_read_as_config(
        ".venv/bin/snakemake -n --configfile cfg.yaml results/a.csv  # what runs"
    ) == ["results/a.csv"]
    assert targets_read_as_config("snakemake --config 'models=[a]' seed=1 figures/b.png") == [
        "figures/b.png"
    ]
    for fine in (
        "snakemake -n --configfile=cfg.yaml results/a.csv",
        "snakemake -n results/a.csv --configfile cfg.yaml other.yml",
        "snakemake -n --configfile cfg.yaml -- results/a.csv",
        "HF_TOKEN=x snakemake --cores 8 --configfile config/paper.yaml",
    ):
        assert targets_read_as_config(fine) == [], fine
    text = (
        "a `snakemake -n --config x=1 T` b\n```bash\nsnakemake \\\n  --configfile c.yaml T2\n```\n"
    )
    assert [targets_read_as_config(c) for c in snakemake_commands(text)] == [["T"], ["T2"]]


# --------------------------------------------------------------------------- links

LINK_DOCS = ("README.md", "config/README.md", "resources/README.md", *COMMAND_DOCS[2:])
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text (lower case, punctuation
    dropped, spaces to hyphens; a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}[ \t]+(.*?)[ \t]*$", _FENCE.sub("", text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of a page (outside code) whose file or heading is missing."""
    text = re.sub(r"`[^`\n]*`", "", _FENCE.sub("", path.read_text(encoding="utf-8")))
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif (
            anchor
            and dest.suffix == ".md"
            and anchor not in heading_anchors(dest.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_of_the_documentation_resolves():
    broken = {doc: broken_links(REPO / doc) for doc in LINK_DOCS}
    assert not {doc: b for doc, b in broken.items() if b}


def test_the_index_lists_every_docs_page():
    """docs/README.md links every page under docs/, and README.md links the index."""
    index = REPO / "docs" / "README.md"
    linked = {
        (index.parent / target.partition("#")[0]).resolve()
        for target in _LINK.findall(index.read_text(encoding="utf-8"))
        if target.partition("#")[0] and not re.match(r"^[a-z]+:", target)
    }
    assert "](docs/README.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    root = REPO.resolve()
    pages = {p.resolve() for p in (root / "docs").rglob("*.md")} - {root / "docs/README.md"}
    assert not sorted(str(p.relative_to(root)) for p in pages - linked)


def test_link_checks_find_broken_links(tmp_path):
    assert heading_anchors("# A `b` (c)\n## A `b` (c)\n```\n# not\n```\n") == {"a-b-c", "a-b-c-1"}
    assert "after-kill--9-of-snakemake" in heading_anchors("## After `kill -9` of Snakemake")
    (tmp_path / "other.md").write_text("# Other page\n## Its part\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n[a](other.md) [b](other.md#its-part) [c](#page) [d](https://x.org/y)\n"
        "[e](missing.md) [f](other.md#gone) [g](#nowhere) `[h](in-code.md)`\n"
        "```\n[i](in-a-block.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md (no such file)",
        "other.md#gone (no such heading)",
        "#nowhere (no such heading)",
    ]

"""The benchmark registry (vlmrobust.core.benchmarks) and the registries keyed by it.

Every benchmark has an adapter, a scorer and a default prompt; every adapter and scorer
key is a benchmark (or a declared generic scorer); the config schema takes its adapter
and scorer names from the registry (that core imports no stage is import-linter's
`layers` contract, tests/test_lint.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys

import pytest

from vlmrobust.core.benchmarks import (
    BENCHMARKS,
    GENERIC_SCORERS,
    SCORER_NAMES,
    Benchmark,
    get_benchmark,
)
from vlmrobust.core.config import (
    ConfigError,
    load_schema,
    load_yaml,
    validate_config,
    validate_registry,
)
from vlmrobust.core.prompts import PROMPTS, default_prompt
from vlmrobust.core.records import ANSWER_TYPES, Sample
from vlmrobust.data import ADAPTERS
from vlmrobust.score import SCORERS, get_scorer

from .conftest import REPO, run

NAMES = list(BENCHMARKS)


def _registry():
    return validate_registry(load_yaml(REPO / "config/models.yaml"))


def _sample(answer_type: str) -> Sample:
    answer = {"letter": "A", "number": "3", "yes/no": "yes", "list": "[1, 2]"}.get(
        answer_type, "cat"
    )
    return Sample(
        sample_id="b-1",
        dataset="b",
        images=["x.png"],
        question="Q?",
        answer=answer,
        answer_type=answer_type,
        choices=["cat", "dog"] if answer_type in ("letter", "label") else [],
    )


def test_records_are_frozen_and_checked():
    record = BENCHMARKS["mmmu"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.scorer = "generic"  # type: ignore[misc]
    with pytest.raises(TypeError):
        BENCHMARKS["x"] = record  # type: ignore[index]
    with pytest.raises(ValueError, match="answer_types"):
        Benchmark("x", "d", answer_types=("essay",), scorer="generic")
    with pytest.raises(ValueError, match="benchmark name"):
        Benchmark("X Y", "d", answer_types=("text",), scorer="generic")
    with pytest.raises(ValueError, match="unknown benchmark 'nope'; known benchmarks: chartqa, "):
        get_benchmark("nope")
    assert get_benchmark("chartqa") is BENCHMARKS["chartqa"]


def test_every_benchmark_has_an_adapter_and_every_adapter_is_a_benchmark():
    assert sorted(ADAPTERS) == sorted(NAMES)
    for name, adapter in ADAPTERS.items():
        record = BENCHMARKS[name]
        assert adapter.benchmark is record
        assert (adapter.name, adapter.description) == (record.name, record.description)
        assert adapter.defaults() == {
            "hub_id": record.hub_id,
            "hub_config": record.hub_config,
            "split": record.split,
        }


@pytest.mark.parametrize("name", NAMES)
def test_every_benchmark_has_a_scorer(name):
    record = BENCHMARKS[name]
    assert record.scorer in SCORERS
    if name in SCORERS:  # a benchmark with rules of its own is scored by them
        assert record.scorer == name
    assert get_scorer(name) is SCORERS[record.scorer]


def test_every_scorer_is_a_benchmark_or_a_generic_scorer():
    assert set(GENERIC_SCORERS).isdisjoint(BENCHMARKS)
    assert all(k in BENCHMARKS or k in GENERIC_SCORERS for k in SCORERS)
    assert set(SCORERS) == set(SCORER_NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_benchmark_has_a_default_prompt(name):
    record = BENCHMARKS[name]
    assert record.default_prompt is None or record.default_prompt in PROMPTS
    for answer_type in record.answer_types:
        chosen = default_prompt(name, _sample(answer_type))
        assert chosen in PROMPTS
        if record.default_prompt is not None:
            assert chosen == record.default_prompt


def test_config_schema_takes_the_names_from_the_registry():
    # the schema file names no benchmark: the enums are filled in when it is loaded
    raw = load_yaml(REPO / "workflow" / "schemas" / "config.schema.yaml")
    props = raw["$defs"]["dataset"]["properties"]
    assert "enum" not in props["adapter"] and "enum" not in props["scorer"]
    props = load_schema("config")["$defs"]["dataset"]["properties"]
    assert props["adapter"]["enum"] == [*BENCHMARKS, None]
    assert props["scorer"]["enum"] == [*SCORER_NAMES, None]


@pytest.mark.parametrize("key", ["adapter", "scorer"])
def test_unknown_adapter_or_scorer_names_the_key_and_the_known_names(key):
    config = load_yaml(REPO / "config/config.yaml")
    config["datasets"]["demo-chart"][key] = "mmmuu"
    with pytest.raises(ConfigError) as err:
        validate_config(config, _registry())
    message = str(err.value)
    assert f"key 'datasets.demo-chart.{key}': 'mmmuu' is not one of" in message
    known = NAMES if key == "adapter" else list(SCORER_NAMES)
    assert all(repr(n) in message for n in known)


@pytest.mark.parametrize("name", NAMES)
def test_a_dataset_named_after_a_benchmark_gets_its_adapter_and_scorer(name):
    config = load_yaml(REPO / "config/config.yaml")
    config["datasets"] = {name: {"source": "local", "path": "x", "decisions": "d.json"}}
    config["construct"] = {}
    config["idis"]["blocking"]["datasets"] = None  # the demo's is not in this run
    if name == "demo":
        config["datasets"] = {name: {"source": "local", "path": "results/raw/demo/chart"}}
    ds = validate_config(config, _registry())["datasets"][name]
    assert (ds["adapter"], ds["scorer"]) == (name, BENCHMARKS[name].scorer)


def test_answer_types_are_sample_answer_types():
    for record in BENCHMARKS.values():
        assert set(record.answer_types) <= set(ANSWER_TYPES)


def test_docs_name_every_benchmark():
    howto = (REPO / "docs" / "adding-a-benchmark.md").read_text(encoding="utf-8")
    assert "workflow/vlmrobust/core/benchmarks.py" in howto
    assert "tests/test_benchmarks.py" in howto
    readme = (REPO / "config" / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `adapter` |"))
    assert set(re.findall(r"`([a-z0-9-]+)`", row)) >= set(BENCHMARKS)


def test_a_benchmark_is_a_data_file(tmp_path):
    """Adding a benchmark is one YAML file (plus an adapter and, where needed, a scorer):
    the record is read from it, named by the file; a wrong field names the file."""
    from vlmrobust.core.benchmarks import RECORDS_DIR, load_record, load_records

    assert {p.stem for p in RECORDS_DIR.glob("*.yaml")} == set(BENCHMARKS)
    path = tmp_path / "my-bench.yaml"
    path.write_text(
        "description: 'MyBench test: questions about things'\n"
        "answer_types: [letter, number]\nscorer: generic\nhub_id: org/my-bench\nsplit: test\n"
    )
    record = load_record(path)
    assert (record.name, record.answer_types, record.hub_id, record.default_prompt) == (
        "my-bench",
        ("letter", "number"),
        "org/my-bench",
        None,
    )
    assert [r.name for r in load_records(tmp_path)] == ["my-bench"]
    path.write_text("description: x\nanswer_types: [letter]\nscorer: generic\nsplitt: test\n")
    with pytest.raises(ValueError, match=r"my-bench\.yaml: unknown field\(s\) splitt"):
        load_record(path)
    path.write_text("description: x\nanswer_types: [essay]\nscorer: generic\n")
    with pytest.raises(ValueError, match=r"answer_types \['essay'\] must be"):
        load_record(path)


def test_a_record_states_its_rows_per_split(tmp_path):
    """``rows``: one number for the record's own split, or a mapping by split; what the
    run forecast counts before the samples exist. Anything else names the file."""
    from vlmrobust.core.benchmarks import load_record

    path = tmp_path / "my-bench.yaml"
    head = "description: x\nanswer_types: [letter]\nscorer: generic\nsplit: test\n"
    path.write_text(head + "rows: 120\n")
    record = load_record(path)
    assert record.rows == (("test", 120),)
    assert (record.rows_of(None), record.rows_of("test"), record.rows_of("dev")) == (120, 120, None)
    path.write_text(head + "rows: {test: 120, testmini: 12}\n")
    assert load_record(path).rows_of("testmini") == 12
    path.write_text(head + "rows: {test: many}\n")
    with pytest.raises(ValueError, match=r"my-bench\.yaml: rows is a count or a mapping"):
        load_record(path)
    assert BENCHMARKS["mathvision"].rows_of("test") == 3040
    assert BENCHMARKS["imagenet9"].rows_of(None) == 4050


# ---------------------------------------------------------------- benchmarks/official_verdicts.py

OFFICIAL_VERDICTS = REPO / "benchmarks" / "official_verdicts.py"
OFFICIAL_SETS = ("mmmu", "mmmu-pro", "mmstar", "chartqa")


def _official_verdicts(*args: str, check: bool = True):
    return run([sys.executable, str(OFFICIAL_VERDICTS), *args], REPO, check=check, timeout=120)


def test_official_verdicts_help_names_every_set():
    top = _official_verdicts("--help").stdout
    assert all(name in top for name in OFFICIAL_SETS)
    for name in OFFICIAL_SETS:
        text = _official_verdicts(name, "--help").stdout
        assert f"official_verdicts.py {name}" in text and "--out" in text
    assert "--demo" in _official_verdicts("chartqa", "--help").stdout
    assert _official_verdicts(check=False).returncode == 2  # a set is required


def test_official_verdicts_runs_stand_in_scorers(tmp_path):
    """The plumbing on stand-in scorer files: pix2struct's unused imports are stubbed,
    demo.py's function is taken out of a file that imports torch, ids count per split,
    releaser_demo_correct only with --demo; MMMU-Pro rows where the scorer drew a random
    answer are flagged."""
    metrics = tmp_path / "p2s" / "pix2struct" / "metrics.py"
    metrics.parent.mkdir(parents=True)
    metrics.write_text(
        "from pycocoevalcap.cider.cider import Cider\nimport editdistance\n\n"
        "def relaxed_correctness(target, prediction):\n    return target == prediction\n"
    )
    demo = tmp_path / "demo.py"
    demo.write_text(
        "import torch\n\n"
        "def relaxed_correctness(target: Optional[str], prediction: str) -> bool:\n"
        "    return target.strip() == prediction.strip()\n"
    )
    results = [
        {"imgname": "a.png", "query": "q", "prediction": p, "answer": "1", "split": s}
        for p, s in [("1", "test_human"), (" 1", "test_augmented"), ("2", "test_augmented")]
    ]
    (tmp_path / "results.json").write_text(json.dumps(results))
    common = ["chartqa", "--pix2struct", str(tmp_path / "p2s"), "--results"]
    common += [str(tmp_path / "results.json"), "--out"]
    _official_verdicts(*common, str(tmp_path / "plain.jsonl"))
    _official_verdicts(*common, str(tmp_path / "demo.jsonl"), "--demo", str(demo))
    plain = [json.loads(line) for line in (tmp_path / "plain.jsonl").read_text().splitlines()]
    with_demo = [json.loads(line) for line in (tmp_path / "demo.jsonl").read_text().splitlines()]
    assert [r["id"] for r in plain] == ["test_human_0", "test_augmented_0", "test_augmented_1"]
    assert [r["official_correct"] for r in plain] == [1, 0, 0]
    assert "releaser_demo_correct" not in plain[0] and list(plain[0])[-1] == "random"
    assert [r["releaser_demo_correct"] for r in with_demo] == [1, 1, 0]

    evaluate = tmp_path / "mmmu" / "mmmu-pro" / "evaluate.py"
    evaluate.parent.mkdir(parents=True)
    evaluate.write_text(
        "import random\n\ndef mmmu_process_results(results):\n"
        "    pred = results['response'] or random.choice(['A', 'B'])\n"
        "    results['pred_indexs'] = pred\n"
        "    results['if_right'] = pred == results['answer']\n"
        "    return results\n"
    )
    released = [
        {"id": f"r{i}", "subject": "s", "response": resp, "options": "['x', 'y']", "answer": "A"}
        | {"pred_indexs": resp, "if_right": resp == "A"}
        for i, resp in enumerate(["A", ""])
    ]
    (evaluate.parent / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in released))
    _official_verdicts(
        "mmmu-pro",
        "--repo",
        str(tmp_path / "mmmu"),
        "--file",
        "mmmu-pro/out.jsonl",
        "--out",
        str(tmp_path / "pro.jsonl"),
    )
    pro = [json.loads(line) for line in (tmp_path / "pro.jsonl").read_text().splitlines()]
    assert [(r["id"], r["random"], r["released_if_right"]) for r in pro] == [
        ("r0", False, True),
        ("r1", True, False),
    ]
    assert pro[0]["official_correct"] == 1 and pro[1]["parsed_pred"] in ("A", "B")


SCORER_AGREEMENT = REPO / "benchmarks" / "scorer_agreement.py"


def test_scorer_agreement_counts_both_modes_against_the_official_verdicts(tmp_path):
    """Hand-made official verdicts: an MMMU letter both modes read (agree), an open
    answer the harness loses to its bug (harness disagrees, corrected agrees), a row the
    official scorer guessed (left out); a ChartQA "24%" that every side scores wrong."""
    mmmu = [
        {"id": "validation_Art_1", "question_type": "multiple-choice", "response": "(B)",
         "index2ans": {"A": "x", "B": "y"}, "gold": "B", "official_correct": 1, "random": False},
        {"id": "validation_Math_2", "question_type": "open", "response": "So the answer is 24.",
         "gold": "24", "official_correct": 1, "random": False},
        {"id": "validation_Art_3", "question_type": "multiple-choice", "response": "hmm",
         "index2ans": {"A": "x", "B": "y"}, "gold": "A", "official_correct": 0, "random": True},
    ]  # fmt: skip
    chartqa = [{"id": "test_human_0", "split": "test_human", "question": "q", "response": "24%",
                "gold": "24", "official_correct": 0}]  # fmt: skip
    files = []
    for name, rows in (("mmmu_x.jsonl", mmmu), ("chartqa_x.jsonl", chartqa)):
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files.append(str(path))
    proc = run([sys.executable, str(SCORER_AGREEMENT), *files], REPO, timeout=300)
    lines = proc.stdout.splitlines()
    assert "mmmu_x.jsonl | 3 | 1 | 1/2 (50.00%) | 2/2 (100.00%) | 2/2 (100.00%) | 66.67%" in lines
    assert (
        "chartqa_x.jsonl | 1 | 0 | 1/1 (100.00%) | 1/1 (100.00%) | 1/1 (100.00%) | 0.00%" in lines
    )

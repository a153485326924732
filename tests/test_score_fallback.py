"""`vlmrobust score` with the LLM extraction fallback: used only where the rules fail,
through the judge backend and its content-addressed cache (a rerun makes no call)."""

from __future__ import annotations

import csv
import json

from vlmrobust.core.io import write_jsonl
from vlmrobust.core.records import Sample, write_samples

from .api_server import FakeAPIServer
from .conftest import BIN, output_row, run


def _row(sample_id: str, text: str) -> dict:
    return output_row(sample_id, text, dataset="demo-diagram").to_dict()


def test_llm_fallback_only_where_rules_fail_and_cached(tmp_path):
    samples = [
        Sample(
            f"demo-diagram-{i}",
            "demo-diagram",
            ["x.png"],
            "Which shape is largest?",
            "B",
            "letter",
            ["circle", "square", "star"],
        )
        for i in range(3)
    ]
    write_samples(tmp_path / "samples.jsonl", samples)
    write_jsonl(
        tmp_path / "outputs.jsonl",
        [
            _row("demo-diagram-0", "The answer is (B)."),  # the rules find B
            _row("demo-diagram-1", "It must be the one with four equal sides, I think."),
            _row("demo-diagram-2", "Hard to say what the picture shows at all."),
        ],
    )
    with FakeAPIServer() as server:
        server.reply_fn = lambda text, body: "B" if "four equal sides" in text else "NONE"
        fallback = {
            "backend": "openai",
            "model": "judge",
            "base_url": f"{server.url}/v1",
            "api_key_env": None,
            "options": {"max_retries": 1, "base_delay": 0.01},
        }
        cmd = [
            str(BIN / "vlmrobust"),
            "score",
            "--outputs",
            str(tmp_path / "outputs.jsonl"),
            "--samples",
            str(tmp_path / "samples.jsonl"),
            "--scorer",
            "generic",
            "--fallback",
            json.dumps(fallback),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--out",
            str(tmp_path / "scored.csv"),
        ]
        run(cmd, tmp_path)
        assert server.count == 2  # only the two rows the rules could not read
        run(cmd, tmp_path)
        assert server.count == 2  # the rerun is answered from the cache
    with open(tmp_path / "scored.csv") as fh:
        rows = {r["sample_id"]: r for r in csv.DictReader(fh)}
    assert (rows["demo-diagram-0"]["method"], rows["demo-diagram-0"]["correct"]) == ("rule", "1")
    assert (rows["demo-diagram-1"]["method"], rows["demo-diagram-1"]["correct"]) == ("llm", "1")
    assert rows["demo-diagram-2"]["correct"] == "0"
    assert rows["demo-diagram-2"]["prediction"] == ""
    assert rows["demo-diagram-2"]["reason"]

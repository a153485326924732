"""The inference runner: planning, resume from a partial file, hash checks, gathering."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.clients.vlm.base import Backend, Result
from vlmrobust.core.io import read_jsonl, sha256_file, write_jsonl
from vlmrobust.core.records import Sample, Variant, write_samples, write_variants
from vlmrobust.infer.run import (
    Job,
    chain_text,
    gather_outputs,
    read_partial,
    reopen_shard,
    run_inference,
)


class EchoBackend(Backend):
    """Answers every request with a text naming its key; records what it was asked."""

    name = "echo"
    default_batch_size = 2

    def __init__(self, fail: set[str] = frozenset()):
        super().__init__("echo-model", {"options": {}})
        self.asked: list[str] = []
        self.fail = set(fail)

    @property
    def revision(self) -> str:
        return "echo-1"

    def generate(self, requests):
        for r in requests:
            self.asked.append(r.key)
            if r.key in self.fail:
                yield Result(r.key, "", "error", error="HTTP 500 after 3 attempts")
            else:
                yield Result(
                    r.key, f"<think>looking</think>answer for {r.key}", "stop", 10, 5, 0.01
                )


@pytest.fixture
def dataset(tmp_path: Path):
    samples, variants = [], []
    for i in range(5):
        img = tmp_path / f"img{i}.png"
        Image.new("RGB", (40, 30), (i * 40, 0, 0)).save(img)
        sid = f"demo-chart-{i:04d}"
        samples.append(Sample(sid, "demo-chart", [str(img)], f"What is {i}?", str(i), "number"))
        variants.append(
            Variant(
                sid,
                sid,
                "demo-chart",
                "clean",
                "none",
                [str(img)],
                [sha256_file(img)],
                f"What is {i}?",
            )
        )
    write_samples(tmp_path / "samples.jsonl", samples)
    write_variants(tmp_path / "manifest.jsonl", variants)
    return tmp_path


def job(**kw) -> Job:
    base = dict(model="echo-model", model_spec={"options": {}}, prompt="short", max_new_tokens=8)
    return Job(**{**base, **kw})


def run(
    dataset: Path, backend: Backend, context: Path | None = None, **kw
) -> tuple[dict, list[dict]]:
    out = dataset / "out.jsonl"
    stats = run_inference(
        job(**kw),
        dataset / "manifest.jsonl",
        dataset / "samples.jsonl",
        out,
        backend,
        context=context,
    )
    return stats, read_jsonl(out)


def test_rows_in_manifest_order_with_thinking_split(dataset):
    backend = EchoBackend()
    stats, rows = run(dataset, backend)
    assert stats == {"requests": 5, "reused": 0, "generated": 5, "errors": 0, "dropped": 0}
    assert [r["key"] for r in rows] == [f"demo-chart-{i:04d}#0" for i in range(5)]
    first = rows[0]
    assert first["thinking"] == "looking"
    assert first["answer_text"] == "answer for demo-chart-0000#0"
    assert first["prompt"] == "short" and first["prompt_version"]
    assert first["backend"] == "echo" and first["model_revision"] == "echo-1"
    assert first["image_sha256"] == [sha256_file(dataset / "img0.png")]
    assert first["seed"] is None and first["temperature"] == 0.0
    # the resume cache keeps the rows (an engine rerun for another cell reuses them)
    assert (dataset / "out.jsonl.partial").read_bytes() == (dataset / "out.jsonl").read_bytes()


def test_sampled_draws_have_their_own_seeds(dataset):
    _, rows = run(dataset, EchoBackend(), n=3, temperature=0.7, top_p=0.9, seed=11)
    assert len(rows) == 15
    seeds = [r["seed"] for r in rows]
    assert len(set(seeds)) == 15 and all(isinstance(s, int) for s in seeds)
    _, again = run(dataset, EchoBackend(), n=3, temperature=0.7, top_p=0.9, seed=11)
    assert [r["seed"] for r in again] == seeds


def test_resume_keeps_matching_rows_and_regenerates_the_rest(dataset):
    _, rows = run(dataset, EchoBackend())
    partial = dataset / "out.jsonl.partial"
    stale = dict(rows[1], image_sha256=["0" * 64])  # answered for another image
    failed = dict(rows[2], error="timeout", finish_reason="error")  # retried on rerun
    other_prompt = dict(rows[3], prompt="mcq")
    write_jsonl(partial, [rows[0], stale, failed, other_prompt])
    with open(partial, "a") as fh:
        fh.write('{"key": "demo-chart-0004#0", "trunc')  # torn line of a killed job
    (dataset / "out.jsonl").unlink()
    backend = EchoBackend()
    stats, resumed = run(dataset, backend)
    assert backend.asked == [f"demo-chart-{i:04d}#0" for i in (1, 2, 3, 4)]
    assert stats["reused"] == 1 and stats["generated"] == 4 and stats["dropped"] == 3
    assert [r["key"] for r in resumed] == [r["key"] for r in rows]
    assert resumed[0] == rows[0]


def test_failures_are_rows_with_the_reason(dataset):
    stats, rows = run(dataset, EchoBackend(fail={"demo-chart-0002#0"}))
    assert stats["errors"] == 1
    bad = rows[2]
    assert bad["finish_reason"] == "error" and bad["error"] == "HTTP 500 after 3 attempts"
    assert bad["raw_text"] == "" and bad["answer_text"] == ""


def test_shards_split_and_gather_in_manifest_order(dataset):
    outs = []
    for shard in range(2):
        out = dataset / f"shard{shard}.jsonl"
        run_inference(
            job(shard=shard, shards=2),
            dataset / "manifest.jsonl",
            dataset / "samples.jsonl",
            out,
            EchoBackend(),
        )
        outs.append(out)
    assert [len(read_jsonl(o)) for o in outs] == [3, 2]
    n = gather_outputs(outs, dataset / "manifest.jsonl", dataset / "all.jsonl")
    assert n == 5
    assert [r["variant_id"] for r in read_jsonl(dataset / "all.jsonl")] == [
        f"demo-chart-{i:04d}" for i in range(5)
    ]
    with pytest.raises(ValueError, match="no output for 2 variants"):
        gather_outputs(outs[:1], dataset / "manifest.jsonl", dataset / "x.jsonl")
    with pytest.raises(ValueError, match="is in more than one shard"):
        gather_outputs([outs[0], outs[0]], dataset / "manifest.jsonl", dataset / "x.jsonl")


def test_unknown_sample_is_named(dataset):
    rows = read_jsonl(dataset / "manifest.jsonl")
    rows[0]["sample_id"] = "demo-chart-9999"
    write_jsonl(dataset / "manifest.jsonl", rows)
    with pytest.raises(ValueError, match="sample 'demo-chart-9999' is not in the samples file"):
        run(dataset, EchoBackend())


def test_rows_are_json_serializable_and_complete(dataset):
    _, rows = run(dataset, EchoBackend())
    for key in (
        "raw_text",
        "thinking",
        "answer_text",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
        "latency_s",
        "backend",
        "model_revision",
        "image_sha256",
    ):
        assert key in rows[0]
    json.dumps(rows)


class PromptEcho(EchoBackend):
    """Remembers the text of every prompt it was given."""

    def generate(self, requests):
        for r in requests:
            self.asked.append("".join(p["text"] for p in r.content if p["type"] == "text"))
            yield Result(r.key, f"final {r.key}", "stop", 10, 2, 0.01)


def test_second_stage_reads_the_first_stage_chain_and_reruns_when_it_changes(dataset):
    _, cot = run(dataset, EchoBackend(), prompt="crm-cot", temperature=0.2, seed=3)
    assert chain_text(cot[0]) == "looking\n\nanswer for demo-chart-0000#0"
    context = dataset / "cot.jsonl"
    write_jsonl(context, cot)
    backend = PromptEcho()
    stats, rows = run(dataset, backend, context=context, prompt="crm-answer")
    assert stats["generated"] == 5
    assert "Your reasoning:\nlooking\n\nanswer for demo-chart-0000#0\n\n" in backend.asked[0]
    assert all(len(r["context_sha256"]) == 64 for r in rows)
    # a rerun with the same chains reuses every row; a changed chain is asked again
    write_jsonl(dataset / "out.jsonl.partial", rows)
    cot[1] = dict(cot[1], answer_text="another chain")
    write_jsonl(context, cot)
    backend = PromptEcho()
    stats, _ = run(dataset, backend, context=context, prompt="crm-answer")
    assert stats["reused"] == 4 and stats["generated"] == 1
    assert "another chain" in backend.asked[0]


def test_second_stage_without_its_context_is_an_error(dataset):
    with pytest.raises(ValueError, match="pass them with --context"):
        run(dataset, EchoBackend(), prompt="crm-answer")
    context = dataset / "cot.jsonl"
    write_jsonl(context, [])
    with pytest.raises(ValueError, match="no 'crm-cot' output with key 'demo-chart-0000#0'"):
        run(dataset, EchoBackend(), context=context, prompt="crm-answer")


def test_a_rerun_asks_only_the_failed_requests_again(dataset):
    """A request that failed after every retry is no answer: the answered rows stay in the
    partial file and a rerun of the job asks only the failed one again."""
    stats, rows = run(dataset, EchoBackend(fail={"demo-chart-0002#0"}))
    assert stats["errors"] == 1 and rows[2]["error"]
    assert (dataset / "out.jsonl.partial").exists()  # kept for the rerun
    backend = EchoBackend()
    stats, again = run(dataset, backend)
    assert backend.asked == ["demo-chart-0002#0"]
    assert stats == {"requests": 5, "reused": 4, "generated": 1, "errors": 0, "dropped": 1}
    assert again[2]["error"] is None and again[0] == rows[0]
    assert (dataset / "out.jsonl.partial").read_bytes() == (dataset / "out.jsonl").read_bytes()


class OtherCheckpoint(EchoBackend):
    @property
    def revision(self) -> str:
        return "echo-2"


def test_resume_never_mixes_checkpoints(dataset):
    """Rows of a killed job are reused only for the same model settings and revision: a
    model pointed at another checkpoint regenerates them all (and says how many)."""
    _, rows = run(dataset, EchoBackend())
    partial = dataset / "out.jsonl.partial"
    (dataset / "out.jsonl").rename(partial)
    # the same checkpoint path, but the weights changed: another revision
    backend = OtherCheckpoint()
    stats, again = run(dataset, backend)
    assert stats["reused"] == 0 and stats["dropped"] == 5 and len(backend.asked) == 5
    assert {r["model_revision"] for r in again} == {"echo-2"}
    # another checkpoint in the registry (local_path): another model spec
    (dataset / "out.jsonl").rename(partial)
    backend = OtherCheckpoint()
    stats, _ = run(dataset, backend, model_spec={"options": {}, "local_path": "elsewhere"})
    assert stats["dropped"] == 5 and len(backend.asked) == 5
    # the same settings and revision: everything is reused
    (dataset / "out.jsonl").rename(partial)
    stats, _ = run(
        dataset, OtherCheckpoint(), model_spec={"options": {}, "local_path": "elsewhere"}
    )
    assert stats["reused"] == 5 and stats["dropped"] == 0


class SizeRecorder(EchoBackend):
    """Records the size of every image it is shown; counts thinking tokens as words."""

    def __init__(self, reasoning: int | None = None):
        super().__init__()
        self.sizes: list[tuple[int, int]] = []
        self.reasoning = reasoning

    def count_tokens(self, text):
        return len(text.split())

    def generate(self, requests):
        for r in requests:
            for path in r.image_paths:
                with Image.open(path) as im:
                    self.sizes.append(im.size)
            extra = {} if self.reasoning is None else {"reasoning_tokens": self.reasoning}
            text = "<think>two words</think>7" if r.key.endswith("#0") else "7"
            yield Result(r.key, text, "stop", 10, 5, 0.01, extra=extra)


def test_image_size_shows_resized_copies_and_is_recorded(dataset):
    backend = SizeRecorder()
    _, rows = run(dataset, backend, image_size=64, n=2, temperature=0.5)
    assert backend.sizes == [(64, 64)] * 10  # 5 variants x 2 draws, all resized
    # the rows keep the hashes of the variant's own files and say what the model saw
    assert rows[0]["image_sha256"] == [sha256_file(dataset / "img0.png")]
    assert {r["image_size"] for r in rows} == {64}
    assert not (dataset / "out.jsonl.resized").exists()  # the copies are cleaned up
    # another size is another request: nothing is reused
    stats, _ = run(dataset, SizeRecorder(), image_size=32, n=2, temperature=0.5)
    assert stats["reused"] == 0 and stats["generated"] == 10


def test_a_resolution_variant_keeps_its_own_size(dataset):
    rows = [r for r in read_jsonl(dataset / "manifest.jsonl")]
    for r in rows:
        r["params"] = {"kind": "resolution", "resolution": 40}
    write_jsonl(dataset / "manifest.jsonl", rows)
    backend = SizeRecorder()
    run(dataset, backend, image_size=64)
    assert backend.sizes == [(40, 30)] * 5


def test_reasoning_length_from_the_api_else_the_models_tokenizer(dataset):
    # the tokenizer counts the thinking part; a row without one has no length
    _, rows = run(dataset, SizeRecorder(), n=2, temperature=0.5)
    assert [r["thinking_tokens"] for r in rows[:2]] == [2, None]
    # reported reasoning tokens (an API) win over counting
    _, rows = run(dataset, SizeRecorder(reasoning=123), n=2, temperature=0.4)
    assert {r["thinking_tokens"] for r in rows} == {123}


class SlowBackend(EchoBackend):
    """The echo backend, a pause before each answer (a job still generating)."""

    def __init__(self, started, pause: float = 0.2):
        super().__init__()
        self.started, self.pause = started, pause

    def generate(self, requests):
        self.started.set()
        for result in super().generate(requests):
            time.sleep(self.pause)
            yield result


def test_a_duplicate_job_waits_for_the_first_writer_then_reuses_its_rows(dataset, caplog):
    """Two jobs for one shard (a duplicate a killed Snakemake's cluster job still runs):
    the second waits on the shard's lock while the first writes, then finds the
    finished file and generates nothing; no row is lost or written twice."""
    started = threading.Event()
    first = SlowBackend(started)
    out = dataset / "out.jsonl"
    args = (job(), dataset / "manifest.jsonl", dataset / "samples.jsonl", out)
    worker = threading.Thread(target=run_inference, args=(*args, first))
    worker.start()
    assert started.wait(10)
    second = EchoBackend()
    stats = run_inference(*args, second)
    worker.join(30)
    assert "another job writes this shard" in caplog.text
    assert second.asked == [] and stats["generated"] == 0 and stats["reused"] == 5
    assert len(first.asked) == 5
    rows = read_jsonl(out)
    assert [r["key"] for r in rows] == [f"demo-chart-{i:04d}#0" for i in range(5)]
    assert not (dataset / "out.jsonl.lock").exists()


def test_a_job_resumes_from_a_partial_file_a_cancelled_duplicate_left(dataset):
    """A job killed mid-shard (its allocation cancelled) leaves its rows in the partial
    file and the shard's lock file; the next job takes the lock and asks only the rest."""
    out = dataset / "out.jsonl"
    run(dataset, EchoBackend())
    rows = read_jsonl(out)
    out.unlink()
    write_jsonl(dataset / "out.jsonl.partial", rows[:3])
    (dataset / "out.jsonl.lock").write_text("999999")  # left by the killed job, unlocked
    backend = EchoBackend()
    stats, again = run(dataset, backend)
    assert backend.asked == [r["key"] for r in rows[3:]]
    assert stats["reused"] == 3 and [r["key"] for r in again] == [r["key"] for r in rows]


class DecodingEcho(EchoBackend):
    """Echoes like EchoBackend and reports the decoding it was asked for, as the local
    backends do (``Result.extra["generation"]``)."""

    def generate(self, requests):
        for r in requests:
            self.asked.append(r.key)
            yield Result(
                r.key,
                "answer",
                "stop",
                extra={"generation": {"config": r.generation_config, "repetition_penalty": 1.05}},
            )


def test_generation_config_is_the_datasets_else_the_models_and_is_recorded(dataset):
    # the model's registry option, else explicit; a dataset's choice overrides it
    assert job().generation == "explicit"
    model_says = {"options": {"generation_config": "checkpoint"}}
    assert job(model_spec=model_says).generation == "checkpoint"
    assert job(model_spec=model_says, generation_config="explicit").generation == "explicit"
    with pytest.raises(
        ValueError,
        match=r"models.echo-model: generation_config must be one of "
        r"explicit, checkpoint, got 'greedy'",
    ):
        _ = job(generation_config="greedy").generation
    backend = DecodingEcho()
    _, rows = run(dataset, backend, model_spec=model_says)
    assert rows[0]["generation"] == {"config": "checkpoint", "repetition_penalty": 1.05}
    # a backend that reports nothing: the choice alone
    _, plain = run(dataset, EchoBackend(), generation_config="explicit")
    assert plain[0]["generation"] == {"config": "explicit"}


def test_resume_reuses_rows_of_the_same_generation_config_only(dataset):
    _, rows = run(dataset, EchoBackend())
    partial = dataset / "out.jsonl.partial"
    older = {k: v for k, v in rows[1].items() if k != "generation"}  # before it was recorded
    checkpoint = dict(rows[2], generation={"config": "checkpoint"})
    write_jsonl(partial, [rows[0], older, checkpoint])
    (dataset / "out.jsonl").unlink()
    backend = EchoBackend()
    stats, _ = run(dataset, backend)
    # rows 0 and 1 were decoded explicitly (row 1 predates the field); row 2 was not
    assert backend.asked == [f"demo-chart-{i:04d}#0" for i in (2, 3, 4)]
    assert stats["reused"] == 2 and stats["dropped"] == 1
    # the same rows under a dataset's checkpoint choice: none is reused
    backend = EchoBackend()
    stats, again = run(dataset, backend, generation_config="checkpoint")
    assert stats["reused"] == 0 and len(backend.asked) == 5
    assert {r["generation"]["config"] for r in again} == {"checkpoint"}


def _shards(dataset: Path, shards: int, backend: Backend) -> list[Path]:
    """Every shard of the dataset's one cell under a split into ``shards``."""
    folder = dataset / "cell"
    folder.mkdir(exist_ok=True)
    outs = []
    for shard in range(shards):
        out = folder / f"shard{shard}of{shards}.jsonl"
        run_inference(
            job(shard=shard, shards=shards),
            dataset / "manifest.jsonl",
            dataset / "samples.jsonl",
            out,
            backend,
        )
        outs.append(out)
    return outs


def test_a_changed_split_takes_the_earlier_splits_rows_and_its_gathering_removes_them(
    dataset,
):
    """Two shards, then three, then one: each new shard takes its rows from the resume
    caches of the earlier split (the model is asked nothing), the gathering removes the
    earlier split's files, and the rows are the first split's."""
    first = EchoBackend()
    two = _shards(dataset, 2, first)
    gather_outputs(two, dataset / "manifest.jsonl", dataset / "two.jsonl")
    assert len(first.asked) == 5
    for n in (3, 1):
        again = EchoBackend()
        outs = _shards(dataset, n, again)
        assert again.asked == []
        gather_outputs(outs, dataset / "manifest.jsonl", dataset / f"{n}.jsonl")
        assert sorted(p.name for p in (dataset / "cell").iterdir()) == sorted(
            [o.name for o in outs] + [f"{o.name}.partial" for o in outs]
        )
        assert read_jsonl(dataset / f"{n}.jsonl") == read_jsonl(dataset / "two.jsonl")


def test_a_damaged_resume_cache_line_is_dropped_naming_file_and_line(dataset, caplog):
    """Lines that are no row (JSON of another kind, a row without a string key, bytes
    that are not UTF-8, a torn last line) are dropped with a warning naming file and
    line; their requests are asked again, the others not."""
    backend = EchoBackend()
    stats, rows = run(dataset, backend)
    partial = dataset / "out.jsonl.partial"
    lines = partial.read_bytes().splitlines(keepends=True)
    lines[0] = b"[1, 2]\n"
    lines[1] = b'{"key": 7}\n'
    lines[2] = b'{"key": "x\xff"}\n'
    lines[4] = lines[4][:-10]  # torn: no newline
    partial.write_bytes(b"".join(lines))
    (dataset / "out.jsonl").unlink()
    with caplog.at_level("WARNING"):
        assert len(read_partial(partial)) == 1
    said = caplog.text
    assert f"{partial}:1: not an output row (a JSON list without a string key)" in said
    assert f"{partial}:2: not an output row (a JSON dict without a string key)" in said
    assert f"{partial}:3: not UTF-8 (byte 0xff at column 11)" in said
    assert f"{partial}:5: not JSON" in said and "(its last line, cut short)" in said
    again = EchoBackend()
    stats, rows_again = run(dataset, again)
    assert sorted(again.asked) == sorted(r["key"] for i, r in enumerate(rows) if i != 3)
    assert [r["raw_text"] for r in rows_again] == [r["raw_text"] for r in rows]


def test_a_row_with_a_damaged_field_is_asked_again(dataset, caplog):
    backend = EchoBackend()
    run(dataset, backend)
    partial = dataset / "out.jsonl.partial"
    rows = read_jsonl(partial)
    rows[2]["generation"] = "greedy"  # not a mapping
    write_jsonl(partial, rows)
    (dataset / "out.jsonl").unlink()
    again = EchoBackend()
    with caplog.at_level("WARNING"):
        run(dataset, again)
    assert again.asked == [rows[2]["key"]]
    assert f"row {rows[2]['key']!r} has a damaged field (AttributeError" in caplog.text


def test_reopening_a_shard_moves_its_rows_into_the_resume_cache(dataset):
    """A finished shard turned back into its resume cache: the shard removed, every row
    kept (a rerun asks nothing); not while another job holds the shard's lock."""
    from vlmrobust.core.io import exclusive

    out = dataset / "out.jsonl"
    run(dataset, EchoBackend())
    rows = read_jsonl(out)
    (dataset / "out.jsonl.partial").unlink()  # the shard alone holds the rows
    with exclusive(dataset / "out.jsonl.lock"):
        assert not reopen_shard(out) and out.exists()
    assert reopen_shard(out) and not out.exists()
    assert read_jsonl(dataset / "out.jsonl.partial") == rows
    assert not reopen_shard(out)  # nothing there
    again = EchoBackend()
    assert run(dataset, again)[1] == rows and again.asked == []

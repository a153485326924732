"""Failed requests: excluded and counted, and the run's last check (check_requests)."""

from __future__ import annotations

from vlmrobust.cli import main
from vlmrobust.core.io import write_jsonl
from vlmrobust.score.requests import check_requests, failed_requests, shards_of


def _outputs(tmp_path, errors):
    """One gathered output with its shard, ``errors`` of its 4 rows failed."""
    out = tmp_path / "results/outputs/m/d/clean/default.jsonl"
    rows = [
        {"key": f"d-{i}#0", "error": "HTTP 503 after 2 attempts" if i in errors else None}
        for i in range(4)
    ]
    write_jsonl(out, rows)
    shard = out.with_suffix("") / "shard0of1.jsonl"
    write_jsonl(shard, rows)
    return out, shard


def test_exclude_mode_reports_and_succeeds(tmp_path):
    out, shard = _outputs(tmp_path, {1})
    report = tmp_path / "requests.txt"
    status, message = check_requests([out], "exclude", report)
    assert status == 0 and message.startswith("1 request(s) failed after every retry")
    assert f"1\t{out}" in report.read_text()
    assert shard.exists()  # nothing to rerun unless asked (--forcerun infer)


def test_fail_mode_fails_with_the_count_and_asks_again_next_time(tmp_path):
    out, shard = _outputs(tmp_path, {1, 3})
    clean, clean_shard = _outputs(tmp_path / "other", set())
    report = tmp_path / "requests.txt"
    status, message = check_requests([out, clean], "fail", report)
    assert status == 2
    assert f"2 request(s) failed after every retry, in 1 output file(s): {out} (2)" in message
    assert "run snakemake again to ask only those requests again" in message
    # the shard that holds them is removed, so the next run regenerates it (resuming
    # from its partial file: only the failed requests are asked); no report is written
    assert not shard.exists() and clean_shard.exists() and not report.exists()
    # and the output gathered from it (Snakemake rebuilds no shard while it exists)
    assert not out.exists() and clean.exists()
    assert shards_of(clean) == [clean_shard]


def test_no_failure_no_noise(tmp_path):
    out, _ = _outputs(tmp_path, set())
    assert failed_requests([out]) == {}
    assert check_requests([out], "fail", tmp_path / "r.txt") == (0, "no failed requests")


def test_the_command_exits_with_the_status(tmp_path, capsys):
    out, _ = _outputs(tmp_path, {0})
    log = tmp_path / "check.log"
    argv = ["check-requests", "--on-error", "fail", "--out", str(tmp_path / "r.txt")]
    assert main([*argv, "--log", str(log), str(out)]) == 2
    assert "1 request(s) failed" in log.read_text()

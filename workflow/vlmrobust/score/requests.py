"""Failed requests: the outputs whose generation failed after every retry.

A failed request is no answer. Scoring marks its row (``error``), the metrics exclude it
from every number and count it (notes, warnings.txt); this module is the run's last
check (rule ``check_requests``): it lists every failed request by output file and, with
``scoring.on_request_error: fail``, fails the run with the count and removes the shard
files that hold them and the outputs gathered from them, so that the next run gathers
them again after asking those requests again, and only them (the answered rows of each
shard wait in ``<shard>.partial``, see :func:`vlmrobust.infer.run.run_inference`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..core.io import atomic_write_text, read_jsonl

MODES = ("fail", "exclude")


def failed_requests(outputs: Iterable[str | Path]) -> dict[str, int]:
    """Output file -> number of rows whose request failed (files without any left out)."""
    found = {}
    for path in outputs:
        n = sum(1 for row in read_jsonl(path) if row.get("error"))
        if n:
            found[str(path)] = n
    return found


def shards_of(output: str | Path) -> list[Path]:
    """The shard files an output was gathered from (``<output>/shard<i>of<n>.jsonl``)."""
    folder = Path(output).with_suffix("")
    return sorted(folder.glob("shard*of*.jsonl"))


def check_requests(outputs: Iterable[str | Path], mode: str, report: Path) -> tuple[int, str]:
    """Write the report of failed requests; return (exit status, message)."""
    if mode not in MODES:
        raise ValueError(f"scoring.on_request_error: {mode!r} is not one of {', '.join(MODES)}")
    found = failed_requests(outputs)
    total = sum(found.values())
    lines = [f"{n}\t{path}" for path, n in sorted(found.items())]
    if not found:
        atomic_write_text(report, "no failed requests\n")
        return 0, "no failed requests"
    message = (
        f"{total} request(s) failed after every retry, in {len(found)} output file(s): "
        + "; ".join(f"{path} ({n})" for path, n in sorted(found.items()))
    )
    if mode == "exclude":
        atomic_write_text(
            report,
            "failed requests (excluded from the metrics and counted in their notes):\n"
            + "\n".join(lines)
            + "\n",
        )
        return 0, message + "; excluded from the metrics (scoring.on_request_error: exclude)"
    for path in found:
        for shard in shards_of(path):
            shard.unlink()
        # the gathered file too: while it exists Snakemake would not rebuild its shards
        Path(path).unlink(missing_ok=True)
    return 2, (
        message + ". The tables exclude them and say so; the run fails "
        "(scoring.on_request_error: fail): run snakemake again to ask only those requests "
        "again, or set scoring.on_request_error: exclude to accept the exclusion"
    )

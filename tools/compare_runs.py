"""Compare the tables (and metrics) of two runs of the workflow, file by file.

    python tools/compare_runs.py BEFORE_DIR AFTER_DIR [--glob 'results/tables/**/*.csv' ...]

BEFORE_DIR and AFTER_DIR are working directories of two runs (each with its results/
and figures/). By default every CSV under results/tables/ and results/metrics/ is
compared byte for byte; a file present in one run only is a difference too. Exit status
0 when everything is identical, 1 otherwise (each difference is printed, with the first
differing line of a CSV). Used to check that a refactoring changed no number.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_GLOBS = ("results/tables/**/*.csv", "results/metrics/**/*.csv")


def files(root: Path, globs: list[str]) -> set[str]:
    return {str(p.relative_to(root)) for g in globs for p in root.glob(g) if p.is_file()}


def first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.decode(errors="replace").splitlines(), b.decode(errors="replace").splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x != y:
            return f"line {i}:\n    - {x}\n    + {y}"
    return f"{len(la)} vs {len(lb)} lines"


def compare(before: Path, after: Path, globs: list[str]) -> list[str]:
    """Every difference between the two runs' files, as printable lines."""
    a, b = files(before, globs), files(after, globs)
    problems = [f"only in {before}: {f}" for f in sorted(a - b)]
    problems += [f"only in {after}: {f}" for f in sorted(b - a)]
    for name in sorted(a & b):
        x, y = (before / name).read_bytes(), (after / name).read_bytes()
        if x != y:
            problems.append(f"differs: {name} ({first_difference(x, y)})")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--glob", action="append", help="files to compare (repeatable)")
    args = ap.parse_args(argv)
    globs = args.glob or list(DEFAULT_GLOBS)
    problems = compare(args.before, args.after, globs)
    n = len(files(args.before, globs) | files(args.after, globs))
    for line in problems:
        print(line)
    print(f"{n} files compared, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

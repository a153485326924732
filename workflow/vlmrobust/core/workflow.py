"""Support for the Snakefile (kept here so the rule files stay declarative)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path


def ensure_cli_on_path() -> None:
    """Make the ``vlmrobust`` script reachable by the rules' shell commands.

    When snakemake runs from a virtual environment that is not activated
    (``.venv/bin/snakemake``), its scripts are not on PATH; conda environments, when
    used, put their own first.
    """
    if shutil.which("vlmrobust") is None:
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


def alternation(names: Iterable[str]) -> str:
    """A regular expression matching exactly one of ``names`` (wildcard constraints)."""
    names = list(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"

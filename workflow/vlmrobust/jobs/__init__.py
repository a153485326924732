"""The jobs the workflow's rules run, one function per ``vlmrobust`` subcommand.

Each function takes exactly its command's options as keyword arguments (the files it
reads and writes, and its part of the configuration as a JSON ``spec`` the rule passes),
does the stage's work and logs one summary line; it returns the command's exit status
(0, or None for 0). The rules are the one route that resolves a job's files and
parameters from the configuration (through the run plan, :mod:`vlmrobust.plan`); to run one
job by hand, ``snakemake -n -p --forcerun FILE`` prints its exact command and
``snakemake --cores 1 --forcerun FILE`` runs it. These functions sit above the stages
(a job may combine two, e.g. scoring the re-answers of the attention-blocking stage) and
below the CLI, which only gathers the command tables and dispatches.

Each module ``jobs/<stage>.py`` ends with its command table, ``COMMANDS``: subcommand ->
:class:`~vlmrobust.core.commands.Command` (the job function, its help, its arguments);
an argument several commands share is declared once, in :mod:`vlmrobust.jobs.args`. The
CLI imports every such module to read its table, so a job imports its heavy libraries
(torch, pandas, ...) inside its function, never at the module's top.

To add a job: the job function and its command entry in ``jobs/<stage>.py`` (a new
module also goes into ``JOBS`` of :mod:`vlmrobust.cli`; a new command into its ``ORDER``
to have a place in ``vlmrobust --help`` other than the end), and the rule that runs it in
the stage's ``workflow/rules/<stage>.smk``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..core.config import ConfigError

log = logging.getLogger("vlmrobust")


def json_arg(text: str | None, what: str) -> Any:
    """``text`` parsed as JSON (None stays None); a ConfigError naming ``what``."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from exc


def json_object(text: str, what: str = "--spec") -> dict[str, Any]:
    """``text`` parsed as a JSON object (a job's ``--spec``)."""
    value = json_arg(text, what)
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a JSON object")
    return value


def set_threads(threads: int | None) -> None:
    """torch's CPU threads for this process (0 or None: torch's own choice)."""
    if threads:
        import torch

        torch.set_num_threads(threads)

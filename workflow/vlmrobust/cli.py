"""``vlmrobust``: one subcommand per job of the workflow, so every step runs without
Snakemake.

Each jobs module (``jobs/<stage>.py``) declares its commands beside its job functions, a
table ``COMMANDS`` (subcommand -> function, help, arguments; the arguments several
commands share are declared once, in ``jobs/args.py``); the demo brings its own table.
This module gathers the tables (:data:`COMMANDS`), builds the parser and calls a
command's function with the parsed options as keyword arguments (a job imports its heavy
libraries only when it runs). A job is given every file it reads and writes and its part
of the configuration (the rule's ``--spec`` JSON). To run one by hand,
``snakemake -n -p --forcerun FILE`` prints its exact command and
``snakemake --cores 1 --forcerun FILE`` reruns it (FILE: one it writes).

The study commands (``metrics``, ``table``, ``figure``, ``page``, ``views``) also take
``--config FILE``, the reviewers' route from released files to the tables and figures::

    vlmrobust table table1 --study corruption --config config/config.yaml
"""

from __future__ import annotations

import argparse
import logging
import sys
from importlib import import_module

from vlmrobust_demo.commands import DEMO_COMMANDS

from . import __version__
from .core.commands import Command
from .core.config import ConfigError

log = logging.getLogger("vlmrobust")
#: the jobs modules (``vlmrobust.jobs.<stage>``), each with its table ``COMMANDS``
JOBS = ("forecast", "data", "perturb", "infer", "llm_engine", "preflight", "score", "judges")
JOBS += ("construct", "review", "explorer", "study")
#: every command table: the jobs modules' and the demo's
TABLES = (*(import_module(f"vlmrobust.jobs.{job}").COMMANDS for job in JOBS), DEMO_COMMANDS)
#: the order of ``vlmrobust --help``; a command not named here comes after these
ORDER = (
    *("check-config", "demo-data", "demo-idis", "demo-model", "demo-standins", "demo-seeds"),
    *("forecast", "balance", "samples", "write-questions", "variants", "infer"),
    *("infer-engine", "llm-engine", "vllm-serve", "preflight", "gather", "import-outputs"),
    *("import-verdicts", "score", "score-summary", "check-requests", "score-released"),
    *("judge-reference", "judge-mathverse", "judge-attributes", "idis-areas"),
    *("block-attention", "judge-agreement", "compare-masking", "judge-hallucination"),
    *("construct", "review", "idis-review", "concepts", "concepts-review"),
    *("explorer-variants", "explorer-cell", "explorer-cells", "explorer-index"),
    *("metrics", "table", "figure", "page", "views"),
)


def gather(tables: tuple[dict[str, Command], ...]) -> dict[str, Command]:
    """The tables as one, in :data:`ORDER`; a command in two tables is an error."""
    commands: dict[str, Command] = {}
    for table in tables:
        for name in table.keys() & commands.keys():
            raise ValueError(f"command {name!r} is declared in two tables")
        commands.update(table)
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(commands.items(), key=lambda item: rank.get(item[0], len(ORDER))))


#: subcommand -> (function, help, arguments): the whole command line
COMMANDS: dict[str, Command] = gather(TABLES)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vlmrobust",
        description="Stages of the vlmrobust workflow (each one is a Snakemake rule).",
    )
    p.add_argument("--version", action="version", version=f"vlmrobust {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        s = sub.add_parser(name, help=command.help, description=command.help)
        for a in command.args:
            s.add_argument(*a.flags, **a.kwargs)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    options = {k: v for k, v in vars(args).items() if k not in ("command", "verbose")}
    try:
        return COMMANDS[args.command].function()(**options) or 0
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        print(f"vlmrobust {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

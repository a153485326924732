"""The command tables the CLI gathers (each jobs module's ``COMMANDS``, the demo's): every
command declared in one table, every argument declaration made once, and the startup
free of the jobs' heavy libraries."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import pytest

from vlmrobust import cli
from vlmrobust.core.commands import Command, arg


def test_every_command_is_declared_in_one_table():
    names = [name for table in cli.TABLES for name in table]
    assert sorted(names) == sorted(cli.COMMANDS)
    assert len(set(names)) == len(names)


def test_a_command_in_two_tables_is_refused():
    command = Command(print, "a command")
    with pytest.raises(ValueError, match="'twice' is declared in two tables"):
        cli.gather(({"twice": command}, {"once": command, "twice": command}))


def test_the_help_order_is_the_declared_one():
    """The commands named in ORDER come in its order; one it does not name comes last."""
    assert set(cli.ORDER) <= set(cli.COMMANDS)
    assert list(cli.COMMANDS)[: len(cli.ORDER)] == list(cli.ORDER)
    command = Command(print, "a command")
    extra = cli.gather(({"zz-new": command}, {cli.ORDER[1]: command, cli.ORDER[0]: command}))
    assert list(extra) == [cli.ORDER[0], cli.ORDER[1], "zz-new"]


def declared_twice(commands: dict[str, Command]) -> dict[str, list[str]]:
    """Each argument (flags, help and all) declared more than once -> the commands using it."""
    declared: dict[str, set[int]] = defaultdict(set)
    used_by: dict[str, list[str]] = defaultdict(list)
    for name, command in commands.items():
        for a in command.args:
            key = repr((a.flags, sorted(a.kwargs.items())))
            declared[key].add(id(a))
            used_by[key].append(name)
    return {key: used_by[key] for key, ids in declared.items() if len(ids) > 1}


def test_no_argument_is_declared_twice():
    """Two commands with the same argument share one declaration (``vlmrobust.jobs.args``),
    so the two cannot drift apart."""
    assert declared_twice(cli.COMMANDS) == {}


def test_the_check_catches_a_second_declaration():
    shared = arg("--x", help="an x")
    once = {"a": Command(print, "a", (shared,)), "b": Command(print, "b", (shared,))}
    assert declared_twice(once) == {}
    twice = {**once, "c": Command(print, "c", (arg("--x", help="an x"),))}
    assert list(declared_twice(twice).values()) == [["a", "b", "c"]]


def test_the_help_imports_no_heavy_library():
    """Reading the tables imports every jobs module: their heavy imports stay inside the
    job functions."""
    code = (
        "import sys\nfrom vlmrobust.cli import build_parser\nbuild_parser()\n"
        "heavy = ('torch', 'transformers', 'pandas', 'numpy', 'matplotlib', 'vllm')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"

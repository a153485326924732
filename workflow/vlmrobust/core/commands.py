"""The records of a command table: a subcommand's function, help and arguments.

Each jobs module declares its commands as such a table (``COMMANDS`` of
``vlmrobust.jobs.<stage>``), the demo package its own (``DEMO_COMMANDS``); the
``vlmrobust`` CLI gathers them into one (:data:`vlmrobust.cli.COMMANDS`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Arg:
    """One argparse argument: its flags and keyword arguments."""

    flags: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def arg(*flags: str, **kwargs: Any) -> Arg:
    return Arg(flags, kwargs)


@dataclass(frozen=True)
class Command:
    """A subcommand: the function that runs it (a function of the table's module, or
    ``"module:function"``, the module absolute or relative to :mod:`vlmrobust.jobs`
    (``".score"``), imported only when the command runs), its help and
    its arguments. The function gets the parsed options as keyword arguments and
    returns the exit status (None: 0)."""

    run: Callable[..., int | None] | str
    help: str
    args: tuple[Arg, ...] = ()

    def function(self) -> Callable[..., int | None]:
        if callable(self.run):
            return self.run
        module, name = self.run.split(":")
        return getattr(importlib.import_module(module, "vlmrobust.jobs"), name)


def required(*flags: str, **kwargs: Any) -> Arg:
    return arg(*flags, required=True, **kwargs)

"""Rounds of asks from threads, answered by one call: how an engine pools its cells.

An engine job runs its cells in threads that share one loaded model. Each cell asks the
model for a list of items (requests) and waits; once every live cell has asked (or
finished: :meth:`RoundPool.leave`), one call of the model answers every waiting ask
together, in the order the cells asked. The call is made by the thread whose ask or
departure completes the round, the only two events that can. No cell starves: a round
takes every waiting ask. A failed call fails every ask of its round with its error.

Used by the VLM engines (:mod:`vlmrobust.infer.engine`: requests of many cells in one
``generate``) and the LLM engines (:mod:`vlmrobust.jobs.llm_engine`: a judge's calls
of many judged files in one engine call).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RoundPool"]


@dataclass
class _Ask:
    """One cell's ask waiting in the pool: its items, then its answer (or the round's
    error) and the event that says it is there."""

    items: list[Any]
    done: threading.Event = field(default_factory=threading.Event)
    got: Any = None
    error: Exception | None = None


class RoundPool:
    """``live`` threads asking; ``call`` answers a round: given each waiting ask's items
    (in the order asked) it returns one answer per ask, in that order."""

    def __init__(self, call: Callable[[list[list[Any]]], Sequence[Any]], live: int):
        self.call = call
        self.live = live
        self.waiting: list[_Ask] = []
        self.lock = threading.Lock()

    def ask(self, items: list[Any]) -> Any:
        """Wait for the round that answers ``items``; return this ask's answer."""
        ask = _Ask(list(items))
        with self.lock:
            self.waiting.append(ask)
            self._call_when_complete()
        ask.done.wait()
        if ask.error is not None:
            raise RuntimeError(str(ask.error)) from ask.error
        return ask.got

    def leave(self) -> None:
        """A thread is done asking: the others no longer wait for it."""
        with self.lock:
            self.live -= 1
            self._call_when_complete()

    def _call_when_complete(self) -> None:
        """One call for every waiting ask once every live thread waits (the lock is
        held)."""
        if not self.waiting or len(self.waiting) < self.live:
            return
        batch, self.waiting = self.waiting, []
        try:
            answers = self.call([a.items for a in batch])
            for a, answer in zip(batch, answers, strict=True):
                a.got = answer
        except Exception as exc:  # every waiting ask fails with the call's error
            for a in batch:
                a.error = exc
        for a in batch:
            a.done.set()

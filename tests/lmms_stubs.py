"""Importing lmms-eval's Qwen chat wrappers without their optional video library.

``lmms_eval.models.simple.qwen2_5_vl`` (the base class of the Qwen2.5-VL chat wrapper)
imports ``decord`` unconditionally, a video reader that is not installed here (no
image task needs it; the chat wrapper itself imports it under ``try``). The tests
stub it: :func:`wrapper_imports` puts an empty module under ``sys.modules["decord"]``
while the wrapper modules are imported, and takes it away afterwards, so nothing else
in the session sees a ``decord`` that is not there (``importlib.util.find_spec``
would fail on a stub without a spec). The imported wrapper modules keep their
reference to the stub; calling a video path would fail on it, which no test does.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator

#: The optional imports the wrappers need and the tests stub (name -> why).
STUBS = {"decord": "video reader imported by lmms_eval.models.simple.qwen2_5_vl"}


@contextlib.contextmanager
def wrapper_imports() -> Iterator[None]:
    """:data:`STUBS` in ``sys.modules`` for the duration (the real module where one is
    installed), removed afterwards."""
    added = [name for name in STUBS if name not in sys.modules]
    for name in added:
        sys.modules[name] = types.ModuleType(name, f"test stub: {STUBS[name]}")
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


def chat_wrapper(model_name: str) -> type:
    """The class lmms-eval itself resolves for ``--model <model_name>``
    (``lmms_eval.models.get_model``; its registry prefers the chat wrapper), imported
    with :func:`wrapper_imports`."""
    from vlmrobust.core import harness

    with wrapper_imports(), harness._openai_placeholder():
        from lmms_eval.models import get_model

        return get_model(model_name)

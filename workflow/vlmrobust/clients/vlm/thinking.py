"""Split a reasoning model's output into its thinking and its answer.

Families mark their reasoning differently: ``<think>...</think>`` (R1-OneVision,
Vision-R1, MM-Eureka, OpenVLThinker, GLM-4.1V-Thinking, Intern-S1), only the closing
``</think>`` when the chat template already opened the block (Qwen3-VL-Thinking),
``◁think▷...◁/think▷`` (Kimi-VL). Some wrap the final answer in ``<answer>...</answer>``
(GLM-4.1V-Thinking, R1-OneVision). A model's registry ``options.thinking_markers``
(a list of ``[open, close]`` pairs) overrides the defaults.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

DEFAULT_MARKERS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("◁think▷", "◁/think▷"),
)
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)


def split_thinking(
    text: str, markers: Sequence[Sequence[str]] | None = None
) -> tuple[str | None, str]:
    """Return ``(thinking, answer)``; thinking is None when the text has no markers.

    A block that was opened but never closed (generation stopped while thinking) is
    all thinking: the answer is empty, and scoring records that no answer was given.
    """
    for open_tag, close_tag in markers or DEFAULT_MARKERS:
        close_at = text.rfind(close_tag)
        if close_at >= 0:
            thinking = text[:close_at]
            open_at = thinking.find(open_tag)
            if open_at >= 0:
                thinking = thinking[open_at + len(open_tag) :]
            answer = text[close_at + len(close_tag) :]
            return thinking.strip(), _unwrap_answer(answer)
        open_at = text.find(open_tag)
        if open_at >= 0:
            before = text[:open_at].strip()
            return text[open_at + len(open_tag) :].strip(), _unwrap_answer(before)
    if "<answer>" in text:
        return None, _unwrap_answer(text)
    return None, text.strip()


def _unwrap_answer(text: str) -> str:
    match = _ANSWER_TAG.search(text)
    return (match.group(1) if match else text).strip()

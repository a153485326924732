"""The split of reasoning models' outputs into thinking and answer."""

from __future__ import annotations

import pytest

from vlmrobust.clients.vlm.thinking import split_thinking


@pytest.mark.parametrize(
    "text, thinking, answer",
    [
        ("The answer is B.", None, "The answer is B."),
        ("<think>add 2 and 3</think>\nThe answer is 5.", "add 2 and 3", "The answer is 5."),
        # Qwen3-VL-Thinking: the template opened the block, only </think> is generated.
        ("count the bars\n</think>\n\n7", "count the bars", "7"),
        # GLM-4.1V-Thinking / R1-OneVision: answer wrapped in <answer>.
        ("<think>x</think><answer>\\boxed{C}</answer>", "x", "\\boxed{C}"),
        ("<answer>yes</answer>", None, "yes"),
        # Truncated while thinking: all thinking, no answer.
        ("<think>first, the triangle is", "first, the triangle is", ""),
        ("◁think▷look◁/think▷A", "look", "A"),
        # Several blocks: everything up to the last closing tag is thinking.
        ("<think>a</think>b<think>c</think>d", "a</think>b<think>c", "d"),
        ("", None, ""),
    ],
)
def test_split_thinking(text, thinking, answer):
    assert split_thinking(text) == (thinking, answer)


def test_custom_markers():
    assert split_thinking("[R]why[/R] 42", [["[R]", "[/R]"]]) == ("why", "42")
    assert split_thinking("<think>a</think>b", [["[R]", "[/R]"]]) == (None, "<think>a</think>b")

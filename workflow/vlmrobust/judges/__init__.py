"""Judges that read model outputs: the Distract-Bench distractor-reference judge
(:mod:`vlmrobust.judges.reference`: LLM or offline, DRR / HFR / Ref_correct / Ref_wrong,
agreement with the released judgments)."""

from .reference import (
    PROMPT_VERSION,
    REFERENCE_SCHEMA,
    LLMReferenceJudge,
    OfflineReferenceJudge,
    ReferenceItem,
    agreement,
    build_reference_prompt,
    describe_outputs,
    find_anchors,
    judge_reference,
    load_released_references,
    make_reference_judge,
)

__all__ = [
    "PROMPT_VERSION",
    "REFERENCE_SCHEMA",
    "LLMReferenceJudge",
    "OfflineReferenceJudge",
    "ReferenceItem",
    "agreement",
    "build_reference_prompt",
    "describe_outputs",
    "find_anchors",
    "judge_reference",
    "load_released_references",
    "make_reference_judge",
]

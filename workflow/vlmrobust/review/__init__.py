"""Human verification of constructed distraction samples (Distract-Bench §3; docs/studies/distraction.md).

Every generated sample (a *candidate*: question, choices, answer, original and edited
image, distractor description, trap reasoning path and answer, edit instruction) is
checked by a person against the paper's four criteria (:data:`CRITERIA`): obvious
semantics; factually correct and plausible; irrelevant to the query, answer preserved;
optionally leads to a dead end. The verdicts live in a decisions CSV under
``resources/`` (format: :mod:`vlmrobust.core.decisions`); only accepted samples go
downstream, undecided ones do not.

- :mod:`vlmrobust.core.decisions` (re-exported here): the candidates and decisions
  files, their validation, and :func:`apply_decisions` (accepted ids + report); they
  live in core because the ``constructed`` dataset adapter reads them too;
- :mod:`.page`: the self-contained HTML review page;
- :mod:`.server`: a local ``http.server`` that serves the page and the images and saves
  each click to the decisions file (``vlmrobust review``).

The same page and file serve the Idis study's verification of its constructed images
(the Idis paper's appendix A.3): a decisions file belongs to a *criteria set*
(:data:`CRITERIA_SETS`: ``distraction``, the default, ``idis-perception`` and
``idis-math``), and :mod:`.idis` turns the variant manifest of an Idis image
perturbation into candidates (``vlmrobust idis-review``). :mod:`.concepts` serves a page
on which a person confirms or corrects the proposed concept family of each MathVerse
problem (``vlmrobust concepts-review``; the labels file:
:mod:`vlmrobust.core.concept_labels`).
"""

from ..core.decisions import (
    COLUMNS,
    CRITERIA,
    CRITERIA_SETS,
    DECISIONS,
    DEFAULT_CRITERIA_SET,
    IDIS_MATH_CRITERIA,
    IDIS_PERCEPTION_CRITERIA,
    OPTIONAL_CRITERIA,
    REQUIRED_CRITERIA,
    Candidate,
    Decision,
    DecisionError,
    apply_decisions,
    get_criteria_set,
    make_decision,
    read_candidates,
    read_decisions,
    remove_decision,
    write_decision,
    write_decisions,
)
from .idis import idis_candidates
from .page import build_review_page, render_review_page

__all__ = [
    "COLUMNS",
    "CRITERIA",
    "CRITERIA_SETS",
    "DECISIONS",
    "DEFAULT_CRITERIA_SET",
    "IDIS_MATH_CRITERIA",
    "IDIS_PERCEPTION_CRITERIA",
    "OPTIONAL_CRITERIA",
    "REQUIRED_CRITERIA",
    "Candidate",
    "Decision",
    "DecisionError",
    "apply_decisions",
    "build_review_page",
    "get_criteria_set",
    "idis_candidates",
    "make_decision",
    "read_candidates",
    "read_decisions",
    "remove_decision",
    "render_review_page",
    "write_decision",
    "write_decisions",
]

"""Jobs of human review: the candidates' review, an Idis condition's verification and
the confirmation of concept families (a local page that writes a decisions file)."""

from __future__ import annotations

import sys
from typing import Any

from ..core.commands import Command, arg, required
from .args import DECIDE, SERVE


def review(
    candidates: Any,
    decisions: str,
    host: str,
    port: int,
    image_base: str | None,
    reviewer: str | None,
    page: str | None,
    report: bool,
    **options: Any,
) -> int:
    """Serve, write or report the review of ``candidates`` (a candidates file, or rows)
    with the decisions file; ``options`` go to :func:`vlmrobust.review.server.review`."""
    from ..review.server import review as serve

    return serve(
        candidates,
        decisions,
        host=host,
        port=port,
        image_base=image_base,
        reviewer=reviewer,
        page=page,
        report=report,
        **options,
    )


def idis_review(manifest: str, samples: str, set: str, **decide: Any) -> int:  # noqa: A002
    """Human verification of an Idis condition's images (the Idis paper's A.3 criteria)."""
    from ..core.decisions import DecisionError
    from ..review.idis import idis_candidates

    try:
        candidates = idis_candidates(manifest, samples)
    except (DecisionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return review(candidates, criteria_set=set, **decide)


def concepts_review(
    labels: str, samples: str, host: str, port: int, image_base: str | None, report: bool
) -> int:
    """Confirm or correct the proposed concept families of MathVerse problems."""
    from ..review.concepts import concepts_review as serve

    return serve(labels, samples, host=host, port=port, image_base=image_base, report=report)


#: human review's commands
COMMANDS: dict[str, Command] = {
    "review": Command(
        review,
        "human verification: serve the review page that writes the decisions file",
        (required("--candidates", help="candidates JSONL"), *DECIDE),
    ),
    "idis-review": Command(
        idis_review,
        "human verification of an Idis condition's images (A.3 criteria) -> decisions file",
        (
            required("--manifest", help="variant manifest of an Idis image condition"),
            required("--samples", help="samples JSONL the variants were built from"),
            required(
                "--set",
                choices=["idis-perception", "idis-math"],  # IDIS_CRITERIA_SETS (lazy import)
                help="criteria set the page shows and the decisions are checked against",
            ),
            *DECIDE,
        ),
    ),
    "concepts-review": Command(
        concepts_review,
        "confirm the proposed concept family of each MathVerse problem -> labels CSV",
        (
            required("--labels", help="concept-family labels CSV (rewritten in place)"),
            required("--samples", help="MathVerse samples JSONL (the diagrams)"),
            *SERVE,
            arg("--report", action="store_true", help="print the label counts"),
        ),
    ),
}

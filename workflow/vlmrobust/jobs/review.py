"""Jobs of human review: the candidates' review, an Idis condition's verification and
the confirmation of concept families (a local page that writes a decisions file)."""

from __future__ import annotations

import sys
from typing import Any


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

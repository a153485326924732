"""The studies: each module of this package defines one :class:`~.base.Study` as
``STUDY``; :data:`STUDIES` finds them all, so adding a study is adding a module.

The workflow's generic ``metrics``, ``table``, ``figure`` and ``page`` rules and the
CLI's commands of the same names loop over :data:`STUDIES`.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..plan import RunPlan
from .base import Study


def _discover() -> dict[str, Study]:
    found: dict[str, Study] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base":
            continue
        study = getattr(importlib.import_module(f"{__name__}.{info.name}"), "STUDY", None)
        if isinstance(study, Study):
            if study.name in found:
                raise RuntimeError(f"two studies are named {study.name!r}")
            found[study.name] = study
    return found


#: every study by name (corruption, distraction, masking, ...)
STUDIES: dict[str, Study] = _discover()


def get_study(name: str) -> Study:
    try:
        return STUDIES[name]
    except KeyError:
        raise ValueError(f"unknown study {name!r} (known: {', '.join(STUDIES)})") from None


def study_folders(plan: RunPlan) -> dict[str, tuple[Study, str]]:
    """Folder (``corruption``, ``distraction/<dataset>``) -> (study, scope) of this run."""
    return {
        study.folder(scope): (study, scope)
        for study in STUDIES.values()
        for scope in study.scopes(plan)
    }


__all__ = ["STUDIES", "Study", "get_study", "study_folders"]

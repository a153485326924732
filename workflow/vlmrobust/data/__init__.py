"""Datasets -> samples: one adapter per benchmark, one conversion for all.

``build_samples(name, spec, out, report)`` turns the configured dataset ``name``
(``spec`` = its validated config) into ``out`` (samples JSONL, images under
``out.parent / "images"``) and a JSON report. ``ADAPTERS`` maps adapter names to
:class:`Adapter` objects whose ``hub_id``, ``hub_config`` and ``split`` attributes are
the defaults a config may leave ``null``.
"""

from .adapters import ADAPTERS
from .base import Adapter, BadRowError, Draft, load_image
from .build import build_samples

__all__ = ["ADAPTERS", "Adapter", "BadRowError", "Draft", "build_samples", "load_image"]

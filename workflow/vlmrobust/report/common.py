"""What the views of every study share: the models in display order (families, bases
first), family labels and row groups, table footnotes, and one view built by name."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from vlmrobust.core.io import atomic_write_bytes
from vlmrobust.metrics.index import MetricsIndex
from vlmrobust.report.tables.render import DASH

#: The ``benchmark`` of rows pooled over every benchmark.
POOLED = "all"
ROLE_LABELS = {"base": "Base", "reasoning": "Reas.", "closed": "Closed-s."}
DPI = 150
#: No timestamps or version strings that change between runs.
PNG_METADATA: dict[str, Any] = {"Software": None}
PDF_METADATA: dict[str, Any] = {"CreationDate": None, "ModDate": None, "Creator": "vlmrobust"}
#: Figure sizes are multiples of this (inches), so pixel sizes are whole at 150 dpi.
_STEP = 0.2


def snap(inches: float) -> float:
    """A figure size rounded up to a multiple of 0.2 in (whole pixels at 150 dpi)."""
    return round(math.ceil(inches / _STEP - 1e-9) * _STEP, 1)


def write_figures(figures: Mapping[str, Figure], out_dir: str | Path) -> list[Path]:
    """Every figure of ``figures`` (file stem -> Figure) as .png/.pdf under ``out_dir``."""
    return [
        path for stem, fig in figures.items() for path in save_figure(fig, Path(out_dir) / stem)
    ]


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """``<stem>.png`` and ``<stem>.pdf``, byte-reproducible (no timestamps)."""
    paths = []
    for fmt, meta in (("png", PNG_METADATA), ("pdf", PDF_METADATA)):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=meta)
        path = stem.with_name(f"{stem.name}.{fmt}")
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths


@dataclass(frozen=True)
class ModelInfo:
    id: str
    name: str
    family: str
    role: str
    base: str

    @property
    def type_label(self) -> str:
        return ROLE_LABELS.get(self.role, self.role.title() if self.role else "")


def _registry_entry(spec: Mapping[str, Any], model: str) -> Mapping[str, Any]:
    entry = (spec.get("models") or {}).get(model)
    return entry if isinstance(entry, Mapping) else {}


def ordered_models(index: MetricsIndex, spec: Mapping[str, Any]) -> list[ModelInfo]:
    """The run's models (``model_order``, then any other model in the metrics, sorted),
    grouped by family in order of first appearance: bases first, then the others."""
    order = [str(m) for m in spec.get("model_order") or []]
    ids = list(dict.fromkeys(order + [m for m in index.models() if m not in order]))
    fallback: dict[str, dict[str, str]] = {}
    for row in index.records:
        info = fallback.setdefault(row["model"], {})
        for key in ("family", "role"):
            if row[key] and key not in info:
                info[key] = row[key]
        if row["base_model"] and row["metric"] not in _PAIR_METRICS and "base" not in info:
            info["base"] = row["base_model"]
    infos = []
    for mid in ids:
        entry = _registry_entry(spec, mid)
        meta = fallback.get(mid, {})
        infos.append(
            ModelInfo(
                id=mid,
                name=str(entry.get("name") or mid),
                family=str(entry.get("family") or meta.get("family") or mid),
                role=str(entry.get("role") or meta.get("role") or ""),
                base=str(entry.get("base") or meta.get("base") or ""),
            )
        )
    families = list(dict.fromkeys(m.family for m in infos))
    out: list[ModelInfo] = []
    for fam in families:
        members = [m for m in infos if m.family == fam]
        out += [m for m in members if m.role == "base"]
        out += [m for m in members if m.role != "base"]
    return out


_PAIR_METRICS = frozenset(
    {"pair_n", "agreement", "retention_gap", "error_jaccard", "rr_fingerprint_corr"}
)


def family_label(family: str, spec: Mapping[str, Any]) -> str:
    """A family's display name: ``spec["families"][id]["name"]`` or from the id
    ("qwen2.5-vl" -> "Qwen2.5-VL")."""
    entry = (spec.get("families") or {}).get(family)
    if isinstance(entry, Mapping) and entry.get("name"):
        return str(entry["name"])
    if isinstance(entry, str) and entry:
        return entry
    parts = []
    for part in family.split("-"):
        if len(part) <= 2 and part.isalpha():
            parts.append(part.upper())
        elif part.lower().startswith("gpt"):
            parts.append("GPT" + part[3:])
        else:
            parts.append(part[:1].upper() + part[1:])
    return "-".join(parts)


def family_groups(models: list[ModelInfo], spec: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """Row groups ("<Family> family", n) for consecutive models of one family."""
    groups: list[tuple[str, int]] = []
    last = None
    for m in models:
        if m.family == last:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((f"{family_label(m.family, spec)} family", 1))
            last = m.family
    return tuple(groups)


class Footnotes:
    """Collects (subject, where, note) and writes one line per (subject, note).

    A note on a cell shown as "–" starts with "–"; a note on a cell that has a value
    (e.g. a group mean that lacks a benchmark) is written without it."""

    def __init__(self, joiner: str = " on "):
        self.joiner = joiner
        self._items: dict[tuple[str, str, bool], list[str]] = {}

    def add(self, subject: str, where: str, note: str, missing: bool = True) -> None:
        if not note:
            return
        wheres = self._items.setdefault((subject, note, bool(missing)), [])
        if where and where not in wheres:
            wheres.append(where)

    def lines(self) -> tuple[str, ...]:
        out = []
        for (subject, note, missing), wheres in self._items.items():
            text = note if note.endswith((".", "!", "?")) else note + "."
            where = f"{self.joiner}{', '.join(wheres)}" if wheres else ""
            line = f"{subject}{where}: {text}" if subject else text
            out.append(f"{DASH} {line}" if missing else line)
        return tuple(out)


def build_view(
    what: str,
    builders: Mapping[str, Callable[[Any, Mapping[str, Any]], Any]],
    name: str,
    metrics: Any,
    spec: Mapping[str, Any],
) -> Any:
    """The view ``name`` made by its builder of ``builders`` from the metrics and the
    spec; a ValueError naming ``what`` and the known names for another name."""
    if name not in builders:
        raise ValueError(f"unknown {what} {name!r} (known: {', '.join(sorted(builders))})")
    return builders[name](metrics, spec)

"""The benchmark registry: one typed record per benchmark, the one place a benchmark is named.

The records are data: one YAML file per benchmark in ``workflow/vlmrobust/benchmarks/``
(``mathvista.yaml``: description, answer_types, scorer, default_prompt, meta,
meta_note, hub_id, hub_config, split, rows), read into :class:`Benchmark` when this module is
imported; adding a benchmark is a file there plus, where it needs them, an adapter and
a scorer function.

Every other registry is keyed by these names and checked against them
(tests/test_benchmarks.py):

- ``vlmrobust.data.ADAPTERS``: one adapter per benchmark; an adapter names its record
  (``benchmark = BENCHMARKS["mmmu"]``) and takes its ``name``, ``hub_id``,
  ``hub_config``, ``split`` and ``description`` from it;
- ``vlmrobust.score.SCORERS``: a benchmark's ``scorer`` is a key there, and every key
  there is a benchmark with its own rules or a generic scorer (:data:`GENERIC_SCORERS`);
- prompts (:func:`vlmrobust.core.prompts.default_prompt`): a benchmark's
  ``default_prompt`` names a prompt builder, or is ``None``: the prompt then follows
  the sample's answer type;
- the run config (:mod:`vlmrobust.core.config`): the schema's ``adapter`` and
  ``scorer`` enums are filled in from :data:`BENCHMARKS` and :data:`SCORER_NAMES`
  when the schema is loaded.

docs/adding-a-benchmark.md says how to add one. This module imports nothing of the
package beyond :mod:`vlmrobust.core.records`, so every layer may read it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType

import yaml

from .records import ANSWER_TYPES

__all__ = [
    "BENCHMARKS",
    "RECORDS_DIR",
    "GENERIC_SCORERS",
    "REGION_META",
    "SCORER_NAMES",
    "Benchmark",
    "get_benchmark",
    "load_record",
    "load_records",
]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")

#: the ``meta`` keys of a sample with annotated regions: every box of its image
#: (``b_box``) and which one is its premise's (``premise_index``). A mask condition
#: (:mod:`vlmrobust.perturb.masking`) fills one of them, so it applies only to the
#: benchmarks whose record lists both in ``meta`` (:attr:`Benchmark.regions`).
REGION_META = ("b_box", "premise_index")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: what the adapter, the scorer and the prompts agree on.

    ``hub_id`` / ``hub_config`` / ``split`` are the defaults a dataset config may leave
    ``null`` (``hub_id`` ``None``: the benchmark is read from a local folder only).
    ``answer_types`` are the :data:`~vlmrobust.core.records.ANSWER_TYPES` its samples
    may have. ``scorer`` is a key of ``vlmrobust.score.SCORERS``. ``default_prompt``
    is a prompt builder's name, or ``None`` for the prompt of the sample's answer type
    (letter -> mcq, yes/no -> yesno, label -> label, number/text/list -> short).
    ``meta`` are the keys every sample's ``meta`` carries besides ``source_id`` (which
    every adapter adds); ``meta_note`` says what else it may carry. ``rows`` are the
    samples the adapter makes of a split as released, ``(split, count)`` pairs (in the
    YAML a mapping, or one number for the record's own ``split``): what the run
    forecast (:mod:`vlmrobust.forecast`) assumes before a dataset's samples exist;
    the YAML file says where each count comes from.
    """

    name: str
    description: str
    answer_types: tuple[str, ...]
    scorer: str
    default_prompt: str | None = None
    meta: tuple[str, ...] = ()
    meta_note: str = ""
    hub_id: str | None = None
    hub_config: str | None = None
    split: str | None = None
    rows: tuple[tuple[str, int], ...] = ()

    def rows_of(self, split: str | None) -> int | None:
        """The samples of ``split`` (None: the record's own) as released, or None."""
        return dict(self.rows).get(split or self.split or "")

    @property
    def regions(self) -> bool:
        """Whether every sample carries annotated regions (:data:`REGION_META`)."""
        return all(key in self.meta for key in REGION_META)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"benchmark name {self.name!r}: lower-case letters, digits, '-'")
        unknown = [t for t in self.answer_types if t not in ANSWER_TYPES]
        if not self.answer_types or unknown:
            raise ValueError(
                f"benchmark {self.name!r}: answer_types {list(self.answer_types)!r} must be "
                f"a non-empty subset of {', '.join(ANSWER_TYPES)}"
            )


#: Scorers that belong to no benchmark: name -> what they do.
GENERIC_SCORERS: Mapping[str, str] = MappingProxyType(
    {"generic": "by the sample's answer type (letter, number, yes/no, list, label, text)"}
)

#: where the records live: one YAML file per benchmark, named after it
RECORDS_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
_FIELDS = {f.name for f in fields(Benchmark)} - {"name"}


def load_record(path: Path) -> Benchmark:
    """One benchmark record from its YAML file (the file's stem is the name); an unknown
    or missing field is an error naming the file."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a benchmark record is a mapping of fields")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ValueError(
            f"{path}: unknown field(s) {', '.join(unknown)}; a record has "
            f"{', '.join(sorted(_FIELDS))}"
        )
    for key in ("answer_types", "meta"):
        if key in data:
            data[key] = tuple(data[key] or ())
    if "rows" in data:
        data["rows"] = _rows(path, data["rows"], data.get("split"))
    try:
        return Benchmark(name=path.stem, **data)
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"{path}: {exc}") from exc


def _rows(path: Path, rows: object, split: str | None) -> tuple[tuple[str, int], ...]:
    """``rows`` of a record file as ``(split, count)`` pairs; a bare number is the
    count of the record's own ``split``."""
    if isinstance(rows, int) and not isinstance(rows, bool):
        rows = {split or "": rows}
    if not isinstance(rows, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in rows.values()
    ):
        raise ValueError(f"{path}: rows is a count or a mapping split -> count, got {rows!r}")
    return tuple((str(k), int(n)) for k, n in rows.items())


def load_records(folder: Path = RECORDS_DIR) -> tuple[Benchmark, ...]:
    """Every record of ``folder``, by name."""
    return tuple(load_record(p) for p in sorted(folder.glob("*.yaml")))


_RECORDS = load_records()

#: Every benchmark, by name (the adapter name of the run config).
BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType({b.name: b for b in _RECORDS})
if len(BENCHMARKS) != len(_RECORDS):  # pragma: no cover - a programming error
    raise AssertionError("two benchmark records share a name")

#: The scorer names a dataset config may give: the benchmarks' scorers, then the generic
#: ones (the order of the schema's ``scorer`` enum).
SCORER_NAMES: tuple[str, ...] = tuple(
    dict.fromkeys([*(b.scorer for b in _RECORDS), *GENERIC_SCORERS])
)


def get_benchmark(name: str) -> Benchmark:
    """The record of benchmark ``name``; an unknown name is an error listing the known."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(
            f"unknown benchmark {name!r}; known benchmarks: {', '.join(BENCHMARKS)}"
        ) from None

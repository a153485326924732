"""The ``diagram`` perturbation: Idis-math visual distractors, ``k`` whole figures around
the unscaled diagram: diagrams of the same concept family (aligned), of ONE other
family (conflicting), or LogicVista's table images (irrelevant). The pools are built
once (``setup``), one figure per distinct image content and problem. The package
docstring says how (:mod:`vlmrobust.perturb.idis`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...core.io import sha256_file
from ...core.records import Sample, read_samples
from ...core.seeding import rng_for
from ..variants import Excluded, Perturbation, VariantPlan, _key, register
from .common import _as_ints, _bound, _canvas_pixels, _one_image, _shown_size
from .figures import _apply_math, _Figure, _figure_variant, _math_canvas

# ---------------------------------------------------------------- the pools


def _problem(sample: Sample) -> str | None:
    p = sample.meta.get("problem_index")
    return None if p is None else str(p)


def _file_sha(path: str, hashes: dict[str, str], what: str) -> str:
    """sha256 of ``path``, hashed once per ``hashes`` (path -> sha256)."""
    if path not in hashes:
        try:
            hashes[path] = sha256_file(path)
        except OSError as exc:
            raise ValueError(f"{what}: cannot read {path}: {exc}") from None
    return hashes[path]


def _figure_pool(samples: Iterable[Sample], what: str, hashes: dict[str, str]) -> list[_Figure]:
    """One figure per distinct image content and per problem (``meta.problem_index``:
    the versions of a MathVerse problem show the same diagram, sometimes redrawn), the
    first sample id in sorted order."""
    shas: set[str] = set()
    problems: set[str] = set()
    pool: list[_Figure] = []
    for s in sorted(samples, key=lambda s: s.sample_id):
        if len(s.images) != 1:
            continue
        path = s.images[0]
        sha = _file_sha(path, hashes, f"{what}: sample {s.sample_id!r}")
        problem = _problem(s)
        if sha in shas or (problem is not None and problem in problems):
            continue
        shas.add(sha)
        if problem is not None:
            problems.add(problem)
        size = _shown_size(path, f"{what}: {s.sample_id!r}")
        pool.append(_Figure(s.sample_id, path, sha, size, problem))
    return pool


def _has_table(meta: dict[str, Any]) -> bool:
    cap = meta.get("specific_capability")
    if isinstance(cap, str):
        return "table" in cap.lower()
    return isinstance(cap, list) and any(str(c).strip().lower() == "table" for c in cap)


# ---------------------------------------------------------------- the perturbation


def _prepare_diagram(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it; checked here is what the
    schema cannot say: irrelevant figures need an existing ``irrelevant_samples`` file."""
    out = dict(spec)
    _as_ints(out, "counts", "canvas")
    path = out["irrelevant_samples"]
    if "irrelevant" in out["semantics"] and (not isinstance(path, str) or not Path(path).is_file()):
        raise ValueError(
            f"{_key(condition, 'irrelevant_samples')}: irrelevant figures need the "
            f"samples.jsonl of LogicVista (its table images); got {path!r}"
            + (" (no such file)" if isinstance(path, str) else "")
        )
    return out


def _setup_diagram(samples: list[Sample], condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    what = f"conditions.{condition}"
    by_family: dict[str, list[Sample]] = {}
    pool_samples = list(samples)
    if spec.get("figure_samples"):
        # a larger pool of diagrams (e.g. the whole benchmark while a slice is answered)
        try:
            extra = read_samples(spec["figure_samples"])
        except Exception as exc:
            raise ValueError(f"{_key(condition, 'figure_samples')}: {exc}") from None
        known = {s.sample_id for s in samples}
        pool_samples += [s for s in extra if s.sample_id not in known]
    for s in pool_samples:
        family = s.meta.get("concept_family")
        if family is not None:
            by_family.setdefault(str(family), []).append(s)
    hashes: dict[str, str] = {}  # path -> sha256: a sample's image is hashed once
    own = {
        s.sample_id: _file_sha(s.images[0], hashes, f"{what}: sample {s.sample_id!r}")
        for s in samples
        if len(s.images) == 1
    }
    families = {f: _figure_pool(ss, what, hashes) for f, ss in sorted(by_family.items())}
    irrelevant: list[_Figure] = []
    if "irrelevant" in spec["semantics"]:
        path = spec["irrelevant_samples"]
        try:
            pool = [s for s in read_samples(path) if _has_table(s.meta)]
        except Exception as exc:
            raise ValueError(f"{_key(condition, 'irrelevant_samples')}: {exc}") from None
        irrelevant = _figure_pool(pool, _key(condition, "irrelevant_samples"), hashes)
        if not irrelevant:
            raise ValueError(
                f"{_key(condition, 'irrelevant_samples')}: {path} has no sample whose "
                "meta.specific_capability contains 'table'"
            )
    return {**spec, "_pools": {"families": families, "irrelevant": irrelevant, "own": own}}


def _category_pool(
    rng: np.random.Generator, pools: dict[str, Any], sem: str, family: Any, k: int
) -> tuple[str, list[_Figure]] | None:
    """The category a variant's figures come from and its pool: the sample's concept
    family (aligned), ONE other family with at least ``k`` figures, drawn (conflicting;
    None when there is none), or the irrelevant tables."""
    if sem == "aligned":
        category = str(family)
        return category, pools["families"].get(category, [])
    if sem == "conflicting":
        others = [f for f, p in pools["families"].items() if f != str(family) and len(p) >= k]
        if not others:
            return None
        category = others[int(rng.integers(len(others)))]
        return category, pools["families"][category]
    return "irrelevant", pools["irrelevant"]


def _plan_diagram(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    _one_image(sample, "diagram")
    pools = spec["_pools"]
    family = sample.meta.get("concept_family")
    # hashed by setup; here only for a sample that setup was not given
    own_sha = pools["own"].get(sid) or sha256_file(sample.images[0])
    problem = _problem(sample)
    layout = _math_canvas(sample, spec["canvas"], _bound(spec))
    plans: list[VariantPlan | Excluded] = []
    for sem in spec["semantics"]:
        for k in spec["counts"]:
            vid = f"{sid}__{sem}-n{k}"
            if sem in ("aligned", "conflicting") and family is None:
                plans.append(
                    Excluded(vid, "no-concept-family", f"sample {sid!r} has no concept family")
                )
                continue
            rng = rng_for(seed, condition, vid)
            drawn = _category_pool(rng, pools, sem, family, k)
            if drawn is None:
                plans.append(
                    Excluded(vid, "pool-too-small", f"no other concept family has {k} figures")
                )
                continue
            category, pool = drawn
            pool = [
                f
                for f in pool
                if f.sha256 != own_sha
                and f.sample_id != sid
                and (problem is None or f.problem != problem)
            ]
            if len(pool) < k:
                plans.append(
                    Excluded(vid, "pool-too-small", f"{category}: {len(pool)} figure(s) for {k}")
                )
                continue
            head = {"kind": "visual", "semantics": sem, "n": k, "distractor_classes": [category]}
            plans.append(_figure_variant(vid, condition, seed, head, rng, pool, k, layout, spec))
    return plans


register(
    Perturbation(
        "diagram",
        _prepare_diagram,
        _plan_diagram,
        _apply_math,
        setup=_setup_diagram,
        pixels=_canvas_pixels,
    )
)

"""Deterministic seeds: every random choice draws from a generator seeded by
(global seed, condition, sample id, ...) so results never depend on job order."""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from any parts, stable across processes and Python versions."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "little")


def rng_for(*parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*parts))

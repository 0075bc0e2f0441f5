"""Scenarios generated from named dimensions: the full product, or a seeded sample of ``n`` of it (deterministic;
a sample draws indices and decodes them, never enumerating the product)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from bench.config.sources import GenerateSource, SubsetDimension
from bench.core.errors import ParamsError
from bench.core.records import Scenario, canonical_json

# above this many combinations a seeded sample draws dimension by dimension (with dedupe), not whole-product indices
ENUMERATE_LIMIT = 200_000
# Without ``n``, a product bigger than this is refused (it would not fit in memory, let alone a budget).
FULL_PRODUCT_LIMIT = 1_000_000


@dataclass(frozen=True)
class _Dim:
    """One dimension: ``count`` options, each reachable by index (``option``)."""

    name: str
    values: list[Any]
    sizes: tuple[int, int] | None = None  # set for a subset dimension

    @cached_property
    def count(self) -> int:
        """Return the number of options (values, or subsets of an allowed size)."""
        if self.sizes is None:
            return len(self.values)
        return sum(math.comb(len(self.values), k) for k in range(self.sizes[0], self.sizes[1] + 1))

    def options(self) -> list[Any]:
        """Return every option in order (subsets: by size, then in combination order)."""
        if self.sizes is None:
            return list(self.values)
        lo, hi = self.sizes
        return [list(c) for k in range(lo, hi + 1) for c in itertools.combinations(self.values, k)]

    def option(self, index: int) -> Any:
        """Return the option at ``index`` of ``options()`` without enumerating them."""
        if self.sizes is None:
            return self.values[index]
        m = len(self.values)
        for k in range(self.sizes[0], self.sizes[1] + 1):
            if index < math.comb(m, k):
                return [self.values[i] for i in _unrank_combination(m, k, index)]
            index -= math.comb(m, k)
        raise IndexError(index)


def _unrank_combination(m: int, k: int, rank: int) -> list[int]:
    """Return the ``rank``-th k-combination of range(m) in itertools.combinations order."""
    combo: list[int] = []
    start = 0
    for slot in range(k):
        for i in range(start, m):
            below = math.comb(m - i - 1, k - slot - 1)  # combinations that start with i here
            if rank < below:
                combo.append(i)
                start = i + 1
                break
            rank -= below
    return combo


def _dimensions(source: GenerateSource) -> list[_Dim]:
    """Return the declared dimensions; an empty one or a repeated value is a ParamsError."""
    dims = []
    for name, spec in source.dimensions.items():
        values = spec.of if isinstance(spec, SubsetDimension) else spec
        where = f"scenarios.generate.dimensions.{name}"
        if not values:
            raise ParamsError(f"{where}: the list is empty, so no scenario can be made; give at least one value")
        seen: set[str] = set()
        for value in values:
            key = canonical_json(value)
            if key in seen:
                raise ParamsError(f"{where}: the value {key} is listed twice; remove the duplicate")
            seen.add(key)
        dims.append(_Dim(name, list(values), spec.size if isinstance(spec, SubsetDimension) else None))
    return dims


def generate(source: GenerateSource, seed: int) -> list[Scenario]:
    """Return the scenarios of named dimensions: the full product in declared order, or ``n`` distinct ones drawn
    with ``random.Random(seed)``, in product order (a subset dimension gives a list sized within ``size``)."""
    dims = _dimensions(source)
    total = math.prod(d.count for d in dims)
    if source.n is None and total > FULL_PRODUCT_LIMIT:
        raise ParamsError(f"scenarios.generate: the dimensions make {total:,} combinations; set "
                          f"scenarios.generate.n to sample some of them (at most {FULL_PRODUCT_LIMIT:,} "
                          f"without n)")
    if source.n is None or source.n >= total:
        combos: Iterator[tuple[Any, ...]] = itertools.product(*(d.options() for d in dims))
    else:
        combos = (_decode(dims, i) for i in _sample_indices(dims, total, source.n, random.Random(seed)))
    return [Scenario(fields={d.name: v for d, v in zip(dims, combo)}, source="generate") for combo in combos]


def _sample_indices(dims: list[_Dim], total: int, n: int, rng: random.Random) -> list[int]:
    """Return ``n`` distinct, sorted product indices drawn with ``rng`` (a huge product one dimension at a time)."""
    if total <= ENUMERATE_LIMIT:
        return sorted(rng.sample(range(total), n))
    taken: set[int] = set()
    while len(taken) < n:
        index = 0
        for d in dims:
            index = index * d.count + rng.randrange(d.count)
        taken.add(index)
    return sorted(taken)


def _decode(dims: list[_Dim], index: int) -> tuple[Any, ...]:
    """Return the combination at ``index`` of the product (mixed radix, last dimension fastest)."""
    picks = []
    for d in reversed(dims):
        index, rest = divmod(index, d.count)
        picks.append(d.option(rest))
    return tuple(reversed(picks))


def product_size(source: GenerateSource) -> int:
    """Return how many combinations the dimensions make (ParamsError for an empty or repeated value)."""
    return math.prod(d.count for d in _dimensions(source))

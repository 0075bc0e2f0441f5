"""A params file's optional ``align:`` section: how `bench align` builds and scores judge variants (docs/align.md).
Without an ``optimizer``, `bench align` builds the few-shot variant only and says so."""

from __future__ import annotations

from pydantic import Field

from bench.config._strict import Strict
from bench.config.entries import Endpoint

DEFAULT_FOLDS = 5  # the usual k of k-fold cross-validation: 80% of the reviews build a variant, 20% score it
MIN_PER_FOLD = 2  # a fold scored on one review says nothing: each needs two


class AlignSettings(Strict):
    """``align:`` of a params file (every key optional)."""

    optimizer: Endpoint | None = None  # the model proposing anchor rewrites; none: few-shot variants only
    k: int = Field(default=DEFAULT_FOLDS, ge=2, le=20)  # folds of the cross-validation (`bench align --k` wins)
    max_examples: int = Field(default=4, ge=1, le=20)  # reviewed answers shown per variant (and to the optimizer)
    seed: int = 0  # seeds the split of the reviewed answers into folds

"""Where a params file's scenarios come from (the ``scenarios:`` section, validated): named dimensions, or a
dataset file."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from bench.config._strict import Strict


class SubsetDimension(Strict):
    """A list-valued dimension: each scenario gets a subset of ``of`` with a size in ``size``."""

    of: list[Any] = Field(min_length=1)
    size: tuple[int, int] = (1, 1)  # inclusive bounds

    @model_validator(mode="after")
    def _sizes(self) -> "SubsetDimension":
        lo, hi = self.size
        if not 0 <= lo <= hi <= len(self.of):
            raise ValueError(f"size must satisfy 0 <= min <= max <= {len(self.of)} (the number of values)")
        return self


def _dimension_shape(v: Any) -> Any:
    """Refuse, in one message, a dimension that is neither a non-empty list nor a mapping."""
    if isinstance(v, list):
        if not v:
            raise ValueError("needs at least 1 value")
        return v
    if isinstance(v, (dict, SubsetDimension)):
        return v
    raise ValueError(f"expected a list of values or {{of: [...], size: [min, max]}} (got {v!r})")


Dimension = Annotated[list[Any] | SubsetDimension, BeforeValidator(_dimension_shape)]


class GenerateSource(Strict):
    """Scenarios from named dimensions: the full product, or a seeded sample of ``n``."""

    dimensions: dict[str, Dimension] = Field(min_length=1)
    n: int | None = Field(default=None, gt=0)


class DatasetSource(Strict):
    """Scenarios from a dataset file (formats: bench.config.readers.READERS); ``fields`` maps fields to columns."""

    path: str  # relative to the params file's folder, or to the project root
    fields: dict[str, str] = Field(min_length=1)
    reference: dict[str, str] = Field(default_factory=dict)  # ground truth columns (e.g. label)
    limit: int | None = Field(default=None, gt=0)
    images: list[str] = Field(default_factory=list)  # columns of image paths (relative to the file) or URLs
    max_image_mb: float = Field(default=20, gt=0)  # a larger image file is refused before anything is sent


class InlineScenario(Strict):
    """One scenario written in the params file: its template fields and, optionally, its ground truth."""

    fields: dict[str, Any] = Field(min_length=1)
    reference: dict[str, Any] | None = None  # e.g. {answer: "4"}: what a rubric's `reference:` shows the judge


class Scenarios(Strict):
    """Exactly one scenario source."""

    generate: GenerateSource | None = None
    dataset: DatasetSource | None = None
    inline: list[InlineScenario] | None = Field(default=None, min_length=1)  # scenarios listed in the params file

    @model_validator(mode="after")
    def _one(self) -> "Scenarios":
        if sum(source is not None for source in (self.generate, self.dataset, self.inline)) != 1:
            raise ValueError("give exactly one of 'generate' or 'dataset' (or 'inline': scenarios listed here)")
        return self

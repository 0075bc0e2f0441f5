"""What every model a researcher's YAML is validated into shares: the strict base and the duplicate check."""

from __future__ import annotations

import collections

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A frozen pydantic model that refuses unknown keys (so a typo is an error, never ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def refuse_duplicates(what: str, keys: list[str]) -> None:
    """Raise ValueError naming every key listed more than once (linear: a file may list 200k prompts)."""
    dupes = sorted(k for k, n in collections.Counter(keys).items() if n > 1)
    if dupes:
        raise ValueError(f"duplicate {what} {', '.join(dupes)}")

"""The ``gates:`` section of a params file: the floors and the largest drop a run must keep to pass.
It imports nothing of bench; ``bench gate`` builds the same model from its options (:func:`merge`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

GATE_KEYS = ("min", "max_drop", "win_rate_min", "agreement_min")  # what a gate checks; the rest are settings


class Gates(BaseModel):
    """``gates:``: what a run must keep to pass (docs/gates.md); every bound is optional, at least one is set."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # as every params model: a typo is an error

    min: float | dict[str, float] | None = None  # floor on every (judge, cell) composite mean; {JUDGE[.CRITERION]: V}
    max_drop: float | None = Field(default=None, ge=0)  # largest drop of a matched cell's composite vs the baseline
    baseline: str | None = None  # the run folder to compare with, relative to the params file
    map: dict[str, str] = Field(default_factory=dict)  # baseline cell -> this run's cell, when the names differ
    win_rate_min: float | None = Field(default=None, ge=0, le=1)  # floor on the win rate over the baseline's answers
    agreement_min: float | None = Field(default=None, ge=-1, le=1)  # floor on each judge's kappa with human reviews
    strict: bool = False  # pass a bound only when keeping it is shown (default: fail only when breaking it is)
    alpha: float = Field(default=0.05, gt=0, lt=1)  # family-wise error rate of the gate's one-sided tests
    allow_rubric_change: bool = False  # compare though a judge's rubric content differs (else exit 6)
    allow_missing: bool = False  # coverage passes though the run lacks answers the baseline has (listed anyway)

    @field_validator("min", "max_drop", "win_rate_min", "agreement_min")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        for key, x in (v.items() if isinstance(v, dict) else [("", v)]):
            if isinstance(v, dict) and not key.partition(".")[0]:
                raise ValueError(f"{key!r}: name a judge (JUDGE or JUDGE.CRITERION)")
            if x is not None and not math.isfinite(x):
                raise ValueError(f"{key + ': ' if key else ''}must be a finite number")
        return v

    @model_validator(mode="after")
    def _complete(self) -> "Gates":
        """Refuse a section that checks nothing, and a comparison with no baseline to compare with."""
        if all(getattr(self, key) is None for key in GATE_KEYS):
            raise ValueError(f"declares no gate: set at least one of {', '.join(GATE_KEYS)}")
        needs = [key for key in ("max_drop", "win_rate_min") if getattr(self, key) is not None]
        if self.map:
            needs.append("map")
        if needs and not self.baseline:
            raise ValueError(f"{' and '.join(needs)} compare with a baseline run: set baseline (a run folder, "
                             f"relative to the params file)")
        return self

    @property
    def compares(self) -> bool:
        """Return True when a gate needs the baseline run (max_drop, win_rate_min)."""
        return self.max_drop is not None or self.win_rate_min is not None

    def baseline_dir(self, params_path: Path | None) -> Path | None:
        """Return the baseline run folder: absolute as written, else relative to the params file's folder or the cwd."""
        if not self.baseline:
            return None
        path = Path(self.baseline).expanduser()
        if path.is_absolute() or params_path is None:
            return path
        return Path(params_path).parent / path


def merge(base: Gates | None, **options: Any) -> Gates:
    """Return ``base`` with the options given (not None) set over it; ValueError, one line per problem."""
    data = base.model_dump() if base is not None else {}
    data.update({k: v for k, v in options.items() if v is not None and v != {}})
    try:
        return Gates.model_validate(data)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            where = ".".join(str(p) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"--{where.replace('_', '-')}: {msg}" if where else msg)
        raise ValueError("; ".join(lines)) from None

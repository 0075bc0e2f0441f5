"""Params files (`params/*.yaml`): the grid of models × prompt versions × scenarios, validated.
YAML keys map one-to-one onto these pydantic models; `load_sweep` calls no model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bench.config._errors import format_errors
from bench.config._strict import Strict, refuse_duplicates
from bench.config._yaml import parse_yaml
from bench.config.align import AlignSettings
from bench.config.conversations import ToolEntry, bind_prompts
from bench.config.entries import Endpoint, JudgeEntry, ModelEntry, PromptEntry
from bench.config.ids import is_id
from bench.config.sources import Scenarios
from bench.core.digests import Digest, cell_digest
from bench.core.errors import ParamsError
from bench.core.records import cell_key
from bench.gates.spec import Gates
from bench.models.limits import Limits


class ClusterTLS(Strict):
    """``cluster:``: the certificate files this driver shows a ``tls://`` Dask scheduler, relative to the params
    file; they win over Dask's own ``DASK_DISTRIBUTED__COMM__TLS__…`` variables."""

    tls_ca_file: str  # the cluster's certificate authority (PEM)
    tls_client_cert: str  # this driver's certificate (PEM; may hold the key too)
    tls_client_key: str | None = None  # its private key, when not in tls_client_cert's file


class Sweep(Strict):
    """A whole params file."""

    name: str
    seed: int = 0
    models: list[ModelEntry] = Field(default_factory=list)  # ≥ 1, except for a pairwise dataset
    prompts: list[PromptEntry] = Field(default_factory=list)
    tools: list[ToolEntry] = Field(default_factory=list)  # what prompts' ``tools:`` name (bench.config.conversations)
    scenarios: Scenarios
    samples: int = Field(default=1, gt=0)
    judges: list[JudgeEntry] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    cluster: ClusterTLS | None = None  # a tls:// scheduler's certificates (docs/cluster.md)
    gates: Gates | None = None  # what the run must keep to pass, checked at the sweep's end (docs/gates.md)
    align: AlignSettings | None = None  # how `bench align` builds and scores judge variants (docs/align.md)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not is_id(v):
            raise ValueError("must be a folder-safe name (letters, digits, '.', '_', '-'); it names runs/<name>")
        return v

    @model_validator(mode="after")
    def _axes(self) -> "Sweep":
        """Require a model and a prompt axis, unless the scenarios already hold the responses to judge."""
        if self.collects or self.is_pair_dataset:
            return self
        missing = "models" if not self.models else "prompts"
        raise ValueError(f"{missing}: needs at least 1 item (only a dataset whose fields map response_A and "
                         f"response_B, judged pairwise, has nothing to collect)")

    @property
    def is_pair_dataset(self) -> bool:
        """Return True when the scenarios are pairs (fields response_A and response_B) from a dataset."""
        ds = self.scenarios.dataset
        return ds is not None and {"response_A", "response_B"} <= set(ds.fields)

    @property
    def collects(self) -> bool:
        """Return True when the grid has something to collect (at least one model and one prompt)."""
        return bool(self.models) and bool(self.prompts)

    @field_validator("models", "judges")
    @classmethod
    def _unique_ids(cls, v: list[Any]) -> list[Any]:
        """Refuse two entries with the same id (they would share a label in reports), and two entries
        identical in everything that determines a reply (they would share every record id)."""
        refuse_duplicates("id", [entry.id for entry in v])
        seen: dict[str, str] = {}
        for entry in v:
            first = seen.setdefault(entry.identity_key(), entry.id)
            if first != entry.id:
                raise ValueError(f"entries {first} and {entry.id} are the same {entry.kind} (same model, "
                                 f"endpoint and params{', rubric and mode' if entry.kind == 'judge' else ''}), "
                                 f"so they would share every record; remove one, or make them differ")
        return v

    @field_validator("prompts")
    @classmethod
    def _unique_keys(cls, v: list[PromptEntry]) -> list[PromptEntry]:
        """Refuse two prompts with the same id@version."""
        refuse_duplicates("id@version", [p.key for p in v])
        return v

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, v: list[ToolEntry]) -> list[ToolEntry]:
        """Refuse two tools with the same name (a model calls a tool by its name)."""
        refuse_duplicates("tool name", [t.name for t in v])
        return v

    @model_validator(mode="after")
    def _bind_tools(self) -> "Sweep":
        """Resolve each prompt's tool names to the declared tools, and give its simulated user the sweep's seed."""
        bind_prompts(self.prompts, self.tools, self.seed)
        return self

    def cells(self) -> list["Cell"]:
        """Return every (model, prompt) cell in declaration order."""
        return [Cell(m, p) for m in self.models for p in self.prompts]

    def endpoints(self) -> list[tuple[str, Endpoint]]:
        """Return every entry the sweep may call with where it sits in the params file: the models, the prompts'
        simulated users and the judges (what a check of every called model must visit: ``Run.endpoints``)."""
        return ([(f"models[{i}]", m) for i, m in enumerate(self.models)]
                + [(f"prompts[{i}].user_simulator", p.user_simulator) for i, p in enumerate(self.prompts)
                   if p.user_simulator is not None]
                + [(f"judges[{i}]", j) for i, j in enumerate(self.judges) if j.model is not None])


class Cell(BaseModel):
    """One (model, prompt version) point of the grid; ``key`` is ``model_id/prompt_id@version``."""

    model_config = ConfigDict(frozen=True)
    model: ModelEntry
    prompt: PromptEntry

    def __init__(self, model: ModelEntry, prompt: PromptEntry):
        super().__init__(model=model, prompt=prompt)

    @property
    def key(self) -> str:
        """Return the cell's name in records, reports and a judge's ``baseline``: the one spelling of it."""
        return cell_key(self.model.id, self.prompt.id, self.prompt.version)

    @property
    def digest(self) -> Digest:
        """Return what the cell stands for in a run folder: model string, endpoint, params, template (one per key)."""
        m = self.model
        return cell_digest(self.key, m.model, m.endpoint, m.params, self.prompt.content_hash)


def load_sweep(path: str | Path) -> tuple[Sweep, Path]:
    """Return the validated Sweep of a params file and its resolved path; ParamsError naming file and key path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamsError(f"{path}: cannot read the params file ({exc.strerror or exc})") from None
    data = parse_yaml(path, text)
    if data is None:
        raise ParamsError(f"{path}: the file is empty; expected the keys name, models, prompts, scenarios")
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of keys (name, models, prompts, scenarios, …), "
                          f"got {type(data).__name__}")
    try:
        return Sweep.model_validate(data), path.resolve()
    except ValidationError as exc:
        raise ParamsError(format_errors(path, exc, Sweep)) from None

"""The contract every stage reads and writes: scenarios, candidates, judgments, reviews.

One immutable record per JSONL line; every id is a content hash of what determines the record, so a finished
sweep re-runs with zero model calls. A failure is a record too (``error`` set): resume retries it."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 2  # 2: candidate and judgment ids include the endpoint; records carry attempt and calls

JudgeMode = Literal["rubric", "packed", "checklist", "pairwise", "automated", "hybrid"]
# the packed mode's word before its rename: records saying it are read in today's words (``packed_words``), and
# ids and digests still hash it (``hashed_mode``), so work recorded before the rename keeps its ids
_PACKED_WAS = "batch"


# json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str), its encoder made once:
# every request key and record id is taken over this spelling, so it never changes (orjson spells floats otherwise)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(obj: Any) -> str:
    """Return the one JSON spelling of ``obj`` that hashes are taken over (sorted keys, no spaces)."""
    return _CANONICAL.encode(obj)


def content_hash(obj: Any, length: int = 20) -> str:
    """Return a short sha256 hex digest of ``obj``'s canonical JSON: the basis of every id."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8", "surrogatepass")).hexdigest()[:length]


def packed_words(data: dict[str, Any]) -> dict[str, Any]:
    """Return a judgment's fields with the packed mode's words from before its rename made today's: ``mode: batch``
    → ``packed``, ``batch_id`` → ``pack_id``, ``batch_size`` → ``pack_size`` (in its params and details)."""
    if "batch_id" not in data and data.get("mode") != _PACKED_WAS:
        return data
    data = dict(data)
    if "batch_id" in data:
        data.setdefault("pack_id", data.pop("batch_id"))
    if data.get("mode") == _PACKED_WAS:
        data["mode"] = "packed"
        for key in ("judge_params", "details"):
            if isinstance(data.get(key), dict) and "batch_size" in data[key]:
                data[key] = {("pack_size" if k == "batch_size" else k): v for k, v in data[key].items()}
    return data


def hashed_mode(mode: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Return a judge's mode and params as ids and digests hash them: the packed mode in its words from before
    its rename (``batch``, ``batch_size``), so a packed judgment's id is the one it had then."""
    if mode != "packed":
        return mode, params
    return _PACKED_WAS, {("batch_size" if k == "pack_size" else k): v for k, v in params.items()}


def versioned(name: str, version: str) -> str:
    """Return a versioned thing's name in cells, records and reports: ``id@version`` (a prompt, a rubric)."""
    return f"{name}@{version}"


def cell_key(model_id: str, prompt_id: str, version: str) -> str:
    """Return a grid cell's key, ``model_id/prompt_id@version``: the one spelling in params, records and reports."""
    return f"{model_id}/{versioned(prompt_id, version)}"


def utc_now() -> str:
    """Return the current UTC time as an ISO-8601 string (records keep time as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Usage(BaseModel):
    """What producing one record took: provider requests, cache hits, tokens, dollars and time, summed over every
    paid attempt. ``cost_usd`` None: some price unknown; ``estimated``: usage counted from text, never fewer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # includes reasoning_tokens: thinking is billed as output
    reasoning_tokens: int | None = None  # of completion_tokens, the thinking the provider reported (None: not said)
    cached_tokens: int | None = None  # of prompt_tokens, read from the provider's prompt cache (None: not said)
    cache_write_tokens: int | None = None  # of prompt_tokens, written to its prompt cache (Anthropic's; None: not said)
    cost_usd: float | None = None
    cache_saved_usd: float | None = None  # what the cached (and cache-write) prices took off the full input price
    latency_s: float | None = None
    attempts: int = 1  # requests sent for the last call (1 + its retries)
    cached: bool = False  # every reply behind this record came from the cache
    finish_reason: str | None = None
    calls: int = 1
    cache_hits: int = 0
    batch_id: str | None = None  # the provider batch that answered the last call (bench.models.batches)
    over_limit: bool = False  # a reply passed its request's output limit (a provider that ignores max_tokens)
    estimated: bool = False  # a reply had no usage: its tokens are a bound counted from the text, its cost from them
    paid_attempts: list[dict[str, Any]] | None = None  # each paid reply of a call paid more than once (None: none)

    @model_validator(mode="before")
    @classmethod
    def _old_counts(cls, data: Any) -> Any:
        """Fill ``calls``/``cache_hits`` of records written before they existed (schema 1)."""
        if isinstance(data, dict) and "calls" not in data:
            cached = bool(data.get("cached"))
            data = {**data, "calls": 0 if cached else int(data.get("attempts") or 1), "cache_hits": int(cached)}
        return data


def failed_usage(error: Exception) -> Usage:
    """Return the usage of a call that ended in ``error`` (a ProviderError): the requests it sent, and what
    its paid replies cost (``error.paid``), else no tokens and no cost."""
    n, shared = getattr(error, "attempts", 0), bool(getattr(error, "shared", False))
    paid = [] if shared else list(getattr(error, "paid", None) or ())
    total = lambda name: sum(a.get(name) or 0 for a in paid)  # noqa: E731
    costs = [a.get("cost_usd") for a in paid]
    return Usage.model_construct(
        prompt_tokens=total("prompt_tokens"), completion_tokens=total("completion_tokens"),
        reasoning_tokens=total("reasoning_tokens") if any(a.get("reasoning_tokens") for a in paid) else None,
        cost_usd=None if any(c is None for c in costs) else round(sum(costs), 12), calls=n, attempts=n,
        cache_hits=int(shared), cached=shared, finish_reason=paid[-1].get("finish_reason") if paid else None,
        over_limit=any(a.get("over_limit") for a in paid), estimated=any(a.get("estimated") for a in paid),
        paid_attempts=paid or None)


def add_usage(parts: list[Usage]) -> Usage | None:
    """Return the summed usage of several calls (None without parts); cost is None if any part's price was unknown."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    total = lambda name: None if all(getattr(u, name) is None for u in parts) else sum(  # noqa: E731
        getattr(u, name) or 0 for u in parts)
    costs = [u.cost_usd for u in parts]
    return Usage.model_construct(
        prompt_tokens=total("prompt_tokens"), completion_tokens=total("completion_tokens"),
        reasoning_tokens=total("reasoning_tokens"), cached_tokens=total("cached_tokens"),
        cache_write_tokens=total("cache_write_tokens"), cache_saved_usd=total("cache_saved_usd"),
        cost_usd=None if any(c is None for c in costs) else round(sum(costs), 12),
        latency_s=None if (lat := total("latency_s")) is None else round(lat, 4),
        attempts=parts[-1].attempts, cached=all(u.cached for u in parts),
        finish_reason=next((u.finish_reason for u in reversed(parts) if u.finish_reason), None),
        calls=sum(u.calls for u in parts), cache_hits=sum(u.cache_hits for u in parts),
        batch_id=next((u.batch_id for u in reversed(parts) if u.batch_id), None),
        over_limit=any(u.over_limit for u in parts), estimated=any(u.estimated for u in parts),
        paid_attempts=[a for u in parts for a in (u.paid_attempts or ())] or None)


class Record(BaseModel):
    """Common base: frozen, strict about unknown keys, with an id computed from content."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ClassVar[str] = "record"
    id_prefix: ClassVar[str] = "x"

    schema_version: int = SCHEMA_VERSION
    id: str = ""

    @classmethod
    def identity(cls, data: dict[str, Any]) -> Any:
        """Return what determines this record's id (overridden per record type)."""
        raise NotImplementedError

    @model_validator(mode="before")
    @classmethod
    def _fill_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("id"):
            data = dict(data)
            if "created_at" in cls.model_fields and not data.get("created_at"):
                data["created_at"] = utc_now()  # reviews are events: their time is part of the id
            data["id"] = cls.id_prefix + content_hash(cls.identity(data))
        return data

    @model_validator(mode="after")
    def _check_version(self) -> "Record":
        if self.schema_version > SCHEMA_VERSION:
            raise ValueError(
                f"{self.kind} {self.id} has schema_version {self.schema_version}, newer than this "
                f"bench understands ({SCHEMA_VERSION}); upgrade bench to read this run")
        return self

    @property
    def ok(self) -> bool:
        """True when the record is a success (failures carry ``error`` and are retried)."""
        return getattr(self, "error", None) is None


class Scenario(Record):
    """One input to the grid: template fields (persona, question, …) and optional ground truth."""

    kind: ClassVar[str] = "scenario"
    id_prefix: ClassVar[str] = "s"

    fields: dict[str, Any]
    reference: dict[str, Any] | None = None  # e.g. a JudgeBench label; part of the identity
    source: str = ""  # "generate", a dataset path, …: provenance only
    images: list[dict[str, Any]] | None = None  # the dataset's images: refs to the run folder's store (bench.core.images)

    @classmethod
    def identity(cls, data: dict[str, Any]) -> Any:
        ident = {"fields": data.get("fields"), "reference": data.get("reference")}
        if data.get("images"):  # each image's column and content hash (or URL); absent without images: ids unchanged
            ident["images"] = [{k: i[k] for k in ("column", "sha256", "url") if i.get(k)} for i in data["images"]]
        return ident


class _Outcome(Record):
    """What a model call produced besides its content: the failure (if any), usage and time."""

    error: str | None = None  # set on failure: nothing is scored, resume redoes it
    error_kind: str | None = None  # ProviderError.kind, "parse", "internal", …
    usage: Usage | None = None
    attempt: int = 1  # the how-many-th try of this id across runs (resume asks a failure again, afresh)
    created_at: str = Field(default_factory=utc_now)


class Candidate(_Outcome):
    """One model answer to one filled prompt for one scenario and sample index."""

    kind: ClassVar[str] = "candidate"
    id_prefix: ClassVar[str] = "c"

    model_id: str  # the label used in reports
    model: str  # the LiteLLM model string (or local/…)
    endpoint: str | None = None  # where it was served (api_base, transport) when not the provider's default
    params: dict[str, Any] = Field(default_factory=dict)  # resolved generation params
    prompt_id: str
    prompt_version: str
    prompt_hash: str  # content hash of the template: an edit without a version bump is still new work
    scenario_id: str
    sample: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)
    output: str | None = None
    flags: list[str] = Field(default_factory=list)  # injection-like text in the output (bench.core.flags)
    reasoning: str | None = None  # the reply's thinking, kept apart from ``output`` (bench.models.reasoning); no id part
    # A conversation or an agent loop (None for one prompt, one reply; fields: docs/conversations.md). No id part:
    # the prompt's content hash covers its turns, tools and simulator.
    transcript: list[dict[str, Any]] | None = None
    turns: list[dict[str, Any]] | None = None
    trajectory: list[dict[str, Any]] | None = None
    ended: str | None = None
    simulator_usage: Usage | None = None

    @classmethod
    def identity(cls, data: dict[str, Any]) -> Any:
        keys = ("model", "params", "prompt_id", "prompt_version", "prompt_hash", "scenario_id", "sample")
        ident = {k: data.get(k) for k in keys}
        ident["params"] = ident["params"] or {}
        ident["sample"] = ident["sample"] or 0
        if data.get("endpoint"):  # absent for a provider's own endpoint: those ids are unchanged since schema 1
            ident["endpoint"] = data["endpoint"]
        return ident

    @property
    def prompt_key(self) -> str:
        """``prompt_id@version``."""
        return versioned(self.prompt_id, self.prompt_version)

    @property
    def cell(self) -> str:
        """The key of the grid cell that answered (``Cell.key``: ``model_id/prompt_id@version``)."""
        return cell_key(self.model_id, self.prompt_id, self.prompt_version)



class Judgment(_Outcome):
    """One judge's grade of one item (or one ordered pair), or the recorded reason it failed."""

    kind: ClassVar[str] = "judgment"
    id_prefix: ClassVar[str] = "j"

    judge_id: str  # the label used in reports
    judge_model: str
    judge_endpoint: str | None = None  # as Candidate.endpoint, for the judge model
    judge_params: dict[str, Any] = Field(default_factory=dict)
    rubric_id: str
    rubric_version: str
    rubric_hash: str
    mode: JudgeMode
    candidate_ids: list[str]  # one item, or [A, B] for pairwise (in the original order)
    scenario_id: str
    order: Literal["AB", "BA"] | None = None  # pairwise: the order shown to the judge
    repeat: int = 0  # the judge's `repeats: k`: which of the k gradings of this item (a distinct request)
    turn: int | None = None  # a ``per_turn`` judge: the assistant turn graded (1-based), in its conversation's context
    scores: dict[str, float] | None = None  # per criterion
    score: float | None = None  # composite on the rubric's scale
    expected_scores: dict[str, float] | None = None  # per criterion: the mean over the score tokens' probabilities
    expected_score: float | None = None  # the composite of ``expected_scores`` (None without logprobs)
    verdict: str | None = None  # pairwise label in the original order, e.g. "A>B"
    rationale: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)  # checklist items, automated checks, …
    pack_id: str | None = None  # the packed mode: the call this item was graded in (bench.judge.packed)
    prompt: list[dict[str, Any]] | None = None  # kept for failures and audits
    raw: str | None = None  # the judge's reply as received

    @classmethod
    def identity(cls, data: dict[str, Any]) -> Any:
        keys = ("candidate_ids", "judge_model", "judge_params", "rubric_id", "rubric_version",
                "rubric_hash", "mode", "order")
        ident = {k: data.get(k) for k in keys}
        ident["mode"], ident["judge_params"] = hashed_mode(ident["mode"], ident["judge_params"] or {})
        if data.get("judge_endpoint"):
            ident["judge_endpoint"] = data["judge_endpoint"]
        if data.get("repeat"):  # absent for the first grading: ids from before `repeats` are unchanged
            ident["repeat"] = data["repeat"]
        if data.get("turn") is not None:  # a per_turn judge's turn; absent otherwise: ids unchanged
            ident["turn"] = data["turn"]
        return ident

    @model_validator(mode="before")
    @classmethod
    def _packed_words(cls, data: Any) -> Any:
        """Read a judgment written before the packed mode was renamed in today's words (``packed_words``)."""
        return packed_words(data) if isinstance(data, dict) else data

    @property
    def rubric_key(self) -> str:
        """``rubric_id@version``."""
        return versioned(self.rubric_id, self.rubric_version)



class Review(Record):
    """A human's grade of an answer on a rubric version (bench.core.reviewed), saved on one of its judgments; a
    later review of the same answer and rubric version by the same reviewer supersedes it."""

    kind: ClassVar[str] = "review"
    id_prefix: ClassVar[str] = "r"

    judgment_id: str
    candidate_ids: list[str] = Field(default_factory=list)
    reviewer: str
    rubric_id: str | None = None
    rubric_version: str | None = None
    scores: dict[str, float] | None = None  # the reviewer's value of every criterion (overridden or confirmed)
    score: float | None = None  # the composite of ``scores`` by the rubric, as the judge's ``score``
    verdict: str | None = None  # pairwise: the reviewer's verdict in the original order
    note: str = ""
    created_at: str = Field(default_factory=utc_now)
    # saved with no judge's grade, rationale or verdict shown; only blind reviews calibrate. False for a review
    # from before the field existed: the panel and the export showed the judges then
    blind: bool = False

    @classmethod
    def identity(cls, data: dict[str, Any]) -> Any:
        return {k: data.get(k) for k in ("judgment_id", "reviewer", "scores", "verdict", "note", "created_at")}


RECORD_TYPES: dict[str, type[Record]] = {t.kind: t for t in (Scenario, Candidate, Judgment, Review)}

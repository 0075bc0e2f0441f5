"""The entries of a params file's axes: models (and how to reach them), prompt templates, judges.
`identity_key` says what makes two entries give different records (`bench.config.params.Sweep` refuses twins)."""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, PrivateAttr, field_validator, model_validator

from bench.config._strict import Strict
from bench.config.ids import SafeId
from bench.core.records import JudgeMode, canonical_json, content_hash, versioned
from bench.models.batch_policy import DEFAULT_DISCOUNT, BatchPolicy
from bench.models.genparams import type_problems
from bench.models.routing import ModelSpec

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_PREFIX = re.compile(r"^(sk|AIza|gsk_|hf_|xai-|pk_|rk_)")  # how provider keys start
_SECRET_PARAMS = frozenset({"api_key", "api_base", "api_key_env", "key", "token", "authorization"})
_HEADER_PARAMS = frozenset({"extra_headers", "headers"})  # would travel in the body, their values into records
_NO_HEADERS = ("bench sends no HTTP headers from params (params are sent in the JSON body and stored in the "
               "records, and a header's value is often a key); put a key in an environment variable named by api_key_env (sent as the "
               "Authorization header), or add other headers in a proxy in front of api_base")
_URL_USERINFO = re.compile(r"://[^/@]*@")
_TEMPLATE_HELP = "placeholders are {name}; write a literal brace as {{ or }}"
DEFAULT_MAX_STEPS = 8  # model requests per assistant turn of a tool loop: room for a few calls and an answer


def checked_template(text: str) -> str:
    """Return ``text`` when it is a valid template, else raise ValueError saying what is wrong (a validator)."""
    problem = _template_problem(text)
    if problem:
        raise ValueError(f"invalid template ({problem}); {_TEMPLATE_HELP}")
    return text


def template_fields(text: str) -> list[str]:
    """Return the placeholders of a ``str.format`` template in order; ValueError if its braces are unbalanced."""
    return [name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None]


def _template_problem(text: str) -> str | None:
    """Return what is wrong with a template's braces or placeholders, or None if nothing is."""
    try:
        names = template_fields(text)
    except ValueError as exc:
        return str(exc)
    for name in names:
        if not name:
            return "{} has no field name"
        if name.isdigit():
            return f"{{{name}}} is a position, not a field name"
        if "." in name or "[" in name:
            return f"{{{name}}} uses an attribute or index"
    return None


Template = Annotated[str, AfterValidator(checked_template)]  # a valid template, else a ValueError


class Price(Strict):
    """USD per million tokens, for endpoints LiteLLM cannot price (self-hosted servers)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)  # input read from the prompt cache (default: input)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)  # input written to it (default: 1.25 × input)
    batch_discount: float = Field(default=DEFAULT_DISCOUNT, ge=0, lt=1)  # the fraction a Batch API call takes off


class BatchSettings(Strict):
    """``batch: {…}`` on a model or judge: its requests go through the provider's Batch API (``true``: defaults)."""

    max_requests: int = Field(default=BatchPolicy.max_requests, gt=0)  # requests per batch (the provider's limit)
    max_bytes: int = Field(default=BatchPolicy.max_bytes, gt=0)  # bytes of one batch file (the provider's limit)
    retry: Literal["batch", "direct"] = "batch"  # an item that failed or expired in a batch: a new batch, or direct
    poll_s: float = Field(default=BatchPolicy.poll_s, gt=0)  # first wait between status polls (grows ×1.5) ...
    poll_max_s: float = Field(default=BatchPolicy.poll_max_s, gt=0)  # ... up to this
    gather_s: float = Field(default=BatchPolicy.gather_s, ge=0)  # a batch is sent once no request joined for this long

    def policy(self) -> BatchPolicy:
        return BatchPolicy(**self.model_dump())


class Endpoint(Strict):
    """How to reach a model: shared by the model axis and by judges."""

    model: str  # a LiteLLM model string (provider/name) or local/<name>
    params: dict[str, Any] = Field(default_factory=dict)  # generation params: temperature, max_tokens, seed, …
    api_base: str | None = None  # an OpenAI-compatible server (vLLM, Ollama's /v1, llama.cpp, …)
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    transport: Literal["auto", "direct", "litellm"] = "auto"
    rpm: int | None = Field(default=None, gt=0)  # requests per minute cap for this model
    tpm: int | None = Field(default=None, gt=0)  # tokens per minute cap (prompt + completion; see bench.models.ratelimit)
    max_concurrency: int | None = Field(default=None, gt=0)  # this model's own cap on requests in flight
    price: Price | None = None
    batch: bool | BatchSettings = False  # send through the provider's Batch API (half price, hours): docs/batch-apis.md
    think_end: str | None = Field(default=None, min_length=1)  # where a reply's inline thinking ends (docs/providers.md)
    images: bool | None = None  # whether the model reads image parts; None: its provider says (docs/params.md#images)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        """Refuse anything but a variable name, and names that look like keys (never echoing them)."""
        if v is None:
            return v
        if not _ENV_NAME.fullmatch(v) or _KEY_PREFIX.match(v) or len(v) > 64:
            raise ValueError("must be the name of an environment variable (e.g. OPENAI_API_KEY), never a key; "
                             "put the key in that variable")
        return v

    @field_validator("params")
    @classmethod
    def _no_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Refuse keys and servers in ``params`` (they would reach records and reports); never echo them."""
        for name in v:
            if str(name).lower() in _SECRET_PARAMS:
                raise ValueError(f"{name} cannot go in params; name the key's variable in api_key_env "
                                 f"(and the server in api_base)")
        passed = v.get("extra_body")
        for name in [*v, *(passed if isinstance(passed, dict) else ())]:
            if str(name).lower() in _HEADER_PARAMS:
                where = name if name in v else f"extra_body.{name}"
                raise ValueError(f"{where} cannot go in params: {_NO_HEADERS}")
        return v

    @model_validator(mode="after")
    def _param_types(self) -> "Endpoint":
        """Refuse a known generation param of the wrong type (a list where the API takes one value)."""
        problems = type_problems(self.params, getattr(self, "id", None))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _tpm_fits(self) -> "Endpoint":
        """Refuse a tpm that one request's output limit alone exceeds: that cap could never be met."""
        limit = next((self.params[k] for k in ("max_tokens", "max_completion_tokens")
                      if isinstance(self.params.get(k), int)), None)
        if self.tpm is not None and limit is not None and limit > self.tpm:
            raise ValueError(f"tpm: {self.tpm} tokens per minute is less than one request's params.max_tokens "
                             f"({limit}), so no request would ever fit; raise tpm or lower max_tokens")
        return self

    @property
    def endpoint(self) -> str | None:
        """Return where this model is served, part of every record id: None for the provider's own endpoint, else
        the api_base (never its credentials) and a transport other than auto."""
        if self.api_base is None and self.transport == "auto":
            return None
        base = _URL_USERINFO.sub("://", self.api_base.rstrip("/")) if self.api_base else ""
        return base + (f" via {self.transport}" if self.transport != "auto" else "")

    def spec(self) -> ModelSpec:
        """Return the LLM seam's ModelSpec for this endpoint."""
        p = self.price
        price = (p.input_per_mtok, p.output_per_mtok, p.cached_input_per_mtok, p.cache_write_per_mtok) if p else None
        batch = self.batch.policy() if isinstance(self.batch, BatchSettings) else BatchPolicy() if self.batch else None
        return ModelSpec(self.model, api_base=self.api_base, api_key_env=self.api_key_env,
                         params=dict(self.params), transport=self.transport, rpm=self.rpm, tpm=self.tpm,
                         price=price, max_concurrency=self.max_concurrency, batch=batch,
                         batch_discount=self.price.batch_discount if self.price else None, think_end=self.think_end)


class ModelEntry(Endpoint):
    """One point of the model axis; ``id`` is its label in reports."""

    kind: ClassVar[str] = "model"
    id: SafeId

    def identity_key(self) -> str:
        """Return what makes two model entries give different replies (their candidates' ids)."""
        return canonical_json([self.model, self.endpoint, self.params])


class PromptMessage(Strict):
    """One message of a ``messages:`` prompt: its role and its template (the model answers the last, a user turn)."""

    role: Literal["system", "user", "assistant"]
    content: Template


class SimulatorEntry(Endpoint):
    """``user_simulator:`` on a prompt: a model playing the user, continuing the conversation from its seed message
    (bench.collect.simulator). Its own endpoint (caps, price, cost line); ``id`` labels it in usage and cost tables."""

    kind: ClassVar[str] = "user simulator"
    id: SafeId = "user-simulator"
    instructions: Template  # its system message: a template over the scenario's fields ("You are {persona}, …")
    max_turns: int = Field(default=6, ge=1, le=100)  # assistant turns at most
    stop_when: str | None = Field(default=None, min_length=1)  # a regex searched in each assistant reply: it ends
    done: str = Field(default="[DONE]", min_length=1)  # the simulator's reply holding this ends the conversation

    @field_validator("stop_when")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression ({exc})") from None
        return v

    def identity(self, seed: int) -> dict[str, Any]:
        """Return what makes this simulator say something else: its endpoint, instructions and limits, and the
        sweep's ``seed`` its requests are seeded from (unless its params set one)."""
        return {"model": self.model, "endpoint": self.endpoint, "params": self.params, "instructions": self.instructions,
                "max_turns": self.max_turns, "stop_when": self.stop_when, "done": self.done,
                **({} if "seed" in self.params else {"seed": seed})}


class PromptEntry(Strict):
    """One versioned prompt template; ``{field}`` placeholders are filled from each scenario. One reply to
    ``user``, or a conversation: ``turns``, ``messages``, a ``user_simulator``, ``tools`` (up to ``max_steps``)."""

    id: SafeId
    version: SafeId
    system: Template | None = None
    user: Template | None = None
    turns: list[str] | None = Field(default=None, min_length=1)
    messages: list[PromptMessage] | None = Field(default=None, min_length=1)
    tools: list[str] | None = Field(default=None, min_length=1)
    max_steps: int | None = Field(default=None, ge=1, le=100)  # None: DEFAULT_MAX_STEPS
    user_simulator: SimulatorEntry | None = None
    # set by the sweep (bench.config.conversations.bind_prompts): the ToolEntry of each name, the sweep's seed
    _tool_entries: tuple[Any, ...] = PrivateAttr(default=())
    _seed: int = PrivateAttr(default=0)

    @property
    def key(self) -> str:
        """Return ``id@version``, the prompt's name in cells and reports."""
        return versioned(self.id, self.version)

    @property
    def is_conversation(self) -> bool:
        """Return True unless the prompt is one user message and one reply (a transcript is then recorded)."""
        return bool(self.turns or self.messages or self.tools or self.user_simulator)

    @property
    def step_limit(self) -> int:
        """Return the most model requests of one assistant turn (a tool loop): ``max_steps``, default 8."""
        return self.max_steps or DEFAULT_MAX_STEPS

    @property
    def tool_entries(self) -> tuple[Any, ...]:
        """Return the ToolEntry of each of ``tools`` (bound by the sweep that holds this prompt)."""
        if self.tools and len(self._tool_entries) != len(self.tools):
            raise ValueError(f"prompt {self.key}: its tools are not bound to a params file's tools: load it with "
                             f"bench.load_sweep")
        return self._tool_entries

    @property
    def sweep_seed(self) -> int:
        """Return the seed of the sweep holding this prompt (its simulated user's requests are seeded from it)."""
        return self._seed

    @property
    def content_hash(self) -> str:
        """Return the hash of the template text (part of every candidate id): ``system`` and ``user`` alone for a
        one-reply prompt, else also every turn, the tools' definitions, ``max_steps`` and the simulator."""
        text = {"system": self.system, "user": self.user}
        if not self.is_conversation:
            return content_hash(text)
        more = {"turns": self.turns, "messages": [m.model_dump() for m in self.messages or ()] or None,
                "tools": [t.model_dump() for t in self.tool_entries] or None,
                "max_steps": self.step_limit if self.tools else None,
                "user_simulator": self.user_simulator.identity(self._seed) if self.user_simulator else None}
        return content_hash({**text, **{k: v for k, v in more.items() if v is not None}})

    @field_validator("turns")
    @classmethod
    def _turn_templates(cls, v: list[str] | None) -> list[str] | None:
        return v if v is None else [checked_template(t) for t in v]

    @model_validator(mode="after")
    def _shape(self) -> "PromptEntry":
        """Refuse a prompt that is not one of the shapes a conversation can take (the message names the prompt)."""
        problem = _shape_problem(self)
        if problem:
            raise ValueError(f"prompt {self.key}: {problem}")
        return self

    def templates(self) -> list[tuple[str, str]]:
        """Return (key, template) of every template a scenario fills: system, user, each turn and message, the
        simulator's instructions (the tools' result templates apart: they also take the call's arguments)."""
        out = [("system", self.system), ("user", self.user), *((f"turns[{n}]", t) for n, t in enumerate(self.turns or ())),
               *((f"messages[{n}].content", m.content) for n, m in enumerate(self.messages or ())),
               ("user_simulator.instructions", self.user_simulator.instructions if self.user_simulator else None)]
        return [(where, text) for where, text in out if text is not None]

    def placeholders(self) -> set[str]:
        """Return the field names the templates need from a scenario (never raises)."""
        names = set()
        for _where, text in self.templates():
            try:
                parsed = template_fields(text)
            except ValueError:
                continue  # only reachable via model_construct; templates.check_placeholders reports it
            names.update(name.split(".")[0].split("[")[0] for name in parsed)
        return names


def _shape_problem(p: PromptEntry) -> str | None:
    """Return what is wrong with a prompt's combination of keys, or None."""
    given = [k for k in ("user", "turns", "messages") if getattr(p, k) is not None]
    if len(given) != 1:
        return f"give exactly one of user, turns, messages (got {' and '.join(given) or 'none'})"
    roles = [m.role for m in p.messages or ()]
    if roles and roles[-1] != "user":
        return "messages: the last message must be a user turn (the one the model answers)"
    if "system" in roles[1:] or ("system" in roles and p.system is not None):
        return "messages: a system message goes first, and not beside the key system"
    if p.user_simulator is not None and p.turns is not None:
        return "user_simulator continues from a seed: give user (the seed message) or messages, not turns"
    if p.max_steps is not None and not p.tools:
        return "max_steps bounds a tool loop: give tools too"
    if p.tools and len(set(p.tools)) != len(p.tools):
        return f"tools: {', '.join(sorted({t for t in p.tools if p.tools.count(t) > 1}))} listed twice"
    return None


class EmbeddingModel(Endpoint):
    """A judge's embedding model (its similarity checks): a LiteLLM model name, or a mapping with an api_base."""

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data

    @field_validator("batch")
    @classmethod
    def _direct(cls, v: Any) -> Any:
        if v:
            raise ValueError("an embedding model is not sent through a Batch API; remove batch")
        return v

    def label(self) -> str:
        """Return what names it in a judge's params (its grades depend on it): the model, and its endpoint if any."""
        return self.model + (f" at {self.endpoint}" if self.endpoint else "")


class JudgeEntry(Endpoint):
    """A judge: a model by role, a versioned rubric and a grading mode."""

    id: SafeId
    model: str | None = None  # required unless the judge grades with checks only (mode automated): it calls no model
    rubric: str  # a rubric id (rubrics/<id>.md) or a path to a rubric file
    mode: JudgeMode | None = None  # ``batch``, the packed mode's name before its rename, is read as ``packed``
    pack_size: int = Field(default=0, ge=0)  # the packed mode: items per call (0 or 1 = single); was ``batch_size``
    item_concurrency: int = Field(default=3, gt=0)  # checklist: requirement calls in flight per item
    baseline: str | None = None  # pairwise over the grid: every cell's answer vs this cell's (model_id/prompt@v)
    repeats: int = Field(default=1, ge=1, le=50)  # grade each item this many times (distinct requests): stability
    sandbox: Literal["bwrap", "none"] = "bwrap"  # where `kind: code` checks run answers; none: unsafe (docs/judging.md)
    embedding_model: EmbeddingModel | None = None  # what embeds the texts of the rubric's similarity checks

    kind: ClassVar[str] = "judge"

    @model_validator(mode="before")
    @classmethod
    def _packed_words(cls, data: Any) -> Any:
        """Read ``mode: batch`` and ``batch_size`` (before the rename) as ``mode: packed`` and ``pack_size``."""
        if not isinstance(data, dict) or ("batch_size" not in data and data.get("mode") != "batch"):
            return data
        data = dict(data)
        if "batch_size" in data:
            if "pack_size" in data:
                raise ValueError("batch_size is the old name of pack_size: give pack_size only")
            data["pack_size"] = data.pop("batch_size")
        if data.get("mode") == "batch":
            data["mode"] = "packed"
        return data

    def identity_key(self) -> str:
        """Return what makes two judges grade differently (their judgments' ids)."""
        return canonical_json([self.model, self.endpoint, self.params, self.rubric, self.mode, self.pack_size,
                               self.baseline, *([self.embedding_model.label()] if self.embedding_model else [])])

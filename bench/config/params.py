"""Params files (`params/*.yaml`): the grid of models × prompt versions × scenarios, validated.

YAML keys map one-to-one onto these pydantic models; an unknown key or a wrong type is
a ParamsError naming the file, the key path and what is allowed. Nothing here calls a
model: `load_sweep` is safe to run anywhere.
"""

from __future__ import annotations

import collections
import re
import string
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from bench.core.errors import ParamsError
from bench.core.records import canonical_json, content_hash
from bench.models.routing import ModelSpec

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"  # every id and name: safe in paths, URLs, MLflow and shells
_SLUG = re.compile(ID_PATTERN)
_ID_HELP = "must be 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit"
MAX_ALIAS_VALUES = 200_000  # values YAML aliases may add by expansion: far above any real grid, far below a bomb
DEFAULT_MAX_ITEMS = 2_000_000  # answers a sweep may plan (cells × scenarios × samples); limits.max_items raises it
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_PREFIX = re.compile(r"^(sk|AIza|gsk_|hf_|xai-|pk_|rk_)")  # how provider keys start
_SECRET_PARAMS = frozenset({"api_key", "api_base", "api_key_env", "key", "token", "authorization"})
_URL_USERINFO = re.compile(r"://[^/@]*@")
_TEMPLATE_HELP = "placeholders are {name}; write a literal brace as {{ or }}"


def _safe_id(v: str) -> str:
    if not _SLUG.fullmatch(v):
        raise ValueError(_ID_HELP)
    return v


SafeId = Annotated[str, AfterValidator(_safe_id)]  # model, judge and prompt ids and versions


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Price(_Strict):
    """USD per million tokens, for endpoints LiteLLM cannot price (self-hosted servers)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class Endpoint(_Strict):
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
        return v

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
        """Return where this model is served, as part of every record id: None for the provider's own
        endpoint, else the api_base (never its credentials) and a transport other than auto.

        The same weights behind two servers (vLLM and llama.cpp, two Ollama hosts, two
        quantizations) are two cells, never one: their replies can differ.
        """
        if self.api_base is None and self.transport == "auto":
            return None
        base = _URL_USERINFO.sub("://", self.api_base.rstrip("/")) if self.api_base else ""
        return base + (f" via {self.transport}" if self.transport != "auto" else "")

    def spec(self) -> ModelSpec:
        """Return the LLM seam's ModelSpec for this endpoint."""
        price = (self.price.input_per_mtok, self.price.output_per_mtok) if self.price else None
        return ModelSpec(self.model, api_base=self.api_base, api_key_env=self.api_key_env,
                         params=dict(self.params), transport=self.transport, rpm=self.rpm, tpm=self.tpm,
                         price=price, max_concurrency=self.max_concurrency)


class ModelEntry(Endpoint):
    """One point of the model axis; ``id`` is its label in reports."""

    kind: ClassVar[str] = "model"
    id: SafeId

    def identity_key(self) -> str:
        """Return what makes two model entries give different replies (their candidates' ids)."""
        return canonical_json([self.model, self.endpoint, self.params])



class PromptEntry(_Strict):
    """One versioned prompt template; ``{field}`` placeholders are filled from each scenario."""

    id: SafeId
    version: SafeId
    system: str | None = None
    user: str


    @property
    def key(self) -> str:
        """Return ``id@version``, the prompt's name in cells and reports."""
        return f"{self.id}@{self.version}"

    @property
    def content_hash(self) -> str:
        """Return the hash of the template text (part of every candidate id)."""
        return content_hash({"system": self.system, "user": self.user})

    @field_validator("system", "user")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        """Refuse unbalanced braces and placeholders that are not plain field names."""
        if v is not None:
            problem = _template_problem(v)
            if problem:
                raise ValueError(f"invalid template ({problem}); {_TEMPLATE_HELP}")
        return v

    def placeholders(self) -> set[str]:
        """Return the field names the template needs from a scenario (never raises)."""
        names = set()
        for text in (self.system or "", self.user):
            try:
                parsed = [name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None]
            except ValueError:
                continue  # only reachable via model_construct; scenarios.check_placeholders reports it
            names.update(name.split(".")[0].split("[")[0] for name in parsed)
        return names


def _template_problem(text: str) -> str | None:
    """Return what is wrong with a template's braces or placeholders, or None if nothing is."""
    try:
        names = [name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None]
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


class SubsetDimension(_Strict):
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


class GenerateSource(_Strict):
    """Scenarios from named dimensions: the full product, or a seeded sample of ``n``."""

    dimensions: dict[str, Dimension] = Field(min_length=1)
    n: int | None = Field(default=None, gt=0)


class DatasetSource(_Strict):
    """Scenarios from a JSONL, CSV or Parquet file; ``fields`` maps template fields to columns."""

    path: str  # relative to the params file's folder, or to the project root
    fields: dict[str, str] = Field(min_length=1)
    reference: dict[str, str] = Field(default_factory=dict)  # ground truth columns (e.g. label)
    limit: int | None = Field(default=None, gt=0)


class Scenarios(_Strict):
    """Exactly one scenario source."""

    generate: GenerateSource | None = None
    dataset: DatasetSource | None = None

    @model_validator(mode="after")
    def _one(self) -> "Scenarios":
        if (self.generate is None) == (self.dataset is None):
            raise ValueError("give exactly one of 'generate' or 'dataset'")
        return self


class JudgeEntry(Endpoint):
    """A judge: a model by role, a versioned rubric and a grading mode."""

    id: SafeId
    rubric: str  # a rubric id (rubrics/<id>.md) or a path to a rubric file
    mode: Literal["rubric", "batch", "checklist", "pairwise", "automated", "hybrid"] | None = None
    batch_size: int = Field(default=0, ge=0)  # batch mode: items per call (0 or 1 = single)
    item_concurrency: int = Field(default=3, gt=0)  # checklist: requirement calls in flight per item
    baseline: str | None = None  # pairwise over the grid: every cell's answer vs this cell's (model_id/prompt@v)

    kind: ClassVar[str] = "judge"

    def identity_key(self) -> str:
        """Return what makes two judges grade differently (their judgments' ids)."""
        return canonical_json([self.model, self.endpoint, self.params, self.rubric, self.mode, self.batch_size,
                               self.baseline])


class Limits(_Strict):
    """The sweep's budget: the cap on requests in flight for the whole sweep, timeouts and retries."""

    max_concurrency: int = Field(default=16, gt=0)
    timeout_s: float = Field(default=60.0, gt=0)
    retries: int = Field(default=4, ge=0)  # extra requests for one call that hit a 429, 5xx, timeout, …
    max_attempts: int = Field(default=3, gt=0)  # tries of one item across runs: each resume asks a failure afresh
    max_items: int = Field(default=DEFAULT_MAX_ITEMS, gt=0)  # answers a sweep may plan: a typo cannot plan 10^8


class Sweep(_Strict):
    """A whole params file."""

    name: str
    seed: int = 0
    models: list[ModelEntry] = Field(default_factory=list)  # ≥ 1, except for a pairwise dataset
    prompts: list[PromptEntry] = Field(default_factory=list)
    scenarios: Scenarios
    samples: int = Field(default=1, gt=0)
    judges: list[JudgeEntry] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SLUG.fullmatch(v):
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
        _refuse_duplicates("id", [entry.id for entry in v])
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
        _refuse_duplicates("id@version", [p.key for p in v])
        return v

    def cells(self) -> list["Cell"]:
        """Return every (model, prompt) cell in declaration order."""
        return [Cell(m, p) for m in self.models for p in self.prompts]


def _refuse_duplicates(what: str, keys: list[str]) -> None:
    """Raise ValueError naming every key listed more than once (linear: a file may list 200k prompts)."""
    dupes = sorted(k for k, n in collections.Counter(keys).items() if n > 1)
    if dupes:
        raise ValueError(f"duplicate {what} {', '.join(dupes)}")


class Cell(BaseModel):
    """One (model, prompt version) point of the grid; ``key`` is ``model_id/prompt_id@version``."""

    model_config = ConfigDict(frozen=True)
    model: ModelEntry
    prompt: PromptEntry

    def __init__(self, model: ModelEntry, prompt: PromptEntry):
        super().__init__(model=model, prompt=prompt)

    @property
    def key(self) -> str:
        return f"{self.model.id}/{self.prompt.key}"


def load_sweep(path: str | Path) -> tuple[Sweep, Path]:
    """Return the validated Sweep of a params file and the file's resolved path.

    Raises ParamsError naming the file, the key path and what is allowed.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamsError(f"{path}: cannot read the params file ({exc.strerror or exc})") from None
    data = _parse_yaml(path, text)
    if data is None:
        raise ParamsError(f"{path}: the file is empty; expected the keys name, models, prompts, scenarios")
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of keys (name, models, prompts, scenarios, …), "
                          f"got {type(data).__name__}")
    try:
        return Sweep.model_validate(data), path.resolve()
    except ValidationError as exc:
        raise ParamsError(format_errors(path, exc, data)) from None


class DuplicateKeyError(yaml.YAMLError):
    """A mapping lists the same key twice (YAML would silently keep the last)."""

    def __init__(self, key: Any, line: int):
        super().__init__(f"duplicate key '{key}'")
        self.key, self.line = key, line


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe loader that refuses a key repeated in one mapping (``<<`` merges may still be overridden).

    It parses with libyaml's C parser where PyYAML has it (a 50 MB params file: seconds, not minutes).
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Return the mapping of ``node``, raising DuplicateKeyError on a repeated key."""
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise DuplicateKeyError(key, key_node.start_mark.line + 1)
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: SafeLoader reports it
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: Path, text: str) -> Any:
    """Return the parsed YAML of ``text`` (from ``path``); refuse a key repeated in a mapping and aliases
    that add more than MAX_ALIAS_VALUES values (a "billion laughs" bomb), before building anything."""
    loader = UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        memo: dict[int, int] = {}
        if _expanded_size(node, memo) - len(memo) > MAX_ALIAS_VALUES:
            raise ParamsError(f"{path}: its aliases (&name / *name) expand to more than {MAX_ALIAS_VALUES:,} "
                              f"values; a params file never needs that many: remove the aliases")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Return how many values ``node`` becomes once every alias is expanded (shared nodes counted each
    time they are used), in time linear in the number of distinct nodes."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = _ENDLESS  # a cycle (a recursive alias) is an endless expansion
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        size = 1
    memo[key] = min(size, _ENDLESS)
    return memo[key]


_ENDLESS = 10**12


def _parse_yaml(path: Path, text: str) -> Any:
    """Return the parsed YAML of a params file; ParamsError (with the line) if invalid or a key repeats."""
    try:
        return load_yaml(path, text)
    except DuplicateKeyError as exc:
        raise ParamsError(f"{path}:{exc.line}: {exc}") from None
    except RecursionError:
        raise ParamsError(f"{path}: the YAML is nested too deeply to be a params file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ParamsError(f"{path}{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})") from None


def format_errors(path: Path | str, exc: ValidationError, data: Any) -> str:
    """Return one line per validation error: ``file: key.path: what is wrong (what is allowed)``."""
    lines = []
    for err in exc.errors():
        branches = [str(p) for p in err["loc"] if isinstance(p, str) and _is_branch(p)]
        if branches and branches[-1].startswith("list[") and isinstance(err.get("input"), dict):
            continue  # a mapping was meant as the other branch (a subset dimension): that error says it
        loc = _loc(err["loc"])
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(err["loc"][:-1])
            msg = f"unknown key '{err['loc'][-1]}'" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "too_short":
            n = err.get("ctx", {}).get("min_length", 1)
            msg = f"needs at least {n} item{'' if n == 1 else 's'}"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if "input" in err and err["type"] not in ("value_error",) and not isinstance(err["input"], dict):
                msg += f" (got {err['input']!r})"
        lines.append(f"{path}: {loc}: {msg}" if loc else f"{path}: {msg}")
    unique = list(dict.fromkeys(lines))
    return "\n".join(unique)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_branch(part):
            continue  # pydantic's union-branch names are not keys the user wrote
        else:
            out += f".{part}" if out else str(part)
    return out


def _is_branch(part: Any) -> bool:
    """Return True for pydantic's names of union branches in an error location."""
    return isinstance(part, str) and (part.startswith(("list[", "function-")) or part == "SubsetDimension")


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Return the keys allowed at a location of the params file (for unknown-key errors)."""
    model: Any = Sweep
    for part in loc:
        if _is_branch(part):
            model = SubsetDimension if "SubsetDimension" in part else None
            continue
        if isinstance(part, int) or model is None:
            continue
        field = getattr(model, "model_fields", {}).get(part)
        model = model_of(field.annotation) if field is not None else None
    return list(getattr(model, "model_fields", {})) if model is not None else []


def model_of(annotation: Any) -> Any:
    """Return the pydantic model inside an annotation like ``list[X]``, ``X | None`` (or None)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = model_of(arg)
        if found is not None:
            return found
    return None

"""Checks that run code: a Python function (``kind: python``), the answer's code against tests in a sandbox
(``kind: code``), and plugin checks (``PluginCheck``); results are kept in the response cache."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler, field_validator, model_validator

from bench.config import sandbox as sb
from bench.config._strict import Strict
from bench.config.ids import SafeId
from bench.config.reference_checks import extracted, quote
from bench.core.function_calls import call
from bench.core.plugins import plugin_checks

Outcome = tuple[float, bool, str, dict | None]  # (score 0..1, passed, detail, more details or None)
_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_HARNESS = "1"  # bump when the harness's scoring changes: cached code results are then run again


@dataclass(frozen=True)
class CheckContext:
    """What checks that run code need besides the answer: the scenario, the params file's folder (importable),
    the response cache (None: nothing cached) and the judge's ``sandbox``."""

    scenario: dict[str, Any] | None = None
    folder: Path | None = None
    cache: Any = None
    sandbox: str = "bwrap"


class PluginCheck(Strict):
    """The base of a check another package registers (entry point group ``bench.checks``, named by its kind): add
    ``kind: Literal["…"]``, its keys, and ``score(output, reference, scenario)`` returning what a function returns."""

    id: SafeId
    weight: float = Field(default=1.0, ge=0)

    def score(self, output: str, reference: Any, scenario: dict[str, Any] | None) -> Any:
        raise NotImplementedError


class PythonCheck(PluginCheck):
    """Scores what ``function`` (``module:attr``, the module beside the params file or importable) returns for
    ``fn(output, reference, scenario)``: a bool, a number in 0..1 or ``{"score": …, "explanation": …}``."""

    kind: Literal["python"]
    function: str
    reference: str | None = Field(default=None, min_length=1)  # pass this reference value (else all of them)
    threshold: float = Field(default=0.5, ge=0, le=1)  # a score at or above it has passed
    timeout_s: float = Field(default=30.0, gt=0, le=3600)

    @field_validator("function")
    @classmethod
    def _function(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", v):
            raise ValueError(f"write module:function, e.g. mychecks:has_units (got {quote(v)})")
        return v


class CodeCheck(PluginCheck):
    """Runs the answer's code (its last fenced block, or what ``extract`` takes) against ``tests`` (inline, or the
    scenario's ``reference`` key) in the sandbox; 1 when every test passes (``partial``: the fraction passed)."""

    kind: Literal["code"]
    tests: str | None = None
    reference: str | None = Field(default=None, min_length=1)
    extract: str | None = None
    language: str = "python"
    partial: bool = False
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    memory_mb: int = Field(default=512, ge=32)

    @model_validator(mode="after")
    def _tests(self) -> "CodeCheck":
        if (self.tests is None) == (self.reference is None):
            raise ValueError(f"check '{self.id}': give exactly one of tests (the test code) or reference (the "
                             f"scenario's reference key holding it)")
        if self.language not in sb.RUNNERS:
            raise ValueError(f"check '{self.id}': no runner for language '{self.language}' (have: "
                             f"{', '.join(sb.RUNNERS)})")
        try:
            re.compile(self.extract or "")
        except (re.error, RecursionError, OverflowError) as exc:
            raise ValueError(f"check '{self.id}': invalid regular expression in extract ({exc})") from None
        return self


PROGRAM_KINDS: dict[str, type[PluginCheck]] = {"python": PythonCheck, "code": CodeCheck}


def with_plugins(data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate a check with bench's kinds, else (an unknown kind) with the model a plugin registered for it."""
    if isinstance(data, PluginCheck) and type(data).__module__ != __name__:
        return data  # a plugin's check validated before (a rubric copied)
    try:
        return handler(data)
    except ValidationError as exc:
        model = plugin_checks().get(data.get("kind")) if isinstance(data, dict) else None
        if model is None or exc.errors()[0]["type"] != "union_tag_invalid":
            raise
        return model.model_validate(data)


def run_program_check(check: PluginCheck, text: str, reference: dict[str, Any] | None,
                      context: CheckContext | None) -> Outcome:
    """Return the outcome of a check that runs code (a function, the answer's code, a plugin); never raises."""
    ctx = context or CheckContext()
    key = getattr(check, "reference", None)
    if key is not None and (not reference or key not in reference):
        return 0.0, False, f"the scenario has no reference {quote(key)}", None
    value = reference.get(key) if key is not None and reference else dict(reference or {})
    if isinstance(check, CodeCheck):
        return _run_code(check, text, str(value) if check.reference else check.tests or "", ctx)
    if isinstance(check, PythonCheck):
        return _run_function(check, text, value, ctx)
    return as_outcome(check.score(text, value, ctx.scenario), 0.5)


def as_outcome(value: Any, threshold: float) -> Outcome:
    """Return the outcome of what a function returned: a bool, a number in 0..1, or ``{"score", "explanation"}``."""
    explanation = None
    if isinstance(value, dict) and "score" in value:
        value, explanation = value["score"], value.get("explanation")
    if isinstance(value, bool):
        return float(value), value, str(explanation or f"returned {value}"), None
    if isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1:
        return float(value), value >= threshold, str(explanation or f"returned {value:g}"), None
    return 0.0, False, f"returned {quote(repr(value))}, not a bool, a number in 0..1 or {{'score': …}}", None


def module_hash(function: str, folder: Path | None) -> str | None:
    """Return the sha256 of ``function``'s module source (found without importing it), None when not found."""
    parts = function.split(":")[0].split(".")
    paths: list[str] | None = [*([str(folder)] if folder else []), *sys.path]
    spec = None
    for i, name in enumerate(parts):
        spec = PathFinder.find_spec(".".join(parts[:i + 1]) if i else name, paths)
        if spec is None:
            return None
        paths = list(spec.submodule_search_locations or [])
    origin = spec.origin if spec is not None else None
    return hashlib.sha256(Path(origin).read_bytes()).hexdigest() if origin and Path(origin).is_file() else None


def _cached(ctx: CheckContext, key: str, make: Any) -> Outcome:
    hit = ctx.cache.get(key) if ctx.cache is not None else None
    if hit is not None:
        return hit["score"], hit["passed"], hit["detail"], hit.get("more")
    outcome, keep = make()
    if keep and ctx.cache is not None:
        ctx.cache.put(key, dict(zip(("score", "passed", "detail", "more"), outcome)))
    return outcome


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def _run_function(check: PythonCheck, text: str, reference: Any, ctx: CheckContext) -> Outcome:
    source = module_hash(check.function, ctx.folder)
    if source is None:
        where = f"beside the params file ({ctx.folder}) or" if ctx.folder else ""
        return 0.0, False, f"function {quote(check.function)}: its module is found neither {where} on sys.path", None
    key = _key("check:python", check.function, source, check.threshold, text, reference, ctx.scenario)

    def make() -> tuple[Outcome, bool]:
        status, value = call(check.function, ctx.folder, (text, reference, ctx.scenario), check.timeout_s, source)
        if status == "ok":
            return as_outcome(value, check.threshold), True
        if status == "timeout":
            return (0.0, False, f"{check.function} timed out after {check.timeout_s:g} s", None), False
        return (0.0, False, f"{check.function} raised {value}", None), True
    return _cached(ctx, key, make)


def answer_code(text: str, pattern: str | None) -> str | None:
    """Return the code of an answer: what ``pattern`` extracts, else its last fenced block, else the whole text."""
    if pattern is not None:
        return extracted(pattern, text)
    blocks = _FENCED.findall(text)
    return blocks[-1] if blocks else text


def _run_code(check: CodeCheck, text: str, tests: str, ctx: CheckContext) -> Outcome:
    if ctx.sandbox != "none" and sb.bwrap() is None:
        return 0.0, False, "bubblewrap (bwrap) is not installed: the code was not run (apt-get install bubblewrap)", \
            None
    code = answer_code(text, check.extract)
    if code is None:
        return 0.0, False, f"extract {quote(check.extract or '')} found no code", None
    limits = sb.Limits(check.timeout_s, check.memory_mb)
    key = _key("check:code", _HARNESS, check.language, code, tests, limits.__dict__)  # a timeout is kept too
    ran = ctx.cache.get(key) if ctx.cache is not None else None
    if ran is None:
        ran = sb.run(sb.RUNNERS[check.language], code, tests, limits, ctx.sandbox).__dict__
        if ctx.cache is not None and not _unstarted(ran):
            ctx.cache.put(key, ran)
    return _scored(check, ran)


def _unstarted(ran: dict[str, Any]) -> bool:
    """Return whether bubblewrap could not start the sandbox (out of processes, say): no result of the code's."""
    return ran["returncode"] == 1 and not ran["stdout"] and ran["stderr"].startswith("bwrap: ")


def _scored(check: CodeCheck, ran: dict[str, Any]) -> Outcome:
    """Return the outcome of a program's run (``bench.config.sandbox.Ran`` as a dict) against its tests."""
    out, _, result = ran["stdout"].rpartition(sb.MARK)
    more = {"stdout": sb.tail(out.removesuffix("\n") if result else ran["stdout"]), "stderr": sb.tail(ran["stderr"]),
            "exit": ran["returncode"]}
    if ran["returncode"] is None:
        return 0.0, False, f"timed out after {check.timeout_s:g} s", more
    if _unstarted(ran):
        return 0.0, False, f"the sandbox could not start: {ran['stderr'].strip()}", {**more, "unstarted": True}
    try:
        found = json.loads(result)
    except ValueError:
        return 0.0, False, f"the program ended (exit {ran['returncode']}) before its tests reported", more
    if found.get("error"):
        return 0.0, False, f"failed: {found['error']}"[:300], more
    tests = found.get("tests") or [["asserts", None]]
    failed = [f"{n}: {e}" for n, e in tests if e is not None]
    detail = f"{len(tests) - len(failed)}/{len(tests)} tests passed" + (f"; {failed[0]}"[:300] if failed else "")
    return (1 - len(failed) / len(tests) if check.partial else float(not failed)), not failed, detail, more

"""Checks of an answer's structure and meaning: ``json_schema`` (the answer's JSON is valid against a schema) and
``similarity`` (the cosine of the answer's and the reference's embeddings, asked by bench.judge.similarity)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationInfo, model_validator

from bench.config._errors import reason
from bench.config._strict import Strict
from bench.config.ids import SafeId
from bench.config.reference_checks import ReferenceCheckBase, extracted, quote
from bench.config.trajectory_checks import _schema_problem

_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)```", re.DOTALL)
_OPENINGS = 50  # "{" positions tried for an object inside prose


class JsonSchemaCheck(Strict):
    """Scores 1 when the answer (or the JSON taken out of it) is valid against ``schema``: a mapping, or a JSON or
    YAML file's path, relative to the rubric file (``schema_file`` keeps that path)."""

    id: SafeId
    weight: float = Field(default=1.0, ge=0)
    kind: Literal["json_schema"]
    json_schema: dict[str, Any] = Field(alias="schema")
    schema_file: str | None = None  # set when the schema was read from a file (its content is in the rubric's hash)

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("schema"), str):
            return data
        base = Path((info.context or {}).get("base") or ".")
        path = base / Path(data["schema"]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
            schema = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
            raise ValueError(f"check '{data.get('id')}': schema: cannot read the schema file {path} "
                             f"({reason(exc)[:200]})") from None
        if not isinstance(schema, dict):
            raise ValueError(f"check '{data.get('id')}': schema: {path} holds no mapping (a JSON schema is an object)")
        return {**data, "schema": schema, "schema_file": str(path)}

    @model_validator(mode="after")
    def _valid(self) -> "JsonSchemaCheck":
        problem = _schema_problem(self.json_schema)
        if problem is not None:
            where = f" ({self.schema_file})" if self.schema_file else ""
            raise ValueError(f"check '{self.id}': schema{where} is no valid JSON schema ({problem})")
        return self


class SimilarityCheck(ReferenceCheckBase):
    """Scores the cosine similarity of the answer's and the reference's embeddings (a list of references: the
    best), by the judge's ``embedding_model``; with ``threshold``, 1 at or above it, else 0."""

    kind: Literal["similarity"]
    threshold: float | None = Field(default=None, ge=-1, le=1)


STRUCTURED_KINDS: dict[str, type[Strict]] = {"json_schema": JsonSchemaCheck, "similarity": SimilarityCheck}


def run_json_schema(check: JsonSchemaCheck, text: str) -> tuple[bool, str]:
    """Return (passed, detail): whether the answer's JSON is valid, else its first error's JSON path and message."""
    found, value = answer_json(text)
    if not found:
        return False, "the answer holds no JSON (whole, in a ``` fence, or a {…} in its text)"
    import jsonschema  # noqa: PLC0415 - its import takes seconds (format checkers): only when a check runs

    schema = check.json_schema
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return True, "valid against the schema"
    return False, f"{error.json_path}: {error.message[:200]}"


def answer_json(text: str) -> tuple[bool, Any]:
    """Return (True, value) for the JSON the answer is or holds (fenced, or first ``{…}``), else (False, None)."""
    for candidate in (text.strip(), *(m.group(1).strip() for m in _FENCED.finditer(text))):
        try:
            return True, json.loads(candidate)
        except (ValueError, RecursionError):
            pass
    decoder = json.JSONDecoder()
    for n, m in enumerate(re.finditer(r"\{", text)):
        if n == _OPENINGS:
            break
        try:
            return True, decoder.raw_decode(text, m.start())[0]
        except (ValueError, RecursionError):
            pass
    return False, None


def similarity_outcome(check: SimilarityCheck, similarity: float, reference: Any) -> tuple[bool, str, float]:
    """Return (passed, detail, score) of a similarity check whose best cosine is ``similarity``: with a threshold,
    1 or 0; without, the cosine on 0..1 (a negative one scores 0), passed from 0.5."""
    said = f"cosine {similarity:.3f} with the reference {quote(str(reference))}"
    if check.threshold is not None:
        passed = similarity >= check.threshold
        return passed, f"{said} ({'≥' if passed else '<'} threshold {check.threshold:g})", float(passed)
    score = min(1.0, max(0.0, similarity))
    return score >= 0.5, said, score


def similarity_texts(check: SimilarityCheck, text: str, expected: Any) -> tuple[str | None, list[str]]:
    """Return the answer to embed (None: ``extract`` found none) and the reference texts (a list: each)."""
    options = expected if isinstance(expected, list) else [expected]
    return extracted(check.extract, text), [o if isinstance(o, str) else json.dumps(o) for o in options]

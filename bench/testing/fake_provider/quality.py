"""How the fake provider's models differ: a default answer ``fake answer <tag><hash>`` names its model, so a fake
judge grades it at that model's quality with no state kept; with ``noise: 0`` one request gets one reply."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from bench.testing.fake_provider.request_body import enum_of

QUALITY_DEFAULTS: dict[str, Any] = {"model_quality": {}, "judge_bias": {}, "noise": 0.0, "seed": 0,
                                    "layout_blind": False}
ANSWER = re.compile(r"fake answer ([0-9a-f]{8})\b")  # the whole hash: its first three digits are the model's tag
_ITEM = re.compile(r"^Item (\S+)\.$", re.M)  # a packed judge prompt's item header (bench.judge._prompts)
# a judge prompt's reference blocks and few-shot examples: a fake answer there is not one to grade
_REFERENCES = re.compile(r"<(reference|own-answer|example)-(\w+)>.*?</\1-\2>", re.S)
ITEM_SPREAD = 0.15  # sd of an item's own difficulty (scale fraction): answers of one model vary
READING_SPREAD = 0.05  # sd of one judge's own reading of an item: two judges agree, but not exactly
CRITERION_SPREAD = 0.05  # sd of an item's criterion-to-criterion differences
VERDICT_GAIN = 2.5  # a quality difference of 0.2 moves a verdict one label from the tie


def answer_text(model: str, messages_json: str, arrival: int = 0) -> str:
    """Return the default answer of ``model``, ``fake answer <tag><hash>``, a later ``arrival`` hashed differently."""
    salt = f"#{arrival}" if arrival else ""
    digest = hashlib.sha256(f"{model}\n{messages_json}{salt}".encode()).hexdigest()
    return f"fake answer {model_tag(model)}{digest[:5]}"


def model_tag(model: str) -> str:
    """Return the three hex digits that mark a model's answers."""
    return hashlib.sha256(model.encode()).hexdigest()[:3]


def quality_of(tag: str, cfg: dict[str, Any]) -> float:
    """Return the quality (0–1) of the model whose answers carry ``tag``: its ``model_quality``, else the tag's."""
    for name, value in cfg["model_quality"].items():
        if model_tag(name) == tag:
            return float(value)
    return 0.25 + 0.6 * int(tag, 16) / 0xFFF


def shape(value: Any, body: dict[str, Any], text: str, cfg: dict[str, Any], arrival: int) -> Any:
    """Return a judge's schema-valid ``value`` with its grades following the quality of the answers in ``text``."""
    if not isinstance(value, dict):
        return value
    text = _REFERENCES.sub("", text)
    draw = _Draws(body, cfg, arrival)
    if isinstance(value.get("grades"), list):
        chunks = _items(text)
        for grade in value["grades"]:
            answers = ANSWER.findall(chunks.get(str(grade.get("id")), "")) if isinstance(grade, dict) else []
            if answers and isinstance(grade.get("scores"), dict):
                _scores(grade["scores"], answers[-1], draw, cfg, body)
        return value
    answers = ANSWER.findall(text)
    if not answers:
        return value
    if isinstance(value.get("scores"), dict):
        _scores(value["scores"], answers[-1], draw, cfg, body)
    if isinstance(value.get("fulfilled"), bool):
        value["fulfilled"] = draw.rng(answers[-1]).random() < _fraction(answers[-1], draw, cfg)
    if isinstance(value.get("verdict"), str) and len(answers) >= 2:
        value["verdict"] = _verdict(answers[0], answers[-1], draw, cfg, body)
    return value


class _Draws:
    """The seeded draws of one reply: the item's, the judge's reading, and (with ``noise``) the arrival's."""

    def __init__(self, body: dict[str, Any], cfg: dict[str, Any], arrival: int):
        messages = body.get("messages")
        if cfg["layout_blind"] and isinstance(messages, list):  # the same messages in any order read alike
            messages = sorted(map(repr, messages))
        self.request = _digest(body.get("model"), messages)
        self.noise, self.arrival, self.seed = float(cfg["noise"]), arrival, cfg["seed"]
        self.bias = float(cfg["judge_bias"].get(str(body.get("model")), 0.0))

    def rng(self, *parts: object) -> random.Random:
        return random.Random(_digest(self.request, self.arrival if self.noise else 0, self.seed, *parts))

    def item(self, answer: str, *parts: object) -> float:
        """Return the shift of an item (answer) that every judge sees alike."""
        return random.Random(_digest("item", answer, *parts)).gauss(0, ITEM_SPREAD if not parts else CRITERION_SPREAD)

    def shift(self, *parts: object) -> float:
        """Return the judge's own reading of this request, its bias and (with noise) this arrival's draw."""
        reading = random.Random(_digest(self.request, "reading", *parts)).gauss(0, READING_SPREAD)
        noise = self.rng("noise", *parts).gauss(0, self.noise) if self.noise else 0.0
        return reading + self.bias + noise


def _fraction(answer: str, draw: _Draws, cfg: dict[str, Any], *parts: object) -> float:
    """Return where on a scale (0–1) this judge puts this answer."""
    base = quality_of(answer[:3], cfg) + draw.item(answer)
    return min(1.0, max(0.0, base + (draw.item(answer, *parts) if parts else 0.0) + draw.shift(*parts)))


def _scores(scores: dict[str, Any], answer: str, draw: _Draws, cfg: dict[str, Any], body: dict[str, Any]) -> None:
    """Set every score of a grade from the answer's place on its criterion's scale (the schema's enum)."""
    for criterion in list(scores):
        levels = _levels(body, criterion)
        if levels:
            scores[criterion] = levels[round(_fraction(answer, draw, cfg, criterion) * (len(levels) - 1))]


def _verdict(a: str, b: str, draw: _Draws, cfg: dict[str, Any], body: dict[str, Any]) -> str:
    """Return the label for A (``a``) against B: the labels run from A much better to B much better."""
    labels = _levels(body, "verdict") or []
    diff = (quality_of(a[:3], cfg) + draw.item(a)) - (quality_of(b[:3], cfg) + draw.item(b)) + draw.shift("pair")
    u = min(1.0, max(0.0, 0.5 - VERDICT_GAIN * diff / 2))
    return labels[round(u * (len(labels) - 1))] if labels else "A=B"


def _levels(body: dict[str, Any], key: str) -> list[Any] | None:
    """Return the ``enum`` of property ``key`` in the request's response schema (None if it has none)."""
    return enum_of(body.get("response_format"), key)


def _items(text: str) -> dict[str, str]:
    """Return a packed judge prompt's text per item id (from its ``Item <id>.`` header to the next)."""
    heads = list(_ITEM.finditer(text))
    return {m.group(1): text[m.end():(heads[i + 1].start() if i + 1 < len(heads) else len(text))]
            for i, m in enumerate(heads)}


def _digest(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:16], 16)

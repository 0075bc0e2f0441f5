"""Judges with a known bias, scripted (the first slot, long answers, one model's answers), for the bias audit to find;
keyed by the judge model's name, acting on the grades ``quality.shape`` gave; and answers of varied length."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from bench.testing.fake_provider.quality import ANSWER, _items, _levels, model_tag

BIAS_DEFAULTS: dict[str, Any] = {"position_bias": {}, "length_bias": {}, "favour_model": {}, "pad_answers": {}}
FILLER = "more"  # a padded answer's filler word
_BLOCK = re.compile(r"<response-(\w+)>\n(.*?)\n</response-\1>", re.S)  # a response as bench.judge._prompts shows it


def padded(text: str, model: str, cfg: dict[str, Any] | None) -> str:
    """Return a default answer with its filler words (``pad_answers``; unchanged when its model has none)."""
    most = (cfg or {}).get("pad_answers", {}).get(model, 0)
    if not most:
        return text
    words = int(hashlib.sha256(f"pad\n{text}".encode()).hexdigest()[:8], 16) % (most + 1)
    return " ".join([text, *[FILLER] * words])


def biased(value: Any, body: dict[str, Any], text: str, cfg: dict[str, Any], arrival: int) -> Any:
    """Return a judge's shaped ``value`` with its judge model's biases applied (unchanged when it has none)."""
    judge = str(body.get("model"))
    if not isinstance(value, dict) or not any(judge in cfg.get(k, {}) for k in
                                              ("position_bias", "length_bias", "favour_model")):
        return value
    chars = answer_chars(text)
    if isinstance(value.get("grades"), list):
        chunks = _items(text)
        for grade in value["grades"]:
            answers = ANSWER.findall(chunks.get(str(grade.get("id")), "")) if isinstance(grade, dict) else []
            if answers and isinstance(grade.get("scores"), dict):
                _raise_scores(grade["scores"], _bonus(answers[-1], judge, chars, cfg), body)
        return value
    answers = ANSWER.findall(text)
    if answers and isinstance(value.get("scores"), dict):
        _raise_scores(value["scores"], _bonus(answers[-1], judge, chars, cfg), body)
    if isinstance(value.get("verdict"), str) and len(answers) >= 2:
        value["verdict"] = _verdict(value["verdict"], answers[0], answers[-1], judge, chars, cfg, body, arrival)
    return value


def answer_chars(text: str) -> dict[str, int]:
    """Return each fake answer's (its hash's) length as shown: the characters of the response block holding it."""
    return {answer: len(block) for _, block in _BLOCK.findall(text) for answer in ANSWER.findall(block)}


def _bonus(answer: str, judge: str, chars: dict[str, int], cfg: dict[str, Any]) -> int:
    """Return the levels (labels) ``judge`` adds for ``answer``: its length bonus and its favoured-model bonus."""
    bonus = 0
    length = cfg.get("length_bias", {}).get(judge)
    if length and chars.get(answer, len(f"fake answer {answer}")) > length["over_chars"]:
        bonus += length["bonus"]
    favour = cfg.get("favour_model", {}).get(judge)
    if favour and answer[:3] == model_tag(favour["model"]):
        bonus += favour["bonus"]
    return bonus


def _raise_scores(scores: dict[str, Any], bonus: int, body: dict[str, Any]) -> None:
    """Move every score ``bonus`` levels up its criterion's scale (the schema's enum), kept on the scale."""
    for criterion, score in list(scores.items()):
        levels = _levels(body, criterion)
        if bonus and levels and score in levels:
            scores[criterion] = levels[min(len(levels) - 1, max(0, levels.index(score) + bonus))]


def _verdict(label: str, first: str, second: str, judge: str, chars: dict[str, int], cfg: dict[str, Any],
             body: dict[str, Any], arrival: int) -> str:
    """Return the verdict moved towards the answer its bonuses favour, then (with ``position_bias``) to the first."""
    labels = _levels(body, "verdict") or []
    if label not in labels:
        return label
    at, last = labels.index(label), len(labels) - 1  # labels run from "first much better" to "second much better"
    at = min(last, max(0, at - _bonus(first, judge, chars, cfg) + _bonus(second, judge, chars, cfg)))
    p = cfg.get("position_bias", {}).get(judge, 0.0)
    mildest = (last - 1) // 2  # the first-favouring label nearest a tie
    if p and mildest >= 0 and at > mildest and _draw(body, cfg, arrival) < p:
        at = mildest
    return labels[at]


def _draw(body: dict[str, Any], cfg: dict[str, Any], arrival: int) -> float:
    """Return this request's position draw in [0, 1): seeded by the request (and its arrival, with ``noise``)."""
    key = repr((body.get("model"), body.get("messages"), arrival if cfg.get("noise") else 0, cfg.get("seed", 0)))
    return random.Random(hashlib.sha256(f"position\n{key}".encode()).hexdigest()).random()

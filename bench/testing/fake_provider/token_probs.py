"""Token log-probabilities for a reply (``logprobs: true``), in OpenAI's shape: every token is certain except a JSON
number the schema allows, which gets 1 − ``logprob_alt``, and the next allowed value up or down ``logprob_alt``."""

from __future__ import annotations

import math
import random
import re
from typing import Any

from bench.testing.fake_provider.request_body import schema_nodes

_TOKEN = re.compile(r"\d+|\w+|\s+|[^\w\s]")


def allowed_values(schema: Any) -> set[int]:
    """Every integer an ``enum`` of ``schema`` allows (the rubric's score scales)."""
    return {v for node in schema_nodes(schema) if isinstance(node.get("enum"), list) for v in node["enum"]
            if isinstance(v, int) and not isinstance(v, bool)}


def fake_logprobs(content: str, schema: Any, seed: int, alt_p: float) -> dict[str, Any]:
    """Return ``choices[0].logprobs`` for ``content``: ``{"content": [{"token", "logprob", "top_logprobs"}]}``."""
    allowed, rng = allowed_values(schema), random.Random(seed)
    tokens = _TOKEN.findall(content)
    out, last = [], ""
    for tok in tokens:
        top = [{"token": tok, "logprob": 0.0}]
        if tok.isdigit() and last == ":" and int(tok) in allowed and 0 < alt_p < 1:
            v = int(tok)
            ups = [w for w in (v + 1, v - 1) if w in allowed]
            alt = ups[rng.randrange(len(ups))] if len(ups) > 1 else (ups[0] if ups else None)
            if alt is not None:
                top = [{"token": tok, "logprob": math.log(1 - alt_p)}, {"token": str(alt), "logprob": math.log(alt_p)}]
        out.append({"token": tok, "logprob": top[0]["logprob"], "top_logprobs": top})
        if not tok.isspace():
            last = tok
    return {"content": out}

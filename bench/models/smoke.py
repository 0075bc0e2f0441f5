"""`bench smoke`: one plain and one schema-constrained request through the client, then the same again from cache."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.models.client import LLM
from bench.models.eventloop import run
from bench.models.limits import Limits
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec

SMOKE_SCHEMA = {
    "type": "object",
    "properties": {"tip": {"type": "string", "minLength": 1, "maxLength": 200},
                   "minutes": {"type": "integer", "enum": [5, 10, 15, 20, 25, 30]}},  # llama.cpp grammars enforce enum
    "required": ["tip", "minutes"],
    "additionalProperties": False,
}
PLAIN = [{"role": "user", "content": "Give one short tip for staying focused while studying."}]
STRUCTURED = [{"role": "user", "content": "Give one study tip as JSON with keys tip and minutes."}]


def smoke(model: str, api_base: str | None = None, runs: str | Path = "runs") -> int:
    """Ask ``model`` twice (plain, then JSON-constrained), print replies, usage and timing; return 0."""
    spec = ModelSpec(model, api_base=api_base, params={"temperature": 0.2, "max_tokens": 64, "seed": 7})
    preflight([spec])
    llm = LLM(Limits(max_concurrency=2, timeout_s=120), cache=str(Path(runs) / "smoke" / "responses"))
    rf = {"type": "json_schema", "json_schema": {"name": "tip", "schema": SMOKE_SCHEMA, "strict": True}}

    async def ask_both() -> None:
        for label, msgs, fmt, extra in (("plain", PLAIN, None, None), ("json", STRUCTURED, rf, {"max_tokens": 160})):
            t0 = time.perf_counter()
            comp = await llm.complete(spec, msgs, response_format=fmt, params=extra)
            if fmt is not None:
                json.loads(comp.text, strict=False)  # a constrained reply must parse; raises otherwise
            u = comp.usage
            print(f"[{label}] {comp.text.strip()!r}")
            print(f"    tokens {u.prompt_tokens}+{u.completion_tokens}, latency {u.latency_s}s, "
                  f"cost {'unknown' if u.cost_usd is None else f'${u.cost_usd:.6f}'}, cached {u.cached}, "
                  f"wall {time.perf_counter() - t0:.2f}s")
        await llm.aclose()

    run(ask_both())  # on uvloop where it is installed
    print(f"model calls made: {llm.calls} (a second run is answered from {llm.cache.path})")
    return 0

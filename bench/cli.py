"""The `bench` command. Each subcommand is a thin call into the package."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from .errors import BenchError

SMOKE_SCHEMA = {
    "type": "object",
    "properties": {"tip": {"type": "string", "minLength": 1},
                   "minutes": {"type": "integer", "minimum": 1, "maximum": 60}},
    "required": ["tip", "minutes"],
    "additionalProperties": False,
}


def _smoke(args: argparse.Namespace) -> int:
    """Answer one plain and one schema-constrained request through bench.llm, then once more from cache."""
    from .llm import LLM, Limits  # noqa: PLC0415
    from .preflight import preflight  # noqa: PLC0415
    from .routing import ModelSpec  # noqa: PLC0415

    spec = ModelSpec(args.model, api_base=args.api_base, params={"temperature": 0.2, "max_tokens": 64, "seed": 7})
    preflight([spec])
    llm = LLM(Limits(max_concurrency=2, timeout_s=120), cache=str(Path(args.runs) / "smoke" / "responses.sqlite"))
    plain = [{"role": "user", "content": "Give one short tip for staying focused while studying."}]
    structured = [{"role": "user", "content": "Give one study tip as JSON with keys tip and minutes."}]
    rf = {"type": "json_schema", "json_schema": {"name": "tip", "schema": SMOKE_SCHEMA, "strict": True}}

    async def run() -> None:
        for label, msgs, fmt in (("plain", plain, None), ("json", structured, rf)):
            t0 = time.perf_counter()
            comp = await llm.complete(spec, msgs, response_format=fmt)
            if fmt is not None:
                json.loads(comp.text)  # a constrained reply must parse; raises otherwise
            u = comp.usage
            print(f"[{label}] {comp.text.strip()!r}")
            print(f"    tokens {u.prompt_tokens}+{u.completion_tokens}, latency {u.latency_s}s, "
                  f"cost {'unknown' if u.cost_usd is None else f'${u.cost_usd:.6f}'}, cached {u.cached}, "
                  f"wall {time.perf_counter() - t0:.2f}s")
        await llm.aclose()

    asyncio.run(run())
    print(f"model calls made: {llm.calls} (a second run is answered from {llm.cache.path})")
    return 0


def _serve_local(args: argparse.Namespace) -> int:
    from . import local  # noqa: PLC0415

    local.serve_foreground(args.model, port=args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the `bench` command."""
    p = argparse.ArgumentParser(prog="bench", description="Evaluate LLMs and prompts with LLM judges.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("smoke", help="answer a smoke request through bench.llm (default: the embedded model)")
    s.add_argument("--model", default="local/gemma-3-270m", help="LiteLLM model string or local/<name>")
    s.add_argument("--api-base", default=None, help="OpenAI-compatible base URL (vLLM, Ollama, …)")
    s.add_argument("--runs", default="runs", help="run folder root (the cache lives under it)")
    s.set_defaults(func=_smoke)

    s = sub.add_parser("serve-local", help="serve the embedded model on loopback in the foreground")
    s.add_argument("--model", default="local/gemma-3-270m")
    s.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    s.set_defaults(func=_serve_local)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the `bench` command; return its exit status (2 for a bench error, with one clear message)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BenchError as err:
        print(f"bench {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

"""A loopback OpenAI-compatible fake provider, owned by the project for its tests and benchmarks.

Drive it from Python through :class:`FakeProvider`, which spawns ``python -m
bench.testing.fake_provider`` as a subprocess bound to 127.0.0.1 and talks to its admin
endpoints::

    with FakeProvider(latency_ms=50, rate_429=0.1) as fake:
        client = SomeClient(base_url=fake.url, api_key="x")
        ...
        fake.configure(fail_first=2)
        print(fake.stats()["statuses"])

Or run it by hand: ``python -m bench.testing.fake_provider --port 0 [--host 127.0.0.1]
[--latency-ms 100] [--config JSON]`` prints one JSON line ``{"port": N}`` when ready and serves
until SIGTERM/SIGINT.

Endpoints: ``POST /v1/chat/completions`` (and ``/chat/completions``), ``GET /v1/models``
(and ``/models``), OpenAI's Files + Batch API (``POST /v1/files``, ``GET /v1/files/{id}[/content]``,
``DELETE /v1/files/{id}``, ``POST /v1/batches``, ``GET /v1/batches[/{id}]``,
``POST /v1/batches/{id}/cancel``; each also without ``/v1``), ``POST /_admin/config``,
``GET /_admin/stats``, ``GET /_admin/timeline`` (each chat request's model, start and end), ``POST /_admin/reset``. The config keys and their defaults are in
:data:`DEFAULT_CONFIG`; the order in which a chat request is decided is documented on
``FakeServer.chat``; a batch's lifecycle on the ``batches`` module. ``fake.url`` is the
``api_base`` for LiteLLM's chat and its files/batches functions (``custom_llm_provider="openai"``).

Modules: ``config`` (the knobs), ``request_body`` (what a request asks for), ``replies`` (the bodies
it composes, a structured reply made by ``bench._schema_instance`` as a dry model's is, usage counted in words or tiktoken tokens), ``quality`` (each
model answers in its own words and is graded at its own quality, with optional noise), ``biases`` (judges
scripted with a known bias: the first slot, long answers, one model's answers), ``thinking`` (a
reasoning model on demand: ``reasoning_content`` and reasoning tokens, or an inline ``<think>``), ``images``
(image parts checked, a malformed one refused with a 400, each image's sha256 in the stats), ``tool_calls``
(scripted tool calls, ``tools_supported``, a multi-turn request's history echoed in its answer), ``server``
(the aiohttp state and routes), ``batches`` (the files and
batches and the task running each),
``batch_lines`` (an input file's validation), ``batch_routes`` (the Files + Batch API routes),
``timeline`` (requests in flight per model, their peak and spans), ``serve`` (the process: command line, loopback
check, signals), ``handle`` (:class:`FakeProvider`).
The server half imports only the standard library and aiohttp (and tiktoken, lazily, for the
``tokenizer: "cl100k"``/``"o200k"`` usage), and of the rest of bench only ``bench._schema_instance``; importing this package does
not import aiohttp.
"""

from __future__ import annotations

from bench.testing.fake_provider.config import DEFAULT_CONFIG
from bench.testing.fake_provider.handle import FakeProvider

__all__ = ["DEFAULT_CONFIG", "FakeProvider"]

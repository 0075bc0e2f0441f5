"""A loopback OpenAI-compatible fake provider for the project's tests and benchmarks (also Anthropic's and Gemini's
wires): :class:`FakeProvider` runs it on 127.0.0.1, ``fake.url`` is the ``api_base``, its knobs are
:data:`DEFAULT_CONFIG` (docs/tests.md). Importing this package does not import aiohttp."""

from __future__ import annotations

from bench.testing.fake_provider.config import DEFAULT_CONFIG
from bench.testing.fake_provider.handle import FakeProvider

__all__ = ["DEFAULT_CONFIG", "FakeProvider"]

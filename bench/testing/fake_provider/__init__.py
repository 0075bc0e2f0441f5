"""A loopback OpenAI-compatible fake provider, owned by the project for its tests and benchmarks; it also speaks
Anthropic's Messages API and Gemini's generateContent (``anthropic_wire``, ``gemini_wire``).

:class:`FakeProvider` runs ``python -m bench.testing.fake_provider`` on 127.0.0.1; ``fake.url`` is the
``api_base``. Its knobs are :data:`DEFAULT_CONFIG` (docs/tests.md). Importing this package does not import aiohttp.
"""

from __future__ import annotations

from bench.testing.fake_provider.config import DEFAULT_CONFIG
from bench.testing.fake_provider.handle import FakeProvider

__all__ = ["DEFAULT_CONFIG", "FakeProvider"]

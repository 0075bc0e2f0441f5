"""A loopback OpenAI-compatible fake provider, owned by the project for its tests and benchmarks.

:class:`FakeProvider` runs ``python -m bench.testing.fake_provider`` on 127.0.0.1 and drives its admin endpoints
(``configure``, ``stats``); ``fake.url`` is the ``api_base`` for LiteLLM. The config keys and their defaults are
:data:`DEFAULT_CONFIG`; the endpoints, modules and knobs are in docs/tests.md. Importing this package does not
import aiohttp.
"""

from __future__ import annotations

from bench.testing.fake_provider.config import DEFAULT_CONFIG
from bench.testing.fake_provider.handle import FakeProvider

__all__ = ["DEFAULT_CONFIG", "FakeProvider"]

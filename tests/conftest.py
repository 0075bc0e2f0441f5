"""Shared fixtures: one fake OpenAI-compatible provider for the whole session."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# a sweep renders its report at the end: tests never write into the checkout's reports/
os.environ.setdefault("BENCH_REPORTS", tempfile.mkdtemp(prefix="bench-test-reports-"))

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from tests.fakeprovider import FakeProvider  # noqa: E402


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeProvider]:
    """The session's fake provider subprocess (latency 0, default config)."""
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def fake(fake_server: FakeProvider) -> Iterator[FakeProvider]:
    """The session's fake provider, with counters and config reset to defaults."""
    fake_server.reset()
    yield fake_server

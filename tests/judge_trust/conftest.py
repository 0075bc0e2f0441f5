"""The run the `bench judges` tests read: swept on the fake provider and reviewed by two reviewers."""

from __future__ import annotations

import pytest

from tests.judge_trust.reviewed_run import reviewed_run


@pytest.fixture(scope="package")
def judged(tmp_path_factory, fake_server):
    """(the test folder, the reviewed run folder)."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("judges")
    return tmp, reviewed_run(tmp, fake_server.url)

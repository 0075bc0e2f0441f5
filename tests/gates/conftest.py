"""The runs the gate tests read: sweeps through the fake provider of a baseline, a worse and an equal run."""

from __future__ import annotations

import pytest

from bench.testing.in_process import run_stages
from tests.gates.gate_runs import QUALITY, params


@pytest.fixture(scope="package")
def runs(tmp_path_factory, fake_server):
    """The folder holding runs/good (the baseline), runs/bad and runs/peer."""
    tmp = tmp_path_factory.mktemp("gates")
    fake_server.reset()
    fake_server.configure(model_quality=QUALITY)
    for name in ("good", "bad", "peer"):
        out = run_stages(tmp, params(tmp, fake_server.url, name, name))
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return tmp

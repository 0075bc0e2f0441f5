"""A simulated user is a model the run calls: every check and every shared service that covers the run's models
covers it too (a refused param at open_run, the preflight of `bench validate`, its key sent to cluster workers, the
one embedded model a sweep serves, the caps shared across executions)."""

from __future__ import annotations

import pytest

from bench.core.errors import BenchError, ParamsError
from bench.run import open_run
from bench.sweep.cluster.worker_secrets import declared_key_vars
from bench.sweep.shared import SharedLimits, SharedLocalServer
from bench.testing.in_process import command
from tests.collect.dialogues import inline, use_runs, write


def simulated(url: str, **simulator) -> dict:
    """A prompt whose user is simulated by ``simulator`` (on the fake provider unless it says otherwise)."""
    return {"id": "support", "version": "v1", "user": "I have a question about {topic}.",
            "user_simulator": {"id": "customer", "model": "openai/sim", "api_base": url,
                               "instructions": "You are a customer asking about {topic}.", **simulator}}


def params_with(tmp_path, url, **simulator):
    return write(tmp_path / "s.yaml", url, prompts=[simulated(url, **simulator)], scenarios=inline({"topic": "tea"}))


def test_a_param_the_simulator_cannot_take_is_refused_before_anything_runs_naming_where_it_is(tmp_path, fake,
                                                                                               monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    with pytest.raises(ParamsError, match=r"s\.yaml: prompts\[0\]\.user_simulator\.params\.n: .*samples"):
        open_run(params_with(tmp_path, fake.url, params={"n": 2}))
    assert fake.stats()["requests"] == 0


def test_validate_preflights_the_simulator_and_names_its_missing_key(tmp_path, fake):
    params = params_with(tmp_path, fake.url, api_key_env="SIM_KEY_FOR_TEST")
    out = command(tmp_path, "validate", str(params), drop=("SIM_KEY_FOR_TEST",))
    assert out.returncode != 0 and "SIM_KEY_FOR_TEST" in out.stdout + out.stderr, out.stdout + out.stderr
    assert "preflight: ok" not in out.stdout
    good = command(tmp_path, "validate", str(params), SIM_KEY_FOR_TEST="sk-fake-simulator")
    assert good.returncode == 0 and "preflight: ok" in good.stdout, good.stdout + good.stderr


def test_the_simulators_key_caps_and_embedded_model_are_the_sweeps_too(tmp_path, fake, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    run = open_run(params_with(tmp_path, fake.url, api_key_env="SIM_KEY_FOR_TEST", rpm=60))
    assert "SIM_KEY_FOR_TEST" in declared_key_vars(run)  # a cluster worker is sent it, though no *_API_KEY name
    assert SharedLimits(run, jobs=1, per_cell=False).caps  # its rpm window spans every execution of the sweep
    monkeypatch.delenv("BENCH_LOCAL_API_BASE", raising=False)
    two = open_run(write(tmp_path / "l.yaml", fake.url, models=[{"id": "m1", "model": "local/gemma-3-270m"}],
                         prompts=[simulated(None, model="local/another-model")], scenarios=inline({"topic": "tea"})))
    shared = SharedLocalServer(two)
    assert shared.models == ["local/another-model", "local/gemma-3-270m"]
    with pytest.raises(BenchError, match="one local model at a time"):  # refused before any is loaded
        shared.__enter__()

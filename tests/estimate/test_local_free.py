"""The embedded model (``local/<name>``) runs on this machine: it is free (price (0, 0), cost 0, never an unknown
price), so the demo's estimate asks for no price and a budget never refuses it as unpriced."""

from __future__ import annotations

import json

import pytest
import yaml

from bench.estimate.command import estimate_command
from bench.models.budget import Budget
from bench.models.routing import ModelSpec, cost_usd, price_per_token, resolve
from tests.estimate.test_estimate_cost import by_stage, params_for

pytestmark = pytest.mark.local_model  # a local/<name> route names its weights' package


def test_the_embedded_model_is_priced_free():
    route = resolve(ModelSpec("local/gemma-3-270m"))
    assert price_per_token(route) == (0.0, 0.0)
    assert cost_usd(route, {"prompt_tokens": 120, "completion_tokens": 40}) == 0.0
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}
    assert Budget(0.01, "unused").worst_case(route, body) == 0.0  # no PriceUnknown: nothing to cap


def test_its_estimate_costs_nothing_and_asks_for_no_price(tmp_path, fake, capsys, monkeypatch):
    params = params_for(tmp_path, fake.url)
    data = yaml.safe_load(params.read_text())
    data["models"].append({"id": "gemma", "model": "local/gemma-3-270m"})
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    assert estimate_command(params) == 0
    assert "price" not in "\n".join(l for l in capsys.readouterr().out.splitlines() if "gemma" in l or "local/" in l)
    assert estimate_command(params, as_json=True) == 0
    gemma = by_stage(json.loads(capsys.readouterr().out))["gemma"]
    assert gemma["price_known"] is True and gemma["cost_usd_expected"] == 0.0 and gemma["cost_usd_max"] == 0.0

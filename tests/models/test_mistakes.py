"""A newcomer's mistakes are caught before spending: param typos, unknown models, a missing rubric."""

from __future__ import annotations

from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command, run_stages


def test_a_typo_in_generation_params_is_refused_with_the_nearest_name(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url, params={"temprature": 0.2,
                                                                                        "max_token": 50})])
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2 and fake.stats()["requests"] == 0
    lines = out.stderr.strip().splitlines()
    assert any("models[0].params.temprature" in ln and "did you mean 'temperature'" in ln for ln in lines)
    assert any("models[0].params.max_token" in ln and "did you mean 'max_tokens'" in ln for ln in lines)
    assert "params.extra_body" in out.stderr
    assert run_stages(tmp_path, params).returncode == 2 and fake.stats()["requests"] == 0


def test_litellm_providers_are_checked_against_their_own_params(tmp_path, fake):
    anthropic = {"id": "claude", "model": "anthropic/claude-3-5-haiku-20241022",
                 "params": {"temperature": 0.2, "frequency_penalty": 0.5}}  # OpenAI's, not Anthropic's
    out = command(tmp_path, "validate", str(grid(tmp_path / "g.yaml", fake.url, models=[anthropic])))
    assert out.returncode == 2 and "models[0].params.frequency_penalty" in out.stderr
    assert "anthropic/claude-3-5-haiku-20241022 does not take" in out.stderr


def test_n_is_refused_with_the_samples_hint(tmp_path, fake):
    out = command(tmp_path, "validate", str(grid(tmp_path / "g.yaml", fake.url,
                                               judges=[judge("j", fake.url, params={"n": 3})])))
    assert out.returncode == 2 and "judges[0].params.n: bench reads one reply per request; use `samples: N`" \
        in out.stderr


def test_provider_specific_fields_pass_through_extra_body(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=1,
                  models=[model("m1", fake.url, params={"temperature": 0.1, "extra_body": {"top_k": 5}})])
    assert run_stages(tmp_path, params).returncode == 0
    body = fake.stats()["recent"][-1]
    assert body["top_k"] == 5 and body["temperature"] == 0.1 and "extra_body" not in body


def test_validate_catches_a_missing_rubric(tmp_path, fake):
    out = command(tmp_path, "validate", str(grid(tmp_path / "g.yaml", fake.url,
                                               judges=[judge("j", fake.url, rubric="tip-v9")])))
    assert out.returncode == 2 and "tip-v9" in out.stderr and fake.stats()["requests"] == 0


def test_a_model_the_server_does_not_list_fails_preflight(tmp_path, fake):
    fake.configure(served_models=["fake-a"])
    out = command(tmp_path, "validate", str(grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url,
                                                                                             name="fake-b")])))
    assert out.returncode == 2 and fake.stats()["requests"] == 0
    assert "does not serve 'fake-b' (it lists: fake-a)" in out.stderr


def test_a_model_unknown_to_a_server_that_cannot_list_fails_the_cell_with_the_whole_message(tmp_path, fake):
    fake.configure(served_models=["fake-a"], list_models=False)
    params = grid(tmp_path / "g.yaml", fake.url, topics=2, models=[model("m1", fake.url, name="fake-b")])
    out = run_stages(tmp_path, params)
    assert out.returncode == 3, out.stdout[-2000:] + out.stderr[-2000:]
    full = "The model `fake-b` does not exist or you do not have access to it (fake provider serves: fake-a)"
    assert full in out.stdout and "not_found" in out.stdout  # the summary keeps the provider's whole message
    assert all(full in c.error for c in RunStore(tmp_path / "runs/g").read(Candidate))
    assert fake.stats()["requests"] == 2  # a 404 is final: never retried


def test_notebook_frames_show_scenarios_by_their_fields(tmp_path, fake):
    from bench.analysis import candidate_listing, judgment_listing

    params = grid(tmp_path / "g.yaml", fake.url, topics=2, judges=[judge("grader", fake.url)])
    assert run_stages(tmp_path, params).returncode == 0
    cands, judgments = candidate_listing(tmp_path / "runs/g").to_pandas(), judgment_listing(tmp_path / "runs/g").to_pandas()
    assert sorted(cands["scenario"]) == ["topic: t0", "topic: t1"] and cands["scenario_id"].str.startswith("s").all()
    assert sorted(judgments["scenario"]) == ["topic: t0", "topic: t1"]


def test_a_missing_key_shared_by_a_model_and_a_judge_is_named_once(tmp_path, fake):
    # the same model string as answerer and as judge (other params: two specs) lacks the same key: one line, not two
    same = {"name": "shared", "api_key_env": "BENCH_TEST_NEVER_SET_KEY"}
    params = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url, **same)],
                  judges=[judge("j1", fake.url, **same, params={"temperature": 0})])
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2 and fake.stats()["requests"] == 0, out.stderr
    assert out.stderr.count("BENCH_TEST_NEVER_SET_KEY") == 1, out.stderr

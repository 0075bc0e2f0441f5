"""Params that cannot hang or exhaust the machine, and names that are safe everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from bench.core.errors import ParamsError
from bench.config.params import load_sweep
from bench.testing.grids import NOT_INHERITED, ROOT, grid
from bench.testing.in_process import command, run_stages

# seven levels of ten aliases each: 10^7 values once expanded, a few hundred bytes of YAML
BOMB = ("[&a [x, x, x, x, x, x, x, x, x, x], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], "
        "&c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c], "
        "&e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d], &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e], "
        "&g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]]")


def test_an_alias_bomb_inside_model_params_is_refused_before_it_expands(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url)
    params.write_text(params.read_text().replace("  model: openai/m1", f"  model: openai/m1\n  params: {{stop: {BOMB}}}", 1))
    assert "stop: [&a" in params.read_text()
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2 and "aliases (&name / *name) expand to more than 200,000 values" in out.stderr


def test_a_recursive_or_deeply_nested_file_is_refused(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: x\nmodels: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ParamsError, match="nested too deeply|invalid YAML"):
        load_sweep(deep)


def test_a_huge_sample_count_is_refused_naming_the_limit(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, samples=100_000_000)
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2, out.stderr
    assert "plans 400,000,000 answers (1 cells × 4 scenarios × 100,000,000 samples)" in out.stderr
    assert "raise limits.max_items" in out.stderr and fake.stats()["requests"] == 0


def test_a_huge_generated_sample_is_refused_before_it_is_drawn(tmp_path, fake):
    dims = {f"d{i}": [f"v{j}" for j in range(100)] for i in range(5)}  # 10^10 combinations
    params = grid(tmp_path / "g.yaml", fake.url, scenarios={"generate": {"dimensions": dims, "n": 50_000_000}})
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2 and "limits.max_items" in out.stderr


def test_a_file_with_200k_prompts_parses_and_checks_in_linear_time(tmp_path, fake):
    data = yaml.safe_load(grid(tmp_path / "g.yaml", fake.url).read_text())
    data["prompts"] = [{"id": f"p{i}", "version": "v1", "user": "tip {topic}"} for i in range(200_000)]
    data["prompts"].append({"id": "p17", "version": "v1", "user": "again"})
    big = tmp_path / "big.yaml"
    big.write_text(json.dumps(data))  # YAML in its flow style (JSON is YAML), written in a second
    code = "import sys; from bench.config.params import load_sweep; load_sweep(sys.argv[1])"
    out = subprocess.run([sys.executable, "-c", code, str(big)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 1 and "prompts: duplicate id@version p17@v1" in out.stderr


@pytest.mark.parametrize("key, value", [("name", "adv\n"), ("name", "a b"), ("models[0].id", "m'1"),
                                        ("prompts[0].id", "p\"x"), ("prompts[0].version", "v1'; drop"),
                                        ("judges[0].id", "j'1")])
def test_names_and_ids_are_refused_unless_safe_everywhere(tmp_path, fake, key, value):
    data = yaml.safe_load(grid(tmp_path / "g.yaml", fake.url, judges=[{"id": "j", "model": "openai/j",
                                                                      "api_base": fake.url, "rubric": "tip-v1"}])
                          .read_text())
    if key == "name":
        data["name"] = value
    else:
        section, field = key.split("[0].")
        data[section][0][field] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParamsError) as info:
        load_sweep(path)
    assert key in str(info.value)


def test_a_run_folder_with_a_quote_in_its_name_is_tracked_and_retracked_without_duplicates(tmp_path, fake):
    """Names never go into MLflow's filter language: a folder called it's-a-run tracks like any other."""
    import mlflow

    params = grid(tmp_path / "g.yaml", fake.url, topics=2)
    folder = tmp_path / "runs" / "it's-a-run"
    swept = run_stages(tmp_path, params, run_dir=folder, track=True, drop=NOT_INHERITED)
    assert swept.returncode == 0 and "tracking: logged to MLflow" in swept.stdout, swept.log
    tracked = command(tmp_path, "track", str(folder), drop=NOT_INHERITED)  # again: the same runs, updated
    assert tracked.returncode == 0 and "tracking: MLflow logging" not in tracked.stderr, tracked.log
    mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # mlflow exports it: keep it from processes tests start
    runs = mlflow.search_runs(experiment_names=["bench/it's-a-run"], output_format="list")
    levels = sorted(r.data.tags["bench.level"] for r in runs)
    assert levels == ["cell", "sweep"] and {r.data.tags["bench.sweep"] for r in runs} == {"it's-a-run"}

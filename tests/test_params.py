"""Params files: every mistake is one ParamsError line that starts with the file and says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import ParamsError
from bench.params import Endpoint, Sweep, load_sweep
from bench.routing import ModelSpec

REPO = Path(__file__).resolve().parents[1]

VALID = """\
name: demo
seed: 7
models:
  - id: small
    model: openai/gpt-4o-mini
    params: {temperature: 0.2, max_tokens: 64}
  - id: local
    model: openai/llama3
    api_base: http://127.0.0.1:11434/v1
    api_key_env: OLLAMA_KEY
    transport: direct
    rpm: 60
    price: {input_per_mtok: 0.5, output_per_mtok: 1.5}
prompts:
  - id: tip
    version: v1
    system: "You are {persona}."
    user: "Give one tip about {topic}."
  - id: tip
    version: v2
    user: "One tip about {topic}, please."
scenarios:
  generate:
    dimensions:
      persona: [a chef, a pilot]
      topic: {of: [sleep, food, work], size: [1, 2]}
    n: 4
samples: 2
judges:
  - id: j1
    model: openai/gpt-4o-mini
    rubric: helpfulness
    mode: rubric
limits:
  max_concurrency: 4
  timeout_s: 30
  retries: 2
"""


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    """Return load_sweep's error message for ``path``, checking every line names the file first."""
    with pytest.raises(ParamsError) as info:
        load_sweep(path)
    message = str(info.value)
    for line in message.splitlines():
        assert line.startswith(f"{path}:"), line
    return message


def edit(old: str, new: str, text: str = VALID) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# ----------------------------------------------------------------------------- a valid file


def test_valid_file_round_trips(tmp_path):
    path = write(tmp_path, VALID)
    sweep, resolved = load_sweep(path)
    assert isinstance(sweep, Sweep) and resolved == path.resolve()
    assert (sweep.name, sweep.seed, sweep.samples) == ("demo", 7, 2)
    assert [c.key for c in sweep.cells()] == ["small/tip@v1", "small/tip@v2", "local/tip@v1", "local/tip@v2"]
    assert sweep.prompts[0].placeholders() == {"persona", "topic"}
    assert sweep.prompts[0].content_hash != sweep.prompts[1].content_hash
    assert sweep.scenarios.generate is not None and sweep.scenarios.dataset is None
    assert sweep.scenarios.generate.dimensions["topic"].size == (1, 2)
    assert (sweep.limits.max_concurrency, sweep.limits.timeout_s, sweep.limits.retries) == (4, 30.0, 2)
    assert sweep.judges[0].mode == "rubric"


def test_endpoint_spec_keeps_params_and_price(tmp_path):
    sweep, _ = load_sweep(write(tmp_path, VALID))
    small, local = (m.spec() for m in sweep.models)
    assert isinstance(small, ModelSpec)
    assert small.model == "openai/gpt-4o-mini" and small.params == {"temperature": 0.2, "max_tokens": 64}
    assert small.price is None and small.api_base is None and small.transport == "auto"
    assert local.price == (0.5, 1.5)
    assert (local.api_base, local.api_key_env, local.transport, local.rpm) == (
        "http://127.0.0.1:11434/v1", "OLLAMA_KEY", "direct", 60)
    assert local.params == {}
    small.params["temperature"] = 9  # the spec owns a copy: the frozen sweep is untouched
    assert sweep.models[0].params["temperature"] == 0.2
    assert Endpoint(model="openai/x").spec() == ModelSpec("openai/x")


def test_defaults_of_a_minimal_file(tmp_path):
    minimal = VALID.split("samples:")[0]
    sweep, _ = load_sweep(write(tmp_path, minimal))
    assert sweep.samples == 1 and sweep.judges == []
    assert (sweep.limits.max_concurrency, sweep.limits.timeout_s, sweep.limits.retries) == (16, 60.0, 4)


def test_dataset_source_is_accepted(tmp_path):
    text = VALID.split("scenarios:")[0] + (
        "scenarios:\n  dataset:\n    path: data/qa.jsonl\n    fields: {persona: who, topic: what}\n"
        "    reference: {label: gold}\n    limit: 10\n")
    sweep, _ = load_sweep(write(tmp_path, text))
    ds = sweep.scenarios.dataset
    assert ds is not None and (ds.path, ds.fields, ds.reference, ds.limit) == (
        "data/qa.jsonl", {"persona": "who", "topic": "what"}, {"label": "gold"}, 10)


# ----------------------------------------------------------------------------- file-level errors


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    message = error_of(path)
    assert "cannot read the params file" in message


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "name: demo\nmodels: [\n  - id: a\n")
    message = error_of(path)
    assert message.startswith(f"{path}:3:")
    assert "invalid YAML" in message


def test_tab_indentation_is_invalid_yaml_with_line(tmp_path):
    path = write(tmp_path, "name: demo\n\tmodels: 1\n")
    assert error_of(path).startswith(f"{path}:2:")


@pytest.mark.parametrize("text, got", [("- a\n- b\n", "list"), ("just text\n", "str"), ("", "NoneType")])
def test_not_a_mapping(tmp_path, text, got):
    message = error_of(write(tmp_path, text))
    assert "expected a mapping" in message and got in message
    assert "name, models, prompts, scenarios" in message


# ----------------------------------------------------------------------------- keys


def test_unknown_top_level_key_lists_allowed_keys(tmp_path):
    message = error_of(write(tmp_path, VALID + "modles: []\n"))
    assert "unknown key 'modles'" in message
    for key in ("name", "seed", "models", "prompts", "scenarios", "samples", "judges", "limits"):
        assert key in message.split("allowed:")[1]


def test_unknown_key_in_a_model(tmp_path):
    path = write(tmp_path, edit("    params: {temperature", "    temprature: 0.2\n    params: {temperature"))
    message = error_of(path)
    assert message == (f"{path}: models[0].temprature: unknown key 'temprature' (allowed: model, params, "
                       f"api_base, api_key_env, transport, rpm, price, id)")


def test_unknown_key_in_limits(tmp_path):
    message = error_of(write(tmp_path, edit("  max_concurrency: 4", "  max_concurency: 4")))
    assert "limits.max_concurency: unknown key 'max_concurency'" in message
    assert "allowed: max_concurrency, timeout_s, retries" in message


def test_unknown_key_in_a_subset_dimension(tmp_path):
    message = error_of(write(tmp_path, edit("size: [1, 2]", "sizes: [1, 2]")))
    assert "scenarios.generate.dimensions.topic.sizes: unknown key 'sizes' (allowed: of, size)" in message


def test_unknown_key_in_a_price(tmp_path):
    message = error_of(write(tmp_path, edit("input_per_mtok: 0.5", "input: 0.5")))
    assert "models[1].price.input: unknown key 'input'" in message
    assert "models[1].price.input_per_mtok: required key is missing" in message


def test_missing_required_key(tmp_path):
    no_prompts = VALID.split("prompts:")[0] + "scenarios:" + VALID.split("scenarios:")[1]
    path = write(tmp_path, no_prompts)
    assert error_of(path) == f"{path}: prompts: required key is missing"


def test_missing_model_id(tmp_path):
    message = error_of(write(tmp_path, edit("  - id: small\n    model:", "  - model:")))
    assert "models[0].id: required key is missing" in message


# ----------------------------------------------------------------------------- types and values


def test_wrong_type(tmp_path):
    path = write(tmp_path, edit("samples: 2", "samples: many"))
    message = error_of(path)
    assert message.startswith(f"{path}: samples: ")
    assert "integer" in message and "'many'" in message


def test_non_positive_samples_and_n(tmp_path):
    samples = error_of(write(tmp_path, edit("samples: 2", "samples: 0")))
    assert "samples: Input should be greater than 0 (got 0)" in samples
    n = error_of(write(tmp_path, edit("n: 4", "n: 0")))
    assert "scenarios.generate.n: Input should be greater than 0" in n


def test_wrong_literal_lists_choices(tmp_path):
    message = error_of(write(tmp_path, edit("mode: rubric", "mode: vibes")))
    assert "judges[0].mode" in message and "'pairwise'" in message and "'vibes'" in message


def test_models_must_be_a_list(tmp_path):
    text = VALID.split("models:")[0] + "models: openai/gpt-4o\nprompts:" + VALID.split("prompts:", 1)[1]
    message = error_of(write(tmp_path, text))
    assert "models: Input should be a valid list" in message


def test_empty_models_list(tmp_path):
    text = VALID.split("models:")[0] + "models: []\nprompts:" + VALID.split("prompts:", 1)[1]
    message = error_of(write(tmp_path, text))
    assert "models:" in message and "at least 1 item" in message


def test_duplicate_model_ids(tmp_path):
    message = error_of(write(tmp_path, edit("  - id: local", "  - id: small")))
    assert "duplicate models[].id: small" in message


def test_duplicate_prompt_id_and_version(tmp_path):
    message = error_of(write(tmp_path, edit("    version: v2", "    version: v1")))
    assert "duplicate prompts[] id@version: tip@v1" in message


def test_duplicate_judge_ids(tmp_path):
    text = VALID.replace("limits:", "  - {id: j1, model: openai/x, rubric: r}\nlimits:")
    assert "duplicate judges[].id: j1" in error_of(write(tmp_path, text))


def test_both_generate_and_dataset(tmp_path):
    text = VALID.replace("samples: 2", "  dataset: {path: x.jsonl, fields: {topic: t}}\nsamples: 2")
    message = error_of(write(tmp_path, text))
    assert "scenarios: give exactly one of 'generate' or 'dataset'" in message


def test_neither_generate_nor_dataset(tmp_path):
    text = VALID.split("scenarios:")[0] + "scenarios: {}\n"
    message = error_of(write(tmp_path, text))
    assert "scenarios: give exactly one of 'generate' or 'dataset'" in message


@pytest.mark.parametrize("size", ["[1, 4]", "[2, 1]", "[-1, 1]"])
def test_subset_size_out_of_range(tmp_path, size):
    message = error_of(write(tmp_path, edit("size: [1, 2]", f"size: {size}")))
    assert "scenarios.generate.dimensions.topic" in message
    assert "0 <= min <= max <= 3" in message


def test_dimension_of_wrong_shape(tmp_path):
    message = error_of(write(tmp_path, edit("persona: [a chef, a pilot]", "persona: a chef")))
    assert "scenarios.generate.dimensions.persona" in message and "'a chef'" in message


@pytest.mark.parametrize("key", ["sk-proj-Abc123SECRETvalue456", "sk-ant-api03-SECRETvalue"])
def test_api_key_in_api_key_env_is_refused_and_not_echoed(tmp_path, key):
    message = error_of(write(tmp_path, edit("api_key_env: OLLAMA_KEY", f"api_key_env: {key}")))
    assert "models[1].api_key_env" in message and "environment variable" in message
    assert key not in message and "SECRET" not in message


def test_api_key_env_in_a_judge_is_checked_too(tmp_path):
    text = edit("    mode: rubric", "    mode: rubric\n    api_key_env: sk-SECRETSECRET")
    message = error_of(write(tmp_path, text))
    assert "judges[0].api_key_env" in message and "SECRET" not in message


def test_sweep_name_must_be_folder_safe(tmp_path):
    path = write(tmp_path, edit("name: demo", "name: my sweep/x"))
    message = error_of(path)
    assert message.startswith(f"{path}: name: must be a folder-safe name")
    assert "runs/<name>" in message


def test_model_id_must_be_a_label(tmp_path):
    message = error_of(write(tmp_path, edit("id: small", "id: 'gpt 4o'")))
    assert "models[0].id: must be a short label" in message


def test_several_errors_one_line_each(tmp_path):
    text = edit("samples: 2", "samples: many", edit("  max_concurrency: 4", "  max_concurency: 4"))
    message = error_of(write(tmp_path, text))
    assert len(message.splitlines()) == 2


# ----------------------------------------------------------------------------- the repo's own params files


def _repo_params_files() -> list[Path]:
    files: list[Path] = []
    for folder in (REPO / "params", REPO / "params" / "examples"):
        files += sorted(p for p in folder.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    return files


@pytest.mark.parametrize("path", _repo_params_files() or [None],
                         ids=lambda p: str(p.relative_to(REPO)) if p else "no-params-files")
def test_repo_params_files_load(path):
    if path is None:
        pytest.skip("no params files under params/ or params/examples/ yet")
    sweep, resolved = load_sweep(path)
    assert resolved == path.resolve()
    assert sweep.cells(), path

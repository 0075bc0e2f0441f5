"""Params files: every mistake is one ParamsError line that starts with the file and says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.errors import ParamsError
from bench.config.entries import Endpoint, PromptEntry
from bench.config.params import Sweep, load_sweep
from bench.models.routing import ModelSpec

from tests.repo import REPO, params_files

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
    assert local.price == (0.5, 1.5, None, None)  # input, output, cached input, cache write (per Mtok)
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


@pytest.mark.parametrize("text, got", [("- a\n- b\n", "list"), ("just text\n", "str"), ("3\n", "int")])
def test_not_a_mapping(tmp_path, text, got):
    message = error_of(write(tmp_path, text))
    assert "expected a mapping" in message and got in message
    assert "name, models, prompts, scenarios" in message


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: the file is empty; expected the keys name, models, prompts, scenarios"


@pytest.mark.parametrize("old, new, line, key", [
    ("name: demo\n", "name: demo\nname: other\n", 2, "name"),
    ("  - id: small\n", "  - id: small\n    id: tiny\n", 5, "id"),
    ("    n: 4\n", "    n: 4\n    n: 5\n", 28, "n"),
    ("      persona: [a chef, a pilot]\n",
     "      persona: [a chef, a pilot]\n      persona: [x]\n", 26, "persona"),
    ("{temperature: 0.2, max_tokens: 64}", "{temperature: 0.2, temperature: 0.9}", 6, "temperature"),
])
def test_duplicate_yaml_key_names_file_line_and_key(tmp_path, old, new, line, key):
    path = write(tmp_path, edit(old, new))
    assert error_of(path) == f"{path}:{line}: duplicate key '{key}'"


def test_yaml_merge_keys_may_still_be_overridden(tmp_path):
    text = edit("    params: {temperature: 0.2, max_tokens: 64}",
                "    params: &p {temperature: 0.2, max_tokens: 64}", VALID)
    text = edit("    transport: direct",
                "    transport: direct\n    params:\n      <<: *p\n      temperature: 0.9", text)
    sweep, _ = load_sweep(write(tmp_path, text))
    assert sweep.models[1].params == {"temperature": 0.9, "max_tokens": 64}


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
                       f"api_base, api_key_env, transport, rpm, tpm, max_concurrency, price, batch, think_end, "
                       f"images, id)")


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
    assert error_of(path).startswith(f"{path}: prompts: needs at least 1 item (only a dataset")


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
    path = write(tmp_path, text)
    assert error_of(path).startswith(f"{path}: models: needs at least 1 item (only a dataset")


def test_empty_subset_of_and_dimensions(tmp_path):
    message = error_of(write(tmp_path, edit("of: [sleep, food, work], size: [1, 2]", "of: []")))
    assert "scenarios.generate.dimensions.topic.of: needs at least 1 item" in message
    text = VALID.split("    dimensions:")[0] + "    dimensions: {}\n"
    assert "scenarios.generate.dimensions: needs at least 1 item" in error_of(write(tmp_path, text))


def test_empty_dimension_list_is_refused_at_load(tmp_path):
    path = write(tmp_path, edit("persona: [a chef, a pilot]", "persona: []"))
    assert error_of(path) == f"{path}: scenarios.generate.dimensions.persona: needs at least 1 value"


def test_duplicate_model_ids(tmp_path):
    path = write(tmp_path, edit("  - id: local", "  - id: small"))
    assert error_of(path) == f"{path}: models: duplicate id small"


def test_duplicate_prompt_id_and_version(tmp_path):
    path = write(tmp_path, edit("    version: v2", "    version: v1"))
    assert error_of(path) == f"{path}: prompts: duplicate id@version tip@v1"


def test_duplicate_judge_ids(tmp_path):
    path = write(tmp_path, VALID.replace("limits:", "  - {id: j1, model: openai/x, rubric: r}\nlimits:"))
    assert error_of(path) == f"{path}: judges: duplicate id j1"


def test_duplicates_in_several_lists_are_all_reported(tmp_path):
    text = edit("    version: v2", "    version: v1", edit("  - id: local", "  - id: small"))
    path = write(tmp_path, text)
    assert error_of(path).splitlines() == [f"{path}: models: duplicate id small",
                                          f"{path}: prompts: duplicate id@version tip@v1"]


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


@pytest.mark.parametrize("value, got", [("a chef", "'a chef'"), ("3", "3"), ("null", "None")])
def test_dimension_of_wrong_shape(tmp_path, value, got):
    path = write(tmp_path, edit("persona: [a chef, a pilot]", f"persona: {value}"))
    assert error_of(path) == (f"{path}: scenarios.generate.dimensions.persona: expected a list of values or "
                              f"{{of: [...], size: [min, max]}} (got {got})")


@pytest.mark.parametrize("key", ["sk-proj-Abc123SECRETvalue456", "sk-ant-api03-SECRETvalue"])
def test_api_key_in_api_key_env_is_refused_and_not_echoed(tmp_path, key):
    message = error_of(write(tmp_path, edit("api_key_env: OLLAMA_KEY", f"api_key_env: {key}")))
    assert "models[1].api_key_env" in message and "environment variable" in message
    assert key not in message and "SECRET" not in message


@pytest.mark.parametrize("key", ["AIzaSyA1b2c3d4SECRET", "gsk_SECRETvalue", "hf_SECRETvalue", "skSECRETvalue",
                                 "pk_SECRET", "rk_SECRET", "A" * 60 + "SECRET"])
def test_key_looking_api_key_env_without_a_dash_is_refused(tmp_path, key):
    message = error_of(write(tmp_path, edit("api_key_env: OLLAMA_KEY", f"api_key_env: {key}")))
    assert "models[1].api_key_env: must be the name of an environment variable" in message
    assert "never a key" in message and "SECRET" not in message


def test_xai_key_in_api_key_env_is_refused(tmp_path):
    message = error_of(write(tmp_path, edit("api_key_env: OLLAMA_KEY", "api_key_env: xai-SECRETvalue")))
    assert "models[1].api_key_env" in message and "SECRET" not in message


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GOOGLE_API_KEY", "HF_TOKEN", "SK", "A" * 64])
def test_ordinary_variable_names_are_accepted(tmp_path, name):
    sweep, _ = load_sweep(write(tmp_path, edit("api_key_env: OLLAMA_KEY", f"api_key_env: {name}")))
    assert sweep.models[1].api_key_env == name


@pytest.mark.parametrize("name", ["api_key", "API_KEY", "Authorization", "token", "key", "api_base",
                                  "api_key_env"])
def test_secret_in_params_is_refused_and_not_echoed(tmp_path, name):
    path = write(tmp_path, edit("{temperature: 0.2, max_tokens: 64}",
                                f"{{temperature: 0.2, {name}: sk-SECRETvalue}}"))
    message = error_of(path)
    assert message == (f"{path}: models[0].params: {name} cannot go in params; name the key's variable in "
                       f"api_key_env (and the server in api_base)")
    assert "SECRET" not in message and "got" not in message


def test_secret_in_judge_params_is_refused(tmp_path):
    text = edit("    mode: rubric", "    mode: rubric\n    params: {api_key: AIzaSECRET}")
    message = error_of(write(tmp_path, text))
    assert "judges[0].params: api_key cannot go in params" in message and "SECRET" not in message


def test_api_key_env_in_a_judge_is_checked_too(tmp_path):
    text = edit("    mode: rubric", "    mode: rubric\n    api_key_env: sk-SECRETSECRET")
    message = error_of(write(tmp_path, text))
    assert "judges[0].api_key_env" in message and "SECRET" not in message


@pytest.mark.parametrize("template, words", [
    ("Hi {q", "expected '}' before end of string"),
    ("Hi q}", "Single '}'"),
    ("Hi {}", "{} has no field name"),
    ("Hi {0}", "{0} is a position"),
    ("Hi {a.b}", "{a.b} uses an attribute or index"),
    ("Hi {a[0]}", "{a[0]} uses an attribute or index"),
])
@pytest.mark.parametrize("role", ["system", "user"])
def test_malformed_template_is_refused_at_load(tmp_path, template, words, role):
    old = '    user: "Give one tip about {topic}."' if role == "user" else '    system: "You are {persona}."'
    path = write(tmp_path, edit(old, f'    {role}: "{template}"'))
    message = error_of(path)
    assert message.startswith(f"{path}: prompts[0].{role}: invalid template (")
    assert words in message
    assert message.endswith("); placeholders are {name}; write a literal brace as {{ or }}")


def test_literal_braces_format_specs_and_conversions_are_fine(tmp_path):
    path = write(tmp_path, edit('"Give one tip about {topic}."', '"Tip on {topic!r:>5}, as JSON {{\\"t\\": 1}}"'))
    sweep, _ = load_sweep(path)
    assert sweep.prompts[0].placeholders() == {"persona", "topic"}


def test_placeholders_never_raises_on_an_unvalidated_prompt():
    raw = PromptEntry.model_construct(id="p", version="v1", system="{a", user="{b} {c.d} }")
    assert raw.placeholders() == set()
    assert PromptEntry.model_construct(id="p", version="v1", system=None, user="{b} {c.d}").placeholders() == {
        "b", "c"}


def test_sweep_name_must_be_folder_safe(tmp_path):
    path = write(tmp_path, edit("name: demo", "name: my sweep/x"))
    message = error_of(path)
    assert message.startswith(f"{path}: name: must be a folder-safe name")
    assert "runs/<name>" in message


def test_model_id_must_be_a_label(tmp_path):
    message = error_of(write(tmp_path, edit("id: small", "id: 'gpt 4o'")))
    assert "models[0].id: must be 1–64 letters, digits, '.', '_' or '-'" in message


def test_several_errors_one_line_each(tmp_path):
    text = edit("samples: 2", "samples: many", edit("  max_concurrency: 4", "  max_concurency: 4"))
    message = error_of(write(tmp_path, text))
    assert len(message.splitlines()) == 2


# ----------------------------------------------------------------------------- the repo's own params files


@pytest.mark.parametrize("path", params_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_repo_params_files_load(path):
    sweep, resolved = load_sweep(path)
    assert resolved == path.resolve()
    assert sweep.cells() or sweep.is_pair_dataset, path

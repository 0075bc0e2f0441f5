"""Every known generation param is checked for its type: a list where the API takes one value is refused."""

from __future__ import annotations

import pytest

from bench.config.params import load_sweep
from bench.core.errors import ParamsError
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command


def test_a_list_for_a_one_value_param_is_refused_naming_file_entry_and_key(tmp_path, fake):
    entry = model("gpt-5", fake.url, params={"reasoning_effort": ["low", "high"]})
    path = grid(tmp_path / "g.yaml", fake.url, models=[entry])
    out = command(tmp_path, "validate", str(path))
    assert out.returncode == 2 and fake.stats()["requests"] == 0
    assert f"{path}: models[0]: params.reasoning_effort takes a string, not a list ['low', 'high']" in out.stderr
    assert "declare one entry per value (e.g. ids gpt-5-low and gpt-5-high" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("temperature", "0.2", "params.temperature takes a number, not a string '0.2'"),
    ("temperature", True, "params.temperature takes a number, not true"),
    ("max_tokens", 64.5, "params.max_tokens takes a whole number, not a number 64.5"),
    ("seed", [1, 2], "params.seed takes a whole number, not a list [1, 2]"),
    ("logprobs", "yes", "params.logprobs takes true or false, not a string 'yes'"),
    ("stop", {"a": 1}, "params.stop takes a string or a list, not a mapping"),
    ("response_format", "json", "params.response_format takes a mapping, not a string 'json'"),
    ("thinking", True, "params.thinking takes a mapping, not true"),
    ("logit_bias", [1], "params.logit_bias takes a mapping, not a list [1]"),
    ("extra_body", [1], "params.extra_body takes a mapping, not a list [1]"),
    ("top_p", None, "params.top_p takes a number, not null; remove the key"),
])
def test_every_known_param_is_type_checked_for_models_and_judges(tmp_path, name, value, expected):
    url = "http://127.0.0.1:9/v1"
    for axis, entry in (("models", model("m1", url, params={name: value})),
                        ("judges", judge("j", url, params={name: value}))):
        path = grid(tmp_path / f"{axis}.yaml", url, **{axis: [entry]})
        with pytest.raises(ParamsError) as info:
            load_sweep(path)
        assert f"{path}: {axis}[0]: {expected}" in str(info.value)


def test_values_of_the_right_type_pass(tmp_path):
    url = "http://127.0.0.1:9/v1"
    params = {"temperature": 0, "top_p": 0.9, "max_tokens": 64, "seed": 3, "stop": ["\n\n", "END"],
              "tool_choice": "auto", "response_format": {"type": "json_object"}, "logprobs": True,
              "reasoning_effort": "low", "extra_body": {"top_k": 5}, "some_provider_field": [1, 2]}
    sweep, _path = load_sweep(grid(tmp_path / "g.yaml", url, models=[model("m1", url, params=params),
                                                                      model("m2", url, params={"stop": "END"})]))
    assert sweep.models[0].params == params and sweep.models[1].params == {"stop": "END"}

"""``params.extra_headers`` is refused at load, naming the file, the key and what to do instead: it was sent
inside the JSON body (never as a header) and its values, often a gateway's key, were stored in the records."""

from __future__ import annotations

import pytest

from tests.config.test_params import VALID, edit, error_of, write

INSTEAD = "bench sends no HTTP headers from params"


@pytest.mark.parametrize("params", ["{extra_headers: {X-Api-Key: sk-SECRETvalue}}",
                                    "{temperature: 0, headers: {Authorization: Bearer SECRETvalue}}",
                                    "{extra_body: {extra_headers: {X-Api-Key: SECRETvalue}}}"])
def test_extra_headers_in_a_models_params_are_refused_and_not_echoed(tmp_path, params):
    path = write(tmp_path, edit("{temperature: 0.2, max_tokens: 64}", params))
    message = error_of(path)
    assert f"{path}: models[0].params: " in message and "headers cannot go in params" in message
    assert INSTEAD in message and "api_key_env" in message
    assert "SECRET" not in message


def test_extra_headers_in_a_judges_params_are_refused(tmp_path):
    text = edit("    mode: rubric", "    mode: rubric\n    params: {extra_headers: {X-Org: SECRETorg}}", VALID)
    message = error_of(write(tmp_path, text))
    assert "judges[0].params: extra_headers cannot go in params" in message and "SECRET" not in message

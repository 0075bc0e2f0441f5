"""A request's key from the seam's fed hashers is the key ``cache.request_key`` spells from all its parts."""

from __future__ import annotations

import pytest

from bench.core.records import canonical_json
from bench.models._json import messages_bytes
from bench.models._request_keys import KeyMaker, identity, sample_key, settings_of
from bench.models.cache import request_key
from bench.models.routing import ModelSpec, resolve

MESSAGES = [
    [{"role": "user", "content": "plain"}],
    [{"role": "system", "content": "é ü 中文 \U0001F600 \u2028"},
     {"role": "user", "content": "\x00\x1f\x7f\"\\/\n\t"}],
    [{"z": "1", "a": "2", "é": "3", "B": "4"}],  # keys sorted as canonical_json sorts them
    [{"role": "user", "content": [{"type": "text", "text": "parts"}]}],  # not flat: canonical_json itself
    [{"role": "user", "content": "x", "weight": 1e-05}],  # a float orjson would spell differently
    [{"role": "user", "content": "lone \udc80 surrogate"}],  # orjson refuses it: canonical_json
    [{1: "int key"}],
    [],
]


@pytest.mark.parametrize("messages", MESSAGES)
def test_messages_bytes_are_canonical_json(messages):
    assert messages_bytes(messages) == canonical_json(messages).encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("sample,attempt", [(0, 1), (3, 1), (0, 2), (2, 5)])
@pytest.mark.parametrize("params,response_format", [(None, None), ({"temperature": 0.5}, None),
                                                    (None, {"type": "json_object"})])
def test_key_maker_gives_the_key_of_all_parts(sample, attempt, params, response_format):
    keys = KeyMaker()
    for spec in (ModelSpec("openai/m", api_base="http://127.0.0.1:9", params={"max_tokens": 8}),
                 ModelSpec("openai/m", api_base="http://127.0.0.1:9", think_end="</t>")):
        route = resolve(spec)
        merged = {**spec.params, **params} if params else spec.params
        settings = settings_of(route, merged, params, response_format)
        for messages in MESSAGES:
            want = request_key(identity(route), spec.model, settings, sample_key(sample, attempt),
                               canonical_json(messages))
            assert keys.key(route, settings, sample, attempt, messages) == want
            assert keys.key(route, settings, sample, attempt, messages) == want  # from the memoized hasher too

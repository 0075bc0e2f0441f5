"""The `perf` extra changes the seam's cost, never its meaning: bodies, replies and cache entries read the same
with orjson as with the standard library, identities keep their spelling, and uvloop only runs the loop."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys

import pytest

from bench.core.records import canonical_json
from bench.models import _json
from bench.models.eventloop import loop_kind, run

BODIES = [
    {"model": "m", "messages": [{"role": "user", "content": "é ✓ 🙂 \x1f \u2028 \"q\" \\"}], "max_tokens": 16},
    {"model": "m", "messages": [], "logit_bias": {50256: -100, 7: 1.5}, "temperature": 0.0, "stop": None},
    {"model": "m", "messages": [{"role": "user", "content": "lone \udc80 surrogate"}], "seed": 2 ** 70},
]
REPLIES = [
    b'{"choices": [{"message": {"content": "hi \\u00e9"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}}',
    b'{"choices": [{"logprobs": {"content": [{"token": "a", "logprob": -Infinity}]}}], "x": NaN}',
    b'{"choices": [{"message": {"content": "bad \\udc80 escape"}}]}',
]
CACHED = [
    {"text": "t é", "usage": {"prompt_tokens": 3, "completion_tokens": 1, "cost_usd": None, "latency_s": 0.0123}},
    {"text": "t", "usage": {}, "logprobs": [["a", [["a", -math.inf], ["b", -0.5]]]]},
]


def _same(a, b) -> bool:
    """Equal as JSON values, NaN included (NaN != NaN in Python)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("body", BODIES)
def test_a_body_reads_as_the_standard_library_writes_it(body):
    assert json.loads(_json.body_bytes(body)) == json.loads(json.dumps(body))


@pytest.mark.parametrize("payload", REPLIES)
def test_a_reply_reads_as_the_standard_library_reads_it(payload):
    assert _same(_json.loads(payload), json.loads(payload))


def test_what_is_not_json_fails_as_the_standard_library_fails():
    with pytest.raises(ValueError):
        _json.loads(b"<html>bad gateway</html>")


@pytest.mark.parametrize("value", CACHED)
def test_a_cache_entry_reads_back_as_written(value):
    assert _same(json.loads(_json.cache_text(value)), value)


def test_identities_keep_the_standard_librarys_spelling():
    obj = {"b": [1e-05, 1e16, 0.1, -0.0, None, True], "a": "é\x1f", "c": {"z": 2 ** 70}}
    assert canonical_json(obj) == json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                              default=str)
    assert '"b":[1e-05,1e+16,0.1,-0.0,null,true]' in canonical_json(obj)


def test_the_event_loop_is_uvloops_where_it_is_installed():
    async def kind() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run(kind()).startswith("uvloop" if loop_kind() == "uvloop" else "asyncio")


def test_without_the_perf_extra_the_same_values_come_out():
    """orjson and uvloop blocked (as when the extra is not installed): the standard library gives the same."""
    code = (
        "import sys; sys.modules['orjson'] = None; sys.modules['uvloop'] = None\n"
        "import json\nfrom bench.models import _json\nfrom bench.models.eventloop import loop_kind, run\n"
        "assert _json.orjson is None and loop_kind() == 'asyncio'\n"
        "bodies, replies, cached = json.loads(sys.stdin.read())\n"
        "out = [[json.loads(_json.body_bytes(b)) for b in bodies], [_json.loads(r) for r in replies],\n"
        "       [json.loads(_json.cache_text(v)) for v in cached]]\n"
        "async def one(): return 1\n"
        "assert run(one()) == 1\n"
        "print(json.dumps(out))\n")
    plain = [BODIES[0], BODIES[1]], [r.decode() for r in REPLIES[:2]], [CACHED[0]]  # JSON-transportable ones
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(plain), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    bodies, replies, cached = json.loads(done.stdout)
    assert bodies == [json.loads(_json.body_bytes(b)) for b in plain[0]]
    assert _same(replies, [_json.loads(r) for r in plain[1]])
    assert cached == [CACHED[0]]

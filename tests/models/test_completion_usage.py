"""The seam's fast Usage constructor makes exactly what ``Usage.model_construct`` makes."""

from __future__ import annotations

import pytest

from bench.core.records import Usage
from bench.models._completion import reused, usage_of

CASES = [
    {},
    {"prompt_tokens": 12, "completion_tokens": 16, "cost_usd": 0.0001, "latency_s": 0.1, "attempts": 2,
     "finish_reason": "stop", "cached": False, "calls": 2, "cache_hits": 0, "over_limit": True, "estimated": True},
    {"prompt_tokens": None, "cost_usd": None, "paid_attempts": [{"completion_tokens": 3}], "batch_id": "b1"},
]


@pytest.mark.parametrize("values", CASES)
def test_usage_of_equals_model_construct(values):
    fast, slow = usage_of(values), Usage.model_construct(**values)
    assert fast == slow and fast.model_dump() == slow.model_dump() and repr(fast) == repr(slow)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)
    assert Usage.model_validate(fast.model_dump()) == fast  # it round-trips through a record
    with pytest.raises(Exception):
        fast.calls = 9  # frozen, like every Usage


def test_usage_of_drops_unknown_keys_like_model_construct_and_reused_marks_a_cache_hit():
    assert usage_of({"calls": 3, "not_a_field": 1}) == Usage.model_construct(calls=3)
    hit = reused({"prompt_tokens": 5, "completion_tokens": 7, "cost_usd": 0.5})
    assert (hit.cached, hit.calls, hit.cache_hits, hit.cost_usd) == (True, 0, 1, 0.5)
    assert usage_of({}) is not usage_of({}) and usage_of({}).__dict__ is not usage_of({}).__dict__


def test_completion_equals_the_dataclass_constructor():
    import dataclasses

    from bench.models._completion import Completion, completion

    args = ("an answer", usage_of({"prompt_tokens": 3}), {"choices": []}, "k" * 64, [["a", [["a", -0.1]]]],
            "thought", [{"id": "c1"}])
    fast, slow = completion(*args), Completion(*args)
    assert fast == slow and repr(fast) == repr(slow) and dataclasses.asdict(fast) == dataclasses.asdict(slow)
    assert dataclasses.replace(fast, text="other").text == "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.text = "changed"  # frozen, like the dataclass


def test_cache_entry_keeps_the_kept_usage_in_order():
    from bench.models._completion import KEPT, cache_entry, completion

    values = {"prompt_tokens": 3, "completion_tokens": 4, "cost_usd": 0.1, "latency_s": 0.2, "attempts": 2,
              "finish_reason": "stop", "calls": 2, "cache_hits": 0, "cached": False}
    comp = completion("t", usage_of(values), None, "k", None, "why", None)
    entry = cache_entry(comp)
    assert list(entry["usage"]) == list(KEPT)
    assert entry["usage"] == comp.usage.model_dump(include=set(KEPT)) and entry["reasoning"] == "why"
    assert "logprobs" not in entry and "tool_calls" not in entry

"""The fake provider's prompt cache (``prefix_cache``), as OpenAI's: a prefix seen before is reported cached from 1,024
tokens up in whole 128-token blocks, and billed at ``bill_per_mtok.cached_input``."""

from __future__ import annotations

import json

from tests.testing.test_fake_provider import post


def cached(fake, system: str, user: str) -> tuple[int, int]:
    status, _headers, raw = post(fake, {"model": "j", "messages": [{"role": "system", "content": system},
                                                                   {"role": "user", "content": user}]})
    assert status == 200
    usage = json.loads(raw)["usage"]
    return usage["prompt_tokens"], usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)


def test_a_prefix_seen_before_is_cached_from_1024_tokens_in_128_token_blocks(fake):
    fake.configure(prefix_cache=True, bill_per_mtok={"input": 2.0, "output": 8.0, "cached_input": 0.5})
    short, long_ = " ".join(f"s{i}" for i in range(1000)), " ".join(f"w{i}" for i in range(1500))
    assert cached(fake, short, "a")[1] == 0 and cached(fake, short, "b")[1] == 0  # under 1,024 tokens: never
    assert cached(fake, long_, "a") == (1501, 0)  # the first time: a miss
    assert cached(fake, long_, "b") == (1501, 1024 + 3 * 128)  # the whole blocks of the shared 1,501 words
    changed = " ".join(f"w{i}" if i < 1200 else "other" for i in range(1500))
    assert cached(fake, changed, "c")[1] == 1024 + 128  # the prefix up to word 1,200, in whole blocks
    billed = fake.stats()["billed"]
    assert billed["cached_tokens"] == 1408 + 1152
    uncached = billed["prompt_tokens"] - billed["cached_tokens"]
    assert abs(billed["usd"] - (uncached * 2.0 + billed["cached_tokens"] * 0.5
                                + billed["completion_tokens"] * 8.0) / 1e6) < 1e-12
    fake.configure(prefix_cache=False)
    assert cached(fake, long_, "d")[1] == 0  # off: nothing reported

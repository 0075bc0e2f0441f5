"""An image is never free before its reply says what it cost: the budget's worst case and the estimate of a reply
without usage count every ``image_url`` part at ``IMAGE_TOKENS`` (a bound above what the providers bill per
image), however it travels (a data URL's bytes are never counted as text). An image that cannot be read from the
run folder fails its call before anything is sent: its record counts no request."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest

from bench.core.errors import ProviderError
from bench.core.images import IMAGE_FOLDER
from bench.core.records import failed_usage
from bench.models.budget import Budget
from bench.models.client import LLM, Limits
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import IMAGE_TOKENS, bound_counter

URL = "https://example.org/chart.png"


def image_message(url: str, n: int = 1) -> list[dict]:
    parts = [{"type": "text", "text": "Describe the picture."}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for _ in range(n)]
    return [{"role": "user", "content": parts}]


def test_the_budgets_worst_case_counts_each_image_at_the_bound(tmp_path):
    route = resolve(ModelSpec("openai/gpt-4o", price=(2.5, 10.0)))
    budget = Budget(10.0, tmp_path)
    text = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Describe the picture."}], "max_tokens": 10}
    big = "data:image/png;base64," + base64.b64encode(os.urandom(300_000)).decode()
    one, two = ({**text, "messages": image_message(big, n)} for n in (1, 2))
    per_image = 2.5e-6 * IMAGE_TOKENS
    assert budget.worst_case(route, one) == pytest.approx(budget.worst_case(route, text) + per_image)
    assert budget.worst_case(route, two) == pytest.approx(budget.worst_case(route, text) + 2 * per_image)
    counter = bound_counter(route)
    assert counter.messages(image_message(URL)) == counter.messages(image_message(big)), "never the URL's text"


def test_a_reply_without_usage_counts_its_images_at_the_bound(fake):
    fake.configure(omit_usage=True)
    spec = ModelSpec("openai/seer", api_base=fake.url, price=(1.0, 2.0))

    async def go():
        llm = LLM(Limits(retries=0, timeout_s=10), cache=None)
        try:
            return [await llm.complete(spec, m) for m in (image_message(URL, 0), image_message(URL, 2))]
        finally:
            await llm.aclose()
    plain, seen = asyncio.run(go())
    assert plain.usage.estimated and seen.usage.estimated
    assert seen.usage.prompt_tokens == plain.usage.prompt_tokens + 2 * IMAGE_TOKENS
    assert fake.stats()["images"] == {f"url:{URL}": 2}


def test_an_image_missing_from_the_run_folder_fails_with_no_request_counted(tmp_path, fake):
    llm = LLM(Limits(retries=2))
    llm.image_folder = tmp_path / IMAGE_FOLDER  # empty: the run's images were never stored
    messages = image_message(f"images/{'0' * 64}.png")

    async def ask() -> None:
        try:
            await llm.complete(ModelSpec("openai/fake", api_base=fake.url), messages)
        finally:
            await llm.aclose()

    with pytest.raises(ProviderError) as err:
        asyncio.run(ask())
    assert err.value.kind == "image" and fake.stats()["requests"] == 0
    usage = failed_usage(err.value)
    assert (usage.calls, usage.attempts) == (0, 0), "nothing was sent: its record counts no call"
